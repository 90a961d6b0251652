//! The `rmcp::ClientHandler` each connection uses: it answers server→client requests through the host's callbacks
//! ([`Handlers`]) and forwards notifications to its ServerActor as requests (never blocking, never touching actor
//! state).
#![allow(deprecated)] // sampling / roots / logging are SEP-2577-deprecated but still used by servers

use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, Implementation, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};

use crate::handles::ServerHandle;
use crate::host::{Handlers, sampling_approved};
use crate::msg::{ListKind, ServerRequest};
use crate::progress::{CallProgress, ProgressRoutes};

/// The `ClientHandler` of one connection (generation `generation` of server `server`).
#[derive(Clone)]
pub(crate) struct RuntimeClient {
    pub(crate) server: String,
    pub(crate) generation: u64,
    pub(crate) actor: ServerHandle,
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
        let _ = self.actor.send(ServerRequest::ListChanged {
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
