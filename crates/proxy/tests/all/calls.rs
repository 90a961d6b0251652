//! `mcp({tool, args})`: resolution, validation before sending, rendering, the output guard, categorized failures and
//! bad input. Includes the behaviours published peers get wrong.

use pimcp_config::LoadOptions;
use rmcp::model::ContentBlock;
use serde_json::json;

use super::support::*;

fn one_server() -> serde_json::Value {
    json!({ "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_before_the_catalog_is_known_connects_and_text_stays_text() {
    let env = start(one_server()).await;
    // No cache, never connected: the call connects, waits for discovery and runs (never "tool not found").
    let r = env
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "{\"a\": 1} and \"quotes\"" } }))
        .await;
    assert_ok(&r);
    assert_eq!(
        r.text(),
        "{\"a\": 1} and \"quotes\"",
        "text is passed as text, never JSON-quoted"
    );
    assert_eq!(r.category, None);
    // The original name, `-`/`_` fuzz and a JSON-string `args` resolve too.
    let r = env
        .mcp(json!({ "tool": "echo", "args": "{\"text\": \"by original\"}" }))
        .await;
    assert_eq!(r.text(), "by original");
    let r = env.mcp(json!({ "tool": "fx-echo", "args": { "text": "fuzzy" } })).await;
    assert_eq!(r.text(), "fuzzy");
    let r = env
        .mcp(json!({ "tool": "add", "server": "fx", "args": { "a": 2, "b": 40 } }))
        .await;
    assert!(r.text().starts_with("42"), "{}", r.text());
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_content_stays_on_the_result_besides_its_text_copy() {
    let env = start(one_server()).await;
    let r = env.mcp(json!({ "tool": "fx_add", "args": { "a": 1, "b": 2 } })).await;
    assert_ok(&r);
    assert_eq!(r.result.structured_content, Some(json!({ "sum": 3 })));
    assert_eq!(
        r.text(),
        "3\nstructuredContent:\n{\n  \"sum\": 3\n}",
        "the model still reads it as text"
    );
    env.shutdown().await;

    // When the guard cuts the text, the value is not forwarded whole: the host gets the bounded text and the file.
    let env = start(json!({
        "settings": { "outputGuard": { "maxLines": 2 } },
        "mcpServers": { "fx": stdio(&[]) },
    }))
    .await;
    let r = env.mcp(json!({ "tool": "fx_add", "args": { "a": 1, "b": 2 } })).await;
    assert_ok(&r);
    assert!(r.guard.as_ref().is_some_and(|g| g.truncated), "{:?}", r.guard);
    assert_eq!(r.result.structured_content, None);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_stay_errors_and_images_pass_through() {
    let env = start(one_server()).await;
    let r = env
        .mcp(json!({ "tool": "fx_fail", "args": { "message": "disk on fire" } }))
        .await;
    assert_error(&r, "tool-error");
    assert!(r.text().starts_with("disk on fire"), "{}", r.text());

    let r = env.mcp(json!({ "tool": "fx_image" })).await;
    assert_ok(&r);
    let image = r
        .result
        .content
        .iter()
        .find_map(|c| match c {
            ContentBlock::Image(i) => Some(i.clone()),
            _ => None,
        })
        .expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert!(!image.data.is_empty());

    let r = env.mcp(json!({ "tool": "fx_mixed" })).await;
    let text = r.text();
    assert!(text.contains("[Resource: fixture://readme]"), "{text}");
    assert!(text.contains("[Resource link: "), "{text}");
    // A resource exposed as a tool reads it.
    let r = env.mcp(json!({ "tool": "fx_read_config_json" })).await;
    assert_ok(&r);
    assert!(r.text().contains("mcp-fixture"), "{}", r.text());
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_validated_before_anything_is_sent() {
    let env = start(one_server()).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let r = env.mcp(json!({ "tool": "fx_echo", "args": {} })).await;
    assert_error(&r, "validation");
    assert!(r.text().contains("expected parameters: {text: string}"), "{}", r.text());
    let r = env
        .mcp(json!({ "tool": "fx_add", "args": { "a": "two", "b": 1 } }))
        .await;
    assert_error(&r, "validation");
    assert_eq!(
        count_events(&env.path("fx.log"), "call", None),
        0,
        "nothing reached the server"
    );
    env.shutdown().await;
}

/// On a server known only from the cache, the first call's validator is compiled while the server starts: invalid
/// arguments still fail with the same validation message, nothing reaches the server, and the next valid call uses
/// the connection that was started (one process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_server_starts_while_the_first_call_is_validated() {
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let invalid = json!({ "tool": "fx_echo", "args": { "text": 5 } });
    let env = start_in(dir.clone(), one_server()).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let connected = env.mcp(invalid.clone()).await;
    assert_error(&connected, "validation");
    env.shutdown().await;
    assert_eq!(count_events(&dir.path().join("fx.log"), "start", None), 1);
    // The cache is written in the background after discovery.
    let cache = dir.path().join("agent").join("pimcp").join("cache.json");
    wait_until("the metadata cache", std::time::Duration::from_secs(10), || {
        std::fs::read_to_string(&cache).is_ok_and(|c| c.contains("echo"))
    })
    .await;

    // Second run: the metadata comes from the cache and the server is not running.
    let env = start_in(dir.clone(), one_server()).await;
    let status = env.mcp(json!({})).await.text();
    assert!(status.contains(", cached"), "{status}");
    let r = env.mcp(invalid).await;
    assert_error(&r, "validation");
    assert_eq!(
        r.text(),
        connected.text(),
        "the same message as against a connected server"
    );
    let log = env.path("fx.log");
    wait_until("the lazy server to start", std::time::Duration::from_secs(10), || {
        count_events(&log, "start", None) == 2
    })
    .await;
    let r = env.mcp(json!({ "tool": "fx_echo", "args": { "text": "after" } })).await;
    assert_ok(&r);
    assert_eq!(r.text(), "after");
    assert_eq!(
        count_events(&log, "start", None),
        2,
        "the call used the connection already started"
    );
    assert_eq!(
        count_events(&log, "call", None),
        1,
        "the invalid call never reached the server"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_mcp_input_is_a_validation_result() {
    let env = start(one_server()).await;
    let cases = [
        (json!({ "tool": "fx_echo", "args": "{not json" }), "not valid JSON"),
        (
            json!({ "tool": "fx_echo", "args": [1, 2] }),
            "must be a JSON object, got an array",
        ),
        (json!({ "tool": "fx_echo", "args": "[1]" }), "the string holds an array"),
        (
            json!({ "args": { "tool": "fx_echo", "args": { "text": "x" } } }),
            "nested inside `args`",
        ),
        (
            json!({ "tool": "fx_echo", "args": { "tool": "fx_echo", "args": { "text": "x" } } }),
            "holds mcp parameters",
        ),
        (json!({ "tool": 7 }), "must be a string"),
        (json!({ "query": "echo" }), "did you mean `search`"),
        (json!({ "search": "echo", "offset": -3 }), "must be 0 or more"),
        (
            json!({ "action": "install", "server": "fx" }),
            "must be auth-start or auth-complete",
        ),
    ];
    for (input, expected) in cases {
        let r = env.mcp(input.clone()).await;
        assert_error(&r, "validation");
        assert!(r.text().contains(expected), "{input}: {}", r.text());
    }
    assert_eq!(count_events(&env.path("fx.log"), "call", None), 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_ambiguous_tools() {
    let env = start(json!({ "mcpServers": {
        "fx": stdio(&[]),
        "fy": stdio(&[]),
    }}))
    .await;
    let r = env.mcp(json!({ "tool": "fx_ecoh", "args": { "text": "x" } })).await;
    assert_error(&r, "unknown-tool");
    assert!(r.text().contains("Did you mean: fx_echo"), "{}", r.text());
    assert!(r.text().contains("Server \"fx\" has: fx_echo"), "{}", r.text());
    // Once both catalogs are known, the original name `echo` is ambiguous.
    env.mcp(json!({ "connect": "fy" })).await;
    let r = env.mcp(json!({ "tool": "echo", "args": { "text": "x" } })).await;
    assert!(r.is_error(), "{}", r.text());
    assert!(
        r.text().contains("fx_echo") && r.text().contains("fy_echo"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("Pass `server`"), "{}", r.text());
    let r = env
        .mcp(json!({ "tool": "echo", "server": "fy", "args": { "text": "scoped" } }))
        .await;
    assert_eq!(r.text(), "scoped");
    let r = env.mcp(json!({ "tool": "echo", "server": "nope" })).await;
    assert_error(&r, "config");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_failed_and_untrusted_servers_say_why() {
    let env = start(json!({ "mcpServers": {
        "off": { "command": fixture(), "disabled": true },
        "dead": stdio(&["--exit-at-start"]),
    }}))
    .await;
    let r = env.mcp(json!({ "tool": "off_echo", "args": { "text": "x" } })).await;
    assert_error(&r, "config");
    assert!(r.text().contains("disabled"), "{}", r.text());
    let r = env.mcp(json!({ "tool": "dead_echo", "args": { "text": "x" } })).await;
    assert_error(&r, "connection");
    let status = env.mcp(json!({})).await.text();
    assert!(
        status.contains("dead: backoff") || status.contains("dead: failed"),
        "{status}"
    );
    env.shutdown().await;

    // A project file that is not trusted.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".mcp.json"),
        json!({ "mcpServers": { "proj": stdio(&[]) } }).to_string(),
    )
    .unwrap();
    let cfg = pimcp_config::load(&LoadOptions::new(dir.path().join("home"), dir.path()));
    let mut opts = pimcp_actors::RuntimeOptions::new(cfg.clone(), dir.path().join("agent"), dir.path().join("data"));
    opts.tuning = tuning();
    let rt = pimcp_actors::Runtime::start(opts).await.unwrap();
    let proxy = pimcp_proxy::Proxy::new(rt.handle(), &cfg).unwrap();
    let r = proxy
        .handle_arguments(
            Some(&json!({ "tool": "proj_echo", "args": { "text": "x" } })),
            &pimcp_proxy::CallContext::default(),
        )
        .await;
    assert_error(&r, "untrusted");
    assert!(r.text().contains("pimcp-run trust"), "{}", r.text());
    let status = proxy
        .handle_arguments(None, &pimcp_proxy::CallContext::default())
        .await
        .text();
    assert!(status.contains("⊗ proj: untrusted"), "{status}");
    rt.shutdown(std::time::Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_mebibytes_of_output_are_guarded_and_spilled() {
    let env = start(one_server()).await;
    let bytes = 10 * 1024 * 1024;
    let r = env.mcp(json!({ "tool": "fx_huge", "args": { "bytes": bytes } })).await;
    assert_ok(&r);
    let text = r.text();
    assert!(
        text.len() <= 50 * 1024,
        "inline text stays within the guard: {}",
        text.len()
    );
    assert!(text.starts_with("00000000 "), "the head is kept");
    let guard = r.guard.clone().unwrap();
    assert!(guard.truncated);
    assert_eq!(guard.original_bytes, bytes);
    let path = guard.full_output.unwrap();
    assert!(
        text.contains(&format!("full output: {}", path.display())),
        "marker names the file"
    );
    assert!(text.contains("[… omitted "), "{}", &text[..200]);
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len() as usize, bytes);
    assert_eq!(
        pimcp_config::private_fs::permission_bits(&meta) & 0o777,
        if cfg!(unix) { 0o600 } else { 0o644 }
    );
    assert!(path.starts_with(env.proxy.spill_dir()));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_fails_closed_without_a_way_to_ask() {
    let env = start(json!({
        "settings": { "approveTools": ["echo"] },
        "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) },
    }))
    .await;
    let r = env.mcp(json!({ "tool": "fx_echo", "args": { "text": "x" } })).await;
    assert_error(&r, "approval");
    assert!(r.text().contains("requires approval"), "{}", r.text());
    assert_eq!(count_events(&env.path("fx.log"), "call", Some("echo")), 0);
    // Tools the globs do not name run.
    let r = env.mcp(json!({ "tool": "fx_add", "args": { "a": 1, "b": 2 } })).await;
    assert_ok(&r);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_and_describe_mark_the_tools_that_need_approval() {
    let env = start(json!({
        "settings": { "approveTools": ["ec*"] },
        "mcpServers": { "fx": stdio(&[]) },
    }))
    .await;
    env.mcp(json!({ "connect": "fx" })).await;
    let r = env.mcp(json!({ "search": "echo" })).await;
    assert_ok(&r);
    let text = r.text();
    assert!(text.contains("\nfx_echo [needs approval] — "), "{text}");
    let r = env.mcp(json!({ "search": "fx_add" })).await;
    let text = r.text();
    assert!(
        text.contains("\nfx_add — "),
        "tools the globs do not name are not marked: {text}"
    );
    assert!(!text.contains("fx_add [needs approval]"), "{text}");
    let r = env.mcp(json!({ "describe": "fx_echo" })).await;
    assert!(r.text().contains(pimcp_proxy::APPROVAL_NOTE), "{}", r.text());
    let r = env.mcp(json!({ "describe": "fx_add" })).await;
    assert!(!r.text().contains(pimcp_proxy::APPROVAL_NOTE), "{}", r.text());

    // The server's own rule wins over the global one, and a reload re-marks the results.
    let mut fx = stdio(&[]);
    fx["approveTools"] = json!(["add"]);
    let next = load(
        &json!({ "settings": { "approveTools": ["ec*"] }, "mcpServers": { "fx": fx } }),
        env.dir.path(),
    );
    env.proxy.reconfigure(next).await.unwrap();
    let echo = env.proxy.search(&pimcp_proxy::SearchQuery::new("fx_echo")).unwrap();
    assert_eq!(echo.hits[0].doc.name, "fx_echo");
    assert!(!echo.hits[0].doc.needs_approval, "{}", echo.text());
    let add = env.proxy.search(&pimcp_proxy::SearchQuery::new("fx_add")).unwrap();
    assert_eq!(add.hits[0].doc.name, "fx_add");
    assert!(add.hits[0].doc.needs_approval, "{}", add.text());
    assert!(add.text().contains("fx_add [needs approval]"), "{}", add.text());
    env.shutdown().await;
}

/// A tool the server runs as a task (the tasks extension): within the call's time the model gets the result; past
/// it, a timeout naming the task and how to follow it, and `mcp({task})` returns the result once it is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_followed_and_one_past_the_timeout_is_handed_to_the_model() {
    let env = start(json!({ "mcpServers": { "fx": {
        "command": fixture(), "args": ["--task-calls"], "toolTimeout": 1,
    }}}))
    .await;
    let quick = env.mcp(json!({ "tool": "fx_slow", "args": { "ms": 200 } })).await;
    assert_eq!(quick.category, None, "{}", quick.text());
    assert_eq!(quick.text(), "slept 200 ms as a task");

    let slow = env.mcp(json!({ "tool": "fx_slow", "args": { "ms": 3000 } })).await;
    assert_eq!(slow.category, Some(pimcp_proxy::Category::Timeout), "{}", slow.text());
    let text = slow.text();
    let handle = text
        .split("mcp({task: \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no task handle in: {text}"));
    assert!(handle.starts_with("fx_slow:"), "{handle}");
    // Each follow waits up to the tool timeout (1 s) again, and says the same while the task runs.
    let mut followed = env.mcp(json!({ "task": handle })).await;
    for _ in 0..20 {
        if followed.category.is_none() {
            break;
        }
        assert!(followed.text().contains(handle), "{}", followed.text());
        followed = env.mcp(json!({ "task": handle })).await;
    }
    assert_eq!(followed.category, None, "{}", followed.text());
    assert_eq!(followed.text(), "slept 3000 ms as a task");

    let bad = env.mcp(json!({ "task": "no-handle" })).await;
    assert_eq!(bad.category, Some(pimcp_proxy::Category::Validation), "{}", bad.text());
    env.shutdown().await;
}
