//! Shared helpers: configs for fixture servers, a started runtime in a temp dir, polling toward deadlines,
//! the fixture's event log and pid liveness.

use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) use mcp_fixture::{pid_alive, read_event_log as events};
use pimcp_actors::{ErrorCategory, Runtime, RuntimeOptions, ServerState, Tuning};
use pimcp_config::{Config, LoadOptions, Severity};
use rmcp::model::JsonObject;
use serde_json::{Value, json};

pub(crate) fn fixture() -> String {
    mcp_fixture::bin_path().to_string_lossy().into_owned()
}

/// A stdio fixture server entry with extra flags.
pub(crate) fn stdio(args: &[&str]) -> Value {
    json!({ "command": fixture(), "args": args })
}

/// Short timings so recovery shows up quickly in tests.
pub(crate) fn tuning() -> Tuning {
    Tuning {
        connect_backoff_min: Duration::from_millis(50),
        connect_backoff_max: Duration::from_millis(400),
        close_grace: Duration::from_millis(500),
        ..Tuning::default()
    }
}

pub(crate) struct Harness {
    pub rt: Runtime,
    pub dir: tempfile::TempDir,
}

pub(crate) fn load(config: &Value, dir: &Path) -> Config {
    let cfg = pimcp_config::load_in_memory(config, &LoadOptions::new(dir.join("home"), dir));
    let errors: Vec<_> = cfg.problems.iter().filter(|p| p.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "config problems: {errors:?}");
    cfg
}

pub(crate) async fn start(config: Value) -> Harness {
    start_with(config, tuning()).await
}

pub(crate) async fn start_with(config: Value, tuning: Tuning) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let rt = start_in(dir.path(), &config, tuning).await;
    Harness { rt, dir }
}

pub(crate) async fn start_in(dir: &Path, config: &Value, tuning: Tuning) -> Runtime {
    let cfg = load(config, dir);
    let mut opts = RuntimeOptions::new(cfg, dir.join("agent"), dir.join("data"));
    opts.tuning = tuning;
    Runtime::start(opts).await.unwrap()
}

/// Polls `f` every 20 ms until it is true; panics naming `what` after `deadline`.
pub(crate) async fn wait_until(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    loop {
        if f() {
            return;
        }
        assert!(Instant::now() < end, "timed out after {deadline:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn state_of(rt: &Runtime, server: &str) -> ServerState {
    rt.status().server(server).map(|s| s.state.clone()).unwrap()
}

pub(crate) fn args(v: Value) -> Option<JsonObject> {
    v.as_object().cloned()
}

pub(crate) fn events_named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

pub(crate) fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub(crate) fn category(r: &pimcp_actors::Result<pimcp_actors::ToolOutput>) -> Option<ErrorCategory> {
    r.as_ref().err().map(|e| e.category())
}

/// Starts `mcp-fixture --http` on `addr` (event log `dir/events.jsonl`, port file `dir/<tag>.port`) and returns the
/// child and its port.
pub(crate) async fn http_fixture(dir: &Path, tag: &str, addr: &str, extra: &[&str]) -> (tokio::process::Child, u16) {
    let port_file = dir.join(format!("{tag}.port"));
    let log = dir.join("events.jsonl");
    let mut cmd = tokio::process::Command::new(fixture());
    cmd.args([
        "--http",
        addr,
        "--port-file",
        port_file.to_str().unwrap(),
        "--event-log",
        log.to_str().unwrap(),
    ])
    .args(extra)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .kill_on_drop(true);
    let child = cmd.spawn().unwrap();
    wait_until("fixture port file", Duration::from_secs(20), || {
        read_pid(&port_file).is_some()
    })
    .await;
    let port = read_pid(&port_file).unwrap() as u16;
    (child, port)
}
