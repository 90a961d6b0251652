//! Process lifecycle: the stderr tail, bounded close (stdin EOF → SIGTERM → SIGKILL), grandchildren, and the
//! guardian shim when pimcp itself is SIGKILLed.

use std::io::BufRead as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
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
/// server's and grandchild's pid files and the pid of its direct child (the shim, or the server) once it is connected.
fn start_probe(
    shim: &str,
    dir: &std::path::Path,
) -> (std::process::Child, std::path::PathBuf, std::path::PathBuf, u32) {
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
    let direct = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("probe said {line:?}"));
    (child, pid_file, gc_file, direct)
}

#[tokio::test]
async fn when_pimcp_is_sigkilled_the_shim_kills_server_and_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let (mut probe, pid_file, gc_file, _) = start_probe(shim().to_str().unwrap(), dir.path());
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

/// Sends `signal` (a `kill` option such as `-STOP`) to `pid`.
fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// The race behind orphaned grandchildren: pimcp is SIGKILLed, the server sees stdin EOF and exits, and the shim
/// only looks afterwards (here: it is stopped until then). It must still see that its parent is gone and kill the
/// group, instead of returning the server's exit code.
#[tokio::test]
async fn the_shim_kills_the_grandchild_when_the_server_exited_before_it_saw_pimcp_die() {
    let dir = tempfile::tempdir().unwrap();
    let (mut probe, pid_file, gc_file, shim_pid) = start_probe(shim().to_str().unwrap(), dir.path());
    let (pid, gc) = (read_pid(&pid_file).await, read_pid(&gc_file).await);
    assert_ne!(shim_pid, pid, "the probe should run the fixture behind the shim");
    // A member of the shim's group whose parent (this test) is outside it keeps the group from becoming orphaned
    // when the probe dies: an orphaned group with a stopped member gets SIGHUP + SIGCONT from the kernel, which
    // would kill the grandchild and wake the shim early.
    let mut anchor = std::process::Command::new("sleep")
        .arg("1000")
        .process_group(i32::try_from(shim_pid).unwrap())
        .spawn()
        .unwrap();
    send_signal(shim_pid, "-STOP");
    probe.kill().unwrap(); // SIGKILL
    probe.wait().unwrap();
    // The fixture exits on stdin EOF (its death signal is tied to the stopped shim, not to the probe).
    let server_exited = eventually(Duration::from_secs(10), || is_dead(pid)).await;
    let gc_alive_meanwhile = !is_dead(gc);
    send_signal(shim_pid, "-CONT");
    let gone = eventually(Duration::from_secs(2), || is_dead(gc) && is_dead(shim_pid)).await;
    if !gone {
        kill_pid(gc);
        kill_pid(shim_pid);
        let _ = anchor.kill();
    }
    // The anchor was in the group too: killed by the shim's killpg.
    let anchor_status = anchor.wait().unwrap();
    assert!(server_exited, "server {pid} did not exit on stdin EOF");
    assert!(
        gc_alive_meanwhile,
        "grandchild {gc} died before the shim ran (the race was not set up)"
    );
    assert!(gone, "grandchild {gc} or shim {shim_pid} survived pimcp's SIGKILL");
    assert_eq!(anchor_status.signal(), Some(9), "{anchor_status:?}");
}

/// `SigBlk` / `SigIgn` of a live process, from `/proc/<pid>/status`.
fn signal_masks(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
    };
    (field("SigBlk:"), field("SigIgn:"))
}

#[tokio::test]
async fn servers_start_with_the_shims_signals_unblocked_and_sigterm_reaches_them() {
    // The shim blocks these to collect them with sigtimedwait; a server must not inherit that mask.
    let shim_signals: u64 = [1_u32, 2, 10, 15, 17].iter().map(|s| 1_u64 << (s - 1)).sum(); // HUP INT USR1 TERM CHLD
    for shimmed in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (pid_file, gc_file, log) = (dir.path().join("pid"), dir.path().join("gc"), dir.path().join("events"));
        let server = stdio_server(
            "masks",
            &[
                "--ignore-sigterm",
                "--pid-file",
                pid_file.to_str().unwrap(),
                "--spawn-grandchild",
                gc_file.to_str().unwrap(),
                "--event-log",
                log.to_str().unwrap(),
            ],
        );
        let mut s = spec(server, dir.path());
        if !shimmed {
            s.process.shim = pimcp_actors::process::ShimMode::Disabled;
        }
        let conn = pimcp_actors::transport::connect(s, ()).await.unwrap();
        assert_eq!(conn.shimmed, shimmed);
        let (pid, gc) = (read_pid(&pid_file).await, read_pid(&gc_file).await);
        for p in [pid, gc] {
            let (blocked, ignored) = signal_masks(p);
            assert_eq!(
                blocked & shim_signals,
                0,
                "shimmed={shimmed}: {p} starts with SigBlk {blocked:016x}"
            );
            assert_eq!(
                ignored & shim_signals,
                0,
                "shimmed={shimmed}: {p} starts with SigIgn {ignored:016x}"
            );
        }
        // The fixture ignores SIGTERM by handling it: the handler must run (not stay pending behind a mask).
        let outcome = conn.close(Duration::from_millis(300)).await;
        assert_eq!(outcome, CloseOutcome::Process(ShutdownOutcome::Killed));
        let events = std::fs::read_to_string(&log).unwrap();
        assert!(events.contains(r#""signal":"SIGTERM""#), "shimmed={shimmed}: {events}");
        assert!(
            eventually(Duration::from_secs(5), || is_dead(pid) && is_dead(gc)).await,
            "server {pid} or grandchild {gc} alive"
        );
    }
}

#[test]
fn a_shim_whose_server_exited_leaves_no_grandchild_and_reports_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let ours = std::process::id().to_string();
    // A grandchild that dies on SIGTERM, and one that ignores it (SIGKILL after the grace, per process).
    // The second one writes its own pid once SIGTERM is ignored, and the server waits for that before exiting.
    for (script, grace_ms) in [
        (r#"sleep 1000 & echo $! > "$0"; exit 5"#, "2000"),
        (
            r#"sh -c 'trap "" TERM; echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 1000' gc "$0" &
               while [ ! -s "$0" ]; do sleep 0.01; done; exit 5"#,
            "100",
        ),
    ] {
        let gc_file = dir.path().join(format!("gc-{grace_ms}"));
        let status = std::process::Command::new(shim())
            .args([pimcp_actors::process::SHIM_ARG, &ours, "/bin/sh", "-c", script])
            .arg(&gc_file)
            .env(pimcp_actors::process::shim::GRACE_ENV, grace_ms)
            .process_group(0)
            .status()
            .unwrap();
        let gc: u32 = std::fs::read_to_string(&gc_file).unwrap().trim().parse().unwrap();
        // The shim exits only once its group is empty: no waiting needed.
        let dead = is_dead(gc);
        if !dead {
            kill_pid(gc);
        }
        assert_eq!(status.code(), Some(5), "{script}");
        assert!(dead, "grandchild {gc} outlived the shim ({script})");
    }
}

#[tokio::test]
async fn without_the_shim_pdeathsig_still_kills_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (mut probe, pid_file, gc_file, _) = start_probe("none", dir.path());
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

/// A 2026-07-28 `subscriptions/listen` stream never ends by itself: unless the close cancels it, an rmcp server keeps
/// running for its 5 s drain after stdin EOF and the close has to fall through to SIGTERM. Legacy era alike.
#[tokio::test]
async fn closing_stdio_cancels_open_requests_and_the_server_exits_on_eof() {
    use pimcp_config::ProtocolMode;
    for protocol in [ProtocolMode::Stateless20260728, ProtocolMode::Legacy] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events");
        let mut server = stdio_server("close", &["--event-log", log.to_str().unwrap()]);
        server.protocol = protocol;
        let conn = pimcp_actors::transport::connect(spec(server, dir.path()), ())
            .await
            .unwrap();
        let subscription = if protocol == ProtocolMode::Stateless20260728 {
            let filter = rmcp::model::SubscriptionFilter::builder().tools_list_changed().build();
            Some(conn.client.peer().listen(filter).await.unwrap())
        } else {
            None
        };
        // A round trip after the acknowledgment, so the server is past setting the stream up.
        let _ = whoami(&conn, None).await;
        // The grace is what a loaded machine needs to schedule the fixture's exit (2 s failed once in 40 runs at load
        // 15); a server that ignored EOF would still be signalled after it, and the test would fail.
        let outcome = conn.close(Duration::from_secs(5)).await;
        drop(subscription);
        let events = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            outcome,
            CloseOutcome::Process(ShutdownOutcome::Exited),
            "{protocol:?}: {events}"
        );
        assert!(events.contains(r#""event":"exit""#), "{protocol:?}: {events}");
        assert!(!events.contains(r#""event":"signal""#), "{protocol:?}: {events}");
    }
}
