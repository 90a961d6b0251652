//! Streamable HTTP servers under the runtime: a server restarted under a keep-alive client is recovered by the
//! health check alone, and an expired session re-initializes transparently.

use std::time::Duration;

use pimcp_actors::{CallOptions, ServerState};
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_restarted_under_keep_alive_client_is_recovered_by_health_check() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, port) = http_fixture(dir.path(), "a", "127.0.0.1:0", &[]).await;
    let config = json!({
        "settings": {"healthInterval": 0.2},
        "mcpServers": {"web": {"url": format!("http://127.0.0.1:{port}/mcp"), "lifecycle": "keep-alive", "protocol": "legacy"}}
    });
    let rt = start_in(dir.path(), &config, tuning()).await;
    wait_until("keep-alive ready", Duration::from_secs(20), || {
        state_of(&rt, "web") == ServerState::Ready
    })
    .await;
    let first_pid = first.id().unwrap();
    first.kill().await.unwrap();
    let _ = first.wait().await;
    let (_second, _) = http_fixture(dir.path(), "b", &format!("127.0.0.1:{port}"), &[]).await;
    // Without any user call, the health check reaches the new process (ping or a fresh initialize).
    let log = dir.path().join("events.jsonl");
    wait_until(
        "health check reached the restarted server",
        Duration::from_secs(30),
        || {
            events(&log).iter().any(|e| {
                e["pid"].as_u64() != Some(u64::from(first_pid)) && (e["event"] == "ping" || e["event"] == "initialize")
            })
        },
    )
    .await;
    wait_until("ready again", Duration::from_secs(30), || {
        state_of(&rt, "web") == ServerState::Ready
    })
    .await;
    let out = rt
        .call(
            "web_echo",
            args(json!({"text": "after restart"})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "after restart");
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_session_expiry_reinitializes_and_calls_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let (_fx, port) = http_fixture(dir.path(), "s", "127.0.0.1:0", &["--expire-sessions-after", "4"]).await;
    let config = json!({"mcpServers": {"web": {"url": format!("http://127.0.0.1:{port}/mcp"), "protocol": "legacy"}}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    for i in 0..8 {
        let out = rt
            .call(
                "web_echo",
                args(json!({"text": format!("s{i}")})),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), format!("s{i}"));
    }
    let ev = events(&dir.path().join("events.jsonl"));
    assert!(
        !events_named(&ev, "session_expired").is_empty(),
        "the session never expired: {ev:?}"
    );
    assert!(
        events_named(&ev, "initialize").len() >= 2,
        "no fresh initialize after expiry"
    );
    rt.shutdown(Duration::from_secs(10)).await;
}

/// Forwarded Streamable HTTP requests carry the 2026-07-28 routing headers: `Mcp-Method` on every POST and
/// `Mcp-Name` (the tool's upstream name) on `tools/call`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_http_requests_carry_mcp_method_and_mcp_name() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_fixture(dir.path(), "headers", "127.0.0.1:0", &[]).await;
    let config = json!({"mcpServers": {"web": {
        "url": format!("http://127.0.0.1:{port}/mcp"), "protocol": "2026-07-28",
    }}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    let out = rt
        .call("web_echo", args(json!({"text": "routed"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "routed");
    let posts: Vec<serde_json::Value> = mcp_fixture::read_event_log(&dir.path().join("events.jsonl"))
        .into_iter()
        .filter(|e| e["event"] == "http-post")
        .collect();
    assert!(
        posts
            .iter()
            .any(|e| e["mcpMethod"] == "tools/call" && e["mcpName"] == "echo"),
        "{posts:#?}"
    );
    assert!(
        posts.iter().all(|e| e["mcpMethod"].is_string()),
        "a POST without Mcp-Method: {posts:#?}"
    );
    rt.shutdown(Duration::from_secs(10)).await;
}
