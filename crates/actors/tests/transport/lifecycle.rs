//! Process lifecycle: the stderr tail, bounded close (stdin EOF → SIGTERM → SIGKILL), grandchildren, and the
//! runtime's guardian when pimcp itself is SIGKILLed.

use std::io::BufRead as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::PathBuf;
use std::time::Duration;

use pimcp_actors::CloseOutcome;
use pimcp_actors::{STDERR_TAIL_BYTES, ShutdownOutcome};

use super::support::*;

#[tokio::test]
async fn stderr_flood_keeps_only_a_bounded_tail() {
    let dir = tempfile::tempdir().unwrap();
    let conn = pimcp_actors::connect(spec(stdio_server("flood", &["--stderr-flood"]), dir.path()), ())
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
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
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
    // The server was reaped, not left as a zombie.
    assert!(
        eventually(Duration::from_secs(5), || proc_state(direct).is_none()).await,
        "{direct} not reaped"
    );
}

#[tokio::test]
async fn close_without_a_guardian_also_sweeps_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, gc_file) = (dir.path().join("pid"), dir.path().join("gc"));
    let server = stdio_server(
        "family-unguarded",
        &[
            "--pid-file",
            pid_file.to_str().unwrap(),
            "--spawn-grandchild",
            gc_file.to_str().unwrap(),
        ],
    );
    let mut s = spec(server, dir.path());
    s.process.guardian = pimcp_actors::GuardianMode::Disabled;
    let conn = pimcp_actors::connect(s, ()).await.unwrap();
    assert!(!conn.guarded);
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
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
    let pid = read_pid(&pid_file).await;
    let outcome = conn.close(Duration::from_millis(300)).await;
    assert_eq!(outcome, CloseOutcome::Process(ShutdownOutcome::Killed));
    assert!(
        eventually(Duration::from_secs(5), || is_dead(pid)).await,
        "server {pid} alive"
    );
}

/// A probe (our transport layer in its own process) connected to the fixture with its grandchild.
struct Probe {
    child: std::process::Child,
    pid_file: PathBuf,
    gc_file: PathBuf,
    /// The server process.
    server: u32,
    /// The guardian process (0 without one).
    guardian: u32,
}

/// Starts `pimcp-spawn-probe` on the fixture (with `guardian`: a path, or `none`) and waits until it is connected.
fn start_probe(guardian: &str, dir: &std::path::Path) -> Probe {
    let (pid_file, gc_file) = (dir.join("pid"), dir.join("gc"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pimcp-spawn-probe"))
        .arg(guardian)
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
    let pids: Vec<u32> = line
        .strip_prefix("ready ")
        .map(|p| p.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default();
    let [server, guardian] = pids[..] else {
        panic!("probe said {line:?}")
    };
    Probe {
        child,
        pid_file,
        gc_file,
        server,
        guardian,
    }
}

/// The guardian processes among the children of `parent` (`/proc/*/stat` and `cmdline`).
fn guardians_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1).map(str::to_owned))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let guardian = cmdline.split(|b| *b == 0).nth(1) == Some(pimcp_actors::GUARDIAN_ARG.as_bytes());
        if ppid == Some(parent) && guardian && !is_dead(pid) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn when_pimcp_is_sigkilled_the_guardian_kills_server_and_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let mut probe = start_probe(guardian().to_str().unwrap(), dir.path());
    let (pid, gc) = (read_pid(&probe.pid_file).await, read_pid(&probe.gc_file).await);
    assert_eq!(pid, probe.server, "the server is our direct child");
    assert!(!is_dead(pid) && !is_dead(gc) && !is_dead(probe.guardian));
    probe.child.kill().unwrap(); // SIGKILL
    probe.child.wait().unwrap();
    let gone = eventually(Duration::from_secs(2), || {
        is_dead(pid) && is_dead(gc) && is_dead(probe.guardian)
    })
    .await;
    if !gone {
        kill_pid(pid);
        kill_pid(gc);
        kill_pid(probe.guardian);
    }
    assert!(
        gone,
        "server {pid}, grandchild {gc} or guardian {} survived pimcp's SIGKILL",
        probe.guardian
    );
}

/// Sends `signal` (a `kill` option such as `-STOP`) to `pid`.
fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// The race behind orphaned grandchildren: pimcp is SIGKILLed, the server sees stdin EOF and exits, and only then
/// does the guardian run (here: it is stopped until then). The grandchild, which ignores EOF, still holds the
/// group, and the guardian kills it.
#[tokio::test]
async fn the_guardian_kills_the_grandchild_when_the_server_exited_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut probe = start_probe(guardian().to_str().unwrap(), dir.path());
    let (pid, gc) = (read_pid(&probe.pid_file).await, read_pid(&probe.gc_file).await);
    let guardian = probe.guardian;
    // A member of the guardian's group whose parent (this test) is outside it keeps that group from becoming
    // orphaned when the probe dies: an orphaned group with a stopped member gets SIGHUP + SIGCONT from the kernel,
    // which would wake the guardian early.
    let mut anchor = std::process::Command::new("sleep")
        .arg("1000")
        .process_group(i32::try_from(guardian).unwrap())
        .spawn()
        .unwrap();
    send_signal(guardian, "-STOP");
    probe.child.kill().unwrap(); // SIGKILL
    probe.child.wait().unwrap();
    // The fixture dies (stdin EOF, and its parent-death signal); the grandchild ignores both.
    let server_exited = eventually(Duration::from_secs(10), || is_dead(pid)).await;
    let gc_alive_meanwhile = !is_dead(gc);
    send_signal(guardian, "-CONT");
    let gone = eventually(Duration::from_secs(2), || is_dead(gc) && is_dead(guardian)).await;
    if !gone {
        kill_pid(gc);
        kill_pid(guardian);
    }
    let _ = anchor.kill();
    let _ = anchor.wait();
    assert!(server_exited, "server {pid} did not exit");
    assert!(
        gc_alive_meanwhile,
        "grandchild {gc} died before the guardian ran (the race was not set up)"
    );
    assert!(gone, "grandchild {gc} or guardian {guardian} survived pimcp's SIGKILL");
}

/// A guardian killed while pimcp lives is replaced at once, and the new one knows the running server's group.
#[tokio::test]
async fn a_killed_guardian_is_replaced_and_still_guards_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut probe = start_probe(guardian().to_str().unwrap(), dir.path());
    let (pid, gc) = (read_pid(&probe.pid_file).await, read_pid(&probe.gc_file).await);
    let first = probe.guardian;
    kill_pid(first);
    let probe_pid = probe.child.id();
    let mut second = None;
    assert!(
        eventually(Duration::from_secs(5), || {
            second = guardians_of(probe_pid).into_iter().find(|&g| g != first);
            second.is_some()
        })
        .await,
        "no guardian replaced {first}"
    );
    let second = second.unwrap();
    probe.child.kill().unwrap();
    probe.child.wait().unwrap();
    let gone = eventually(Duration::from_secs(2), || {
        is_dead(pid) && is_dead(gc) && is_dead(second)
    })
    .await;
    if !gone {
        kill_pid(pid);
        kill_pid(gc);
        kill_pid(second);
    }
    assert!(gone, "server {pid}, grandchild {gc} or guardian {second} survived");
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
async fn servers_start_with_no_signal_blocked_or_ignored_and_sigterm_reaches_them() {
    // A server must not inherit a mask or an ignored disposition of the thread that spawned it.
    let signals: u64 = [1_u32, 2, 10, 15, 17].iter().map(|s| 1_u64 << (s - 1)).sum(); // HUP INT USR1 TERM CHLD
    for guarded in [true, false] {
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
        if !guarded {
            s.process.guardian = pimcp_actors::GuardianMode::Disabled;
        }
        let conn = pimcp_actors::connect(s, ()).await.unwrap();
        assert_eq!(conn.guarded, guarded);
        let (pid, gc) = (read_pid(&pid_file).await, read_pid(&gc_file).await);
        for p in [pid, gc] {
            let (blocked, ignored) = signal_masks(p);
            assert_eq!(
                blocked & signals,
                0,
                "guarded={guarded}: {p} starts with SigBlk {blocked:016x}"
            );
            assert_eq!(
                ignored & signals,
                0,
                "guarded={guarded}: {p} starts with SigIgn {ignored:016x}"
            );
        }
        // The fixture ignores SIGTERM by handling it: the handler must run (not stay pending behind a mask).
        let outcome = conn.close(Duration::from_millis(300)).await;
        assert_eq!(outcome, CloseOutcome::Process(ShutdownOutcome::Killed));
        let events = std::fs::read_to_string(&log).unwrap();
        assert!(events.contains(r#""signal":"SIGTERM""#), "guarded={guarded}: {events}");
        assert!(
            eventually(Duration::from_secs(5), || is_dead(pid) && is_dead(gc)).await,
            "server {pid} or grandchild {gc} alive"
        );
    }
}

#[tokio::test]
async fn without_a_guardian_pdeathsig_still_kills_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut probe = start_probe("none", dir.path());
    assert_eq!(probe.guardian, 0);
    let (pid, gc) = (read_pid(&probe.pid_file).await, read_pid(&probe.gc_file).await);
    probe.child.kill().unwrap();
    probe.child.wait().unwrap();
    let server_gone = eventually(Duration::from_secs(2), || is_dead(pid)).await;
    // PDEATHSIG reaches only the direct child: the grandchild is why the guardian exists. Clean it up.
    kill_pid(gc);
    if !server_gone {
        kill_pid(pid);
    }
    assert!(server_gone, "server {pid} survived pimcp's SIGKILL");
}

#[test]
fn the_guardian_is_found_next_to_the_test_binary() {
    // Test binaries live in target/<profile>/deps; `pimcp-guardian` is built into target/<profile>.
    let found = pimcp_actors::ProcessOptions::default()
        .guardian_executable()
        .expect("pimcp-guardian found");
    assert_eq!(
        found.file_name().and_then(|f| f.to_str()),
        Some(pimcp_actors::GUARDIAN_BINARY)
    );
}

#[test]
fn the_guardian_binary_refuses_to_run_by_hand_and_ends_with_its_input() {
    let out = std::process::Command::new(guardian()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("started by pimcp"));
    // In guardian mode: stdin at its end (nothing listed) is a clean exit.
    let out = std::process::Command::new(guardian())
        .arg(pimcp_actors::GUARDIAN_ARG)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // What it is told it kills: a group listed and never released.
    let mut victim = std::process::Command::new("sleep")
        .arg("1000")
        .process_group(0)
        .spawn()
        .unwrap();
    let mut guard = std::process::Command::new(guardian())
        .arg(pimcp_actors::GUARDIAN_ARG)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    let mut stdin = guard.stdin.take().unwrap();
    writeln!(stdin, "+{}", victim.id()).unwrap();
    drop(stdin);
    assert_eq!(guard.wait().unwrap().code(), Some(0));
    assert_eq!(victim.wait().unwrap().signal(), Some(9));
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
        let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
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
