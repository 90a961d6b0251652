//! The crate's one error type: every failure a host can see, each carrying an [`ErrorCategory`].
//!
//! Messages are lowercase, name the server/tool they are about, and never contain a secret value.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The machine category of an error. Proxy results carry it as the kebab-case string of [`ErrorCategory::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCategory {
    /// The server wants an OAuth login (or a new one) before it answers.
    NeedsAuth,
    /// A call or another request took longer than its timeout.
    Timeout,
    /// Transient transport error, server down, crashed or in backoff.
    Connection,
    /// No tool by that name, or only near misses.
    UnknownTool,
    /// Arguments do not match the tool's schema.
    Validation,
    /// The host's approval was refused or could not be asked for.
    Approval,
    /// Missing variable, bad field, unknown or disabled server.
    Config,
    /// The server comes from a project that is not trusted yet.
    Untrusted,
    /// The call needs input (sampling, elicitation, roots) the host cannot give.
    InputRequired,
    /// The tool itself returned `isError: true`.
    ToolError,
    /// Anything else (an internal failure, a cache or protocol error).
    Other,
}

impl ErrorCategory {
    /// The wire spelling used by the proxy (`needs-auth`, `timeout`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::NeedsAuth => "needs-auth",
            ErrorCategory::Timeout => "timeout",
            ErrorCategory::Connection => "connection",
            ErrorCategory::UnknownTool => "unknown-tool",
            ErrorCategory::Validation => "validation",
            ErrorCategory::Approval => "approval",
            ErrorCategory::Config => "config",
            ErrorCategory::Untrusted => "untrusted",
            ErrorCategory::InputRequired => "input-required",
            ErrorCategory::ToolError => "tool-error",
            ErrorCategory::Other => "other",
        }
    }
}

impl std::fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error under a runtime error (an I/O, rmcp, transport or OAuth error), shared so that [`Error`] stays `Clone`.
/// [`Error`]'s `source()` returns the error itself (not this wrapper), so `downcast_ref` finds its type.
#[derive(Clone)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Cause {
    /// Wraps `error` as the cause of a runtime error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause(std::sync::Arc::new(error))
    }
}

impl std::fmt::Debug for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

// Not `Error` itself: thiserror's `source()` then reaches the inner error through this deref.
impl std::ops::Deref for Cause {
    type Target = dyn std::error::Error + Send + Sync + 'static;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

/// Everything that can go wrong in the runtime. `Clone` so one connect failure can answer every queued call.
///
/// Where a failure has an error under it, `source()` returns it (`Connection`, `Auth`, `Cache`): a host can inspect
/// the I/O, transport or OAuth error it came from. The message still says what the cause said, since a model reads
/// only the message.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server needs an OAuth login before it answers. Category `needs-auth`.
    #[error("server `{server}` needs authentication ({detail}); run `pimcp-run auth login {server}`")]
    NeedsAuth {
        /// The server's name.
        server: String,
        /// Why, in words (no login yet, refresh refused, scope missing).
        detail: String,
    },

    /// An OAuth step failed for another reason than a missing login (discovery, registration, a token endpoint
    /// or network error, the callback listener). Category `needs-auth`.
    #[error("server `{server}`: authorization failed: {message}")]
    Auth {
        /// The server's name.
        server: String,
        /// What failed, in words (redacted).
        message: String,
        /// The error under this one, when there is one.
        #[source]
        source: Option<Cause>,
    },

    /// A tool call got no answer within its timeout (the progress-extended one, or its hard cap).
    #[error("tool `{tool}` on server `{server}` did not answer within {}", fmt_duration(*after))]
    Timeout {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// How long the call waited.
        after: Duration,
    },

    /// A request that is not a tool call (connect, discovery, a control request) did not finish in time.
    #[error("server `{server}` did not finish {operation} within {}", fmt_duration(*after))]
    OperationTimeout {
        /// The server's name (`*` when the request was not about one server).
        server: String,
        /// What did not finish, in words.
        operation: String,
        /// How long it was waited for.
        after: Duration,
    },

    /// The server could not be reached or its connection broke. Category `connection`.
    #[error("server `{server}`: {message}")]
    Connection {
        /// The server's name.
        server: String,
        /// What happened, in words.
        message: String,
        /// The error under this one (a transport, rmcp or I/O error), when there is one.
        #[source]
        source: Option<Cause>,
    },

    /// The server runs the call as a task that had not ended when the call's time was up; it goes on running.
    #[error("tool `{tool}` on server `{server}` is still running as task `{task_id}` ({status})")]
    TaskPending {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The task's id on the server, for `RuntimeHandle::follow_task`.
        task_id: String,
        /// The task's last status as the server gave it.
        status: String,
    },

    /// The server is in restart backoff after failed connects.
    #[error("server `{server}` is unavailable ({reason}); next connect attempt in {}", fmt_duration(*retry_in))]
    Backoff {
        /// The server's name.
        server: String,
        /// Why the last connect failed.
        reason: String,
        /// How long until the next attempt.
        retry_in: Duration,
    },

    /// The server's crash-loop breaker is open: it failed too often in a row and stays stopped until a connect.
    #[error("server `{server}` failed {failures} times in a row and is stopped ({reason}); use connect to retry")]
    CrashLoop {
        /// The server's name.
        server: String,
        /// Why the last attempt failed.
        reason: String,
        /// How many attempts failed in a row.
        failures: u32,
    },

    /// No tool has that name; names what there is instead.
    #[error("{}", unknown_tool_message(name, server.as_deref(), available, suggestions))]
    UnknownTool {
        /// The name that was asked for.
        name: String,
        /// The server the call named or implied, if any.
        server: Option<String>,
        /// Tools of the implied server, when one was implied.
        available: Vec<String>,
        /// Tool names that are close to the one asked for.
        suggestions: Vec<String>,
    },

    /// A name that fits tools of more than one server.
    #[error("tool name `{name}` is ambiguous; candidates: {}", candidates.join(", "))]
    AmbiguousTool {
        /// The name that was asked for.
        name: String,
        /// The full names it could mean.
        candidates: Vec<String>,
    },

    /// No configured server has that name.
    #[error("unknown server `{server}`")]
    UnknownServer {
        /// The name that was asked for.
        server: String,
    },

    /// The arguments do not match the tool's input schema.
    #[error("invalid arguments for `{tool}`: {message}")]
    Validation {
        /// The tool's name.
        tool: String,
        /// Which arguments are wrong and what was expected.
        message: String,
    },

    /// The call needs the host's approval and did not get it.
    #[error("{message}")]
    Approval {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// Why, in words (declined, nobody to ask, timed out).
        message: String,
    },

    /// The server was disabled for this run (`disable`).
    #[error("server `{server}` is disabled")]
    Disabled {
        /// The server's name.
        server: String,
    },

    /// The server's configuration cannot be used as it is.
    #[error("server `{server}` has a configuration error: {message}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong and where (file, field).
        message: String,
    },

    /// The server is defined by a project that has not been trusted.
    #[error("server `{server}` comes from an untrusted project; trust it with `{trust_command}`")]
    Untrusted {
        /// The server's name.
        server: String,
        /// The command that trusts the project.
        trust_command: String,
    },

    /// The tool asked for input the host cannot provide (sampling, elicitation or roots).
    #[error("tool `{tool}` on server `{server}` needs input the host cannot provide: {message}")]
    InputRequired {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// What was asked for and why it cannot be given.
        message: String,
    },

    /// The tool ran and reported an error (`isError: true`).
    #[error("tool `{tool}` on server `{server}` returned an error: {message}")]
    ToolError {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The tool's error text.
        message: String,
        /// The full result, for hosts that render it.
        output: Box<crate::ToolOutput>,
    },

    /// The server answered a request with a JSON-RPC error.
    #[error("server `{server}` answered `{operation}` with error {code}: {message}")]
    Protocol {
        /// The server's name.
        server: String,
        /// The request's method.
        operation: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's error message.
        message: String,
    },

    /// The runtime is shutting down and takes no new work.
    #[error("the runtime is shutting down")]
    ShuttingDown,

    /// A tool's schema in the server's metadata is unusable.
    #[error("the cached {field} of tool `{tool}` on server `{server}` is unusable: {message}")]
    Schema {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The schema field that is wrong (`inputSchema`, `outputSchema`).
        field: String,
        /// What is wrong with it.
        message: String,
    },

    /// Reading or writing the metadata cache failed.
    #[error("metadata cache `{path}`: {message}")]
    Cache {
        /// The cache file.
        path: String,
        /// What failed, in words.
        message: String,
        /// The I/O or JSON error under this one, when there is one.
        #[source]
        source: Option<Cause>,
    },

    /// An actor of the runtime is not running or did not answer (an internal failure).
    #[error("actor runtime: {message}")]
    Actor {
        /// Which actor and what happened.
        message: String,
    },
}

impl Error {
    /// The category of this error.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Error::NeedsAuth { .. } | Error::Auth { .. } => ErrorCategory::NeedsAuth,
            Error::Timeout { .. } | Error::OperationTimeout { .. } | Error::TaskPending { .. } => {
                ErrorCategory::Timeout
            }
            Error::Connection { .. } | Error::Backoff { .. } | Error::CrashLoop { .. } => ErrorCategory::Connection,
            Error::UnknownTool { .. } | Error::AmbiguousTool { .. } => ErrorCategory::UnknownTool,
            Error::UnknownServer { .. } | Error::Disabled { .. } | Error::Config { .. } => ErrorCategory::Config,
            Error::Validation { .. } => ErrorCategory::Validation,
            Error::Approval { .. } => ErrorCategory::Approval,
            Error::Untrusted { .. } => ErrorCategory::Untrusted,
            Error::InputRequired { .. } => ErrorCategory::InputRequired,
            Error::ToolError { .. } => ErrorCategory::ToolError,
            Error::Protocol { code, .. } if *code == rmcp::model::ErrorCode::INVALID_PARAMS.0 => {
                ErrorCategory::Validation
            }
            Error::Protocol { .. }
            | Error::ShuttingDown
            | Error::Cache { .. }
            | Error::Schema { .. }
            | Error::Actor { .. } => ErrorCategory::Other,
        }
    }

    pub(crate) fn actor(message: impl std::fmt::Display) -> Error {
        Error::Actor {
            message: message.to_string(),
        }
    }
}

/// The crate's result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `1.5s`, `250ms`, `2m`: short and stable for messages.
pub(crate) fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        let s = d.as_secs_f64();
        if (s - s.round()).abs() < 0.05 {
            format!("{}s", s.round() as u64)
        } else {
            format!("{s:.1}s")
        }
    } else {
        let s = d.as_secs();
        if s.is_multiple_of(60) {
            format!("{}m", s / 60)
        } else {
            format!("{}m{}s", s / 60, s % 60)
        }
    }
}

fn unknown_tool_message(name: &str, server: Option<&str>, available: &[String], suggestions: &[String]) -> String {
    let mut out = format!("tool `{name}` not found");
    if let Some(server) = server {
        out.push_str(&format!(" on server `{server}`"));
        if !available.is_empty() {
            out.push_str(&format!("; it has: {}", available.join(", ")));
        }
    }
    if !suggestions.is_empty() {
        out.push_str(&format!("; did you mean: {}", suggestions.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short() {
        assert_eq!(fmt_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(fmt_duration(Duration::from_secs(4)), "4s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(fmt_duration(Duration::from_secs(300)), "5m");
        assert_eq!(fmt_duration(Duration::from_secs(90)), "1m30s");
    }

    #[test]
    fn categories_have_wire_names() {
        let e = Error::Backoff {
            server: "s".into(),
            reason: "exited".into(),
            retry_in: Duration::from_secs(4),
        };
        assert_eq!(e.category(), ErrorCategory::Connection);
        assert_eq!(
            e.to_string(),
            "server `s` is unavailable (exited); next connect attempt in 4s"
        );
        assert_eq!(ErrorCategory::NeedsAuth.as_str(), "needs-auth");
        assert_eq!(
            serde_json::to_string(&ErrorCategory::InputRequired).ok().as_deref(),
            Some("\"input-required\"")
        );
    }
}
