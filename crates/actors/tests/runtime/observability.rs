//! Observability against the real fixture: the JSONL protocol trace (lines and fields, per-server switch,
//! default path, rotation at the cap, 0600, no planted secret), tracing spans with parent links that survive the
//! actor hops (caller → router → server actor → call task → upstream request, also when the call waits for a
//! connect), and the status snapshot's per-server fields.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pimcp_actors::{CallOptions, Direction, ErrorCategory, MessageKind, ServerState, TraceLine};
use serde_json::json;
use tracing::Instrument as _;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

use super::support::*;

const SECRET: &str = "planted-secret-b7e1c9";

fn trace_lines(path: &Path) -> Vec<TraceLine> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad trace line {l:?}: {e}")))
        .collect()
}

/// The file is readable by its owner only (mode 0600 on Unix; Windows relies on the profile directory's ACL).
fn assert_private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    #[cfg(not(unix))]
    assert!(path.is_file(), "{}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_trace_writes_metadata_lines_and_rotates_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("traces/pimcp.jsonl");
    let max_bytes = 8 * 1024;
    let config = json!({
        "settings": { "trace": { "enabled": true, "file": trace.to_str().unwrap(), "maxBytes": max_bytes } },
        "mcpServers": {
            // The legacy era: initialize, and server→client requests (roots/list) on the same connection.
            "fx": { "command": fixture(), "protocol": "legacy", "env": { "API_TOKEN": SECRET } },
            "quiet": { "command": fixture(), "trace": false },
        }
    });
    let rt = start_in(dir.path(), &config, tuning()).await;
    let out = rt
        .call("fx_echo", args(json!({"text": SECRET})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), SECRET);
    let failed = rt
        .call("fx_fail", args(json!({"message": SECRET})), CallOptions::default())
        .await;
    assert_eq!(category(&failed), Some(ErrorCategory::ToolError));
    let _ = rt.call("fx_roots", None, CallOptions::default()).await.unwrap();
    let missing = rt.read_resource("fx", &format!("fixture://{SECRET}")).await;
    assert!(missing.is_err(), "{missing:?}");
    rt.call("quiet_echo", args(json!({"text": "x"})), CallOptions::default())
        .await
        .unwrap();

    let lines = trace_lines(&trace);
    assert_private(&trace);
    assert!(lines.iter().all(|l| l.server == "fx" && l.v == 1), "only fx is traced");
    let method = |l: &TraceLine| l.method.clone().unwrap_or_default();
    let find = |dir: Direction, kind: MessageKind, m: &str| {
        lines
            .iter()
            .find(|l| l.dir == dir && l.kind == kind && method(l) == m)
            .unwrap_or_else(|| panic!("no {dir:?} {kind:?} {m} in {lines:#?}"))
            .clone()
    };
    let init = find(Direction::Out, MessageKind::Request, "initialize");
    assert_eq!(init.id, Some(json!(0)));
    let init_reply = find(Direction::In, MessageKind::Response, "initialize");
    assert!(init_reply.duration_ms.is_some() && init_reply.bytes > 0);
    find(Direction::Out, MessageKind::Notification, "notifications/initialized");
    find(Direction::Out, MessageKind::Request, "tools/list");
    let calls: Vec<&TraceLine> = lines
        .iter()
        .filter(|l| l.dir == Direction::Out && method(l) == "tools/call")
        .collect();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    let answers: Vec<&TraceLine> = lines
        .iter()
        .filter(|l| l.dir == Direction::In && l.kind == MessageKind::Response && method(l) == "tools/call")
        .collect();
    assert_eq!(answers.len(), 3, "{answers:#?}");
    assert!(answers.iter().all(|a| a.duration_ms.is_some()));
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.error.as_deref() == Some("tool-error"))
            .count(),
        1,
        "the fail call is a tool error: {answers:#?}"
    );
    // A server→client request and our answer to it, paired by id.
    let roots = find(Direction::In, MessageKind::Request, "roots/list");
    let roots_answer = lines
        .iter()
        .find(|l| {
            l.dir == Direction::Out && l.id == roots.id && method(l) == "roots/list" && l.kind != MessageKind::Request
        })
        .unwrap_or_else(|| panic!("no answer to roots/list in {lines:#?}"));
    assert!(roots_answer.duration_ms.is_some());
    // A JSON-RPC error keeps its code and category, never its message.
    let error = find(Direction::In, MessageKind::Error, "resources/read");
    assert!(error.error_code.is_some() && error.error.is_some(), "{error:?}");

    // Enough traffic to pass the cap twice: one old file is kept, both under the cap.
    let rotated = dir.path().join("traces/pimcp.jsonl.1");
    for _ in 0..60 {
        rt.call("fx_echo", args(json!({"text": SECRET})), CallOptions::default())
            .await
            .unwrap();
    }
    assert!(rotated.exists(), "no rotation after 60 calls");
    for file in [&trace, &rotated] {
        let len = std::fs::metadata(file).unwrap().len();
        assert!(len <= max_bytes, "{} is {len} bytes", file.display());
        assert_private(file);
        assert!(!trace_lines(file).is_empty());
    }
    assert_eq!(std::fs::read_dir(dir.path().join("traces")).unwrap().count(), 2);
    rt.shutdown(Duration::from_secs(5)).await;

    for file in [&trace, &rotated] {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(!text.contains(SECRET), "planted secret in {}", file.display());
        assert!(
            !text.contains("API_TOKEN") && !text.contains("echo\""),
            "payload in {}",
            file.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_trace_flag_alone_writes_the_default_file_in_the_agent_dir() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"fx": { "command": fixture(), "trace": true }, "other": stdio(&[])}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.call("fx_echo", args(json!({"text": "hi"})), CallOptions::default())
        .await
        .unwrap();
    rt.call("other_echo", args(json!({"text": "hi"})), CallOptions::default())
        .await
        .unwrap();
    rt.shutdown(Duration::from_secs(5)).await;
    let path = dir.path().join("agent/pimcp").join(pimcp_actors::TRACE_FILE_NAME);
    let lines = trace_lines(&path);
    assert!(
        lines.iter().any(|l| l.method.as_deref() == Some("tools/call")),
        "{lines:#?}"
    );
    assert!(lines.iter().all(|l| l.server == "fx"));
    assert_private(&path);
}

/// One span as the capturing layer saw it; `seq` is unique (span ids are reused once a span closes).
#[derive(Debug, Clone)]
struct SpanRec {
    seq: usize,
    name: &'static str,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
}

#[derive(Default, Clone)]
struct Captured {
    spans: Arc<Mutex<Vec<SpanRec>>>,
    /// Live span id → its record.
    live: Arc<Mutex<HashMap<u64, usize>>>,
    /// Every event's fields (to prove the planted secret is not logged either).
    events: Arc<Mutex<Vec<String>>>,
}

struct FieldsVisitor<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for FieldsVisitor<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Captured {
    fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &tracing::span::Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut FieldsVisitor(&mut fields));
        let parent_id = ctx.span(id).and_then(|s| s.parent()).map(|p| p.id().into_u64());
        let mut live = self.live.lock().unwrap();
        let parent = parent_id.and_then(|p| live.get(&p).copied());
        let mut spans = self.spans.lock().unwrap();
        let seq = spans.len();
        live.insert(id.into_u64(), seq);
        spans.push(SpanRec {
            seq,
            name: attrs.metadata().name(),
            parent,
            fields,
        });
    }

    fn on_record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>, _ctx: Context<'_, S>) {
        let Some(seq) = self.live.lock().unwrap().get(&id.into_u64()).copied() else {
            return;
        };
        values.record(&mut FieldsVisitor(&mut self.spans.lock().unwrap()[seq].fields));
    }

    fn on_close(&self, id: tracing::span::Id, _ctx: Context<'_, S>) {
        self.live.lock().unwrap().remove(&id.into_u64());
    }

    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut FieldsVisitor(&mut fields));
        self.events.lock().unwrap().push(format!("{fields:?}"));
    }
}

impl Captured {
    fn spans(&self) -> Vec<SpanRec> {
        self.spans.lock().unwrap().clone()
    }
}

/// The spans named `name` whose parent is `parent`.
fn children<'a>(spans: &'a [SpanRec], parent: &SpanRec, name: &str) -> Vec<&'a SpanRec> {
    spans
        .iter()
        .filter(|s| s.name == name && s.parent == Some(parent.seq))
        .collect()
}

// A current-thread runtime keeps every actor and task on this thread, so the thread-local subscriber sees them all
// without touching the global one other tests share.
#[tokio::test(flavor = "current_thread")]
async fn spans_link_caller_tool_call_and_upstream_request_across_actor_hops() {
    let captured = Captured::default();
    // Our crates at every level (what pimcp-run exports over OTLP is a subset). Third-party spans are not ours to
    // vouch for: process-wrap's spawn span carries the child's environment, rmcp's trace events whole messages;
    // pimcp-run keeps them out of the exporter and caps them in logs.
    let ours = tracing_subscriber::filter::Targets::new()
        .with_target("pimcp_actors", tracing::Level::TRACE)
        .with_target("pimcp_auth", tracing::Level::TRACE)
        .with_target("runtime", tracing::Level::TRACE);
    let subscriber =
        tracing_subscriber::registry().with(tracing_subscriber::Layer::with_filter(captured.clone(), ours));
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"fx": { "command": fixture(), "env": { "API_TOKEN": SECRET } }}});
    let rt = start_in(dir.path(), &config, tuning()).await;

    // First call: fx is lazy and unknown, so the call waits for a connect before it is dispatched.
    let first = tracing::info_span!("proxy_request", mode = "call");
    let out = rt
        .call("fx_echo", args(json!({"text": SECRET})), CallOptions::default())
        .instrument(first)
        .await
        .unwrap();
    assert_eq!(out.text(), SECRET);
    // Second call: already connected.
    let second = tracing::info_span!("proxy_request", mode = "call");
    let failed = rt
        .call("fx_fail", args(json!({"message": SECRET})), CallOptions::default())
        .instrument(second)
        .await;
    assert_eq!(category(&failed), Some(ErrorCategory::ToolError));
    rt.shutdown(Duration::from_secs(5)).await;

    let spans = captured.spans();
    let roots: Vec<&SpanRec> = spans.iter().filter(|s| s.name == "proxy_request").collect();
    assert_eq!(roots.len(), 2, "{spans:#?}");
    for (root, outcome) in roots.iter().zip(["ok", "tool-error"]) {
        let calls = children(&spans, root, "tool_call");
        assert_eq!(calls.len(), 1, "one tool_call under {root:?}: {spans:#?}");
        let call = calls[0];
        assert_eq!(call.fields.get("server").map(String::as_str), Some("fx"));
        assert_eq!(call.fields.get("outcome").map(String::as_str), Some(outcome));
        assert!(
            call.fields.contains_key("tool") && call.fields.contains_key("duration_ms"),
            "{call:?}"
        );
        let upstream = children(&spans, call, "upstream_request");
        assert_eq!(upstream.len(), 1, "one upstream_request under {call:?}: {spans:#?}");
        assert_eq!(upstream[0].fields.get("method").map(String::as_str), Some("tools/call"));
        assert_eq!(upstream[0].fields.get("outcome").map(String::as_str), Some(outcome));
    }
    assert_eq!(roots[0].fields.get("mode").map(String::as_str), Some("call"));
    // The connect the first call caused is part of its trace.
    let connect = children(&spans, roots[0], "connect");
    assert_eq!(connect.len(), 1, "{spans:#?}");
    assert_eq!(connect[0].fields.get("outcome").map(String::as_str), Some("ok"));
    let transitions: Vec<(String, String)> = spans
        .iter()
        .filter(|s| s.name == "state_transition")
        .map(|s| (s.fields["from"].clone(), s.fields["to"].clone()))
        .collect();
    for pair in [("cached", "connecting"), ("connecting", "ready")] {
        assert!(
            transitions.contains(&(pair.0.into(), pair.1.into())),
            "{pair:?} not in {transitions:?}"
        );
    }

    let leaks: Vec<String> = spans
        .iter()
        .map(|s| format!("{s:?}"))
        .chain(captured.events.lock().unwrap().iter().cloned())
        .filter(|s| s.contains(SECRET))
        .collect();
    assert!(leaks.is_empty(), "planted secret in spans or events: {leaks:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_snapshot_has_every_per_server_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {
        "fx": stdio(&[]),
        "broken": stdio(&["--exit-at-start"]),
    }});
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.call("fx_echo", args(json!({"text": "hi"})), CallOptions::default())
        .await
        .unwrap();
    assert!(rt.connect("broken").await.is_err());
    let snapshot = serde_json::to_value(rt.status()).unwrap();
    assert_eq!(snapshot["schema"], "pimcp/status/v1");
    let fx = &snapshot["servers"][1];
    assert_eq!(fx["name"], "fx");
    assert_eq!(fx["state"], "ready");
    assert!(fx["toolCount"].as_u64().unwrap() >= 10, "{fx}");
    assert_eq!(fx["resourceCount"], 3);
    assert!(fx["protocolVersion"].is_string(), "{fx}");
    assert!(fx["uptimeMs"].is_u64(), "{fx}");
    assert_eq!(fx["failures"], 0);
    let broken = &snapshot["servers"][0];
    assert_eq!(broken["name"], "broken");
    assert_eq!(broken["lastErrorCategory"], "connection", "{broken}");
    assert!(broken["reason"].is_string(), "{broken}");
    assert!(broken["failures"].as_u64().unwrap() >= 1, "{broken}");
    assert!(matches!(
        state_of(&rt, "broken"),
        ServerState::Backoff { .. } | ServerState::Failed { .. }
    ));
    rt.shutdown(Duration::from_secs(5)).await;
}
