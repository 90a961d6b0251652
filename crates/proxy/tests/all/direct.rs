//! Direct tools: registered from the metadata cache without connecting (on a fresh install, discovered in the
//! background at start), called like `mcp` calls, per-tool `toolExposure`, and the host told with
//! `notifications/tools/list_changed` when the surface changes (a frozen surface: only on deliberate refreshes).

use std::sync::Arc;

use serde_json::json;

use super::support::*;

fn config(settings: serde_json::Value, fx: serde_json::Value) -> serde_json::Value {
    let mut fx_entry = stdio(&["--event-log", "{dir}/fx.log"]);
    if let (Some(entry), Some(extra)) = (fx_entry.as_object_mut(), fx.as_object()) {
        entry.extend(extra.clone());
    }
    json!({ "settings": settings, "mcpServers": { "fx": fx_entry } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_tools_come_from_the_cache_without_connecting() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    // First run fills the metadata cache.
    let env = start_in(dir.clone(), config(json!({}), json!({}))).await;
    env.mcp(json!({ "connect": "fx" })).await;
    env.shutdown().await;
    let starts = count_events(&dir.path().join("fx.log"), "start", None);

    let env = start_in(dir.clone(), config(json!({}), json!({ "directTools": true }))).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let names = session.tool_names().await;
    assert_eq!(names[0], "mcp");
    for expected in ["fx_echo", "fx_add", "fx_read_readme", "fx_read_logo_png"] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    assert_eq!(
        count_events(&env.path("fx.log"), "start", None),
        starts,
        "registering direct tools must not connect"
    );
    let tools = session.client.list_all_tools().await.unwrap();
    let echo = tools.iter().find(|t| t.name == "fx_echo").unwrap();
    assert!(echo.input_schema.contains_key("properties"));
    assert!(echo.output_schema.is_none());
    assert_eq!(echo.title.as_deref(), Some("Echo"));
    assert_eq!(echo.annotations.as_ref().and_then(|a| a.read_only_hint), Some(true));

    // Calling a direct tool connects lazily and renders like the proxy does.
    let r = session.call("fx_echo", json!({ "text": "direct" })).await;
    assert_eq!(text_of(&r), "direct");
    let r = session.call("fx_echo", json!({})).await;
    assert_eq!(category_of(&r).as_deref(), Some("validation"));
    let r = session.call("fx_fail", json!({ "message": "nope" })).await;
    assert_eq!(category_of(&r).as_deref(), Some("tool-error"));
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_direct_tools_disabled_proxy_and_no_resources() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let env = start_in(dir.clone(), config(json!({}), json!({}))).await;
    env.mcp(json!({ "connect": "fx" })).await;
    env.shutdown().await;

    let env = start_in(
        dir.clone(),
        config(
            json!({ "directTools": ["echo", "read_readme"], "disableProxyTool": true }),
            json!({}),
        ),
    )
    .await;
    let session = connect(env.server(), TestHost::plain()).await;
    assert_eq!(session.tool_names().await, ["fx_echo", "fx_read_readme"]);
    let r = session.call("mcp", json!({})).await;
    assert_eq!(category_of(&r).as_deref(), Some("unknown-tool"), "{}", text_of(&r));
    session.client.cancel().await.unwrap();
    env.shutdown().await;

    // `exposeResources` is part of the cache identity: connect once so this config has metadata.
    let env = start_in(
        dir,
        config(json!({}), json!({ "directTools": true, "exposeResources": false })),
    )
    .await;
    env.mcp(json!({ "connect": "fx" })).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let names = session.tool_names().await;
    assert!(names.iter().any(|n| n == "fx_echo"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("fx_read_")), "{names:?}");
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_install_discovers_direct_tool_servers_at_start_and_announces_their_tools() {
    let mut fx = stdio(&["--event-log", "{dir}/fx.log", "--hold-tools-list", "{dir}/hold"]);
    fx["directTools"] = json!(true);
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let hold = dir.path().join("hold");
    std::fs::write(&hold, "").unwrap();
    let env = start_in(dir, json!({ "mcpServers": { "fx": fx } })).await;
    // The held tools/list keeps the start-up discovery from finishing before the host has initialized.
    let session = connect(env.server(), TestHost::plain()).await;
    assert_eq!(session.tool_names().await, ["mcp", "mcpScript"], "nothing cached yet");
    let probe = session.probe.clone();
    std::fs::remove_file(&hold).unwrap();
    wait_until("tools/list_changed after the start-up discovery", DEADLINE, || {
        Probe::n(&probe.tools_changed) >= 1
    })
    .await;
    let names = session.tool_names().await;
    assert!(names.iter().any(|n| n == "fx_echo"), "{names:?}");
    // Nobody asked for fx: pimcp connected it once, by itself.
    assert_eq!(count_events(&env.path("fx.log"), "start", None), 1);
    let r = session.call("fx_echo", json!({ "text": "first session" })).await;
    assert_eq!(text_of(&r), "first session");
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_is_told_when_the_direct_surface_changes() {
    // No start-up discovery: the connect below is what fills the surface.
    let env = start(config(json!({ "discoveryTimeout": 0 }), json!({ "directTools": true }))).await;
    let session = connect(env.server(), TestHost::plain()).await;
    assert_eq!(session.tool_names().await, ["mcp", "mcpScript"], "nothing cached yet");
    let probe = session.probe.clone();

    session.mcp(json!({ "connect": "fx" })).await;
    wait_until("tools/list_changed after discovery", DEADLINE, || {
        Probe::n(&probe.tools_changed) >= 1
    })
    .await;
    assert!(session.tool_names().await.iter().any(|n| n == "fx_echo"));
    wait_until("prompts/list_changed after discovery", DEADLINE, || {
        Probe::n(&probe.prompts_changed) >= 1
    })
    .await;

    // An upstream list_changed that adds a tool reaches the host as a new direct tool.
    let seen = Probe::n(&probe.tools_changed);
    let r = session.call("fx_add_tool", json!({ "name": "brand_new" })).await;
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    wait_until("tools/list_changed after the upstream change", DEADLINE, || {
        Probe::n(&probe.tools_changed) > seen
    })
    .await;
    assert!(session.tool_names().await.iter().any(|n| n == "fx_brand_new"));
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_surface_changes_only_on_deliberate_refreshes() {
    let mut other = stdio(&["--name", "other"]);
    other["directTools"] = json!(false);
    let mut cfg = config(
        json!({ "freezeDirectTools": true, "discoveryTimeout": 0 }),
        json!({ "directTools": true }),
    );
    cfg["mcpServers"]["other"] = other;
    let env = start(cfg).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let info = session.client.peer().peer_info().unwrap();
    assert_eq!(
        info.capabilities.tools.clone().unwrap().list_changed,
        Some(true),
        "deliberate refreshes are announced"
    );
    let probe = session.probe.clone();
    assert_eq!(session.tool_names().await, ["mcp", "mcpScript"]);

    // A deliberate connect updates the frozen surface.
    session.mcp(json!({ "connect": "fx" })).await;
    wait_until("tools/list_changed after mcp({connect})", DEADLINE, || {
        Probe::n(&probe.tools_changed) >= 1
    })
    .await;
    assert!(session.tool_names().await.iter().any(|n| n == "fx_echo"));
    let announced = Probe::n(&probe.tools_changed);

    // An upstream change does not, once pimcp has seen it: connecting `other` (not deliberately; its prompts are
    // not frozen) makes the watcher run again with fx_brand_new in the catalog.
    let r = session.call("fx_add_tool", json!({ "name": "brand_new" })).await;
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    wait_until("fx_brand_new in the catalog", DEADLINE, || {
        env.proxy.runtime().catalog().get("fx_brand_new").is_some()
    })
    .await;
    let prompts_seen = Probe::n(&probe.prompts_changed);
    env.proxy.runtime().connect("other").await.unwrap();
    wait_until("prompts/list_changed after other connected", DEADLINE, || {
        Probe::n(&probe.prompts_changed) > prompts_seen
    })
    .await;
    let names = session.tool_names().await;
    assert!(!names.iter().any(|n| n == "fx_brand_new"), "frozen: {names:?}");
    assert_eq!(Probe::n(&probe.tools_changed), announced);

    // The next deliberate refresh takes it in: a configuration reload (the same file; fx keeps running, with the
    // tool it added).
    env.proxy.reconfigure(env.config.clone()).await.unwrap();
    wait_until("tools/list_changed after the reload", DEADLINE, || {
        Probe::n(&probe.tools_changed) > announced
    })
    .await;
    assert!(session.tool_names().await.iter().any(|n| n == "fx_brand_new"));
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_exposure_makes_single_tools_proxy_only() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let env = start_in(dir.clone(), config(json!({}), json!({}))).await;
    env.mcp(json!({ "connect": "fx" })).await;
    env.shutdown().await;

    // An exact name wins over patterns; among patterns the first match wins.
    let env = start_in(
        dir.clone(),
        config(
            json!({}),
            json!({ "directTools": true, "toolExposure": { "a*": "hidden", "add": "direct", "e*": "hidden", "ec*": "direct" } }),
        ),
    )
    .await;
    let session = connect(env.server(), TestHost::plain()).await;
    let names = session.tool_names().await;
    assert!(names.iter().any(|n| n == "fx_add"), "exact name wins: {names:?}");
    assert!(
        !names.iter().any(|n| n == "fx_echo"),
        "first matching pattern wins: {names:?}"
    );
    assert!(
        names.iter().any(|n| n == "fx_fail"),
        "no entry: the server's exposure: {names:?}"
    );
    // Proxy-only tools are still reached through mcp.
    let r = env
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "via mcp" } }))
        .await;
    assert_eq!(r.text(), "via mcp");
    session.client.cancel().await.unwrap();
    env.shutdown().await;

    // `exposure: "hidden"`: only the tools listed with another mode are direct.
    let env = start_in(
        dir,
        config(
            json!({}),
            json!({ "directTools": true, "exposure": "hidden", "toolExposure": { "echo": "direct" } }),
        ),
    )
    .await;
    let session = connect(env.server(), TestHost::plain()).await;
    assert_eq!(session.tool_names().await, ["mcp", "mcpScript", "fx_echo"]);
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_direct_tools_overrides_the_config() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let env = start_env(
        dir,
        config(json!({ "directTools": true }), json!({})),
        &[("MCP_DIRECT_TOOLS", "fx/echo")],
    )
    .await;
    env.mcp(json!({ "connect": "fx" })).await;
    let session = connect(env.server(), TestHost::plain()).await;
    assert_eq!(session.tool_names().await, ["mcp", "mcpScript", "fx_echo"]);
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_tools_keep_output_schema_and_meta_and_app_only_tools_stay_with_the_app() {
    let mut fx = stdio(&["--app-tools"]);
    fx["directTools"] = json!(true);
    let env = start(json!({ "settings": { "discoveryTimeout": 0 }, "mcpServers": { "fx": fx } })).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let tools = session.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(!names.contains(&"fx_open_panel"), "app-only: {names:?}");
    let data = tools.iter().find(|t| t.name == "fx_panel_data").unwrap();
    let meta = data.meta.as_ref().expect("the upstream _meta");
    assert_eq!(meta.0["ui"]["resourceUri"], "ui://fixture/panel");

    // The output schema is passed on, and the result carries the structured value it describes.
    let add = tools.iter().find(|t| t.name == "fx_add").unwrap();
    assert!(add.output_schema.as_ref().is_some_and(|s| s.contains_key("properties")));
    let r = session.call("fx_add", json!({ "a": 2, "b": 3 })).await;
    assert_eq!(r.structured_content, Some(json!({ "sum": 5 })), "{}", text_of(&r));

    // The model's search does not offer the app-only tool either.
    let text = env.mcp(json!({ "search": "panel" })).await.text();
    assert!(text.contains("fx_panel_data"), "{text}");
    assert!(!text.contains("fx_open_panel"), "{text}");
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}
