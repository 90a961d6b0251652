//! `pimcp-run` as an MCP server: a hand-written rmcp `ServerHandler` ([`ProxyServer`]) exposing the `mcp` tool plus
//! direct tools, upstream prompts (`<server>_<prompt>`) and resources, with `list_changed` notifications when that
//! surface changes (direct tools of a frozen surface only on deliberate refreshes). [`serve`] runs it over any transport (the HTTP mode reuses it);
//! [`serve_stdio`] / [`run_stdio`] run the stdio entry point with signal handling and a bounded runtime shutdown.
//! Shutdown is graceful: the first SIGINT/SIGTERM (or [`ServeOptions::with_shutdown_token`]) refuses new calls,
//! waits up to [`ServeOptions::drain_bound`] for calls in flight, then closes the servers; a second signal skips the
//! wait and kills the servers at once.
//!
//! Protocol notes: every version rmcp knows is supported, 2026-07-28 included (`server/discover` is answered by
//! rmcp's default from [`ProxyServer`]'s info, before or instead of `initialize`); `ping` is answered; a line that is
//! no valid request gets exactly the JSON-RPC error it is owed (`host_input`), and serving continues.
//! Failed tool calls are tool results with `isError`, never JSON-RPC errors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use pimcp_config::Config;
use pimcp_surface::{ToolDefOptions, mcp_tool};
use rmcp::RoleServer;
use rmcp::model::Tool;
use rmcp::service::{Peer, SubscriptionSendError, SubscriptionSink};
use tokio_util::sync::CancellationToken;

use crate::direct::{DirectTool, direct_tools};
use crate::facade::Proxy;
use crate::forward::HostBridge;

mod handler;
mod serving;
mod shutdown;

pub(crate) use serving::start_bridged;
pub use serving::{run_stdio, serve, serve_lines, serve_stdio, stdin_pipe};
pub(crate) use shutdown::{ShutdownSignals, run_until_shutdown, shutdown_runtime, spawn_reload_watch};

/// Default bound of the runtime shutdown after the host goes away or a signal arrives.
pub const DEFAULT_SHUTDOWN_BOUND: Duration = Duration::from_secs(5);
/// Default bound of the wait for calls in flight when a shutdown is requested.
pub const DEFAULT_DRAIN_BOUND: Duration = Duration::from_secs(10);
/// Runtime shutdown bound after a second signal: servers are killed rather than closed.
pub const IMMEDIATE_SHUTDOWN_BOUND: Duration = Duration::from_millis(200);
/// Signals within this time of the first SIGINT/SIGTERM are the same request to stop gracefully; only a later one
/// stops at once.
pub const SIGNAL_BURST: Duration = Duration::from_secs(1);
/// How long a call's answer waits for the progress reports relayed before it to be handed to the host's session.
const PROGRESS_FLUSH_BOUND: Duration = Duration::from_secs(1);
/// After a drain on stdio, time for the last answers to be written before the session is cancelled.
const STDIO_SETTLE: Duration = Duration::from_millis(100);
/// Quiet time after a catalog change before the surface is recomputed (coalesces `list_changed` storms).
pub const SURFACE_DEBOUNCE: Duration = Duration::from_millis(50);
/// The name `pimcp-run` reports in `serverInfo`.
pub const SERVER_NAME: &str = pimcp_actors::PIMCP_SERVER_NAME;

/// Reloads the configuration on SIGHUP: returns the new config, or `None` to keep the running one (for
/// instance because the new one has errors). Called on a blocking thread.
pub type ReloadFn = Arc<dyn Fn() -> Option<Config> + Send + Sync>;

/// Options of [`serve_stdio`] and [`run_stdio`].
#[derive(Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// How long the runtime may take to close every server at the end (then the rest is killed).
    pub shutdown_bound: Duration,
    /// How long a requested shutdown waits for calls in flight before closing the servers.
    pub drain_bound: Duration,
    /// Called on SIGHUP; a returned config is applied with [`Proxy::reconfigure`].
    pub reload: Option<ReloadFn>,
    /// Cancelling it requests a graceful shutdown, like SIGTERM.
    pub shutdown: Option<CancellationToken>,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("shutdown_bound", &self.shutdown_bound)
            .field("drain_bound", &self.drain_bound)
            .field("reload", &self.reload.is_some())
            .field("shutdown", &self.shutdown.is_some())
            .finish()
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            shutdown_bound: DEFAULT_SHUTDOWN_BOUND,
            drain_bound: DEFAULT_DRAIN_BOUND,
            reload: None,
            shutdown: None,
        }
    }
}

impl ServeOptions {
    /// Another bound for the whole shutdown.
    pub fn with_shutdown_bound(mut self, bound: Duration) -> Self {
        self.shutdown_bound = bound;
        self
    }

    /// Another bound for draining calls in flight.
    pub fn with_drain_bound(mut self, bound: Duration) -> Self {
        self.drain_bound = bound;
        self
    }

    /// Shut down gracefully when `token` is cancelled (besides SIGINT/SIGTERM).
    pub fn with_shutdown_token(mut self, token: CancellationToken) -> Self {
        self.shutdown = Some(token);
        self
    }

    /// Reload the configuration with `reload` on SIGHUP.
    pub fn with_reload(mut self, reload: impl Fn() -> Option<Config> + Send + Sync + 'static) -> Self {
        self.reload = Some(Arc::new(reload));
        self
    }
}

/// The MCP server handler of `pimcp-run`. Cheap to clone; one value serves any number of host sessions (the
/// Streamable HTTP factory clones it per session) and they share the runtime.
#[derive(Clone)]
pub struct ProxyServer {
    inner: Arc<ServerInner>,
}

impl std::fmt::Debug for ProxyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyServer")
            .field("proxy", &self.inner.proxy)
            .field("frozen", &self.inner.frozen)
            .finish_non_exhaustive()
    }
}

struct ServerInner {
    proxy: Proxy,
    bridge: HostBridge,
    /// `None` with `disableProxyTool`.
    mcp: Option<Tool>,
    /// `mcpScript`, next to `mcp` unless `scriptMode` is off.
    script: Option<Tool>,
    frozen: bool,
    surface: RwLock<Surface>,
    /// Initialized host sessions to notify.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// `subscriptions/listen` streams of 2026-07-28 hosts, which get their notifications there.
    sinks: Mutex<Vec<SubscriptionSink>>,
    /// Stops the surface watcher.
    stop: CancellationToken,
    /// Host requests (tool calls, prompt gets, resource reads) being answered.
    in_flight: AtomicUsize,
    /// Signalled each time `in_flight` drops to zero.
    idle: tokio::sync::Notify,
    /// A shutdown was requested: new calls are refused.
    draining: AtomicBool,
    /// Cancels every call (see [`ProxyServer::cancel_calls`]); each call also follows its own request's token.
    calls: CancellationToken,
    /// `logging/setLevel` per session and the `notifications/message` fan-out.
    log: crate::host_log::HostLog,
    /// Hosts' `resources/subscribe` and the resources of their listen streams.
    subscriptions: crate::resource_subs::ResourceSubs,
    /// Keys of listen streams (their resource subscriptions).
    next_stream: std::sync::atomic::AtomicU64,
}

/// Counts one host request in flight.
struct Busy<'a>(&'a ServerInner);

impl<'a> Busy<'a> {
    fn new(inner: &'a ServerInner) -> Busy<'a> {
        inner.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(inner)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// What the host sees besides `mcp`; compared to decide which `list_changed` notifications to send.
#[derive(Debug, Clone, Default, PartialEq)]
struct Surface {
    direct: Vec<DirectTool>,
    by_name: HashMap<String, usize>,
    prompts: Vec<String>,
    resources: Vec<String>,
}

impl Surface {
    fn new(direct: Vec<DirectTool>, prompts: Vec<String>, resources: Vec<String>) -> Surface {
        let by_name = direct
            .iter()
            .enumerate()
            .map(|(i, d)| (d.tool.name.to_string(), i))
            .collect();
        Surface {
            direct,
            by_name,
            prompts,
            resources,
        }
    }

    fn tool_defs(&self) -> Vec<&Tool> {
        self.direct.iter().map(|d| &d.tool).collect()
    }
}

impl ProxyServer {
    /// A server over `proxy`, forwarding server→client requests through `bridge` (the same bridge whose
    /// [`HostBridge::handlers`] the runtime was started with). Starts the surface watcher on the current tokio
    /// runtime.
    pub fn new(proxy: Proxy, bridge: HostBridge) -> ProxyServer {
        proxy.attach_bridge(&bridge);
        let config = proxy.config();
        let settings = &config.settings;
        let mcp = (!settings.disable_proxy_tool).then(|| mcp_tool(&ToolDefOptions::from_config(&config)));
        let script = settings
            .script
            .filter(|_| mcp.is_some())
            .map(|limits| crate::script::script_tool(&limits));
        let surface = compute_surface(&proxy);
        let stop = CancellationToken::new();
        let log = crate::host_log::HostLog::start(proxy.runtime(), stop.clone());
        let subscriptions = crate::resource_subs::ResourceSubs::start(&proxy, stop.clone());
        if mcp.is_none() && surface.direct.is_empty() {
            tracing::warn!(
                "disableProxyTool is set and no direct tools are known yet: the host sees no tools until a server's \
                 metadata is cached"
            );
        }
        let server = ProxyServer {
            inner: Arc::new(ServerInner {
                proxy,
                bridge,
                mcp,
                script,
                frozen: settings.freeze_direct_tools,
                surface: RwLock::new(surface),
                peers: Mutex::new(Vec::new()),
                sinks: Mutex::new(Vec::new()),
                stop,
                in_flight: AtomicUsize::new(0),
                idle: tokio::sync::Notify::new(),
                draining: AtomicBool::new(false),
                calls: CancellationToken::new(),
                log,
                subscriptions,
                next_stream: std::sync::atomic::AtomicU64::new(0),
            }),
        };
        server.spawn_watcher();
        server
    }

    /// The façade every session answers through.
    pub fn proxy(&self) -> &Proxy {
        &self.inner.proxy
    }

    /// Every tool the host sees: `mcp` and `mcpScript` (unless disabled) then the direct tools.
    pub fn tools(&self) -> Vec<Tool> {
        let surface = self.surface();
        self.inner
            .mcp
            .iter()
            .chain(self.inner.script.iter())
            .cloned()
            .chain(surface.direct.iter().map(|d| d.tool.clone()))
            .collect()
    }

    /// Stops the surface watcher (also stopped when the last clone is dropped).
    pub fn stop(&self) {
        self.inner.stop.cancel();
    }

    /// The bridge forwarding server→client requests to the hosts.
    pub fn bridge(&self) -> &HostBridge {
        &self.inner.bridge
    }

    /// Host requests (tool calls, prompt gets, resource reads) being answered right now, over every session.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// Refuses new calls from now on (they get a `connection` error saying pimcp-run is shutting down); calls
    /// already in flight go on.
    pub fn begin_drain(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
    }

    /// Refuses new calls and cancels those in flight (each is cancelled upstream with `notifications/cancelled`
    /// and answered as cancelled): the stdio host's input has ended, so nobody waits for them.
    pub fn cancel_calls(&self) {
        self.begin_drain();
        self.inner.calls.cancel();
    }

    /// Whether the server is draining (no new work; calls in flight finish).
    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }

    /// Waits until no host request is in flight, at most `bound`; returns whether that happened.
    pub async fn drain(&self, bound: Duration) -> bool {
        let idle = async {
            loop {
                let notified = self.inner.idle.notified();
                if self.in_flight() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(bound, idle).await.is_ok()
    }

    fn surface(&self) -> Surface {
        match self.inner.surface.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Watches the catalog and the proxy's deliberate refreshes, and recomputes the surface after each burst. On
    /// a fresh install, servers with direct tools and nothing cached are discovered in the background first.
    fn spawn_watcher(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak: Weak<ServerInner> = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        let mut rx = self.inner.proxy.runtime().catalog_watch();
        let mut deliberate = self.inner.proxy.deliberate_refreshes();
        let mut deliberate_seen = *deliberate.borrow_and_update();
        handle.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = rx.changed() => if changed.is_err() { return },
                    changed = deliberate.changed() => if changed.is_err() { return },
                }
                // Coalesce bursts: wait for a quiet moment, then read the latest snapshot.
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(SURFACE_DEBOUNCE) => break,
                        changed = rx.changed() => if changed.is_err() { return },
                        changed = deliberate.changed() => if changed.is_err() { return },
                    }
                }
                rx.borrow_and_update();
                // A deliberate refresh in this burst lets a frozen surface take the catalog as it is now.
                let now = *deliberate.borrow_and_update();
                let deliberately = now != deliberate_seen;
                deliberate_seen = now;
                let Some(inner) = weak.upgrade() else { return };
                ProxyServer { inner }.refresh_surface(deliberately).await;
            }
        });
        let proxy = self.inner.proxy.clone();
        let stop = self.inner.stop.clone();
        handle.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                tried = proxy.discover_for_direct_tools() => if !tried.is_empty() {
                    tracing::debug!(servers = ?tried, "discovered the direct-tool servers nothing was cached of");
                },
            }
        });
    }

    /// Recomputes the surface and notifies every host of what changed. A frozen surface keeps its direct tools
    /// unless the refresh is `deliberate`.
    async fn refresh_surface(&self, deliberate: bool) {
        let mut next = compute_surface(&self.inner.proxy);
        let (tools_changed, prompts_changed, resources_changed) = {
            let mut current = match self.inner.surface.write() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if self.inner.frozen && !deliberate {
                next.direct = current.direct.clone();
                next.by_name = current.by_name.clone();
            }
            let changes = (
                current.tool_defs() != next.tool_defs(),
                current.prompts != next.prompts,
                current.resources != next.resources,
            );
            *current = next;
            changes
        };
        if !(tools_changed || prompts_changed || resources_changed) {
            return;
        }
        let peers = {
            let mut peers = self
                .inner
                .peers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        tracing::debug!(
            tools_changed,
            prompts_changed,
            resources_changed,
            hosts = peers.len(),
            "host-visible surface changed"
        );
        for peer in peers {
            if tools_changed {
                let _ = peer.notify_tool_list_changed().await;
            }
            if prompts_changed {
                let _ = peer.notify_prompt_list_changed().await;
            }
            if resources_changed {
                let _ = peer.notify_resource_list_changed().await;
            }
        }
        let sinks = self
            .inner
            .sinks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut closed = Vec::new();
        for (i, sink) in sinks.iter().enumerate() {
            let mut results = Vec::new();
            if tools_changed && sink.accepted().tools_list_changed == Some(true) {
                results.push(sink.notify_tool_list_changed().await);
            }
            if prompts_changed && sink.accepted().prompts_list_changed == Some(true) {
                results.push(sink.notify_prompt_list_changed().await);
            }
            if resources_changed && sink.accepted().resources_list_changed == Some(true) {
                results.push(sink.notify_resource_list_changed().await);
            }
            if results.iter().any(|r| {
                matches!(
                    r,
                    Err(SubscriptionSendError::SubscriptionClosed | SubscriptionSendError::Service(_))
                )
            }) {
                closed.push(i);
            }
        }
        if !closed.is_empty() {
            // Only this task removes sinks and `listen` only appends, so the snapshot's indices are still valid.
            let mut current = self
                .inner
                .sinks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for i in closed.into_iter().rev() {
                if i < current.len() {
                    current.remove(i);
                }
            }
        }
    }
}

impl Drop for ServerInner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn compute_surface(proxy: &Proxy) -> Surface {
    let catalog = proxy.runtime().catalog();
    let config = proxy.config();
    Surface::new(
        direct_tools(&catalog, &config),
        proxy.prompts().into_iter().map(|p| p.name).collect(),
        proxy
            .resources()
            .into_iter()
            .map(|(_, r)| r.uri)
            .chain(proxy.resource_templates().into_iter().map(|(_, t)| t.uri_template))
            .collect(),
    )
}
