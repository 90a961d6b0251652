//! [`TransportKind`]: which wire a connection runs on. A leaf, so the trace and status code name it without
//! depending on the transports.

use serde::{Deserialize, Serialize};

/// Which wire a connection runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// A child process over stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    StreamableHttp,
    /// The legacy HTTP+SSE transport.
    LegacySse,
    /// A Unix socket.
    UnixSocket,
}
