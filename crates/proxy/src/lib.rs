//! The model-facing surface of pimcp's `mcp` proxy tool, as pure functions over plain data: catalog search,
//! parameter shapes, argument validation, result rendering, the output guard, the texts the model reads and the tool
//! definition itself. The runtime (`pimcp-actors`) feeds it data; nothing here does I/O except spill files.

mod error;
mod search;

pub use error::{Error, Result};
pub use search::{
    DEFAULT_LIMIT, DEFAULT_SUGGESTIONS, Lookup, MAX_LIMIT, MAX_QUERY_TOKENS, MAX_REGEX_CHARS, MatchKind, SearchHit,
    SearchIndex, SearchPage, SearchQuery, ToolDoc,
};
