//! The crate's error type: everything that can fail in an operation the caller asked for (editing, trusting, resolving
//! a `!command`). Loading never returns an error: its problems are values in `Config::problems`.

use std::path::PathBuf;

/// Why a `!command` secret could not be resolved. Messages name the context (e.g. `headers.Authorization`), never the
/// command's output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("`{context}` command failed to start: {reason}")]
    Spawn { context: String, reason: String },
    #[error("`{context}` command timed out after {}s", seconds)]
    Timeout { context: String, seconds: u64 },
    #[error("`{context}` command output exceeded {} KiB", limit_bytes / 1024)]
    OutputTooLarge { context: String, limit_bytes: usize },
    #[error("`{context}` command exited with code {code}")]
    Exit { context: String, code: i32 },
    #[error("`{context}` command was killed by signal {signal}")]
    Signal { context: String, signal: i32 },
    #[error("`{context}` command returned empty output")]
    Empty { context: String },
    #[error("`{context}` command output is not valid UTF-8")]
    NotUtf8 { context: String },
}

/// Errors of the operations of this crate (editing, trust records, secrets).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("server `{name}` already exists in {}", path.display())]
    ServerExists { name: String, path: PathBuf },
    #[error("no server named `{name}` is configured{hint}")]
    UnknownServer { name: String, hint: String },
    #[error("server `{name}` is not defined in any file pimcp edits: {reason}")]
    NotEditable { name: String, reason: String },
    #[error("invalid server name `{name}`: {reason}")]
    InvalidName { name: String, reason: String },
    #[error(transparent)]
    Secret(#[from] SecretError),
}

pub type Result<T> = std::result::Result<T, Error>;
