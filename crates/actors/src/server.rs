//! ServerActor: one per configured server; owns its connection and drives its lifecycle as message-driven
//! state transitions. Slow work (connect + discovery, calls, health checks, list refreshes, close) runs in spawned
//! tasks that report back as messages; timers (idle, health, backoff, debounce) are messages to self guarded by a
//! generation number, so a stale timer is ignored instead of cancelled racily. Nothing outside changes its state.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use pimcp_config::{Availability, Lifecycle, ServerConfig};
use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use rmcp::RoleClient;
use rmcp::model::{ClientRequest, PingRequest};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cache::CacheEntry;
use crate::call::{CallGuards, CallJob, CallReport, InputContext, ToolOutput};
use crate::catalog::{MetadataSource, ServerMetadata};
use crate::context::Shared;
use crate::error::{Error, ErrorCategory, Result};
use crate::handler::{ListKind, ProgressRoutes, RuntimeClient};
use crate::lane::{Lane, LiveCall};
use crate::policy::{ConnectBackoff, CrashLoopBreaker};
use crate::router::RouterMsg;
use crate::status::{ServerState, ServerStatus};
use crate::transport::{
    self, ConnectError, ConnectSpec, Connection, Era, SessionResume, TransportKind, boxed_in_place,
};

/// Messages of a [`ServerActor`]. External requests carry a `reply`; the rest are reports from its own tasks and
/// timers, each tagged with the generation it belongs to.
pub(crate) enum ServerMsg {
    /// Run a tool call (connecting first if needed).
    Call {
        job: CallJob,
        reply: oneshot::Sender<Result<ToolOutput>>,
    },
    /// Be connected with fresh metadata (lazy discovery for the router).
    Ensure {
        reply: oneshot::Sender<Result<()>>,
    },
    /// Explicit connect: closes the crash-loop breaker; `force` tears down a live connection first.
    Connect {
        force: bool,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Start connecting now if the server has not started (`cached`, nothing refusing it); nobody waits for it.
    Warm,
    Disable {
        reply: oneshot::Sender<()>,
    },
    Enable {
        reply: oneshot::Sender<()>,
    },
    /// Close everything and stop accepting work; replies once the connection is closed.
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    /// Wall clock jumped (sleep/wake): check a live connection now.
    Revalidate,
    /// The live connection's peer and request timeout, if connected, for one-off requests (`prompts/get`,
    /// `resources/read`); restarts the idle timer. Added for the proxy's prompt and resource pass-through.
    LivePeer {
        reply: oneshot::Sender<Option<(Peer<RoleClient>, Duration)>>,
    },

    Connected {
        generation: u64,
        result: std::result::Result<Box<Established>, ConnectFailure>,
    },
    /// A call on the lane hit something the actor must handle (a dead transport, a refused token).
    CallReport {
        generation: u64,
        report: CallReport,
    },
    TransportClosed {
        generation: u64,
    },
    IdleTimer {
        idle_generation: u64,
    },
    HealthTick {
        generation: u64,
    },
    HealthResult {
        generation: u64,
        outcome: HealthOutcome,
        revalidation: bool,
    },
    BackoffElapsed {
        generation: u64,
    },
    ListChanged {
        generation: u64,
        kind: ListKind,
    },
    RefreshLists {
        generation: u64,
    },
    ListsRefreshed {
        generation: u64,
        result: std::result::Result<Box<Discovery>, String>,
    },
    /// The discovery of a connection that became ready early on fresh cached metadata finished.
    Discovered {
        generation: u64,
        result: std::result::Result<Box<Discovery>, String>,
    },
    Closed {
        generation: u64,
    },
    /// Makes the handler fail, to exercise supervision.
    #[cfg(test)]
    FailForTest,
}

pub(crate) struct Established {
    conn: Connection<RuntimeClient>,
    /// `None`: connected early on fresh cached metadata; the actor runs the discovery in the background.
    discovery: Option<Discovery>,
}

pub(crate) enum ConnectFailure {
    Connect(ConnectError),
    Discovery(String),
    /// The OAuth layer could not provide a usable token (`NeedsAuth`, `Config`, or `Auth` for other failures).
    Auth(Error),
}

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectFailure::Connect(e) => write!(f, "{e}"),
            ConnectFailure::Discovery(m) => f.write_str(m),
            ConnectFailure::Auth(e) => write!(f, "{e}"),
        }
    }
}

/// Lists fetched from a server. `None` for resources/prompts: not advertised or listing failed (tolerated).
#[derive(Debug, Clone, Default)]
pub(crate) struct Discovery {
    tools: Option<(Vec<rmcp::model::Tool>, Option<u64>)>,
    resources: Option<Vec<rmcp::model::Resource>>,
    resource_templates: Option<Vec<rmcp::model::ResourceTemplate>>,
    prompts: Option<Vec<rmcp::model::Prompt>>,
}

#[derive(Debug, Clone)]
pub(crate) enum HealthOutcome {
    Healthy,
    Failed(String),
    TransportClosed,
}

enum Waiter {
    Call(CallJob, oneshot::Sender<Result<ToolOutput>>),
    Ready(oneshot::Sender<Result<()>>),
}

/// What to do once a deliberate close finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterClose {
    /// Back to `Cached` (idle close), unless work queued up meanwhile.
    Cached,
    /// Connect again (wedged, forced reconnect).
    Reconnect,
    /// Stay where we are (disable, shutdown).
    Stay,
}

struct Live {
    conn: Connection<RuntimeClient>,
    peer: Peer<RoleClient>,
    era: Era,
    dead: CancellationToken,
    watch_stop: CancellationToken,
    connected_at: Instant,
}

pub(crate) struct ServerArgs {
    pub cfg: ServerConfig,
    pub shared: Arc<Shared>,
    pub initial: Option<(Arc<ServerMetadata>, MetadataSource)>,
    /// `identity_hash(cfg)` when the caller has it already (the runtime's start computes them all once).
    pub hash: Option<String>,
}

pub(crate) struct ServerActorState {
    cfg: ServerConfig,
    shared: Arc<Shared>,
    hash: String,
    state: ServerState,
    reason: Option<String>,
    generation: u64,
    live: Option<Live>,
    connect_cancel: Option<CancellationToken>,
    waiters: Vec<Waiter>,
    /// Calls run here directly (callers and dispatched waiters); in-flight count and last activity live in it.
    lane: Arc<Lane>,
    /// Progress routes of this server's calls, shared with every connection's handler.
    progress: ProgressRoutes,
    backoff: ConnectBackoff,
    breaker: CrashLoopBreaker,
    backoff_until: Option<Instant>,
    idle_generation: u64,
    idle_timer: Option<JoinHandle<std::result::Result<(), ractor::MessagingErr<ServerMsg>>>>,
    health_failures: u32,
    health_running: bool,
    /// A revalidation asked for while a health check was running: it runs as soon as that check reports.
    revalidation_pending: bool,
    last_response: Option<Instant>,
    ever_connected: bool,
    /// Shared with the router, the supervisor's `known` map and cache writes: never deep-copied.
    metadata: Option<(Arc<ServerMetadata>, MetadataSource)>,
    resume: Option<SessionResume>,
    refresh_dirty: Vec<ListKind>,
    refresh_scheduled: bool,
    refresh_running: bool,
    /// Ready on fresh cached metadata while the connection's first discovery runs: calls go at once, `Ensure` and
    /// `Connect` replies wait for the discovery, list refreshes wait behind it.
    discovering: bool,
    draining: Option<(u64, AfterClose)>,
    shutdown_replies: Vec<oneshot::Sender<()>>,
    stopping: bool,
    /// Cancelled on shutdown/disable: aborts in-flight calls and connect attempts.
    stop: CancellationToken,
    last_error: Option<(ErrorCategory, String)>,
    pid: Option<u32>,
}

pub(crate) struct ServerActor;

impl ServerActor {
    fn keeps_alive(st: &ServerActorState) -> bool {
        match st.cfg.lifecycle {
            Lifecycle::KeepAlive => true,
            Lifecycle::LazyKeepAlive => st.ever_connected,
            Lifecycle::Lazy | Lifecycle::Eager => false,
        }
    }

    fn idle_timeout(st: &ServerActorState) -> Option<Duration> {
        match st.cfg.lifecycle {
            Lifecycle::KeepAlive | Lifecycle::LazyKeepAlive => None,
            Lifecycle::Lazy | Lifecycle::Eager => st.cfg.timeouts.idle.filter(|d| !d.is_zero()),
        }
    }

    fn set_state(st: &mut ServerActorState, state: ServerState, reason: Option<String>) {
        if st.state != state || st.reason != reason {
            // A zero-length span per transition (metadata only: the reason text stays in logs and status).
            let _span = tracing::info_span!("state_transition", server = %st.cfg.name, from = st.state.name(), to = state.name())
                .entered();
            tracing::debug!(server = %st.cfg.name, from = st.state.name(), to = state.name(), reason = ?reason, "state transition");
        }
        st.state = state;
        st.reason = reason;
        Self::publish_status(st);
    }

    fn publish_status(st: &ServerActorState) {
        let (tools, resources, prompts, source, protocol) = match &st.metadata {
            Some((m, s)) => (
                m.tools.len(),
                m.resources.len(),
                m.prompts.len(),
                Some(*s),
                m.protocol_version.clone(),
            ),
            None => (0, 0, 0, None, None),
        };
        let state = st.state.clone();
        let reason = st.reason.clone();
        let failures = u32::try_from(st.breaker.failures()).unwrap_or(u32::MAX);
        let in_flight = st.lane.in_flight();
        let connected_at = st.live.as_ref().map(|l| l.connected_at);
        let pid = st.pid;
        let last_error = st.last_error.clone();
        st.shared.board.update(&st.cfg.name, |s| {
            s.state = state;
            s.reason = reason;
            s.tool_count = tools;
            s.resource_count = resources;
            s.prompt_count = prompts;
            s.metadata = source;
            s.protocol_version = protocol;
            s.failures = failures;
            s.in_flight = in_flight;
            s.connected_at = connected_at;
            s.pid = pid;
            if let Some((cat, msg)) = last_error {
                s.last_error_category = Some(cat);
                s.last_error = Some(msg);
            }
        });
    }

    fn publish_metadata(st: &ServerActorState) {
        if let Some(router) = st.shared.router() {
            let _ = router.send_message(RouterMsg::Metadata {
                server: st.cfg.name.clone(),
                metadata: st.metadata.as_ref().map(|(m, s)| (m.clone(), *s)),
            });
        }
    }

    fn write_cache(st: &ServerActorState) {
        let Some((meta, MetadataSource::Live)) = &st.metadata else {
            return;
        };
        let cache = st.shared.cache.clone();
        let entry = CacheEntry::new(st.hash.clone(), meta.clone(), SystemTime::now());
        let name = st.cfg.name.clone();
        let configured = st.shared.configured_names();
        st.shared.cache_writes.spawn_blocking(move || {
            if let Err(e) = cache.update(vec![(name, entry)], &[], Some(&configured)) {
                tracing::warn!(error = %e, "could not write the metadata cache");
            }
        });
    }

    /// Refuses work in states that cannot serve it; `None` means "go ahead".
    fn refusal(st: &ServerActorState) -> Option<Error> {
        let server = st.cfg.name.clone();
        if st.stopping || st.shared.is_shutting_down() {
            return Some(Error::ShuttingDown);
        }
        match &st.state {
            ServerState::Disabled => Some(Error::Disabled { server }),
            ServerState::Untrusted => Some(match &st.cfg.availability {
                Availability::Untrusted { trust_command, .. } => Error::Untrusted {
                    server,
                    trust_command: trust_command.clone(),
                },
                _ => Error::Untrusted {
                    server,
                    trust_command: "pimcp-run trust".into(),
                },
            }),
            ServerState::ConfigError => Some(Error::Config {
                server,
                message: st.reason.clone().unwrap_or_else(|| "invalid configuration".into()),
            }),
            ServerState::NeedsAuth => Some(Error::NeedsAuth {
                server,
                detail: st
                    .reason
                    .clone()
                    .unwrap_or_else(|| "the server requires authentication".into()),
            }),
            ServerState::Failed { reason } => Some(Error::CrashLoop {
                server,
                reason: reason.clone(),
                failures: u32::try_from(st.breaker.failures()).unwrap_or(u32::MAX),
            }),
            ServerState::Backoff { .. } => {
                let until = st.backoff_until?;
                let now = Instant::now();
                (until > now).then(|| Error::Backoff {
                    server,
                    reason: st.reason.clone().unwrap_or_else(|| "the last connect failed".into()),
                    retry_in: until - now,
                })
            }
            ServerState::Cached | ServerState::Connecting | ServerState::Ready | ServerState::Draining => None,
        }
    }

    fn start_connect(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
        if st.connect_cancel.is_some() || st.live.is_some() || st.draining.is_some() || st.stopping {
            return;
        }
        st.generation += 1;
        let generation = st.generation;
        let cancel = st.stop.child_token();
        st.connect_cancel = Some(cancel.clone());
        st.backoff_until = None;
        Self::set_state(st, ServerState::Connecting, None);
        let handler = RuntimeClient {
            server: st.cfg.name.clone(),
            generation,
            actor: myself.clone(),
            handlers: st.shared.handlers.clone(),
            allow_sampling: st.shared.settings.sampling != Some(false),
            sampling_auto_approve: st.shared.settings.sampling_auto_approve,
            allow_elicitation: st.shared.settings.elicitation != Some(false),
            progress: st.progress.clone(),
            board: st.shared.board.clone(),
        };
        let era_hint = st
            .metadata
            .as_ref()
            .and_then(|(m, _)| m.era.as_deref())
            .and_then(parse_era);
        let spec = ConnectSpec {
            server: st.cfg.clone(),
            project_dir: st.shared.project_dir.clone(),
            http: st.shared.http.clone(),
            era_hint,
            process: st.shared.process.clone(),
            cancel: cancel.clone(),
            resume_session: st.resume.take(),
            access_token: None,
            token_source: None,
            trace: crate::trace::ProtocolTrace::for_server(&st.shared.trace, &st.shared.settings.trace, &st.cfg),
        };
        let request_timeout = st.cfg.timeouts.request;
        let grace = st.shared.tuning.close_grace;
        let me = myself.clone();
        let auth = st.shared.auth.clone();
        // Fresh cached metadata already names the tools: calls need not wait for this connection's discovery.
        let early = matches!(st.metadata, Some((_, MetadataSource::Cache)));
        let span = tracing::info_span!("connect", server = %st.cfg.name, generation, outcome = tracing::field::Empty);
        // The connect future is large (tens of KB): it is written into a box allocated first and spawned as a
        // pointer, so it is never built on this frame and copied down through `tokio::spawn`'s frames (the main
        // thread's stack pages stay resident once touched).
        let task = boxed_in_place(
            async move {
                let result = connect_with_auth(auth, spec, handler, request_timeout, grace, early).await;
                tracing::Span::current().record("outcome", connect_outcome(&result));
                let _ = me.send_message(ServerMsg::Connected { generation, result });
            }
            .instrument(span),
        );
        tokio::spawn(task);
    }

    fn on_connected(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        generation: u64,
        result: std::result::Result<Box<Established>, ConnectFailure>,
    ) {
        if generation != st.generation || st.connect_cancel.is_none() {
            // Superseded (disabled, shut down): close whatever came up.
            if let Ok(est) = result {
                let grace = st.shared.tuning.close_grace;
                tokio::spawn(async move {
                    est.conn.close(grace).await;
                });
            }
            return;
        }
        st.connect_cancel = None;
        match result {
            Ok(est) => {
                let Established { conn, discovery } = *est;
                let now = Instant::now();
                st.breaker.record_up(now);
                st.backoff.reset();
                st.ever_connected = true;
                st.health_failures = 0;
                st.last_response = Some(now);
                st.pid = conn.pid;
                // Without a discovery the fresh cached metadata stays (source `Cache`) until the background one lands.
                st.discovering = discovery.is_none();
                if let Some(discovery) = discovery {
                    let meta = discovered_metadata(st.metadata.as_ref().map(|(m, _)| m.as_ref()), discovery, &conn);
                    st.metadata = Some((Arc::new(meta), MetadataSource::Live));
                }
                let peer = conn.client.peer().clone();
                let dead = CancellationToken::new();
                let watch_stop = CancellationToken::new();
                spawn_watcher(
                    myself.clone(),
                    generation,
                    peer.clone(),
                    dead.clone(),
                    watch_stop.clone(),
                    st.shared.tuning.transport_watch_interval,
                );
                if conn.era == Era::Stateless {
                    spawn_listener(
                        myself.clone(),
                        generation,
                        peer.clone(),
                        watch_stop.clone(),
                        &conn.capabilities,
                    );
                }
                st.live = Some(Live {
                    era: conn.era,
                    conn,
                    peer,
                    dead,
                    watch_stop,
                    connected_at: now,
                });
                Self::open_lane(myself, st);
                Self::set_state(st, ServerState::Ready, None);
                if st.discovering {
                    // The calls first, and the lists only once they are answered (or a second has passed).
                    let calls = Self::serve_calls(myself, st);
                    Self::spawn_discovery(myself, st, calls);
                } else {
                    Self::publish_metadata(st);
                    Self::write_cache(st);
                    Self::serve_waiters(myself, st);
                }
                Self::arm_idle(myself, st);
                Self::arm_health(myself, st);
            }
            Err(failure) => Self::on_connect_failed(myself, st, failure),
        }
    }

    fn on_connect_failed(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, failure: ConnectFailure) {
        let server = st.cfg.name.clone();
        let message = failure.to_string();
        tracing::info!(%server, error = %message, "connect failed");
        if let Some((m, MetadataSource::Live)) = st.metadata.take() {
            st.metadata = Some((m, MetadataSource::Cache));
        }
        match failure {
            ConnectFailure::Connect(ConnectError::Cancelled { .. }) => {
                let err = if st.stopping {
                    Error::ShuttingDown
                } else {
                    Error::Connection { server, message }
                };
                Self::fail_waiters(st, err);
                if !st.stopping && st.state == ServerState::Connecting {
                    Self::set_state(st, ServerState::Cached, None);
                }
            }
            ConnectFailure::Auth(Error::NeedsAuth { detail, .. }) => {
                st.last_error = Some((ErrorCategory::NeedsAuth, message.clone()));
                Self::set_state(st, ServerState::NeedsAuth, Some(format!("needs auth: {detail}")));
                Self::fail_waiters(st, Error::NeedsAuth { server, detail });
            }
            ConnectFailure::Auth(Error::Config { message: detail, .. }) => {
                st.last_error = Some((ErrorCategory::Config, message.clone()));
                Self::set_state(st, ServerState::ConfigError, Some(detail.clone()));
                Self::fail_waiters(
                    st,
                    Error::Config {
                        server,
                        message: detail,
                    },
                );
            }
            ConnectFailure::Connect(ConnectError::NeedsAuth { .. }) => {
                st.last_error = Some((ErrorCategory::NeedsAuth, message.clone()));
                Self::set_state(st, ServerState::NeedsAuth, Some("needs auth".into()));
                Self::fail_waiters(
                    st,
                    Error::NeedsAuth {
                        server,
                        detail: "the server answered 401".into(),
                    },
                );
            }
            // A failed `!command` secret is not here: a locked password manager or a VPN not yet up is retried with
            // backoff like any failed connect (below).
            ConnectFailure::Connect(ref e @ ConnectError::Config { .. }) => {
                let detail = strip_server_prefix(&e.to_string(), &server);
                st.last_error = Some((ErrorCategory::Config, message.clone()));
                Self::set_state(st, ServerState::ConfigError, Some(detail.clone()));
                Self::fail_waiters(
                    st,
                    Error::Config {
                        server,
                        message: detail,
                    },
                );
            }
            _ => {
                st.last_error = Some((ErrorCategory::Connection, message.clone()));
                let short = short_reason(&message, &server);
                if st.breaker.record_failure(Instant::now()) {
                    let reason = format!("crash loop: {short}");
                    Self::set_state(st, ServerState::Failed { reason: reason.clone() }, Some(reason.clone()));
                    let failures = u32::try_from(st.breaker.failures()).unwrap_or(u32::MAX);
                    Self::fail_waiters(
                        st,
                        Error::CrashLoop {
                            server,
                            reason,
                            failures,
                        },
                    );
                    return;
                }
                let (delay, attempt) = st.backoff.next_delay();
                st.backoff_until = Some(Instant::now() + delay);
                let generation = st.generation;
                myself.send_after(delay, move || ServerMsg::BackoffElapsed { generation });
                Self::set_state(
                    st,
                    ServerState::Backoff {
                        until: SystemTime::now() + delay,
                        attempt,
                    },
                    Some(short.clone()),
                );
                Self::fail_waiters(
                    st,
                    Error::Connection {
                        server,
                        message: format!(
                            "{message}; next connect attempt in {}",
                            crate::error::fmt_duration(delay)
                        ),
                    },
                );
            }
        }
        Self::publish_metadata(st);
    }

    fn fail_waiters(st: &mut ServerActorState, err: Error) {
        for w in st.waiters.drain(..) {
            match w {
                Waiter::Call(_, reply) => {
                    let _ = reply.send(Err(err.clone()));
                }
                Waiter::Ready(reply) => {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }

    /// Dispatches the queued calls; `Ensure`/`Connect` replies keep waiting (for the discovery). Returns the
    /// dispatched calls' tasks.
    fn serve_calls(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) -> Vec<JoinHandle<()>> {
        let waiters = std::mem::take(&mut st.waiters);
        let mut calls = Vec::new();
        for w in waiters {
            match w {
                Waiter::Call(job, reply) => calls.extend(Self::dispatch_call(myself, st, job, reply)),
                w @ Waiter::Ready(_) => st.waiters.push(w),
            }
        }
        calls
    }

    /// Runs the first discovery of a connection that became ready early; `Discovered` follows.
    ///
    /// It first waits (at most `Tuning::discovery_after_calls_max`) for `calls`, the calls that were queued for this
    /// connection: they are why it was started, and an upstream handles requests concurrently, so lists sent beside a
    /// call delay its answer. Against server-everything a first call sent with the three lists was answered after them,
    /// ~20 ms after `initialize` instead of ~11 ms alone (docs/benchmarks.md, "the first call with a cache goes before
    /// the lists").
    fn spawn_discovery(myself: &ActorRef<ServerMsg>, st: &ServerActorState, calls: Vec<JoinHandle<()>>) {
        let Some(live) = &st.live else { return };
        let peer = live.peer.clone();
        let caps = live.conn.capabilities.clone();
        let concurrent = lists_concurrently(live.conn.transport);
        let stop = live.watch_stop.clone();
        let timeout = st.cfg.timeouts.request;
        let generation = st.generation;
        let me = myself.clone();
        let span = tracing::info_span!("discover", server = %st.cfg.name, generation);
        let after_calls = st.shared.tuning.discovery_after_calls_max;
        tokio::spawn(
            async move {
                if !calls.is_empty() {
                    tokio::select! {
                        _ = tokio::time::timeout(after_calls, futures::future::join_all(calls)) => {}
                        _ = stop.cancelled() => return,
                    }
                }
                let all = [ListKind::Tools, ListKind::Resources, ListKind::Prompts];
                let result = tokio::select! {
                    r = tokio::time::timeout(timeout, discover(&peer, &caps, &all, concurrent)) => match r {
                        Ok(r) => r.map(Box::new),
                        Err(_) => Err(format!(
                            "discovery took longer than {}",
                            crate::error::fmt_duration(timeout)
                        )),
                    },
                    _ = stop.cancelled() => return,
                };
                let _ = me.send_message(ServerMsg::Discovered { generation, result });
            }
            .instrument(span),
        );
    }

    /// The background discovery of an early-ready connection finished: its lists replace the cached ones (the
    /// catalog and cache update as after `list_changed`); a failure keeps the cached catalog.
    fn on_discovered(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        generation: u64,
        result: std::result::Result<Box<Discovery>, String>,
    ) {
        if generation != st.generation || !st.discovering {
            return;
        }
        let Some(live) = &st.live else { return };
        st.discovering = false;
        match result {
            Ok(d) => {
                let meta = discovered_metadata(st.metadata.as_ref().map(|(m, _)| m.as_ref()), *d, &live.conn);
                st.metadata = Some((Arc::new(meta), MetadataSource::Live));
                Self::publish_status(st);
                Self::publish_metadata(st);
                Self::write_cache(st);
                Self::serve_waiters(myself, st);
            }
            Err(e) => {
                let server = st.cfg.name.clone();
                tracing::info!(%server, error = %e, "discovery failed; keeping the cached catalog");
                let message = format!("discovery failed: {e}");
                st.last_error = Some((ErrorCategory::Connection, message.clone()));
                Self::publish_status(st);
                let waiters = std::mem::take(&mut st.waiters);
                for w in waiters {
                    match w {
                        Waiter::Ready(reply) => {
                            let _ = reply.send(Err(Error::Connection {
                                server: server.clone(),
                                message: message.clone(),
                            }));
                        }
                        w @ Waiter::Call(..) => st.waiters.push(w),
                    }
                }
            }
        }
        if !st.refresh_dirty.is_empty() {
            Self::schedule_refresh(myself, st);
        }
    }

    fn serve_waiters(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
        let waiters = std::mem::take(&mut st.waiters);
        for w in waiters {
            match w {
                Waiter::Call(job, reply) => {
                    Self::dispatch_call(myself, st, job, reply);
                }
                Waiter::Ready(reply) => {
                    let _ = reply.send(Ok(()));
                }
            }
        }
    }

    /// Publishes the live connection on the lane: callers run calls on it without messaging this actor.
    fn open_lane(myself: &ActorRef<ServerMsg>, st: &ServerActorState) {
        let Some(live) = &st.live else { return };
        st.lane.open(LiveCall {
            peer: live.peer.clone(),
            fast: live.conn.fast_calls(),
            guards: CallGuards {
                dead: live.dead.clone(),
                stop: st.stop.clone(),
                progress: st.progress.clone(),
                generation: st.generation,
            },
            generation: st.generation,
            timeout: st.cfg.timeouts.tool,
            retry_delays: st.shared.tuning.call_retry_delays.clone().into(),
            input: InputContext {
                handlers: st.shared.handlers.clone(),
                allow_sampling: st.shared.settings.sampling != Some(false),
                sampling_auto_approve: st.shared.settings.sampling_auto_approve,
                allow_elicitation: st.shared.settings.elicitation != Some(false),
            },
            actor: myself.clone(),
        });
    }

    /// Runs a call that came through this actor (it waited for a connection, or raced the lane's opening); its
    /// task, or `None` when it was queued again (no connection).
    fn dispatch_call(
        _myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        mut job: CallJob,
        reply: oneshot::Sender<Result<ToolOutput>>,
    ) -> Option<JoinHandle<()>> {
        let Some((live, ticket)) = st.lane.enter() else {
            st.waiters.push(Waiter::Call(job, reply));
            return None;
        };
        // The parent is the caller's span, not whatever message (a connect report) dispatched a queued call.
        if job.span.is_none() {
            job.span = tracing::Span::current();
        }
        let lane = st.lane.clone();
        Some(tokio::spawn(async move {
            let result = lane.run(live, ticket, job).await;
            let _ = reply.send(result);
        }))
    }

    /// Arms the idle timer for a full idle period (at connect). It re-arms itself for the rest of the period when
    /// it fires early (activity since), so calls never touch it.
    fn arm_idle(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
        if st.live.is_none() {
            return;
        }
        let Some(idle) = Self::idle_timeout(st) else { return };
        Self::arm_idle_after(myself, st, idle);
    }

    fn arm_idle_after(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, after: Duration) {
        st.idle_generation += 1;
        let idle_generation = st.idle_generation;
        if let Some(t) = st.idle_timer.take() {
            t.abort();
        }
        st.idle_timer = Some(myself.send_after(after, move || ServerMsg::IdleTimer { idle_generation }));
    }

    /// The last answer from the server: a call's (on the lane) or a health check's.
    fn last_answer(st: &ServerActorState) -> Option<Instant> {
        st.last_response.max(st.lane.last_response())
    }

    fn arm_health(myself: &ActorRef<ServerMsg>, st: &ServerActorState) {
        if st.live.is_none() || !Self::keeps_alive(st) {
            return;
        }
        let generation = st.generation;
        myself.send_after(st.shared.settings.health_interval, move || ServerMsg::HealthTick {
            generation,
        });
    }

    fn run_health_check(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, revalidation: bool) {
        let Some(live) = &st.live else { return };
        if st.health_running {
            st.revalidation_pending |= revalidation;
            return;
        }
        st.health_running = true;
        let peer = live.peer.clone();
        let era = live.era;
        let cap = st.shared.tuning.health_timeout;
        let generation = st.generation;
        let me = myself.clone();
        let span = tracing::info_span!(
            "health_check",
            server = %st.cfg.name,
            ?era,
            revalidation,
            outcome = tracing::field::Empty
        );
        tokio::spawn(async move {
            let outcome = health_check(&peer, era, cap).instrument(span.clone()).await;
            span.record(
                "outcome",
                match &outcome {
                    HealthOutcome::Healthy => "ok",
                    HealthOutcome::Failed(_) => "failed",
                    HealthOutcome::TransportClosed => "connection",
                },
            );
            let _ = me.send_message(ServerMsg::HealthResult {
                generation,
                outcome,
                revalidation,
            });
        });
    }

    /// Takes the live connection down deliberately and closes it in a task; `Closed` follows.
    fn teardown(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, after: AfterClose, reason: Option<String>) {
        st.lane.close();
        let Some(live) = st.live.take() else { return };
        st.discovering = false;
        live.watch_stop.cancel();
        if let Some(t) = st.idle_timer.take() {
            t.abort();
        }
        st.pid = None;
        if let Some((m, MetadataSource::Live)) = st.metadata.take() {
            st.metadata = Some((m, MetadataSource::Cache));
        }
        let generation = st.generation;
        st.draining = Some((generation, after));
        Self::set_state(st, ServerState::Draining, reason);
        Self::publish_metadata(st);
        let grace = st.shared.tuning.close_grace;
        let me = myself.clone();
        tokio::spawn(async move {
            live.conn.close(grace).await;
            let _ = me.send_message(ServerMsg::Closed { generation });
        });
    }

    /// The transport died on its own (crash, network): count it, then respawn or fall back to `Cached`.
    fn on_transport_death(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, why: &str) {
        st.lane.close();
        let Some(live) = st.live.take() else { return };
        st.discovering = false;
        live.watch_stop.cancel();
        live.dead.cancel();
        if let Some(t) = st.idle_timer.take() {
            t.abort();
        }
        st.pid = None;
        if let Some((m, MetadataSource::Live)) = st.metadata.take() {
            st.metadata = Some((m, MetadataSource::Cache));
        }
        let stderr = live.conn.stderr.snapshot();
        let last_line = stderr.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_owned);
        let reason = match last_line {
            Some(l) => format!("{why}; stderr: {}", truncate(&l, 200)),
            None => why.to_owned(),
        };
        tracing::info!(server = %st.cfg.name, %reason, "connection lost");
        st.last_error = Some((ErrorCategory::Connection, reason.clone()));
        // Keep the HTTP session so the reconnect can re-adopt it; stdio children are killed.
        st.resume = live.conn.resume_token();
        tokio::spawn(async move {
            let _ = live.conn.abandon().await;
        });
        Self::publish_metadata(st);
        if st.breaker.record_failure(Instant::now()) {
            let r = format!("crash loop: {reason}");
            Self::set_state(st, ServerState::Failed { reason: r.clone() }, Some(r.clone()));
            let failures = u32::try_from(st.breaker.failures()).unwrap_or(u32::MAX);
            let server = st.cfg.name.clone();
            Self::fail_waiters(
                st,
                Error::CrashLoop {
                    server,
                    reason: r,
                    failures,
                },
            );
            return;
        }
        if Self::keeps_alive(st) || !st.waiters.is_empty() {
            Self::set_state(st, ServerState::Cached, Some(reason));
            Self::start_connect(myself, st);
        } else {
            Self::set_state(st, ServerState::Cached, Some(reason));
        }
    }

    fn handle_msg(myself: &ActorRef<ServerMsg>, msg: ServerMsg, st: &mut ServerActorState) {
        match msg {
            ServerMsg::Call { job, reply } => {
                if let Some(err) = Self::refusal(st) {
                    let _ = reply.send(Err(err));
                    return;
                }
                if st
                    .live
                    .as_ref()
                    .is_some_and(|l| l.dead.is_cancelled() || l.peer.is_transport_closed())
                {
                    // Died, and the watcher has not told us yet: queue the call behind a respawn.
                    st.waiters.push(Waiter::Call(job, reply));
                    Self::on_transport_death(myself, st, "the server exited");
                } else if st.live.is_some() {
                    Self::dispatch_call(myself, st, job, reply);
                } else {
                    st.waiters.push(Waiter::Call(job, reply));
                    Self::start_connect(myself, st);
                }
            }
            ServerMsg::Ensure { reply } => {
                if let Some(err) = Self::refusal(st) {
                    let _ = reply.send(Err(err));
                    return;
                }
                if st.live.is_some() && !st.discovering {
                    let _ = reply.send(Ok(()));
                } else if st.live.is_some() {
                    st.waiters.push(Waiter::Ready(reply));
                } else {
                    st.waiters.push(Waiter::Ready(reply));
                    Self::start_connect(myself, st);
                }
            }
            ServerMsg::Connect { force, reply } => {
                if st.stopping {
                    let _ = reply.send(Err(Error::ShuttingDown));
                    return;
                }
                match st.state {
                    ServerState::Disabled | ServerState::Untrusted | ServerState::ConfigError => {
                        let _ = reply.send(Err(Self::refusal(st).unwrap_or(Error::Disabled {
                            server: st.cfg.name.clone(),
                        })));
                        return;
                    }
                    _ => {}
                }
                st.breaker.reset();
                st.backoff.reset();
                st.backoff_until = None;
                if matches!(
                    st.state,
                    ServerState::Failed { .. } | ServerState::Backoff { .. } | ServerState::NeedsAuth
                ) {
                    Self::set_state(st, ServerState::Cached, None);
                }
                st.waiters.push(Waiter::Ready(reply));
                if st.live.is_some() {
                    if force {
                        Self::teardown(myself, st, AfterClose::Reconnect, Some("reconnecting".into()));
                    } else if !st.discovering {
                        Self::serve_waiters(myself, st);
                    }
                } else {
                    Self::start_connect(myself, st);
                }
            }
            ServerMsg::Warm => {
                // Only a server that has not started: connecting, ready and draining ones are left alone, and a
                // refused one (disabled, untrusted, config error, needs auth, breaker open, backoff not over) too.
                if st.state == ServerState::Cached && Self::refusal(st).is_none() {
                    Self::start_connect(myself, st);
                }
            }
            ServerMsg::Disable { reply } => {
                Self::go_quiet(
                    myself,
                    st,
                    Error::Disabled {
                        server: st.cfg.name.clone(),
                    },
                );
                Self::set_state(st, ServerState::Disabled, Some("disabled".into()));
                let _ = reply.send(());
            }
            ServerMsg::Enable { reply } => {
                if st.state == ServerState::Disabled {
                    st.stop = st.shared.root.child_token();
                    st.breaker.reset();
                    st.backoff.reset();
                    Self::set_state(st, initial_state(&st.cfg), None);
                    if st.state == ServerState::Cached
                        && matches!(st.cfg.lifecycle, Lifecycle::Eager | Lifecycle::KeepAlive)
                    {
                        Self::start_connect(myself, st);
                    }
                }
                let _ = reply.send(());
            }
            ServerMsg::Shutdown { reply } => {
                st.stopping = true;
                Self::go_quiet(myself, st, Error::ShuttingDown);
                if st.draining.is_some() {
                    st.shutdown_replies.push(reply);
                } else {
                    let _ = reply.send(());
                }
            }
            ServerMsg::Revalidate => {
                if st.live.is_some() {
                    Self::run_health_check(myself, st, true);
                }
            }
            ServerMsg::LivePeer { reply } => {
                let live = st
                    .live
                    .as_ref()
                    .filter(|l| !l.dead.is_cancelled() && !l.peer.is_transport_closed())
                    .map(|l| (l.peer.clone(), st.cfg.timeouts.request));
                if live.is_some() {
                    st.lane.touch();
                }
                let _ = reply.send(live);
            }
            ServerMsg::Connected { generation, result } => Self::on_connected(myself, st, generation, result),
            ServerMsg::Discovered { generation, result } => Self::on_discovered(myself, st, generation, result),
            ServerMsg::CallReport { generation, report } => {
                if report.transport_dead && generation == st.generation && st.live.is_some() {
                    Self::on_transport_death(myself, st, "the connection closed during a call");
                } else if report.needs_auth && generation == st.generation && st.live.is_some() {
                    // The token was refused and could not be renewed: refuse calls until a login reconnects us.
                    let detail = match st.shared.auth.last_error(&st.cfg.name) {
                        Some(Error::NeedsAuth { detail, .. }) => detail,
                        Some(other) => other.to_string(),
                        None => "the server refused the token".to_owned(),
                    };
                    st.last_error = Some((ErrorCategory::NeedsAuth, detail.clone()));
                    // Calls are refused until a login reconnects: none may take the lane meanwhile.
                    st.lane.close();
                    Self::set_state(st, ServerState::NeedsAuth, Some(format!("needs auth: {detail}")));
                }
            }
            ServerMsg::TransportClosed { generation } => {
                if generation == st.generation && st.live.is_some() {
                    Self::on_transport_death(myself, st, "the server exited");
                }
            }
            ServerMsg::IdleTimer { idle_generation } => {
                if idle_generation != st.idle_generation || st.live.is_none() {
                    return;
                }
                let Some(idle) = Self::idle_timeout(st) else { return };
                if !st.waiters.is_empty() {
                    Self::arm_idle_after(myself, st, idle);
                    return;
                }
                // Closing the lane and checking that nothing is in flight happen under one lock: a call either
                // entered before (and holds the connection open) or finds the lane closed and comes here.
                match st.lane.close_if_idle(idle) {
                    Ok(()) => Self::teardown(myself, st, AfterClose::Cached, Some("idle".into())),
                    Err(wait) => Self::arm_idle_after(myself, st, wait),
                }
            }
            ServerMsg::HealthTick { generation } => {
                if generation != st.generation || st.live.is_none() {
                    return;
                }
                Self::arm_health(myself, st);
                let interval = st.shared.settings.health_interval;
                let recently_answered =
                    Self::last_answer(st).is_some_and(|t| t.elapsed() < interval) && st.lane.in_flight() > 0;
                if recently_answered {
                    // Busy and answering: not wedged, no extra request needed.
                    st.health_failures = 0;
                    return;
                }
                Self::run_health_check(myself, st, false);
            }
            ServerMsg::HealthResult {
                generation,
                outcome,
                revalidation,
            } => {
                st.health_running = false;
                if generation != st.generation || st.live.is_none() {
                    return;
                }
                // A revalidation asked for while this check ran must still happen: a healthy answer may predate
                // the event that prompted it, so check again; a failure counts as the revalidation's own.
                let pending = std::mem::take(&mut st.revalidation_pending);
                if pending && matches!(outcome, HealthOutcome::Healthy) {
                    st.health_failures = 0;
                    st.last_response = Some(Instant::now());
                    Self::run_health_check(myself, st, true);
                    return;
                }
                let revalidation = revalidation || pending;
                match outcome {
                    HealthOutcome::Healthy => {
                        st.health_failures = 0;
                        st.last_response = Some(Instant::now());
                    }
                    HealthOutcome::TransportClosed => {
                        Self::on_transport_death(myself, st, "the connection closed (health check)")
                    }
                    HealthOutcome::Failed(why) => {
                        // A server that answered a call since the check started is busy, not wedged. A revalidation
                        // (asked for, or pending behind this check) must not be lost that way: it checks again, and
                        // a frozen server then fails with no answer inside the window.
                        let cap = st.shared.tuning.health_timeout;
                        if Self::last_answer(st).is_some_and(|t| t.elapsed() < cap) {
                            if revalidation {
                                Self::run_health_check(myself, st, true);
                            }
                            return;
                        }
                        st.health_failures += 1;
                        tracing::info!(server = %st.cfg.name, failures = st.health_failures, error = %why, "health check failed");
                        if revalidation || st.health_failures >= st.shared.tuning.health_failures {
                            st.health_failures = 0;
                            let reason = if revalidation {
                                format!("revalidation after a clock jump failed: {why}")
                            } else {
                                format!(
                                    "wedged: {} health checks failed ({why})",
                                    st.shared.tuning.health_failures
                                )
                            };
                            st.last_error = Some((ErrorCategory::Connection, reason.clone()));
                            let after = if Self::keeps_alive(st) {
                                AfterClose::Reconnect
                            } else {
                                AfterClose::Cached
                            };
                            Self::teardown(myself, st, after, Some(reason));
                        }
                    }
                }
            }
            ServerMsg::BackoffElapsed { generation } => {
                if generation != st.generation || !matches!(st.state, ServerState::Backoff { .. }) {
                    return;
                }
                st.backoff_until = None;
                let reason = st.reason.clone();
                if Self::keeps_alive(st) {
                    Self::start_connect(myself, st);
                } else {
                    Self::set_state(st, ServerState::Cached, reason);
                }
            }
            ServerMsg::ListChanged { generation, kind } => {
                if generation != st.generation || st.live.is_none() {
                    return;
                }
                if !st.refresh_dirty.contains(&kind) {
                    st.refresh_dirty.push(kind);
                }
                Self::schedule_refresh(myself, st);
            }
            ServerMsg::RefreshLists { generation } => {
                st.refresh_scheduled = false;
                // While the first discovery runs, the dirty kinds wait: `Discovered` schedules them again.
                if generation != st.generation || st.refresh_running || st.discovering {
                    return;
                }
                let Some(live) = &st.live else { return };
                let kinds = std::mem::take(&mut st.refresh_dirty);
                if kinds.is_empty() {
                    return;
                }
                st.refresh_running = true;
                let peer = live.peer.clone();
                let caps = live.conn.capabilities.clone();
                let concurrent = lists_concurrently(live.conn.transport);
                let timeout = st.cfg.timeouts.request;
                let me = myself.clone();
                tokio::spawn(async move {
                    let result = match tokio::time::timeout(timeout, discover(&peer, &caps, &kinds, concurrent)).await {
                        Ok(r) => r.map(Box::new),
                        Err(_) => Err(format!(
                            "refreshing lists took longer than {}",
                            crate::error::fmt_duration(timeout)
                        )),
                    };
                    let _ = me.send_message(ServerMsg::ListsRefreshed { generation, result });
                });
            }
            ServerMsg::ListsRefreshed { generation, result } => {
                st.refresh_running = false;
                if generation != st.generation || st.live.is_none() {
                    return;
                }
                match result {
                    Ok(d) => {
                        if let Some((meta, _)) = &mut st.metadata {
                            apply_discovery(Arc::make_mut(meta), *d);
                        }
                        Self::publish_metadata(st);
                        Self::write_cache(st);
                        Self::publish_status(st);
                    }
                    Err(e) => tracing::info!(server = %st.cfg.name, error = %e, "refresh after list_changed failed"),
                }
                if !st.refresh_dirty.is_empty() {
                    Self::schedule_refresh(myself, st);
                }
            }
            #[cfg(test)]
            ServerMsg::FailForTest => {}
            ServerMsg::Closed { generation } => {
                let Some((g, after)) = st.draining else { return };
                if g != generation {
                    return;
                }
                st.draining = None;
                for r in st.shutdown_replies.drain(..) {
                    let _ = r.send(());
                }
                if st.stopping || st.state == ServerState::Disabled {
                    return;
                }
                match after {
                    AfterClose::Reconnect => {
                        Self::set_state(st, ServerState::Cached, st.reason.clone());
                        Self::start_connect(myself, st);
                    }
                    AfterClose::Cached | AfterClose::Stay => {
                        let reason = st.reason.clone();
                        Self::set_state(st, ServerState::Cached, reason);
                        if !st.waiters.is_empty() {
                            Self::start_connect(myself, st);
                        }
                    }
                }
            }
        }
    }

    fn schedule_refresh(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
        if st.refresh_scheduled || st.refresh_running {
            return;
        }
        st.refresh_scheduled = true;
        let generation = st.generation;
        let debounce = st
            .shared
            .tuning
            .list_changed_debounce
            .max(crate::policy::Tuning::MIN_LIST_CHANGED_DEBOUNCE);
        myself.send_after(debounce, move || ServerMsg::RefreshLists { generation });
    }

    /// Stops everything in flight (disable, shutdown): cancels connect attempts and calls, closes the connection.
    fn go_quiet(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, err: Error) {
        st.stop.cancel();
        st.generation += 1;
        if let Some(c) = st.connect_cancel.take() {
            c.cancel();
        }
        Self::fail_waiters(st, err);
        if st.live.is_some() {
            // teardown uses the current generation for its Closed message.
            Self::teardown(myself, st, AfterClose::Stay, st.reason.clone());
        }
    }
}

impl Actor for ServerActor {
    type Msg = ServerMsg;
    /// Boxed: ractor moves the state by value through its start-up (results, the processing loop's future), and each
    /// move of the 2.4 KB state took stack space in the poll frames above every connect (stack pages stay resident).
    type State = Box<ServerActorState>;
    type Arguments = ServerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ServerMsg>,
        args: ServerArgs,
    ) -> std::result::Result<Box<ServerActorState>, ActorProcessingErr> {
        let ServerArgs {
            cfg,
            shared,
            initial,
            hash,
        } = args;
        let no_approval = matches!(
            cfg.approve_tools.as_ref().unwrap_or(&shared.settings.approve_tools),
            pimcp_config::ApproveTools::Off
        );
        let lane = Arc::new(Lane::new(&cfg.name, no_approval));
        shared.lanes.insert(cfg.name.clone(), lane.clone());
        let tuning = &shared.tuning;
        let state = initial_state(&cfg);
        let reason = match &cfg.availability {
            Availability::ConfigError { message } => Some(message.clone()),
            Availability::Untrusted { trust_command, .. } => Some(format!("untrusted; run `{trust_command}`")),
            Availability::Disabled => Some("disabled".into()),
            Availability::Available => None,
        };
        let st = Box::new(ServerActorState {
            hash: hash.unwrap_or_else(|| pimcp_config::identity_hash(&cfg)),
            backoff: ConnectBackoff::new(tuning.connect_backoff_min, tuning.connect_backoff_max),
            breaker: CrashLoopBreaker::new(
                tuning.breaker_failures,
                tuning.breaker_window,
                tuning.breaker_stable_after,
            ),
            stop: shared.root.child_token(),
            cfg,
            shared,
            state,
            reason,
            generation: 0,
            live: None,
            connect_cancel: None,
            waiters: Vec::new(),
            lane,
            progress: ProgressRoutes::default(),
            backoff_until: None,
            idle_generation: 0,
            idle_timer: None,
            health_failures: 0,
            health_running: false,
            revalidation_pending: false,
            last_response: None,
            ever_connected: false,
            metadata: initial,
            resume: None,
            refresh_dirty: Vec::new(),
            refresh_scheduled: false,
            refresh_running: false,
            discovering: false,
            draining: None,
            shutdown_replies: Vec::new(),
            stopping: false,
            last_error: None,
            pid: None,
        });
        let mut status = ServerStatus::new(&st.cfg.name, st.state.clone(), lifecycle_name(st.cfg.lifecycle));
        status.reason = st.reason.clone();
        status.description.clone_from(&st.cfg.description);
        st.shared.board.insert(status);
        Self::publish_status(&st);
        Ok(st)
    }

    async fn post_start(
        &self,
        myself: ActorRef<ServerMsg>,
        st: &mut Box<ServerActorState>,
    ) -> std::result::Result<(), ActorProcessingErr> {
        if st.state != ServerState::Cached {
            return Ok(());
        }
        let warm = st.shared.settings.warm_cache && st.metadata.is_none();
        if matches!(st.cfg.lifecycle, Lifecycle::Eager | Lifecycle::KeepAlive) || warm {
            Self::start_connect(&myself, st);
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        st: &mut Box<ServerActorState>,
    ) -> std::result::Result<(), ActorProcessingErr> {
        #[cfg(test)]
        if let ServerMsg::FailForTest = msg {
            return Err("failing on purpose (test)".into());
        }
        Self::handle_msg(&myself, msg, st);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ServerMsg>,
        st: &mut Box<ServerActorState>,
    ) -> std::result::Result<(), ActorProcessingErr> {
        st.stop.cancel();
        if let Some(c) = st.connect_cancel.take() {
            c.cancel();
        }
        if let Some(t) = st.idle_timer.take() {
            t.abort();
        }
        Self::fail_waiters(st, Error::ShuttingDown);
        st.lane.close();
        if let Some(live) = st.live.take() {
            // Stopped (shutdown past its graceful phase, runtime dropped, or a failed actor): no grace left.
            // Dropping the connection kills the server's process group at once.
            live.watch_stop.cancel();
            live.dead.cancel();
            drop(live);
        }
        Ok(())
    }
}

pub(crate) fn initial_state(cfg: &ServerConfig) -> ServerState {
    match &cfg.availability {
        Availability::Available => ServerState::Cached,
        Availability::Disabled => ServerState::Disabled,
        Availability::Untrusted { .. } => ServerState::Untrusted,
        Availability::ConfigError { .. } => ServerState::ConfigError,
    }
}

pub(crate) fn lifecycle_name(l: Lifecycle) -> &'static str {
    match l {
        Lifecycle::Lazy => "lazy",
        Lifecycle::Eager => "eager",
        Lifecycle::KeepAlive => "keep-alive",
        Lifecycle::LazyKeepAlive => "lazy-keep-alive",
    }
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::Stateless => "stateless",
    }
}

/// The `outcome` of a `connect` span: `ok` or an error category (`cancelled` for an attempt called off).
fn connect_outcome(result: &std::result::Result<Box<Established>, ConnectFailure>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(ConnectFailure::Connect(ConnectError::NeedsAuth { .. })) => "needs-auth",
        Err(ConnectFailure::Connect(ConnectError::Config { .. } | ConnectError::Secret { .. })) => "config",
        Err(ConnectFailure::Connect(ConnectError::StartupTimeout { .. })) => "timeout",
        Err(ConnectFailure::Connect(ConnectError::Cancelled { .. })) => "cancelled",
        Err(ConnectFailure::Auth(e)) => e.category().as_str(),
        Err(_) => "connection",
    }
}

fn parse_era(s: &str) -> Option<Era> {
    match s {
        "legacy" => Some(Era::Legacy),
        "stateless" => Some(Era::Stateless),
        _ => None,
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn strip_server_prefix(message: &str, server: &str) -> String {
    message
        .strip_prefix(&format!("server `{server}`: "))
        .unwrap_or(message)
        .to_owned()
}

/// The first line of a connect error without the `server \`x\`` preamble, for status reasons.
fn short_reason(message: &str, server: &str) -> String {
    let first = message.lines().next().unwrap_or(message);
    let first = first.strip_prefix(&format!("server `{server}` ")).unwrap_or(first);
    truncate(&strip_server_prefix(first, server), 300)
}

/// A fresh value from a connection's discovery: it replaces the tools; resources and prompts it did not list
/// (listing failed, tolerated) keep `old`'s lists. Only those lists are copied, never the tools.
fn discovered_metadata(
    old: Option<&ServerMetadata>,
    discovery: Discovery,
    conn: &Connection<RuntimeClient>,
) -> ServerMetadata {
    let mut meta = ServerMetadata::default();
    if let Some(old) = old {
        if discovery.resources.is_none() {
            meta.resources.clone_from(&old.resources);
        }
        if discovery.resource_templates.is_none() {
            meta.resource_templates.clone_from(&old.resource_templates);
        }
        if discovery.prompts.is_none() {
            meta.prompts.clone_from(&old.prompts);
        }
        if discovery.tools.is_none() {
            meta.tools.clone_from(&old.tools);
            meta.ttl_ms = old.ttl_ms;
        }
    }
    apply_discovery(&mut meta, discovery);
    meta.instructions = conn.instructions.clone();
    meta.protocol_version = Some(conn.protocol_version.clone());
    meta.era = Some(era_name(conn.era).to_owned());
    meta
}

fn apply_discovery(meta: &mut ServerMetadata, d: Discovery) {
    if let Some((tools, ttl)) = d.tools {
        meta.tools = tools.into_iter().map(crate::catalog::ToolInfo::from).collect();
        meta.ttl_ms = ttl;
    }
    if let Some(r) = d.resources {
        meta.resources = r.into();
    }
    if let Some(t) = d.resource_templates {
        meta.resource_templates = t.into();
    }
    if let Some(p) = d.prompts {
        meta.prompts = p.into();
    }
}

/// Lists tools (all pages; failure fails), and resources/prompts when advertised (failure tolerated). The three
/// lists are independent, so they are requested at once: a first call waits for the slowest list, not for the sum
/// of three round trips.
/// Over HTTP the lists go one after another: concurrent requests race a server's session expiry (one is re-sent
/// after the re-initialization, the others fail or get HTTP 500 while the server drops the session).
fn lists_concurrently(transport: TransportKind) -> bool {
    matches!(transport, TransportKind::Stdio | TransportKind::UnixSocket)
}

async fn discover(
    peer: &Peer<RoleClient>,
    caps: &rmcp::model::ServerCapabilities,
    kinds: &[ListKind],
    concurrent: bool,
) -> std::result::Result<Discovery, String> {
    // Each list's future (~5.5 KB: rmcp's paging request futures) lives in a box of its own, so that this future
    // and the tasks that await it (a connect, a discovery, a refresh) stay a few hundred bytes instead of ~34 KB:
    // a future that size is built on the spawning poll's stack frame before tokio moves it to the heap.
    let tools = boxed_in_place(async {
        if !kinds.contains(&ListKind::Tools) {
            return Ok::<_, String>(None);
        }
        let merged = repeat_once_after_reinit(|| peer.list_all_tools_with_cache_hint())
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        Ok(Some((merged.items, merged.ttl_ms)))
    });
    let resources = boxed_in_place(async {
        if !kinds.contains(&ListKind::Resources) || caps.resources.is_none() {
            return None;
        }
        repeat_once_after_reinit(|| peer.list_all_resources())
            .await
            .inspect_err(|e| tracing::info!(error = %e, "resources/list failed (tolerated)"))
            .ok()
    });
    let templates = boxed_in_place(async {
        if !kinds.contains(&ListKind::Resources) || caps.resources.is_none() {
            return None;
        }
        repeat_once_after_reinit(|| peer.list_all_resource_templates())
            .await
            .inspect_err(|e| tracing::info!(error = %e, "resources/templates/list failed (tolerated)"))
            .ok()
    });
    let prompts = boxed_in_place(async {
        if !kinds.contains(&ListKind::Prompts) || caps.prompts.is_none() {
            return None;
        }
        repeat_once_after_reinit(|| peer.list_all_prompts())
            .await
            .inspect_err(|e| tracing::info!(error = %e, "prompts/list failed (tolerated)"))
            .ok()
    });
    // A failed tools/list fails discovery at once; the other lists still in flight are dropped.
    let (tools, resources, resource_templates, prompts) = if concurrent {
        tokio::try_join!(
            tools,
            async { Ok(resources.await) },
            async { Ok(templates.await) },
            async { Ok(prompts.await) }
        )?
    } else {
        let tools = tools.await?;
        (tools, resources.await, templates.await, prompts.await)
    };
    Ok(Discovery {
        tools,
        resources,
        resource_templates,
        prompts,
    })
}

/// rmcp's Streamable HTTP client fails the requests still in flight when the server expires the session and the
/// client re-initializes (`-32603` with this message), and a request racing the expiry can fail to send (the server
/// answers it with HTTP 500 while it drops the session). A listing is safe to repeat on the new session; a tool
/// call is not, and is never repeated. A send refused for authorization is not repeated either (the OAuth path
/// counts those refusals).
fn lost_to_reinit(e: &ServiceError) -> bool {
    match e {
        ServiceError::McpError(d) => {
            d.code == rmcp::model::ErrorCode::INTERNAL_ERROR
                && d.message
                    .contains("session was re-initialized before the response arrived")
        }
        ServiceError::TransportSend(_) => !e.is_authorization_required(),
        _ => false,
    }
}

/// Runs a list request, once more if its session was re-initialized under it (see [`lost_to_reinit`]).
async fn repeat_once_after_reinit<T, F, Fut>(request: F) -> std::result::Result<T, ServiceError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, ServiceError>>,
{
    match request().await {
        Err(e) if lost_to_reinit(&e) => {
            tracing::debug!(error = %e, "a listing was lost to a session re-initialization; repeating it");
            request().await
        }
        other => other,
    }
}

/// [`connect_and_discover`] for any server; an HTTP server that may use OAuth first gets its token and renewal
/// hook from the AuthActor, and a 401 its hook could not cure becomes that server's `needs-auth` reason.
async fn connect_with_auth(
    auth: crate::auth::AuthHandle,
    mut spec: ConnectSpec,
    handler: RuntimeClient,
    request_timeout: Duration,
    grace: Duration,
    early: bool,
) -> std::result::Result<Box<Established>, ConnectFailure> {
    let server = spec.server.name.clone();
    let startup = spec.server.timeouts.startup;
    let prepared = tokio::select! {
        r = tokio::time::timeout(startup, auth.for_connect(&spec.server)) => match r {
            Ok(r) => r.map_err(ConnectFailure::Auth)?,
            Err(_) => {
                return Err(ConnectFailure::Auth(Error::Auth {
                    server,
                    message: format!("getting a token took longer than {}", crate::error::fmt_duration(startup)),
                }));
            }
        },
        _ = spec.cancel.cancelled() => return Err(ConnectFailure::Connect(ConnectError::Cancelled { server })),
    };
    // `connect_and_discover`'s future (~100 KB) is written into a box allocated first: awaited inline it is built
    // on this poll's stack frame before being moved into this future (a one-off, but resident stack pages stay).
    let Some(prepared) = prepared else {
        return boxed_in_place(connect_and_discover(spec, handler, request_timeout, grace, early)).await;
    };
    let refusals = prepared.server.refusals();
    spec.access_token = prepared.token;
    spec.token_source = Some(prepared.source);
    // With OAuth the discovery stays part of the connect: a refused tools/list is how some servers ask for a login.
    let connected = boxed_in_place(connect_and_discover(spec, handler, request_timeout, grace, false));
    match connected.await {
        Err(ConnectFailure::Connect(ConnectError::NeedsAuth { .. })) => {
            Err(ConnectFailure::Auth(prepared.server.needs_auth_error()))
        }
        Err(ConnectFailure::Discovery(_)) if prepared.server.refusals() > refusals => {
            // tools/list was refused (servers that let `initialize` through without a token).
            Err(ConnectFailure::Auth(prepared.server.needs_auth_error()))
        }
        other => other,
    }
}

/// Connects; then discovers, unless `early` (fresh cached metadata: the actor discovers in the background).
async fn connect_and_discover(
    spec: ConnectSpec,
    handler: RuntimeClient,
    request_timeout: Duration,
    grace: Duration,
    early: bool,
) -> std::result::Result<Box<Established>, ConnectFailure> {
    let server = spec.server.name.clone();
    let cancel = spec.cancel.clone();
    // Boxed in place for the same reason as in `connect_with_auth`: the transport's connect future is large.
    let conn = boxed_in_place(transport::connect(spec, handler))
        .await
        .map_err(ConnectFailure::Connect)?;
    if early {
        return Ok(Box::new(Established { conn, discovery: None }));
    }
    let peer = conn.client.peer().clone();
    let all = [ListKind::Tools, ListKind::Resources, ListKind::Prompts];
    let outcome = tokio::select! {
        r = tokio::time::timeout(request_timeout, discover(&peer, &conn.capabilities, &all, lists_concurrently(conn.transport))) => Some(r),
        _ = cancel.cancelled() => None,
    };
    match outcome {
        Some(Ok(Ok(discovery))) => Ok(Box::new(Established {
            conn,
            discovery: Some(discovery),
        })),
        Some(Ok(Err(e))) => {
            conn.close(grace).await;
            Err(ConnectFailure::Discovery(format!("server `{server}`: {e}")))
        }
        Some(Err(_)) => {
            conn.close(grace).await;
            Err(ConnectFailure::Discovery(format!(
                "server `{server}` did not finish discovery within {}",
                crate::error::fmt_duration(request_timeout)
            )))
        }
        None => {
            conn.close(grace).await;
            Err(ConnectFailure::Connect(ConnectError::Cancelled { server }))
        }
    }
}

/// Watches a live connection for transport death without blocking the actor.
fn spawn_watcher(
    me: ActorRef<ServerMsg>,
    generation: u64,
    peer: Peer<RoleClient>,
    dead: CancellationToken,
    stop: CancellationToken,
    interval: Duration,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {
                    if peer.is_transport_closed() {
                        dead.cancel();
                        let _ = me.send_message(ServerMsg::TransportClosed { generation });
                        return;
                    }
                }
            }
        }
    });
}

/// 2026-07-28 servers send `list_changed` only on a `subscriptions/listen` stream: open one for the advertised
/// lists and forward its notifications like the ClientHandler does for initialize-era servers.
fn spawn_listener(
    me: ActorRef<ServerMsg>,
    generation: u64,
    peer: Peer<RoleClient>,
    stop: CancellationToken,
    caps: &rmcp::model::ServerCapabilities,
) {
    let mut builder = rmcp::model::SubscriptionFilter::builder();
    let mut any = false;
    if caps.tools.as_ref().is_some_and(|t| t.list_changed == Some(true)) {
        builder = builder.tools_list_changed();
        any = true;
    }
    if caps.resources.as_ref().is_some_and(|r| r.list_changed == Some(true)) {
        builder = builder.resources_list_changed();
        any = true;
    }
    if caps.prompts.as_ref().is_some_and(|p| p.list_changed == Some(true)) {
        builder = builder.prompts_list_changed();
        any = true;
    }
    if !any {
        return;
    }
    let filter = builder.build();
    tokio::spawn(async move {
        let mut sub = tokio::select! {
            r = peer.listen(filter) => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(error = %e, "subscriptions/listen refused; no list_changed for this connection");
                    return;
                }
            },
            _ = stop.cancelled() => return,
        };
        loop {
            let next = tokio::select! {
                n = sub.next() => n,
                _ = stop.cancelled() => {
                    let _ = sub.cancel().await;
                    return;
                }
            };
            let kind = match next {
                Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))) => ListKind::Tools,
                Ok(Some(rmcp::model::ServerNotification::ResourceListChangedNotification(_))) => ListKind::Resources,
                Ok(Some(rmcp::model::ServerNotification::PromptListChangedNotification(_))) => ListKind::Prompts,
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return,
            };
            if me.send_message(ServerMsg::ListChanged { generation, kind }).is_err() {
                return;
            }
        }
    });
}

/// `ping` for initialize-era servers; `tools/list` (honouring its ttl) for 2026-07-28 servers. Capped.
async fn health_check(peer: &Peer<RoleClient>, era: Era, cap: Duration) -> HealthOutcome {
    let result = match era {
        Era::Legacy => {
            let sent = peer
                .send_request_with_option(
                    ClientRequest::PingRequest(PingRequest::default()),
                    PeerRequestOptions::with_timeout(cap),
                )
                .await;
            match sent {
                Ok(handle) => handle.await_response().await.map(|_| ()),
                Err(e) => Err(e),
            }
        }
        Era::Stateless => match tokio::time::timeout(cap, peer.list_tools(None)).await {
            Ok(r) => r.map(|_| ()),
            Err(_) => Err(ServiceError::Timeout { timeout: cap }),
        },
    };
    match result {
        Ok(()) => HealthOutcome::Healthy,
        // An error answer still proves the server is alive and reading.
        Err(ServiceError::McpError(_)) => HealthOutcome::Healthy,
        Err(ServiceError::TransportClosed) => HealthOutcome::TransportClosed,
        Err(e) => HealthOutcome::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use rmcp::model::ErrorData;

    use super::*;

    fn reinit() -> ServiceError {
        ServiceError::McpError(ErrorData::internal_error(
            "streamable HTTP session was re-initialized before the response arrived",
            None,
        ))
    }

    /// Answers with `errors` in turn, then `Ok(n)` where n counts the requests.
    async fn run(errors: Vec<ServiceError>) -> (std::result::Result<usize, ServiceError>, usize) {
        let n = AtomicUsize::new(0);
        let errors = std::sync::Mutex::new(errors.into_iter());
        let out = repeat_once_after_reinit(|| {
            let i = n.fetch_add(1, Ordering::SeqCst) + 1;
            let next = errors.lock().unwrap().next();
            async move { next.map_or(Ok(i), Err) }
        })
        .await;
        (out, n.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_listing_lost_to_a_session_reinitialization_is_repeated_once() {
        let (out, n) = run(vec![reinit()]).await;
        assert_eq!((out.unwrap(), n), (2, 2));
        let (out, n) = run(vec![reinit(), reinit()]).await;
        assert!(lost_to_reinit(&out.unwrap_err()));
        assert_eq!(n, 2, "repeated once, not more");
        let (out, n) = run(vec![ServiceError::McpError(ErrorData::internal_error("boom", None))]).await;
        assert!(!lost_to_reinit(&out.unwrap_err()));
        assert_eq!(n, 1, "other errors are not repeated");
        let (out, n) = run(vec![]).await;
        assert_eq!((out.unwrap(), n), (1, 1));
        let send_failed = || {
            ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
                "test",
                std::any::TypeId::of::<()>(),
                Box::new(std::io::Error::other("HTTP 500")),
            ))
        };
        let (out, n) = run(vec![send_failed()]).await;
        assert_eq!((out.unwrap(), n), (2, 2), "a failed send of a listing is repeated once");
    }
}
