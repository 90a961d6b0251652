//! Stress: many concurrent callers on one Streamable HTTP upstream, repeated; every call must answer (a result, or a
//! categorized error at worst — never stay in flight).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pimcp_actors::{CallOptions, ErrorCategory};
use serde_json::json;

use super::support::*;

/// `callers` tasks × `calls` sequential `echo` calls each, `rounds` times, on one runtime. Each call carries a 15 s
/// timeout, so a lost response shows up as a `timeout` error (counted and reported) rather than a hang; the outer
/// guard only exists so a call that never ends at all fails the test instead of blocking it.
/// With `cold`, every round starts a fresh runtime (no cache file, nothing connected) and the callers' first calls
/// race the lazy connect and discovery, as in a proxy whose sessions all start at once.
async fn hammer(protocol: &str, callers: usize, calls: usize, rounds: usize, cold: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_fixture(dir.path(), "stress", "127.0.0.1:0", &[]).await;
    let config = json!({
        "mcpServers": {"web": {"url": format!("http://127.0.0.1:{port}/mcp"), "protocol": protocol}}
    });
    let mut rt = start_in(dir.path(), &config, tuning()).await;
    if !cold {
        let warm = rt
            .call("web_echo", args(json!({"text": "warm"})), CallOptions::default())
            .await;
        assert!(warm.is_ok(), "warm-up call failed: {:?}", warm.err());
    }
    for round in 0..rounds {
        if cold && round > 0 {
            rt.shutdown(Duration::from_secs(5)).await;
            let fresh = dir.path().join(format!("round{round}"));
            rt = start_in(&fresh, &config, tuning()).await;
        }
        let handle = rt.handle();
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let done = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for c in 0..callers {
            let handle = handle.clone();
            let failures = failures.clone();
            let done = done.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..calls {
                    let text = format!("r{round} c{c} i{i}");
                    let options = CallOptions {
                        timeout: Some(Duration::from_secs(15)),
                        ..CallOptions::default()
                    };
                    let result = handle.call("web_echo", args(json!({ "text": text })), options).await;
                    match result {
                        Ok(out) if format!("{:?}", out.content).contains(&text) => {}
                        Ok(out) => failures
                            .lock()
                            .unwrap()
                            .push(format!("{text}: wrong answer {:?}", out.content)),
                        Err(e) => failures.lock().unwrap().push(format!("{text}: {} {e}", e.category())),
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let all = futures::future::join_all(tasks);
        let guard = tokio::time::timeout(Duration::from_secs(120), all).await;
        let status = rt.status();
        let in_flight = status.server("web").map(|s| s.in_flight);
        assert!(
            guard.is_ok(),
            "round {round} ({protocol}): only {} of {} calls ended; status in flight: {in_flight:?}",
            done.load(Ordering::Relaxed),
            callers * calls
        );
        let failures = std::mem::take(&mut *failures.lock().unwrap());
        let timeouts = failures
            .iter()
            .filter(|f| f.contains(ErrorCategory::Timeout.as_str()))
            .count();
        assert!(
            failures.is_empty(),
            "round {round} ({protocol}): {} failed calls ({timeouts} timeouts), first: {:?}",
            failures.len(),
            failures.iter().take(5).collect::<Vec<_>>()
        );
        // The server actor books a call's end just after the caller got its answer: poll toward a deadline.
        wait_until("no call left in flight", Duration::from_secs(10), || {
            rt.status().server("web").map(|s| s.in_flight) == Some(0)
        })
        .await;
    }
    rt.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_callers_on_one_streamable_http_upstream_all_answer() {
    hammer("auto", 64, 40, 4, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_calls_racing_a_lazy_http_connect_all_answer() {
    hammer("auto", 8, 25, 12, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_callers_on_one_legacy_streamable_http_session_all_answer() {
    hammer("legacy", 64, 40, 4, false).await;
}

/// A loopback TCP relay in front of a server that can be frozen: once frozen it stops forwarding bytes in both
/// directions on every connection (old and new), like a network path that went silent without closing.
struct FreezableRelay {
    port: u16,
    frozen: tokio::sync::watch::Sender<bool>,
}

impl FreezableRelay {
    async fn start(target_port: u16) -> FreezableRelay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (frozen, frozen_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target_port)).await else {
                    continue;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                tokio::spawn(pump(ri, wo, frozen_rx.clone()));
                tokio::spawn(pump(ro, wi, frozen_rx.clone()));
            }
        });
        FreezableRelay { port, frozen }
    }

    fn freeze(&self) {
        self.frozen.send_replace(true);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if *frozen.borrow_and_update() {
            // Silent from now on: hold both halves open, forward nothing.
            let _ = frozen.wait_for(|f| !*f).await;
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The path to a Streamable HTTP server goes silent mid-session (nothing answers, nothing closes): a call still ends
/// with `timeout` (and leaves nothing in flight) although neither its POST nor the `notifications/cancelled` sent
/// after the timeout is ever answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_on_a_silent_http_path_ends_with_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_fixture(dir.path(), "stress", "127.0.0.1:0", &[]).await;
    let relay = FreezableRelay::start(port).await;
    for protocol in ["legacy", "auto"] {
        let config = json!({
            "mcpServers": {"web": {"url": format!("http://127.0.0.1:{}/mcp", relay.port), "protocol": protocol}}
        });
        relay.frozen.send_replace(false);
        let rt = start_in(&dir.path().join(protocol), &config, tuning()).await;
        let warm = rt
            .call("web_echo", args(json!({"text": "warm"})), CallOptions::default())
            .await;
        assert!(warm.is_ok(), "{protocol}: warm-up call failed: {:?}", warm.err());
        relay.freeze();
        let options = CallOptions {
            timeout: Some(Duration::from_millis(300)),
            ..CallOptions::default()
        };
        let call = rt.call("web_echo", args(json!({"text": "into the void"})), options);
        let ended = tokio::time::timeout(Duration::from_secs(60), call).await;
        let Ok(result) = ended else {
            panic!(
                "{protocol}: the call never ended; status in flight: {:?}",
                rt.status().server("web").map(|s| s.in_flight)
            );
        };
        assert_eq!(
            category(&result),
            Some(ErrorCategory::Timeout),
            "{protocol}: {result:?}"
        );
        wait_until("no call left in flight", Duration::from_secs(10), || {
            rt.status().server("web").map(|s| s.in_flight) == Some(0)
        })
        .await;
        rt.shutdown(Duration::from_secs(3)).await;
    }
}

/// Connects `n` stdio fixture servers with `protocol: auto` and `flags`, all at once, and returns each failure: a
/// connect that failed, or a server that needed more than one process (a handshake retried on a fresh spawn).
async fn connect_all_at_once(flags: &[&str], n: usize) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let log = |i: usize| dir.path().join(format!("s{i}.log"));
    let mut servers = serde_json::Map::new();
    for i in 0..n {
        let log = log(i).to_string_lossy().into_owned();
        let mut args = flags.to_vec();
        args.extend(["--event-log", &log]);
        let mut entry = stdio(&args);
        // Generous: the discover probe alone waits 10 s for a late answer, and 70 servers start on 2 cores.
        entry["startupTimeout"] = json!(120);
        entry["protocol"] = json!("auto");
        servers.insert(format!("s{i}"), entry);
    }
    let rt = start_in(dir.path(), &json!({ "mcpServers": servers }), tuning()).await;
    let handle = rt.handle();
    let connects = (0..n).map(|i| {
        let handle = handle.clone();
        async move {
            let name = format!("s{i}");
            handle.connect(&name).await.err().map(|e| format!("{name}: {e}"))
        }
    });
    let mut failures: Vec<String> = futures::future::join_all(connects)
        .await
        .into_iter()
        .flatten()
        .collect();
    rt.shutdown(Duration::from_secs(20)).await;
    for i in 0..n {
        let started = std::fs::read_to_string(log(i))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(r#""event":"start""#))
            .count();
        if started != 1 {
            failures.push(format!("s{i}: {started} processes started for one connect"));
        }
    }
    failures
}

/// 70 servers whose answer to the `server/discover` probe arrives only after the `initialize` fallback went out (a
/// slow legacy server on a busy machine): the stale answer is dropped and every one connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_auto_connects_with_late_probe_answers_all_succeed() {
    let failures = connect_all_at_once(&["--late-discover"], 70).await;
    assert!(failures.is_empty(), "{} of 70 failed: {failures:#?}", failures.len());
}

/// 70 legacy-only servers (`server/discover` → -32601) connected together with `protocol: auto`: all connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_auto_connects_to_legacy_only_servers_all_succeed() {
    let failures = connect_all_at_once(&["--no-discover"], 70).await;
    assert!(failures.is_empty(), "{} of 70 failed: {failures:#?}", failures.len());
}
