//! The proxy façade: [`Proxy`] answers every mode of the `mcp` tool over a running runtime — status, list,
//! search, describe, instructions, connect and call — as tool results that carry an error category on failure, and
//! offers the same data as structs (`status`, `search`, `describe`, `call`, …) for the CLI. It keeps one
//! [`SearchIndex`] per catalog snapshot (rebuilt when the runtime publishes a new catalog, never per query), one
//! compiled argument validator per tool schema, and the [`SpillDir`] of the output guard.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pimcp_actors::{
    CallOptions, CallProgress, Catalog, CatalogTool, Error as RuntimeError, ErrorCategory, Glob, MetadataSource,
    Resolution, RuntimeHandle, ServerCatalog, ServerState as RuntimeState, ServerStatus, StatusSnapshot, ToolOutput,
    approval_required, sanitize_server, tool_candidates,
};
use pimcp_config::{Config, ServerConfig};
use rmcp::model::{
    CallToolResult, CompleteRequestParams, CompleteResult, ContentBlock, GetPromptResult, JsonObject, Prompt,
    ReadResourceResult, Reference, Resource, ResourceTemplate,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::describe::{describe_text, tool_ambiguous, tool_not_found};
use crate::error::Result;
use crate::forward::HostBridge;
use crate::guard::{GuardReport, SpillDir, apply_guard};
use crate::render::{Piece, render_call_result};
use crate::request::{ProxyRequest, parse_request};
use crate::search::{DEFAULT_SUGGESTIONS, Lookup, MatchKind, SearchIndex, SearchQuery, ToolDoc};
use crate::text::{
    Category, ProxyError, ServerLine, ServerState, SkippedServer, config_problems_text, instructions_text, list_text,
    search_text, status_text,
};
use crate::validate::{ArgsValidator, OutputValidator, check_not_nested};

/// How long `connect`/`list` wait for the router to publish a freshly discovered catalog.
pub const CATALOG_SETTLE: Duration = Duration::from_secs(2);
/// How long the catalog must stay unchanged before the background indexer builds the search index: start-up and the
/// first call (whose discovery publishes a new catalog) run first, and a burst of changes is indexed once. A search
/// that comes sooner builds the index itself, as it always could.
const INDEX_SETTLE: Duration = Duration::from_millis(300);
/// Compiled argument validators kept before the cache is cleared.
const MAX_VALIDATORS: usize = 4096;
/// The most servers one search connects because nothing is known of them ([`Proxy::search_discovering`]).
pub const COLD_DISCOVERY_MAX: usize = 32;
/// How many of them connect at once. How long a search waits for them is `settings.discoveryTimeout` (10 s); the
/// slower ones keep connecting and are named in the answer.
pub const COLD_DISCOVERY_CONCURRENCY: usize = 8;
/// Tool names listed in an "it has: …" hint.
const MAX_LISTED_TOOLS: usize = 30;

/// Per-call options from the host: cancellation (a host that disconnects or cancels) and a timeout override.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// Cancelling it abandons the upstream call and sends `notifications/cancelled` to the server.
    pub cancel: Option<CancellationToken>,
    /// Overrides the server's tool timeout (idle, extended by progress).
    pub timeout: Option<Duration>,
    /// Receives the upstream's `notifications/progress` for the call (the host asked with a `progressToken`).
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<CallProgress>>,
}

/// What one `mcp` call (or direct-tool call) returns to the host.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyResponse {
    /// The tool result exactly as sent to the host (`isError` and `_meta["pimcp/category"]` set on errors).
    pub result: CallToolResult,
    /// The error category when this is an error.
    pub category: Option<Category>,
    /// What the output guard did, for call results.
    pub guard: Option<GuardReport>,
}

impl ProxyResponse {
    /// A plain text success.
    pub fn text_ok(text: impl Into<String>) -> ProxyResponse {
        ProxyResponse {
            result: CallToolResult::success(vec![ContentBlock::text(text)]),
            category: None,
            guard: None,
        }
    }

    pub fn is_error(&self) -> bool {
        self.result.is_error == Some(true)
    }

    /// All text blocks joined by newlines.
    pub fn text(&self) -> String {
        self.result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl From<ProxyError> for ProxyResponse {
    fn from(e: ProxyError) -> ProxyResponse {
        ProxyResponse {
            category: Some(e.category),
            result: e.into_call_result(),
            guard: None,
        }
    }
}

/// One server's tools, as `mcp({server})` shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerListing {
    pub server: String,
    pub state: ServerState,
    /// Where the tools come from (`None`: nothing known).
    pub source: Option<MetadataSource>,
    pub tools: Vec<ToolDoc>,
    pub instructions: Option<String>,
}

impl ServerListing {
    /// The text the model reads.
    pub fn text(&self) -> String {
        let tools: Vec<&ToolDoc> = self.tools.iter().collect();
        list_text(&self.server, &self.state, &tools, self.instructions.as_deref())
    }
}

/// One tool in full, as `mcp({describe})` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub doc: ToolDoc,
    pub title: Option<String>,
    pub output_schema: Option<Value>,
    /// `Some(uri)` for a resource exposed as a `read_<name>` tool.
    pub resource_uri: Option<String>,
}

impl ToolInfo {
    /// The text the model reads.
    pub fn text(&self) -> String {
        let mut text = describe_text(&self.doc, self.output_schema.as_ref());
        if let Some(uri) = &self.resource_uri {
            text.push_str(&format!("\nReads resource {uri}; takes no arguments."));
        }
        text
    }
}

/// One search result, owned.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResultHit {
    pub doc: ToolDoc,
    pub score: u32,
    pub kind: MatchKind,
}

/// A page of search results with the servers that were not searched, owned (the CLI formats it its own way).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    pub hits: Vec<SearchResultHit>,
    /// Matches on all pages.
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub next_offset: Option<usize>,
    pub skipped: Vec<SkippedServer>,
    text: String,
}

impl SearchOutcome {
    /// The text the model reads.
    pub fn text(&self) -> String {
        self.text.clone()
    }
}

/// An upstream prompt exposed to the host as `<server>_<prompt>`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptEntry {
    /// The exposed name.
    pub name: String,
    pub server: String,
    /// The upstream prompt (its `name` is the upstream name).
    pub prompt: Prompt,
}

/// Construction options for [`Proxy::with_options`].
#[derive(Debug, Default)]
pub struct ProxyOptions {
    /// Where guarded output is spilled; `None` creates a private temporary directory.
    pub spill: Option<SpillDir>,
    /// The host bridge of `pimcp-run`: lets a call whose upstream asked the host for input it could not give end
    /// with category `input-required`.
    pub bridge: Option<HostBridge>,
}

/// The `mcp` proxy over one runtime. Cheap to clone; all clones share the index, validators and spill directory.
///
/// ```no_run
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use pimcp_actors::{Runtime, RuntimeOptions};
/// use pimcp_proxy::{CallContext, Proxy};
///
/// let dir = tempfile::tempdir()?;
/// let config = pimcp_config::load_in_memory(
///     &serde_json::json!({ "mcpServers": { "fixture": { "command": mcp_fixture::bin_path() } } }),
///     &pimcp_config::LoadOptions::new(dir.path(), dir.path()),
/// );
/// let runtime = Runtime::start(RuntimeOptions::new(config.clone(), dir.path().join("agent"), dir.path().join("data"))).await?;
/// let proxy = Proxy::new(runtime.handle(), &config)?;
/// // Exactly what the model gets from `mcp({tool: "fixture_echo", args: {text: "hi"}})`.
/// let arguments = serde_json::json!({ "tool": "fixture_echo", "args": { "text": "hi" } });
/// let response = proxy.handle_arguments(Some(&arguments), &CallContext::default()).await;
/// assert_eq!(response.text(), "hi");
/// runtime.shutdown(std::time::Duration::from_secs(5)).await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("runtime", &self.inner.runtime)
            .field("spill", &self.inner.spill.path())
            .finish_non_exhaustive()
    }
}

struct Inner {
    runtime: RuntimeHandle,
    config: RwLock<Arc<Config>>,
    /// Bumped by [`Proxy::reconfigure`]; part of the index's identity.
    config_generation: AtomicU64,
    spill: SpillDir,
    index: Mutex<Option<Arc<Indexed>>>,
    validators: Mutex<HashMap<String, CachedValidator>>,
    /// Compiled output schemas, like `validators` (a tool with an output schema no longer compiles it per call).
    output_validators: Mutex<HashMap<String, CachedOutputValidator>>,
    bridge: OnceLock<HostBridge>,
    /// An operator notice shown at the top of `mcp({})` (a configuration reload that was refused, …).
    notice: RwLock<Option<String>>,
    /// Bumped by deliberate refreshes ([`Proxy::connect`], [`Proxy::reconfigure`]): a frozen direct-tool surface
    /// is recomputed on them (see [`Proxy::deliberate_refreshes`]).
    deliberate: tokio::sync::watch::Sender<u64>,
}

/// A compiled validator and the schema it was compiled from (compared by pointer).
type CachedValidator = (Arc<JsonObject>, Arc<ArgsValidator>);
/// The same for an output schema.
type CachedOutputValidator = (Arc<JsonObject>, Arc<OutputValidator>);

/// A search index and the catalog snapshot it was built from.
pub(crate) struct Indexed {
    catalog: Arc<Catalog>,
    config_generation: u64,
    index: SearchIndex,
    /// Servers whose tools are in the index (known metadata, startable).
    searched: BTreeSet<String>,
}

impl Proxy {
    /// A proxy over `runtime` for `config` (the same config the runtime was started with), spilling guarded output
    /// to a private temporary directory removed when the last clone is dropped.
    pub fn new(runtime: RuntimeHandle, config: &Config) -> Result<Proxy> {
        Proxy::with_options(runtime, config, ProxyOptions::default())
    }

    /// [`Proxy::new`] with explicit options.
    pub fn with_options(runtime: RuntimeHandle, config: &Config, options: ProxyOptions) -> Result<Proxy> {
        let spill = match options.spill {
            Some(s) => s,
            None => SpillDir::new()?,
        };
        let bridge = OnceLock::new();
        if let Some(b) = options.bridge {
            let _ = bridge.set(b);
        }
        let proxy = Proxy {
            inner: Arc::new(Inner {
                runtime,
                config: RwLock::new(Arc::new(config.clone())),
                config_generation: AtomicU64::new(0),
                spill,
                index: Mutex::new(None),
                validators: Mutex::new(HashMap::new()),
                output_validators: Mutex::new(HashMap::new()),
                bridge,
                notice: RwLock::new(None),
                deliberate: tokio::sync::watch::Sender::new(0),
            }),
        };
        proxy.spawn_indexer();
        Ok(proxy)
    }

    /// Rebuilds the search index in the background whenever the runtime publishes a new catalog, so queries find it
    /// ready: once the catalog has been quiet for [`INDEX_SETTLE`] (a process that starts, makes one call and exits
    /// never spends the CPU), on a blocking-pool thread (on a current-thread runtime, `pimcp-run`, a call's
    /// messages never wait behind it). A search that comes during a build waits for it (the index lock), as before.
    /// Stops when the last clone of the proxy is dropped.
    fn spawn_indexer(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let mut rx = self.inner.runtime.catalog_watch();
        handle.spawn(async move {
            loop {
                loop {
                    tokio::select! {
                        changed = rx.changed() => if changed.is_err() { return },
                        () = tokio::time::sleep(INDEX_SETTLE) => break,
                    }
                }
                {
                    let Some(inner) = weak.upgrade() else { return };
                    let proxy = Proxy { inner };
                    let built = tokio::task::spawn_blocking(move || {
                        let _ = proxy.indexed();
                    });
                    if built.await.is_err() {
                        return;
                    }
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Attaches the host bridge after construction (first one wins).
    pub fn attach_bridge(&self, bridge: &HostBridge) {
        let _ = self.inner.bridge.set(bridge.clone());
    }

    pub fn runtime(&self) -> &RuntimeHandle {
        &self.inner.runtime
    }

    /// The configuration the proxy currently works with.
    pub fn config(&self) -> Arc<Config> {
        match self.inner.config.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Sets (or clears) the notice shown at the top of `mcp({})`, e.g. that a configuration reload was refused and
    /// the previous setup is still running.
    pub fn set_notice(&self, notice: Option<String>) {
        match self.inner.notice.write() {
            Ok(mut g) => *g = notice,
            Err(p) => *p.into_inner() = notice,
        }
    }

    /// The notice set with [`Proxy::set_notice`].
    pub fn notice(&self) -> Option<String> {
        match self.inner.notice.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The spill directory of the output guard.
    pub fn spill_dir(&self) -> &std::path::Path {
        self.inner.spill.path()
    }

    /// Applies a new configuration to the runtime (a reload) and to the proxy (keywords, direct tools, approvals).
    pub async fn reconfigure(&self, config: Config) -> std::result::Result<(), ProxyError> {
        self.inner
            .runtime
            .reconfigure(config.clone())
            .await
            .map_err(|e| self.runtime_error(e, None))?;
        match self.inner.config.write() {
            Ok(mut g) => *g = Arc::new(config),
            Err(p) => *p.into_inner() = Arc::new(config),
        }
        self.inner.config_generation.fetch_add(1, Ordering::SeqCst);
        self.refreshed_deliberately();
        Ok(())
    }

    /// Counts deliberate refreshes: `mcp({connect})`/[`Proxy::connect`], a configuration reload, and the start-up
    /// discovery of direct-tool servers ([`Proxy::discover_for_direct_tools`]). `freezeDirectTools` keeps the
    /// direct-tool surface fixed except on these.
    pub fn deliberate_refreshes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.deliberate.subscribe()
    }

    fn refreshed_deliberately(&self) {
        self.inner.deliberate.send_modify(|n| *n += 1);
    }

    /// Parses the `arguments` of an `mcp` tool call and answers it; a parameter error is a `validation` result.
    pub async fn handle_arguments(&self, arguments: Option<&Value>, ctx: &CallContext) -> ProxyResponse {
        match parse_request(arguments) {
            Ok(request) => self.handle(request, ctx).await,
            Err(e) => ProxyError::from(e).into(),
        }
    }

    /// [`Proxy::handle_arguments`] taking the arguments by value (a tool call's `args` are moved, not copied).
    pub(crate) async fn handle_owned_arguments(&self, arguments: Option<Value>, ctx: &CallContext) -> ProxyResponse {
        match crate::request::parse_request_owned(arguments) {
            Ok(request) => self.handle(request, ctx).await,
            Err(e) => ProxyError::from(e).into(),
        }
    }

    /// Answers one `mcp` request. Never fails: errors are tool results with a category.
    pub async fn handle(&self, request: ProxyRequest, ctx: &CallContext) -> ProxyResponse {
        let mode = mode_name(&request);
        let span = tracing::info_span!("proxy_request", mode, outcome = tracing::field::Empty);
        let response = self.dispatch(request, ctx).instrument(span.clone()).await;
        span.record("outcome", response.category.map_or("ok", Category::as_str));
        response
    }

    /// Runs one request. pimcp's own texts (every mode but `call`, whose result the guard already cut) go through
    /// the output guard too, so no answer outgrows it whatever the number of servers and tools.
    async fn dispatch(&self, request: ProxyRequest, ctx: &CallContext) -> ProxyResponse {
        if matches!(request, ProxyRequest::Call { .. }) {
            return self.dispatch_inner(request, ctx).await;
        }
        let mut response = self.dispatch_inner(request, ctx).await;
        if let Some(limits) = self.config().settings.output_guard {
            for block in &mut response.result.content {
                if let ContentBlock::Text(text) = block {
                    let full = std::mem::take(&mut text.text);
                    text.text = crate::guard::guard_own_text(full, &limits, &self.inner.spill);
                }
            }
        }
        response
    }

    async fn dispatch_inner(&self, request: ProxyRequest, ctx: &CallContext) -> ProxyResponse {
        match request {
            ProxyRequest::AuthStart { server } => respond(self.auth_start(&server).await),
            ProxyRequest::AuthComplete { server, input } => respond(self.auth_complete(&server, &input).await),
            ProxyRequest::Call { tool, args, server } => self.call(&tool, args, server.as_deref(), ctx).await,
            ProxyRequest::Connect { server } => respond(self.connect(&server).await.map(|l| l.text())),
            ProxyRequest::Describe { tool, server } => {
                respond(self.describe(&tool, server.as_deref()).await.map(|i| i.text()))
            }
            ProxyRequest::Instructions { server } => respond(
                self.instructions(&server)
                    .await
                    .map(|i| instructions_text(&server, i.as_deref())),
            ),
            ProxyRequest::Search(query) => respond(self.search_discovering(&query).await.map(|o| o.text())),
            ProxyRequest::List { server } => respond(self.list(&server).await.map(|l| l.text())),
            ProxyRequest::Status => {
                let lines = self.server_lines();
                let mut text = status_text(&lines);
                if let Some(problems) = self.config_problems_text() {
                    text = if lines.is_empty() {
                        format!("MCP: no servers loaded.\n\n{problems}")
                    } else {
                        format!("{text}\n\n{problems}")
                    };
                }
                ProxyResponse::text_ok(match self.notice() {
                    Some(notice) => format!("{notice}\n\n{text}"),
                    None => text,
                })
            }
        }
    }

    /// The skipped files and entries of the configuration in use, for the model to pass on (see
    /// [`config_problems_text`]).
    fn config_problems_text(&self) -> Option<String> {
        config_problems_text(&self.inner.runtime.config_problems())
    }

    /// The runtime's status snapshot. Never connects anything.
    pub fn status(&self) -> StatusSnapshot {
        self.inner.runtime.status()
    }

    /// One line per server, as `mcp({})` shows them. Never connects anything.
    pub fn server_lines(&self) -> Vec<ServerLine> {
        let snapshot = self.inner.runtime.status();
        let catalog = self.inner.runtime.catalog();
        let now = SystemTime::now();
        let config = self.config();
        snapshot
            .servers
            .iter()
            .map(|s| {
                let sc = catalog.server(&s.name);
                ServerLine {
                    name: s.name.clone(),
                    state: state_of(s, sc, now),
                    n_tools: sc.filter(|c| c.source.is_some()).map(|c| c.tools.len()),
                    reason: reason_of(s),
                    description: config
                        .server(&s.name)
                        .and_then(|c| c.description.as_deref())
                        .and_then(crate::tool_def::short_description),
                }
            })
            .collect()
    }

    /// One server's tools (from the cache when not connected); a startable server with nothing known is connected
    /// first.
    pub async fn list(&self, server: &str) -> std::result::Result<ServerListing, ProxyError> {
        let catalog = self.inner.runtime.catalog();
        let Some(sc) = catalog.server(server) else {
            return Err(self.unknown_server(server));
        };
        if sc.source.is_none() && sc.available {
            self.connect_and_wait(server, false).await?;
        }
        Ok(self.listing(server))
    }

    /// Connects (or reconnects) a server, refreshes its metadata, then lists it.
    pub async fn connect(&self, server: &str) -> std::result::Result<ServerListing, ProxyError> {
        if self.inner.runtime.catalog().server(server).is_none() {
            return Err(self.unknown_server(server));
        }
        let connected = self.connect_and_wait(server, true).await;
        self.refreshed_deliberately();
        connected?;
        Ok(self.listing(server))
    }

    /// `mcp({action: "auth-start", server})`: starts an OAuth login (loopback listener, browser) and tells the
    /// model what to show the user. The login finishes by itself when the browser comes back to this machine.
    pub async fn auth_start(&self, server: &str) -> std::result::Result<String, ProxyError> {
        if self.inner.runtime.catalog().server(server).is_none() {
            return Err(self.unknown_server(server));
        }
        let start = self
            .inner
            .runtime
            .auth_start(server)
            .await
            .map_err(|e| self.runtime_error(e, Some(server)))?;
        Ok(format!(
            "Show the user this URL to authorize {server:?}:\n{}\n\nWhen the browser comes back to this machine the \
             login finishes by itself and {server:?} reconnects. If the browser runs on another machine, its last page \
             does not load: ask the user for that page's full URL and call mcp({{action: \"auth-complete\", server: \
             {server:?}, args: {{redirectUrl: \"<that URL>\"}}}}).",
            start.url
        ))
    }

    /// `mcp({action: "auth-complete", server, args: {redirectUrl}})`: finishes the pending login with the pasted
    /// redirect URL (or code), stores the tokens and reconnects; answers with the server's tools.
    pub async fn auth_complete(&self, server: &str, input: &str) -> std::result::Result<String, ProxyError> {
        if self.inner.runtime.catalog().server(server).is_none() {
            return Err(self.unknown_server(server));
        }
        self.inner
            .runtime
            .auth_complete(server, input)
            .await
            .map_err(|e| self.runtime_error(e, Some(server)))?;
        Ok(format!("Logged in to {server:?}.\n\n{}", self.listing(server).text()))
    }

    /// A server's full instructions (connecting a startable server with nothing known).
    pub async fn instructions(&self, server: &str) -> std::result::Result<Option<String>, ProxyError> {
        let catalog = self.inner.runtime.catalog();
        let Some(sc) = catalog.server(server) else {
            return Err(self.unknown_server(server));
        };
        if sc.instructions.is_none() && sc.source.is_none() && sc.available {
            self.connect_and_wait(server, false).await?;
            return Ok(self.inner.runtime.instructions(server));
        }
        Ok(sc.instructions.clone())
    }

    /// [`Proxy::search`] after cold discovery: the servers the search would otherwise skip because nothing is known
    /// of them yet (never connected, nothing cached; or connecting for the first time) are connected first, at most
    /// [`COLD_DISCOVERY_MAX`] per search, [`COLD_DISCOVERY_CONCURRENCY`] at once, for at most
    /// `settings.discoveryTimeout` (10 s; zero turns cold discovery off). Each connected server is cached and then follows its lifecycle (a lazy server
    /// idles out as usual); one that did not make it in time keeps connecting and is named in the answer as
    /// connecting or failed. Disabled, untrusted, misconfigured servers and those that need auth are never started.
    /// Once every server's metadata is cached this costs nothing. The `mcp` tool's search uses it; `search`
    /// itself stays offline (the CLI's `search` without `--connect`).
    pub async fn search_discovering(&self, query: &SearchQuery) -> std::result::Result<SearchOutcome, ProxyError> {
        // An unknown `server` has no cold servers; `search` answers it.
        let server = query.server.as_deref();
        self.discover_cold(|name| server.is_none_or(|s| s == name)).await;
        self.search(query)
    }

    /// Cold discovery at start for a direct-tool surface: the servers that would contribute direct tools and of
    /// which nothing is known are connected with the bounds of [`Proxy::search_discovering`], so that their tools
    /// reach the host (announced with `tools/list_changed`) in the first session. Counts as a deliberate refresh
    /// when it connected anything. Returns the servers it tried.
    pub async fn discover_for_direct_tools(&self) -> Vec<String> {
        let config = self.config();
        let tried = self
            .discover_cold(|name| {
                config
                    .server(name)
                    .is_some_and(|cfg| crate::direct::wants_direct_tools(cfg, &config))
            })
            .await;
        if !tried.is_empty() {
            self.refreshed_deliberately();
        }
        tried
    }

    /// Connects the cold servers `wanted` selects ([`Proxy::cold_servers`]), [`COLD_DISCOVERY_CONCURRENCY`] at
    /// once, waiting at most `settings.discoveryTimeout` (zero: nothing is connected). Returns the servers tried.
    async fn discover_cold(&self, wanted: impl Fn(&str) -> bool) -> Vec<String> {
        use futures::StreamExt as _;
        let deadline = self.config().settings.discovery_timeout;
        if deadline.is_zero() {
            return Vec::new();
        }
        let cold = self.cold_servers(wanted);
        if cold.is_empty() {
            return cold;
        }
        let span = tracing::info_span!("cold_discovery", servers = cold.len());
        let connects = futures::stream::iter(cold.clone())
            .map(|server| async move {
                if let Err(e) = self.connect_and_wait(&server, false).await {
                    tracing::debug!(%server, error = %e.message, "cold discovery: the server did not connect");
                }
            })
            .buffer_unordered(COLD_DISCOVERY_CONCURRENCY)
            .collect::<Vec<()>>();
        if tokio::time::timeout(deadline, connects).instrument(span).await.is_err() {
            tracing::debug!("cold discovery: deadline reached; the rest keep connecting");
        }
        cold
    }

    /// Startable servers `wanted` selects of which nothing is known yet: never connected with nothing cached, or
    /// connecting for the first time. At most [`COLD_DISCOVERY_MAX`], in name order.
    fn cold_servers(&self, wanted: impl Fn(&str) -> bool) -> Vec<String> {
        let snapshot = self.inner.runtime.status();
        let catalog = self.inner.runtime.catalog();
        let now = SystemTime::now();
        snapshot
            .servers
            .iter()
            .filter(|s| wanted(&s.name))
            .filter(|s| {
                let sc = catalog.server(&s.name);
                match state_of(s, sc, now) {
                    ServerState::NotStarted => true,
                    ServerState::Connecting => sc.is_none_or(|c| c.source.is_none()),
                    _ => false,
                }
            })
            .map(|s| s.name.clone())
            .take(COLD_DISCOVERY_MAX)
            .collect()
    }

    /// Ranked (or regex) search over every startable server's known tools. Works offline from the cache.
    pub fn search(&self, query: &SearchQuery) -> std::result::Result<SearchOutcome, ProxyError> {
        if let Some(server) = &query.server
            && self.inner.runtime.catalog().server(server).is_none()
        {
            return Err(self.unknown_server(server));
        }
        let indexed = self.indexed();
        let page = indexed.index.search(query).map_err(ProxyError::from)?;
        let skipped = self.skipped(&indexed, query.server.as_deref(), page.total == 0);
        let mut text = search_text(query, &page, &skipped);
        if page.total == 0
            && let Some(problems) = self.config_problems_text()
        {
            text.push_str("\n\n");
            text.push_str(&problems);
        }
        Ok(SearchOutcome {
            hits: page
                .hits
                .iter()
                .map(|h| SearchResultHit {
                    doc: h.doc.clone(),
                    score: h.score,
                    kind: h.kind,
                })
                .collect(),
            total: page.total,
            offset: page.offset,
            limit: page.limit,
            next_offset: page.next_offset,
            skipped,
            text,
        })
    }

    /// One tool in full. Resolves like a call (prefixed, original, `-`/`_` fuzzy, implied server connected lazily);
    /// an unknown name gets up to 5 suggestions (token ranking and edit distance).
    pub async fn describe(&self, tool: &str, server: Option<&str>) -> std::result::Result<ToolInfo, ProxyError> {
        let resolved = self
            .inner
            .runtime
            .resolve(tool, server)
            .await
            .map_err(|e| self.runtime_error(e, server))?;
        // A schema read from the metadata cache is parsed here on first use; an unusable one is this tool's error.
        resolved.input_schema().map_err(|e| self.runtime_error(e, server))?;
        let output_schema = resolved.output_schema().map_err(|e| self.runtime_error(e, server))?;
        let config = self.config();
        Ok(ToolInfo {
            doc: tool_doc(
                &resolved,
                &keywords_for(config.server(&resolved.server), &config, &resolved),
                &config,
            ),
            title: resolved.title.as_deref().map(str::to_owned),
            output_schema: output_schema.map(|s| Value::Object((*s).clone())),
            resource_uri: resolved.resource_uri.clone(),
        })
    }

    /// Calls a tool: resolve, validate the arguments against its input schema before sending, approval (by the
    /// runtime, per `approveTools`), call, render, output guard. Never fails: errors are results with a category.
    pub async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
        server: Option<&str>,
        ctx: &CallContext,
    ) -> ProxyResponse {
        // A name the current catalog knows resolves here, as the router would in that same snapshot: no round trip
        // through the router's mailbox. Anything else (fuzzy, ambiguous, not yet discovered) goes to the router.
        let found = match self.inner.runtime.catalog().resolve(tool, server) {
            Resolution::Found(resolved) => Some(resolved),
            _ => None,
        };
        if let Some(resolved) = found {
            return self.call_resolved(&resolved, args, ctx).await;
        }
        match self.inner.runtime.resolve(tool, server).await {
            Ok(resolved) => self.call_resolved(&resolved, args, ctx).await,
            Err(e) => self.runtime_error(e, server).into(),
        }
    }

    /// Calls an already resolved tool (direct tools go straight here).
    pub async fn call_resolved(
        &self,
        tool: &CatalogTool,
        args: Map<String, Value>,
        ctx: &CallContext,
    ) -> ProxyResponse {
        let mut args = args;
        let checked = match tool.input_schema() {
            Ok(schema) => {
                let validator = match self.cached_validator(tool, &schema) {
                    Some(validator) => validator,
                    None => {
                        // The schema must be compiled (the first call of this tool, or new metadata): a lazy server
                        // not started yet is asked to start first, and the compile runs while it spawns and
                        // initializes (the yield lets the server's actor take the request and start the process).
                        // `warm` leaves a server that is running, refused or backing off as it is: the call itself
                        // then reports its state as before.
                        if self.inner.runtime.warm(&tool.server).is_ok() {
                            tokio::task::yield_now().await;
                        }
                        self.compile_validator(tool, &schema)
                    }
                };
                check_args_with(&validator, &schema, &mut args)
            }
            // An unusable cached schema never blocks the call: the server validates, and connecting refreshes it.
            Err(e) => {
                tracing::warn!(error = %e, "skipping argument validation");
                Ok(())
            }
        };
        if let Err(e) = checked {
            return e.into();
        }
        let bridge = self.inner.bridge.get();
        // Routes the upstream's requests during this call to the host session that made it.
        let _in_flight = bridge.and_then(|b| b.begin_call(&tool.server, &tool.name));
        let refusals_before = bridge.map(|b| b.refusals(&tool.server));
        let opts = CallOptions {
            server: Some(tool.server.clone()),
            timeout: ctx.timeout,
            cancel: ctx.cancel.clone(),
            progress: ctx.progress.clone(),
            ..CallOptions::default()
        };
        let outcome = self.inner.runtime.call(&tool.name, Some(args), opts).await;
        match outcome {
            Ok(output) => self.render(tool, output),
            Err(RuntimeError::ToolError { output, .. }) => {
                let refused = match (bridge, refusals_before) {
                    (Some(b), Some(before)) => b.refusals(&tool.server) > before,
                    _ => false,
                };
                if refused {
                    let text = output.text();
                    return ProxyError::new(
                        Category::InputRequired,
                        format!(
                            "tool {:?} on server {:?} asked the host for input (sampling, elicitation) that the host \
                             did not declare it can give.",
                            tool.original, tool.server
                        ),
                    )
                    .with_hint(format!("The tool said: {}", one_line(&text, 300)))
                    .into();
                }
                self.render(tool, *output)
            }
            Err(e) => self.runtime_error(e, Some(&tool.server)).into(),
        }
    }

    /// Upstream prompts of startable servers with known metadata, exposed as `<server>_<prompt>` (colliding names are
    /// dropped).
    pub fn prompts(&self) -> Vec<PromptEntry> {
        let catalog = self.inner.runtime.catalog();
        let mut entries: Vec<PromptEntry> = Vec::new();
        let mut counts: HashMap<String, usize> = HashMap::new();
        for sc in catalog.servers().filter(|s| s.available) {
            for p in sc.prompts.iter() {
                let name = format!("{}_{}", sanitize_server(&sc.server), p.name);
                *counts.entry(name.clone()).or_default() += 1;
                entries.push(PromptEntry {
                    name,
                    server: sc.server.clone(),
                    prompt: p.clone(),
                });
            }
        }
        entries.retain(|e| counts.get(&e.name).copied() == Some(1));
        entries
    }

    /// `prompts/get` of an exposed prompt, forwarded to its server (connected first when needed); arguments pass
    /// through unchanged.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> std::result::Result<GetPromptResult, ProxyError> {
        let Some(entry) = self.prompts().into_iter().find(|p| p.name == name) else {
            return Err(ProxyError::new(
                Category::UnknownTool,
                format!("prompt {name:?} not found."),
            ));
        };
        self.inner
            .runtime
            .get_prompt(&entry.server, &entry.prompt.name, arguments)
            .await
            .map_err(|e| self.runtime_error(e, None))
    }

    /// Upstream resources (not templates) of startable servers with known metadata, with their server. A URI listed
    /// by several servers is kept once (first server by name).
    pub fn resources(&self) -> Vec<(String, Resource)> {
        let catalog = self.inner.runtime.catalog();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for sc in catalog.servers().filter(|s| s.available) {
            for r in sc.resources.iter() {
                if seen.insert(r.uri.clone()) {
                    out.push((sc.server.clone(), r.clone()));
                }
            }
        }
        out
    }

    /// Upstream resource templates of startable servers with known metadata, with their server. A template listed
    /// by several servers is kept once (first server by name).
    pub fn resource_templates(&self) -> Vec<(String, ResourceTemplate)> {
        let catalog = self.inner.runtime.catalog();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for sc in catalog.servers().filter(|s| s.available) {
            for t in sc.resource_templates.iter() {
                if seen.insert(t.uri_template.clone()) {
                    out.push((sc.server.clone(), t.clone()));
                }
            }
        }
        out
    }

    /// The server a resource URI belongs to: the one that lists it, else the first whose resource template
    /// matches it.
    pub(crate) fn resource_server(&self, uri: &str) -> Option<String> {
        if let Some((server, _)) = self.resources().into_iter().find(|(_, r)| r.uri == uri) {
            return Some(server);
        }
        self.resource_templates()
            .into_iter()
            .find(|(_, t)| crate::uri_template::matches(&t.uri_template, uri))
            .map(|(server, _)| server)
    }

    /// `completion/complete` for a prompt (by its exposed name) or a resource template, forwarded to its server
    /// with the server's own names.
    pub async fn complete(&self, mut params: CompleteRequestParams) -> std::result::Result<CompleteResult, ProxyError> {
        let server = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let Some(entry) = self.prompts().into_iter().find(|p| p.name == prompt.name) else {
                    return Err(ProxyError::new(
                        Category::UnknownTool,
                        format!("prompt {:?} not found.", prompt.name),
                    ));
                };
                prompt.name = entry.prompt.name;
                entry.server
            }
            Reference::Resource(resource) => {
                let template = self
                    .resource_templates()
                    .into_iter()
                    .find(|(_, t)| t.uri_template == resource.uri)
                    .map(|(server, _)| server);
                match template.or_else(|| self.resource_server(&resource.uri)) {
                    Some(server) => server,
                    None => {
                        return Err(ProxyError::new(
                            Category::UnknownTool,
                            format!("no server lists the resource or template {:?}.", resource.uri),
                        ));
                    }
                }
            }
            _ => {
                return Err(ProxyError::new(
                    Category::Validation,
                    "a completion reference of a kind pimcp does not know.",
                ));
            }
        };
        self.inner
            .runtime
            .complete(&server, params)
            .await
            .map_err(|e| self.runtime_error(e, Some(&server)))
    }

    /// `resources/read` of a listed resource, or of a URI one of the resource templates matches, forwarded to
    /// that server.
    pub async fn read_resource(&self, uri: &str) -> std::result::Result<ReadResourceResult, ProxyError> {
        let Some(server) = self.resource_server(uri) else {
            return Err(ProxyError::new(
                Category::UnknownTool,
                format!("resource {uri:?} is not listed by any server, nor matched by a resource template."),
            ));
        };
        self.inner
            .runtime
            .read_resource(&server, uri)
            .await
            .map_err(|e| self.runtime_error(e, None))
    }

    /// The search index for the current catalog and config, built at most once per change.
    pub(crate) fn indexed(&self) -> Arc<Indexed> {
        let catalog = self.inner.runtime.catalog();
        let generation = self.inner.config_generation.load(Ordering::SeqCst);
        let mut slot = self
            .inner
            .index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(current) = slot.as_ref()
            && Arc::ptr_eq(&current.catalog, &catalog)
            && current.config_generation == generation
        {
            return current.clone();
        }
        let config = self.config();
        let mut docs = Vec::new();
        let mut searched = BTreeSet::new();
        for sc in catalog.servers().filter(|s| s.available && s.source.is_some()) {
            searched.insert(sc.server.clone());
            let cfg = config.server(&sc.server);
            let rules = keyword_rules(cfg);
            for t in sc.tools.iter().filter(|t| !t.app_only()) {
                docs.push(tool_doc(t, &apply_rules(&rules, t, cfg, &config), &config));
            }
        }
        let built = Arc::new(Indexed {
            catalog,
            config_generation: generation,
            index: SearchIndex::build(docs),
            searched,
        });
        *slot = Some(built.clone());
        built
    }

    /// The compiled validator of `tool` for this very schema, if there is one.
    fn cached_validator(
        &self,
        tool: &CatalogTool,
        input_schema: &Arc<rmcp::model::JsonObject>,
    ) -> Option<Arc<ArgsValidator>> {
        let cache = self
            .inner
            .validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .get(&tool.name)
            .filter(|(schema, _)| Arc::ptr_eq(schema, input_schema))
            .map(|(_, v)| v.clone())
    }

    /// Compiles (outside the cache's lock) and caches `tool`'s validator for `input_schema`.
    fn compile_validator(&self, tool: &CatalogTool, input_schema: &Arc<rmcp::model::JsonObject>) -> Arc<ArgsValidator> {
        let v = Arc::new(ArgsValidator::from_owned(
            &tool.name,
            Value::Object((**input_schema).clone()),
        ));
        let mut cache = self
            .inner
            .validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_VALIDATORS {
            cache.clear();
        }
        cache.insert(tool.name.clone(), (input_schema.clone(), v.clone()));
        v
    }

    /// `tool`'s compiled output schema, compiled on first use and again when the schema changes.
    fn output_validator(&self, tool: &CatalogTool, schema: &Arc<JsonObject>) -> Arc<OutputValidator> {
        let cached = self
            .inner
            .output_validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&tool.name)
            .filter(|(s, _)| Arc::ptr_eq(s, schema))
            .map(|(_, v)| v.clone());
        if let Some(v) = cached {
            return v;
        }
        let v = Arc::new(OutputValidator::new(Value::Object((**schema).clone())));
        let mut cache = self
            .inner
            .output_validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_VALIDATORS {
            cache.clear();
        }
        cache.insert(tool.name.clone(), (schema.clone(), v.clone()));
        v
    }

    fn render(&self, tool: &CatalogTool, output: ToolOutput) -> ProxyResponse {
        let is_error = output.is_error;
        let mut result = if is_error {
            CallToolResult::error(output.content)
        } else {
            CallToolResult::success(output.content)
        };
        result.structured_content = output.structured_content;
        let mut rendered = render_call_result(&result);
        let output_schema = if is_error {
            None
        } else {
            tool.output_schema().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "skipping output validation");
                None
            })
        };
        if let Some(schema) = output_schema {
            let report = self
                .output_validator(tool, &schema)
                .report(result.structured_content.as_ref());
            if !report.valid {
                tracing::warn!(server = %tool.server, tool = %tool.original, "{}", report.summary());
                rendered
                    .pieces
                    .push(Piece::Text(format!("[note: {}]", report.summary())));
            }
        }
        let structured = result.structured_content.take();
        let guard = self.config().settings.output_guard;
        let guarded = apply_guard(rendered, guard.as_ref(), Some(&self.inner.spill));
        let report = guarded.report.clone();
        let mut result = guarded.into_call_result();
        // The upstream's structuredContent stays on the result (hosts and `pimcp-run call --json` read it) besides
        // its text copy, unless the guard cut the text: then the model's view is bounded and the full value is in
        // the spill file, so forwarding it whole would defeat the guard.
        if !report.truncated {
            result.structured_content = structured;
        }
        if is_error {
            // Like every proxy error: the category on the text's last line too (the guard never cuts it).
            let line = format!("category: {}", Category::ToolError);
            match result
                .content
                .iter_mut()
                .find_map(|c| c.as_text().is_some().then_some(c))
            {
                Some(block) => {
                    if let Some(text) = block.as_text() {
                        *block = ContentBlock::text(format!("{}\n{line}", text.text));
                    }
                }
                None => result.content.insert(0, ContentBlock::text(line)),
            }
        }
        ProxyResponse {
            category: is_error.then_some(Category::ToolError),
            result,
            guard: Some(report),
        }
    }

    fn listing(&self, server: &str) -> ServerListing {
        let catalog = self.inner.runtime.catalog();
        let snapshot = self.inner.runtime.status();
        let sc = catalog.server(server);
        let state = match snapshot.server(server) {
            Some(s) => state_of(s, sc, SystemTime::now()),
            None => ServerState::NotStarted,
        };
        let config = self.config();
        let cfg = config.server(server);
        let rules = keyword_rules(cfg);
        ServerListing {
            server: server.to_owned(),
            state,
            source: sc.and_then(|c| c.source),
            tools: sc
                .map(|c| {
                    c.tools
                        .iter()
                        .map(|t| tool_doc(t, &apply_rules(&rules, t, cfg, &config), &config))
                        .collect()
                })
                .unwrap_or_default(),
            instructions: sc.and_then(|c| c.instructions.clone()),
        }
    }

    async fn connect_and_wait(&self, server: &str, force: bool) -> std::result::Result<(), ProxyError> {
        let runtime = &self.inner.runtime;
        let done = if force {
            runtime.reconnect(server).await
        } else {
            runtime.connect(server).await
        };
        done.map_err(|e| self.runtime_error(e, None))?;
        let mut rx = runtime.catalog_watch();
        let settled = tokio::time::timeout(
            CATALOG_SETTLE,
            rx.wait_for(|c| c.server(server).is_some_and(|s| s.source == Some(MetadataSource::Live))),
        )
        .await;
        if settled.is_err() {
            tracing::debug!(%server, "catalog did not show live metadata within the settle time");
        }
        Ok(())
    }

    fn skipped(&self, indexed: &Indexed, only: Option<&str>, empty: bool) -> Vec<SkippedServer> {
        let snapshot = self.inner.runtime.status();
        let now = SystemTime::now();
        snapshot
            .servers
            .iter()
            .filter(|s| only.is_none_or(|o| o == s.name))
            .filter(|s| !indexed.searched.contains(&s.name))
            .filter_map(|s| {
                let state = state_of(s, indexed.catalog.server(&s.name), now);
                let quiet = matches!(state, ServerState::Disabled | ServerState::Ready);
                (!quiet || (empty && state == ServerState::Disabled)).then(|| SkippedServer {
                    name: s.name.clone(),
                    state,
                })
            })
            .collect()
    }

    fn unknown_server(&self, server: &str) -> ProxyError {
        let catalog = self.inner.runtime.catalog();
        let names: Vec<&str> = catalog.servers().map(|s| s.server.as_str()).collect();
        let error = ProxyError::new(Category::Config, format!("unknown server {server:?}."));
        let error = if names.is_empty() {
            error.with_hint("No servers are configured.")
        } else {
            let shown: Vec<&str> = names.iter().take(crate::text::MAX_STATUS_LINES).copied().collect();
            if names.len() > shown.len() {
                error.with_hint(format!(
                    "Configured servers ({}): {}, … (mcp({{search: \"words\"}}) finds tools on any).",
                    names.len(),
                    shown.join(", ")
                ))
            } else {
                error.with_hint(format!("Configured servers: {}.", shown.join(", ")))
            }
        };
        self.with_config_problems(error)
    }

    /// `error` with the configuration's skipped files and entries as a hint: the tool or server the model asked
    /// for may be in one of them.
    fn with_config_problems(&self, error: ProxyError) -> ProxyError {
        match self.config_problems_text() {
            Some(problems) => error.with_hint(problems),
            None => error,
        }
    }

    /// Turns a runtime error into the model-facing error, with suggestions for unknown tools. `scope` is the server
    /// the caller named, if any.
    pub(crate) fn runtime_error(&self, e: RuntimeError, scope: Option<&str>) -> ProxyError {
        match &e {
            RuntimeError::UnknownTool { name: wanted, .. } => {
                let indexed = self.indexed();
                let suggestions = indexed.index.suggest(wanted, DEFAULT_SUGGESTIONS);
                // The server the name points at: the one named, else the longest prefix the name starts with.
                let server = scope
                    .map(str::to_owned)
                    .or_else(|| indexed.catalog.implied_servers(wanted).into_iter().next());
                let available: Vec<String> = server
                    .as_deref()
                    .and_then(|s| indexed.catalog.server(s))
                    .map(|sc| sc.tools.iter().map(|t| t.name.clone()).collect())
                    .unwrap_or_default();
                let mut error = tool_not_found(wanted, server.as_deref(), &suggestions);
                if let Some(server) = &server
                    && !available.is_empty()
                {
                    let mut shown: Vec<&str> = available.iter().take(MAX_LISTED_TOOLS).map(String::as_str).collect();
                    if available.len() > MAX_LISTED_TOOLS {
                        shown.push("…");
                    }
                    error = error.with_hint(format!("Server {server:?} has: {}.", shown.join(", ")));
                }
                self.with_config_problems(error)
            }
            RuntimeError::AmbiguousTool {
                name: wanted,
                candidates,
            } => {
                let indexed = self.indexed();
                let docs: Vec<&ToolDoc> = candidates
                    .iter()
                    .filter_map(|c| match indexed.index.find(c, None) {
                        Lookup::Found(d) => Some(d),
                        _ => None,
                    })
                    .collect();
                if docs.len() == candidates.len() {
                    tool_ambiguous(wanted, &docs)
                } else {
                    ProxyError::new(Category::Validation, e.to_string())
                        .with_hint("Pass `server`, or use the full tool name.")
                }
            }
            RuntimeError::UnknownServer { server } => self.unknown_server(server),
            RuntimeError::NeedsAuth { server, .. } => ProxyError::new(Category::NeedsAuth, e.to_string())
                .with_hint(format!("After logging in, mcp({{connect: {server:?}}}) connects it.")),
            _ => ProxyError::new(category_of(e.category()), e.to_string()),
        }
    }
}

/// Checks a call's `args` with its tool's compiled validator (`schema` is what it was compiled from).
fn check_args_with(
    validator: &ArgsValidator,
    schema: &rmcp::model::JsonObject,
    args: &mut Map<String, Value>,
) -> std::result::Result<(), ProxyError> {
    // Only `tool`/`args` keys can be nested gateway parameters: the schema copy is skipped on ordinary calls.
    if args.contains_key("tool") || args.contains_key("args") {
        let schema_value = Value::Object(schema.clone());
        check_not_nested(args, &schema_value).map_err(ProxyError::from)?;
    }
    validator.check_in_place(args).map_err(ProxyError::from)
}

fn respond(outcome: std::result::Result<String, ProxyError>) -> ProxyResponse {
    match outcome {
        Ok(text) => ProxyResponse::text_ok(text),
        Err(e) => e.into(),
    }
}

fn mode_name(request: &ProxyRequest) -> &'static str {
    match request {
        ProxyRequest::AuthStart { .. } => "auth-start",
        ProxyRequest::AuthComplete { .. } => "auth-complete",
        ProxyRequest::Call { .. } => "call",
        ProxyRequest::Connect { .. } => "connect",
        ProxyRequest::Describe { .. } => "describe",
        ProxyRequest::Instructions { .. } => "instructions",
        ProxyRequest::Search(_) => "search",
        ProxyRequest::List { .. } => "list",
        ProxyRequest::Status => "status",
    }
}

/// The runtime's category as the proxy texts spell it (the two enums mirror each other).
pub fn category_of(c: ErrorCategory) -> Category {
    match c {
        ErrorCategory::NeedsAuth => Category::NeedsAuth,
        ErrorCategory::Timeout => Category::Timeout,
        ErrorCategory::Connection => Category::Connection,
        ErrorCategory::UnknownTool => Category::UnknownTool,
        ErrorCategory::Validation => Category::Validation,
        ErrorCategory::Approval => Category::Approval,
        ErrorCategory::Config => Category::Config,
        ErrorCategory::Untrusted => Category::Untrusted,
        ErrorCategory::InputRequired => Category::InputRequired,
        ErrorCategory::ToolError => Category::ToolError,
        ErrorCategory::Other => Category::Other,
    }
}

/// A server's state for the texts.
fn state_of(s: &ServerStatus, sc: Option<&ServerCatalog>, now: SystemTime) -> ServerState {
    match &s.state {
        RuntimeState::Disabled => ServerState::Disabled,
        RuntimeState::Cached => {
            if sc.is_some_and(|c| c.source.is_some()) {
                ServerState::Cached
            } else if s.last_error.is_some() {
                // A lazy server whose connect failed is back to waiting for the next request, with nothing known:
                // that it failed is what the model needs to hear.
                ServerState::Failed {
                    ago: now
                        .duration_since(UNIX_EPOCH + Duration::from_millis(s.since_ms))
                        .unwrap_or_default(),
                }
            } else {
                ServerState::NotStarted
            }
        }
        RuntimeState::Connecting => ServerState::Connecting,
        RuntimeState::Ready => ServerState::Ready,
        RuntimeState::Draining => ServerState::Draining,
        RuntimeState::Backoff { until, .. } => ServerState::Backoff {
            retry_in: until.duration_since(now).unwrap_or_default(),
        },
        RuntimeState::NeedsAuth => ServerState::NeedsAuth,
        RuntimeState::Failed { .. } => ServerState::Failed {
            ago: now
                .duration_since(UNIX_EPOCH + Duration::from_millis(s.since_ms))
                .unwrap_or_default(),
        },
        RuntimeState::Untrusted => ServerState::Untrusted,
        RuntimeState::ConfigError => ServerState::ConfigError,
    }
}

fn reason_of(s: &ServerStatus) -> Option<String> {
    match &s.state {
        RuntimeState::Failed { reason } => Some(reason.clone()),
        RuntimeState::Backoff { .. } => s.last_error.clone().or_else(|| s.reason.clone()),
        RuntimeState::ConfigError => s.reason.clone().or_else(|| s.last_error.clone()),
        _ => None,
    }
}

/// `searchKeywords` of one server, compiled: (glob, keywords).
fn keyword_rules(cfg: Option<&ServerConfig>) -> Vec<(Glob, Vec<String>)> {
    cfg.map(|c| {
        c.search_keywords
            .iter()
            .map(|(pattern, words)| (Glob::new(pattern), words.clone()))
            .collect()
    })
    .unwrap_or_default()
}

fn apply_rules(
    rules: &[(Glob, Vec<String>)],
    tool: &CatalogTool,
    cfg: Option<&ServerConfig>,
    config: &Config,
) -> Vec<String> {
    if rules.is_empty() {
        return Vec::new();
    }
    let mode = cfg.and_then(|c| c.tool_prefix).unwrap_or(config.settings.tool_prefix);
    let mut candidates = tool_candidates(&tool.original, &tool.server, mode);
    candidates.push(tool.name.clone());
    let mut out = Vec::new();
    for (glob, words) in rules {
        if candidates.iter().any(|c| glob.matches(c)) {
            out.extend(words.iter().cloned());
        }
    }
    out
}

fn keywords_for(cfg: Option<&ServerConfig>, config: &Config, tool: &CatalogTool) -> Vec<String> {
    apply_rules(&keyword_rules(cfg), tool, cfg, config)
}

fn tool_doc(t: &CatalogTool, keywords: &[String], config: &Config) -> ToolDoc {
    ToolDoc {
        name: t.name.clone(),
        original_name: t.original.clone(),
        server: t.server.clone(),
        description: t
            .description
            .as_deref()
            .map(str::to_owned)
            .or_else(|| t.title.as_deref().map(str::to_owned))
            .unwrap_or_default(),
        keywords: keywords.to_vec(),
        // Shared, not parsed: a cached schema is parsed when a hit or describe shows it. An unusable one shows as
        // "no parameters"; `describe` reports it.
        input_schema: t.input_schema.clone(),
        needs_approval: approval_required(config, t),
    }
}

/// The first line of `text`, at most `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}
