//! Server→client requests of upstream servers forwarded to the host of `pimcp-run` (sampling, elicitation, roots),
//! `input-required` when the host cannot answer, and approvals asked through host elicitation.

use serde_json::json;

use super::support::*;

fn one_server(settings: serde_json::Value) -> serde_json::Value {
    json!({ "settings": settings, "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_elicitation_and_roots_reach_a_capable_host() {
    let env = start(one_server(json!({}))).await;
    let session = connect(env.server(), TestHost::capable()).await;
    let probe = session.probe.clone();

    let r = session
        .mcp(json!({ "tool": "fx_sample", "args": { "prompt": "2+2?" } }))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    assert!(text_of(&r).contains("host-model"), "{}", text_of(&r));
    assert!(text_of(&r).contains("sampled by the host"), "{}", text_of(&r));
    assert_eq!(Probe::n(&probe.sampled), 1);

    let r = session
        .mcp(json!({ "tool": "fx_elicit", "args": { "message": "Who are you?" } }))
        .await;
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    assert!(text_of(&r).contains("Ada"), "{}", text_of(&r));
    let asked = probe.elicitations.lock().unwrap().clone();
    assert_eq!(asked, ["[fx] Who are you?"], "the host sees which server asks");

    let r = session.mcp(json!({ "tool": "fx_roots" })).await;
    assert!(text_of(&r).contains("file:///host/project"), "{}", text_of(&r));
    assert!(Probe::n(&probe.roots_asked) >= 1);
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_the_capability_gets_input_required() {
    let env = start(one_server(json!({}))).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let r = session
        .mcp(json!({ "tool": "fx_sample", "args": { "prompt": "2+2?" } }))
        .await;
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(category_of(&r).as_deref(), Some("input-required"), "{}", text_of(&r));
    assert!(text_of(&r).contains("did not declare"), "{}", text_of(&r));
    // Roots answer an empty list rather than failing.
    let r = session.mcp(json!({ "tool": "fx_roots" })).await;
    assert!(text_of(&r).contains("\"roots\":[]"), "{}", text_of(&r));
    assert_eq!(Probe::n(&session.probe.sampled), 0);
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_asked_through_host_elicitation() {
    let env = start(one_server(json!({ "approveTools": ["echo"] }))).await;
    let log = env.path("fx.log");
    let session = connect(env.server(), TestHost::capable()).await;
    let probe = session.probe.clone();

    *probe.approval.lock().unwrap() = Some("deny".into());
    let r = session.mcp(json!({ "tool": "fx_echo", "args": { "text": "x" } })).await;
    assert_eq!(category_of(&r).as_deref(), Some("approval"), "{}", text_of(&r));
    assert!(text_of(&r).contains("declined"), "{}", text_of(&r));
    assert_eq!(count_events(&log, "call", Some("echo")), 0);
    let asked = probe.elicitations.lock().unwrap().clone();
    assert!(
        asked[0].starts_with("MCP server `fx` wants to run tool `echo`."),
        "{asked:?}"
    );
    assert!(asked[0].contains("\"text\":\"x\""), "{asked:?}");

    *probe.approval.lock().unwrap() = Some("allow_once".into());
    let r = session
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "once" } }))
        .await;
    assert_eq!(text_of(&r), "once");

    *probe.approval.lock().unwrap() = Some("allow_for_session".into());
    let r = session
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "session" } }))
        .await;
    assert_eq!(text_of(&r), "session");
    *probe.approval.lock().unwrap() = None;
    let asked_before = probe.elicitations.lock().unwrap().len();
    let r = session
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "remembered" } }))
        .await;
    assert_eq!(text_of(&r), "remembered");
    assert_eq!(
        probe.elicitations.lock().unwrap().len(),
        asked_before,
        "allowed for the session"
    );
    session.client.cancel().await.unwrap();
    env.shutdown().await;

    // A host without elicitation cannot be asked: the call fails closed.
    let env = start(one_server(json!({ "approveTools": true }))).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let r = session.mcp(json!({ "tool": "fx_echo", "args": { "text": "x" } })).await;
    assert_eq!(category_of(&r).as_deref(), Some("approval"), "{}", text_of(&r));
    assert_eq!(count_events(&env.path("fx.log"), "call", Some("echo")), 0);
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}
