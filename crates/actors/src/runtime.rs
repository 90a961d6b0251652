//! The library API: [`Runtime::start`] builds the actor tree from a [`Config`], [`RuntimeHandle`] reads status and
//! the catalog without waiting on any server, calls tools, connects/reconnects/disables servers (OAuth logins are
//! in `auth`), and [`Runtime::shutdown`] closes everything within a bound, leaving no process behind.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use dashmap::DashMap;
use pimcp_config::Config;
use ractor::{Actor, ActorRef};
use rmcp::model::JsonObject;
use tokio::sync::{broadcast, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::auth::{AuthHandle, AuthOptions};
use crate::cache::{Freshness, MetadataCache};
use crate::catalog::{Catalog, CatalogTool, MetadataSource, Resolution};
use crate::context::{CONTROL_REPLY_SLACK, Shared};
use crate::error::{Error, Result};
use crate::handles::{RouterHandle, ServerHandle};
use crate::host::Handlers;
use crate::job::{CallJob, CallOptions, ToolOutput};
use crate::msg::ServerRequest;
use crate::policy::Tuning;
use crate::process::ProcessOptions;
use crate::router::build_catalog;
use crate::status::{RuntimeEvent, StatusBoard, StatusSnapshot};
use crate::supervisor::{SupArgs, SupMsg, SupervisorActor};

/// Everything [`Runtime::start`] needs.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// The complete configuration (a library host may build it in memory; it is never merged with files).
    pub config: Config,
    /// Holds the metadata cache at `<agent_dir>/pimcp/cache.json`.
    pub agent_dir: PathBuf,
    /// Private data (OAuth tokens, trust records, spill files) for later subsystems.
    pub data_dir: PathBuf,
    /// How stdio servers are spawned and guarded (the guardian).
    pub process: ProcessOptions,
    /// One shared HTTP client; `None` builds the transport's default.
    pub http: Option<reqwest::Client>,
    /// The host's callbacks (sampling, elicitation, roots, approval).
    pub handlers: Handlers,
    /// Timings of backoff, breaker, health checks and approvals.
    pub tuning: Tuning,
    /// OAuth: an injected token store, the browser opener, the callback port, `private_key_jwt` keys.
    pub auth: AuthOptions,
}

impl RuntimeOptions {
    /// Options with defaults for everything but the configuration and the two directories.
    pub fn new(config: Config, agent_dir: impl Into<PathBuf>, data_dir: impl Into<PathBuf>) -> RuntimeOptions {
        RuntimeOptions {
            config,
            agent_dir: agent_dir.into(),
            data_dir: data_dir.into(),
            process: ProcessOptions::default(),
            http: None,
            handlers: Handlers::default(),
            tuning: Tuning::default(),
            auth: AuthOptions::default(),
        }
    }
}

/// How a shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Every server closed gracefully within the bound (otherwise the rest were killed).
    pub graceful: bool,
    /// How long the shutdown took.
    pub elapsed: Duration,
}

impl ShutdownReport {
    /// A report (for hosts that drive their own shutdown and report it the same way).
    pub fn new(graceful: bool, elapsed: Duration) -> ShutdownReport {
        ShutdownReport { graceful, elapsed }
    }
}

/// A cheap, cloneable handle to a running runtime.
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(crate) shared: Arc<Shared>,
    supervisor: ActorRef<SupMsg>,
    catalog_rx: watch::Receiver<Arc<Catalog>>,
}

impl std::fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHandle")
            .field("servers", &self.shared.registry.len())
            .finish_non_exhaustive()
    }
}

/// How long [`RuntimeHandle::reconfigure`] waits for the supervisor to apply a configuration: stopping the actors of
/// removed and changed servers and spawning their successors (no server is connected on the way).
pub const RECONFIGURE_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

impl RuntimeHandle {
    /// The pid of this runtime's guardian process while one runs (it starts with the first stdio server and kills
    /// every server's process group when the runtime's process dies).
    pub fn guardian_pid(&self) -> Option<u32> {
        self.shared.process.guardian_process.pid()
    }

    /// Per-server state, counts, protocol, last error, failures and uptime. Never waits on a server.
    pub fn status(&self) -> StatusSnapshot {
        let mut snapshot = self.shared.board.snapshot();
        // Calls in flight are counted by the lanes (atomics), not republished per call.
        for s in &mut snapshot.servers {
            if let Some(lane) = self.shared.lanes.get(&s.name) {
                s.in_flight = lane.in_flight();
            }
        }
        snapshot
    }

    /// The problems of the configuration in use: files and entries that were skipped (errors) and fields that were
    /// ignored (warnings). Never carries a value.
    pub fn config_problems(&self) -> Arc<[pimcp_config::ConfigProblem]> {
        self.shared.config_problems()
    }

    /// State and catalog changes as they happen.
    pub fn events(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.shared.board.subscribe()
    }

    /// Upstream servers' notices from now on: `notifications/message` (redacted, every level the servers send) and
    /// `notifications/resources/updated` for subscribed resources.
    pub fn server_notices(&self) -> broadcast::Receiver<crate::ServerNotice> {
        self.shared.board.subscribe_notices()
    }

    /// The JSONL protocol trace when `settings.trace` turns it on for the runtime (`None` otherwise).
    pub fn trace(&self) -> Option<&crate::trace::TraceSink> {
        self.shared.settings.trace.enabled.then_some(&self.shared.trace)
    }

    /// The current catalog snapshot (never waits).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog_rx.borrow().clone()
    }

    /// A receiver that sees every new catalog snapshot.
    pub fn catalog_watch(&self) -> watch::Receiver<Arc<Catalog>> {
        self.catalog_rx.clone()
    }

    /// The exposed tools of one server, or of all servers, from the catalog (cache when not connected).
    pub fn list_tools(&self, server: Option<&str>) -> Result<Vec<Arc<CatalogTool>>> {
        let catalog = self.catalog();
        match server {
            Some(s) => match catalog.server(s) {
                Some(sc) => Ok(sc.tools.clone()),
                None => Err(Error::UnknownServer { server: s.to_owned() }),
            },
            None => Ok(catalog.tools().cloned().collect()),
        }
    }

    /// Resolves a tool name (prefixed, original, `-`/`_` fuzzy), connecting an implied lazy server whose catalog
    /// is unknown.
    pub async fn describe(&self, name: &str) -> Result<Arc<CatalogTool>> {
        self.resolve(name, None).await
    }

    /// [`RuntimeHandle::describe`] scoped to one server (`None`: all).
    pub async fn resolve(&self, name: &str, server: Option<&str>) -> Result<Arc<CatalogTool>> {
        self.check_running()?;
        self.router()?
            .resolve(name, server, self.shared.control_timeout())
            .await
    }

    /// Calls a tool by name. Always ends with a result or a categorized error.
    pub async fn call(&self, name: &str, args: Option<JsonObject>, opts: CallOptions) -> Result<ToolOutput> {
        self.check_running()?;
        // The direct path: the name resolves in the current catalog, the tool needs no approval, and its server
        // has a ready connection. The call then runs here, on the caller's task, with no actor message at all.
        let resolved = self.catalog_rx.borrow().resolve(name, opts.server.as_deref());
        if let Resolution::Found(tool) = resolved
            && let Some(lane) = self.shared.lanes.get(&tool.server).map(|l| Arc::clone(l.value()))
            && lane.no_approval
            && let Some((live, ticket)) = lane.enter()
        {
            let job = CallJob {
                tool,
                args,
                opts,
                span: tracing::Span::current(),
            };
            return lane.run(live, ticket, job).await;
        }
        let bound = self.shared.call_reply_timeout(&opts);
        self.router()?.call(name, args, opts, bound).await
    }

    /// Follows a task that a call to `tool` left running ([`Error::TaskPending`]) until it ends or `opts.timeout`
    /// (the server's tool timeout by default) is up again; cancelling `opts.cancel` cancels the task. The server's
    /// connection must still be the one that ran the task (a task lives on its server, but pimcp does not reconnect
    /// to look for it).
    pub async fn follow_task(&self, tool: &str, task_id: &str, opts: CallOptions) -> Result<ToolOutput> {
        self.check_running()?;
        let tool = match self.catalog_rx.borrow().resolve(tool, opts.server.as_deref()) {
            Resolution::Found(tool) => tool,
            _ => {
                return Err(Error::UnknownTool {
                    name: tool.to_owned(),
                    server: opts.server.clone(),
                    available: Vec::new(),
                    suggestions: Vec::new(),
                });
            }
        };
        let Some((live, _ticket)) = self.shared.lanes.get(&tool.server).and_then(|lane| lane.enter()) else {
            return Err(Error::Connection {
                server: tool.server.clone(),
                message: format!("the connection that ran task `{task_id}` is gone"),
                source: None,
            });
        };
        let timeout = opts.timeout.unwrap_or(live.timeout);
        let follow = crate::task::Follow {
            peer: &live.peer,
            tool: &tool,
            guards: &live.guards,
            input: &live.input,
            deadline: tokio::time::Instant::now() + timeout,
            cancel: opts.cancel.as_ref(),
            progress: opts.progress.as_ref(),
        };
        let mut task = rmcp::model::Task::new(task_id.to_owned(), rmcp::model::TaskStatus::Working, "", "");
        // Ask at once; the server's interval applies from its first answer on.
        task.poll_interval_ms = Some(0);
        Box::pin(crate::task::follow(follow, task)).await
    }

    /// Connects a server (no-op when ready), closing its crash-loop breaker; waits for discovery.
    pub async fn connect(&self, server: &str) -> Result<()> {
        self.control(server, |reply| ServerRequest::Connect { force: false, reply })
            .await??;
        self.catalog_settled(server).await;
        Ok(())
    }

    /// Asks a server that has not started (state `cached`, e.g. a lazy server before its first call) to start
    /// connecting now, and returns without waiting for it: the connection's outcome reaches the next call, `status`
    /// and `events` the usual way. Does nothing to a server that is connecting, ready or draining, disabled,
    /// untrusted, misconfigured, waiting for auth, in restart backoff or behind an open crash-loop breaker (unlike
    /// [`RuntimeHandle::connect`], it never resets the backoff or the breaker). Errors: an unknown server name,
    /// shutdown.
    pub fn warm(&self, server: &str) -> Result<()> {
        self.check_running()?;
        let actor = self.shared.server_ref(server).ok_or_else(|| Error::UnknownServer {
            server: server.to_owned(),
        })?;
        actor.send(ServerRequest::Warm).map_err(|_| Error::Connection {
            server: server.to_owned(),
            message: "server actor is restarting".into(),
            source: None,
        })
    }

    /// Tears down a live connection and connects again.
    pub async fn reconnect(&self, server: &str) -> Result<()> {
        self.control(server, |reply| ServerRequest::Connect { force: true, reply })
            .await??;
        self.catalog_settled(server).await;
        Ok(())
    }

    /// After a successful connect the router publishes the live catalog a moment later (its own mailbox); wait
    /// for it so that `connect` returning means `catalog()` shows the discovered tools.
    async fn catalog_settled(&self, server: &str) {
        let mut rx = self.catalog_rx.clone();
        let live = |c: &Arc<Catalog>| c.server(server).is_none_or(|s| s.source == Some(MetadataSource::Live));
        let _ = tokio::time::timeout(CONTROL_REPLY_SLACK, rx.wait_for(live)).await;
    }

    /// Health-checks every live connection now (what the runtime does by itself after a wall-clock jump; hosts
    /// that learn about sleep/wake or network changes earlier may call it). A failed check tears the connection
    /// down: keep-alive servers reconnect, others fall back to `cached`.
    pub fn revalidate(&self) {
        for entry in self.shared.registry.iter() {
            let _ = entry.value().send(ServerRequest::Revalidate);
        }
    }

    /// Disconnects and disables a server for this run.
    pub async fn disable(&self, server: &str) -> Result<()> {
        self.control(server, |reply| ServerRequest::Disable { reply }).await
    }

    /// Re-enables a server disabled with [`RuntimeHandle::disable`].
    pub async fn enable(&self, server: &str) -> Result<()> {
        self.control(server, |reply| ServerRequest::Enable { reply }).await
    }

    /// Applies a new configuration (a reload): removed servers stop, changed servers restart (closing any
    /// crash-loop breaker), unchanged servers keep their connections and calls. Settings are fixed at start.
    pub async fn reconfigure(&self, config: Config) -> Result<()> {
        self.check_running()?;
        let config = Arc::new(config);
        self.shared.set_config_problems(&config.problems);
        let (tx, rx) = oneshot::channel();
        self.supervisor
            .send_message(SupMsg::Reconfigure { config, reply: tx })
            .map_err(|_| Error::actor("the supervisor is not running"))?;
        match tokio::time::timeout(RECONFIGURE_REPLY_TIMEOUT, rx).await {
            Ok(reply) => reply.map_err(|_| Error::actor("the supervisor dropped the request")),
            Err(_) => Err(Error::OperationTimeout {
                server: "*".to_owned(),
                operation: "applying a new configuration".to_owned(),
                after: RECONFIGURE_REPLY_TIMEOUT,
            }),
        }
    }

    /// The server's instructions (live or cached).
    pub fn instructions(&self, server: &str) -> Option<String> {
        self.catalog().server(server).and_then(|s| s.instructions.clone())
    }

    pub(crate) async fn control<T>(
        &self,
        server: &str,
        request: impl FnOnce(oneshot::Sender<T>) -> ServerRequest,
    ) -> Result<T> {
        self.check_running()?;
        let actor = self.shared.server_ref(server).ok_or_else(|| Error::UnknownServer {
            server: server.to_owned(),
        })?;
        actor
            .ask(server, "a control request", self.shared.control_timeout(), request)
            .await
    }

    fn router(&self) -> Result<RouterHandle> {
        self.shared
            .router()
            .ok_or_else(|| Error::actor("the router is not running"))
    }

    fn check_running(&self) -> Result<()> {
        if self.shared.is_shutting_down() {
            Err(Error::ShuttingDown)
        } else {
            Ok(())
        }
    }
}

/// A running runtime: the supervisor and its actor tree. Derefs to [`RuntimeHandle`].
///
/// Compiled here; run the same code with `cargo run -p pimcp-actors --example basic` (a doctest's executable
/// cannot locate the fixture binary).
///
/// ```no_run
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use pimcp_actors::{CallOptions, Runtime, RuntimeOptions};
///
/// let dir = tempfile::tempdir()?;
/// let config = pimcp_config::load_in_memory(
///     &serde_json::json!({ "mcpServers": { "fixture": { "command": mcp_fixture::bin_path() } } }),
///     &pimcp_config::LoadOptions::new(dir.path(), dir.path()),
/// );
/// let runtime = Runtime::start(RuntimeOptions::new(config, dir.path().join("agent"), dir.path().join("data"))).await?;
/// let args = serde_json::json!({ "text": "hi" }).as_object().cloned();
/// let out = runtime.call("fixture_echo", args, CallOptions::default()).await?;
/// assert_eq!(out.text(), "hi");
/// assert_eq!(runtime.status().server("fixture").map(|s| s.state.name()), Some("ready"));
/// runtime.shutdown(Duration::from_secs(5)).await;
/// # Ok(())
/// # }
/// ```
pub struct Runtime {
    handle: RuntimeHandle,
    supervisor: ActorRef<SupMsg>,
    join: Option<ractor::concurrency::JoinHandle<()>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// Dropping a runtime without [`Runtime::shutdown`] stops every actor; each drops its connection, which kills the
/// server's process group at once (no graceful close).
impl Drop for Runtime {
    fn drop(&mut self) {
        let shared = &self.handle.shared;
        if shared.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        shared.root.cancel();
        for entry in shared.registry.iter() {
            entry.value().stop("runtime dropped");
        }
        if let Some(r) = shared.router() {
            r.stop("runtime dropped");
        }
        shared.auth.stop();
        self.supervisor.stop(Some("runtime dropped".into()));
    }
}

impl std::ops::Deref for Runtime {
    type Target = RuntimeHandle;
    fn deref(&self) -> &RuntimeHandle {
        &self.handle
    }
}

impl Runtime {
    /// Starts the actor tree: loads the metadata cache, spawns the supervisor, router and one ServerActor per
    /// server. Only `eager`/`keep-alive` servers (and, with `settings.warmCache`, servers without metadata)
    /// connect now.
    pub async fn start(opts: RuntimeOptions) -> Result<Runtime> {
        let RuntimeOptions {
            mut config,
            agent_dir,
            data_dir,
            mut process,
            http,
            handlers,
            tuning,
            auth,
        } = opts;
        refuse_servers_when_nested(&mut config, crate::process::nesting_depth());
        // A guardian of its own: options cloned into another runtime must not share one (each runtime's guardian
        // ends with it).
        process.guardian_process = crate::process::Guardian::default();
        // Built on first use: a runtime of stdio servers never loads the root certificates.
        let http = match http {
            Some(h) => crate::transport::SharedHttp::from(h),
            None => crate::transport::SharedHttp::lazy(),
        };
        let cache = MetadataCache::in_agent_dir(&agent_dir);
        let configured: std::collections::BTreeSet<String> = config.servers.iter().map(|s| s.name.clone()).collect();
        // The cache file is read and parsed on a blocking thread while this task hashes each server's identity
        // (the cache key; the server actors get the hashes too instead of computing them again).
        let file = {
            let cache = cache.clone();
            tokio::task::spawn_blocking(move || cache.load())
        };
        let hashes: HashMap<String, String> = config
            .servers
            .iter()
            .map(|s| (s.name.clone(), pimcp_config::identity_hash(s)))
            .collect();
        let file = file
            .await
            .map_err(|e| Error::actor(format!("loading the metadata cache: {e}")))?;
        let now = SystemTime::now();
        let mut initial = BTreeMap::new();
        for s in &config.servers {
            let Some(entry) = file.servers.get(&s.name) else {
                continue;
            };
            let source = match hashes.get(&s.name).and_then(|h| entry.freshness(h, now)) {
                Some(Freshness::Fresh) => MetadataSource::Cache,
                Some(Freshness::Stale) => MetadataSource::StaleCache,
                None => continue,
            };
            initial.insert(s.name.clone(), (Arc::clone(&entry.metadata), source));
        }
        if file.servers.keys().any(|k| !configured.contains(k)) {
            let cache = cache.clone();
            let configured = configured.clone();
            let pruned = tokio::task::spawn_blocking(move || cache.update(Vec::new(), &[], Some(&configured))).await;
            if let Ok(Err(e)) = pruned {
                tracing::warn!(error = %e, "could not prune the metadata cache");
            }
        }
        drop(file);
        let config = Arc::new(config);
        // The catalog (thousands of tools with a large cache) is built on a blocking thread while the actors start;
        // it is in place before `start` returns.
        let catalog = {
            let config = config.clone();
            let initial = initial.clone();
            tokio::task::spawn_blocking(move || build_catalog(&config, &initial, 0))
        };
        let auth = AuthHandle::new(&config, &data_dir, auth);
        let shared = Arc::new(Shared {
            settings: config.settings.clone(),
            project_dir: config.project_dir.clone(),
            http,
            process,
            tuning,
            handlers: Arc::new(handlers),
            board: StatusBoard::new(),
            cache,
            configured: RwLock::new(configured),
            problems: RwLock::new(config.problems.as_slice().into()),
            registry: Arc::default(),
            lanes: DashMap::new(),
            router: RwLock::new(None),
            known: Mutex::new(BTreeMap::new()),
            root: CancellationToken::new(),
            shutting_down: AtomicBool::new(false),
            connect_budget_ms: std::sync::atomic::AtomicU64::new(0),
            call_budget_ms: std::sync::atomic::AtomicU64::new(0),
            approvals: DashMap::new(),
            auth: auth.clone(),
            trace: crate::trace::TraceSink::from_settings(&config.settings.trace, &agent_dir),
            cache_writes: Default::default(),
            resource_interest: Default::default(),
        });
        shared.set_budgets(&config.servers);
        auth.attach(shared.process.clone(), shared.project_dir.clone(), &shared.registry);
        // Version 0 is the catalog being built above; the router starts from it instead of building it again.
        let (catalog_tx, catalog_rx) = watch::channel(Arc::new(Catalog::default()));
        let args = SupArgs {
            config,
            shared: shared.clone(),
            initial,
            hashes,
            catalog_tx: catalog_tx.clone(),
        };
        let (supervisor, join) = Actor::spawn(None, SupervisorActor, args)
            .await
            .map_err(|e| Error::actor(format!("starting the supervisor: {e}")))?;
        let catalog = catalog
            .await
            .map_err(|e| Error::actor(format!("building the catalog: {e}")))?;
        // Unless the router already published a newer one (an eager server discovered meanwhile, built from the
        // same metadata plus that discovery).
        catalog_tx.send_if_modified(|current| {
            let placeholder = current.version == 0;
            if placeholder {
                *current = Arc::new(catalog);
            }
            placeholder
        });
        Ok(Runtime {
            handle: RuntimeHandle {
                shared,
                supervisor: supervisor.clone(),
                catalog_rx,
            },
            supervisor,
            join: Some(join),
        })
    }

    /// A cloneable handle for other tasks.
    pub fn handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Graceful, bounded shutdown: new work is refused, in-flight calls end with `ShuttingDown`, every connection
    /// is closed (stdin close → grace → SIGTERM → SIGKILL of the process group); whatever is still up when 3/4 of
    /// `bound` has passed is killed. Returns within `bound` (plus scheduling noise).
    pub async fn shutdown(mut self, bound: Duration) -> ShutdownReport {
        let started = Instant::now();
        let shared = self.handle.shared.clone();
        shared.shutting_down.store(true, Ordering::SeqCst);
        let actors: Vec<ServerHandle> = shared.registry.iter().map(|e| e.value().clone()).collect();
        let waits = actors.iter().map(|a| {
            let (tx, rx) = oneshot::channel();
            let sent = a.send(ServerRequest::Shutdown { reply: tx }).is_ok();
            async move {
                if sent {
                    let _ = rx.await;
                }
            }
        });
        let graceful = tokio::time::timeout(bound.mul_f64(0.75), futures::future::join_all(waits))
            .await
            .is_ok();
        shared.root.cancel();
        for a in &actors {
            a.stop("shutdown");
        }
        if let Some(r) = shared.router() {
            r.stop("shutdown");
        }
        shared.auth.stop();
        self.supervisor.stop(Some("shutdown".into()));
        let remaining = bound.saturating_sub(started.elapsed());
        let joined = match self.join.take() {
            Some(join) => tokio::time::timeout(remaining, join).await.is_ok(),
            None => true,
        };
        // What this run discovered reaches the metadata cache before we return (the next start reads it).
        let remaining = bound.saturating_sub(started.elapsed());
        shared.cache_writes.close();
        let written = tokio::time::timeout(remaining, shared.cache_writes.wait())
            .await
            .is_ok();
        if !written {
            tracing::warn!("shutdown: a metadata cache write was still running at the bound");
        }
        ShutdownReport {
            graceful: graceful && joined,
            elapsed: started.elapsed(),
        }
    }
}

/// At [`crate::process::MAX_NESTING`] runtimes deep, every server is refused (a configuration error naming why).
fn refuse_servers_when_nested(config: &mut Config, depth: u32) {
    if depth < crate::process::MAX_NESTING {
        return;
    }
    tracing::warn!(
        depth,
        "pimcp runs {depth} levels inside other pimcp runtimes: it starts no server"
    );
    for server in &mut config.servers {
        if matches!(server.availability, pimcp_config::Availability::Available) {
            server.availability = pimcp_config::Availability::ConfigError {
                message: format!(
                    "pimcp runs {depth} levels inside other pimcp runtimes ({}={depth}), so it starts no server: a \
                     pimcp listed among its own servers must not start itself without end",
                    crate::process::NESTING_ENV
                ),
            };
        }
    }
}
