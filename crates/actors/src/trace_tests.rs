//! Tests of `trace.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use serde_json::json;

fn conn(dir: &Path, max: u64) -> ConnTrace {
    let sink = TraceSink::new(dir.join("t.jsonl"), max);
    ProtocolTrace::new(sink, "srv").connection(TransportKind::Stdio)
}

fn lines(path: &Path) -> Vec<TraceLine> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn dates_format_as_rfc3339() {
    assert_eq!(rfc3339_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    let t = UNIX_EPOCH + std::time::Duration::from_millis(951_827_696_789); // 2000-02-29T12:34:56.789Z
    assert_eq!(rfc3339_millis(t), "2000-02-29T12:34:56.789Z");
    let t = UNIX_EPOCH + std::time::Duration::from_secs(1_785_196_800); // 2026-07-28
    assert_eq!(rfc3339_millis(t), "2026-07-28T00:00:00.000Z");
}

#[test]
fn requests_pair_with_responses_and_payloads_stay_out() {
    let dir = tempfile::tempdir().unwrap();
    let c = conn(dir.path(), DEFAULT_TRACE_MAX_BYTES);
    let secret = "planted-secret-4711";
    c.record(
        Direction::Out,
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": secret}}}),
    );
    c.record(
        Direction::In,
        &json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": secret}], "isError": true}}),
    );
    c.record(
        Direction::In,
        &json!({"jsonrpc": "2.0", "id": "tok-secret-id", "method": "roots/list"}),
    );
    c.record(
        Direction::Out,
        &json!({"jsonrpc": "2.0", "id": "tok-secret-id", "error": {"code": -32602, "message": secret}}),
    );
    c.record(
        Direction::Out,
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "slow"}}),
    );
    c.record(
        Direction::Out,
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8, "reason": secret}}),
    );
    c.record(
        Direction::In,
        &json!({"jsonrpc": "2.0", "method": format!("x/{secret} with spaces")}),
    );
    let path = dir.path().join("t.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(secret), "{text}");
    assert!(!text.contains("tok-secret-id"), "{text}");
    let got = lines(&path);
    assert_eq!(got.len(), 7, "{text}");
    assert_eq!(
        (got[0].dir, got[0].kind, got[0].method.as_deref(), got[0].id.clone()),
        (Direction::Out, MessageKind::Request, Some("tools/call"), Some(json!(7)))
    );
    assert!(got[0].bytes > 50);
    assert_eq!(
        (got[1].dir, got[1].kind, got[1].method.as_deref()),
        (Direction::In, MessageKind::Response, Some("tools/call"))
    );
    assert!(got[1].duration_ms.is_some());
    assert_eq!(got[1].error.as_deref(), Some("tool-error"));
    assert_eq!(got[2].kind, MessageKind::Request);
    let hashed = got[2].id.clone().unwrap();
    assert!(hashed.as_str().unwrap().starts_with("sha256:"));
    assert_eq!(
        (
            got[3].kind,
            got[3].error_code,
            got[3].error.as_deref(),
            got[3].id.clone()
        ),
        (MessageKind::Error, Some(-32602), Some("validation"), Some(hashed))
    );
    assert_eq!(got[3].method.as_deref(), Some("roots/list"));
    assert_eq!(got[5].method.as_deref(), Some("notifications/cancelled"));
    assert_eq!(got[5].related_id, Some(json!(8)));
    assert!(got[5].duration_ms.is_some());
    assert_eq!(got[6].method.as_deref(), Some("[invalid]"));
}

#[test]
fn the_file_is_private_and_rotates_at_the_cap_keeping_one_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = conn(&dir.path().join("nested"), 1024);
    let path = dir.path().join("nested/t.jsonl");
    for id in 0..40 {
        c.record(
            Direction::Out,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}),
        );
    }
    let rotated = dir.path().join("nested/t.jsonl.1");
    let current = std::fs::metadata(&path).unwrap();
    let old = std::fs::metadata(&rotated).unwrap();
    assert!(current.len() <= 1024 && old.len() <= 1024);
    assert!(old.len() > 1024 - 200, "rotated close to the cap: {}", old.len());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(current.permissions().mode() & 0o777, 0o600);
        assert_eq!(old.permissions().mode() & 0o777, 0o600);
    }
    // The newest line is the last id, in the current file; no third file.
    let last = lines(&path).pop().unwrap();
    assert_eq!(last.id, Some(json!(39)));
    let names: Vec<_> = std::fs::read_dir(dir.path().join("nested"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(names.len(), 2);
}

#[test]
fn a_writer_whose_file_was_rotated_by_another_reopens_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let a = conn(dir.path(), DEFAULT_TRACE_MAX_BYTES);
    let b = conn(dir.path(), DEFAULT_TRACE_MAX_BYTES);
    a.record(Direction::Out, &json!({"jsonrpc": "2.0", "method": "a/1"}));
    b.record(Direction::Out, &json!({"jsonrpc": "2.0", "method": "b/1"}));
    let path = dir.path().join("t.jsonl");
    std::fs::rename(&path, dir.path().join("t.jsonl.1")).unwrap();
    a.record(Direction::Out, &json!({"jsonrpc": "2.0", "method": "a/2"}));
    b.record(Direction::Out, &json!({"jsonrpc": "2.0", "method": "b/2"}));
    let methods: Vec<_> = lines(&path).into_iter().filter_map(|l| l.method).collect();
    assert_eq!(methods, ["a/2", "b/2"]);
}

#[test]
fn an_unwritable_path_turns_the_sink_off() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let sink = TraceSink::new(dir.path().join("file/sub/t.jsonl"), 4096);
    sink.write_line(b"{}".to_vec());
    assert!(sink.inner.disabled.load(Ordering::Relaxed));
}

#[test]
fn per_server_trace_wins_over_settings() {
    let mut settings = TraceSettings::default();
    settings.enabled = true;
    let cfg = |trace: Option<bool>| {
        let mut c = pimcp_config::load_in_memory(
            &json!({"mcpServers": {"s": {"command": "x"}}}),
            &pimcp_config::LoadOptions::new("/nonexistent-home", "/nonexistent-project"),
        )
        .servers
        .remove(0);
        c.trace = trace;
        c
    };
    assert!(trace_enabled(&settings, &cfg(None)));
    assert!(!trace_enabled(&settings, &cfg(Some(false))));
    assert!(trace_enabled(&TraceSettings::default(), &cfg(Some(true))));
    assert!(!trace_enabled(&TraceSettings::default(), &cfg(None)));
}
