//! The crate's one error type: every failure a host can see, each carrying an [`ErrorCategory`].
//!
//! Messages are lowercase, name the server/tool they are about, and never contain a secret value.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The machine category of an error. Proxy results carry it as the kebab-case string of [`ErrorCategory::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCategory {
    NeedsAuth,
    Timeout,
    /// Transient transport error, server down, crashed or in backoff.
    Connection,
    UnknownTool,
    /// Arguments do not match the tool's schema.
    Validation,
    Approval,
    /// Missing variable, bad field, unknown or disabled server.
    Config,
    Untrusted,
    InputRequired,
    /// The tool itself returned `isError: true`.
    ToolError,
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
    #[error("server `{server}` needs authentication ({detail}); run `pimcp-run auth login {server}`")]
    NeedsAuth { server: String, detail: String },

    /// An OAuth step failed for another reason than a missing login (discovery, registration, a token endpoint
    /// or network error, the callback listener). Category `needs-auth`.
    #[error("server `{server}`: authorization failed: {message}")]
    Auth {
        server: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },

    #[error("tool `{tool}` on server `{server}` did not answer within {}", fmt_duration(*after))]
    Timeout {
        server: String,
        tool: String,
        after: Duration,
    },

    #[error("server `{server}` did not finish {operation} within {}", fmt_duration(*after))]
    OperationTimeout {
        server: String,
        operation: String,
        after: Duration,
    },

    #[error("server `{server}`: {message}")]
    Connection {
        server: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },

    /// The server runs the call as a task that had not ended when the call's time was up; it goes on running.
    #[error("tool `{tool}` on server `{server}` is still running as task `{task_id}` ({status})")]
    TaskPending {
        server: String,
        tool: String,
        task_id: String,
        status: String,
    },

    #[error("server `{server}` is unavailable ({reason}); next connect attempt in {}", fmt_duration(*retry_in))]
    Backoff {
        server: String,
        reason: String,
        retry_in: Duration,
    },

    #[error("server `{server}` failed {failures} times in a row and is stopped ({reason}); use connect to retry")]
    CrashLoop {
        server: String,
        reason: String,
        failures: u32,
    },

    #[error("{}", unknown_tool_message(name, server.as_deref(), available, suggestions))]
    UnknownTool {
        name: String,
        server: Option<String>,
        /// Tools of the implied server, when one was implied.
        available: Vec<String>,
        suggestions: Vec<String>,
    },

    #[error("tool name `{name}` is ambiguous; candidates: {}", candidates.join(", "))]
    AmbiguousTool { name: String, candidates: Vec<String> },

    #[error("unknown server `{server}`")]
    UnknownServer { server: String },

    #[error("invalid arguments for `{tool}`: {message}")]
    Validation { tool: String, message: String },

    #[error("{message}")]
    Approval {
        server: String,
        tool: String,
        message: String,
    },

    #[error("server `{server}` is disabled")]
    Disabled { server: String },

    #[error("server `{server}` has a configuration error: {message}")]
    Config { server: String, message: String },

    #[error("server `{server}` comes from an untrusted project; trust it with `{trust_command}`")]
    Untrusted { server: String, trust_command: String },

    #[error("tool `{tool}` on server `{server}` needs input the host cannot provide: {message}")]
    InputRequired {
        server: String,
        tool: String,
        message: String,
    },

    #[error("tool `{tool}` on server `{server}` returned an error: {message}")]
    ToolError {
        server: String,
        tool: String,
        message: String,
        /// The full result, for hosts that render it.
        output: Box<crate::ToolOutput>,
    },

    #[error("server `{server}` answered `{operation}` with error {code}: {message}")]
    Protocol {
        server: String,
        operation: String,
        code: i32,
        message: String,
    },

    #[error("the runtime is shutting down")]
    ShuttingDown,

    #[error("the cached {field} of tool `{tool}` on server `{server}` is unusable: {message}")]
    Schema {
        server: String,
        tool: String,
        field: String,
        message: String,
    },

    #[error("metadata cache `{path}`: {message}")]
    Cache {
        path: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },

    #[error("actor runtime: {message}")]
    Actor { message: String },
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
