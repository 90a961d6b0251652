//! Calls and waiters of the ServerActor: running a call now or queueing it behind a connect, `Ensure`, the live
//! peer for one-off requests, opening the lane, serving or failing the queued waiters, and the lane's reports.

use std::time::Duration;

use ractor::ActorRef;
use ractor::concurrency::JoinHandle;
use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::oneshot;

use crate::call::{CallGuards, InputContext};
use crate::error::{Error, ErrorCategory, Result};
use crate::job::{CallJob, CallReport, ToolOutput};
use crate::lane::LiveCall;
use crate::status::ServerState;

use super::{ServerActor, ServerActorState, ServerMsg, Waiter};

impl ServerActor {
    /// [`ServerRequest::Call`](crate::msg::ServerRequest::Call): runs the call now, or queues it behind a connect (or a respawn of a dead transport).
    pub(super) fn on_call(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        job: CallJob,
        reply: oneshot::Sender<Result<ToolOutput>>,
    ) {
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

    /// [`ServerRequest::Ensure`](crate::msg::ServerRequest::Ensure): replies once connected with fresh metadata, connecting first if needed.
    pub(super) fn on_ensure(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        reply: oneshot::Sender<Result<()>>,
    ) {
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

    /// [`ServerRequest::LivePeer`](crate::msg::ServerRequest::LivePeer): the live peer and request timeout, if connected; restarts the idle timer.
    pub(super) fn on_live_peer(st: &ServerActorState, reply: oneshot::Sender<Option<(Peer<RoleClient>, Duration)>>) {
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

    /// [`ServerRequest::CallReport`](crate::msg::ServerRequest::CallReport): a call on the lane hit a dead transport or a refused token.
    pub(super) fn on_call_report(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        generation: u64,
        report: CallReport,
    ) {
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

    pub(super) fn fail_waiters(st: &mut ServerActorState, err: Error) {
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
    pub(super) fn serve_calls(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) -> Vec<JoinHandle<()>> {
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

    pub(super) fn serve_waiters(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
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
    pub(super) fn open_lane(myself: &ActorRef<ServerMsg>, st: &ServerActorState) {
        let Some(live) = &st.live else { return };
        st.lane.open(LiveCall {
            peer: live.peer.clone(),
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
            actor: crate::handles::ServerHandle::new(myself.get_derived()),
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
}
