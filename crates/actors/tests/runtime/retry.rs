//! The retry rule end to end: a call is re-sent only when it provably never reached the server, and a
//! non-idempotent call that may have reached it is never replayed. A loopback HTTP relay in front of
//! `mcp-fixture --http` produces both failures for real; the fixture's event log shows what the server received.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use pimcp_actors::{CallOptions, ErrorCategory};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::Mutex;

use super::support::*;

const PASS: u8 = 0;
/// Answer the next `tools/call` POST with 503 without forwarding it.
const REFUSE_NEXT_CALL: u8 = 1;
/// Forward the next `tools/call` POST, then cut the connection before any answer comes back.
const CUT_AFTER_NEXT_CALL: u8 = 2;

/// A TCP relay that understands just enough HTTP to spot a POST carrying `tools/call`.
struct Relay {
    port: u16,
    mode: Arc<AtomicU8>,
    /// `tools/call` POSTs seen (forwarded or not).
    calls_seen: Arc<AtomicUsize>,
}

impl Relay {
    async fn start(target: u16) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(PASS));
        let calls_seen = Arc::new(AtomicUsize::new(0));
        let (m, c) = (mode.clone(), calls_seen.clone());
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                    continue;
                };
                tokio::spawn(relay_connection(inbound, outbound, m.clone(), c.clone()));
            }
        });
        Relay { port, mode, calls_seen }
    }
}

async fn relay_connection(
    inbound: tokio::net::TcpStream,
    outbound: tokio::net::TcpStream,
    mode: Arc<AtomicU8>,
    calls_seen: Arc<AtomicUsize>,
) {
    let (mut ri, wi) = inbound.into_split();
    let (mut ro, mut wo) = outbound.into_split();
    let to_client = Arc::new(Mutex::new(Some(wi)));
    let cut = Arc::new(tokio::sync::Notify::new());
    let back = to_client.clone();
    let cut_back = cut.clone();
    let back_task = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = tokio::select! {
                r = ro.read(&mut buf) => match r { Ok(0) | Err(_) => break, Ok(n) => n },
                () = cut_back.notified() => break,
            };
            let mut guard = back.lock().await;
            // Cut from the client: keep draining the server's answer so the server finishes the call (a closed
            // connection could make it drop the request before it runs).
            let Some(w) = guard.as_mut() else { continue };
            if w.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match ri.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        let is_call = chunk.starts_with(b"POST ") && contains(chunk, b"\"tools/call\"");
        if is_call {
            calls_seen.fetch_add(1, Ordering::SeqCst);
            match mode.swap(PASS, Ordering::SeqCst) {
                REFUSE_NEXT_CALL => {
                    // Not forwarded: the server never sees this request.
                    let mut guard = to_client.lock().await;
                    if let Some(w) = guard.as_mut() {
                        let _ = w
                            .write_all(
                                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                            )
                            .await;
                        let _ = w.shutdown().await;
                    }
                    *guard = None;
                    cut.notify_one();
                    break;
                }
                CUT_AFTER_NEXT_CALL => {
                    // Forwarded whole: the server runs it, but its answer never comes back (the back task drains it
                    // until the server closes). The client's side is closed *before* the request goes on: a fast
                    // server's answer could otherwise slip back between the forward and the cut.
                    *to_client.lock().await = None;
                    let _ = wo.write_all(chunk).await;
                    break;
                }
                _ => {}
            }
        }
        if wo.write_all(chunk).await.is_err() {
            break;
        }
    }
    let _ = back_task.await;
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `add_tool` calls the fixture logged for tool `name`. `add_tool` is annotated neither read-only nor idempotent,
/// so only the "never reached the server" rule may retry it.
fn runs_logged(dir: &std::path::Path, name: &str) -> usize {
    events_named(&events(&dir.join("events.jsonl")), "call")
        .iter()
        .filter(|e| e["name"] == "add_tool" && e["arguments"]["name"] == name)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_before_reaching_the_server_is_retried_once_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_fixture(dir.path(), "retry", "127.0.0.1:0", &[]).await;
    let relay = Relay::start(port).await;
    let config = json!({
        "mcpServers": {"web": {"url": format!("http://127.0.0.1:{}/mcp", relay.port), "protocol": "legacy"}}
    });
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.connect("web").await.unwrap();
    relay.mode.store(REFUSE_NEXT_CALL, Ordering::SeqCst);
    let out = rt
        .call(
            "web_add_tool",
            args(json!({"name": "extra_one"})),
            CallOptions::default(),
        )
        .await;
    assert!(out.is_ok(), "{out:?}");
    assert_eq!(
        relay.calls_seen.load(Ordering::SeqCst),
        2,
        "one refused POST, one retry"
    );
    assert_eq!(
        runs_logged(dir.path(), "extra_one"),
        1,
        "the server ran the call exactly once"
    );
    rt.shutdown(Duration::from_secs(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_idempotent_call_that_reached_the_server_is_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_fixture(dir.path(), "retry", "127.0.0.1:0", &[]).await;
    let relay = Relay::start(port).await;
    // 2026-07-28 (stateless HTTP): the answer can only come back on the call's own POST. (In an initialize-era
    // session the server may deliver it over the session's GET stream instead, and nothing fails.)
    let config = json!({
        "mcpServers": {"web": {"url": format!("http://127.0.0.1:{}/mcp", relay.port), "protocol": "2026-07-28"}}
    });
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.connect("web").await.unwrap();
    relay.mode.store(CUT_AFTER_NEXT_CALL, Ordering::SeqCst);
    let options = CallOptions {
        timeout: Some(Duration::from_secs(5)),
        ..CallOptions::default()
    };
    let result = rt
        .call("web_add_tool", args(json!({"name": "extra_two"})), options)
        .await;
    assert_eq!(
        category(&result),
        Some(ErrorCategory::Connection),
        "{result:?}; POSTs of the call: {}; runs logged: {}",
        relay.calls_seen.load(Ordering::SeqCst),
        runs_logged(dir.path(), "extra_two")
    );
    wait_until("the server logged the call", Duration::from_secs(10), || {
        runs_logged(dir.path(), "extra_two") >= 1
    })
    .await;
    assert_eq!(relay.calls_seen.load(Ordering::SeqCst), 1, "no second POST of the call");
    assert_eq!(
        runs_logged(dir.path(), "extra_two"),
        1,
        "the server ran the call exactly once"
    );
    // The server stays usable.
    let out = rt
        .call("web_add", args(json!({"a": 1, "b": 1})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "2");
    rt.shutdown(Duration::from_secs(3)).await;
}
