//! [`RuntimeHandle`]'s requests to one server on behalf of a host: prompts, resources, subscriptions and completion,
//! each on the server's live connection (connecting it first when needed) within its request timeout.

use rmcp::model::JsonObject;

use crate::error::{Error, Result};
use crate::msg::ServerRequest;
use crate::runtime::RuntimeHandle;

impl RuntimeHandle {
    /// `prompts/get` on one server (connecting it first when needed), within its request timeout.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<rmcp::model::GetPromptResult> {
        let mut params = rmcp::model::GetPromptRequestParams::new(name);
        params.arguments = arguments;
        params.meta = crate::trace_context::request_meta(&tracing::Span::current());
        let (peer, timeout) = self.live_peer(server).await?;
        match timed(server, "prompts/get", timeout, peer.get_prompt_once(params)).await? {
            rmcp::model::GetPromptResponse::Complete(r) => Ok(r),
            _ => Err(Error::InputRequired {
                server: server.to_owned(),
                tool: format!("prompt {name}"),
                message: "the server asked for input while getting a prompt".into(),
            }),
        }
    }

    /// `resources/read` on one server (connecting it first when needed), within its request timeout.
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<rmcp::model::ReadResourceResult> {
        let mut params = rmcp::model::ReadResourceRequestParams::new(uri);
        params.meta = crate::trace_context::request_meta(&tracing::Span::current());
        let (peer, timeout) = self.live_peer(server).await?;
        match timed(server, "resources/read", timeout, peer.read_resource_once(params)).await? {
            rmcp::model::ReadResourceResponse::Complete(r) => Ok(r),
            _ => Err(Error::InputRequired {
                server: server.to_owned(),
                tool: format!("resource {uri}"),
                message: "the server asked for input while reading a resource".into(),
            }),
        }
    }

    /// Subscribes to changes of `uri` on `server` (connecting it when needed): its `notifications/resources/updated`
    /// for `uri` then arrive as [`crate::ServerNotice::ResourceUpdated`]. An initialize-era server gets
    /// `resources/subscribe`, which it forgets when it restarts (subscribe again when it is ready); a 2026-07-28
    /// server gets `uri` in the `resourceSubscriptions` of its listen stream, kept across reconnects until
    /// [`RuntimeHandle::unsubscribe_resource`].
    #[allow(deprecated)] // resources/subscribe is legacy-only in rmcp
    pub async fn subscribe_resource(&self, server: &str, uri: &str) -> Result<()> {
        let (peer, timeout) = self.live_peer(server).await?;
        if peer
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize())
        {
            self.shared.resource_interest.add(server, uri);
            return Ok(());
        }
        let params = rmcp::model::SubscribeRequestParams::new(uri);
        timed(server, "resources/subscribe", timeout, peer.subscribe(params)).await
    }

    /// `resources/unsubscribe` on `server`, if it is connected (a server that is not running has no subscription).
    #[allow(deprecated)] // resources/unsubscribe is legacy-only in rmcp
    pub async fn unsubscribe_resource(&self, server: &str, uri: &str) -> Result<()> {
        self.shared.resource_interest.remove(server, uri);
        let Some((peer, timeout)) = self.control(server, |reply| ServerRequest::LivePeer { reply }).await? else {
            return Ok(());
        };
        if peer
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize())
        {
            return Ok(());
        }
        let params = rmcp::model::UnsubscribeRequestParams::new(uri);
        timed(server, "resources/unsubscribe", timeout, peer.unsubscribe(params)).await
    }

    /// `completion/complete` on `server` (connecting it when needed); `params` name the server's own prompt or
    /// resource template.
    pub async fn complete(
        &self,
        server: &str,
        params: rmcp::model::CompleteRequestParams,
    ) -> Result<rmcp::model::CompleteResult> {
        let (peer, timeout) = self.live_peer(server).await?;
        timed(server, "completion/complete", timeout, peer.complete(params)).await
    }

    /// The live peer of `server` (connecting it when needed; one retry if it closes in between).
    async fn live_peer(&self, server: &str) -> Result<(rmcp::service::Peer<rmcp::RoleClient>, std::time::Duration)> {
        for _ in 0..2 {
            self.control(server, |reply| ServerRequest::Ensure { reply }).await??;
            if let Some(live) = self.control(server, |reply| ServerRequest::LivePeer { reply }).await? {
                return Ok(live);
            }
        }
        Err(Error::Connection {
            server: server.to_owned(),
            message: "the connection closed right after connecting".into(),
            source: None,
        })
    }
}

/// One request to `server` within `timeout`: its answer, the request's error, or an operation timeout.
async fn timed<T>(
    server: &str,
    operation: &str,
    timeout: std::time::Duration,
    request: impl std::future::Future<Output = std::result::Result<T, rmcp::ServiceError>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(request_error(server, operation, e)),
        Err(_) => Err(Error::OperationTimeout {
            server: server.to_owned(),
            operation: operation.into(),
            after: timeout,
        }),
    }
}

fn request_error(server: &str, operation: &str, e: rmcp::service::ServiceError) -> Error {
    match e {
        rmcp::service::ServiceError::McpError(e) => Error::Protocol {
            server: server.to_owned(),
            operation: operation.to_owned(),
            code: e.code.0,
            message: e.message.to_string(),
        },
        other => Error::Connection {
            server: server.to_owned(),
            message: format!("{operation} failed: {other}"),
            source: Some(crate::error::Cause::new(other)),
        },
    }
}
