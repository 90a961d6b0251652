//! The model-facing surface of pimcp's `mcp` proxy tool, as pure functions over plain data: catalog search,
//! parameter shapes, argument validation, result rendering, the output guard, the texts the model reads and the tool
//! definition itself. The runtime (`pimcp-actors`) feeds it data; nothing here does I/O except spill files.

mod describe;
mod error;
mod guard;
mod render;
mod request;
mod search;
mod shapes;
mod text;
mod tool_def;
mod validate;

pub use describe::{describe_text, tool_ambiguous, tool_not_found};
pub use error::{Error, Result};
pub use guard::{
    DEFAULT_SPILL_BUDGET_BYTES, GuardReport, Guarded, MAX_BLOB_BYTES, SPILL_DIR_PREFIX, SpillDir, apply_guard,
};
pub use render::{Binary, BinaryKind, EMPTY_ERROR, EMPTY_RESULT, Piece, Rendered, human_bytes, render_call_result};
pub use request::{PARAMS, ProxyRequest, parse_request};
pub use search::{
    DEFAULT_LIMIT, DEFAULT_SUGGESTIONS, Lookup, MAX_LIMIT, MAX_QUERY_TOKENS, MAX_REGEX_CHARS, MatchKind, SearchHit,
    SearchIndex, SearchPage, SearchQuery, ToolDoc,
};
pub use shapes::{DEFAULT_SHAPE_CHARS, MAX_ENUM_VALUES, MAX_REF_DEPTH, shape, shape_within};
pub use text::{
    CATEGORY_META_KEY, Category, INSTRUCTIONS_PREVIEW_CHARS, ProxyError, ServerLine, ServerState, SkippedServer,
    human_duration, instructions_text, list_text, plural, search_text, status_text, text_result, with_category,
};
pub use tool_def::{MAX_DEFINITION_CHARS, TOOL_NAME, ToolDefOptions, mcp_tool, mcp_tool_json};
pub use validate::{ArgsValidator, MAX_LISTED_PROBLEMS, OutputReport, check_not_nested, parse_args, validate_output};
