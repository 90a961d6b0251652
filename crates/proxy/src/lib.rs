//! pimcp's `mcp` proxy tool over a running runtime: the model-facing surface itself (search, shapes, validation,
//! rendering, the output guard, texts, the tool definition) is `pimcp-surface`, re-exported here; this crate adds
//! the [`Proxy`] façade over a running runtime (every mode of the `mcp` tool, direct tools,
//! prompts, resources) and the `pimcp-run` MCP server ([`ProxyServer`], [`serve`], [`serve_stdio`], [`run_stdio`])
//! with its [`HostBridge`] forwarding sampling, elicitation, roots and approvals to the host, over stdio or shared by
//! many host sessions over Streamable HTTP ([`serve_http`], [`run_http`]; [`attach_stdio`] relays a stdio host to it).

// No unsafe code here: the operating system is reached through the lower crates' OS layers.
#![forbid(unsafe_code)]

mod approval;
mod direct;
mod error;
mod facade;
mod forward;
mod host_input;
mod host_log;
mod http;
mod resource_subs;
mod script;
mod server;
mod stdio;
mod sys;

pub use self::http::{
    AttachOptions, AuthToken, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_REQUESTS_PER_SESSION, DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE, HttpOptions, LOOPBACK_HOSTS, MCP_PATH, STATUS_PATH, STATUS_SCHEMA, attach_stdio,
    attach_transport, bind, run_http, serve_http,
};
pub use approval::{APPROVAL_ARGS_PREVIEW_CHARS, APPROVAL_TIMEOUT, approval_elicitation};
pub use direct::{DirectTool, NO_DESCRIPTION, direct_tools};
pub use error::{Error, Result};
pub use facade::{
    CATALOG_SETTLE, COLD_DISCOVERY_CONCURRENCY, COLD_DISCOVERY_MAX, CallContext, PromptEntry, Proxy, ProxyOptions,
    ProxyResponse, SearchOutcome, SearchResultHit, ServerListing, ToolInfo, category_of,
};
pub use forward::{ELICITATION_TIMEOUT, HostBridge, ROOTS_TIMEOUT, SAMPLING_TIMEOUT};
/// The surface's own errors (query, parameters, arguments, spill files), as [`Error::Surface`] carries them.
pub use pimcp_surface::Error as SurfaceError;
pub use script::{SCRIPT_TOOL_NAME, ScriptCall, ScriptError, ScriptOutcome, script_tool};
pub use server::{
    DEFAULT_DRAIN_BOUND, DEFAULT_SHUTDOWN_BOUND, IMMEDIATE_SHUTDOWN_BOUND, ProxyServer, ReloadFn, SERVER_NAME,
    SIGNAL_BURST, SURFACE_DEBOUNCE, ServeOptions, run_stdio, serve, serve_lines, serve_stdio, stdin_pipe,
};
pub use stdio::{HostStdin, HostStdout, host_stdio};
pub use sys::{DirectStdin, DirectStdout, ReloadSignal, StopSignal, StopSignals, reload_signal, stop_signals};

// The model-facing surface this crate serves, re-exported so that hosts and the CLI reach all of the proxy through
// one crate.
pub use pimcp_surface::{
    APPROVAL_MARK, APPROVAL_NOTE, ArgsValidator, Binary, BinaryKind, CATEGORY_META_KEY, Category, DEFAULT_LIMIT,
    DEFAULT_SHAPE_CHARS, DEFAULT_SPILL_BUDGET_BYTES, DEFAULT_SUGGESTIONS, EMPTY_ERROR, EMPTY_RESULT, GuardReport,
    Guarded, INSTRUCTIONS_PREVIEW_CHARS, Lookup, MAX_BLOB_BYTES, MAX_DEFINITION_CHARS, MAX_DESCRIPTIONS_CHARS,
    MAX_ENUM_VALUES, MAX_LIMIT, MAX_LISTED_PROBLEMS, MAX_QUERY_TOKENS, MAX_REF_DEPTH, MAX_REGEX_CHARS,
    MAX_SERVER_DESCRIPTION_CHARS, MatchKind, OutputReport, PARAMS, Piece, ProxyError, ProxyRequest, Rendered,
    SPILL_DIR_PREFIX, SearchHit, SearchIndex, SearchPage, SearchQuery, ServerLine, ServerState, SkippedServer,
    SpillDir, TOOL_NAME, ToolDefOptions, ToolDoc, apply_guard, check_not_nested, describe_text, doc_schema,
    human_bytes, human_duration, instructions_text, json_kind, list_text, mcp_tool, mcp_tool_json, parse_args,
    parse_request, plural, render_call_result, search_text, shape, shape_within, short_description, status_text,
    text_result, tool_ambiguous, tool_not_found, validate_output, with_category,
};
