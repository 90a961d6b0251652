//! The proxy façade: [`Proxy`] answers every mode of the `mcp` tool over a running runtime — status, list,
//! search, describe, instructions, connect and call — as tool results that carry an error category on failure, and
//! offers the same data as structs (`status`, `search`, `describe`, `call`, …) for the CLI. It keeps one
//! [`SearchIndex`] per catalog snapshot (rebuilt when the runtime publishes a new catalog, never per query), one
//! compiled argument validator per tool schema, and the [`SpillDir`] of the output guard.

// Hosts read these types through `pimcp`: each public item says what it is.

mod call;
mod discovery;
mod dispatch;
mod errors;
mod resources;
mod servers;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use pimcp_actors::{CallProgress, Catalog, MetadataSource, RuntimeHandle};
use pimcp_config::Config;
use pimcp_surface::{
    ArgsValidator, Category, GuardReport, MatchKind, OutputValidator, ProxyError, SearchIndex, ServerState,
    SkippedServer, SpillDir, ToolDoc, describe_text, list_text,
};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Prompt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::forward::HostBridge;

pub use errors::category_of;

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
#[non_exhaustive]
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

    /// Whether the result is an error (`isError: true`).
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
    /// The server.
    pub server: String,
    /// Its state as the texts name it.
    pub state: ServerState,
    /// Where the tools come from (`None`: nothing known).
    pub source: Option<MetadataSource>,
    /// Its tools, sorted by name.
    pub tools: Vec<ToolDoc>,
    /// The server's own instructions, if it gave any.
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
#[non_exhaustive]
pub struct ToolInfo {
    /// Name, server, description and input schema.
    pub doc: ToolDoc,
    /// The tool's display title, if it has one.
    pub title: Option<String>,
    /// The tool's output schema, if it declares one.
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
#[non_exhaustive]
pub struct SearchResultHit {
    /// The tool.
    pub doc: ToolDoc,
    /// Its ranking score (higher first; comparable within one query only).
    pub score: u32,
    /// Why it matched, strongest first.
    pub kind: MatchKind,
}

/// A page of search results with the servers that were not searched, owned (the CLI formats it its own way).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchOutcome {
    /// This page's hits, best first.
    pub hits: Vec<SearchResultHit>,
    /// Matches on all pages.
    pub total: usize,
    /// Where this page starts among all matches.
    pub offset: usize,
    /// The page size asked for (clamped).
    pub limit: usize,
    /// The offset of the next page, when more remain.
    pub next_offset: Option<usize>,
    /// Servers that were not searched (disabled, failed, needing auth…), with their state.
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
    /// The server it comes from.
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

    /// The runtime the proxy calls through.
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

    pub(crate) fn spill(&self) -> &SpillDir {
        &self.inner.spill
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
}
