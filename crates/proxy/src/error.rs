//! The crate's one error enum and its `Result` alias; every variant names the thing and where.

use std::path::PathBuf;

/// Errors of the pure proxy core: search queries, `mcp` parameters, tool arguments and spill files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A search without `server` had no query text.
    #[error("search query is empty; pass words to search for, or `server` to list one server's tools")]
    EmptyQuery,
    /// The query had text but no letters or digits to rank on.
    #[error("search query `{query}` has no letters or digits; pass words, or set `regex: true` for a pattern")]
    NoSearchableWords { query: String },
    /// A regex query over the length limit.
    #[error("regex query is {len} characters long; the limit is {max}")]
    QueryTooLong { len: usize, max: usize },
    /// A regex query that does not compile (or compiles too large).
    #[error("regex query `{pattern}` is invalid: {reason}")]
    InvalidRegex { pattern: String, reason: String },
    /// A parameter of the `mcp` tool itself has the wrong type or value.
    #[error("parameter `{param}` of the mcp tool {problem}")]
    InvalidParam { param: String, problem: String },
    /// `args` could not be turned into a JSON object.
    #[error("{0}")]
    InvalidArgs(String),
    /// Tool arguments failed JSON Schema validation; the message lists problems and the expected shape.
    #[error("{message}")]
    ArgsDoNotMatchSchema {
        tool: String,
        problems: Vec<String>,
        message: String,
    },
    /// Creating or writing a spill file or directory failed.
    #[error("could not {action} `{path}`: {source}")]
    Spill {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A spill file would not fit in the spill directory's total budget even after evicting everything else.
    #[error("output of {size} bytes exceeds the spill budget of {budget} bytes")]
    SpillBudget { size: u64, budget: u64 },
    /// Serving MCP to the host failed (handshake, transport, signal setup).
    #[error("serving MCP over {transport}: {message}")]
    Serve { transport: &'static str, message: String },
    /// The runtime could not start.
    #[error("starting the runtime: {0}")]
    Runtime(#[from] pimcp_actors::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
