//! The crate's one error enum and its `Result` alias; every variant names the thing and where.

use std::path::PathBuf;

/// Errors of the surface: search queries, `mcp` parameters, tool arguments and spill files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A search without `server` had no query text.
    #[error("search query is empty; pass words to search for, or `server` to list one server's tools")]
    EmptyQuery,
    /// The query had text but no letters or digits to rank on.
    #[error("search query `{query}` has no letters or digits; pass words, or set `regex: true` for a pattern")]
    NoSearchableWords {
        /// The query as given.
        query: String,
    },
    /// A regex query over the length limit.
    #[error("regex query is {len} characters long; the limit is {max}")]
    QueryTooLong {
        /// The query's length in characters.
        len: usize,
        /// The most characters a regex query may have.
        max: usize,
    },
    /// A regex query that does not compile (or compiles too large).
    #[error("regex query `{pattern}` is invalid: {reason}")]
    InvalidRegex {
        /// The pattern as given.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },
    /// A parameter of the `mcp` tool itself has the wrong type or value.
    #[error("parameter `{param}` of the mcp tool {problem}")]
    InvalidParam {
        /// The parameter's name.
        param: String,
        /// What is wrong with it, phrased to follow the parameter's name.
        problem: String,
    },
    /// `args` could not be turned into a JSON object.
    #[error("{0}")]
    InvalidArgs(String),
    /// Tool arguments failed JSON Schema validation; the message lists problems and the expected shape.
    #[error("{message}")]
    ArgsDoNotMatchSchema {
        /// The tool's name.
        tool: String,
        /// One line per mismatch.
        problems: Vec<String>,
        /// The whole message for the model: the problems and the expected shape.
        message: String,
    },
    /// Creating or writing a spill file or directory failed.
    #[error("could not {action} `{path}`: {source}")]
    Spill {
        /// What was being done (`create`, `write`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A spill file would not fit in the spill directory's total budget even after evicting everything else.
    #[error("output of {size} bytes exceeds the spill budget of {budget} bytes")]
    SpillBudget {
        /// The output's size in bytes.
        size: u64,
        /// The spill directory's budget in bytes.
        budget: u64,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
