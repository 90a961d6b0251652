//! stdio transport: prepare the child's environment (secrets, cwd, npx), spawn it in its own process group behind
//! the runtime's guardian, and run the handshake over its stdin/stdout (bound to the child's life, see `child_pipes`)
//! while watching for an early exit.

use std::path::PathBuf;
use std::time::Duration;

use pimcp_config::StdioTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _};
use tokio::time::Instant;

use super::cancel_on_close::CancelOnClose;
use super::handshake::{self, Abort};
use super::secrets::{self, Redactor};
use super::{ConnectError, ConnectSpec, Connection, TransportKind};
use crate::process::{self, SpawnPlan, StderrTail};

/// After a failed handshake, how long we wait to see whether the child exited (to report its exit code).
const EXIT_AFTER_FAILURE: Duration = Duration::from_secs(1);
/// How long we wait for the rest of a dead child's stderr before snapshotting it.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

pub(super) async fn connect<H: ClientHandler + Clone>(
    spec: ConnectSpec,
    stdio: StdioTransport,
    handler: H,
) -> Result<Connection<H>, ConnectError> {
    let name = spec.server.name.clone();
    let deadline = Instant::now() + spec.server.timeouts.startup;
    let startup = spec.server.timeouts.startup;
    let abort = |a: Abort| match a {
        Abort::Timeout => ConnectError::StartupTimeout {
            server: name.clone(),
            after: startup,
            stderr: String::new(),
        },
        Abort::Cancelled => ConnectError::Cancelled { server: name.clone() },
    };

    let cwd = stdio.cwd.clone().unwrap_or_else(|| spec.project_dir.clone());
    if !cwd.is_dir() {
        return Err(ConnectError::Config {
            server: name,
            message: format!(
                "working directory `{}` does not exist or is not a directory",
                cwd.display()
            ),
        });
    }

    let mut redactor = Redactor::default();
    let mut env: Vec<(String, String)> = Vec::with_capacity(stdio.env.len());
    for (key, value) in &stdio.env {
        let resolved = handshake::bounded(
            deadline,
            &spec.cancel,
            secrets::resolve(&name, format!("env.{key}"), value, &spec.process, &cwd),
        )
        .await
        .map_err(abort)??;
        if matches!(value, pimcp_config::SecretValue::Command(_)) || secrets::env_value_is_sensitive(key, &resolved) {
            redactor.add(&resolved);
        }
        env.push((key.clone(), resolved));
    }

    let (command, args) = resolve_command(&spec, &stdio, &cwd, &env, deadline)
        .await
        .map_err(abort)?;
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| std::ffi::OsString::from(v))
        .or_else(|| std::env::var_os("PATH"));
    let Some(program) = process::find_program(&command, path_var.as_ref(), &cwd) else {
        let message = if command.contains('/') {
            format!("command `{command}` does not exist or is not executable")
        } else {
            format!("command `{command}` was not found on PATH")
        };
        return Err(ConnectError::Spawn {
            server: name,
            message,
            source: None,
        });
    };

    let plan = SpawnPlan {
        program,
        args: args.into_iter().map(Into::into).collect(),
        cwd,
        inherit_env: stdio.inherit_env,
        env,
        guardian: spec
            .process
            .guardian_executable()
            .map(|exe| (exe, spec.process.guardian_process.clone())),
    };
    let lifecycle = handshake::lifecycle(spec.server.protocol, spec.era_hint);
    let is_auto = matches!(lifecycle, ClientLifecycleMode::Auto { .. });
    let discover_only = matches!(lifecycle, ClientLifecycleMode::Discover { .. });
    let first = Box::pin(attempt(&spec, &plan, &redactor, handler.clone(), lifecycle, deadline));
    // With `auto`, two outcomes of the probe get one more attempt on a fresh process (never a second handshake on
    // the same stream). The negotiated era is remembered by the caller, so this costs one extra spawn per config
    // change at most.
    let retry = match first.await {
        // A legacy server may simply hang up on `server/discover` (rmcp-based ones exit cleanly): `initialize`.
        Err(Failure::HungUp { .. }) if is_auto => {
            tracing::debug!(server = %name, "server hung up on server/discover; retrying with initialize");
            ClientLifecycleMode::Initialize
        }
        // A 2026-07-28 server too slow for the probe's deadline (a busy machine, a slow start) answered
        // `server/discover` after the `initialize` fallback went out, and now serves the new protocol on that stream
        // and refuses `initialize`. It is modern: `server/discover` only, as long as the startup timeout allows.
        Err(Failure::ServesModern { .. }) if is_auto => {
            tracing::debug!(server = %name, "server refused initialize after a late server/discover; retrying with server/discover");
            handshake::discover_only()
        }
        other => return other.map_err(|f| f.into_error(&spec, discover_only)),
    };
    let discover_only = matches!(retry, ClientLifecycleMode::Discover { .. });
    let second = Box::pin(attempt(&spec, &plan, &redactor, handler, retry, deadline));
    second.await.map_err(|f| f.into_error(&spec, discover_only))
}

/// How one spawn + handshake attempt failed.
enum Failure {
    /// The child exited cleanly (code 0) after reading the handshake request, or closed stdout.
    HungUp {
        stderr: String,
        code: Option<i32>,
    },
    /// `auto` only: the probe timed out and the `initialize` fallback was refused because the connection already
    /// serves 2026-07-28 (the probe's answer came late).
    ServesModern {
        error: ConnectError,
    },
    Error(ConnectError),
}

impl Failure {
    fn into_error(self, spec: &ConnectSpec, discover_only: bool) -> ConnectError {
        match self {
            Failure::Error(e) | Failure::ServesModern { error: e } => e,
            Failure::HungUp { stderr, .. } if discover_only => ConnectError::Protocol {
                server: spec.server.name.clone(),
                message:
                    "the server hung up on `server/discover`: it does not speak protocol 2026-07-28 (use protocol \
                          `auto` or `legacy`)"
                        .into(),
                stderr,
            },
            Failure::HungUp { stderr, code } => ConnectError::ExitedAtStart {
                server: spec.server.name.clone(),
                code,
                stderr,
            },
        }
    }
}

async fn attempt<H: ClientHandler>(
    spec: &ConnectSpec,
    plan: &SpawnPlan,
    redactor: &Redactor,
    handler: H,
    lifecycle: ClientLifecycleMode,
    deadline: Instant,
) -> Result<Connection<H>, Failure> {
    let name = spec.server.name.clone();
    let spawned = plan.spawn().map_err(|e| {
        let message = match &plan.guardian {
            Some((exe, _)) if !process::is_executable(exe) => format!(
                "cannot start the guardian `{}` ({e}); set {} or install `{}` next to pimcp",
                exe.display(),
                process::GUARDIAN_ENV,
                process::GUARDIAN_BINARY
            ),
            _ => format!("cannot start `{}`: {e}", plan.program.display()),
        };
        Failure::Error(ConnectError::Spawn {
            server: name.clone(),
            message,
            source: Some(e),
        })
    })?;
    let tail = StderrTail::new(redactor.values());
    if let Some(stderr) = spawned.stderr {
        tail.spawn_reader(stderr, spec.server.debug.then(|| name.clone()));
    }
    let mut child = spawned.child;
    let pid = child.pid();
    let guarded = child.is_guarded();
    tracing::debug!(server = %name, pid, guarded, "spawned stdio server");

    // Bound to the child's life: the stream ends when it exits, whoever else holds its stdout.
    let (stdout, stdin) = super::child_pipes::bind(&name, pid, spawned.stdout, spawned.stdin);
    let lines = super::lines::JsonLines::new(stdout, stdin, spec.max_message_bytes, super::lines::UpstreamLines);
    // Outside the trace, so the cancellations sent at close are traced too.
    let transport = super::ended::Ended::new(CancelOnClose::new(crate::trace::traced(
        lines,
        spec.trace.as_ref(),
        TransportKind::Stdio,
    )));
    let ended = transport.token();
    // The handshake runs as a task of its own, raced below against the child's exit, the deadline and cancellation.
    // Dropping the guard aborts the task (timeout, cancel, exit).
    let mut handshake = AbortOnDrop(tokio::spawn(handler.serve_with_lifecycle(transport, lifecycle)));
    enum Step<T> {
        Done(T),
        /// The handshake task panicked.
        Lost(tokio::task::JoinError),
        Exited,
        Abort(Abort),
    }
    let step = {
        let exited = child.exited();
        tokio::select! {
            biased;
            _ = spec.cancel.cancelled() => Step::Abort(Abort::Cancelled),
            _ = tokio::time::sleep_until(deadline) => Step::Abort(Abort::Timeout),
            r = &mut handshake.0 => r.map_or_else(Step::Lost, Step::Done),
            _ = exited => Step::Exited,
        }
    };
    // An unfinished handshake is aborted before the child is killed or its exit collected: it holds the transport.
    drop(handshake);
    match step {
        Step::Done(Ok(client)) => {
            let Some(n) = handshake::negotiated(&client) else {
                child.kill_now().await;
                return Err(Failure::Error(ConnectError::Protocol {
                    server: name,
                    message: "the handshake finished without server information".into(),
                    stderr: tail.snapshot(),
                }));
            };
            Ok(Connection {
                ended,
                client,
                era: n.era,
                protocol_version: n.protocol_version,
                server_info: n.server_info,
                capabilities: n.capabilities,
                instructions: n.instructions,
                transport: TransportKind::Stdio,
                pid: Some(pid),
                guarded,
                stderr: tail,
                session_id: None,
                resumed: false,
                child: Some(child),
                http: None,
            })
        }
        Step::Done(Err(error)) => {
            if let rmcp::service::ClientInitializeError::JsonRpcError(data) = &error
                && data.code == rmcp::model::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            {
                child.kill_now().await;
                return Err(Failure::ServesModern {
                    error: ConnectError::Protocol {
                        server: name,
                        message: redactor.apply(&handshake::describe(&error)),
                        stderr: tail.snapshot(),
                    },
                });
            }
            if tokio::time::timeout(EXIT_AFTER_FAILURE, child.exited()).await.is_ok() {
                return Err(exited_at_start(&name, &mut child, &tail).await);
            }
            child.kill_now().await;
            if matches!(error, rmcp::service::ClientInitializeError::ConnectionClosed(_)) {
                tail.wait_closed(STDERR_DRAIN).await;
                return Err(Failure::HungUp {
                    stderr: tail.snapshot(),
                    code: None,
                });
            }
            Err(Failure::Error(ConnectError::Protocol {
                server: name,
                message: redactor.apply(&handshake::describe(&error)),
                stderr: tail.snapshot(),
            }))
        }
        Step::Lost(join) => {
            child.kill_now().await;
            Err(Failure::Error(ConnectError::Protocol {
                server: name,
                message: format!("the handshake failed: {join}"),
                stderr: tail.snapshot(),
            }))
        }
        Step::Exited => Err(exited_at_start(&name, &mut child, &tail).await),
        Step::Abort(a) => {
            child.kill_now().await;
            tail.wait_closed(STDERR_DRAIN).await;
            Err(Failure::Error(match a {
                Abort::Timeout => ConnectError::StartupTimeout {
                    server: name,
                    after: spec.server.timeouts.startup,
                    stderr: tail.snapshot(),
                },
                Abort::Cancelled => ConnectError::Cancelled { server: name },
            }))
        }
    }
}

/// Aborts its task when dropped: a handshake must not outlive the attempt that gave up on it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The child exited during the handshake: a clean exit (code 0) is a hang-up, anything else a crash.
async fn exited_at_start(name: &str, child: &mut process::ChildProcess, tail: &StderrTail) -> Failure {
    let status = child.collect_exit().await;
    tail.wait_closed(STDERR_DRAIN).await;
    let code = status.and_then(|s| s.code());
    if code == Some(0) {
        return Failure::HungUp {
            stderr: tail.snapshot(),
            code,
        };
    }
    Failure::Error(ConnectError::ExitedAtStart {
        server: name.to_owned(),
        code,
        stderr: tail.snapshot(),
    })
}

/// The command and arguments to run: `npx`/`npm exec` rewritten to the installed package binary when possible.
async fn resolve_command(
    spec: &ConnectSpec,
    stdio: &StdioTransport,
    cwd: &std::path::Path,
    env: &[(String, String)],
    deadline: Instant,
) -> Result<(String, Vec<String>), Abort> {
    let original = (stdio.command.clone(), stdio.args.clone());
    if !spec.process.resolve_npx || !is_npx_like(&stdio.command) {
        return Ok(original);
    }
    let (command, args, cwd, env) = (
        stdio.command.clone(),
        stdio.args.clone(),
        cwd.to_path_buf(),
        env.to_vec(),
    );
    let cache: Option<PathBuf> = spec.process.npx_cache.clone();
    let task = tokio::task::spawn_blocking(move || process::resolve_npx(&command, &args, &cwd, &env, cache.as_deref()));
    match handshake::bounded(deadline, &spec.cancel, task).await? {
        Ok(Some(r)) => {
            tracing::debug!(server = %spec.server.name, program = %r.program.display(), "resolved npx command");
            Ok((r.program.to_string_lossy().into_owned(), r.args))
        }
        _ => Ok(original),
    }
}

fn is_npx_like(command: &str) -> bool {
    matches!(
        std::path::Path::new(command).file_name().and_then(|f| f.to_str()),
        Some("npx" | "npm")
    )
}
