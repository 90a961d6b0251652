//! Tests of `run_call` on real `mcp-fixture` connections: the fast path (`transport::fast_client`) against rmcp's
//! path on the same calls, and the fast path's cancellation, timeout, shutdown and transport-death behaviour.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::JsonObject;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::handler::{Handlers, ProgressRoutes};
use crate::process::{ProcessOptions, ShimMode};
use crate::schema::ToolSchema;
use crate::transport::{ConnectSpec, Connection, FIRST_FAST_ID, SharedHttp, connect};

/// A hang guard only: every call here ends in well under a second unless the code under test is broken.
const HANG: Duration = Duration::from_secs(30);

async fn fixture(dir: &Path, protocol: &str, trace: Option<crate::trace::ProtocolTrace>) -> Connection<()> {
    let log = dir.join("events.jsonl");
    let config = json!({"mcpServers": {"fx": {
        "command": mcp_fixture::bin_path(),
        "args": ["--event-log", log],
        "protocol": protocol,
    }}});
    let server = pimcp_config::load_in_memory(&config, &pimcp_config::LoadOptions::new(dir.join("home"), dir))
        .servers
        .remove(0);
    let spec = ConnectSpec {
        server,
        project_dir: dir.to_path_buf(),
        http: SharedHttp::lazy(),
        era_hint: None,
        process: ProcessOptions {
            shim: ShimMode::Disabled,
            ..ProcessOptions::default()
        },
        cancel: CancellationToken::new(),
        resume_session: None,
        access_token: None,
        trace,
        token_source: None,
    };
    connect(spec, ()).await.unwrap()
}

fn tool(original: &str, resource_uri: Option<&str>) -> CatalogTool {
    CatalogTool {
        name: format!("fx_{original}"),
        original: original.to_owned(),
        server: "fx".to_owned(),
        title: None,
        description: None,
        input_schema: ToolSchema::parsed(Arc::new(JsonObject::new())),
        output_schema: None,
        annotations: None,
        resource_uri: resource_uri.map(str::to_owned),
        meta: None,
    }
}

fn guards() -> CallGuards {
    CallGuards {
        dead: CancellationToken::new(),
        stop: CancellationToken::new(),
        progress: ProgressRoutes::default(),
        generation: 1,
    }
}

fn input() -> InputContext {
    InputContext {
        handlers: Arc::new(Handlers::default()),
        allow_sampling: true,
        sampling_auto_approve: false,
        allow_elicitation: true,
    }
}

/// One call through `run_call`: on the fast path when `fast`, else through rmcp.
async fn call(
    conn: &Connection<()>,
    fast: bool,
    tool: &CatalogTool,
    args: Value,
    opts: CallOptions,
    guards: CallGuards,
) -> (Result<ToolOutput>, CallReport) {
    let job = CallJob {
        tool: Arc::new(tool.clone()),
        args: args.as_object().cloned(),
        opts,
        span: tracing::Span::none(),
    };
    let fast = if fast { conn.fast_calls() } else { None };
    let peer = conn.client.peer().clone();
    let run = run_call(peer, fast, job, Duration::from_secs(20), &[], guards, input());
    tokio::time::timeout(HANG, run).await.expect("the call hung")
}

fn events(dir: &Path) -> Vec<Value> {
    mcp_fixture::read_event_log(&dir.join("events.jsonl"))
}

fn request_ids(dir: &Path, event: &str, name: &str) -> Vec<u64> {
    events(dir)
        .iter()
        .filter(|e| e["event"] == event && (e["name"] == name || name.is_empty()))
        .filter_map(|e| e["requestId"].as_u64())
        .collect()
}

/// Polls the event log until `f` finds what it looks for.
async fn wait_for_event(dir: &Path, what: &str, f: impl Fn(&[Value]) -> bool) {
    let end = tokio::time::Instant::now() + HANG;
    loop {
        if f(&events(dir)) {
            return;
        }
        assert!(tokio::time::Instant::now() < end, "no {what} in {:#?}", events(dir));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The same calls through both paths give the same result (outputs, `isError` results, images, structured content,
/// embedded resources, JSON-RPC errors, resource reads, an input-required round) and the same report, in both
/// protocol eras; the fast path's requests carry ids above rmcp's `u32` range and the per-request metadata a
/// 2026-07-28 server needs (its `whoami` sees the same protocol version and client name either way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_paths_give_the_same_results_in_both_eras() {
    for protocol in ["auto", "legacy"] {
        let dir = tempfile::tempdir().unwrap();
        let conn = fixture(dir.path(), protocol, None).await;
        assert!(conn.fast_calls().is_some(), "stdio without a trace has a fast path");
        let cases = [
            (tool("echo", None), json!({"text": "hé \"quoted\"\nline"})),
            (tool("add", None), json!({"a": 1, "b": 2.5})),
            (tool("fail", None), json!({"message": "boom"})),
            (tool("image", None), json!({})),
            (tool("mixed", None), json!({})),
            (tool("huge", None), json!({"bytes": 100_000})),
            (tool("echo", None), json!({})),
            (tool("no_such_tool", None), json!({})),
            (tool("roots", None), json!({})),
            (tool("read_readme", Some("fixture://readme")), json!({})),
            (tool("read_missing", Some("fixture://no-such-resource")), json!({})),
        ];
        for (tool, args) in &cases {
            let (fast, fast_report) = call(&conn, true, tool, args.clone(), CallOptions::default(), guards()).await;
            let (slow, slow_report) = call(&conn, false, tool, args.clone(), CallOptions::default(), guards()).await;
            assert_eq!(
                format!("{fast:?}"),
                format!("{slow:?}"),
                "{protocol}: {} {args}",
                tool.original
            );
            assert_eq!(
                (fast_report.responded, fast_report.transport_dead),
                (slow_report.responded, slow_report.transport_dead),
                "{protocol}: {}",
                tool.original
            );
        }
        // Spot checks that the cases mean what they say.
        let (r, _) = call(
            &conn,
            true,
            &cases[1].0,
            cases[1].1.clone(),
            CallOptions::default(),
            guards(),
        )
        .await;
        assert_eq!(r.unwrap().structured_content, Some(json!({"sum": 3.5})));
        let (r, _) = call(
            &conn,
            true,
            &cases[2].0,
            cases[2].1.clone(),
            CallOptions::default(),
            guards(),
        )
        .await;
        assert!(
            matches!(r, Err(Error::ToolError { ref output, .. }) if output.is_error),
            "{r:?}"
        );
        let (r, _) = call(&conn, true, &cases[7].0, json!({}), CallOptions::default(), guards()).await;
        assert!(matches!(r, Err(Error::Protocol { code: -32602, .. })), "{r:?}");
        let (r, _) = call(&conn, true, &cases[10].0, json!({}), CallOptions::default(), guards()).await;
        assert!(matches!(r, Err(Error::Protocol { .. })), "{r:?}");

        let whoami = tool("whoami", None);
        let seen = |r: Result<ToolOutput>| {
            let v: Value = serde_json::from_str(&r.unwrap().text()).unwrap();
            (v["protocolVersion"].clone(), v["clientName"].clone())
        };
        let fast = seen(
            call(&conn, true, &whoami, json!({}), CallOptions::default(), guards())
                .await
                .0,
        );
        let slow = seen(
            call(&conn, false, &whoami, json!({}), CallOptions::default(), guards())
                .await
                .0,
        );
        assert_eq!(fast, slow, "{protocol}");
        assert!(
            fast.1.is_string(),
            "{protocol}: the server saw no client name: {fast:?}"
        );
        let expected_era = if protocol == "legacy" { "2025-" } else { "2026-07-28" };
        assert!(
            fast.0.as_str().unwrap().starts_with(expected_era),
            "{protocol}: {fast:?}"
        );

        // Which path each call took, by the id the server saw.
        let ids = request_ids(dir.path(), "call", "");
        let fast_ids = ids.iter().filter(|id| **id >= FIRST_FAST_ID).count();
        let rmcp_ids = ids.iter().filter(|id| **id < u64::from(u32::MAX)).count();
        assert_eq!(fast_ids + rmcp_ids, ids.len(), "{ids:?}");
        assert!(fast_ids >= 12 && rmcp_ids >= 10, "{protocol}: {ids:?}");
        conn.close(Duration::from_secs(2)).await;
    }
}

/// Giving up on a fast call (the caller cancels, the timeout passes, the runtime stops) sends
/// `notifications/cancelled` with the call's id, the server stops the work, and the connection stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_call_given_up_is_cancelled_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let conn = fixture(dir.path(), "auto", None).await;
    let slow = tool("slow", None);
    let echo = tool("echo", None);

    // The caller cancels.
    let cancel = CancellationToken::new();
    let opts = CallOptions {
        cancel: Some(cancel.clone()),
        ..CallOptions::default()
    };
    let running = call(&conn, true, &slow, json!({"ms": 60000}), opts, guards());
    let canceller = async {
        wait_for_event(dir.path(), "slow call", |e| e.iter().any(|e| e["name"] == "slow")).await;
        cancel.cancel();
    };
    let ((r, report), ()) = tokio::join!(running, canceller);
    assert!(
        matches!(r, Err(Error::Connection { ref message, .. }) if message.contains("cancelled by the caller")),
        "{r:?}"
    );
    assert!(!report.transport_dead);
    let id = request_ids(dir.path(), "call", "slow")[0];
    assert!(id >= FIRST_FAST_ID, "{id}");
    let cancelled = |id: u64, reason: &'static str| {
        move |e: &[Value]| {
            e.iter()
                .any(|e| e["event"] == "cancel_notification" && e["requestId"] == json!(id) && e["reason"] == reason)
        }
    };
    wait_for_event(
        dir.path(),
        "cancel notification",
        cancelled(id, "cancelled by the caller"),
    )
    .await;
    wait_for_event(dir.path(), "slow stopping", |e| {
        e.iter()
            .any(|e| e["event"] == "cancelled" && e["requestId"] == json!(id))
    })
    .await;

    // The timeout passes.
    let opts = CallOptions {
        timeout: Some(Duration::from_millis(300)),
        ..CallOptions::default()
    };
    let (r, _) = call(&conn, true, &slow, json!({"ms": 60000}), opts, guards()).await;
    assert!(
        matches!(r, Err(Error::Timeout { after, .. }) if after == Duration::from_millis(300)),
        "{r:?}"
    );
    let id = *request_ids(dir.path(), "call", "slow").last().unwrap();
    wait_for_event(dir.path(), "timeout cancellation", cancelled(id, "request timeout")).await;

    // Progress restarts the timeout, but not past `max_total`.
    let opts = CallOptions {
        timeout: Some(Duration::from_millis(2000)),
        max_total: Some(Duration::from_millis(2500)),
        ..CallOptions::default()
    };
    let (r, _) = call(&conn, true, &slow, json!({"ms": 20000, "steps": 100}), opts, guards()).await;
    assert!(
        matches!(r, Err(Error::Timeout { after, .. }) if after == Duration::from_millis(2500)),
        "{r:?}"
    );
    let id = *request_ids(dir.path(), "call", "slow").last().unwrap();
    assert!(id >= FIRST_FAST_ID);
    wait_for_event(
        dir.path(),
        "cap cancellation",
        cancelled(id, "maximum total timeout exceeded"),
    )
    .await;

    // The runtime stops.
    let g = guards();
    let stop = g.stop.clone();
    let running = call(&conn, true, &slow, json!({"ms": 60000}), CallOptions::default(), g);
    let before = request_ids(dir.path(), "call", "slow").len();
    let stopper = async {
        wait_for_event(dir.path(), "third slow call", |_| {
            request_ids(dir.path(), "call", "slow").len() > before
        })
        .await;
        stop.cancel();
    };
    let ((r, _), ()) = tokio::join!(running, stopper);
    assert!(matches!(r, Err(Error::ShuttingDown)), "{r:?}");
    let id = *request_ids(dir.path(), "call", "slow").last().unwrap();
    wait_for_event(
        dir.path(),
        "shutdown cancellation",
        cancelled(id, "client shutting down"),
    )
    .await;

    // The stream's framing is intact: a late answer to a given-up call is dropped, the next call is answered.
    let (r, _) = call(
        &conn,
        true,
        &echo,
        json!({"text": "after"}),
        CallOptions::default(),
        guards(),
    )
    .await;
    assert_eq!(r.unwrap().text(), "after");
    assert_eq!(conn.fast_calls().unwrap().waiting(), 0);
    conn.close(Duration::from_secs(2)).await;
}

/// When the server dies under a fast call (killed, or the `crash` tool exits without answering), the call fails at
/// once as a dead transport, and later fast calls are refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_call_fails_when_the_transport_dies() {
    let dir = tempfile::tempdir().unwrap();
    let conn = fixture(dir.path(), "auto", None).await;
    let (r, report) = call(
        &conn,
        true,
        &tool("crash", None),
        json!({}),
        CallOptions::default(),
        guards(),
    )
    .await;
    assert!(matches!(r, Err(Error::Connection { .. })), "{r:?}");
    assert!(report.transport_dead);
    let (r, report) = call(
        &conn,
        true,
        &tool("echo", None),
        json!({"text": "x"}),
        CallOptions::default(),
        guards(),
    )
    .await;
    assert!(
        matches!(r, Err(Error::Connection { ref message, .. }) if message.contains("before the call")),
        "{r:?}"
    );
    assert!(report.transport_dead);
    conn.close(Duration::from_secs(2)).await;

    let dir = tempfile::tempdir().unwrap();
    let conn = fixture(dir.path(), "legacy", None).await;
    let pid = conn.pid.unwrap();
    let slow = tool("slow", None);
    let running = call(
        &conn,
        true,
        &slow,
        json!({"ms": 60000}),
        CallOptions::default(),
        guards(),
    );
    let killer = async {
        wait_for_event(dir.path(), "slow call", |e| e.iter().any(|e| e["name"] == "slow")).await;
        let status = std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(status.success());
    };
    let ((r, report), ()) = tokio::join!(running, killer);
    assert!(
        matches!(r, Err(Error::Connection { ref message, .. }) if message.contains("closed during the call")),
        "{r:?}"
    );
    assert!(report.transport_dead);
    conn.close(Duration::from_secs(2)).await;
}

/// A traced connection has no fast path (the trace records what passes through the transport stack), so every
/// call of it is in the trace, request and response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_connection_takes_rmcps_path_and_every_call_is_traced() {
    let dir = tempfile::tempdir().unwrap();
    let sink = crate::trace::TraceSink::new(dir.path().join("trace.jsonl"), 1 << 20);
    let conn = fixture(dir.path(), "auto", Some(crate::trace::ProtocolTrace::new(sink, "fx"))).await;
    assert!(conn.fast_calls().is_none());
    let (r, _) = call(
        &conn,
        true,
        &tool("echo", None),
        json!({"text": "t"}),
        CallOptions::default(),
        guards(),
    )
    .await;
    assert_eq!(r.unwrap().text(), "t");
    let lines: Vec<crate::trace::TraceLine> = std::fs::read_to_string(dir.path().join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<_> = lines
        .iter()
        .filter(|l| l.method.as_deref() == Some("tools/call"))
        .collect();
    assert_eq!(calls.len(), 2, "{lines:#?}");
    assert_eq!(calls[0].kind, crate::trace::MessageKind::Request);
    assert_eq!(calls[1].kind, crate::trace::MessageKind::Response);
    assert!(
        calls[0]
            .id
            .as_ref()
            .and_then(Value::as_u64)
            .is_some_and(|id| id < FIRST_FAST_ID)
    );
    conn.close(Duration::from_secs(2)).await;
}

/// A Unix socket bridged to a stdio fixture (as rmcp-mux serves one): the fast path works there too, with the
/// same results as rmcp's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_connection_has_the_fast_path_with_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mux.sock");
    let log = dir.path().join("events.jsonl");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let bridge = tokio::spawn(mcp_fixture::bridge_one_socket_connection(
        listener,
        [std::ffi::OsString::from("--event-log"), log.clone().into_os_string()],
    ));
    let config = json!({"mcpServers": {"fx": {"socket": path}}});
    let server = pimcp_config::load_in_memory(
        &config,
        &pimcp_config::LoadOptions::new(dir.path().join("home"), dir.path()),
    )
    .servers
    .remove(0);
    assert!(matches!(server.transport, pimcp_config::Transport::Socket(_)));
    let spec = ConnectSpec {
        server,
        project_dir: dir.path().to_path_buf(),
        http: SharedHttp::lazy(),
        era_hint: None,
        process: ProcessOptions::default(),
        cancel: CancellationToken::new(),
        resume_session: None,
        access_token: None,
        trace: None,
        token_source: None,
    };
    let conn = connect(spec, ()).await.unwrap();
    assert!(conn.fast_calls().is_some());
    for (tool, args) in [
        (tool("echo", None), json!({"text": "over the socket"})),
        (tool("fail", None), json!({})),
        (tool("no_such_tool", None), json!({})),
        (tool("read_readme", Some("fixture://readme")), json!({})),
    ] {
        let (fast, _) = call(&conn, true, &tool, args.clone(), CallOptions::default(), guards()).await;
        let (slow, _) = call(&conn, false, &tool, args.clone(), CallOptions::default(), guards()).await;
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{}", tool.original);
    }
    let ids = request_ids(dir.path(), "call", "echo");
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids[0] >= FIRST_FAST_ID && ids[1] < u64::from(u32::MAX), "{ids:?}");
    conn.close(Duration::from_secs(2)).await;
    let _ = tokio::time::timeout(HANG, bridge).await;
}
