//! ServerActor: one per configured server; owns its connection and drives its lifecycle as message-driven
//! state transitions. Slow work (connect + discovery, calls, health checks, list refreshes, close) runs in spawned
//! tasks that report back as messages; timers (idle, health, backoff, debounce) are messages to self guarded by a
//! generation number, so a stale timer is ignored instead of cancelled racily. Nothing outside changes its state.

mod calls;
mod connect;
mod discovery;
mod health;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use pimcp_config::{Availability, Lifecycle, ServerConfig};
use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::cache::CacheEntry;
use crate::catalog::{MetadataSource, ServerMetadata};
use crate::client::RuntimeClient;
use crate::context::Shared;
use crate::error::{Error, ErrorCategory, Result};
use crate::job::{CallJob, ToolOutput};
use crate::lane::Lane;
use crate::msg::{ListKind, RouterMsg, ServerRequest};
use crate::policy::{ConnectBackoff, CrashLoopBreaker};
use crate::progress::ProgressRoutes;
use crate::status::{ServerState, ServerStatus};
use crate::transport::{Connection, Era, SessionResume};

use connect::{ConnectFailure, Established};
use discovery::Discovery;
use health::HealthOutcome;

/// Messages of a [`ServerActor`]: the requests others send through a [`ServerHandle`](crate::handles::ServerHandle), and the reports of its own
/// tasks and timers, each tagged with the generation it belongs to (only the actor and its tasks can send these).
pub(crate) enum ServerMsg {
    Request(ServerRequest),
    Connected {
        generation: u64,
        result: std::result::Result<Box<Established>, ConnectFailure>,
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
}

impl From<ServerRequest> for ServerMsg {
    fn from(request: ServerRequest) -> ServerMsg {
        ServerMsg::Request(request)
    }
}

/// Gives a request that could not be delivered back to its sender (what a [`ServerHandle`](crate::handles::ServerHandle) needs).
impl TryFrom<ServerMsg> for ServerRequest {
    type Error = ();

    fn try_from(msg: ServerMsg) -> std::result::Result<ServerRequest, ()> {
        match msg {
            ServerMsg::Request(request) => Ok(request),
            _ => Err(()),
        }
    }
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
            let _ = router.send(RouterMsg::Metadata {
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

    fn handle_msg(myself: &ActorRef<ServerMsg>, msg: ServerMsg, st: &mut ServerActorState) {
        match msg {
            ServerMsg::Request(ServerRequest::Call { job, reply }) => Self::on_call(myself, st, job, reply),
            ServerMsg::Request(ServerRequest::Ensure { reply }) => Self::on_ensure(myself, st, reply),
            ServerMsg::Request(ServerRequest::Connect { force, reply }) => {
                Self::on_connect_request(myself, st, force, reply)
            }
            ServerMsg::Request(ServerRequest::Warm) => Self::on_warm(myself, st),
            ServerMsg::Request(ServerRequest::Disable { reply }) => Self::on_disable(myself, st, reply),
            ServerMsg::Request(ServerRequest::Enable { reply }) => Self::on_enable(myself, st, reply),
            ServerMsg::Request(ServerRequest::Shutdown { reply }) => Self::on_shutdown(myself, st, reply),
            ServerMsg::Request(ServerRequest::Revalidate) => Self::on_revalidate(myself, st),
            ServerMsg::Request(ServerRequest::LivePeer { reply }) => Self::on_live_peer(st, reply),
            ServerMsg::Connected { generation, result } => Self::on_connected(myself, st, generation, result),
            ServerMsg::Discovered { generation, result } => Self::on_discovered(myself, st, generation, result),
            ServerMsg::Request(ServerRequest::CallReport { generation, report }) => {
                Self::on_call_report(myself, st, generation, report)
            }
            ServerMsg::TransportClosed { generation } => Self::on_transport_closed(myself, st, generation),
            ServerMsg::IdleTimer { idle_generation } => Self::on_idle_timer(myself, st, idle_generation),
            ServerMsg::HealthTick { generation } => Self::on_health_tick(myself, st, generation),
            ServerMsg::HealthResult {
                generation,
                outcome,
                revalidation,
            } => Self::on_health_result(myself, st, generation, outcome, revalidation),
            ServerMsg::BackoffElapsed { generation } => Self::on_backoff_elapsed(myself, st, generation),
            ServerMsg::Request(ServerRequest::ListChanged { generation, kind }) => {
                Self::on_list_changed(myself, st, generation, kind)
            }
            ServerMsg::RefreshLists { generation } => Self::on_refresh_lists(myself, st, generation),
            ServerMsg::ListsRefreshed { generation, result } => {
                Self::on_lists_refreshed(myself, st, generation, result)
            }
            #[cfg(test)]
            ServerMsg::Request(ServerRequest::FailForTest) => {}
            ServerMsg::Closed { generation } => Self::on_closed(myself, st, generation),
        }
    }

    /// [`ServerRequest::Disable`]: stops everything in flight and enters `Disabled`.
    fn on_disable(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, reply: oneshot::Sender<()>) {
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

    /// [`ServerRequest::Enable`]: leaves `Disabled` for the configured initial state (connecting if eager or keep-alive).
    fn on_enable(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, reply: oneshot::Sender<()>) {
        if st.state == ServerState::Disabled {
            st.stop = st.shared.root.child_token();
            st.breaker.reset();
            st.backoff.reset();
            Self::set_state(st, initial_state(&st.cfg), None);
            if st.state == ServerState::Cached && matches!(st.cfg.lifecycle, Lifecycle::Eager | Lifecycle::KeepAlive) {
                Self::start_connect(myself, st);
            }
        }
        let _ = reply.send(());
    }

    /// [`ServerRequest::Shutdown`]: stops accepting work; replies once the connection is closed.
    fn on_shutdown(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, reply: oneshot::Sender<()>) {
        st.stopping = true;
        Self::go_quiet(myself, st, Error::ShuttingDown);
        if st.draining.is_some() {
            st.shutdown_replies.push(reply);
        } else {
            let _ = reply.send(());
        }
    }

    /// [`ServerMsg::Closed`]: a deliberate close finished: does what the teardown asked for (`AfterClose`).
    fn on_closed(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, generation: u64) {
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
        if let ServerMsg::Request(ServerRequest::FailForTest) = msg {
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

fn initial_state(cfg: &ServerConfig) -> ServerState {
    match &cfg.availability {
        Availability::Available => ServerState::Cached,
        Availability::Disabled => ServerState::Disabled,
        Availability::Untrusted { .. } => ServerState::Untrusted,
        Availability::ConfigError { .. } => ServerState::ConfigError,
    }
}

fn lifecycle_name(l: Lifecycle) -> &'static str {
    match l {
        Lifecycle::Lazy => "lazy",
        Lifecycle::Eager => "eager",
        Lifecycle::KeepAlive => "keep-alive",
        Lifecycle::LazyKeepAlive => "lazy-keep-alive",
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
