//! Hot reload of the watched config file, without any signal: editing one server's args restarts only
//! that server while a call on another server completes; an invalid file keeps the running setup, and the refusal
//! is visible in `mcp({})` and `GET /status` until the file is fixed. The stdio entry point reloads too.

use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::support::*;

fn two_servers(b_args: &[&str]) -> Value {
    let mut b = vec!["--event-log", "{dir}/b.log"];
    b.extend_from_slice(b_args);
    json!({ "mcpServers": {
        "a": { "command": fixture(), "args": ["--event-log", "{dir}/a.log"] },
        "b": { "command": fixture(), "args": b },
    } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_one_server_restarts_only_it_and_a_call_on_another_completes() {
    let sandbox = Sandbox::from_config(&two_servers(&[]));
    let serve = sandbox.serve_http(&[]);
    let host = client(&serve.url(), None).await;
    let peer = host.peer().clone();
    let (a_log, b_log) = (sandbox.path("a.log"), sandbox.path("b.log"));
    assert_eq!(
        text_of(&call(&peer, "mcp", json!({ "tool": "b_echo", "args": { "text": "before" } })).await),
        "before"
    );
    let b_first = started_pids(&b_log);
    assert_eq!(b_first.len(), 1);

    let slow = tokio::spawn({
        let peer = peer.clone();
        async move { call(&peer, "mcp", json!({ "tool": "a_slow", "args": { "ms": 5000 } })).await }
    });
    assert!(
        eventually(DEADLINE, async || count_events(&a_log, "call", Some("slow")) == 1).await,
        "the slow call did not reach server a"
    );
    sandbox.write_config(&two_servers(&["--name", "b-edited"]));

    // b is restarted by the reload: the next call reaches a new process.
    let restarted = eventually(DEADLINE, async || {
        let r = call(&peer, "mcp", json!({ "tool": "b_echo", "args": { "text": "after" } })).await;
        text_of(&r) == "after" && started_pids(&b_log).len() == 2
    })
    .await;
    assert!(
        restarted,
        "b was not restarted after its args changed:\n{}",
        serve.log_text()
    );
    let b_pids = started_pids(&b_log);
    assert_ne!(b_pids[0], b_pids[1]);
    assert!(
        !pid_alive(b_first[0]) || all_gone(&b_first, DEADLINE),
        "the old b process is gone"
    );

    let done = slow.await.unwrap();
    assert_eq!(text_of(&done), "slept 5000 ms in 1 step", "the call on a completed");
    assert_eq!(started_pids(&a_log).len(), 1, "a was not restarted");
    assert_eq!(count_events(&a_log, "cancelled", None), 0, "a's call was not cancelled");
    assert!(
        serve.log_text().contains("configuration reloaded"),
        "{}",
        serve.log_text()
    );
    host.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_file_keeps_the_running_setup_and_the_error_shows_in_status() {
    let sandbox = Sandbox::from_config(&two_servers(&[]));
    let serve = sandbox.serve_http(&[]);
    let host = client(&serve.url(), None).await;
    let peer = host.peer().clone();
    let b_log = sandbox.path("b.log");
    assert_eq!(
        text_of(&call(&peer, "mcp", json!({ "tool": "b_echo", "args": { "text": "x" } })).await),
        "x"
    );

    sandbox.write_config_text("{ \"mcpServers\": { \"a\": { \"command\": ");
    let refused = eventually(DEADLINE, async || {
        text_of(&call(&peer, "mcp", json!({})).await).contains("Configuration reload refused")
    })
    .await;
    assert!(
        refused,
        "mcp({{}}) never reported the refused reload:\n{}",
        serve.log_text()
    );
    let status = text_of(&call(&peer, "mcp", json!({})).await);
    assert!(status.contains("mcp.json"), "the notice names the file: {status}");
    assert!(
        status.contains("a:") && status.contains("b:"),
        "both servers still listed: {status}"
    );
    let notice = serve.status()["notice"].as_str().unwrap_or_default().to_owned();
    assert!(notice.contains("keeping the running setup"), "{notice}");
    assert!(serve.log_text().contains("Configuration reload refused"), "logged too");
    // The running setup is intact: b answers from the same process.
    assert_eq!(
        text_of(&call(&peer, "mcp", json!({ "tool": "b_echo", "args": { "text": "y" } })).await),
        "y"
    );
    assert_eq!(started_pids(&b_log).len(), 1);

    sandbox.write_config(&two_servers(&[]));
    let cleared = eventually(DEADLINE, async || serve.status()["notice"].is_null()).await;
    assert!(cleared, "fixing the file clears the notice");
    assert!(!text_of(&call(&peer, "mcp", json!({})).await).contains("refused"));
    assert_eq!(started_pids(&b_log).len(), 1, "an unchanged server is not restarted");
    host.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_entry_point_reloads_when_the_file_changes() {
    let sandbox = Sandbox::from_config(&json!({ "mcpServers": { "a": { "command": fixture() } } }));
    let mut cmd = sandbox.command(&[]);
    cmd.kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(sandbox.path("stdio.log")).unwrap())
        .spawn()
        .unwrap();
    let host = ().serve(transport).await.unwrap();
    let peer = host.peer().clone();
    assert!(!text_of(&call(&peer, "mcp", json!({})).await).contains("b:"));
    sandbox.write_config(&json!({ "mcpServers": { "a": { "command": fixture() }, "b": { "command": fixture() } } }));
    let added = eventually(DEADLINE, async || {
        text_of(&call(&peer, "mcp", json!({})).await).contains("b:")
    })
    .await;
    assert!(added, "no SIGHUP needed: the file change is picked up");
    let r = call(
        &peer,
        "mcp",
        json!({ "tool": "b_echo", "args": { "text": "new server" } }),
    )
    .await;
    assert_eq!(text_of(&r), "new server");
    let _ = tokio::time::timeout(Duration::from_secs(10), host.cancel()).await;
}
