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
//! not JSON is ignored and a JSON line that is not a request is answered with an error, and serving continues.
//! Failed tool calls are tool results with `isError`, never JSON-RPC errors.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use pimcp_actors::{Runtime, RuntimeOptions, ShutdownReport};
use pimcp_config::Config;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, Peer, RequestContext, ServiceExt, SubscriptionContext, SubscriptionSendError, SubscriptionSink,
};
use rmcp::transport::IntoTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::direct::{DirectTool, direct_tools};
use crate::error::{Error, Result};
use crate::facade::{CallContext, Proxy, ProxyOptions};
use crate::forward::{HostBridge, relay_progress, with_caller};
use crate::text::{Category, ProxyError};
use crate::tool_def::{TOOL_NAME, ToolDefOptions, mcp_tool};

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
pub const SERVER_NAME: &str = "pimcp";

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
    pub fn with_shutdown_bound(mut self, bound: Duration) -> Self {
        self.shutdown_bound = bound;
        self
    }

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
    /// `logging/setLevel` per session and the `notifications/message` fan-out.
    log: crate::host_log::HostLog,
    /// Hosts' `resources/subscribe`.
    subscriptions: crate::resource_subs::ResourceSubs,
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
        let servers: Vec<String> = config.servers.iter().map(|s| s.name.clone()).collect();
        let descriptions = config
            .servers
            .iter()
            .filter_map(|s| Some((s.name.clone(), s.description.clone()?)))
            .collect();
        let mcp = (!settings.disable_proxy_tool).then(|| mcp_tool(&ToolDefOptions { servers, descriptions }));
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
                frozen: settings.freeze_direct_tools,
                surface: RwLock::new(surface),
                peers: Mutex::new(Vec::new()),
                sinks: Mutex::new(Vec::new()),
                stop,
                in_flight: AtomicUsize::new(0),
                idle: tokio::sync::Notify::new(),
                draining: AtomicBool::new(false),
                log,
                subscriptions,
            }),
        };
        server.spawn_watcher();
        server
    }

    pub fn proxy(&self) -> &Proxy {
        &self.inner.proxy
    }

    /// Every tool the host sees: `mcp` (unless disabled) then the direct tools.
    pub fn tools(&self) -> Vec<Tool> {
        let surface = self.surface();
        self.inner
            .mcp
            .iter()
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

impl ServerHandler for ProxyServer {
    #[allow(deprecated)] // `logging` is SEP-2577-deprecated but still declared to 2025-11-25 hosts
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "pimcp fronts the configured MCP servers. Use the mcp tool: mcp({}) for status, mcp({search: \"words\"}) to \
                 find a tool, mcp({tool, args}) to call it.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    /// rmcp's default: the peer info, then the negotiation.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tracing::debug!(
            client = ?context.peer.peer_info().map(|i| i.client_info.name.clone()),
            "host initialized"
        );
        self.inner.bridge.attach(context.peer.clone());
        let mut peers = self
            .inner
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(context.peer);
    }

    fn accepted_subscription_filter(&self, _requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // rmcp intersects this with what was requested and what `get_info` advertises.
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> std::result::Result<(), ErrorData> {
        self.inner
            .sinks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }

    #[allow(deprecated)] // logging is SEP-2577-deprecated but still on the wire
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.inner.log.set_level(&ctx.peer, request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        if self.is_draining() {
            let error = ProxyError::new(
                Category::Connection,
                "pimcp-run is shutting down; the call was not made.",
            )
            .with_hint("Retry once pimcp-run is back.");
            return Ok(crate::facade::ProxyResponse::from(error).result.into());
        }
        let _busy = Busy::new(&self.inner);
        let peer = ctx.peer.clone();
        with_caller(peer, self.answer_call(request, ctx)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListPromptsResult, ErrorData> {
        let prompts = self
            .inner
            .proxy
            .prompts()
            .into_iter()
            .map(|entry| {
                let mut p: Prompt = entry.prompt;
                p.name = entry.name;
                p
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<GetPromptResponse, ErrorData> {
        let _busy = Busy::new(&self.inner);
        let span = tracing::info_span!("proxy_request", mode = "prompt");
        match self
            .inner
            .proxy
            .get_prompt(&request.name, request.arguments)
            .instrument(span)
            .await
        {
            Ok(result) => Ok(GetPromptResponse::Complete(result)),
            Err(e) => Err(protocol_error(&e)),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        let resources = self.inner.proxy.resources().into_iter().map(|(_, r)| r).collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, ErrorData> {
        let templates = self
            .inner
            .proxy
            .resource_templates()
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    #[allow(deprecated)] // resources/subscribe is legacy-only in rmcp; hosts of the initialize era use it
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.inner
            .subscriptions
            .subscribe(&self.inner.proxy, &ctx.peer, &request.uri)
            .await
            .map_err(|e| match e.category {
                Category::UnknownTool => ErrorData::resource_not_found(e.message.clone(), None),
                _ => protocol_error(&e),
            })
    }

    #[allow(deprecated)] // as `subscribe`
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.inner
            .subscriptions
            .unsubscribe(&self.inner.proxy, &ctx.peer, &request.uri)
            .await;
        Ok(())
    }

    /// Forwarded to the server of the prompt or resource template; an unknown one is an invalid-params error.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CompleteResult, ErrorData> {
        let _busy = Busy::new(&self.inner);
        let span = tracing::info_span!("proxy_request", mode = "complete");
        self.inner
            .proxy
            .complete(request)
            .instrument(span)
            .await
            .map_err(|e| protocol_error(&e))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, ErrorData> {
        let _busy = Busy::new(&self.inner);
        let span = tracing::info_span!("proxy_request", mode = "resource");
        match self.inner.proxy.read_resource(&request.uri).instrument(span).await {
            Ok(result) => Ok(ReadResourceResponse::Complete(result)),
            Err(e) if e.category == Category::UnknownTool => {
                Err(ErrorData::resource_not_found(e.message.clone(), None))
            }
            Err(e) => Err(protocol_error(&e)),
        }
    }

    /// A method rmcp knows lands here only when its params did not fit it: -32602, not -32601.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::CustomResult, ErrorData> {
        if crate::host_input::is_known_method(&request.method) {
            return Err(ErrorData::invalid_params("Invalid params", None));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ))
    }
}

impl ProxyServer {
    /// A host's `tools/call`: the `mcp` tool or a direct tool.
    async fn answer_call(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        // The host asked for progress: the upstream's notifications for this call are relayed with its token.
        let (progress, relay) = match ctx.meta.get_progress_token() {
            Some(token) => {
                let (tx, relay) = relay_progress(ctx.peer.clone(), token);
                (Some(tx), Some(relay))
            }
            None => (None, None),
        };
        let call = CallContext {
            cancel: Some(ctx.ct.clone()),
            timeout: None,
            progress,
        };
        let name = request.name.as_ref();
        let response = if self.inner.mcp.is_some() && name == TOOL_NAME {
            let arguments = request.arguments.map(Value::Object);
            self.inner.proxy.handle_owned_arguments(arguments, &call).await
        } else {
            // Under the read lock: only the one target is cloned, not the whole surface (every direct tool's definition).
            let target = {
                let surface = match self.inner.surface.read() {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                surface.by_name.get(name).map(|&i| surface.direct[i].target.clone())
            };
            match target {
                Some(target) => {
                    // The `mcp` tool's requests get their span in the façade; a direct tool's starts here.
                    let span = tracing::info_span!("proxy_request", mode = "direct", outcome = tracing::field::Empty);
                    let response = self
                        .inner
                        .proxy
                        .call_resolved(&target, request.arguments.unwrap_or_default(), &call)
                        .instrument(span.clone())
                        .await;
                    span.record("outcome", response.category.map_or("ok", Category::as_str));
                    response
                }
                None => {
                    let mut error = ProxyError::new(Category::UnknownTool, format!("pimcp-run has no tool {name:?}."));
                    if self.inner.mcp.is_some() {
                        error = error.with_hint(format!(
                            "Upstream tools are reached through the mcp tool: mcp({{tool: {name:?}, args: {{…}}}})."
                        ));
                    }
                    error.into()
                }
            }
        };
        drop(call);
        if let Some(relay) = relay {
            // Every report that reached the relay before the call ended goes to rmcp's loop before the answer, which
            // the loop then writes after them. Bounded: a host that stops reading cannot hold the answer back.
            let _ = tokio::time::timeout(PROGRESS_FLUSH_BOUND, relay).await;
        }
        Ok(response.result.into())
    }
}

/// Prompt and resource requests are not tool calls: their failures are JSON-RPC errors carrying the category.
fn protocol_error(e: &ProxyError) -> ErrorData {
    let data = serde_json::json!({ "category": e.category.as_str() });
    match e.category {
        Category::UnknownTool | Category::Validation => ErrorData::invalid_params(e.text(), Some(data)),
        _ => ErrorData::internal_error(e.text(), Some(data)),
    }
}

/// Serves one host connection over `transport` until the host closes it or `cancel` fires. A host that goes away
/// before initializing is not an error.
pub async fn serve<T, E, A>(server: ProxyServer, transport: T, cancel: CancellationToken) -> Result<()>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = match server.serve_with_ct(transport, cancel.child_token()).await {
        Ok(running) => running,
        Err(
            rmcp::service::ServerInitializeError::ConnectionClosed(_) | rmcp::service::ServerInitializeError::Cancelled,
        ) => {
            return Ok(());
        }
        Err(e) => {
            return Err(Error::Serve {
                transport: "mcp",
                message: e.to_string(),
            });
        }
    };
    let reason = running.waiting().await.map_err(|e| Error::Serve {
        transport: "mcp",
        message: format!("the service task failed: {e}"),
    })?;
    tracing::debug!(?reason, "host session ended");
    Ok(())
}

/// Serves one host over newline-delimited JSON-RPC on `read` / `write` (what [`serve_stdio`] does on stdin/stdout)
/// until the host closes `read` or `cancel` fires: [`serve`] over rmcp's byte-stream transport.
pub async fn serve_lines<R, W>(server: ProxyServer, read: R, write: W, cancel: CancellationToken) -> Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(read, write);
    serve(server, transport, cancel).await
}

/// Serves MCP on stdin/stdout until stdin closes, SIGINT or SIGTERM, then shuts the runtime down within
/// `options.shutdown_bound` (no child process survives). `bridge` must be the one whose handlers the runtime has.
///
/// Pipes and sockets are read and written on the reactor ([`crate::host_stdio`]); other stdin is read by a plain
/// thread (see [`stdin_pipe`]). Either way, returning on a signal while the host keeps stdin open leaves nothing for
/// the tokio runtime to wait on when it is dropped.
pub async fn serve_stdio(
    runtime: Runtime,
    proxy: Proxy,
    bridge: HostBridge,
    options: ServeOptions,
) -> Result<ShutdownReport> {
    let server = ProxyServer::new(proxy.clone(), bridge);
    let cancel = CancellationToken::new();
    let signals = ShutdownSignals::watch(options.shutdown.clone());
    let reloads = options.reload.clone().map(|reload| spawn_reload_watch(proxy, reload));
    let (stdin, stdout) = crate::stdio::host_stdio();
    let serving = serve_lines(server.clone(), stdin, stdout, cancel.clone());
    // Answers of drained calls are written right after the handlers return (by rmcp's
    // service loop for other requests).
    let settle = tokio::time::sleep(STDIO_SETTLE);
    let (served, immediate) =
        run_until_shutdown(&server, serving, &signals, &cancel, options.drain_bound, settle).await;
    if let Err(e) = &served {
        tracing::error!(error = %e, "stdio session failed");
    }
    server.stop();
    if let Some(r) = reloads {
        r.abort();
    }
    let report = shutdown_runtime(runtime, &signals, options.shutdown_bound, immediate).await;
    signals.stop();
    served.map(|()| report)
}

/// The first and second shutdown request: SIGINT/SIGTERM, or an embedder's token for the first.
#[derive(Debug)]
pub(crate) struct ShutdownSignals {
    /// Stop accepting, drain, close.
    pub(crate) graceful: CancellationToken,
    /// Stop waiting, kill.
    pub(crate) immediate: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ShutdownSignals {
    /// Watches SIGINT/SIGTERM (and `external`, which counts as a first request).
    pub(crate) fn watch(external: Option<CancellationToken>) -> ShutdownSignals {
        let graceful = CancellationToken::new();
        let immediate = CancellationToken::new();
        let task = {
            let (graceful, immediate) = (graceful.clone(), immediate.clone());
            tokio::spawn(async move {
                use tokio::signal::unix::{SignalKind, signal};
                let external = external.unwrap_or_default();
                let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
                else {
                    tracing::warn!("cannot install SIGINT/SIGTERM handlers");
                    external.cancelled().await;
                    graceful.cancel();
                    return;
                };
                tokio::select! {
                    _ = int.recv() => tracing::info!("SIGINT: shutting down (a second signal stops at once)"),
                    _ = term.recv() => tracing::info!("SIGTERM: shutting down (a second signal stops at once)"),
                    _ = external.cancelled() => tracing::info!("shutdown requested"),
                }
                graceful.cancel();
                // Hosts stop a server with more than one signal (Claude Code: SIGINT, then SIGTERM 0.1 s later):
                // the signals of one burst are one request to stop gracefully.
                let first = tokio::time::Instant::now();
                loop {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                    if first.elapsed() >= SIGNAL_BURST {
                        break;
                    }
                    tracing::debug!("a signal right after the first: the same request to stop");
                }
                tracing::warn!("second signal: stopping at once");
                immediate.cancel();
            })
        };
        ShutdownSignals {
            graceful,
            immediate,
            task,
        }
    }

    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

/// Drives `serving` until it ends by itself, or a shutdown is requested: then new calls are refused, calls in
/// flight get up to `drain_bound` (less if a second request comes), `settle` lets their answers reach the hosts,
/// and `cancel` ends the serving. Returns the serving's outcome and whether the shutdown must be immediate.
pub(crate) async fn run_until_shutdown<F, S>(
    server: &ProxyServer,
    serving: F,
    signals: &ShutdownSignals,
    cancel: &CancellationToken,
    drain_bound: Duration,
    settle: S,
) -> (Result<()>, bool)
where
    F: std::future::Future<Output = Result<()>>,
    S: std::future::Future<Output = ()>,
{
    tokio::pin!(serving);
    tokio::select! {
        served = &mut serving => return (served, signals.immediate.is_cancelled()),
        _ = signals.graceful.cancelled() => {}
    }
    server.begin_drain();
    let in_flight = server.in_flight();
    if in_flight > 0 {
        tracing::info!(
            in_flight,
            bound_ms = drain_bound.as_millis() as u64,
            "waiting for calls in flight"
        );
    }
    let mut served = None;
    let mut drained = false;
    tokio::select! {
        r = &mut serving => served = Some(r),
        done = server.drain(drain_bound) => {
            drained = done;
            if !done {
                tracing::warn!(in_flight = server.in_flight(), "calls still in flight after the drain bound; cancelling them");
            }
        }
        _ = signals.immediate.cancelled() => {}
    }
    if drained && served.is_none() {
        tokio::select! {
            r = &mut serving => served = Some(r),
            () = settle => {}
            _ = signals.immediate.cancelled() => {}
        }
    }
    cancel.cancel();
    let served = match served {
        Some(r) => r,
        None => serving.await,
    };
    (served, signals.immediate.is_cancelled())
}

/// Shuts the runtime down within `bound`, or kills the servers at once when `immediate` (or a second signal comes
/// while waiting).
pub(crate) async fn shutdown_runtime(
    runtime: Runtime,
    signals: &ShutdownSignals,
    bound: Duration,
    immediate: bool,
) -> ShutdownReport {
    let bound = if immediate {
        IMMEDIATE_SHUTDOWN_BOUND.min(bound)
    } else {
        bound
    };
    let shutdown = runtime.shutdown(bound);
    tokio::pin!(shutdown);
    let report = tokio::select! {
        report = &mut shutdown => report,
        _ = signals.immediate.cancelled(), if !immediate => {
            // The graceful close is under way; the runtime's guardian kills what is left when the process exits.
            tracing::warn!("second signal during shutdown: not waiting for the servers to close");
            ShutdownReport { graceful: false, elapsed: Duration::ZERO }
        }
    };
    tracing::info!(
        graceful = report.graceful,
        elapsed_ms = report.elapsed.as_millis() as u64,
        "pimcp-run stopped"
    );
    report
}

/// The whole stdio entry point of `pimcp-run`: installs a [`HostBridge`] as the runtime's handlers, starts the
/// runtime, builds the [`Proxy`] and runs [`serve_stdio`].
pub async fn run_stdio(options: RuntimeOptions, serve_options: ServeOptions) -> Result<ShutdownReport> {
    let bridge = HostBridge::new();
    let mut options = options;
    options.handlers = bridge.handlers();
    let config = options.config.clone();
    let runtime = Runtime::start(options).await?;
    let proxy = match Proxy::with_options(
        runtime.handle(),
        &config,
        ProxyOptions {
            spill: None,
            bridge: Some(bridge.clone()),
        },
    ) {
        Ok(p) => p,
        Err(e) => {
            runtime.shutdown(serve_options.shutdown_bound).await;
            return Err(e);
        }
    };
    serve_stdio(runtime, proxy, bridge, serve_options).await
}

/// Applies `reload`'s config on every SIGHUP.
pub(crate) fn spawn_reload_watch(proxy: Proxy, reload: ReloadFn) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot install a SIGHUP handler; configuration reload is off");
            return;
        };
        while hup.recv().await.is_some() {
            let reload = reload.clone();
            let config = match tokio::task::spawn_blocking(move || reload()).await {
                Ok(Some(config)) => config,
                Ok(None) => {
                    tracing::warn!("SIGHUP: the new configuration was not applied; the running one stays");
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: reloading the configuration failed");
                    continue;
                }
            };
            match proxy.reconfigure(config).await {
                Ok(()) => tracing::info!("SIGHUP: configuration reloaded"),
                Err(e) => tracing::error!(error = %e.text(), "SIGHUP: applying the configuration failed"),
            }
        }
    })
}

/// Stdin as an async reader fed by a detached OS thread. tokio's own `stdin()` reads on the blocking pool, and a
/// tokio runtime waits for its blocking threads when dropped: a host that keeps stdin open after SIGTERM would hang
/// the exit. This thread is never joined; it ends at EOF, on a read error, or with the process.
pub fn stdin_pipe() -> tokio::io::DuplexStream {
    use std::io::Read as _;
    use tokio::io::AsyncWriteExt as _;
    const CHUNK_BYTES: usize = 64 * 1024;
    let (reader, mut writer) = tokio::io::duplex(CHUNK_BYTES);
    let spawned = std::thread::Builder::new().name("pimcp-stdin".into()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; CHUNK_BYTES];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "reading stdin failed");
                    break;
                }
            };
            // The duplex needs no tokio driver, so a plain executor can wait for room in it.
            if futures::executor::block_on(writer.write_all(&buf[..n])).is_err() {
                break;
            }
        }
        let _ = futures::executor::block_on(writer.shutdown());
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the stdin reader thread");
    }
    reader
}
