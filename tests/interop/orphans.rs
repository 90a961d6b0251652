//! Child processes never outlive `pimcp-run`: the fixture upstream (started lazily by a call) and the grandchild it
//! leaves in its process group (`sleep 1000`, which ignores stdin EOF) both vanish within 2 s of `pimcp-run` being
//! SIGKILLed — the guardian shim (`pimcp-shim`, or `pimcp-run` itself re-executed in shim mode) kills the group. The
//! shim may be the standby one pimcp-run starts ahead of the first call; an idle standby dies with pimcp-run too.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support::{Sandbox, eventually, pid_alive, pimcp_run};

/// Reads a pid file the fixture writes atomically.
fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_pimcp_run_leaves_no_child_or_grandchild() {
    let root = tempfile::tempdir().unwrap();
    let (server_pid_file, grandchild_pid_file) = (root.path().join("server.pid"), root.path().join("grandchild.pid"));
    let sandbox = Sandbox::new(json!({
        "fixture": {
            "command": mcp_fixture::bin_path(),
            "args": ["--pid-file", server_pid_file, "--spawn-grandchild", grandchild_pid_file],
        }
    }));
    let mcp = sandbox.serve().await;
    let echoed = mcp
        .ok(json!({ "tool": "fixture_echo", "args": { "text": "spawned" } }))
        .await;
    assert_eq!(echoed, "spawned");
    let (mut server, mut grandchild) = (None, None);
    assert!(
        eventually(Duration::from_secs(10), async || {
            server = read_pid(&server_pid_file);
            grandchild = read_pid(&grandchild_pid_file);
            server.is_some() && grandchild.is_some()
        })
        .await,
        "the fixture did not write its pid files"
    );
    let (server, grandchild) = (server.unwrap(), grandchild.unwrap());
    let _reaper = KillLeftovers(vec![server, grandchild]);
    assert!(pid_alive(server) && pid_alive(grandchild));

    // The fixture's parent is the guardian shim, started with the hidden shim argument (or as the standby shim, which
    // the first start takes).
    let shim = parent_of(server).expect("fixture parent");
    assert_ne!(
        shim, mcp.pid,
        "the fixture should run behind the shim, not directly under pimcp-run"
    );
    let shim_cmdline = std::fs::read(format!("/proc/{shim}/cmdline")).unwrap_or_default();
    let shim_args: Vec<String> = shim_cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(
        matches!(
            shim_args.get(1).map(String::as_str),
            Some(arg) if arg == pimcp_actors_shim_arg() || arg == STANDBY_ARG
        ),
        "{shim_args:?}"
    );
    // The small `pimcp-shim` next to pimcp-run when it is built, else pimcp-run itself.
    let shim_exe = std::fs::read_link(format!("/proc/{shim}/exe")).unwrap();
    let run = std::fs::canonicalize(pimcp_run()).unwrap();
    let dedicated = run.with_file_name("pimcp-shim");
    assert!(shim_exe == run || shim_exe == dedicated, "{shim_exe:?}");

    sigkill(mcp.pid);
    assert!(
        eventually(Duration::from_secs(2), async || {
            !pid_alive(server) && !pid_alive(grandchild) && !pid_alive(shim)
        })
        .await,
        "still alive 2 s after SIGKILL of pimcp-run: server {server} {}, grandchild {grandchild} {}, shim {shim} {}",
        pid_alive(server),
        pid_alive(grandchild),
        pid_alive(shim)
    );
    drop(mcp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_pimcp_run_ends_its_idle_standby_shim() {
    let sandbox = Sandbox::new(json!({ "fixture": { "command": mcp_fixture::bin_path() } }));
    let mcp = sandbox.serve().await;
    // No call: the lazy server never starts, and the standby shim waits for it.
    let mut standby = None;
    assert!(
        eventually(Duration::from_secs(10), async || {
            standby = children_of(mcp.pid).into_iter().find(|&pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(STANDBY_ARG.as_bytes()))
            });
            standby.is_some()
        })
        .await,
        "pimcp-run started no standby shim for its lazy stdio server"
    );
    let standby = standby.unwrap();
    let _reaper = KillLeftovers(vec![standby]);
    sigkill(mcp.pid);
    assert!(
        eventually(Duration::from_secs(2), async || !pid_alive(standby)).await,
        "the idle standby shim {standby} is still alive 2 s after SIGKILL of pimcp-run"
    );
    drop(mcp);
}

fn sigkill(pid: u32) {
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL {pid} failed");
}

/// Live children of `parent` (from `/proc/*/stat`).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| parent_of(pid) == Some(parent) && pid_alive(pid))
        .collect()
}

/// Kills (by pid) whatever a failed run left behind, so a red test does not leak `sleep 1000` processes.
struct KillLeftovers(Vec<u32>);

impl Drop for KillLeftovers {
    fn drop(&mut self) {
        for pid in self.0.iter().copied().filter(|p| pid_alive(*p)) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The hidden first argument of shim mode (`pimcp_actors::SHIM_ARG`; the root package does not depend on actors).
fn pimcp_actors_shim_arg() -> &'static str {
    "__pimcp_shim__"
}

/// The hidden first argument of a standby shim (`pimcp_actors::process::STANDBY_ARG`).
const STANDBY_ARG: &str = "__pimcp_shim_standby__";
