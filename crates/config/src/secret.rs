//! Secrets: [`Secret`] (a string that never prints) and [`SecretValue`] (a literal or a `!command`), how a config
//! string becomes one, and how the runtime resolves a `!command` at connect time. Loading never runs a command; only [`SecretValue::resolve`] does.
//!
//! A command runs as `sh -c <command>` leading its own process group with stdin and stderr on `/dev/null`, inherits
//! pimcp's environment without pimcp's own variables (every `PIMCP_*`, see [`is_control_env`]), must exit 0 within
//! [`SECRET_COMMAND_TIMEOUT`] and print at most [`SECRET_COMMAND_MAX_OUTPUT`] bytes; its trimmed stdout must not be
//! empty. On Linux `sh` gets `PR_SET_PDEATHSIG(SIGKILL)`; with a [`ResolveOptions::guardian`] (the runtime passes its
//! guardian) the command's group is watched while it runs, so all of it, grandchildren included, dies with pimcp. On timeout,
//! oversize output or [`ResolveOptions::cancel`] the whole group is killed. Only the calling thread reaps the leader,
//! and it signals the group only before reaping it, so a recycled group id is never hit. Errors name the context
//! (`headers.Authorization`), never the output.

use std::ffi::OsStr;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::fmt;

use crate::error::SecretError;

/// A secret string. `Debug` and `Display` print `<redacted>`; read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret string.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The secret itself; use only where it is sent or run, never where it is shown.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// Whether the secret is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A value that may be a secret: a literal (already interpolated) or a `!command` run at connect time.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretValue {
    /// A literal value.
    Plain(Secret),
    /// The shell command after the leading `!` (never interpolated; the shell does that).
    Command(String),
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretValue::Plain(_) => f.write_str("Plain(<redacted>)"),
            SecretValue::Command(_) => f.write_str("Command(<redacted>)"),
        }
    }
}

/// How long a `!command` may run.
pub const SECRET_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// How much stdout a `!command` may print.
pub const SECRET_COMMAND_MAX_OUTPUT: usize = 64 * 1024;
/// How often a running command's deadline and cancel flag are checked (the output itself arrives without delay).
const POLL: Duration = Duration::from_millis(20);
/// After killing a command's group, how long to wait for its leader to be reaped before leaving it to the kernel.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// The prefix of pimcp's own control variables (`PIMCP_AUTH_TOKEN`, `PIMCP_LOG`, `PIMCP_DATA_DIR`, …).
pub const CONTROL_ENV_PREFIX: &str = "PIMCP_";

/// Whether an inherited variable is one of pimcp's own (`PIMCP_*`): those never reach a child (a server, a
/// `!command`), whose environment pimcp otherwise inherits to it.
pub fn is_control_env(key: &OsStr) -> bool {
    key.as_encoded_bytes().starts_with(CONTROL_ENV_PREFIX.as_bytes())
}

/// Limits, working directory, guardian and cancellation for [`SecretValue::resolve_with`].
#[derive(Debug, Clone)]
pub struct ResolveOptions {
    /// How long the command may run.
    pub timeout: Duration,
    /// The most bytes of output it may print.
    pub max_output: usize,
    /// Working directory of the command (default: pimcp's current directory).
    pub cwd: Option<PathBuf>,
    /// Watches the command's process group while it runs, to kill it when pimcp dies.
    pub guardian: Option<Arc<dyn GroupWatch>>,
    /// Set to `true` to stop the command: its group is killed and the resolution fails.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Something that kills a process group when pimcp dies (the runtime's guardian), told of each group a `!command`
/// leads while it runs.
pub trait GroupWatch: Send + Sync + std::fmt::Debug {
    /// From now on, `pgid` dies with pimcp.
    fn watch(&self, pgid: i32);
    /// `pgid` is done; forget it.
    fn release(&self, pgid: i32);
}

/// Releases a watched group when the resolution ends, on every path.
struct Watched<'a>(Option<&'a dyn GroupWatch>, i32);

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        if let Some(guardian) = self.0 {
            guardian.release(self.1);
        }
    }
}

impl Default for ResolveOptions {
    fn default() -> Self {
        ResolveOptions {
            timeout: SECRET_COMMAND_TIMEOUT,
            max_output: SECRET_COMMAND_MAX_OUTPUT,
            cwd: None,
            guardian: None,
            cancel: None,
        }
    }
}

impl SecretValue {
    /// A `!command` that has not run yet.
    pub fn is_command(&self) -> bool {
        matches!(self, SecretValue::Command(_))
    }

    /// The literal value, or the command's output. Blocking (up to 10 s): call it from a blocking task.
    /// `context` names the field in errors, e.g. `headers.Authorization`.
    pub fn resolve(&self, context: &str) -> Result<Secret, SecretError> {
        self.resolve_with(context, &ResolveOptions::default())
    }

    /// [`SecretValue::resolve`] with explicit limits and working directory.
    pub fn resolve_with(&self, context: &str, options: &ResolveOptions) -> Result<Secret, SecretError> {
        match self {
            SecretValue::Plain(secret) => Ok(secret.clone()),
            SecretValue::Command(command) => run(command, context, options),
        }
    }
}

/// Turns a configured string of a secret-capable field into a value: `!cmd` → command (not interpolated),
/// `!!x` → literal `!x` (then interpolated), anything else interpolated. `interpolate` expands variables.
pub(crate) fn classify(raw: &str, interpolate: impl FnOnce(&str) -> String) -> SecretValue {
    if let Some(rest) = raw.strip_prefix("!!") {
        let mut value = String::from("!");
        value.push_str(&interpolate(rest));
        SecretValue::Plain(Secret::new(value))
    } else if let Some(command) = raw.strip_prefix('!') {
        SecretValue::Command(command.to_string())
    } else {
        SecretValue::Plain(Secret::new(interpolate(raw)))
    }
}

/// What the stdout reader saw: up to `max + 1` bytes.
struct Output {
    bytes: Vec<u8>,
    oversize: bool,
}

/// Why the command was stopped before it finished.
enum Stop {
    Timeout,
    Cancelled,
}

fn run(command: &str, context: &str, options: &ResolveOptions) -> Result<Secret, SecretError> {
    let spawn_error = |reason: String| SecretError::Spawn {
        context: context.to_string(),
        reason,
    };
    let deadline = Instant::now() + options.timeout;
    let mut child = spawn(command, options).map_err(|err| spawn_error(err.to_string()))?;
    let pid = child.id();
    // The group is released once its leader is reaped (a recycled group id is never left watched for longer).
    let _watched = i32::try_from(pid).ok().map(|pgid| {
        if let Some(guardian) = &options.guardian {
            guardian.watch(pgid);
        }
        Watched(options.guardian.as_deref(), pgid)
    });
    let Some(stdout) = child.stdout.take() else {
        kill_and_reap(pid, &mut child);
        return Err(spawn_error("no stdout pipe".into()));
    };
    let max = options.max_output;
    let (tx, rx) = mpsc::channel::<Output>();
    // The reader only reads; this thread alone signals and reaps the leader.
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.take(max as u64 + 1).read_to_end(&mut bytes);
        let oversize = bytes.len() > max;
        let _ = tx.send(Output { bytes, oversize });
    });
    let stopped = |stop: Stop| match stop {
        Stop::Timeout => SecretError::Timeout {
            context: context.to_string(),
            seconds: options.timeout.as_secs().max(1),
        },
        Stop::Cancelled => spawn_error("cancelled".into()),
    };
    let check = || {
        if options.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            Some(Stop::Cancelled)
        } else if Instant::now() >= deadline {
            Some(Stop::Timeout)
        } else {
            None
        }
    };
    let output = loop {
        match rx.recv_timeout(POLL) {
            Ok(output) => break output,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Output {
                    bytes: Vec::new(),
                    oversize: false,
                };
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(stop) = check() {
            kill_and_reap(pid, &mut child);
            return Err(stopped(stop));
        }
    };
    if output.oversize {
        kill_and_reap(pid, &mut child);
        return Err(SecretError::OutputTooLarge {
            context: context.to_string(),
            limit_bytes: max,
        });
    }
    // Stdout is closed; the leader exits about now.
    let mut wait = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(err) => return Err(spawn_error(err.to_string())),
        }
        if let Some(stop) = check() {
            kill_and_reap(pid, &mut child);
            return Err(stopped(stop));
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(POLL);
    };
    outcome(context, status, output.bytes)
}

/// The shell running `command` (`sh -c` on Unix, `cmd.exe /d /s /c` on Windows) leading a new process group, with
/// pimcp's environment minus its control variables.
fn spawn(command: &str, options: &ResolveOptions) -> std::io::Result<Child> {
    let mut cmd = crate::sys::shell(command);
    cmd.stdin(Stdio::null()).stderr(Stdio::null()).stdout(Stdio::piped());
    for (key, _) in std::env::vars_os().filter(|(key, _)| is_control_env(key)) {
        cmd.env_remove(key);
    }
    crate::sys::lead_new_group(&mut cmd);
    if let Some(cwd) = &options.cwd {
        cmd.current_dir(cwd);
    }
    cmd.spawn()
}

/// How a finished command's exit status and output become the secret or an error.
fn outcome(context: &str, status: ExitStatus, output: Vec<u8>) -> Result<Secret, SecretError> {
    if !status.success() {
        return Err(match (status.code(), crate::sys::exit_signal(&status)) {
            (Some(code), _) => SecretError::Exit {
                context: context.to_string(),
                code,
            },
            (None, Some(signal)) => SecretError::Signal {
                context: context.to_string(),
                signal,
            },
            (None, None) => SecretError::Exit {
                context: context.to_string(),
                code: -1,
            },
        });
    }
    let text = String::from_utf8(output).map_err(|_| SecretError::NotUtf8 {
        context: context.to_string(),
    })?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(SecretError::Empty {
            context: context.to_string(),
        });
    }
    Ok(Secret::new(trimmed))
}

/// SIGKILLs the (still unreaped) leader's group, then reaps the leader (bounded: a process in uninterruptible sleep
/// is left to the kernel).
fn kill_and_reap(pid: u32, child: &mut Child) {
    kill_group(pid);
    let until = Instant::now() + REAP_GRACE;
    while Instant::now() < until {
        match child.try_wait() {
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            _ => return,
        }
    }
}

/// Kills the process group led by `pid` (the command was started leading its own group).
fn kill_group(pid: u32) {
    crate::sys::kill_group(pid);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn cmd(text: &str) -> SecretValue {
        SecretValue::Command(text.to_string())
    }

    #[test]
    fn classify_forms() {
        let id = |s: &str| format!("<{s}>");
        assert_eq!(classify("!op read x", id), SecretValue::Command("op read x".into()));
        assert_eq!(classify("!!bang", id), SecretValue::Plain(Secret::new("!<bang>")));
        assert_eq!(classify("plain", id), SecretValue::Plain(Secret::new("<plain>")));
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn resolves_trimmed_output() {
        let secret = cmd("printf '  tok-123\\n'").resolve("env.TOKEN").unwrap();
        assert_eq!(secret.expose(), "tok-123");
    }

    #[test]
    fn plain_is_returned_as_is() {
        let secret = SecretValue::Plain(Secret::new("v")).resolve("x").unwrap();
        assert_eq!(secret.expose(), "v");
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn non_zero_exit_names_context_not_output() {
        let err = cmd("echo leaked-output; exit 3")
            .resolve("headers.Authorization")
            .unwrap_err();
        assert_eq!(
            err,
            SecretError::Exit {
                context: "headers.Authorization".into(),
                code: 3
            }
        );
        let text = err.to_string();
        assert_eq!(text, "`headers.Authorization` command exited with code 3");
        assert!(!text.contains("leaked"));
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn empty_output_is_an_error() {
        let err = cmd("printf '  \\n'").resolve("bearerToken").unwrap_err();
        assert_eq!(err.to_string(), "`bearerToken` command returned empty output");
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn too_much_output_is_an_error() {
        let options = ResolveOptions {
            max_output: 1024,
            ..ResolveOptions::default()
        };
        let err = cmd("head -c 5000 /dev/zero | tr '\\0' x")
            .resolve_with("env.BIG", &options)
            .unwrap_err();
        assert_eq!(err.to_string(), "`env.BIG` command output exceeded 1 KiB");
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn default_cap_is_64_kib() {
        let err = cmd("head -c 70000 /dev/zero | tr '\\0' x")
            .resolve("env.BIG")
            .unwrap_err();
        assert_eq!(
            err,
            SecretError::OutputTooLarge {
                context: "env.BIG".into(),
                limit_bytes: 64 * 1024
            }
        );
        let ok = cmd("head -c 65000 /dev/zero | tr '\\0' x").resolve("env.BIG").unwrap();
        assert_eq!(ok.expose().len(), 65000);
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn stdin_is_closed() {
        // `cat` with a closed stdin ends at once with no output.
        let err = cmd("cat").resolve("env.X").unwrap_err();
        assert_eq!(
            err,
            SecretError::Empty {
                context: "env.X".into()
            }
        );
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn stderr_is_discarded() {
        let secret = cmd("echo noise >&2; echo value").resolve("env.X").unwrap();
        assert_eq!(secret.expose(), "value");
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn timeout_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let script = format!("sleep 300 & echo $! > '{}'; wait", pid_file.display());
        let options = ResolveOptions {
            timeout: Duration::from_millis(500),
            ..ResolveOptions::default()
        };
        let err = cmd(&script)
            .resolve_with("headers.Authorization", &options)
            .unwrap_err();
        assert!(matches!(err, SecretError::Timeout { .. }), "{err}");
        assert_eq!(
            SecretError::Timeout {
                context: "headers.Authorization".into(),
                seconds: 10
            }
            .to_string(),
            "`headers.Authorization` command timed out after 10s"
        );
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for its (reparented) parent to reap it: no longer running.
            let state = status
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next())
                .unwrap_or("");
            if status.is_empty() || state == "Z" || state == "X" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "grandchild {pid} still running: state {state}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `pid` no longer runs (gone, or a zombie waiting for its reaper).
    #[cfg(unix)]
    fn wait_gone(pid: i32, deadline: Duration) -> bool {
        let end = std::time::Instant::now() + deadline;
        loop {
            let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = status
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next())
                .unwrap_or("");
            if status.is_empty() || state == "Z" || state == "X" {
                return true;
            }
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn cancel_kills_the_process_group_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let script = format!("sleep 605 & echo $! > '{}'; wait", pid_file.display());
        let cancel = Arc::new(AtomicBool::new(false));
        let options = ResolveOptions {
            cancel: Some(cancel.clone()),
            ..ResolveOptions::default()
        };
        let runner = std::thread::spawn(move || cmd(&script).resolve_with("env.TOK", &options));
        let end = std::time::Instant::now() + Duration::from_secs(5);
        let pid: i32 = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|p| p.trim().parse().ok())
            {
                break pid;
            }
            assert!(std::time::Instant::now() < end, "the command never wrote its pid file");
            std::thread::sleep(Duration::from_millis(10));
        };
        cancel.store(true, Ordering::Relaxed);
        let err = runner.join().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "`env.TOK` command failed to start: cancelled");
        // Far below the 10 s limit.
        assert!(wait_gone(pid, Duration::from_secs(5)), "grandchild {pid} still running");
    }

    /// Records what it is told.
    #[cfg(unix)]
    #[derive(Debug, Default)]
    struct Recorder(std::sync::Mutex<Vec<(char, i32)>>);

    #[cfg(unix)]
    impl GroupWatch for Recorder {
        fn watch(&self, pgid: i32) {
            self.0.lock().unwrap().push(('+', pgid));
        }
        fn release(&self, pgid: i32) {
            self.0.lock().unwrap().push(('-', pgid));
        }
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn the_guardian_watches_the_commands_group_while_it_runs() {
        let recorder = Arc::new(Recorder::default());
        let options = ResolveOptions {
            guardian: Some(recorder.clone()),
            ..ResolveOptions::default()
        };
        // `$$` in `sh -c` is the shell's pid, which leads the command's group.
        let secret = cmd("printf %s $$").resolve_with("env.X", &options).unwrap();
        let pgid: i32 = secret.expose().parse().unwrap();
        assert_eq!(*recorder.0.lock().unwrap(), [('+', pgid), ('-', pgid)]);
    }

    #[test]
    fn control_variables_are_recognized_by_prefix() {
        assert!(is_control_env(OsStr::new("PIMCP_AUTH_TOKEN")));
        assert!(is_control_env(OsStr::new("PIMCP_LOG")));
        assert!(!is_control_env(OsStr::new("PATH")));
        assert!(!is_control_env(OsStr::new("MY_PIMCP_X")));
    }

    #[cfg(unix)] // `sh` syntax; Windows runs `cmd.exe` (`windows_*` tests)
    #[test]
    fn cwd_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let options = ResolveOptions {
            cwd: Some(dir.path().to_path_buf()),
            ..ResolveOptions::default()
        };
        let secret = cmd("pwd -P").resolve_with("env.X", &options).unwrap();
        assert_eq!(
            std::path::Path::new(secret.expose()),
            dir.path().canonicalize().unwrap()
        );
    }

    #[cfg(windows)]
    #[test]
    fn windows_cmd_output_is_trimmed() {
        let secret = cmd("echo   tok-123  ").resolve("env.TOKEN").unwrap();
        assert_eq!(secret.expose(), "tok-123");
    }

    #[cfg(windows)]
    #[test]
    fn windows_cmd_exit_code_names_context_not_output() {
        let err = cmd("echo leaked-output & exit /b 3")
            .resolve("headers.Authorization")
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("headers.Authorization") && text.contains('3'), "{text}");
        assert!(!text.contains("leaked-output"), "{text}");
    }
}
