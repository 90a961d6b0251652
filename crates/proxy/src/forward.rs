//! The host bridge of `pimcp-run`: upstream servers' sampling, elicitation and roots requests (and approval prompts)
//! are forwarded to the MCP host that drives `pimcp-run`, when that host declared the capability. The bridge
//! implements the runtime's handler traits, so it is installed in `RuntimeOptions::handlers` before the runtime
//! starts and learns its host peers later, as hosts initialize. Without a capable host, sampling fails with an
//! `input_required` reason, elicitation is declined and roots are empty; each refusal is counted per server so the
//! façade can report the call as `input-required` rather than a bare tool error.
#![allow(deprecated)] // sampling / roots are SEP-2577-deprecated but still on the wire

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pimcp_actors::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, ElicitationHandler, Handlers, RootsProvider, SamplingHandler,
};
use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, Root,
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
        self.hosts()
            .into_iter()
            .rev()
            .find(|p| !p.is_transport_closed() && p.peer_info().is_some_and(|info| need.declared(&info.capabilities)))
    }
}

#[async_trait]
impl SamplingHandler for HostBridge {
    async fn create_message(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        let Some(host) = self.host(Need::Sampling) else {
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
        let Some(host) = self.host(Need::Elicitation) else {
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
        let Some(host) = self.host(Need::Roots) else {
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
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        match self.host(Need::Elicitation) {
            Some(host) => crate::approval::ask_host(&host, request).await,
            None => ApprovalDecision::InputRequired,
        }
    }
}
