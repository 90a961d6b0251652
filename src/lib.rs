//! pimcp for Rust hosts: start a runtime of MCP servers (one supervised actor each, started lazily, restarted with
//! backoff), hand the model one small `mcp` tool, and answer its calls.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), pimcp::Error> {
//! use serde_json::json;
//!
//! // Any MCP server; this one is the workspace's test server.
//! let command = mcp_fixture::bin_path();
//! let pimcp = pimcp::Pimcp::builder()
//!     .config_json(json!({ "mcpServers": { "fixture": { "command": command } } }))
//!     .start()
//!     .await?;
//!
//! // The one tool the model sees (name, description, input schema), and what its calls return.
//! assert_eq!(pimcp.tool()["name"], "mcp");
//! let found = pimcp.mcp(json!({ "search": "echo" })).await;
//! assert!(found.text().contains("fixture_echo"));
//! let echoed = pimcp.mcp(json!({ "tool": "fixture_echo", "args": { "text": "hi" } })).await;
//! assert_eq!(echoed.text(), "hi");
//!
//! // The same without the model's indirection.
//! let called = pimcp.call("fixture_echo", json!({ "text": "direct" })).await;
//! assert!(!called.is_error());
//! assert!(pimcp.call("fixture_echo", json!([1])).await.is_error(), "arguments are an object");
//! assert_eq!(pimcp.status().servers.len(), 1);
//!
//! // Several calls in one step, in a sandbox whose only way out is `tools` (the `mcpScript` tool's engine).
//! let code = "const [a, b] = await Promise.all([tools.call('fixture_add', {a: 1, b: 2}), \
//!             tools.call('fixture_add', {a: 3, b: 4})]); return a.sum + b.sum;";
//! let outcome = pimcp.script(code, pimcp::ScriptLimits::DEFAULT).await;
//! assert_eq!(outcome.value.unwrap(), json!(10));
//! assert_eq!(pimcp.script_tool().unwrap()["name"], "mcpScript");
//! pimcp.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Nothing a server starts outlives the process, also when it is SIGKILLed: the runtime's guardian (a second
//! process) kills every server's process group when pimcp is gone. A host that is its own guardian calls
//! [`guardian_main_if_requested`] first thing in `main` and builds with [`Builder::own_executable_as_guardian`];
//! otherwise the guardian is `pimcp-guardian` next to the executable or named by `PIMCP_GUARDIAN`.

// No unsafe code here: the operating system is reached through the lower crates' OS layers.
#![forbid(unsafe_code)]
// Every public item of the facade says what it is for.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use pimcp_actors::{
    ApprovalDecision, ApprovalHandler, ApprovalKind, ApprovalRequest, ElicitationHandler, ErrorCategory, GuardianMode,
    MetadataSource, RootsProvider, RuntimeEvent, SamplingHandler, ServerLogMessage, ServerState, ServerStatus,
    ShutdownReport, StatusSnapshot, ToolSchema, guardian_main_if_requested,
};
/// The configuration model (`mcp.json`'s shape, [`config::Config`]) and its loader. Editing configuration files
/// and trusting projects are `pimcp-run`'s (`pimcp-config`), not a host's.
pub mod config {
    pub use pimcp_config::imports::Os;
    pub use pimcp_config::{
        ApproveTools, AuthConfig, Availability, Config, ConfigProblem, DirectTools, EnvMap, Error, HostConfigDiscovery,
        HttpTransport, IdentityAssertionConfig, Lifecycle, LoadOptions, OAuthConfig, OAuthGrant, Origin, OutputGuard,
        ProtocolMode, Result, ScriptLimits, Secret, SecretValue, ServerConfig, Settings, Severity, SocketTransport,
        SourceFile, SourceKind, StdioTransport, Timeouts, TokenStoreKind, ToolPrefix, TraceSettings, Transport,
        json_schema, load, load_in_memory,
    };
}
/// The errors under [`Error`]: the runtime's (with its [`Cause`] and [`ErrorCategory`]) and the proxy's.
pub use pimcp_actors::{Cause, Error as RuntimeError};
pub use pimcp_config::ScriptLimits;
pub use pimcp_proxy::Error as ProxySetupError;
pub use pimcp_proxy::SurfaceError;
pub use pimcp_proxy::{
    Category, GuardReport, MatchKind, ProxyError, ProxyResponse, ScriptCall, ScriptError, ScriptOutcome, SearchOutcome,
    SearchResultHit, SkippedServer, ToolDoc, ToolInfo,
};
/// The MCP types the handler traits and results use ([`SamplingHandler`], [`ElicitationHandler`],
/// [`ProxyResponse::result`]), from the same `rmcp` pimcp speaks the protocol with.
pub use rmcp;

/// How long [`Pimcp::shutdown`] gives the servers to close before they are killed.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(10);

/// Why a runtime did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The runtime could not start (its directories, the cache).
    #[error(transparent)]
    Runtime(#[from] pimcp_actors::Error),
    /// The proxy over it could not be built (the spill directory for large results).
    #[error(transparent)]
    Proxy(#[from] pimcp_proxy::Error),
}

/// Where the configuration comes from.
#[derive(Debug)]
enum Source {
    /// The user's files (the same sources `pimcp-run` reads), with an optional replacement of pimcp's own file.
    Files(Option<PathBuf>),
    /// A complete configuration in `mcp.json`'s shape, never merged with files.
    Json(Value),
}

/// Builds a [`Pimcp`]. The defaults are those of `pimcp-run`: the configuration files of the current project and the
/// user, the agent directory (`$PI_CODING_AGENT_DIR`, else `~/.pi/agent`) for the metadata cache, pimcp's data
/// directory (`$PIMCP_DATA_DIR`, else the platform's) for tokens and trust records.
#[derive(Debug)]
pub struct Builder {
    source: Source,
    project_dir: Option<PathBuf>,
    agent_dir: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    handlers: pimcp_actors::Handlers,
    guardian: GuardianMode,
}

impl Builder {
    /// Reads the user's configuration files, with `path` in place of pimcp's own global file.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Builder {
        self.source = Source::Files(Some(path.into()));
        self
    }

    /// Uses `json` (an object in `mcp.json`'s shape: `mcpServers`, `settings`) as the whole configuration. Servers
    /// whose entries are invalid are reported in [`Pimcp::status`] and never started; the others work.
    pub fn config_json(mut self, json: Value) -> Builder {
        self.source = Source::Json(json);
        self
    }

    /// The project directory: project configuration files, trust, relative paths, stdio servers' default working
    /// directory. Default: the current directory.
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.project_dir = Some(dir.into());
        self
    }

    /// Where the metadata cache lives (`<dir>/pimcp/cache.json`).
    pub fn agent_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.agent_dir = Some(dir.into());
        self
    }

    /// pimcp's private data: OAuth tokens (when no keyring is used), trust records, spill files.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.data_dir = Some(dir.into());
        self
    }

    /// Answers servers' `sampling/createMessage` requests (the host's model).
    pub fn sampling(mut self, handler: Arc<dyn SamplingHandler>) -> Builder {
        self.handlers.sampling = Some(handler);
        self
    }

    /// Answers servers' `elicitation/create` requests (the host's user).
    pub fn elicitation(mut self, handler: Arc<dyn ElicitationHandler>) -> Builder {
        self.handlers.elicitation = Some(handler);
        self
    }

    /// Answers servers' `roots/list` requests.
    pub fn roots(mut self, provider: Arc<dyn RootsProvider>) -> Builder {
        self.handlers.roots = Some(provider);
        self
    }

    /// Decides tool calls that need approval (`approveTools`).
    pub fn approval(mut self, handler: Arc<dyn ApprovalHandler>) -> Builder {
        self.handlers.approval = Some(handler);
        self
    }

    /// The current executable serves as the guardian: its `main` calls [`guardian_main_if_requested`] first.
    pub fn own_executable_as_guardian(mut self) -> Builder {
        self.guardian = GuardianMode::CurrentExe;
        self
    }

    /// Which executable serves as the guardian (see [`GuardianMode`]).
    pub fn guardian(mut self, mode: GuardianMode) -> Builder {
        self.guardian = mode;
        self
    }

    /// Loads the configuration and starts the runtime. Servers start when first used (or at once with
    /// `lifecycle: "eager"`); this returns without waiting for any of them.
    pub async fn start(self) -> Result<Pimcp, Error> {
        let project_dir = match self.project_dir {
            Some(dir) => dir,
            None => std::env::current_dir().unwrap_or_default(),
        };
        let config_path = match &self.source {
            Source::Files(path) => path.clone(),
            Source::Json(_) => None,
        };
        let mut load = pimcp_config::LoadOptions::from_process(project_dir, config_path);
        load.agent_dir = self.agent_dir;
        if let Some(dir) = self.data_dir {
            load.data_dir = dir;
        }
        let config = match &self.source {
            Source::Files(_) => pimcp_config::load(&load),
            Source::Json(json) => pimcp_config::load_in_memory(json, &load),
        };
        let mut options = pimcp_actors::RuntimeOptions::new(config.clone(), load.agent_dir(), load.data_dir.clone());
        options.handlers = self.handlers;
        options.process.guardian = self.guardian;
        let runtime = pimcp_actors::Runtime::start(options).await?;
        let proxy = match pimcp_proxy::Proxy::new(runtime.handle(), &config) {
            Ok(proxy) => proxy,
            Err(e) => {
                runtime.shutdown(SHUTDOWN_BOUND).await;
                return Err(e.into());
            }
        };
        let tool = pimcp_proxy::mcp_tool(&pimcp_proxy::ToolDefOptions::from_config(&config));
        let script_tool = config
            .settings
            .script
            .map(|limits| serde_json::to_value(pimcp_proxy::script_tool(&limits)).unwrap_or_default());
        Ok(Pimcp {
            runtime,
            proxy,
            tool: serde_json::to_value(tool).unwrap_or_default(),
            script_tool,
        })
    }
}

/// A running pimcp: its servers, the `mcp` tool over them, their status. Dropping it without [`Pimcp::shutdown`]
/// still ends every server process (the runtime's tasks are cancelled and their process groups killed).
pub struct Pimcp {
    runtime: pimcp_actors::Runtime,
    proxy: pimcp_proxy::Proxy,
    tool: Value,
    script_tool: Option<Value>,
}

impl std::fmt::Debug for Pimcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pimcp").finish_non_exhaustive()
    }
}

impl Pimcp {
    /// A builder with the defaults described at [`Builder`].
    pub fn builder() -> Builder {
        Builder {
            source: Source::Files(None),
            project_dir: None,
            agent_dir: None,
            data_dir: None,
            handlers: pimcp_actors::Handlers::default(),
            guardian: GuardianMode::Auto,
        }
    }

    /// The `mcp` tool to hand the model: `{name, description, inputSchema}`, about 250 tokens, naming the
    /// configured servers.
    pub fn tool(&self) -> &Value {
        &self.tool
    }

    /// The `mcpScript` tool to hand the model next to [`Pimcp::tool`] (`None` with `scriptMode: false`); answer its
    /// calls with [`Pimcp::script`] on the `code` argument.
    pub fn script_tool(&self) -> Option<&Value> {
        self.script_tool.as_ref()
    }

    /// Answers one call of the `mcp` tool with the model's `arguments` (status, `search`, `describe`, `tool` +
    /// `args`, `connect`, …): exactly what `pimcp-run` answers a host. Never fails: errors are results the model
    /// reads, with a [`Category`].
    pub async fn mcp(&self, arguments: Value) -> ProxyResponse {
        self.proxy
            .handle_arguments(Some(&arguments), &pimcp_proxy::CallContext::default())
            .await
    }

    /// Ranked search over every server's tools; servers nothing is known of yet are started (bounded) first.
    pub async fn search(&self, query: &str) -> Result<SearchOutcome, ProxyError> {
        self.proxy
            .search_discovering(&pimcp_proxy::SearchQuery::new(query))
            .await
    }

    /// One tool in full: its server, description and input schema.
    pub async fn describe(&self, tool: &str) -> Result<ToolInfo, ProxyError> {
        self.proxy.describe(tool, None).await
    }

    /// Calls `tool` (its exposed name, e.g. `github_create_issue`) with `args` (a JSON object; anything else is a
    /// validation error). Arguments are checked against the tool's schema before the server sees them.
    pub async fn call(&self, tool: &str, args: Value) -> ProxyResponse {
        let args = match pimcp_proxy::parse_args(Some(&args)) {
            Ok(args) => args,
            Err(e) => return ProxyError::new(Category::Validation, e.to_string()).into(),
        };
        self.proxy
            .call(tool, args, None, &pimcp_proxy::CallContext::default())
            .await
    }

    /// Runs `code`, the body of an async JavaScript function, in a fresh sandbox with `limits`
    /// ([`ScriptLimits::DEFAULT`]: 30 s, 64 MiB, 50 calls, 8 at once): `await tools.call(name, args)`,
    /// `tools.search(query, {limit, server})` and `tools.describe(name)` reach the servers exactly as [`Pimcp::call`],
    /// [`Pimcp::search`] and [`Pimcp::describe`] do; nothing else leaves the sandbox. The outcome holds the returned
    /// value (as JSON), the `console` lines and the calls made; [`ScriptOutcome::text`] is what a model would read.
    pub async fn script(&self, code: &str, limits: ScriptLimits) -> ScriptOutcome {
        self.proxy
            .script_with_limits(code, limits, &pimcp_proxy::CallContext::default())
            .await
    }

    /// Every server's state, pid, tool count, last error and uptime. Never waits on a server.
    pub fn status(&self) -> StatusSnapshot {
        self.runtime.handle().status()
    }

    /// State changes, restarts, catalog updates, as they happen.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<RuntimeEvent> {
        self.runtime.handle().events()
    }

    /// Closes every server (gracefully within [`SHUTDOWN_BOUND`], then killed) and stops the runtime.
    pub async fn shutdown(self) -> ShutdownReport {
        self.runtime.shutdown(SHUTDOWN_BOUND).await
    }
}
