//! Child processes of stdio servers: spawning in an own process group (optionally behind the guardian shim),
//! the bounded shutdown sequence, the stderr tail, and `npx`/`npm exec` resolution.
//!
//! Invariant: a [`ChildProcess`] never leaves anything running behind it. [`ChildProcess::shutdown`] ends the
//! leader and sweeps the group before reaping the leader (an unreaped zombie keeps the group id reserved, so the
//! sweep can never hit a recycled group), and `Drop` kills the group when shutdown was skipped.

mod npx;
pub mod shim;
mod standby;
mod stderr;
pub(crate) mod sys;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::process::{ChildStdin, ChildStdout};

pub use npx::{NpxResolution, resolve_npx};
pub use shim::{SHIM_ARG, STANDBY_ARG, shim_main_if_requested};
pub use standby::StandbySlot;
pub use stderr::{STDERR_TAIL_BYTES, StderrTail};

/// Default wait after closing stdin, and again after SIGTERM (a bounded graceful close).
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long we wait for a group to die after SIGKILL before giving up on reaping (only D-state processes linger).
const KILL_WAIT: Duration = Duration::from_secs(2);
/// Poll interval while waiting for a child to exit without reaping it.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// Name of the dedicated shim binary looked up next to the current executable.
pub const SHIM_BINARY: &str = "pimcp-shim";
/// Environment variable naming the shim executable.
pub const SHIM_ENV: &str = "PIMCP_SHIM";
/// Environment variable that turns the standby guardian shim off when `0` (see [`StandbySlot`]).
pub const STANDBY_ENV: &str = "PIMCP_STANDBY_SHIM";
/// Variables a child keeps with `inheritEnv: false`. With `inheritEnv: true` it gets pimcp's environment
/// without pimcp's control variables ([`strip_control_env`]).
pub const MINIMAL_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Which executable acts as the guardian shim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ShimMode {
    /// `PIMCP_SHIM`, else `pimcp-shim` next to the current executable (or in its parent directory, which covers
    /// test binaries in `target/*/deps`), else no shim (a warning is logged once).
    #[default]
    Auto,
    /// This executable (or binary); it is invoked with the hidden first argument [`SHIM_ARG`].
    Path(PathBuf),
    /// The current executable, which calls [`shim_main_if_requested`] first thing in `main` (e.g. `pimcp-run`).
    CurrentExe,
    /// No shim: process group + `PR_SET_PDEATHSIG` only (grandchildren may survive a SIGKILL of pimcp).
    Disabled,
}

/// Process settings shared by every stdio server of a runtime.
#[derive(Clone, Debug)]
pub struct ProcessOptions {
    pub shim: ShimMode,
    /// Wait after closing stdin, and again after SIGTERM, before escalating.
    pub close_grace: Duration,
    /// Rewrite `npx …` / `npm exec …` to the installed package binary when it can be found.
    pub resolve_npx: bool,
    /// JSON file caching npx resolutions for 24 h; `None` = no cache file.
    pub npx_cache: Option<PathBuf>,
    /// The standby guardian shim (see [`StandbySlot`]); `Runtime::start` gives each runtime a slot of its own.
    pub standby: StandbySlot,
}

impl Default for ProcessOptions {
    fn default() -> Self {
        ProcessOptions {
            shim: ShimMode::Auto,
            close_grace: DEFAULT_CLOSE_GRACE,
            resolve_npx: true,
            npx_cache: None,
            standby: StandbySlot::default(),
        }
    }
}

impl ProcessOptions {
    /// The shim executable to use, if any (see [`ShimMode`]).
    pub fn shim_executable(&self) -> Option<PathBuf> {
        match &self.shim {
            ShimMode::Disabled => None,
            ShimMode::Path(p) => Some(p.clone()),
            ShimMode::CurrentExe => std::env::current_exe().ok(),
            ShimMode::Auto => {
                let found = find_shim_auto();
                if found.is_none() {
                    static WARNED: OnceLock<()> = OnceLock::new();
                    WARNED.get_or_init(|| {
                        tracing::warn!(
                            "no `{SHIM_BINARY}` found (set {SHIM_ENV}); stdio servers run without the guardian shim, so \
                             their grandchildren may outlive pimcp if it is killed with SIGKILL"
                        );
                    });
                }
                found
            }
        }
    }
}

fn find_shim_auto() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(SHIM_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(SHIM_BINARY))
        .find(|p| is_executable(p))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds `program` the way `execvp` would, but with the child's `PATH` and working directory.
pub(crate) fn find_program(program: &str, path_var: Option<&OsString>, cwd: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
        return is_executable(&p).then_some(p);
    }
    let path_var = path_var?;
    std::env::split_paths(path_var)
        .map(|dir| if dir.is_absolute() { dir } else { cwd.join(dir) })
        .map(|dir| dir.join(program))
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
    pub shim: Option<PathBuf>,
    /// Passed to the shim ([`shim::GRACE_ENV`]): how long leftovers of an exited server get after SIGTERM.
    pub close_grace: Duration,
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
            .field("shim", &self.shim)
            .field("close_grace", &self.close_grace)
            .finish()
    }
}

/// A spawned server: the child (shim or server) leading its own process group, plus its protocol pipes.
pub(crate) struct Spawned {
    pub child: ChildProcess,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: Option<tokio::process::ChildStderr>,
}

impl SpawnPlan {
    /// Spawns the process. Must run on a long-lived thread (any tokio worker): `PR_SET_PDEATHSIG` fires when
    /// the *thread* that forked the child exits.
    pub fn spawn(&self) -> std::io::Result<Spawned> {
        let our_pid = std::process::id();
        let mut cmd = match &self.shim {
            Some(shim) => {
                let mut c = tokio::process::Command::new(shim);
                c.arg(SHIM_ARG)
                    .arg(our_pid.to_string())
                    .arg(&self.program)
                    .args(&self.args);
                c
            }
            None => {
                let mut c = tokio::process::Command::new(&self.program);
                c.args(&self.args);
                c
            }
        };
        cmd.current_dir(&self.cwd);
        if self.inherit_env {
            strip_control_env(cmd.as_std_mut());
        } else {
            cmd.env_clear();
            for key in MINIMAL_ENV {
                if let Some(v) = std::env::var_os(key) {
                    cmd.env(key, v);
                }
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if self.shim.is_some() {
            // After `env_clear` (`inheritEnv: false`), which would drop it.
            cmd.env(shim::GRACE_ENV, self.close_grace.as_millis().to_string());
        }
        // The shim arms its own parent-death signal first thing, checks that its parent is still `our_pid` (else it
        // exits before starting anything) and resets the server's signal mask itself: it needs no hook here. Without
        // a hook std spawns with posix_spawn (a vfork-style clone) instead of forking this whole process, whose
        // page tables (tens of MiB resident) fork would copy and then take write faults on.
        if self.shim.is_none() {
            // SAFETY: runs between fork and exec; prctl, sigprocmask and getppid are async-signal-safe and allocate
            // nothing.
            #[allow(
                unsafe_code,
                reason = "pre_exec is the only way to arm PR_SET_PDEATHSIG in the child"
            )]
            unsafe {
                cmd.pre_exec(move || {
                    sys::set_parent_death_signal(libc::SIGKILL)?;
                    // The child inherits the spawning thread's signal mask; start it with none blocked.
                    sys::reset_signal_mask()?;
                    if sys::parent_pid() != our_pid {
                        return Err(std::io::Error::other("parent exited during spawn"));
                    }
                    Ok(())
                });
            }
        }
        spawn_leader(cmd, self.shim.is_some())
    }

    /// [`SpawnPlan::spawn`], through the runtime's waiting standby shim when there is one for this plan's shim (see
    /// [`StandbySlot`]): the server then starts without a second exec.
    pub fn spawn_with(&self, standby: &StandbySlot) -> std::io::Result<Spawned> {
        if let Some(shim) = &self.shim
            && let Some(spawned) = standby.start(shim, &self.standby_spec())
        {
            return Ok(spawned);
        }
        self.spawn()
    }

    /// What a standby shim needs to start this plan's server as [`SpawnPlan::spawn`] would: the environment the
    /// server would get (ours without pimcp's control variables, or the minimal one, then the plan's variables;
    /// never the shim's grace variable).
    fn standby_spec(&self) -> shim::StandbySpec {
        let mut env: Vec<(OsString, OsString)> = if self.inherit_env {
            std::env::vars_os()
                .filter(|(key, _)| !pimcp_config::is_control_env(key))
                .collect()
        } else {
            MINIMAL_ENV
                .iter()
                .filter_map(|key| std::env::var_os(key).map(|v| (OsString::from(key), v)))
                .collect()
        };
        for (key, value) in &self.env {
            env.retain(|(k, _)| k.as_os_str() != std::ffi::OsStr::new(key));
            env.push((key.into(), value.into()));
        }
        env.retain(|(k, _)| k.as_os_str() != std::ffi::OsStr::new(shim::GRACE_ENV));
        shim::StandbySpec {
            program: self.program.clone().into_os_string(),
            args: self.args.clone(),
            cwd: self.cwd.clone().into_os_string(),
            env,
            grace: self.close_grace,
        }
    }
}

/// Spawns `cmd` with piped stdio as the leader of a new process group (killed on drop).
fn spawn_leader(mut cmd: tokio::process::Command, shimmed: bool) -> std::io::Result<Spawned> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut wrapped = CommandWrap::from(cmd);
    wrapped.wrap(ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    let mut child = wrapped.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| std::io::Error::other("child exited before its pid was read"))?;
    let stdin = child
        .stdin()
        .take()
        .ok_or_else(|| std::io::Error::other("child stdin missing"))?;
    let stdout = child
        .stdout()
        .take()
        .ok_or_else(|| std::io::Error::other("child stdout missing"))?;
    let stderr = child.stderr().take();
    let pgid = i32::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?;
    Ok(Spawned {
        child: ChildProcess {
            child,
            pid,
            pgid,
            shimmed,
            status: None,
            gone: false,
        },
        stdin,
        stdout,
        stderr,
    })
}

/// How a [`ChildProcess::shutdown`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownOutcome {
    /// The process exited on its own (stdin EOF) within the grace period.
    Exited,
    /// It needed SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
    /// It survived SIGKILL for [`KILL_WAIT`] (uninterruptible sleep); it was left to the kernel.
    Unreaped,
}

/// The direct child (the shim, or the server itself) leading its own process group.
pub struct ChildProcess {
    child: Box<dyn ChildWrapper>,
    pid: u32,
    pgid: i32,
    shimmed: bool,
    status: Option<ExitStatus>,
    /// The leader can no longer be waited for (reaped, or `wait` failed): its group id may be recycled, so we must
    /// never signal the group again.
    gone: bool,
}

impl std::fmt::Debug for ChildProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildProcess")
            .field("pid", &self.pid)
            .field("shimmed", &self.shimmed)
            .field("status", &self.status)
            .finish()
    }
}

impl ChildProcess {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process group id (equal to [`ChildProcess::pid`]).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Whether the guardian shim sits between us and the server.
    pub fn is_shimmed(&self) -> bool {
        self.shimmed
    }

    /// The exit status once reaped.
    pub fn status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// Resolves once the direct child has exited (without reaping it). Cancel-safe.
    pub async fn exited(&self) {
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

    async fn exited_within(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.exited()).await.is_ok()
    }

    /// The bounded close sequence, to call after the server's stdin was closed: wait `grace` for the child to exit,
    /// SIGTERM the group and wait `grace`, SIGKILL the group; then sweep what is left of the group (SIGTERM, `grace`,
    /// SIGKILL) and reap. Takes at most about `4 × grace + 2 s`.
    pub async fn shutdown(&mut self, grace: Duration) -> ShutdownOutcome {
        if self.gone {
            return ShutdownOutcome::Exited;
        }
        let mut outcome = ShutdownOutcome::Exited;
        if !self.exited_within(grace).await {
            outcome = ShutdownOutcome::Terminated;
            let _ = sys::signal_group(self.pgid, libc::SIGTERM);
            if !self.exited_within(grace).await {
                outcome = ShutdownOutcome::Killed;
                let _ = sys::signal_group(self.pgid, libc::SIGKILL);
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
    async fn sweep_group(&self, grace: Duration) {
        if sys::live_group_members(self.pgid).is_empty() {
            return;
        }
        let _ = sys::signal_group(self.pgid, libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < deadline {
            if sys::live_group_members(self.pgid).is_empty() {
                return;
            }
            tokio::time::sleep(EXIT_POLL * 2).await;
        }
        let _ = sys::signal_group(self.pgid, libc::SIGKILL);
    }

    /// Reaps the exited leader (bounded).
    async fn reap(&mut self) {
        if self.gone {
            return;
        }
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
    pub async fn collect_exit(&mut self) -> Option<ExitStatus> {
        if !self.gone && self.has_exited() {
            self.sweep_group(Duration::ZERO).await;
            self.reap().await;
        }
        self.status
    }

    /// Immediate SIGKILL to the whole group, then reap (bounded). Used when a connect is abandoned.
    pub async fn kill_now(&mut self) {
        if self.gone {
            return;
        }
        let _ = sys::signal_group(self.pgid, libc::SIGKILL);
        if self.exited_within(KILL_WAIT).await {
            self.reap().await;
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if !self.gone {
            // Not reaped yet, so the group id is still ours: kill everything in it. Tokio reaps the leader
            // (kill_on_drop) in the background.
            let _ = sys::signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
    fn explicit_and_disabled_shim_modes() {
        let opts = ProcessOptions {
            shim: ShimMode::Path("/x/shim".into()),
            ..ProcessOptions::default()
        };
        assert_eq!(opts.shim_executable(), Some(PathBuf::from("/x/shim")));
        let opts = ProcessOptions {
            shim: ShimMode::Disabled,
            ..ProcessOptions::default()
        };
        assert_eq!(opts.shim_executable(), None);
    }
}
