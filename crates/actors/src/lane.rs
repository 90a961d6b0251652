//! The call lane of one server: what a caller needs to run a tool call on the server's live connection without a
//! message to any actor. The ServerActor opens it when a connection becomes ready and closes it (under the same
//! lock a caller takes to enter) before it tears the connection down, so the idle close can never race a call.
//! In-flight accounting and the last activity are atomics the actor reads when its idle timer fires.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::service::Peer;
use tracing::Instrument;

use crate::call::{CallGuards, InputContext, run_call};
use crate::error::Result;
use crate::handles::ServerHandle;
use crate::job::{CallJob, ToolOutput};
use crate::msg::ServerRequest;

/// Everything a call on the current connection needs; cloned per call (reference counts only).
#[derive(Clone)]
pub(crate) struct LiveCall {
    pub peer: Peer<RoleClient>,
    pub guards: CallGuards,
    pub generation: u64,
    pub timeout: Duration,
    pub retry_delays: Arc<[Duration]>,
    pub input: InputContext,
    pub actor: ServerHandle,
}

/// One per ServerActor; shared with [`crate::RuntimeHandle`] through `Shared::lanes`.
pub(crate) struct Lane {
    server: String,
    /// `Some` while the server is `ready` with a live connection.
    slot: Mutex<Option<LiveCall>>,
    in_flight: AtomicUsize,
    /// Milliseconds since `epoch` of the last call start or end (or other use of the connection).
    last_activity_ms: AtomicU64,
    /// Milliseconds since `epoch` + 1 of the last answer from the server (0: none yet).
    last_response_ms: AtomicU64,
    epoch: Instant,
    /// `approveTools` is off for this server: calls need no approval and may take the direct path.
    pub no_approval: bool,
}

impl Lane {
    pub(crate) fn new(server: &str, no_approval: bool) -> Lane {
        Lane {
            server: server.to_owned(),
            slot: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            last_activity_ms: AtomicU64::new(0),
            last_response_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            no_approval,
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<LiveCall>> {
        match self.slot.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    pub(crate) fn open(&self, live: LiveCall) {
        *self.lock() = Some(live);
        self.touch();
    }

    pub(crate) fn close(&self) {
        *self.lock() = None;
    }

    /// Marks the connection as used now (restarts the idle period).
    pub(crate) fn touch(&self) {
        self.last_activity_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Time since the last activity.
    pub(crate) fn idle_for(&self) -> Duration {
        Duration::from_millis(
            self.now_ms()
                .saturating_sub(self.last_activity_ms.load(Ordering::Relaxed)),
        )
    }

    /// When the server last answered a call, if ever on this lane.
    pub(crate) fn last_response(&self) -> Option<Instant> {
        match self.last_response_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => self.epoch.checked_add(Duration::from_millis(ms - 1)),
        }
    }

    pub(crate) fn note_response(&self) {
        self.last_response_ms.store(self.now_ms() + 1, Ordering::Relaxed);
    }

    /// Closes the lane if it has been idle for `idle` with nothing in flight. Otherwise returns how long to wait
    /// before asking again.
    pub(crate) fn close_if_idle(&self, idle: Duration) -> std::result::Result<(), Duration> {
        let mut slot = self.lock();
        if self.in_flight() > 0 {
            return Err(idle);
        }
        let quiet = self.idle_for();
        if quiet < idle {
            return Err(idle - quiet);
        }
        *slot = None;
        Ok(())
    }

    /// Enters the lane: the live connection and an in-flight ticket, or `None` when not ready.
    pub(crate) fn enter(self: &Arc<Self>) -> Option<(LiveCall, Ticket)> {
        let slot = self.lock();
        let live = slot.as_ref()?;
        if live.guards.dead.is_cancelled() || live.peer.is_transport_closed() {
            // Died, and the actor may not know yet: its mailbox path queues the call behind a respawn.
            return None;
        }
        let live = live.clone();
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        drop(slot);
        self.touch();
        Some((live, Ticket { lane: Arc::clone(self) }))
    }

    /// Runs one call on `live`, holding `ticket` until it ends; reports what the actor must act on (a dead
    /// transport, a refused token). Metadata-only `tool_call` span, parented to the caller's span.
    pub(crate) async fn run(&self, live: LiveCall, ticket: Ticket, job: CallJob) -> Result<ToolOutput> {
        let parent = if job.span.is_none() {
            tracing::Span::current()
        } else {
            job.span.clone()
        };
        let span = tracing::info_span!(
            parent: &parent,
            "tool_call",
            server = %self.server,
            tool = %job.tool.original,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let started = Instant::now();
        let LiveCall {
            peer,
            guards,
            generation,
            timeout,
            retry_delays,
            input,
            actor,
        } = live;
        let (result, report) = run_call(peer, job, timeout, &retry_delays, guards, input)
            .instrument(span.clone())
            .await;
        span.record("outcome", result.as_ref().err().map_or("ok", |e| e.category().as_str()));
        span.record(
            "duration_ms",
            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        );
        if report.responded {
            self.note_response();
        }
        drop(ticket);
        if report.transport_dead || report.needs_auth {
            let _ = actor.send(ServerRequest::CallReport { generation, report });
        }
        result
    }
}

/// One call in flight; dropping it ends the call's accounting (also when the caller abandons the future).
pub(crate) struct Ticket {
    lane: Arc<Lane>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.lane.touch();
        self.lane.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
