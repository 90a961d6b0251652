//! Liveness of a ServerActor's connection: the idle close, periodic health checks (`ping`, or `tools/list` for
//! 2026-07-28 servers), revalidation after a clock jump, and watching for (and handling) transport death.

use std::time::{Duration, Instant};

use ractor::ActorRef;
use rmcp::RoleClient;
use rmcp::model::{ClientRequest, PingRequest};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::MetadataSource;
use crate::error::{Error, ErrorCategory};
use crate::status::ServerState;
use crate::transport::Era;

use super::{AfterClose, ServerActor, ServerActorState, ServerMsg, truncate};

#[derive(Debug, Clone)]
pub(crate) enum HealthOutcome {
    Healthy,
    Failed(String),
    TransportClosed,
}

impl ServerActor {
    /// [`ServerRequest::Revalidate`](crate::msg::ServerRequest::Revalidate): the wall clock jumped: checks a live connection now.
    pub(super) fn on_revalidate(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
        if st.live.is_some() {
            Self::run_health_check(myself, st, true);
        }
    }

    /// [`ServerMsg::TransportClosed`]: the watcher saw the transport close.
    pub(super) fn on_transport_closed(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, generation: u64) {
        if generation == st.generation && st.live.is_some() {
            Self::on_transport_death(myself, st, "the server exited");
        }
    }

    /// [`ServerMsg::IdleTimer`]: closes an idle connection, or re-arms for the rest of the idle period.
    pub(super) fn on_idle_timer(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, idle_generation: u64) {
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

    /// [`ServerMsg::HealthTick`]: time for a health check (skipped while calls are being answered).
    pub(super) fn on_health_tick(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, generation: u64) {
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

    /// [`ServerMsg::HealthResult`]: healthy, a dead transport, or a failure (wedged after enough of them).
    pub(super) fn on_health_result(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        generation: u64,
        outcome: HealthOutcome,
        revalidation: bool,
    ) {
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

    /// Arms the idle timer for a full idle period (at connect). It re-arms itself for the rest of the period when
    /// it fires early (activity since), so calls never touch it.
    pub(super) fn arm_idle(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
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

    pub(super) fn arm_health(myself: &ActorRef<ServerMsg>, st: &ServerActorState) {
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

    /// The transport died on its own (crash, network): count it, then respawn or fall back to `Cached`.
    pub(super) fn on_transport_death(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, why: &str) {
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
}

/// Reports the death of a live connection (`ended`: rmcp's service loop has ended, see `transport::ended`) without
/// blocking the actor: calls in flight fail at once through `dead`, and the actor tears the connection down.
pub(super) fn spawn_watcher(
    me: ActorRef<ServerMsg>,
    generation: u64,
    ended: CancellationToken,
    dead: CancellationToken,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        tokio::select! {
            biased;
            _ = stop.cancelled() => {}
            _ = ended.cancelled() => {
                dead.cancel();
                let _ = me.send_message(ServerMsg::TransportClosed { generation });
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
