//! Tests of `run_call` on real `mcp-fixture` connections: cancellation, timeout, shutdown and transport death, a
//! traced connection, and a Unix socket connection.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pimcp_surface::ToolSchema;
use rmcp::model::JsonObject;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::host::Handlers;
use crate::job::CallOptions;
use crate::process::{GuardianMode, ProcessOptions};
use crate::progress::ProgressRoutes;
use crate::transport::{ConnectSpec, Connection, SharedHttp, connect};

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
            guardian: GuardianMode::Disabled,
            ..ProcessOptions::default()
        },
        cancel: CancellationToken::new(),
        resume_session: None,
        access_token: None,
        trace,
        token_source: None,
        max_message_bytes: pimcp_config::Settings::DEFAULT_MAX_MESSAGE_BYTES,
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

/// One call through `run_call`.
async fn call(
    conn: &Connection<()>,
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
    let peer = conn.client.peer().clone();
    let run = run_call(peer, job, Duration::from_secs(20), &[], guards, input());
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

/// Giving up on a call (the caller cancels, the timeout passes, the runtime stops) sends
/// `notifications/cancelled` with the call's id, the server stops the work, and the connection stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_given_up_is_cancelled_on_the_server() {
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
    let running = call(&conn, &slow, json!({"ms": 60000}), opts, guards());
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
    let (r, _) = call(&conn, &slow, json!({"ms": 60000}), opts, guards()).await;
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
    let (r, _) = call(&conn, &slow, json!({"ms": 20000, "steps": 100}), opts, guards()).await;
    assert!(
        matches!(r, Err(Error::Timeout { after, .. }) if after == Duration::from_millis(2500)),
        "{r:?}"
    );
    let id = *request_ids(dir.path(), "call", "slow").last().unwrap();
    wait_for_event(
        dir.path(),
        "cap cancellation",
        cancelled(id, "maximum total timeout exceeded"),
    )
    .await;

    // The runtime stops.
    let g = guards();
    let stop = g.stop.clone();
    let running = call(&conn, &slow, json!({"ms": 60000}), CallOptions::default(), g);
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
    let (r, _) = call(&conn, &echo, json!({"text": "after"}), CallOptions::default(), guards()).await;
    assert_eq!(r.unwrap().text(), "after");
    conn.close(Duration::from_secs(2)).await;
}

/// When the server dies under a call (killed, or the `crash` tool exits without answering), the call fails at once
/// as a dead transport, and later calls are refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_fails_when_the_transport_dies() {
    let dir = tempfile::tempdir().unwrap();
    let conn = fixture(dir.path(), "auto", None).await;
    let (r, report) = call(&conn, &tool("crash", None), json!({}), CallOptions::default(), guards()).await;
    assert!(matches!(r, Err(Error::Connection { .. })), "{r:?}");
    assert!(report.transport_dead);
    let (r, report) = call(
        &conn,
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
    let running = call(&conn, &slow, json!({"ms": 60000}), CallOptions::default(), guards());
    let killer = async {
        wait_for_event(dir.path(), "slow call", |e| e.iter().any(|e| e["name"] == "slow")).await;
        let status = if cfg!(windows) {
            std::process::Command::new("taskkill")
                .args(["/F", "/PID", &pid.to_string()])
                .status()
        } else {
            std::process::Command::new("kill")
                .arg("-9")
                .arg(pid.to_string())
                .status()
        }
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

/// Every call of a traced connection is in the trace, request and response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_a_traced_connection_is_traced() {
    let dir = tempfile::tempdir().unwrap();
    let sink = crate::trace::TraceSink::new(dir.path().join("trace.jsonl"), 1 << 20);
    let conn = fixture(dir.path(), "auto", Some(crate::trace::ProtocolTrace::new(sink, "fx"))).await;
    let (r, _) = call(
        &conn,
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
    conn.close(Duration::from_secs(2)).await;
}

/// A Unix socket bridged to a stdio fixture (as rmcp-mux serves one): calls, tool errors and resource reads.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_over_a_socket_connection() {
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
        max_message_bytes: pimcp_config::Settings::DEFAULT_MAX_MESSAGE_BYTES,
    };
    let conn = connect(spec, ()).await.unwrap();
    let (r, _) = call(
        &conn,
        &tool("echo", None),
        json!({"text": "over the socket"}),
        CallOptions::default(),
        guards(),
    )
    .await;
    assert_eq!(r.unwrap().text(), "over the socket");
    let (r, _) = call(&conn, &tool("fail", None), json!({}), CallOptions::default(), guards()).await;
    assert!(
        matches!(r, Err(Error::ToolError { .. })),
        "the fixture's `fail` is an isError result: {r:?}"
    );
    let (r, report) = call(
        &conn,
        &tool("no_such_tool", None),
        json!({}),
        CallOptions::default(),
        guards(),
    )
    .await;
    assert!(r.is_err() && !report.transport_dead, "{r:?}");
    let (r, _) = call(
        &conn,
        &tool("read_readme", Some("fixture://readme")),
        json!({}),
        CallOptions::default(),
        guards(),
    )
    .await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(request_ids(dir.path(), "call", "echo").len(), 1);
    conn.close(Duration::from_secs(2)).await;
    let _ = tokio::time::timeout(HANG, bridge).await;
}
