//! What the model sees of pimcp, as pure functions over plain data: tool schemas ([`ToolSchema`], parsed on first
//! use), catalog search, parameter shapes, argument validation, result rendering, the output guard, the texts the
//! model reads and the `mcp` tool's definition and arguments. No runtime and no actors: the runtime (`pimcp-actors`)
//! holds its catalog's schemas as [`ToolSchema`]s and the serving crate (`pimcp-proxy`) feeds the rest; nothing here
//! does I/O except spill files and reading a schema from the metadata cache file.

// No unsafe code here: the two calls into the operating system (`sys/`) are safe standard-library extensions.
#![forbid(unsafe_code)]

mod describe;
mod error;
mod guard;
mod render;
mod request;
mod schema;
mod search;
mod shapes;
mod sys;
mod text;
mod tool_def;
mod uri_template;
mod validate;

pub use describe::{APPROVAL_NOTE, describe_text, tool_ambiguous, tool_not_found};
pub use error::{Error, Result};
pub use guard::{
    DEFAULT_SPILL_BUDGET_BYTES, GuardReport, Guarded, MAX_BLOB_BYTES, SPILL_DIR_PREFIX, SpillDir, apply_guard,
    guard_own_text,
};
pub use render::{Binary, BinaryKind, EMPTY_ERROR, EMPTY_RESULT, Piece, Rendered, human_bytes, render_call_result};
pub use request::{PARAMS, ProxyRequest, parse_request, parse_request_owned};
pub use schema::{Source, ToolSchema, with_source};
pub use search::{
    DEFAULT_LIMIT, DEFAULT_SUGGESTIONS, Lookup, MAX_LIMIT, MAX_QUERY_TOKENS, MAX_REGEX_CHARS, MatchKind, SearchHit,
    SearchIndex, SearchPage, SearchQuery, ToolDoc, doc_schema,
};
pub use shapes::{DEFAULT_SHAPE_CHARS, MAX_ENUM_VALUES, MAX_REF_DEPTH, shape, shape_within};
pub use text::{
    APPROVAL_MARK, CATEGORY_META_KEY, Category, INSTRUCTIONS_PREVIEW_CHARS, MAX_STATUS_LINES, ProxyError, ServerLine,
    ServerState, SkippedServer, config_problems_text, human_duration, instructions_text, list_text, plural,
    search_text, status_text, text_result, with_category,
};
pub use tool_def::{
    MAX_DEFINITION_CHARS, MAX_DESCRIPTIONS_CHARS, MAX_SERVER_DESCRIPTION_CHARS, TOOL_NAME, ToolDefOptions, mcp_tool,
    mcp_tool_json, short_description,
};
pub use uri_template::template_matches;
pub use validate::{
    ArgsValidator, MAX_LISTED_PROBLEMS, OutputReport, OutputValidator, check_not_nested, json_kind, parse_args,
    validate_output,
};
