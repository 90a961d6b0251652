//! The `mcp` tool's entry points: parsing the arguments, dispatching one request by mode (in a tracing span), and
//! the output guard over pimcp's own texts.

use pimcp_surface::{Category, ProxyError, ProxyRequest, instructions_text, parse_request, status_text};
use rmcp::model::ContentBlock;
use serde_json::Value;
use tracing::Instrument;

use super::{CallContext, Proxy, ProxyResponse};

impl Proxy {
    /// Parses the `arguments` of an `mcp` tool call and answers it; a parameter error is a `validation` result.
    pub async fn handle_arguments(&self, arguments: Option<&Value>, ctx: &CallContext) -> ProxyResponse {
        match parse_request(arguments) {
            Ok(request) => self.handle(request, ctx).await,
            Err(e) => ProxyError::from(e).into(),
        }
    }

    /// [`Proxy::handle_arguments`] taking the arguments by value (a tool call's `args` are moved, not copied).
    pub(crate) async fn handle_owned_arguments(&self, arguments: Option<Value>, ctx: &CallContext) -> ProxyResponse {
        match pimcp_surface::parse_request_owned(arguments) {
            Ok(request) => self.handle(request, ctx).await,
            Err(e) => ProxyError::from(e).into(),
        }
    }

    /// Answers one `mcp` request. Never fails: errors are tool results with a category.
    pub async fn handle(&self, request: ProxyRequest, ctx: &CallContext) -> ProxyResponse {
        let mode = mode_name(&request);
        let span = tracing::info_span!("proxy_request", mode, outcome = tracing::field::Empty);
        let response = self.dispatch(request, ctx).instrument(span.clone()).await;
        span.record("outcome", response.category.map_or("ok", Category::as_str));
        response
    }

    /// Runs one request. pimcp's own texts (every mode but `call`, whose result the guard already cut) go through
    /// the output guard too, so no answer outgrows it whatever the number of servers and tools.
    async fn dispatch(&self, request: ProxyRequest, ctx: &CallContext) -> ProxyResponse {
        if matches!(request, ProxyRequest::Call { .. } | ProxyRequest::Task { .. }) {
            return self.dispatch_inner(request, ctx).await;
        }
        let mut response = self.dispatch_inner(request, ctx).await;
        if let Some(limits) = self.config().settings.output_guard {
            for block in &mut response.result.content {
                if let ContentBlock::Text(text) = block {
                    let full = std::mem::take(&mut text.text);
                    text.text = pimcp_surface::guard_own_text(full, &limits, &self.inner.spill);
                }
            }
        }
        response
    }

    async fn dispatch_inner(&self, request: ProxyRequest, ctx: &CallContext) -> ProxyResponse {
        match request {
            ProxyRequest::AuthStart { server } => respond(self.auth_start(&server).await),
            ProxyRequest::AuthComplete { server, input } => respond(self.auth_complete(&server, &input).await),
            ProxyRequest::Call { tool, args, server } => self.call(&tool, args, server.as_deref(), ctx).await,
            ProxyRequest::Task { handle } => self.follow_task(&handle, ctx).await,
            ProxyRequest::Connect { server } => respond(self.connect(&server).await.map(|l| l.text())),
            ProxyRequest::Describe { tool, server } => {
                respond(self.describe(&tool, server.as_deref()).await.map(|i| i.text()))
            }
            ProxyRequest::Instructions { server } => respond(
                self.instructions(&server)
                    .await
                    .map(|i| instructions_text(&server, i.as_deref())),
            ),
            ProxyRequest::Search(query) => respond(self.search_discovering(&query).await.map(|o| o.text())),
            ProxyRequest::List { server } => respond(self.list(&server).await.map(|l| l.text())),
            ProxyRequest::Status => {
                let lines = self.server_lines();
                let mut text = status_text(&lines);
                if let Some(problems) = self.config_problems_text() {
                    text = if lines.is_empty() {
                        format!("MCP: no servers loaded.\n\n{problems}")
                    } else {
                        format!("{text}\n\n{problems}")
                    };
                }
                ProxyResponse::text_ok(match self.notice() {
                    Some(notice) => format!("{notice}\n\n{text}"),
                    None => text,
                })
            }
        }
    }
}

fn respond(outcome: std::result::Result<String, ProxyError>) -> ProxyResponse {
    match outcome {
        Ok(text) => ProxyResponse::text_ok(text),
        Err(e) => e.into(),
    }
}

fn mode_name(request: &ProxyRequest) -> &'static str {
    match request {
        ProxyRequest::AuthStart { .. } => "auth-start",
        ProxyRequest::AuthComplete { .. } => "auth-complete",
        ProxyRequest::Call { .. } => "call",
        ProxyRequest::Task { .. } => "task",
        ProxyRequest::Connect { .. } => "connect",
        ProxyRequest::Describe { .. } => "describe",
        ProxyRequest::Instructions { .. } => "instructions",
        ProxyRequest::Search(_) => "search",
        ProxyRequest::List { .. } => "list",
        ProxyRequest::Status => "status",
    }
}
