//! Observability of the real `pimcp-run` binary: with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an
//! in-process OTLP/HTTP receiver, a host's `mcp` calls arrive as spans whose parent links cross the actor hops
//! (proxy request → tool call → upstream request, and the connect the first call caused), with metadata attributes
//! only; secrets planted in a server's environment, in an HTTP header and in call arguments never appear in any
//! exported span, in the JSONL protocol trace or in the debug log. Without the variable no exporter thread exists.
//! Exits that bypass the normal end (the end of `--attach`, the second signal) still flush the spans already ended.
//! `status --watch` follows the in-process runtime, or with `--attach URL` a running `serve --http` instance.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;
use rmcp::ServiceExt as _;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use support::{Daemon, Host, Mcp, Sandbox, eventually, pid_alive};

const SECRET_ENV: &str = "planted-env-secret-5d21";
const SECRET_HEADER: &str = "planted-header-secret-8c3f";
const SECRET_ARG: &str = "planted-arg-secret-17ab";
const SECRETS: [&str; 3] = [SECRET_ENV, SECRET_HEADER, SECRET_ARG];
/// Name of the OpenTelemetry SDK's batch span processor thread.
const BATCH_THREAD: &str = "OpenTelemetry";

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Span {
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Vec<u8>,
    name: String,
    attrs: BTreeMap<String, String>,
    service: String,
}

#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<Span>>>,
    /// Every request body as received (searched for planted secrets).
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Received {
    /// The names of the spans received so far (for failure messages).
    fn span_names(&self) -> Vec<String> {
        self.spans.lock().unwrap().iter().map(|s| s.name.clone()).collect()
    }
}

fn value_text(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

async fn receive(State(received): State<Received>, body: Bytes) -> &'static str {
    received.bodies.lock().unwrap().push(body.to_vec());
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export request");
    let mut spans = received.spans.lock().unwrap();
    for rs in request.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .map(value_text)
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                spans.push(Span {
                    trace_id: s.trace_id,
                    span_id: s.span_id,
                    parent: s.parent_span_id,
                    name: s.name,
                    attrs: s.attributes.iter().map(|kv| (kv.key.clone(), value_text(kv))).collect(),
                    service: service.clone(),
                });
            }
        }
    }
    "" // an empty ExportTraceServiceResponse
}

/// An OTLP/HTTP receiver on a loopback port: `POST /v1/traces`.
async fn receiver() -> (Received, String) {
    let received = Received::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(receive))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (received, format!("http://{addr}"))
}

/// An HTTP fixture that demands `Authorization: Bearer SECRET_HEADER`.
fn http_fixture(dir: &Path) -> (Daemon, u16) {
    let port_file = dir.join("fixture.port");
    let mut cmd = std::process::Command::new(mcp_fixture::bin_path());
    cmd.args([
        "--http",
        "127.0.0.1:0",
        "--require-bearer",
        SECRET_HEADER,
        "--port-file",
    ])
    .arg(&port_file)
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let daemon = Daemon::spawn(cmd, dir.join("fixture.log"));
    assert!(
        support::poll(Duration::from_secs(20), || port_file.exists()),
        "the HTTP fixture did not start: {}",
        daemon.log_text()
    );
    let port = std::fs::read_to_string(&port_file).unwrap().trim().parse().unwrap();
    (daemon, port)
}

/// `pimcp-run` serving MCP on stdio with `extra` environment, its stderr in the sandbox log.
async fn serve(sandbox: &Sandbox, extra: &[(&str, &str)]) -> Mcp {
    let mut cmd = sandbox.command(&[]);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let log = std::fs::File::create(sandbox.log()).unwrap();
    let (transport, _) = TokioChildProcess::builder(cmd).stderr(log).spawn().unwrap();
    let pid = transport.id().unwrap();
    let client = Host
        .serve(transport)
        .await
        .unwrap_or_else(|e| panic!("initialize pimcp-run: {e}\n{}", sandbox.log_text()));
    Mcp { client, pid }
}

/// Rewrites the sandbox config with `settings` added.
fn with_settings(sandbox: &Sandbox, settings: Value) {
    let mut config: Value = serde_json::from_slice(&std::fs::read(&sandbox.config).unwrap()).unwrap();
    config["settings"] = settings;
    std::fs::write(&sandbox.config, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
}

/// Names of the threads of `pid`.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

fn find<'a>(spans: &'a [Span], name: &str, attrs: &[(&str, &str)]) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| {
            s.name == name
                && attrs
                    .iter()
                    .all(|(k, v)| s.attrs.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn child<'a>(spans: &'a [Span], parent: &Span, name: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.name == name && s.parent == parent.span_id && s.trace_id == parent.trace_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_spans_link_proxy_request_tool_call_and_upstream_request_without_secrets() {
    let (received, endpoint) = receiver().await;
    let scratch = tempfile::tempdir().unwrap();
    let (_fixture, port) = http_fixture(scratch.path());
    let sandbox = Sandbox::new(json!({
        "fx": { "command": mcp_fixture::bin_path(), "env": { "API_TOKEN": SECRET_ENV } },
        "web": {
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "headers": { "Authorization": format!("Bearer {SECRET_HEADER}") },
        },
    }));
    with_settings(&sandbox, json!({ "trace": true }));
    let mcp = serve(
        &sandbox,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("PIMCP_LOG", "debug"),
        ],
    )
    .await;
    assert!(
        thread_names(mcp.pid).iter().any(|n| n.starts_with(BATCH_THREAD)),
        "no batch processor thread with an endpoint set: {:?}",
        thread_names(mcp.pid)
    );
    for server in ["fx", "web"] {
        let text = mcp
            .ok(json!({ "tool": format!("{server}_echo"), "args": { "text": SECRET_ARG } }))
            .await;
        assert_eq!(text.trim(), SECRET_ARG);
    }
    let failed = mcp
        .mcp(json!({ "tool": "fx_fail", "args": { "message": SECRET_ARG } }))
        .await;
    assert!(failed.is_error, "{failed:?}");
    let pid = mcp.pid;
    mcp.close().await;
    assert!(!pid_alive(pid));

    // pimcp-run flushed its exporter before exiting; nothing should still be in flight, but poll to be safe.
    let has_calls = || find(&received.spans.lock().unwrap(), "tool_call", &[]).len() >= 3;
    assert!(
        eventually(Duration::from_secs(10), async || has_calls()).await,
        "spans never arrived: {:?}\n--- pimcp-run stderr\n{}",
        received.span_names(),
        sandbox.log_text()
    );
    let spans = received.spans.lock().unwrap().clone();
    assert!(spans.iter().all(|s| s.service == "pimcp-run"), "service.name");
    let names: std::collections::BTreeSet<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    for expected in [
        "proxy_request",
        "tool_call",
        "upstream_request",
        "connect",
        "state_transition",
    ] {
        assert!(names.contains(expected), "no {expected} span in {names:?}");
    }
    // Only pimcp's own spans are exported (process-wrap's spawn span carries the child's environment).
    assert!(
        !names.iter().any(|n| ["pre_spawn", "serve_inner", "Actor"].contains(n)),
        "{names:?}"
    );

    for (server, tool, outcome) in [
        ("fx", "echo", "ok"),
        ("web", "echo", "ok"),
        ("fx", "fail", "tool-error"),
    ] {
        let calls = find(&spans, "tool_call", &[("server", server), ("tool", tool)]);
        assert_eq!(calls.len(), 1, "{server}/{tool}: {calls:#?}");
        let call = calls[0];
        assert_eq!(call.attrs.get("outcome").map(String::as_str), Some(outcome), "{call:?}");
        assert!(call.attrs.contains_key("duration_ms"), "{call:?}");
        let request = spans
            .iter()
            .find(|s| s.span_id == call.parent && s.trace_id == call.trace_id)
            .unwrap_or_else(|| panic!("the parent of {call:?} was not exported"));
        assert_eq!(request.name, "proxy_request");
        assert_eq!(request.attrs.get("mode").map(String::as_str), Some("call"));
        let host = spans
            .iter()
            .find(|s| s.span_id == request.parent && s.trace_id == request.trace_id)
            .unwrap_or_else(|| panic!("the parent of {request:?} was not exported"));
        assert_eq!(host.name, "host_request");
        assert!(
            host.parent.is_empty(),
            "a host request without a traceparent starts its trace: {host:?}"
        );
        let upstream = child(&spans, call, "upstream_request");
        assert_eq!(upstream.len(), 1, "{upstream:#?}");
        assert_eq!(upstream[0].attrs.get("method").map(String::as_str), Some("tools/call"));
        assert_eq!(upstream[0].attrs.get("outcome").map(String::as_str), Some(outcome));
        if tool == "echo" {
            // The first call to each lazy server connected it, inside the same trace.
            let connect = child(&spans, request, "connect");
            assert_eq!(connect.len(), 1, "{server}: {connect:#?}");
            assert_eq!(connect[0].attrs.get("server").map(String::as_str), Some(server));
            assert_eq!(connect[0].attrs.get("outcome").map(String::as_str), Some("ok"));
        }
    }

    let trace_file = sandbox.agent.join("pimcp/trace.jsonl");
    let trace_text = std::fs::read_to_string(&trace_file).unwrap();
    for server in ["fx", "web"] {
        assert!(
            trace_text.lines().any(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["server"] == server && v["method"] == "tools/call" && v["dir"] == "in"
            }),
            "no tools/call answer from {server} in the protocol trace"
        );
    }
    let bodies = received.bodies.lock().unwrap();
    let log = sandbox.log_text();
    assert!(
        log.contains("DEBUG"),
        "PIMCP_LOG=debug produced no debug log to search:\n{log}"
    );
    for secret in SECRETS {
        for body in bodies.iter() {
            assert!(
                !body.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} in an OTLP export"
            );
        }
        assert!(!trace_text.contains(secret), "{secret} in the protocol trace");
        assert!(!log.contains(secret), "{secret} in the debug log:\n{log}");
    }
}

/// W3C trace context end to end: a host's `_meta.traceparent` parents pimcp's spans, and the upstream request
/// (`tools/call`, and `resources/read` too) carries pimcp's own `traceparent` in the same trace, so one trace id
/// runs from host to server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_id_runs_from_the_host_through_pimcp_to_the_upstream() {
    const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const HOST_SPAN: &str = "00f067aa0ba902b7";
    let (received, endpoint) = receiver().await;
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("fx.log");
    let sandbox = Sandbox::new(json!({
        "fx": { "command": mcp_fixture::bin_path(), "args": ["--event-log", log] },
    }));
    let mcp = serve(&sandbox, &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())]).await;
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.0.set_traceparent(format!("00-{TRACE_ID}-{HOST_SPAN}-01"));
    meta.0.set_tracestate("vendor=value");
    let mut params = rmcp::model::CallToolRequestParams::new("mcp").with_arguments(
        json!({ "tool": "fx_echo", "args": { "text": "traced" } })
            .as_object()
            .cloned()
            .unwrap(),
    );
    params.meta = Some(meta);
    let result = mcp.client.call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    // A resource read carries the host's trace the same way.
    const READ_SPAN: &str = "1111222233334444";
    let mut read = rmcp::model::ReadResourceRequestParams::new("fixture://readme");
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.0.set_traceparent(format!("00-{TRACE_ID}-{READ_SPAN}-01"));
    read.meta = Some(meta);
    mcp.client.read_resource(read).await.unwrap();
    mcp.close().await;
    let read_parent = mcp_fixture::read_event_log(&log)
        .into_iter()
        .find(|e| e["event"] == "read")
        .and_then(|e| e["traceparent"].as_str().map(str::to_owned))
        .expect("the upstream read carried no traceparent");
    assert!(read_parent.contains(TRACE_ID), "{read_parent}");
    assert!(
        !read_parent.contains(READ_SPAN),
        "the upstream's parent is pimcp's span: {read_parent}"
    );

    let upstream_parent = mcp_fixture::read_event_log(&log)
        .into_iter()
        .find(|e| e["event"] == "call")
        .and_then(|e| e["traceparent"].as_str().map(str::to_owned))
        .expect("the upstream call carried no traceparent");
    let parts: Vec<&str> = upstream_parent.split('-').collect();
    assert_eq!(parts.len(), 4, "{upstream_parent}");
    assert_eq!(parts[1], TRACE_ID, "the upstream request left the host's trace");
    assert_ne!(
        parts[2], HOST_SPAN,
        "the upstream's parent is pimcp's span, not the host's"
    );

    let trace = hex(TRACE_ID);
    let arrived = || {
        let spans = received.spans.lock().unwrap();
        find(&spans, "upstream_request", &[])
            .iter()
            .any(|s| s.trace_id == trace)
    };
    assert!(
        eventually(Duration::from_secs(10), async || arrived()).await,
        "no upstream_request span in the host's trace: {:?}\n{}",
        received.span_names(),
        sandbox.log_text()
    );
    let spans = received.spans.lock().unwrap().clone();
    let host = find(&spans, "host_request", &[]);
    assert_eq!(host.len(), 1, "{host:#?}");
    assert_eq!(host[0].trace_id, trace);
    assert_eq!(
        host[0].parent,
        hex(HOST_SPAN),
        "the host's span is the parent of pimcp's"
    );
    let upstream = find(&spans, "upstream_request", &[]);
    assert_eq!(upstream.len(), 1, "{upstream:#?}");
    assert_eq!(
        hex(parts[2]),
        upstream[0].span_id,
        "the upstream's parent is the upstream_request span"
    );
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_there_is_no_exporter() {
    let sandbox = Sandbox::new(json!({ "fx": { "command": mcp_fixture::bin_path() } }));
    let mcp = serve(&sandbox, &[]).await;
    mcp.ok(json!({ "tool": "fx_echo", "args": { "text": "hi" } })).await;
    let threads = thread_names(mcp.pid);
    assert!(!threads.is_empty(), "cannot read the threads of pimcp-run");
    assert!(
        !threads.iter().any(|n| n.starts_with(BATCH_THREAD)),
        "an exporter thread without an endpoint: {threads:?}"
    );
    mcp.close().await;
    // The binary's `status` command exits normally with or without the variable set to an unreachable collector.
    let mut cmd = sandbox.command(&["status", "--json"]);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    let out = support::run_to_end(cmd, Duration::from_secs(30)).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let snapshot: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(snapshot["schema"], "pimcp/status/v1");
}

/// `pimcp-run status --watch …` in the sandbox with stdout piped.
fn watch_command(sandbox: &Sandbox, args: &[&str]) -> tokio::process::Child {
    let mut full = vec!["status", "--watch"];
    full.extend_from_slice(args);
    let mut cmd = sandbox.command(&full);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd.spawn().unwrap()
}

/// Reads lines until one satisfies `done`; returns everything read. Fails the test after `deadline`.
async fn read_until(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    deadline: Duration,
    mut done: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    let outcome = tokio::time::timeout(deadline, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let hit = done(&line);
            seen.push(line);
            if hit {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(outcome, Ok(true)),
        "not seen within {deadline:?}; got {seen:#?}"
    );
    seen
}

/// Ctrl-C for a process: SIGINT.
fn interrupt(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_prints_one_line_per_change_and_stops_on_ctrl_c() {
    use tokio::io::AsyncBufReadExt as _;
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("fx.pid");
    let sandbox = Sandbox::new(json!({
        "fx": { "command": mcp_fixture::bin_path(), "args": ["--pid-file", pid_file], "lifecycle": "eager" },
        "lazy": { "command": mcp_fixture::bin_path() },
    }));
    let mut child = watch_command(&sandbox, &[]);
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let seen = read_until(&mut lines, Duration::from_secs(30), |l| {
        l.contains(" fx ready (") && l.contains("tools)")
    })
    .await;
    assert!(seen.iter().any(|l| l.ends_with(" lazy cached")), "{seen:#?}");
    assert!(seen.iter().any(|l| l.contains(" fx connecting")), "{seen:#?}");
    assert!(
        seen.iter().all(|l| l.len() > 21 && l.as_bytes()[10] == b'T'),
        "timestamped: {seen:#?}"
    );
    let server_pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(pid_alive(server_pid));

    interrupt(child.id().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("status --watch did not stop on SIGINT")
        .unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(!pid_alive(server_pid), "the eager server outlived status --watch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_json_streams_the_snapshot_then_events() {
    use tokio::io::AsyncBufReadExt as _;
    let sandbox = Sandbox::new(json!({ "fx": { "command": mcp_fixture::bin_path() } }));
    let mut child = watch_command(&sandbox, &["--json", "--connect"]);
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let seen = read_until(&mut lines, Duration::from_secs(30), |l| {
        let v: Value = serde_json::from_str(l).unwrap();
        v["event"] == "state" && v["server"] == "fx" && v["state"]["state"] == "ready"
    })
    .await;
    let first: Value = serde_json::from_str(&seen[0]).unwrap();
    assert_eq!(first["schema"], "pimcp/status/v1");
    assert_eq!(first["servers"][0]["name"], "fx");
    for line in &seen[1..] {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(v["event"].is_string() && v["atMs"].is_u64(), "{line}");
    }
    interrupt(child.id().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_redraws_the_table_on_a_terminal() {
    use tokio::io::AsyncWriteExt as _;
    let sandbox = Sandbox::new(json!({ "fx": { "command": mcp_fixture::bin_path(), "lifecycle": "eager" } }));
    // `script` gives pimcp-run a terminal; ^C written to it reaches pimcp-run as SIGINT, as at a keyboard.
    let inner = format!(
        "exec {} --config {} status --watch",
        support::pimcp_run().display(),
        sandbox.config.display()
    );
    let mut cmd = tokio::process::Command::new("script");
    cmd.args(["-qefc", &inner, "/dev/null"])
        .env_clear()
        .env("TERM", "xterm")
        .current_dir(&sandbox.dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    for (key, value) in sandbox.env() {
        cmd.env(key, value);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let screen = Arc::new(Mutex::new(Vec::<u8>::new()));
    let reader = {
        let screen = screen.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                screen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let text = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    // Two frames at least: the first one (connecting) and a redraw once the server is ready.
    assert!(
        eventually(Duration::from_secs(30), async || {
            let t = text();
            t.matches("\x1b[H\x1b[2J").count() >= 2 && t.contains("✓ ready")
        })
        .await,
        "no redrawn table: {:?}",
        text()
    );
    assert!(text().contains("SERVER") && text().contains("pimcp-run status --watch"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\x03").await.unwrap();
    stdin.flush().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("status --watch did not stop on ^C")
        .unwrap();
    assert_eq!(status.code(), Some(130), "{:?}", text());
    let _ = reader.await;
}

/// The OTLP variables of a process whose batch processor would only export on its own after ten minutes: spans can
/// reach the receiver during the test only through an explicit flush.
fn flush_only_env(endpoint: &str) -> [(&'static str, String); 2] {
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "600000".to_owned()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_flushes_its_span_before_exiting() {
    let (received, endpoint) = receiver().await;
    let sandbox = Sandbox::new(json!({ "fx": { "command": mcp_fixture::bin_path() } }));
    let serve = sandbox.serve_http(&[]);
    let mut cmd = sandbox.command(&["--attach", &serve.url()]);
    for (k, v) in flush_only_env(&endpoint) {
        cmd.env(k, v);
    }
    cmd.kill_on_drop(true);
    let attach_log = sandbox.path("attach.log");
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(&attach_log).unwrap())
        .spawn()
        .unwrap();
    let pid = transport.id().unwrap();
    let client = Host.serve(transport).await.unwrap();
    let mcp = Mcp { client, pid };
    let text = mcp
        .ok(json!({ "tool": "fx_echo", "args": { "text": "via attach" } }))
        .await;
    assert_eq!(text.trim(), "via attach");
    mcp.close().await;

    let attach_span = || {
        received
            .spans
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.name == "attach")
            .cloned()
    };
    assert!(
        eventually(Duration::from_secs(10), async || attach_span().is_some()).await,
        "the attach span was not flushed before exit: {:?}\n--- attach stderr\n{}",
        received.span_names(),
        std::fs::read_to_string(&attach_log).unwrap_or_default()
    );
    let span = attach_span().unwrap();
    assert_eq!(span.attrs.get("outcome").map(String::as_str), Some("ok"), "{span:?}");
    let requests: u64 = span.attrs["requests"].parse().unwrap();
    assert!(requests >= 2, "initialize and tools/call were relayed: {span:?}");
    assert_eq!(span.service, "pimcp-run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_still_flushes_the_spans_already_ended() {
    let (received, endpoint) = receiver().await;
    let sandbox = Sandbox::from_config(&json!({ "mcpServers": { "fx": {
        "command": support::fixture(), "args": ["--event-log", "{dir}/fx.log"]
    } } }));
    let env = flush_only_env(&endpoint);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut serve = sandbox.serve_http_with(&["--drain-timeout", "300"], &env);
    let host = support::client(&serve.url(), None).await;
    let peer = host.peer().clone();
    let echoed = support::call(&peer, "mcp", json!({ "tool": "fx_echo", "args": { "text": "before" } })).await;
    assert_eq!(support::text_of(&echoed), "before");
    // A call that keeps the drain waiting: only the second signal can end pimcp-run soon.
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
    let log = sandbox.path("fx.log");
    assert!(
        eventually(support::DEADLINE, async || support::count_events(
            &log,
            "call",
            Some("slow")
        ) == 1)
        .await
    );
    serve.signal("TERM");
    assert!(
        eventually(support::DEADLINE, async || serve
            .log_text()
            .contains("waiting for calls in flight"))
        .await,
        "the first signal starts the drain:\n{}",
        serve.log_text()
    );
    let status = serve
        .signal_again_until_exit("TERM", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("the second signal did not end pimcp-run:\n{}", serve.log_text()));
    assert_eq!(status.code(), Some(128 + 15), "{}", serve.log_text());

    let echo_call = || {
        find(
            &received.spans.lock().unwrap(),
            "tool_call",
            &[("server", "fx"), ("tool", "echo"), ("outcome", "ok")],
        )
        .len()
    };
    assert!(
        eventually(Duration::from_secs(10), async || echo_call() == 1).await,
        "the finished call's span was not flushed at the immediate exit: {:?}\n--- pimcp-run stderr\n{}",
        received.span_names(),
        serve.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_follows_a_running_serve_instance() {
    use tokio::io::AsyncBufReadExt as _;
    let sandbox = Sandbox::new(json!({ "fx": { "command": mcp_fixture::bin_path() } }));
    let serve = sandbox.serve_http(&[]);

    // Once, as JSON: the instance's own answer.
    let once = support::run_to_end(
        sandbox.command(&["status", "--attach", &serve.url(), "--json"]),
        support::DEADLINE,
    )
    .await;
    assert_eq!(once.code, Some(0), "{}", once.stderr);
    let value: Value = serde_json::from_str(&once.stdout).unwrap();
    assert_eq!(value["schema"], "pimcp/serve-status/v1");
    assert_eq!(value["status"]["servers"][0]["name"], "fx");

    let mut child = watch_command(&sandbox, &["--attach", &serve.url()]);
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let seen = read_until(&mut lines, Duration::from_secs(30), |l| l.ends_with(" fx cached")).await;
    assert!(
        seen.iter()
            .any(|l| l.ends_with("instance: 0 sessions, 0 calls in flight")),
        "{seen:#?}"
    );
    // A host connects and calls: the watch shows the session and the server coming up.
    let host = support::client(&serve.url(), None).await;
    let echoed = support::call(
        host.peer(),
        "mcp",
        json!({ "tool": "fx_echo", "args": { "text": "hi" } }),
    )
    .await;
    assert_eq!(support::text_of(&echoed), "hi");
    let seen = read_until(&mut lines, Duration::from_secs(30), |l| l.contains(" fx ready (")).await;
    let all = seen.join("\n");
    assert!(all.contains("instance: 1 session,"), "{seen:#?}");

    interrupt(child.id().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("status --watch --attach did not stop on SIGINT")
        .unwrap();
    assert_eq!(status.code(), Some(130));
    host.cancel().await.unwrap();

    // A wrong URL is an error, not a hang.
    let refused = support::run_to_end(
        sandbox.command(&[
            "status",
            "--attach",
            &format!("http://127.0.0.1:{}/mcp", support::free_port()),
        ]),
        support::DEADLINE,
    )
    .await;
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("cannot reach"), "{}", refused.stderr);
}
