//! pimcp-actors: the actor runtime. A SupervisorActor owns one ServerActor per configured server and a RouterActor;
//! each ServerActor drives its server's lifecycle as message-driven state transitions; the router keeps the merged
//! catalog as a snapshot readers clone without messaging anyone; the metadata cache lets lazy servers be searched
//! before they ever start. Transports and child processes live in the private `transport` and `process` modules;
//! what a host or a probe needs of them is re-exported here ([`connect`] one server, [`lines`] for line-framed hosts).

mod auth;
mod cache;
mod call;
mod catalog;
mod client;
mod context;
mod error;
mod handles;
mod host;
mod job;
mod lane;
mod msg;
mod naming;
mod policy;
mod process;
mod progress;
mod requests;
mod resource_interest;
mod router;
mod runtime;
mod server;
mod status;
mod supervisor;
mod sys;
mod task;
mod trace;
pub mod trace_context;
mod transport;

pub use auth::{AUTO_AUTH_WAIT, AuthMode, AuthOptions, AuthStatus, PendingLogin, ServerAuthStatus, TokenSource};
pub use cache::{CACHE_FILE_NAME, CACHE_MAX_AGE, CACHE_VERSION, CacheEntry, CacheFile, Freshness, MetadataCache};
pub use catalog::{
    Catalog, CatalogTool, MetadataSource, Resolution, ServerCatalog, ServerInput, ServerMetadata, ToolInfo,
};
pub use context::CONTROL_REPLY_SLACK;
pub use error::{Cause, Error, ErrorCategory, Result};
pub use host::{
    ApprovalDecision, ApprovalHandler, ApprovalKind, ApprovalRequest, ElicitationHandler, Handlers, RootsProvider,
    SamplingHandler,
};
pub use job::{CallOptions, DEFAULT_MAX_TOTAL_FACTOR, ToolOutput};
pub use naming::{
    Glob, ToolFilter, format_tool_name, resource_tool_name, sanitize_server, server_prefix, tool_candidates,
};
// The OAuth types `AuthOptions` and `auth_start` use, for hosts that do not depend on pimcp-auth themselves.
pub use pimcp_auth::{AuthorizationStart, BrowserOpener, CallbackPort, MemoryStore, TokenStore};
pub use pimcp_surface::ToolSchema;
pub use policy::{ClockWatch, ConnectBackoff, CrashLoopBreaker, Tuning};
pub use process::{
    GUARDIAN_ARG, GUARDIAN_BINARY, GuardianMode, NESTING_ENV, ProcessOptions, STDERR_TAIL_BYTES, ShutdownOutcome,
    StderrTail, guardian_main_if_requested,
};
pub use progress::CallProgress;
pub use router::{DISCOVERY_CONCURRENCY, MAX_DISCOVERY_STARTS, approval_required};
pub use runtime::{RECONFIGURE_REPLY_TIMEOUT, Runtime, RuntimeHandle, RuntimeOptions, ShutdownReport};
pub use status::{RuntimeEvent, ServerLogMessage, ServerNotice, ServerState, ServerStatus, StatusSnapshot};
pub use trace::{
    DEFAULT_TRACE_MAX_BYTES, Direction, MIN_TRACE_MAX_BYTES, MessageKind, ProtocolTrace, ScriptTraceCall,
    ScriptTraceLine, TRACE_FILE_NAME, TRACE_VERSION, TraceLine, TraceSink, trace_enabled,
};
pub use transport::{
    CloseOutcome, ConnectError, ConnectSpec, Connection, Era, PIMCP_SERVER_NAME, SharedHttp, TransportKind, connect,
    default_http_client, lines,
};
