//! `!command` secrets (SPEC 3.3): how a config string becomes a [`SecretValue`], and how the runtime resolves one at
//! connect time. Loading never runs a command; only [`SecretValue::resolve`] does.
//!
//! A command runs as `sh -c <command>` in its own process group with stdin and stderr closed to `/dev/null`, inherits
//! pimcp's environment, must exit 0 within [`SECRET_COMMAND_TIMEOUT`] and print at most
//! [`SECRET_COMMAND_MAX_OUTPUT`] bytes; its trimmed stdout must not be empty. On timeout or oversize output the whole
//! process group is killed. Errors name the context (`headers.Authorization`), never the output.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::SecretError;
use crate::model::{Secret, SecretValue};

/// How long a `!command` may run.
pub const SECRET_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// How much stdout a `!command` may print.
pub const SECRET_COMMAND_MAX_OUTPUT: usize = 64 * 1024;
/// After killing a timed-out command's group, how long to wait for its reaper thread before giving up on it.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// Limits and working directory for [`SecretValue::resolve_with`].
#[derive(Debug, Clone)]
pub struct ResolveOptions {
    pub timeout: Duration,
    pub max_output: usize,
    /// Working directory of the command (default: pimcp's current directory).
    pub cwd: Option<PathBuf>,
}

impl Default for ResolveOptions {
    fn default() -> Self {
        ResolveOptions {
            timeout: SECRET_COMMAND_TIMEOUT,
            max_output: SECRET_COMMAND_MAX_OUTPUT,
            cwd: None,
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

struct Finished {
    output: Vec<u8>,
    oversize: bool,
    status: std::io::Result<ExitStatus>,
}

fn run(command: &str, context: &str, options: &ResolveOptions) -> Result<Secret, SecretError> {
    use std::os::unix::process::CommandExt;

    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .stdout(Stdio::piped());
    cmd.process_group(0);
    if let Some(cwd) = &options.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn().map_err(|err| SecretError::Spawn {
        context: context.to_string(),
        reason: err.to_string(),
    })?;
    let pid = child.id();
    let Some(stdout) = child.stdout.take() else {
        kill_group(pid);
        let _ = child.wait();
        return Err(SecretError::Spawn {
            context: context.to_string(),
            reason: "no stdout pipe".into(),
        });
    };
    let max = options.max_output;
    let (tx, rx) = mpsc::channel::<Finished>();
    std::thread::spawn(move || {
        let mut output = Vec::new();
        let _ = stdout.take(max as u64 + 1).read_to_end(&mut output);
        let oversize = output.len() > max;
        if oversize {
            kill_group(pid);
        }
        let status = child.wait();
        let _ = tx.send(Finished {
            output,
            oversize,
            status,
        });
    });
    let finished = match rx.recv_timeout(options.timeout) {
        Ok(finished) => finished,
        Err(_) => {
            kill_group(pid);
            // The reaper thread waits for the killed child; give it a moment so no zombie is left behind.
            let _ = rx.recv_timeout(REAP_GRACE);
            return Err(SecretError::Timeout {
                context: context.to_string(),
                seconds: options.timeout.as_secs().max(1),
            });
        }
    };
    if finished.oversize {
        return Err(SecretError::OutputTooLarge {
            context: context.to_string(),
            limit_bytes: max,
        });
    }
    let status = finished.status.map_err(|err| SecretError::Spawn {
        context: context.to_string(),
        reason: err.to_string(),
    })?;
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        return Err(match (status.code(), status.signal()) {
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
    let text = String::from_utf8(finished.output).map_err(|_| SecretError::NotUtf8 {
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

/// SIGKILLs the process group led by `pid` (the command was started with `process_group(0)`).
fn kill_group(pid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: killpg only sends a signal; it touches no memory. pgid is the group this module created for the
    // command, so no unrelated process can be hit while the child is unreaped (its pid cannot be reused).
    #[allow(unsafe_code)]
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
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

    #[test]
    fn empty_output_is_an_error() {
        let err = cmd("printf '  \\n'").resolve("bearerToken").unwrap_err();
        assert_eq!(err.to_string(), "`bearerToken` command returned empty output");
    }

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

    #[test]
    fn stderr_is_discarded() {
        let secret = cmd("echo noise >&2; echo value").resolve("env.X").unwrap();
        assert_eq!(secret.expose(), "value");
    }

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
}
