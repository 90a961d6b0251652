//! The rmcp `ServerHandler` impl of [`ProxyServer`]: capabilities and info, sessions and `subscriptions/listen`
//! sinks, tools (the `mcp` tool and direct tools), prompts, resources, completions, and the JSON-RPC errors of
//! non-tool requests.

use std::borrow::Cow;

use pimcp_surface::{Category, ProxyError, TOOL_NAME};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tracing::Instrument as _;

use super::{Busy, PROGRESS_FLUSH_BOUND, ProxyServer, SERVER_NAME};
use crate::facade::CallContext;
use crate::forward::{relay_progress, with_caller};
use crate::script::SCRIPT_TOOL_NAME;

impl ServerHandler for ProxyServer {
    #[allow(deprecated)] // `logging` is SEP-2577-deprecated but still declared to 2025-11-25 hosts
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "pimcp fronts the configured MCP servers. Use the mcp tool: mcp({}) for status, mcp({search: \"words\"}) to \
                 find a tool, mcp({tool, args}) to call it.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    /// rmcp's default: the peer info, then the negotiation.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tracing::debug!(
            client = ?context.peer.peer_info().map(|i| i.client_info.name.clone()),
            "host initialized"
        );
        self.inner.bridge.attach(context.peer.clone());
        let mut peers = self
            .inner
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(context.peer);
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // rmcp intersects this with what was requested and what `get_info` advertises. Resources are accepted when
        // a server lists them or a template matches them.
        let mut accepted = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .build();
        let known: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| self.inner.proxy.resource_server(uri).is_some())
            .cloned()
            .collect();
        if !known.is_empty() {
            accepted.resource_subscriptions = Some(known);
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> std::result::Result<(), ErrorData> {
        let sink = context.sink().clone();
        self.inner
            .sinks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(sink.clone());
        // The stream's resources are subscribed upstream while it lasts.
        let key = self
            .inner
            .next_stream
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let subs = &self.inner.subscriptions;
        let uris = subs.subscribe_stream(&self.inner.proxy, key, &sink).await;
        context.cancelled().await;
        subs.end_stream(&self.inner.proxy, key, &uris).await;
        Ok(())
    }

    #[allow(deprecated)] // logging is SEP-2577-deprecated but still on the wire
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.inner.log.set_level(&ctx.peer, request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        if self.is_draining() {
            let error = ProxyError::new(
                Category::Connection,
                "pimcp-run is shutting down; the call was not made.",
            )
            .with_hint("Retry once pimcp-run is back.");
            return Ok(crate::facade::ProxyResponse::from(error).result.into());
        }
        let _busy = Busy::new(&self.inner);
        let peer = ctx.peer.clone();
        // The host's trace context (`_meta.traceparent`) parents everything pimcp does for this call.
        let span = tracing::info_span!("host_request", method = "tools/call");
        pimcp_actors::trace_context::extract_from(&ctx.meta, &span);
        with_caller(peer, self.answer_call(request, ctx)).instrument(span).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListPromptsResult, ErrorData> {
        let prompts = self
            .inner
            .proxy
            .prompts()
            .into_iter()
            .map(|entry| {
                let mut p: Prompt = entry.prompt;
                p.name = entry.name;
                p
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<GetPromptResponse, ErrorData> {
        let _busy = Busy::new(&self.inner);
        let span = tracing::info_span!("proxy_request", mode = "prompt");
        pimcp_actors::trace_context::extract_from(&ctx.meta, &span);
        match self
            .inner
            .proxy
            .get_prompt(&request.name, request.arguments)
            .instrument(span)
            .await
        {
            Ok(result) => Ok(GetPromptResponse::Complete(result)),
            Err(e) => Err(protocol_error(&e)),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        let resources = self.inner.proxy.resources().into_iter().map(|(_, r)| r).collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, ErrorData> {
        let templates = self
            .inner
            .proxy
            .resource_templates()
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    #[allow(deprecated)] // resources/subscribe is legacy-only in rmcp; hosts of the initialize era use it
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.inner
            .subscriptions
            .subscribe(&self.inner.proxy, &ctx.peer, &request.uri)
            .await
            .map_err(|e| match e.category {
                Category::UnknownTool => ErrorData::resource_not_found(e.message.clone(), None),
                _ => protocol_error(&e),
            })
    }

    #[allow(deprecated)] // as `subscribe`
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.inner
            .subscriptions
            .unsubscribe(&self.inner.proxy, &ctx.peer, &request.uri)
            .await;
        Ok(())
    }

    /// Forwarded to the server of the prompt or resource template; an unknown one is an invalid-params error.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CompleteResult, ErrorData> {
        let _busy = Busy::new(&self.inner);
        let span = tracing::info_span!("proxy_request", mode = "complete");
        self.inner
            .proxy
            .complete(request)
            .instrument(span)
            .await
            .map_err(|e| protocol_error(&e))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, ErrorData> {
        let _busy = Busy::new(&self.inner);
        let span = tracing::info_span!("proxy_request", mode = "resource");
        pimcp_actors::trace_context::extract_from(&ctx.meta, &span);
        match self.inner.proxy.read_resource(&request.uri).instrument(span).await {
            Ok(result) => Ok(ReadResourceResponse::Complete(result)),
            Err(e) if e.category == Category::UnknownTool => {
                Err(ErrorData::resource_not_found(e.message.clone(), None))
            }
            Err(e) => Err(protocol_error(&e)),
        }
    }

    /// A method rmcp knows lands here only when its params did not fit it: -32602, not -32601.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::CustomResult, ErrorData> {
        if crate::host_input::is_known_method(&request.method) {
            return Err(ErrorData::invalid_params("Invalid params", None));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ))
    }
}

impl ProxyServer {
    /// A host's `tools/call`: the `mcp` tool or a direct tool.
    async fn answer_call(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        // The host asked for progress: the upstream's notifications for this call are relayed with its token.
        let (progress, relay) = match ctx.meta.get_progress_token() {
            Some(token) => {
                let (tx, relay) = relay_progress(ctx.peer.clone(), token);
                (Some(tx), Some(relay))
            }
            None => (None, None),
        };
        // Cancelled by the host's `notifications/cancelled` (rmcp's token for the request) or by `cancel_calls`.
        let cancel = self.inner.calls.child_token();
        let follow = {
            let (cancel, request) = (cancel.clone(), ctx.ct.clone());
            async move {
                request.cancelled().await;
                cancel.cancel();
                std::future::pending::<std::convert::Infallible>().await
            }
        };
        let call = CallContext {
            cancel: Some(cancel),
            timeout: None,
            progress,
        };
        let name = request.name.as_ref();
        let work = async {
            if self.inner.mcp.is_some() && name == TOOL_NAME {
                let arguments = request.arguments.map(Value::Object);
                self.inner.proxy.handle_owned_arguments(arguments, &call).await
            } else if self.inner.script.is_some() && name == SCRIPT_TOOL_NAME {
                let arguments = request.arguments.map(Value::Object);
                self.inner
                    .proxy
                    .handle_script_arguments(arguments.as_ref(), &call)
                    .await
            } else {
                // Under the read lock: only the one target is cloned, not the whole surface (every direct tool's definition).
                let target = {
                    let surface = match self.inner.surface.read() {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    };
                    surface.by_name.get(name).map(|&i| surface.direct[i].target.clone())
                };
                match target {
                    Some(target) => {
                        // The `mcp` tool's requests get their span in the façade; a direct tool's starts here.
                        let span =
                            tracing::info_span!("proxy_request", mode = "direct", outcome = tracing::field::Empty);
                        let response = self
                            .inner
                            .proxy
                            .call_resolved(&target, request.arguments.unwrap_or_default(), &call)
                            .instrument(span.clone())
                            .await;
                        span.record("outcome", response.category.map_or("ok", Category::as_str));
                        response
                    }
                    None => {
                        let mut error =
                            ProxyError::new(Category::UnknownTool, format!("pimcp-run has no tool {name:?}."));
                        if self.inner.mcp.is_some() {
                            error = error.with_hint(format!(
                                "Upstream tools are reached through the mcp tool: mcp({{tool: {name:?}, args: {{…}}}})."
                            ));
                        }
                        error.into()
                    }
                }
            }
        };
        let response = tokio::select! {
            response = work => response,
            never = follow => match never {},
        };
        drop(call);
        if let Some(relay) = relay {
            // Every report that reached the relay before the call ended goes to rmcp's loop before the answer, which
            // the loop then writes after them. Bounded: a host that stops reading cannot hold the answer back.
            let _ = tokio::time::timeout(PROGRESS_FLUSH_BOUND, relay).await;
        }
        Ok(response.result.into())
    }
}

/// Prompt and resource requests are not tool calls: their failures are JSON-RPC errors carrying the category.
fn protocol_error(e: &ProxyError) -> ErrorData {
    let data = serde_json::json!({ "category": e.category.as_str() });
    match e.category {
        Category::UnknownTool | Category::Validation => ErrorData::invalid_params(e.text(), Some(data)),
        _ => ErrorData::internal_error(e.text(), Some(data)),
    }
}
