//! The host-facing callback traits (sampling, elicitation, roots, approval) with safe defaults, and the
//! `rmcp::ClientHandler` each connection uses: it answers server→client requests through those callbacks and
//! forwards notifications to its ServerActor as messages (never blocking, never touching actor state).
#![allow(deprecated)] // sampling / roots / logging are SEP-2577-deprecated but still used by servers

use std::sync::Arc;

use async_trait::async_trait;
use ractor::ActorRef;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, Implementation, JsonObject, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, ProtocolVersion, Root,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};

use crate::call::CallProgress;
use crate::server::ServerMsg;

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
    AllowOnce,
    AllowForSession,
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
    pub server: String,
    /// The exposed name.
    pub tool: String,
    /// The upstream name.
    pub original: String,
    pub arguments: Option<JsonObject>,
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
    pub sampling: Option<Arc<dyn SamplingHandler>>,
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    pub roots: Option<Arc<dyn RootsProvider>>,
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

/// Which list a `list_changed` notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// Where a server's `notifications/progress` go: the call that asked for progress, by (connection generation,
/// the progress token rmcp put on that call's request). Tokens restart per connection, hence the generation.
///
/// rmcp picks a request's progress token inside the send, so a call can add its route only once the request is on
/// its way, and a fast server's first report (often sent the moment the call starts) can be handled before that.
/// Such a report is kept for [`EARLY_REPORT_TTL`] (at most [`EARLY_REPORT_CAP`] of them) and handed to the route when
/// it is added. Reports for calls that never ask for progress age out the same way.
#[derive(Clone, Default)]
pub(crate) struct ProgressRoutes {
    inner: Arc<std::sync::Mutex<RoutesInner>>,
}

impl std::fmt::Debug for ProgressRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("ProgressRoutes")
            .field("routes", &inner.routes.len())
            .field("early", &inner.early.len())
            .finish()
    }
}

type RouteKey = (u64, ProgressToken);

#[derive(Default)]
struct RoutesInner {
    routes: std::collections::HashMap<RouteKey, tokio::sync::mpsc::UnboundedSender<CallProgress>>,
    early: std::collections::VecDeque<(RouteKey, CallProgress, std::time::Instant)>,
}

/// How long a report that arrived before its call's route is kept.
pub(crate) const EARLY_REPORT_TTL: std::time::Duration = std::time::Duration::from_secs(2);
/// How many such reports are kept per connection (the oldest go first).
pub(crate) const EARLY_REPORT_CAP: usize = 64;

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, RoutesInner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a call's route; reports that came before it are delivered first, in order.
    pub(crate) fn insert(&self, key: RouteKey, tx: tokio::sync::mpsc::UnboundedSender<CallProgress>) {
        let mut inner = self.lock();
        inner.early.retain(|(k, report, _)| {
            let early = *k == key;
            if early {
                let _ = tx.send(report.clone());
            }
            !early
        });
        inner.routes.insert(key, tx);
    }

    pub(crate) fn remove(&self, key: &RouteKey) {
        self.lock().routes.remove(key);
    }

    /// Relays a report to its call's route, or keeps it briefly for a route not added yet.
    pub(crate) fn deliver(&self, key: RouteKey, report: CallProgress) {
        let mut inner = self.lock();
        if let Some(tx) = inner.routes.get(&key) {
            let _ = tx.send(report);
            return;
        }
        let now = std::time::Instant::now();
        while inner
            .early
            .front()
            .is_some_and(|(_, _, at)| now.duration_since(*at) > EARLY_REPORT_TTL)
        {
            inner.early.pop_front();
        }
        if inner.early.len() >= EARLY_REPORT_CAP {
            inner.early.pop_front();
        }
        inner.early.push_back((key, report, now));
    }
}

/// The `ClientHandler` of one connection (generation `generation` of server `server`).
#[derive(Clone)]
pub(crate) struct RuntimeClient {
    pub(crate) server: String,
    pub(crate) generation: u64,
    pub(crate) actor: ActorRef<ServerMsg>,
    pub(crate) handlers: Arc<Handlers>,
    pub(crate) allow_sampling: bool,
    pub(crate) sampling_auto_approve: bool,
    pub(crate) allow_elicitation: bool,
    pub(crate) progress: ProgressRoutes,
    /// Where the server's log messages go.
    pub(crate) board: crate::status::StatusBoard,
}

impl RuntimeClient {
    fn forward(&self, kind: ListKind) {
        // Unbounded mailbox: never blocks; an error only means the actor is gone.
        let _ = self.actor.send_message(ServerMsg::ListChanged {
            generation: self.generation,
            kind,
        });
    }
}

impl ClientHandler for RuntimeClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        if self.handlers.roots.is_some() {
            caps = ClientCapabilities::builder()
                .enable_roots()
                .enable_roots_list_changed()
                .build();
        }
        if self.allow_sampling && self.handlers.sampling.is_some() {
            caps.sampling = ClientCapabilities::builder().enable_sampling().build().sampling;
        }
        if self.allow_elicitation && self.handlers.elicitation.is_some() {
            caps.elicitation = ClientCapabilities::builder().enable_elicitation().build().elicitation;
        }
        // A `tools/call` may be answered with a task handle: pimcp follows it (`task.rs`).
        caps.extensions = ClientCapabilities::builder().enable_tasks().build().extensions;
        let mut config = ClientConfig::new(caps, Implementation::new("pimcp", env!("CARGO_PKG_VERSION")));
        // What `initialize` offers: the newest version that still has that handshake (rmcp's default is the
        // 2026-07-28 revision, which strict initialize-era servers echo back and then fail on). `server/discover`
        // and the auto fallback set their versions themselves.
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match (&self.handlers.sampling, self.allow_sampling) {
            (Some(h), true) => {
                sampling_approved(&self.handlers, &self.server, self.sampling_auto_approve)
                    .await
                    .map_err(|reason| ErrorData::invalid_request(reason, None))?;
                h.create_message(&self.server, params)
                    .await
                    .map_err(|reason| ErrorData::invalid_request(reason, None))
            }
            _ => Err(ErrorData::invalid_request(
                "sampling is not supported by this host",
                None,
            )),
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match (&self.handlers.elicitation, self.allow_elicitation) {
            (Some(h), true) => Ok(h.elicit(&self.server, request).await),
            _ => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }

    async fn list_roots(&self, _ctx: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        let roots = match &self.handlers.roots {
            Some(p) => p.roots(&self.server).await,
            None => Vec::new(),
        };
        Ok(ListRootsResult::new(roots))
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.forward(ListKind::Tools);
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.forward(ListKind::Resources);
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.forward(ListKind::Prompts);
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _ctx: NotificationContext<RoleClient>) {
        // rmcp has already restarted the call's timeout; this only relays it to a caller that asked.
        self.progress.deliver(
            (self.generation, params.progress_token),
            CallProgress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            },
        );
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _ctx: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, level = ?params.level, "server log message");
        if !self.board.notices_wanted() {
            return;
        }
        // A server may log what it was given: every secret pimcp resolved is taken out first.
        let text = params.data.to_string();
        let data = match pimcp_config::redact_known_secrets(&text) {
            std::borrow::Cow::Borrowed(_) => params.data,
            std::borrow::Cow::Owned(redacted) => {
                serde_json::from_str(&redacted).unwrap_or(serde_json::Value::String(redacted))
            }
        };
        self.board
            .emit_notice(crate::ServerNotice::Log(crate::ServerLogMessage {
                server: self.server.clone(),
                level: params.level,
                logger: params.logger,
                data,
            }));
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.board.emit_notice(crate::ServerNotice::ResourceUpdated {
            server: self.server.clone(),
            uri: params.uri,
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use rmcp::model::NumberOrString;

    fn report(progress: f64) -> CallProgress {
        CallProgress {
            progress,
            total: Some(3.0),
            message: None,
        }
    }

    fn key(generation: u64, token: i64) -> RouteKey {
        (generation, ProgressToken(NumberOrString::Number(token)))
    }

    /// A report handled before its call added the route (rmcp names the token only once the request is queued) still
    /// reaches the call, before the reports after it.
    #[test]
    fn a_report_that_beats_its_route_is_delivered_when_the_route_is_added() {
        let routes = ProgressRoutes::default();
        routes.deliver(key(1, 7), report(0.0));
        routes.deliver(key(1, 8), report(9.0)); // another call's, kept for it
        routes.deliver(key(2, 7), report(9.0)); // same token, another connection
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, 7), tx);
        routes.deliver(key(1, 7), report(1.0));
        assert_eq!(rx.try_recv().unwrap().progress, 0.0);
        assert_eq!(rx.try_recv().unwrap().progress, 1.0);
        assert!(rx.try_recv().is_err());

        let (tx8, mut rx8) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, 8), tx8);
        assert_eq!(rx8.try_recv().unwrap().progress, 9.0);

        routes.remove(&key(1, 7));
        routes.deliver(key(1, 7), report(2.0));
        assert!(rx.try_recv().is_err(), "a removed route gets nothing");
    }

    #[test]
    fn early_reports_are_bounded() {
        let routes = ProgressRoutes::default();
        for i in 0..(EARLY_REPORT_CAP as i64 + 10) {
            routes.deliver(key(1, i), report(i as f64));
        }
        assert_eq!(routes.lock().early.len(), EARLY_REPORT_CAP);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, 0), tx);
        assert!(rx.try_recv().is_err(), "the oldest report was dropped");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        routes.insert(key(1, EARLY_REPORT_CAP as i64 + 9), tx);
        assert_eq!(rx.try_recv().unwrap().progress, (EARLY_REPORT_CAP + 9) as f64);
    }
}
