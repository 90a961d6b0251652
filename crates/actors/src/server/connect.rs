//! Connecting a ServerActor: explicit and warm connects, one connect attempt (OAuth token, transport, discovery)
//! in a task, its `Connected` report (going live, or the failure's state: needs-auth, config error, crash loop,
//! backoff) and the end of the backoff.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ractor::ActorRef;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::MetadataSource;
use crate::client::RuntimeClient;
use crate::error::{Error, ErrorCategory, Result};
use crate::handles::ServerHandle;
use crate::msg::ListKind;
use crate::status::ServerState;
use crate::transport::{self, ConnectError, ConnectSpec, Connection, Era};

use super::discovery::{Discovery, discover, discovered_metadata, lists_concurrently, spawn_listener};
use super::health::spawn_watcher;
use super::{AfterClose, Live, ServerActor, ServerActorState, ServerMsg, Waiter, truncate};

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

impl ServerActor {
    /// [`ServerRequest::Connect`](crate::msg::ServerRequest::Connect): closes the crash-loop breaker and connects; `force` tears down a live connection first.
    pub(super) fn on_connect_request(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        force: bool,
        reply: oneshot::Sender<Result<()>>,
    ) {
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

    /// [`ServerRequest::Warm`](crate::msg::ServerRequest::Warm): starts connecting if the server has not started and nothing refuses it.
    pub(super) fn on_warm(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
        // Only a server that has not started: connecting, ready and draining ones are left alone, and a
        // refused one (disabled, untrusted, config error, needs auth, breaker open, backoff not over) too.
        if st.state == ServerState::Cached && Self::refusal(st).is_none() {
            Self::start_connect(myself, st);
        }
    }

    pub(super) fn start_connect(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
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
            actor: ServerHandle::new(myself.get_derived()),
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
            max_message_bytes: st.shared.settings.max_message_bytes,
        };
        let request_timeout = st.cfg.timeouts.request;
        let grace = st.shared.tuning.close_grace;
        let me = myself.clone();
        let auth = st.shared.auth.clone();
        // Fresh cached metadata already names the tools: calls need not wait for this connection's discovery.
        let early = matches!(st.metadata, Some((_, MetadataSource::Cache)));
        let span = tracing::info_span!("connect", server = %st.cfg.name, generation, outcome = tracing::field::Empty);
        tokio::spawn(
            async move {
                let result = connect_with_auth(auth, spec, handler, request_timeout, grace, early).await;
                tracing::Span::current().record("outcome", connect_outcome(&result));
                let _ = me.send_message(ServerMsg::Connected { generation, result });
            }
            .instrument(span),
        );
    }

    pub(super) fn on_connected(
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
                    conn.ended(),
                    dead.clone(),
                    watch_stop.clone(),
                );
                if conn.era == Era::Stateless {
                    spawn_listener(
                        super::discovery::Listener {
                            me: myself.clone(),
                            generation,
                            peer: peer.clone(),
                            stop: watch_stop.clone(),
                            resources: st.shared.resource_interest.watch(&st.cfg.name),
                            board: st.shared.board.clone(),
                            server: st.cfg.name.clone(),
                        },
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
                    Error::Connection {
                        server,
                        message,
                        source: None,
                    }
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
                let cause: Option<crate::error::Cause> = match failure {
                    ConnectFailure::Connect(e) => Some(crate::error::Cause::new(e)),
                    ConnectFailure::Auth(e) => Some(crate::error::Cause::new(e)),
                    ConnectFailure::Discovery(_) => None,
                };
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
                        source: cause,
                    },
                );
            }
        }
        Self::publish_metadata(st);
    }

    /// [`ServerMsg::BackoffElapsed`]: the backoff is over: connect again, or fall back to `Cached`.
    pub(super) fn on_backoff_elapsed(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, generation: u64) {
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
                    source: None,
                }));
            }
        },
        _ = spec.cancel.cancelled() => return Err(ConnectFailure::Connect(ConnectError::Cancelled { server })),
    };
    // Boxed: `connect_and_discover`'s future is large, and it would otherwise be part of every connect task's.
    let Some(prepared) = prepared else {
        return Box::pin(connect_and_discover(spec, handler, request_timeout, grace, early)).await;
    };
    let refusals = prepared.server.refusals();
    spec.access_token = prepared.token;
    spec.token_source = Some(prepared.source);
    // With OAuth the discovery stays part of the connect: a refused tools/list is how some servers ask for a login.
    let connected = Box::pin(connect_and_discover(spec, handler, request_timeout, grace, false));
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
    let conn = transport::connect(spec, handler)
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
