//! The model-facing surface of pimcp's `mcp` proxy tool, as pure functions over plain data: catalog search,
//! parameter shapes, argument validation, result rendering, the output guard, the texts the model reads and the tool
//! definition itself. The runtime (`pimcp-actors`) feeds it data; nothing here does I/O except spill files.
//! On top of those: the [`Proxy`] façade over a running runtime (every mode of the `mcp` tool, direct tools,
//! prompts, resources) and the `pimcp-run` MCP server ([`ProxyServer`], [`serve`], [`serve_stdio`], [`run_stdio`])
//! with its [`HostBridge`] forwarding sampling, elicitation, roots and approvals to the host, over stdio or shared by
//! many host sessions over Streamable HTTP ([`serve_http`], [`run_http`]; [`attach_stdio`] relays a stdio host to it).

// No unsafe code here: the operating system is reached through the lower crates' OS layers.
#![forbid(unsafe_code)]

mod approval;
mod describe;
mod direct;
mod error;
mod facade;
mod forward;
mod guard;
mod host_input;
mod host_log;
mod http;
mod render;
mod request;
mod resource_subs;
mod script;
mod search;
mod server;
mod shapes;
mod stdio;
mod sys;
mod text;
mod tool_def;
mod uri_template;
mod validate;

pub use self::http::{
    AttachOptions, AuthToken, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_REQUESTS_PER_SESSION, DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE, HttpOptions, LOOPBACK_HOSTS, MCP_PATH, STATUS_PATH, STATUS_SCHEMA, attach_stdio,
    attach_transport, bind, run_http, serve_http,
};
pub use approval::{APPROVAL_ARGS_PREVIEW_CHARS, APPROVAL_TIMEOUT, approval_elicitation};
pub use describe::{APPROVAL_NOTE, describe_text, tool_ambiguous, tool_not_found};
pub use direct::{DirectTool, NO_DESCRIPTION, direct_tools};
pub use error::{Error, Result};
pub use facade::{
    CATALOG_SETTLE, COLD_DISCOVERY_CONCURRENCY, COLD_DISCOVERY_MAX, CallContext, PromptEntry, Proxy, ProxyOptions,
    ProxyResponse, SearchOutcome, SearchResultHit, ServerListing, ToolInfo, category_of,
};
pub use forward::{ELICITATION_TIMEOUT, HostBridge, ROOTS_TIMEOUT, SAMPLING_TIMEOUT};
pub use guard::{
    DEFAULT_SPILL_BUDGET_BYTES, GuardReport, Guarded, MAX_BLOB_BYTES, SPILL_DIR_PREFIX, SpillDir, apply_guard,
};
pub use render::{Binary, BinaryKind, EMPTY_ERROR, EMPTY_RESULT, Piece, Rendered, human_bytes, render_call_result};
pub use request::{PARAMS, ProxyRequest, parse_request};
pub use script::{SCRIPT_TOOL_NAME, ScriptCall, ScriptError, ScriptOutcome, script_tool};
pub use search::{
    DEFAULT_LIMIT, DEFAULT_SUGGESTIONS, Lookup, MAX_LIMIT, MAX_QUERY_TOKENS, MAX_REGEX_CHARS, MatchKind, SearchHit,
    SearchIndex, SearchPage, SearchQuery, ToolDoc, doc_schema,
};
pub use server::{
    DEFAULT_DRAIN_BOUND, DEFAULT_SHUTDOWN_BOUND, IMMEDIATE_SHUTDOWN_BOUND, ProxyServer, ReloadFn, SERVER_NAME,
    SIGNAL_BURST, SURFACE_DEBOUNCE, ServeOptions, run_stdio, serve, serve_lines, serve_stdio, stdin_pipe,
};
pub use shapes::{DEFAULT_SHAPE_CHARS, MAX_ENUM_VALUES, MAX_REF_DEPTH, shape, shape_within};
pub use stdio::{HostStdin, HostStdout, host_stdio};
pub use sys::{DirectStdin, DirectStdout, ReloadSignal, StopSignal, StopSignals, reload_signal, stop_signals};
pub use text::{
    APPROVAL_MARK, CATEGORY_META_KEY, Category, INSTRUCTIONS_PREVIEW_CHARS, ProxyError, ServerLine, ServerState,
    SkippedServer, human_duration, instructions_text, list_text, plural, search_text, status_text, text_result,
    with_category,
};
pub use tool_def::{
    MAX_DEFINITION_CHARS, MAX_DESCRIPTIONS_CHARS, MAX_SERVER_DESCRIPTION_CHARS, TOOL_NAME, ToolDefOptions, mcp_tool,
    mcp_tool_json, short_description,
};
pub use validate::{ArgsValidator, MAX_LISTED_PROBLEMS, OutputReport, check_not_nested, parse_args, validate_output};
