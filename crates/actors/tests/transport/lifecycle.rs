//! Process lifecycle: the stderr tail, bounded close (stdin EOF → SIGTERM → SIGKILL), grandchildren, and the
//! guardian shim when pimcp itself is SIGKILLed.

use std::io::BufRead as _;
use std::os::unix::process::CommandExt as _;
use std::time::Duration;

use pimcp_actors::process::{STDERR_TAIL_BYTES, ShutdownOutcome};
use pimcp_actors::transport::CloseOutcome;

use super::support::*;

#[tokio::test]
async fn stderr_flood_keeps_only_a_bounded_tail() {
    let dir = tempfile::tempdir().unwrap();
    let conn = pimcp_actors::transport::connect(spec(stdio_server("flood", &["--stderr-flood"]), dir.path()), ())
        .await
        .unwrap();
    let tail = conn.stderr.clone();
    assert!(
        eventually(Duration::from_secs(20), || tail.bytes_seen() > 256 * 1024).await,
        "flood did not arrive"
    );
    assert!(tail.len() <= STDERR_TAIL_BYTES);
    assert!(tail.snapshot().len() <= STDERR_TAIL_BYTES);
    // Still usable while flooding.
    let _ = whoami(&conn, None).await;
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn close_reaps_the_server_and_its_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, gc_file) = (dir.path().join("pid"), dir.path().join("gc"));
    let server = stdio_server(
        "family",
        &[
            "--pid-file",
            pid_file.to_str().unwrap(),
            "--spawn-grandchild",
            gc_file.to_str().unwrap(),
        ],
    );
    let conn = pimcp_actors::transport::connect(spec(server, dir.path()), ())
        .await
        .unwrap();
    let direct = conn.pid.unwrap();
    let (pid, gc) = (read_pid(&pid_file).await, read_pid(&gc_file).await);
    assert!(!is_dead(pid) && !is_dead(gc));
    let outcome = conn.close(Duration::from_secs(2)).await;
    // The fixture exits on stdin EOF; the grandchild ignores EOF and is swept with the group.
    assert_eq!(outcome, CloseOutcome::Process(ShutdownOutcome::Exited));
    assert!(
        eventually(Duration::from_secs(5), || is_dead(pid) && is_dead(gc)).await,
        "server {pid} or grandchild {gc} alive"
    );
    // Our direct child (the shim) was reaped, not left as a zombie.
    assert!(
        eventually(Duration::from_secs(5), || proc_state(direct).is_none()).await,
        "{direct} not reaped"
    );
}

#[tokio::test]
async fn close_without_the_shim_also_sweeps_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, gc_file) = (dir.path().join("pid"), dir.path().join("gc"));
    let server = stdio_server(
        "family-noshim",
        &[
            "--pid-file",
            pid_file.to_str().unwrap(),
            "--spawn-grandchild",
            gc_file.to_str().unwrap(),
        ],
    );
    let mut s = spec(server, dir.path());
    s.process.shim = pimcp_actors::process::ShimMode::Disabled;
    let conn = pimcp_actors::transport::connect(s, ()).await.unwrap();
    assert!(!conn.shimmed);
    let (pid, gc) = (read_pid(&pid_file).await, read_pid(&gc_file).await);
    assert_eq!(conn.pid, Some(pid));
    conn.close(Duration::from_secs(2)).await;
    assert!(proc_state(pid).is_none(), "server {pid} not reaped");
    assert!(
        eventually(Duration::from_secs(5), || is_dead(gc)).await,
        "grandchild {gc} alive"
    );
}

#[tokio::test]
async fn a_server_ignoring_sigterm_is_killed_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let server = stdio_server(
        "stubborn",
        &["--ignore-sigterm", "--pid-file", pid_file.to_str().unwrap()],
    );
    let conn = pimcp_actors::transport::connect(spec(server, dir.path()), ())
        .await
        .unwrap();
    let pid = read_pid(&pid_file).await;
    let outcome = conn.close(Duration::from_millis(300)).await;
    assert_eq!(outcome, CloseOutcome::Process(ShutdownOutcome::Killed));
    assert!(
        eventually(Duration::from_secs(5), || is_dead(pid)).await,
        "server {pid} alive"
    );
}

/// Starts `pimcp-spawn-probe` (our transport layer in its own process) on the fixture and returns it with the
/// server's and grandchild's pids once it is connected.
fn start_probe(shim: &str, dir: &std::path::Path) -> (std::process::Child, std::path::PathBuf, std::path::PathBuf) {
    let (pid_file, gc_file) = (dir.join("pid"), dir.join("gc"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pimcp-spawn-probe"))
        .arg(shim)
        .arg(fixture())
        .args([
            "--pid-file",
            pid_file.to_str().unwrap(),
            "--spawn-grandchild",
            gc_file.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready "), "probe said {line:?}");
    (child, pid_file, gc_file)
}

#[tokio::test]
async fn when_pimcp_is_sigkilled_the_shim_kills_server_and_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let (mut probe, pid_file, gc_file) = start_probe(shim().to_str().unwrap(), dir.path());
    let (pid, gc) = (read_pid(&pid_file).await, read_pid(&gc_file).await);
    assert!(!is_dead(pid) && !is_dead(gc));
    probe.kill().unwrap(); // SIGKILL
    probe.wait().unwrap();
    let gone = eventually(Duration::from_secs(2), || is_dead(pid) && is_dead(gc)).await;
    if !gone {
        kill_pid(pid);
        kill_pid(gc);
    }
    assert!(gone, "server {pid} or grandchild {gc} survived pimcp's SIGKILL");
}

#[tokio::test]
async fn without_the_shim_pdeathsig_still_kills_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (mut probe, pid_file, gc_file) = start_probe("none", dir.path());
    let (pid, gc) = (read_pid(&pid_file).await, read_pid(&gc_file).await);
    probe.kill().unwrap();
    probe.wait().unwrap();
    let server_gone = eventually(Duration::from_secs(2), || is_dead(pid)).await;
    // PDEATHSIG reaches only the direct child: the grandchild is why the shim exists. Clean it up.
    kill_pid(gc);
    if !server_gone {
        kill_pid(pid);
    }
    assert!(server_gone, "server {pid} survived pimcp's SIGKILL");
}

#[test]
fn the_shim_is_found_next_to_the_test_binary() {
    // Test binaries live in target/<profile>/deps; `pimcp-shim` is built into target/<profile>.
    let found = pimcp_actors::process::ProcessOptions::default()
        .shim_executable()
        .expect("pimcp-shim found");
    assert_eq!(found.file_name().and_then(|f| f.to_str()), Some("pimcp-shim"));
}

#[test]
fn the_shim_binary_refuses_to_run_by_hand() {
    let out = std::process::Command::new(shim()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("started by pimcp"));
    let out = std::process::Command::new(shim())
        .arg(pimcp_actors::process::SHIM_ARG)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_shim_exits_with_the_server_code_and_refuses_a_dead_parent() {
    // Parent pid given = our pid: the shim runs `sh -c 'exit 7'` and reports 7.
    let ours = std::process::id().to_string();
    let status = std::process::Command::new(shim())
        .args([pimcp_actors::process::SHIM_ARG, &ours, "/bin/sh", "-c", "exit 7"])
        .process_group(0)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(7));
    // A parent pid that is not ours: the shim starts nothing.
    let status = std::process::Command::new(shim())
        .args([pimcp_actors::process::SHIM_ARG, "1", "/bin/sh", "-c", "exit 7"])
        .process_group(0)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(127));
}
