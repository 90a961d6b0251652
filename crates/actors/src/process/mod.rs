//! Child processes of stdio servers: spawning in an own process group watched by the runtime's guardian, the bounded
//! shutdown sequence, the stderr tail, and `npx`/`npm exec` resolution. Every OS-specific call of the runtime goes
//! through `crate::sys` (process groups on Unix, a Job Object per server on Windows).
//!
//! Invariant: a [`ChildProcess`] never leaves anything running behind it. [`ChildProcess::shutdown`] ends the
//! leader and sweeps the group before reaping the leader (an unreaped zombie keeps the group id reserved, so the
//! sweep can never hit a recycled group), and `Drop` kills the group when shutdown was skipped.

#[cfg(unix)]
mod guardian;
#[cfg(windows)]
#[path = "no_guardian.rs"]
mod guardian;
mod npx;
mod stderr;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use tokio::process::{ChildStdin, ChildStdout};

use crate::sys::{self, Stop};

pub(crate) use guardian::Guardian;
pub use guardian::guardian_main_if_requested;
pub(crate) use npx::resolve_npx;
pub use stderr::{STDERR_TAIL_BYTES, StderrTail};

pub(crate) use crate::sys::is_executable;

/// Default wait after closing stdin, and again after SIGTERM (a bounded graceful close).
pub(crate) const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long we wait for a group to die after SIGKILL before giving up on reaping (only D-state processes linger).
const KILL_WAIT: Duration = Duration::from_secs(2);
/// Poll interval while waiting for a child to exit without reaping it.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// argv\[1\] that switches a binary into guardian mode (ignored on Windows, which needs no guardian).
pub const GUARDIAN_ARG: &str = "__pimcp_guardian__";
/// Name of the guardian binary looked up next to the current executable ([`GuardianMode::Auto`]).
pub const GUARDIAN_BINARY: &str = "pimcp-guardian";
/// Environment variable naming the guardian executable ([`GuardianMode::Auto`]).
pub(crate) const GUARDIAN_ENV: &str = "PIMCP_GUARDIAN";
/// How many pimcp runtimes started this process, one inside the other: each stdio server gets its runtime's depth
/// plus one. A runtime at the maximum depth (2) starts no server, so a pimcp that reaches itself through a wrapper the
/// configuration check and the handshake check cannot see in time still makes a bounded process tree.
pub const NESTING_ENV: &str = "PIMCP_NESTING";
/// The depth at which a runtime starts no server: pimcp → a server → pimcp still works (an agent host served as an
/// MCP server that uses pimcp itself), one level more does not.
pub(crate) const MAX_NESTING: u32 = 2;

/// This process's [`NESTING_ENV`] depth (0 when unset or unreadable).
pub(crate) fn nesting_depth() -> u32 {
    std::env::var(NESTING_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}
/// Variables a child keeps with `inheritEnv: false` (on Windows the ones a program needs to start at all:
/// `SystemRoot`, `PATHEXT`, the profile and temporary directories, …). With `inheritEnv: true` it gets pimcp's
/// environment without pimcp's control variables ([`strip_control_env`]).
pub(crate) const MINIMAL_ENV: &[&str] = crate::sys::MINIMAL_ENV;

/// Which executable serves as the runtime's guardian (see `process::guardian`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardianMode {
    /// `PIMCP_GUARDIAN`, else `pimcp-guardian` next to the current executable (or in its parent directory, which
    /// covers test binaries in `target/*/deps`), else none (a warning is logged once).
    #[default]
    Auto,
    /// This executable; it is invoked with the hidden first argument [`GUARDIAN_ARG`].
    Path(PathBuf),
    /// The current executable, which calls [`guardian_main_if_requested`] first thing in `main` (e.g. `pimcp-run`).
    CurrentExe,
    /// No guardian: process groups + `PR_SET_PDEATHSIG` only (grandchildren may survive a SIGKILL of pimcp).
    Disabled,
}

/// Process settings shared by every stdio server of a runtime.
#[derive(Clone, Debug)]
pub struct ProcessOptions {
    /// Whether and how a guardian process watches the servers' process groups.
    pub guardian: GuardianMode,
    /// Wait after closing stdin, and again after SIGTERM, before escalating.
    pub close_grace: Duration,
    /// Rewrite `npx …` / `npm exec …` to the installed package binary when it can be found.
    pub resolve_npx: bool,
    /// JSON file caching npx resolutions for 24 h; `None` = no cache file.
    pub npx_cache: Option<PathBuf>,
    /// The guardian process, started on first use; `Runtime::start` gives each runtime one of its own.
    pub guardian_process: Guardian,
}

impl Default for ProcessOptions {
    fn default() -> Self {
        ProcessOptions {
            guardian: GuardianMode::Auto,
            close_grace: DEFAULT_CLOSE_GRACE,
            resolve_npx: true,
            npx_cache: None,
            guardian_process: Guardian::default(),
        }
    }
}

impl ProcessOptions {
    /// The guardian executable to use, if any (see [`GuardianMode`]).
    pub fn guardian_executable(&self) -> Option<PathBuf> {
        if cfg!(windows) {
            // Each server's Job Object does the guardian's job there.
            return None;
        }
        match &self.guardian {
            GuardianMode::Disabled => None,
            GuardianMode::Path(p) => Some(p.clone()),
            GuardianMode::CurrentExe => std::env::current_exe().ok(),
            GuardianMode::Auto => {
                let found = find_guardian_auto();
                if found.is_none() {
                    static WARNED: OnceLock<()> = OnceLock::new();
                    WARNED.get_or_init(|| {
                        tracing::warn!(
                            "no `{GUARDIAN_BINARY}` found (set {GUARDIAN_ENV}); stdio servers run without a guardian, \
                             so their grandchildren may outlive pimcp if it is killed with SIGKILL"
                        );
                    });
                }
                found
            }
        }
    }
}

fn find_guardian_auto() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(GUARDIAN_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(GUARDIAN_BINARY))
        .find(|p| is_executable(p))
}

/// Finds `program` the way `execvp` would (with `PATHEXT` on Windows), but with the child's `PATH` and working
/// directory.
pub(crate) fn find_program(program: &str, path_var: Option<&OsString>, cwd: &Path) -> Option<PathBuf> {
    if sys::names_a_path(program) {
        let p = Path::new(program);
        let p = if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
        return sys::command_files(p).into_iter().find(|p| is_executable(p));
    }
    let path_var = path_var?;
    std::env::split_paths(path_var)
        .map(|dir| if dir.is_absolute() { dir } else { cwd.join(dir) })
        .flat_map(|dir| sys::command_files(dir.join(program)))
        .find(|p| is_executable(p))
}

/// Removes pimcp's own control variables (`PIMCP_*`: the `serve --http` token, log filter, data directory, …) that
/// `cmd` would inherit: no child of pimcp sees them. Variables set on `cmd` afterwards (a server's `env`) stay.
pub(crate) fn strip_control_env(cmd: &mut std::process::Command) {
    for (key, _) in std::env::vars_os().filter(|(key, _)| pimcp_config::is_control_env(key)) {
        cmd.env_remove(key);
    }
}

/// Everything needed to start one stdio server process.
#[derive(Clone)]
pub(crate) struct SpawnPlan {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// `false`: start from an empty environment plus [`MINIMAL_ENV`].
    pub inherit_env: bool,
    /// Applied last (overrides); values may be secrets.
    pub env: Vec<(String, String)>,
    /// The guardian executable and the runtime's guardian process that watches the server's group.
    pub guardian: Option<(PathBuf, Guardian)>,
}

impl std::fmt::Debug for SpawnPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnPlan")
            .field("program", &self.program)
            .field("n_args", &self.args.len())
            .field("cwd", &self.cwd)
            .field("inherit_env", &self.inherit_env)
            .field(
                "env_keys",
                &self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .field("guardian", &self.guardian.as_ref().map(|(exe, _)| exe))
            .finish()
    }
}

/// A spawned server leading its own process group, plus its protocol pipes.
pub(crate) struct Spawned {
    pub child: ChildProcess,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: Option<tokio::process::ChildStderr>,
}

impl SpawnPlan {
    /// Spawns the server, in a new process group that the runtime's guardian watches. Must run on a long-lived thread
    /// (any tokio worker): `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits. `Err` when the
    /// guardian cannot be started (nothing is spawned then) or the spawn fails.
    pub(crate) fn spawn(&self) -> std::io::Result<Spawned> {
        if let Some((exe, guardian)) = &self.guardian {
            guardian.ensure(exe)?;
        }
        let our_pid = std::process::id();
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args).current_dir(&self.cwd);
        if self.inherit_env {
            strip_control_env(cmd.as_std_mut());
        } else {
            cmd.env_clear();
            for &key in MINIMAL_ENV {
                if let Some(v) = std::env::var_os(key) {
                    cmd.env(key, v);
                }
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.env(NESTING_ENV, (nesting_depth() + 1).to_string());
        sys::prepare_server(&mut cmd, our_pid);
        let guardian = self.guardian.as_ref().map(|(_, guardian)| guardian.clone());
        spawn_leader(cmd, guardian)
    }
}

/// Spawns `cmd` with piped stdio as the leader of a new process group (a job of its own on Windows), killed on drop,
/// watched by `guardian`.
fn spawn_leader(mut cmd: tokio::process::Command, guardian: Option<Guardian>) -> std::io::Result<Spawned> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut wrapped = CommandWrap::from(cmd);
    sys::contain_tree(&mut wrapped);
    wrapped.wrap(KillOnDrop);
    let child = wrapped.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| std::io::Error::other("child exited before its pid was read"))?;
    let pgid = i32::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?;
    // At once: the group is ours until its leader is reaped, which only `ChildProcess` does.
    if let Some(guardian) = &guardian {
        guardian.watch(pgid);
    }
    let mut child = ChildProcess {
        child,
        pid,
        pgid,
        guardian,
        status: None,
        gone: false,
    };
    let stdin = child
        .child
        .stdin()
        .take()
        .ok_or_else(|| std::io::Error::other("child stdin missing"))?;
    let stdout = child
        .child
        .stdout()
        .take()
        .ok_or_else(|| std::io::Error::other("child stdout missing"))?;
    let stderr = child.child.stderr().take();
    Ok(Spawned {
        child,
        stdin,
        stdout,
        stderr,
    })
}

/// How the bounded close of a stdio server's process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownOutcome {
    /// The process exited on its own (stdin EOF) within the grace period.
    Exited,
    /// It needed SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
    /// It survived SIGKILL for a while (uninterruptible sleep); it was left to the kernel.
    Unreaped,
}

/// A server process leading its own process group.
pub(crate) struct ChildProcess {
    child: Box<dyn ChildWrapper>,
    pid: u32,
    pgid: i32,
    /// Watches the group until the leader is reaped.
    guardian: Option<Guardian>,
    status: Option<ExitStatus>,
    /// The leader can no longer be waited for (reaped, or `wait` failed): its group id may be recycled, so we must
    /// never signal the group again.
    gone: bool,
}

impl std::fmt::Debug for ChildProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildProcess")
            .field("pid", &self.pid)
            .field("guarded", &self.guardian.is_some())
            .field("status", &self.status)
            .finish()
    }
}

impl ChildProcess {
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the runtime's guardian watches the server's group.
    pub(crate) fn is_guarded(&self) -> bool {
        self.guardian.is_some()
    }

    /// Resolves once the direct child has exited (without reaping it). Cancel-safe.
    pub(crate) async fn exited(&self) {
        loop {
            if self.has_exited() {
                return;
            }
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    fn has_exited(&self) -> bool {
        self.gone || sys::child_has_exited(self.pid).unwrap_or(true)
    }

    /// Asks the server's tree to stop (see [`Stop`]); `false` when nothing was sent.
    fn stop_tree(&mut self, how: Stop) -> bool {
        sys::stop_tree(self.child.as_mut(), self.pgid, how).unwrap_or(false)
    }

    async fn exited_within(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.exited()).await.is_ok()
    }

    /// The bounded close sequence, to call after the server's stdin was closed: wait `grace` for the child to exit,
    /// SIGTERM the group and wait `grace`, SIGKILL the group; then sweep what is left of the group (SIGTERM, `grace`,
    /// SIGKILL) and reap. Takes at most about `4 × grace + 2 s`. On Windows, where no SIGTERM exists, the steps
    /// that would send one are skipped and "kill" ends the server's job.
    pub(crate) async fn shutdown(&mut self, grace: Duration) -> ShutdownOutcome {
        if self.gone {
            return ShutdownOutcome::Exited;
        }
        let mut outcome = ShutdownOutcome::Exited;
        if !self.exited_within(grace).await {
            outcome = ShutdownOutcome::Terminated;
            let terminated = self.stop_tree(Stop::Terminate);
            if !terminated || !self.exited_within(grace).await {
                outcome = ShutdownOutcome::Killed;
                self.stop_tree(Stop::Kill);
                if !self.exited_within(KILL_WAIT).await {
                    tracing::warn!(
                        pid = self.pid,
                        "process survived SIGKILL for {KILL_WAIT:?}; leaving it to the kernel"
                    );
                    return ShutdownOutcome::Unreaped;
                }
            }
        }
        self.sweep_group(grace).await;
        self.reap().await;
        outcome
    }

    /// Ends whatever is left in the group after the leader exited (the leader is an unreaped zombie, so the
    /// group id is still ours).
    async fn sweep_group(&mut self, grace: Duration) {
        if !sys::tree_has_others(self.pgid) {
            return;
        }
        if self.stop_tree(Stop::Terminate) {
            let deadline = tokio::time::Instant::now() + grace;
            while tokio::time::Instant::now() < deadline {
                if !sys::tree_has_others(self.pgid) {
                    return;
                }
                tokio::time::sleep(EXIT_POLL * 2).await;
            }
        }
        self.stop_tree(Stop::Kill);
    }

    /// Reaps the exited leader (bounded). The guardian forgets the group first, while the unreaped leader still
    /// reserves its id.
    async fn reap(&mut self) {
        if self.gone {
            return;
        }
        self.release_guardian();
        match tokio::time::timeout(KILL_WAIT, self.child.wait()).await {
            Ok(Ok(status)) => {
                self.status = Some(status);
                self.gone = true;
            }
            Ok(Err(_)) => self.gone = true,
            Err(_) => {}
        }
    }

    /// After the child exited on its own (exit at start): sweep its group without delay and reap it.
    pub(crate) async fn collect_exit(&mut self) -> Option<ExitStatus> {
        if !self.gone && self.has_exited() {
            self.sweep_group(Duration::ZERO).await;
            self.reap().await;
        }
        self.status
    }

    /// Immediate SIGKILL to the whole group, then reap (bounded). Used when a connect is abandoned.
    pub(crate) async fn kill_now(&mut self) {
        if self.gone {
            return;
        }
        self.stop_tree(Stop::Kill);
        if self.exited_within(KILL_WAIT).await {
            self.reap().await;
        }
    }
}

impl ChildProcess {
    fn release_guardian(&mut self) {
        if let Some(guardian) = self.guardian.take() {
            guardian.release(self.pgid);
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if !self.gone {
            // Not reaped yet, so the group id is still ours: kill everything in it. Tokio reaps the leader
            // (kill_on_drop) in the background.
            self.stop_tree(Stop::Kill);
        }
        self.release_guardian();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[cfg(unix)]
    #[test]
    fn finds_programs_on_the_given_path_only() {
        let path = OsString::from("/nonexistent:/bin:/usr/bin");
        assert!(find_program("sh", Some(&path), Path::new("/")).is_some());
        assert!(find_program("sh", Some(&OsString::from("/nonexistent")), Path::new("/")).is_none());
        assert!(find_program("definitely-not-a-program-xyz", Some(&path), Path::new("/")).is_none());
        assert_eq!(
            find_program("/bin/sh", None, Path::new("/")),
            Some(PathBuf::from("/bin/sh"))
        );
    }

    #[test]
    fn explicit_and_disabled_guardian_modes() {
        let opts = ProcessOptions {
            guardian: GuardianMode::Path("/x/guardian".into()),
            ..ProcessOptions::default()
        };
        // Windows needs none: each server's Job Object ends its tree with pimcp.
        let explicit = if cfg!(windows) {
            None
        } else {
            Some(PathBuf::from("/x/guardian"))
        };
        assert_eq!(opts.guardian_executable(), explicit);
        let opts = ProcessOptions {
            guardian: GuardianMode::Disabled,
            ..ProcessOptions::default()
        };
        assert_eq!(opts.guardian_executable(), None);
    }
}
