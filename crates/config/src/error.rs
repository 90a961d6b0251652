//! The crate's error type: everything that can fail in an operation the caller asked for (editing, trusting, resolving
//! a `!command`). Loading never returns an error: its problems are values in `Config::problems`.

use std::path::PathBuf;

/// Why a `!command` secret could not be resolved. Messages name the context (e.g. `headers.Authorization`), never the
/// command's output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The command could not be started.
    #[error("`{context}` command failed to start: {reason}")]
    Spawn {
        /// The field the secret is for (e.g. `headers.Authorization`).
        context: String,
        /// Why it could not start.
        reason: String,
    },
    /// The command did not finish in time.
    #[error("`{context}` command timed out after {}s", seconds)]
    Timeout {
        /// The field the secret is for.
        context: String,
        /// The time it was given.
        seconds: u64,
    },
    /// The command printed more than a secret may be.
    #[error("`{context}` command output exceeded {} KiB", limit_bytes / 1024)]
    OutputTooLarge {
        /// The field the secret is for.
        context: String,
        /// The most bytes a secret may have.
        limit_bytes: usize,
    },
    /// The command exited with a non-zero code.
    #[error("`{context}` command exited with code {code}")]
    Exit {
        /// The field the secret is for.
        context: String,
        /// Its exit code.
        code: i32,
    },
    /// The command was killed by a signal.
    #[error("`{context}` command was killed by signal {signal}")]
    Signal {
        /// The field the secret is for.
        context: String,
        /// The signal's number.
        signal: i32,
    },
    /// The command printed nothing.
    #[error("`{context}` command returned empty output")]
    Empty {
        /// The field the secret is for.
        context: String,
    },
    /// The command's output is not UTF-8.
    #[error("`{context}` command output is not valid UTF-8")]
    NotUtf8 {
        /// The field the secret is for.
        context: String,
    },
}

/// Errors of the operations of this crate (editing, trust records, secrets).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid JSONC.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line of the error (1-based).
        line: usize,
        /// The column of the error (1-based).
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// A file is JSONC but not a config pimcp can edit.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `add` of a name that is already configured in the file.
    #[error("server `{name}` already exists in {}", path.display())]
    ServerExists {
        /// The server's name.
        name: String,
        /// The file that has it.
        path: PathBuf,
    },
    /// No server by that name.
    #[error("no server named `{name}` is configured{hint}")]
    UnknownServer {
        /// The name that was asked for.
        name: String,
        /// A suggestion (a close name, or where to add one), empty when there is none.
        hint: String,
    },
    /// The server comes from a file pimcp does not edit (a host import, a plugin, memory).
    #[error("server `{name}` is not defined in any file pimcp edits: {reason}")]
    NotEditable {
        /// The server's name.
        name: String,
        /// Where it comes from and what to do instead.
        reason: String,
    },
    /// The name cannot be a server name.
    #[error("invalid server name `{name}`: {reason}")]
    InvalidName {
        /// The name that was given.
        name: String,
        /// Which characters or form are allowed.
        reason: String,
    },
    /// A `!command` secret could not be resolved.
    #[error(transparent)]
    Secret(#[from] SecretError),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
