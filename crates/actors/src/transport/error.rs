//! [`ConnectError`]: why one connect attempt failed, phrased for a person, never containing a secret.

use std::time::Duration;

/// Why a connect attempt failed. Every message names the server; stderr tails are redacted; no variant ever
/// carries an env value, header value, token or `!command` output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The configuration cannot work as written (missing cwd, bad header name, unknown transport…).
    #[error("server `{server}`: {message}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong and where.
        message: String,
    },
    /// A `!command` secret or `bearerTokenEnv` could not be resolved.
    #[error("server `{server}`: {message}")]
    Secret {
        /// The server's name.
        server: String,
        /// Which field's secret failed and how (never the value).
        message: String,
        /// The `!command` error under this one, when a command failed.
        #[source]
        source: Option<pimcp_config::SecretError>,
    },
    /// The process could not be started (program not found, not executable, fork failed).
    #[error("server `{server}`: {message}")]
    Spawn {
        /// The server's name.
        server: String,
        /// Why the process could not start.
        message: String,
        /// The I/O error of the spawn, when there is one.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The process exited before the handshake finished.
    #[error("server `{server}` exited during startup ({}){}", exit_text(*code), stderr_suffix(stderr))]
    ExitedAtStart {
        /// The server's name.
        server: String,
        /// Its exit code (`None`: killed by a signal).
        code: Option<i32>,
        /// The end of its stderr, redacted.
        stderr: String,
    },
    /// Spawn + handshake did not finish in time (`timeouts.startup`); the child was killed.
    #[error("server `{server}` did not finish its handshake within {}{}", secs(*after), stderr_suffix(stderr))]
    StartupTimeout {
        /// The server's name.
        server: String,
        /// How long it was given.
        after: Duration,
        /// The end of its stderr, redacted.
        stderr: String,
    },
    /// HTTP 401: the server wants credentials (OAuth or a bearer token).
    #[error("server `{server}` needs authentication{}", challenge.as_ref().map(|_| " (the server sent a WWW-Authenticate challenge)").unwrap_or(""))]
    NeedsAuth {
        /// The server's name.
        server: String,
        /// The `WWW-Authenticate` challenge it sent, if any.
        challenge: Option<String>,
    },
    /// An HTTP-level failure, with a hint from the shape probe.
    #[error("server `{server}`: {hint}")]
    Http {
        /// The server's name.
        server: String,
        /// The HTTP status, when there was an answer.
        status: Option<u16>,
        /// What the probe of the endpoint suggests.
        hint: String,
        /// Whether a retry may succeed (a network error or 5xx rather than a wrong URL).
        transient: bool,
    },
    /// The Unix socket could not be reached.
    #[error("server `{server}`: {message}")]
    Socket {
        /// The server's name.
        server: String,
        /// Why it could not be reached.
        message: String,
        /// Whether a retry may succeed (nobody listening yet).
        transient: bool,
        /// The I/O error of the connect.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The peer answered, but not with a usable MCP handshake.
    #[error("server `{server}`: {message}{}", stderr_suffix(stderr))]
    Protocol {
        /// The server's name.
        server: String,
        /// What was wrong with the answer.
        message: String,
        /// The end of its stderr (stdio servers), redacted.
        stderr: String,
    },
    /// The attempt was cancelled; any child was killed.
    #[error("server `{server}`: connect cancelled")]
    Cancelled {
        /// The server's name.
        server: String,
    },
}

fn exit_text(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exit code {c}"),
        None => "killed by a signal".to_owned(),
    }
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn stderr_suffix(stderr: &str) -> String {
    let trimmed = stderr.trim_end();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("; stderr:\n{trimmed}")
    }
}

impl ConnectError {
    /// Whether retrying later (with backoff) can help. Config, auth and cancellation errors need a change first; a
    /// crash at start, a timeout or a failed `!command` secret (a locked password manager) may be transient.
    pub fn is_transient(&self) -> bool {
        match self {
            ConnectError::Config { .. } | ConnectError::NeedsAuth { .. } | ConnectError::Cancelled { .. } => false,
            ConnectError::Secret { .. }
            | ConnectError::Spawn { .. }
            | ConnectError::ExitedAtStart { .. }
            | ConnectError::StartupTimeout { .. }
            | ConnectError::Protocol { .. } => true,
            ConnectError::Http { transient, .. } | ConnectError::Socket { transient, .. } => *transient,
        }
    }

    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            ConnectError::Config { server, .. }
            | ConnectError::Secret { server, .. }
            | ConnectError::Spawn { server, .. }
            | ConnectError::ExitedAtStart { server, .. }
            | ConnectError::StartupTimeout { server, .. }
            | ConnectError::NeedsAuth { server, .. }
            | ConnectError::Http { server, .. }
            | ConnectError::Socket { server, .. }
            | ConnectError::Protocol { server, .. }
            | ConnectError::Cancelled { server } => server,
        }
    }

    /// The kept stderr tail (redacted), for stdio failures.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            ConnectError::ExitedAtStart { stderr, .. }
            | ConnectError::StartupTimeout { stderr, .. }
            | ConnectError::Protocol { stderr, .. } => Some(stderr),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_server_and_include_the_tail() {
        let e = ConnectError::ExitedAtStart {
            server: "gh".into(),
            code: Some(2),
            stderr: "boom\n".into(),
        };
        assert_eq!(
            e.to_string(),
            "server `gh` exited during startup (exit code 2); stderr:\nboom"
        );
        let e = ConnectError::StartupTimeout {
            server: "gh".into(),
            after: Duration::from_millis(1500),
            stderr: String::new(),
        };
        assert_eq!(e.to_string(), "server `gh` did not finish its handshake within 1500ms");
        assert!(e.is_transient());
        assert!(
            !ConnectError::NeedsAuth {
                server: "gh".into(),
                challenge: None
            }
            .is_transient()
        );
    }
}
