//! The host bridge of `pimcp-run`: upstream servers' sampling, elicitation and roots requests (and approval prompts)
//! are forwarded to the MCP host that drives `pimcp-run`, when that host declared the capability. The bridge
//! implements the runtime's handler traits, so it is installed in `RuntimeOptions::handlers` before the runtime
//! starts and learns its host peers later, as hosts initialize. Without a capable host, sampling fails with an
//! `input_required` reason, elicitation is declined and roots are empty; each refusal is counted per server so the
//! façade can report the call as `input-required` rather than a bare tool error.
//!
//! Several host sessions can share one runtime (`pimcp-run serve --http`), so a forwarded request goes to the
//! session that made the call: [`ProxyServer`](crate::ProxyServer) runs each tool call inside [`with_caller`], the
//! façade registers the call with [`HostBridge::begin_call`], and a server's request is routed to the most recent
//! session with a call in flight on that server (an approval to the oldest unclaimed call of that tool). Only when
//! no call is in flight on the server (roots asked at connect time, a library call) does the most recent capable
//! host answer. "Allow for this session" is remembered per host session, never for the whole runtime.
#![allow(deprecated)] // sampling / roots are SEP-2577-deprecated but still on the wire

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pimcp_actors::{
    ApprovalDecision, ApprovalHandler, ApprovalKind, ApprovalRequest, ElicitationHandler, Handlers, RootsProvider,
    SamplingHandler,
};
use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, InitializeRequestParams, Root,
};
use rmcp::service::Peer;

/// How long a forwarded `sampling/createMessage` may take (an LLM completion, possibly with a human in the loop).
pub const SAMPLING_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a forwarded `elicitation/create` (a human answering a form) may take.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a forwarded `roots/list` may take.
pub const ROOTS_TIMEOUT: Duration = Duration::from_secs(30);
/// Hosts remembered at once (older closed sessions are pruned first).
const MAX_HOSTS: usize = 64;

/// Forwards server→client requests to the host(s) of `pimcp-run`. Cheap to clone.
#[derive(Clone, Default)]
pub struct HostBridge {
    inner: Arc<BridgeInner>,
}

#[derive(Default)]
struct BridgeInner {
    /// Initialized host sessions, most recent last.
    hosts: Mutex<Vec<Peer<RoleServer>>>,
    /// Per upstream server: requests refused because no host could answer them.
    refusals: Mutex<HashMap<String, u64>>,
    /// Tool calls in flight with the host session that made each, oldest first.
    calls: Mutex<Vec<InFlight>>,
    next_call: AtomicU64,
    /// "Allow for this session" decisions, per host session.
    allowed: Mutex<Vec<SessionApprovals>>,
}

tokio::task_local! {
    /// The host session whose request is being served on this task.
    static CALLER: Peer<RoleServer>;
}

/// Runs `f` (one host request) with `peer` as the session that made it, so calls it makes are routed back to it.
/// A plain function returning the scope future: an `async fn` wrapper would hold `f` twice (its argument and the
/// scope it is moved into), doubling the size of every call's future.
pub(crate) fn with_caller<F: Future>(
    peer: Peer<RoleServer>,
    f: F,
) -> tokio::task::futures::TaskLocalFuture<Peer<RoleServer>, F> {
    CALLER.scope(peer, f)
}

/// The host session whose request this task serves, if any: work that runs on other tasks for that request (an
/// `mcpScript`'s tool calls) enters [`with_caller`] with it so that it is routed back to the same session.
pub(crate) fn current_caller() -> Option<Peer<RoleServer>> {
    CALLER.try_with(Peer::clone).ok()
}

/// The identity of a host session: its peer info is set once at initialize and shared by every clone of its peer.
type SessionInfo = Arc<InitializeRequestParams>;

fn same_session(a: &Peer<RoleServer>, b: &Peer<RoleServer>) -> bool {
    match (a.peer_info(), b.peer_info()) {
        (Some(a), Some(b)) => Arc::ptr_eq(&a, &b),
        _ => false,
    }
}

/// One tool call in flight and the session that made it.
struct InFlight {
    id: u64,
    server: String,
    /// The exposed tool name (what [`ApprovalRequest::tool`] carries).
    tool: String,
    caller: Peer<RoleServer>,
    /// An approval request was already matched to this call.
    approval_claimed: bool,
}

/// The `(server, upstream tool)` pairs one host session allowed for the rest of the session.
struct SessionApprovals {
    /// Holds the session's info alive, so its address cannot be reused by another session while listed.
    info: SessionInfo,
    peer: Peer<RoleServer>,
    tools: HashSet<(String, String)>,
}

/// Unregisters a call from the bridge when dropped.
pub(crate) struct CallGuard {
    bridge: HostBridge,
    id: u64,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let mut calls = self
            .bridge
            .inner
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.retain(|c| c.id != self.id);
    }
}

impl std::fmt::Debug for HostBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBridge")
            .field("hosts", &self.hosts().len())
            .finish_non_exhaustive()
    }
}

/// Which host capability a forwarded request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    Sampling,
    Elicitation,
    Roots,
}

impl Need {
    fn declared(self, caps: &ClientCapabilities) -> bool {
        match self {
            Need::Sampling => caps.sampling.is_some(),
            Need::Elicitation => caps.elicitation.is_some(),
            Need::Roots => caps.roots.is_some(),
        }
    }
}

impl HostBridge {
    /// A bridge with no session attached yet.
    pub fn new() -> HostBridge {
        HostBridge::default()
    }

    /// The runtime handlers backed by this bridge; put them in `RuntimeOptions::handlers` before `Runtime::start`.
    pub fn handlers(&self) -> Handlers {
        let me = Arc::new(self.clone());
        Handlers {
            sampling: Some(me.clone()),
            elicitation: Some(me.clone()),
            roots: Some(me.clone()),
            approval: Some(me),
        }
    }

    /// Remembers an initialized host session (the most recent capable one answers forwarded requests).
    pub fn attach(&self, peer: Peer<RoleServer>) {
        let mut hosts = self
            .inner
            .hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        hosts.retain(|p| !p.is_transport_closed());
        if hosts.len() >= MAX_HOSTS {
            hosts.remove(0);
        }
        hosts.push(peer);
    }

    /// Requests refused for `server` so far because no host could answer them.
    pub fn refusals(&self, server: &str) -> u64 {
        self.inner
            .refusals
            .lock()
            .map_or(0, |r| r.get(server).copied().unwrap_or(0))
    }

    fn refused(&self, server: &str) {
        if let Ok(mut r) = self.inner.refusals.lock() {
            *r.entry(server.to_owned()).or_default() += 1;
        }
    }

    fn hosts(&self) -> Vec<Peer<RoleServer>> {
        self.inner.hosts.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// The most recent live host that declared `need`.
    pub(crate) fn host(&self, need: Need) -> Option<Peer<RoleServer>> {
        self.hosts().into_iter().rev().find(|p| capable(p, need))
    }

    /// Registers a tool call on `server` made by the host session of the current task (see [`with_caller`]);
    /// `None` outside a host request (library and CLI calls). The call is unregistered when the guard drops.
    pub(crate) fn begin_call(&self, server: &str, tool: &str) -> Option<CallGuard> {
        let caller = CALLER.try_with(Peer::clone).ok()?;
        let id = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
        self.inner
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(InFlight {
                id,
                server: server.to_owned(),
                tool: tool.to_owned(),
                caller,
                approval_claimed: false,
            });
        Some(CallGuard {
            bridge: self.clone(),
            id,
        })
    }

    /// Tool calls in flight that came from a host session.
    pub fn calls_in_flight(&self) -> usize {
        self.inner.calls.lock().map_or(0, |c| c.len())
    }

    /// Who answers `server`'s request needing `need`: `Ok(host)` for the session of the most recent call in flight
    /// on that server (when it declared `need`), else the most recent capable host when no session has a call
    /// there; `Err(())` when calls are in flight but their sessions cannot answer (the request is never shown to
    /// another session).
    fn route(&self, server: &str, need: Need) -> Result<Option<Peer<RoleServer>>, ()> {
        let callers: Vec<Peer<RoleServer>> = {
            let calls = self
                .inner
                .calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            calls
                .iter()
                .rev()
                .filter(|c| c.server == server && !c.caller.is_transport_closed())
                .map(|c| c.caller.clone())
                .collect()
        };
        if callers.is_empty() {
            return Ok(self.host(need));
        }
        match callers.into_iter().find(|p| capable(p, need)) {
            Some(peer) => Ok(Some(peer)),
            None => Err(()),
        }
    }

    /// The session of the oldest call of `tool` on `server` not yet matched to an approval (claimed by this).
    fn claim_approval(&self, server: &str, tool: &str) -> Option<Peer<RoleServer>> {
        let mut calls = self
            .inner
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let call = calls
            .iter_mut()
            .find(|c| !c.approval_claimed && c.server == server && c.tool == tool)?;
        call.approval_claimed = true;
        Some(call.caller.clone())
    }

    fn allowed_for_session(&self, peer: &Peer<RoleServer>, server: &str, tool: &str) -> bool {
        let key = (server.to_owned(), tool.to_owned());
        let allowed = self
            .inner
            .allowed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        allowed
            .iter()
            .any(|a| same_session(&a.peer, peer) && a.tools.contains(&key))
    }

    fn allow_for_session(&self, peer: &Peer<RoleServer>, server: &str, tool: &str) {
        let Some(info) = peer.peer_info() else {
            return;
        };
        let key = (server.to_owned(), tool.to_owned());
        let mut allowed = self
            .inner
            .allowed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        allowed.retain(|a| !a.peer.is_transport_closed());
        if let Some(entry) = allowed.iter_mut().find(|a| Arc::ptr_eq(&a.info, &info)) {
            entry.tools.insert(key);
            return;
        }
        if allowed.len() >= MAX_HOSTS {
            allowed.remove(0);
        }
        allowed.push(SessionApprovals {
            info,
            peer: peer.clone(),
            tools: HashSet::from([key]),
        });
    }
}

fn capable(peer: &Peer<RoleServer>, need: Need) -> bool {
    !peer.is_transport_closed() && peer.peer_info().is_some_and(|info| need.declared(&info.capabilities))
}

#[async_trait]
impl SamplingHandler for HostBridge {
    async fn create_message(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        let Ok(Some(host)) = self.route(server, Need::Sampling) else {
            self.refused(server);
            return Err(format!(
                "input_required: server `{server}` asked for sampling and the host of pimcp-run did not declare the \
                 sampling capability"
            ));
        };
        match tokio::time::timeout(SAMPLING_TIMEOUT, host.create_message(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(format!("the host refused sampling: {e}")),
            Err(_) => Err(format!(
                "the host did not answer sampling within {}s",
                SAMPLING_TIMEOUT.as_secs()
            )),
        }
    }
}

#[async_trait]
impl ElicitationHandler for HostBridge {
    async fn elicit(&self, server: &str, request: ElicitRequestParams) -> ElicitResult {
        let Ok(Some(host)) = self.route(server, Need::Elicitation) else {
            self.refused(server);
            return ElicitResult::new(ElicitationAction::Decline);
        };
        let request = match request {
            ElicitRequestParams::FormElicitationParams {
                meta,
                message,
                requested_schema,
            } => ElicitRequestParams::FormElicitationParams {
                meta,
                message: format!("[{server}] {message}"),
                requested_schema,
            },
            other => other,
        };
        match tokio::time::timeout(ELICITATION_TIMEOUT, host.create_elicitation(request)).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                tracing::warn!(%server, error = %e, "the host failed an elicitation request");
                ElicitResult::new(ElicitationAction::Cancel)
            }
            Err(_) => ElicitResult::new(ElicitationAction::Cancel),
        }
    }
}

#[async_trait]
impl RootsProvider for HostBridge {
    async fn roots(&self, server: &str) -> Vec<Root> {
        let Ok(Some(host)) = self.route(server, Need::Roots) else {
            return Vec::new();
        };
        match tokio::time::timeout(ROOTS_TIMEOUT, host.list_roots()).await {
            Ok(Ok(result)) => result.roots,
            Ok(Err(e)) => {
                tracing::warn!(%server, error = %e, "the host failed roots/list");
                Vec::new()
            }
            Err(_) => Vec::new(),
        }
    }
}

#[async_trait]
impl ApprovalHandler for HostBridge {
    /// Asks the session that made the call; "allow for this session" is remembered for that session only (the
    /// runtime is told "allow once", so other sessions sharing it are still asked).
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        // A host that takes sampling keeps its own human in the loop (the MCP spec asks clients to): pimcp-run never
        // asks a second time. Without such a host the sampling fails anyway, saying so.
        if request.kind == ApprovalKind::Sampling {
            return ApprovalDecision::AllowOnce;
        }
        let host = match self.claim_approval(&request.server, &request.tool) {
            Some(caller) => caller,
            None => match self.host(Need::Elicitation) {
                Some(host) => host,
                None => return ApprovalDecision::InputRequired,
            },
        };
        if self.allowed_for_session(&host, &request.server, &request.original) {
            return ApprovalDecision::AllowOnce;
        }
        if !capable(&host, Need::Elicitation) {
            return ApprovalDecision::InputRequired;
        }
        match crate::approval::ask_host(&host, request).await {
            ApprovalDecision::AllowForSession => {
                self.allow_for_session(&host, &request.server, &request.original);
                ApprovalDecision::AllowOnce
            }
            other => other,
        }
    }
}

/// Relays one call's upstream progress to the host session that asked for it, under the host's own token. The
/// relay ends when the call ends (its senders are dropped, and what they sent is forwarded) or the session is gone;
/// the handle finishes then.
pub(crate) fn relay_progress(
    host: Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
) -> (
    tokio::sync::mpsc::UnboundedSender<pimcp_actors::CallProgress>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<pimcp_actors::CallProgress>();
    let relay = tokio::spawn(async move {
        while let Some(update) = rx.recv().await {
            let mut params = rmcp::model::ProgressNotificationParam::new(token.clone(), update.progress);
            params.total = update.total;
            params.message = update.message;
            if host.notify_progress(params).await.is_err() {
                break;
            }
        }
    });
    (tx, relay)
}
