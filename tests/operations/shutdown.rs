//! Graceful shutdown of `pimcp-run serve`: SIGTERM with a call in flight lets the call finish, exits 0 and leaves
//! no child; a second signal during the drain exits at once (128 + signal) and still leaves no child (the servers'
//! guardian kills their process groups when pimcp-run is gone).

use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_the_call_in_flight_exits_0_and_leaves_no_child() {
    let sandbox = Sandbox::from_config(&json!({ "mcpServers": { "fx": {
        "command": fixture(), "args": ["--event-log", "{dir}/fx.log"]
    } } }));
    let mut serve = sandbox.serve_http(&["--drain-timeout", "60"]);
    let host = client(&serve.url(), None).await;
    let peer = host.peer().clone();
    let log = sandbox.path("fx.log");
    let slow = tokio::spawn({
        let peer = peer.clone();
        async move { call(&peer, "mcp", json!({ "tool": "fx_slow", "args": { "ms": 2000 } })).await }
    });
    assert!(eventually(DEADLINE, async || count_events(&log, "call", Some("slow")) == 1).await);
    let children = started_pids(&log);
    serve.signal("TERM");

    let result = slow.await.unwrap();
    assert_eq!(
        text_of(&result),
        "slept 2000 ms in 1 step",
        "the call in flight was drained, not cut"
    );
    let status = serve
        .wait_exit(DEADLINE)
        .unwrap_or_else(|| panic!("still running:\n{}", serve.log_text()));
    assert_eq!(status.code(), Some(0), "{}", serve.log_text());
    assert!(all_gone(&children, DEADLINE), "a server process outlived pimcp-run");
    assert_eq!(count_events(&log, "cancelled", None), 0);
    assert!(
        count_events(&log, "exit", None) == 1,
        "the fixture was closed, not killed: {:?}",
        events(&log)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_and_leaves_no_child() {
    let sandbox = Sandbox::from_config(&json!({ "mcpServers": { "fx": {
        "command": fixture(),
        "args": ["--event-log", "{dir}/fx.log", "--ignore-sigterm", "--spawn-grandchild", "{dir}/grandchild.pid"]
    } } }));
    // A long drain bound and a long call: only the second signal can make it exit soon.
    let mut serve = sandbox.serve_http(&["--drain-timeout", "300"]);
    let host = client(&serve.url(), None).await;
    let peer = host.peer().clone();
    let log = sandbox.path("fx.log");
    let _slow = tokio::spawn({
        let peer = peer.clone();
        async move {
            let mut params = rmcp::model::CallToolRequestParams::new("mcp");
            params.arguments = json!({ "tool": "fx_slow", "args": { "ms": 120000 } })
                .as_object()
                .cloned();
            peer.call_tool(params).await
        }
    });
    assert!(eventually(DEADLINE, async || count_events(&log, "call", Some("slow")) == 1).await);
    let grandchild: u32 = poll_until(DEADLINE, || {
        std::fs::read_to_string(sandbox.path("grandchild.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
    .expect("grandchild pid");
    let mut children = started_pids(&log);
    children.push(grandchild);

    serve.signal("TERM");
    assert!(
        eventually(DEADLINE, async || serve
            .log_text()
            .contains("waiting for calls in flight"))
        .await,
        "the first signal starts the drain:\n{}",
        serve.log_text()
    );
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "still draining after one signal"
    );
    let status = serve
        .signal_again_until_exit("TERM", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("the second signal did not end pimcp-run:\n{}", serve.log_text()));
    assert_eq!(status.code(), Some(128 + 15), "{}", serve.log_text());
    assert!(all_gone(&children, DEADLINE), "children left behind: {children:?}");
}
