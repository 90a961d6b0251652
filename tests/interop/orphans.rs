//! Child processes never outlive `pimcp-run`: the fixture upstream (started lazily by a call) and the grandchild it
//! leaves in its process group (`sleep 1000`, which ignores stdin EOF) both vanish within 2 s of `pimcp-run` being
//! SIGKILLed: the runtime's one guardian (`pimcp-run` itself, started with a hidden argument) kills the group when
//! its pipe from pimcp-run ends. Every stdio server of a runtime shares that one guardian.

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

    // The fixture is pimcp-run's own child; beside it runs one guardian: pimcp-run itself with the hidden argument.
    assert_eq!(parent_of(server), Some(mcp.pid));
    let guardians = guardians_of(mcp.pid);
    let [guardian] = guardians[..] else {
        panic!("one guardian expected, found {guardians:?}")
    };
    let guardian_exe = std::fs::read_link(format!("/proc/{guardian}/exe")).unwrap();
    assert_eq!(guardian_exe, std::fs::canonicalize(pimcp_run()).unwrap());

    sigkill(mcp.pid);
    assert!(
        eventually(Duration::from_secs(2), async || {
            !pid_alive(server) && !pid_alive(grandchild) && !pid_alive(guardian)
        })
        .await,
        "still alive 2 s after SIGKILL of pimcp-run: server {server} {}, grandchild {grandchild} {}, guardian {guardian} {}",
        pid_alive(server),
        pid_alive(grandchild),
        pid_alive(guardian)
    );
    drop(mcp);
}

/// Several stdio servers, one guardian: no process per server beyond the server itself. With no server started there
/// is no guardian at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stdio_server_of_a_runtime_shares_one_guardian() {
    let root = tempfile::tempdir().unwrap();
    let names = ["a", "b", "c"];
    let servers: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|name| {
            let pid_file = root.path().join(format!("{name}.pid"));
            (
                (*name).to_owned(),
                json!({ "command": mcp_fixture::bin_path(), "args": ["--pid-file", pid_file] }),
            )
        })
        .collect();
    let sandbox = Sandbox::new(serde_json::Value::Object(servers));
    let mcp = sandbox.serve().await;
    assert!(guardians_of(mcp.pid).is_empty(), "a guardian before any server started");
    let mut pids = Vec::new();
    for name in names {
        let echoed = mcp
            .ok(json!({ "tool": format!("{name}_echo"), "args": { "text": name } }))
            .await;
        assert_eq!(echoed, name);
        let mut pid = None;
        assert!(
            eventually(Duration::from_secs(10), async || {
                pid = read_pid(&root.path().join(format!("{name}.pid")));
                pid.is_some()
            })
            .await
        );
        pids.push(pid.unwrap());
    }
    let _reaper = KillLeftovers(pids.clone());
    let guardians = guardians_of(mcp.pid);
    assert_eq!(guardians.len(), 1, "{guardians:?}");
    let children = children_of(mcp.pid);
    assert_eq!(
        children.len(),
        names.len() + 1,
        "three servers and the guardian: {children:?}"
    );
    sigkill(mcp.pid);
    assert!(
        eventually(Duration::from_secs(2), async || {
            pids.iter().chain(&guardians).all(|&p| !pid_alive(p))
        })
        .await,
        "servers {pids:?} or guardian {guardians:?} alive 2 s after SIGKILL of pimcp-run"
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

/// The hidden first argument of guardian mode (`pimcp_actors::GUARDIAN_ARG`; the root package does not depend on
/// actors).
const GUARDIAN_ARG: &str = "__pimcp_guardian__";

/// The guardian processes among the children of `parent`.
fn guardians_of(parent: u32) -> Vec<u32> {
    children_of(parent)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(GUARDIAN_ARG.as_bytes()))
        })
        .collect()
}
