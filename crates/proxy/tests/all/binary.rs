//! The real `pimcp-run` binary as a host starts it (no subcommand, stdin a pipe): MCP over stdio, then a clean exit
//! on stdin EOF or SIGTERM that leaves no server process behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use serde_json::json;

use super::support::*;
use mcp_fixture::pid_alive;

/// `target/<profile>/pimcp-run`, built once per test process.
fn pimcp_run() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut build = std::process::Command::new(cargo);
            build.args(["build", "-p", "pimcp-cli", "--bin", "pimcp-run"]);
            if profile_dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build.status().unwrap();
            assert!(status.success(), "building pimcp-run failed");
            profile_dir.join("pimcp-run")
        })
        .clone()
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

struct Spawned {
    child: tokio::process::Child,
    session: rmcp::service::RunningService<rmcp::RoleClient, TestHost>,
    fixture_pid: PathBuf,
    _dir: tempfile::TempDir,
}

async fn spawn_pimcp_run() -> Spawned {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("fx.pid");
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({ "mcpServers": { "fx": stdio(&["--pid-file", &pid_file.to_string_lossy()]) } }).to_string(),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(pimcp_run());
    cmd.arg("--config")
        .arg(&config)
        .current_dir(dir.path())
        .env("HOME", dir.path().join("home"))
        .env("PI_CODING_AGENT_DIR", dir.path().join("agent"))
        .env_remove("MCP_DIRECT_TOOLS")
        .env_remove("PIMCP_CONFIG_MODE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let session = rmcp::ServiceExt::serve(TestHost::plain(), (stdout, stdin))
        .await
        .unwrap();
    Spawned {
        child,
        session,
        fixture_pid: pid_file,
        _dir: dir,
    }
}

async fn exercise(s: &Spawned) -> u32 {
    let tools = s.session.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "mcp");
    let mut params = rmcp::model::CallToolRequestParams::new("mcp");
    params.arguments = json!({ "tool": "fx_echo", "args": { "text": "from the binary" } })
        .as_object()
        .cloned();
    let r = s.session.call_tool(params).await.unwrap();
    assert_eq!(text_of(&r), "from the binary");
    let pid = read_pid(&s.fixture_pid).expect("the fixture wrote its pid");
    assert!(pid_alive(pid));
    pid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pimcp_run_serves_stdio_and_exits_on_stdin_eof() {
    let mut s = spawn_pimcp_run().await;
    let fixture = exercise(&s).await;
    // Closing stdin (the host quits) ends pimcp-run, which closes its servers.
    s.session.cancel().await.unwrap();
    let status = tokio::time::timeout(DEADLINE, s.child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    wait_until("the fixture server to be gone", DEADLINE, || !pid_alive(fixture)).await;
}

/// The host keeps stdin open; a signal alone must end pimcp-run (exit code, not death by signal) and its servers.
async fn exits_on(signal: &str) {
    let mut s = spawn_pimcp_run().await;
    let fixture = exercise(&s).await;
    let pid = s.child.id().unwrap();
    let killed = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(DEADLINE, s.child.wait()).await.unwrap().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{signal}: exited cleanly rather than killed: {status:?}"
    );
    wait_until("the fixture server to be gone", DEADLINE, || !pid_alive(fixture)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pimcp_run_exits_on_sigterm_and_leaves_no_child() {
    exits_on("-TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pimcp_run_exits_on_sigint_and_leaves_no_child() {
    exits_on("-INT").await;
}
