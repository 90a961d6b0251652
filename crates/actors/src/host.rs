//! The host-facing callback traits (sampling, elicitation, roots, approval) with safe defaults, and [`Handlers`],
//! the set a host gives the runtime. The connection's `rmcp::ClientHandler` that calls them is `client.rs`.
#![allow(deprecated)] // sampling / roots are SEP-2577-deprecated but still used by servers

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, JsonObject,
    Root,
};

/// Answers a server's `sampling/createMessage` (an LLM completion on the host's behalf).
#[async_trait]
pub trait SamplingHandler: Send + Sync + 'static {
    /// `Err(reason)` declines; the reason is sent to the server.
    async fn create_message(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        let _ = (server, params);
        Err("sampling is not supported by this host".to_owned())
    }
}

/// Answers a server's `elicitation/create` (ask the user for input).
#[async_trait]
pub trait ElicitationHandler: Send + Sync + 'static {
    /// Default: decline.
    async fn elicit(&self, server: &str, request: ElicitRequestParams) -> ElicitResult {
        let _ = (server, request);
        ElicitResult::new(ElicitationAction::Decline)
    }
}

/// Answers a server's `roots/list`.
#[async_trait]
pub trait RootsProvider: Send + Sync + 'static {
    /// Default: no roots.
    async fn roots(&self, server: &str) -> Vec<Root> {
        let _ = server;
        Vec::new()
    }
}

/// What the host decided about a gated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Allow this call.
    AllowOnce,
    /// Allow this call and every later call of the same tool in this session.
    AllowForSession,
    /// Refuse the call (category `approval`).
    Deny,
    /// There is no way to ask (headless): the call fails closed with category `approval`.
    InputRequired,
}

/// What an [`ApprovalRequest`] asks to allow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalKind {
    /// A tool call `approveTools` gates.
    #[default]
    ToolCall,
    /// A server's `sampling/createMessage` (unless `samplingAutoApprove`); `tool` and `original` are
    /// `sampling/createMessage`, `arguments` is `None`.
    Sampling,
}

/// A call (or a server's sampling request) waiting for approval.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The server's name.
    pub server: String,
    /// The exposed name.
    pub tool: String,
    /// The upstream name.
    pub original: String,
    /// The call's arguments.
    pub arguments: Option<JsonObject>,
    /// What is asked for: a tool call or a server's sampling request.
    pub kind: ApprovalKind,
}

impl ApprovalRequest {
    /// A call of `tool` (exposed name; `original` upstream) on `server` with `arguments`.
    pub fn tool_call(
        server: impl Into<String>,
        tool: impl Into<String>,
        original: impl Into<String>,
        arguments: Option<JsonObject>,
    ) -> ApprovalRequest {
        ApprovalRequest {
            server: server.into(),
            tool: tool.into(),
            original: original.into(),
            arguments,
            kind: ApprovalKind::ToolCall,
        }
    }
}

/// The method a sampling approval names as its `tool`.
const SAMPLING_METHOD: &str = "sampling/createMessage";

/// Whether a sampling request of `server` may go to the sampling handler. With `samplingAutoApprove`, or without an
/// approval handler (the sampling handler is then the host's own UI and decides), it may; otherwise the approval
/// handler is asked, and nobody to ask (headless) refuses: `samplingAutoApprove` is what allows sampling there.
pub(crate) async fn sampling_approved(handlers: &Handlers, server: &str, auto_approve: bool) -> Result<(), String> {
    let Some(approval) = handlers.approval.as_ref().filter(|_| !auto_approve) else {
        return Ok(());
    };
    let request = ApprovalRequest {
        server: server.to_owned(),
        tool: SAMPLING_METHOD.to_owned(),
        original: SAMPLING_METHOD.to_owned(),
        arguments: None,
        kind: ApprovalKind::Sampling,
    };
    match approval.approve(&request).await {
        ApprovalDecision::AllowOnce | ApprovalDecision::AllowForSession => Ok(()),
        ApprovalDecision::Deny => Err("the user declined the sampling request".into()),
        ApprovalDecision::InputRequired => Err(
            "nobody can approve the sampling request in this session; set `settings.samplingAutoApprove: true` to \
             allow sampling without asking"
                .into(),
        ),
    }
}

/// Decides gated calls.
#[async_trait]
pub trait ApprovalHandler: Send + Sync + 'static {
    /// Default: there is nobody to ask.
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let _ = request;
        ApprovalDecision::InputRequired
    }
}

/// The host's callbacks. A `None` handler keeps the default behaviour (decline / `input_required`) and the
/// matching capability is not advertised to servers.
#[derive(Clone, Default)]
pub struct Handlers {
    /// Answers `sampling/createMessage`; `None`: sampling is declined and not advertised.
    pub sampling: Option<Arc<dyn SamplingHandler>>,
    /// Answers `elicitation/create`; `None`: declined and not advertised.
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// Answers `roots/list`; `None`: no roots.
    pub roots: Option<Arc<dyn RootsProvider>>,
    /// Decides calls `approveTools` gates (and sampling); `None`: nobody to ask, gated calls fail closed.
    pub approval: Option<Arc<dyn ApprovalHandler>>,
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handlers")
            .field("sampling", &self.sampling.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .field("roots", &self.roots.is_some())
            .field("approval", &self.approval.is_some())
            .finish()
    }
}
