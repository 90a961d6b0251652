//! Shared helpers: server configs for the fixture, connect specs, `whoami`, and pid polling toward a deadline.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pimcp_actors::{ConnectSpec, Connection};
use pimcp_actors::{GuardianMode, ProcessOptions};
use pimcp_config::{HttpTransport, SecretValue, ServerConfig, StdioTransport, Transport};
use rmcp::model::CallToolRequestParams;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) fn fixture() -> String {
    mcp_fixture::bin_path().to_string_lossy().into_owned()
}

pub(crate) fn guardian() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pimcp-guardian"))
}

pub(crate) fn server(name: &str, transport: Transport) -> ServerConfig {
    let mut server = ServerConfig::new(name, transport);
    server.timeouts.startup = Duration::from_secs(20);
    server
}

pub(crate) fn stdio_transport(args: &[&str]) -> StdioTransport {
    StdioTransport::new(fixture(), args.iter().map(|a| (*a).to_owned()).collect())
}

pub(crate) fn stdio_server(name: &str, args: &[&str]) -> ServerConfig {
    server(name, Transport::Stdio(stdio_transport(args)))
}

pub(crate) fn http_server(name: &str, url: &str) -> ServerConfig {
    server(name, Transport::Http(HttpTransport::new(url)))
}

pub(crate) fn plain(v: &str) -> SecretValue {
    SecretValue::Plain(pimcp_config::Secret::new(v))
}

pub(crate) fn spec(server: ServerConfig, project_dir: &Path) -> ConnectSpec {
    ConnectSpec {
        server,
        project_dir: project_dir.to_path_buf(),
        http: pimcp_actors::SharedHttp::lazy(),
        era_hint: None,
        process: ProcessOptions {
            guardian: GuardianMode::Path(guardian()),
            ..ProcessOptions::default()
        },
        cancel: CancellationToken::new(),
        resume_session: None,
        access_token: None,
        token_source: None,
        trace: None,
        max_message_bytes: pimcp_config::Settings::DEFAULT_MAX_MESSAGE_BYTES,
    }
}

/// Calls `whoami` (optionally checking env var `var`) and parses its JSON report.
pub(crate) async fn whoami<H: rmcp::ClientHandler>(conn: &Connection<H>, var: Option<&str>) -> Value {
    let mut params = CallToolRequestParams::new("whoami");
    if let Some(var) = var {
        params = params.with_arguments(serde_json::json!({ "var": var }).as_object().unwrap().clone());
    }
    let result = conn.client.call_tool(params).await.unwrap();
    let text = result.content[0].as_text().unwrap().text.clone();
    serde_json::from_str(&text).unwrap()
}

/// The process state letter from `/proc/<pid>/stat`, or `None` when the pid no longer exists.
pub(crate) fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rfind(')').and_then(|i| stat[i + 1..].trim_start().chars().next())
}

/// Gone, or a zombie (an orphan's zombie is reaped by init, not by us).
pub(crate) fn is_dead(pid: u32) -> bool {
    matches!(proc_state(pid), None | Some('Z' | 'X'))
}

/// Polls `cond` every 20 ms until it holds or `limit` passes; returns whether it held.
pub(crate) async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a decimal pid written by the fixture (`--pid-file`, `--spawn-grandchild`), waiting for it to appear.
pub(crate) async fn read_pid(path: &Path) -> u32 {
    let mut pid = None;
    let found = eventually(Duration::from_secs(10), || {
        pid = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok());
        pid.is_some()
    })
    .await;
    assert!(found, "no pid in {}", path.display());
    pid.unwrap()
}

/// SIGKILLs a pid we own in a test (cleanup of deliberately orphaned processes).
pub(crate) fn kill_pid(pid: u32) {
    let _ = std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status();
}
