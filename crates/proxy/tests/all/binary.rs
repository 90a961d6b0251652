//! The real `pimcp-run` binary as a host starts it (no subcommand, stdin a pipe): MCP over stdio, then a clean exit
//! on stdin EOF or SIGTERM that leaves no server process behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

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
    let log = dir.path().join("fx.log");
    let config = dir.path().join("mcp.json");
    let args = [
        "--pid-file",
        &pid_file.to_string_lossy(),
        "--event-log",
        &log.to_string_lossy(),
    ];
    std::fs::write(&config, json!({ "mcpServers": { "fx": stdio(&args) } }).to_string()).unwrap();
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
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["mcp", "mcpScript"]);
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

/// A host that quits with a call in flight closes both pipes: the call is cancelled upstream as soon as stdin ends
/// and pimcp-run exits, leaving no child (`bench/stdin-close` measures how soon).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_quits_mid_call_has_the_call_cancelled_and_pimcp_run_exits_promptly() {
    /// Far below the call's length (600 s), with room for a loaded machine.
    const EXIT_BOUND: Duration = Duration::from_secs(10);
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fx.log");
    let args = ["--event-log", &log.to_string_lossy()];
    let mut child = spawn_serving(dir.path(), json!({ "fx": stdio(&args) }));
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "mcp", "arguments": { "tool": "fx_slow", "args": { "ms": 600_000 } } } });
    stdin.write_all(format!("{init}\n").as_bytes()).await.unwrap();
    let mut answer = String::new();
    stdout.read_line(&mut answer).await.unwrap();
    assert!(answer.contains(r#""id":1"#), "{answer}");
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    stdin
        .write_all(format!("{initialized}\n{call}\n").as_bytes())
        .await
        .unwrap();
    wait_until("the slow call to reach the fixture", DEADLINE, || {
        count_events(&log, "call", Some("slow")) == 1
    })
    .await;
    // The host quits: its ends of both pipes close.
    drop((stdin, stdout));
    let status = tokio::time::timeout(EXIT_BOUND, child.wait())
        .await
        .expect("pimcp-run still running: the call whose host is gone was waited for")
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        count_events(&log, "cancelled", Some("slow")),
        1,
        "the call was not cancelled upstream"
    );
    let fixture = std::fs::read_to_string(&log).unwrap();
    let pid = fixture
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|e| e["pid"].as_u64())
        .expect("the fixture logs its pid");
    wait_until("the fixture server to be gone", DEADLINE, || !pid_alive(pid as u32)).await;
}

/// Claude Code stops its MCP servers with SIGINT and then SIGTERM 0.1 s later: one request to stop gracefully
/// (exit 0), not the second signal's immediate exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_then_sigterm_at_once_is_one_graceful_stop() {
    let mut s = spawn_pimcp_run().await;
    let fixture = exercise(&s).await;
    let pid = s.child.id().unwrap().to_string();
    for signal in ["-INT", "-TERM"] {
        let sent = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap();
        assert!(sent.success());
        // The host's own gap between the two signals (part of the scenario, not a wait for an outcome).
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = tokio::time::timeout(DEADLINE, s.child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0), "one graceful stop: {status:?}");
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

/// The spill directory of a SIGKILLed pimcp-run stays in `$TMPDIR` (nothing can remove it); the next start sweeps it.
#[test]
fn the_spill_directory_of_a_killed_pimcp_run_is_swept_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(&config, r#"{"mcpServers": {}}"#).unwrap();
    let spill_dirs = || -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("pimcp-output-"))
            .collect();
        found.sort();
        found
    };
    let start = || {
        std::process::Command::new(pimcp_run())
            .arg("--config")
            .arg(&config)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .env("TMPDIR", &tmp)
            .env("PIMCP_DATA_DIR", dir.path().join("data"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut first = start();
    while spill_dirs().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = spill_dirs();
    assert_eq!(left.len(), 1, "pimcp-run made its spill directory: {left:?}");
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(left[0].exists(), "SIGKILL leaves the directory behind");

    let mut second = start();
    while left[0].exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !left[0].exists(),
        "the next start swept the dead process's spill directory"
    );
    drop(second.stdin.take());
    assert!(second.wait().unwrap().success());
    assert_eq!(
        spill_dirs(),
        Vec::<PathBuf>::new(),
        "a clean exit removes its own directory"
    );
}

/// Every process below `root`, with its command line (Linux `/proc`).
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            continue;
        }
        let ppid = fields.get(1).and_then(|p| p.parse::<u32>().ok()).unwrap_or(0);
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        parents.push((pid, ppid, cmdline));
    }
    let mut found = vec![root];
    let mut out = Vec::new();
    while let Some(parent) = found.pop() {
        for (pid, ppid, cmdline) in &parents {
            if *ppid == parent {
                found.push(*pid);
                out.push((*pid, cmdline.clone()));
            }
        }
    }
    out
}

/// The pimcp-run processes below `root` that serve MCP (its guardian, `pimcp-run __pimcp_guardian__`, excluded).
fn nested_pimcps(root: u32) -> Vec<(u32, String)> {
    descendants(root)
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("pimcp-run") && !cmd.contains(pimcp_actors::GUARDIAN_ARG))
        .collect()
}

/// `pimcp-run` serving `servers` (an `mcpServers` object) on piped stdio in `dir`, with a HOME there.
fn spawn_serving(dir: &Path, servers: serde_json::Value) -> tokio::process::Child {
    let config = dir.join("mcp.json");
    std::fs::write(&config, json!({ "mcpServers": servers }).to_string()).unwrap();
    tokio::process::Command::new(pimcp_run())
        .arg("--config")
        .arg(&config)
        .current_dir(dir)
        .env("HOME", dir.join("home"))
        .env("PI_CODING_AGENT_DIR", dir.join("agent"))
        .env_remove("MCP_DIRECT_TOOLS")
        .env_remove("PIMCP_CONFIG_MODE")
        .env_remove(pimcp_actors::NESTING_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// `pimcp-run` serving `servers` over stdio to a test host, in a temp HOME.
async fn serve_config(servers: serde_json::Value) -> (tokio::process::Child, TestSession, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_serving(dir.path(), servers);
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let session = rmcp::ServiceExt::serve(TestHost::plain(), (stdout, stdin))
        .await
        .unwrap();
    (child, session, dir)
}

type TestSession = rmcp::service::RunningService<rmcp::RoleClient, TestHost>;

async fn status_text(session: &TestSession) -> String {
    let mut params = rmcp::model::CallToolRequestParams::new("mcp");
    params.arguments = json!({}).as_object().cloned();
    text_of(&session.call_tool(params).await.unwrap())
}

/// A keep-alive entry that is pimcp-run itself is never started: one pimcp process tree (pimcp-run, its guardian and
/// its other servers), and the model's status says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_entry_naming_pimcp_run_is_never_started() {
    let me = pimcp_run().to_string_lossy().into_owned();
    let (child, session, _dir) = serve_config(json!({
        "me": { "command": me, "lifecycle": "keep-alive" },
        "fx": stdio(&[]),
    }))
    .await;
    let pid = child.id().unwrap();
    let status = status_text(&session).await;
    assert!(status.contains("this is pimcp itself"), "{status}");
    // Watch the tree for a while: with keep-alive, a pimcp that starts itself multiplies within milliseconds.
    let end = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < end {
        let nested = nested_pimcps(pid);
        assert!(nested.is_empty(), "pimcp started itself: {nested:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    session.cancel().await.unwrap();
}

/// pimcp behind a wrapper the configuration check cannot see through (`sh -c`, with keep-alive): the nested pimcp
/// starts no server of its own at the nesting limit, answers the handshake as pimcp, and is closed for good. The
/// tree stays bounded and ends with no nested pimcp-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_pimcp_among_its_own_servers_is_closed_and_the_tree_stays_bounded() {
    let me = pimcp_run().to_string_lossy().into_owned();
    let (child, session, _dir) = serve_config(json!({
        "me": { "command": "sh", "args": ["-c", format!("exec '{me}'")], "lifecycle": "keep-alive" },
        "fx": stdio(&[]),
    }))
    .await;
    let pid = child.id().unwrap();
    let mut most = 0;
    let end = tokio::time::Instant::now() + DEADLINE;
    let status = loop {
        let status = status_text(&session).await;
        most = most.max(nested_pimcps(pid).len());
        if status.contains("this is pimcp itself") {
            break status;
        }
        assert!(tokio::time::Instant::now() < end, "never refused: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.contains("answered the handshake as pimcp"), "{status}");
    wait_until("the nested pimcp-run to be gone", DEADLINE, || {
        most = most.max(nested_pimcps(pid).len());
        nested_pimcps(pid).is_empty()
    })
    .await;
    // At most the nested one and, below it, one at the nesting limit that starts nothing.
    assert!(most <= 2, "{most} nested pimcp-run processes at once");
    session.cancel().await.unwrap();
}
