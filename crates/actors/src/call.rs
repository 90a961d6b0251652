//! One tool call (or resource read) on a live connection, run on the caller's task (through the call lane) or in a
//! task the ServerActor spawns (a call queued behind a connect): per-call timeout
//! that cancels on the wire and is extended by progress, caller cancellation, the retry rules (retry only when
//! the request provably did not reach the server, or the tool is read-only/idempotent — never replay a
//! non-idempotent call that may have arrived), and fast failure when the transport dies mid-call. Every request goes
//! through rmcp's client service.
#![allow(deprecated)] // roots are SEP-2577-deprecated but still requested by servers

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ContentBlock, InputRequest,
    InputRequests, InputResponses, ListRootsResult, ReadResourceRequest, ReadResourceRequestParams, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::catalog::CatalogTool;
use crate::error::{Error, Result};
use crate::host::Handlers;
use crate::job::{CallJob, CallReport, DEFAULT_MAX_TOTAL_FACTOR, ToolOutput};
use crate::progress::{CallProgress, ProgressRoutes};

/// Tokens a call task watches besides its own response.
#[derive(Debug, Clone)]
pub(crate) struct CallGuards {
    /// Cancelled when the connection's transport is found dead.
    pub dead: CancellationToken,
    /// Cancelled when the server actor shuts down or disables the server.
    pub stop: CancellationToken,
    /// The connection's progress routes and its generation (the key's first half).
    pub progress: ProgressRoutes,
    pub generation: u64,
}

/// Removes a call's progress route when the call ends, however it ends.
struct ProgressRoute<'a> {
    routes: &'a ProgressRoutes,
    key: (u64, rmcp::model::ProgressToken),
}

impl Drop for ProgressRoute<'_> {
    fn drop(&mut self) {
        self.routes.remove(&self.key);
    }
}

/// How a call answers a 2026-07-28 server's `input_required` rounds (sampling, elicitation, roots).
#[derive(Clone)]
pub(crate) struct InputContext {
    pub handlers: Arc<Handlers>,
    pub allow_sampling: bool,
    pub sampling_auto_approve: bool,
    pub allow_elicitation: bool,
}

/// How long past its hard cap (`max_total`) a call may wait for rmcp to end it before the runtime ends it itself.
const CALL_END_SLACK: Duration = Duration::from_secs(5);

/// Maximum `input_required` rounds one call may take.
pub(crate) const MAX_INPUT_ROUNDS: usize = 8;

/// Runs one call to completion. Never panics, always returns a result or a categorized error.
pub(crate) async fn run_call(
    peer: Peer<RoleClient>,
    job: CallJob,
    default_timeout: Duration,
    retry_delays: &[Duration],
    guards: CallGuards,
    input: InputContext,
) -> (Result<ToolOutput>, CallReport) {
    let CallJob { tool, args, opts, .. } = job;
    let server = tool.server.clone();
    let timeout = opts.timeout.unwrap_or(default_timeout);
    let max_total = opts
        .max_total
        .unwrap_or(timeout.saturating_mul(DEFAULT_MAX_TOTAL_FACTOR))
        .max(timeout);
    let user_cancel = opts.cancel;
    let mut report = CallReport::default();
    let conn_err = |message: String| Error::Connection {
        server: server.clone(),
        message,
        source: None,
    };
    let conn_err_from = |message: String, cause: rmcp::service::ServiceError| Error::Connection {
        server: server.clone(),
        message,
        source: Some(crate::error::Cause::new(cause)),
    };
    let mut attempt = 0usize;
    let mut rounds = 0usize;
    let mut input_responses: Option<InputResponses> = None;
    let mut request_state: Option<String> = None;
    loop {
        // One span per request on the wire (metadata only); a retry or an input round is a new one.
        let upstream = tracing::info_span!(
            "upstream_request",
            server = %server,
            method = if tool.resource_uri.is_some() { "resources/read" } else { "tools/call" },
            attempt,
            round = rounds,
            outcome = tracing::field::Empty,
        );
        if guards.dead.is_cancelled() {
            report.transport_dead = true;
            return (
                Err(conn_err("the connection closed before the call was sent".into())),
                report,
            );
        }
        let wait = Wait {
            timeout,
            max_total,
            guards: &guards,
            user_cancel: user_cancel.as_ref(),
        };
        let request = match &tool.resource_uri {
            Some(uri) => {
                let mut params = ReadResourceRequestParams::new(uri.clone());
                params.meta = crate::trace_context::request_meta(&upstream);
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params))
            }
            None => {
                let mut params = CallToolRequestParams::new(tool.original.clone());
                params.arguments = args.clone();
                params.input_responses = input_responses.clone();
                params.request_state = request_state.clone();
                params.meta = crate::trace_context::request_meta(&upstream);
                ClientRequest::CallToolRequest(CallToolRequest::new(params))
            }
        };
        // Boxed: rmcp's request future is large, and this one is moved with the call's future otherwise.
        let exchange = Box::pin(rmcp_exchange(&peer, request, &wait, opts.progress.as_ref(), &upstream)).await;
        let outcome = match exchange {
            Exchange::Outcome(outcome) => outcome,
            Exchange::SendTimedOut => {
                return (
                    Err(Error::Timeout {
                        server,
                        tool: tool.original.clone(),
                        after: timeout,
                    }),
                    report,
                );
            }
            Exchange::ClosedBeforeSent => {
                report.transport_dead = true;
                return (
                    Err(conn_err("the connection closed before the call was sent".into())),
                    report,
                );
            }
            Exchange::NotSent(e) => {
                // Nothing reached the server: safe to retry on a live transport.
                if let Some(delay) = retry_delays.get(attempt)
                    && !guards.dead.is_cancelled()
                {
                    tracing::debug!(%server, tool = %tool.original, error = %e, "send failed; retrying");
                    attempt += 1;
                    tokio::time::sleep(*delay).await;
                    continue;
                }
                return (Err(conn_err_from(format!("sending the call failed: {e}"), e)), report);
            }
            Exchange::Abandoned(Abandon::HardCap) => {
                return (
                    Err(Error::Timeout {
                        server,
                        tool: tool.original.clone(),
                        after: max_total,
                    }),
                    report,
                );
            }
            Exchange::Abandoned(Abandon::Dead) => {
                report.transport_dead = true;
                return (
                    Err(conn_err(format!(
                        "the server exited or the connection broke during the call to `{}`",
                        tool.original
                    ))),
                    report,
                );
            }
            Exchange::Abandoned(Abandon::Stop) => return (Err(Error::ShuttingDown), report),
            Exchange::Abandoned(Abandon::Caller) => {
                return (
                    Err(Error::Connection {
                        server: server.clone(),
                        message: format!("call to `{}` cancelled by the caller", tool.original),
                        source: None,
                    }),
                    report,
                );
            }
        };
        upstream.record("outcome", upstream_outcome(&outcome));
        drop(upstream);
        match outcome {
            Ok(ServerResult::InputRequiredResult(r)) if tool.resource_uri.is_none() => {
                report.responded = true;
                rounds += 1;
                let requests = r.input_requests.unwrap_or_default();
                if rounds > MAX_INPUT_ROUNDS || (requests.is_empty() && r.request_state.is_none()) {
                    let message = format!("the server kept asking for input ({rounds} rounds)");
                    return (
                        Err(Error::InputRequired {
                            server,
                            tool: tool.original.clone(),
                            message,
                        }),
                        report,
                    );
                }
                match Box::pin(fulfil(&server, &tool.original, &input, requests)).await {
                    Ok(responses) => {
                        input_responses = (!responses.is_empty()).then_some(responses);
                        request_state = r.request_state;
                        continue;
                    }
                    Err(e) => return (Err(e), report),
                }
            }
            Ok(ServerResult::CreateTaskResult(created)) if tool.resource_uri.is_none() => {
                report.responded = true;
                let follow = crate::task::Follow {
                    peer: &peer,
                    tool: &tool,
                    guards: &guards,
                    input: &input,
                    deadline: tokio::time::Instant::now() + timeout,
                    cancel: user_cancel.as_ref(),
                    progress: opts.progress.as_ref(),
                };
                return (Box::pin(crate::task::follow(follow, created.task)).await, report);
            }
            Ok(result) => {
                report.responded = true;
                return (into_output(&tool, result), report);
            }
            Err(ServiceError::Timeout { timeout: after }) => {
                return (
                    Err(Error::Timeout {
                        server,
                        tool: tool.original.clone(),
                        after,
                    }),
                    report,
                );
            }
            Err(ServiceError::McpError(e)) => {
                report.responded = true;
                return (
                    Err(Error::Protocol {
                        server,
                        operation: if tool.resource_uri.is_some() {
                            "resources/read".into()
                        } else {
                            "tools/call".into()
                        },
                        code: e.code.0,
                        message: e.message.to_string(),
                    }),
                    report,
                );
            }
            Err(ServiceError::TransportClosed) => {
                report.transport_dead = true;
                return (
                    Err(conn_err(format!(
                        "the connection closed during the call to `{}`",
                        tool.original
                    ))),
                    report,
                );
            }
            Err(e @ ServiceError::TransportSend(_)) => {
                let retryable = provably_not_delivered(&e) || tool.is_replay_safe();
                if retryable
                    && let Some(delay) = retry_delays.get(attempt)
                    && !guards.dead.is_cancelled()
                {
                    tracing::debug!(%server, tool = %tool.original, error = %e, "transient transport error; retrying");
                    attempt += 1;
                    tokio::time::sleep(*delay).await;
                    continue;
                }
                if let Some(challenge) = e.auth_challenge() {
                    let _ = challenge;
                    report.needs_auth = true;
                    return (
                        Err(Error::NeedsAuth {
                            server,
                            detail: "the server answered 401".into(),
                        }),
                        report,
                    );
                }
                return (
                    Err(conn_err(format!(
                        "transport error during the call to `{}`: {e}",
                        tool.original
                    ))),
                    report,
                );
            }
            Err(ServiceError::InputRequiredRoundsExceeded { .. }) => {
                return (
                    Err(Error::InputRequired {
                        server,
                        tool: tool.original.clone(),
                        message: "the server kept asking for input".into(),
                    }),
                    report,
                );
            }
            Err(e) => {
                return (
                    Err(conn_err_from(format!("call to `{}` failed: {e}", tool.original), e)),
                    report,
                );
            }
        }
    }
}

/// What bounds the wait for one request's answer.
struct Wait<'a> {
    timeout: Duration,
    max_total: Duration,
    guards: &'a CallGuards,
    /// The caller's cancellation, if it can cancel.
    user_cancel: Option<&'a CancellationToken>,
}

/// How one request on the wire went.
#[allow(clippy::large_enum_variant)] // returned once per request; boxing the outcome would add an allocation
enum Exchange {
    /// The server's answer, or how the request failed after it was handed to the transport.
    Outcome(std::result::Result<ServerResult, ServiceError>),
    /// Handing the request to rmcp did not finish within the call's timeout.
    SendTimedOut,
    /// The connection was closed before the request was handed over.
    ClosedBeforeSent,
    /// Handing the request over failed: nothing reached the server.
    NotSent(ServiceError),
    /// The call stopped waiting (a cancellation was sent where the server may still be working on it).
    Abandoned(Abandon),
}

enum Abandon {
    /// The outer bound past `max_total` ran out.
    HardCap,
    /// The transport was found dead.
    Dead,
    /// The server actor stops.
    Stop,
    /// The caller cancelled.
    Caller,
}

/// One request through rmcp's service: its id, progress token and progress-extended timeout.
async fn rmcp_exchange(
    peer: &Peer<RoleClient>,
    request: ClientRequest,
    wait: &Wait<'_>,
    progress: Option<&tokio::sync::mpsc::UnboundedSender<CallProgress>>,
    upstream: &tracing::Span,
) -> Exchange {
    let options = PeerRequestOptions::with_timeout(wait.timeout)
        .reset_timeout_on_progress()
        .with_max_total_timeout(wait.max_total);
    // Handing the request to rmcp waits for room in its queue; bounded like the call itself.
    let sent = tokio::time::timeout(wait.timeout, peer.send_request_with_option(request, options))
        .instrument(upstream.clone())
        .await;
    let Ok(sent) = sent else {
        return Exchange::SendTimedOut;
    };
    let handle = match sent {
        Ok(h) => h,
        Err(ServiceError::TransportClosed) => return Exchange::ClosedBeforeSent,
        Err(e) => return Exchange::NotSent(e),
    };
    let id = handle.id.clone();
    let guards = wait.guards;
    let _route = progress.map(|tx| {
        let key = (guards.generation, handle.progress_token.clone());
        guards.progress.insert(key.clone(), tx.clone());
        ProgressRoute {
            routes: &guards.progress,
            key,
        }
    });
    // rmcp ends the wait itself at the timeout (or `max_total`); this outer bound only guarantees that a call
    // ends even if rmcp's own ending never completes (it awaits the `notifications/cancelled` send).
    let bounded = tokio::time::timeout(wait.max_total + CALL_END_SLACK, handle.await_response());
    let outcome = tokio::select! {
        r = bounded.instrument(upstream.clone()) => match r {
            Ok(r) => r,
            Err(_) => {
                send_cancel(peer, id, "request timed out").await;
                return Exchange::Abandoned(Abandon::HardCap);
            }
        },
        _ = guards.dead.cancelled() => return Exchange::Abandoned(Abandon::Dead),
        _ = guards.stop.cancelled() => {
            send_cancel(peer, id, "client shutting down").await;
            return Exchange::Abandoned(Abandon::Stop);
        }
        _ = cancelled(wait.user_cancel) => {
            send_cancel(peer, id, "cancelled by the caller").await;
            return Exchange::Abandoned(Abandon::Caller);
        }
    };
    if _route.is_some() {
        // rmcp hands notifications to the handler on spawned tasks: let a progress report that came just before
        // the answer reach its route before the route goes.
        tokio::task::yield_now().await;
    }
    Exchange::Outcome(outcome)
}

/// Ends when `token` is cancelled; never without one.
async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(t) => t.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Answers one round of `input_required` requests through the host's handlers.
pub(crate) async fn fulfil(
    server: &str,
    tool: &str,
    input: &InputContext,
    requests: InputRequests,
) -> Result<InputResponses> {
    let needs = |what: &str| Error::InputRequired {
        server: server.to_owned(),
        tool: tool.to_owned(),
        message: format!("the server asked for {what} and the host has no handler for it"),
    };
    let encode = |v: std::result::Result<serde_json::Value, serde_json::Error>| {
        v.map_err(|e| Error::InputRequired {
            server: server.to_owned(),
            tool: tool.to_owned(),
            message: format!("encoding the answer: {e}"),
        })
    };
    let mut out = InputResponses::new();
    for (key, request) in requests {
        let value = match request {
            InputRequest::CreateMessage(r) => match (&input.handlers.sampling, input.allow_sampling) {
                (Some(h), true) => match async {
                    crate::host::sampling_approved(&input.handlers, server, input.sampling_auto_approve).await?;
                    h.create_message(server, r.params).await
                }
                .await
                {
                    Ok(result) => encode(serde_json::to_value(result))?,
                    Err(reason) => {
                        return Err(Error::InputRequired {
                            server: server.to_owned(),
                            tool: tool.to_owned(),
                            message: format!("sampling declined: {reason}"),
                        });
                    }
                },
                _ => return Err(needs("sampling")),
            },
            InputRequest::Elicitation(r) => match (&input.handlers.elicitation, input.allow_elicitation) {
                (Some(h), true) => encode(serde_json::to_value(h.elicit(server, r.params).await))?,
                _ => return Err(needs("user input (elicitation)")),
            },
            InputRequest::ListRoots(_) => {
                let roots = match &input.handlers.roots {
                    Some(p) => p.roots(server).await,
                    None => Vec::new(),
                };
                encode(serde_json::to_value(ListRootsResult::new(roots)))?
            }
            // `InputRequest` is non-exhaustive: a kind this version does not know cannot be answered.
            _ => return Err(needs("a kind of input this client does not know")),
        };
        out.insert(key, value);
    }
    Ok(out)
}

async fn send_cancel(peer: &Peer<RoleClient>, id: rmcp::model::RequestId, reason: &str) {
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        peer.notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason.to_owned()))),
    )
    .await;
}

pub(crate) fn into_output(tool: &CatalogTool, result: ServerResult) -> Result<ToolOutput> {
    let base = |content, structured_content, is_error, meta| ToolOutput {
        server: tool.server.clone(),
        tool: tool.name.clone(),
        original: tool.original.clone(),
        content,
        structured_content,
        is_error,
        meta,
    };
    match result {
        ServerResult::CallToolResult(r) => {
            let is_error = r.is_error == Some(true);
            let out = base(r.content, r.structured_content, is_error, r.meta);
            if is_error {
                let text = out.text();
                Err(Error::ToolError {
                    server: tool.server.clone(),
                    tool: tool.original.clone(),
                    message: if text.is_empty() {
                        "(no error text)".into()
                    } else {
                        text
                    },
                    output: Box::new(out),
                })
            } else {
                Ok(out)
            }
        }
        ServerResult::ReadResourceResult(r) => {
            let content = r.contents.into_iter().map(ContentBlock::resource).collect();
            Ok(base(content, None, false, None))
        }
        ServerResult::InputRequiredResult(_) => Err(Error::InputRequired {
            server: tool.server.clone(),
            tool: tool.original.clone(),
            message: "the server asked for input (input_required) and no handler can answer it".into(),
        }),
        _ => Err(Error::Protocol {
            server: tool.server.clone(),
            operation: "tools/call".into(),
            code: 0,
            message: "unexpected response type".into(),
        }),
    }
}

/// The `outcome` of an `upstream_request` span: `ok`, `tool-error` (an `isError` result), `input-required`, or the
/// failure's error category.
fn upstream_outcome(outcome: &std::result::Result<ServerResult, ServiceError>) -> &'static str {
    match outcome {
        Ok(ServerResult::CallToolResult(r)) if r.is_error == Some(true) => "tool-error",
        Ok(ServerResult::InputRequiredResult(_)) => "input-required",
        Ok(_) => "ok",
        Err(ServiceError::Timeout { .. }) => "timeout",
        Err(ServiceError::McpError(e)) if e.code.0 == -32602 => "validation",
        Err(ServiceError::McpError(_)) => "other",
        Err(_) => "connection",
    }
}

/// True when the error shows the request never reached the server: connection refused/reset before sending,
/// HTTP 503/429 (not processed), or an expired session (HTTP 404).
fn provably_not_delivered(e: &ServiceError) -> bool {
    use rmcp::transport::streamable_http_client::{HttpStatusError, StreamableHttpError};
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cur) = source {
        // `StreamableHttpError::HttpStatus` is `#[error(transparent)]`: its status never shows up as a `source()`,
        // so look inside the transport's own error type.
        match cur.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::HttpStatus(status)) => return status.status == 503 || status.status == 429,
            Some(StreamableHttpError::SessionExpired) => return true,
            Some(StreamableHttpError::Client(re)) if re.is_connect() => return true,
            _ => {}
        }
        if let Some(status) = cur.downcast_ref::<HttpStatusError>() {
            return status.status == 503 || status.status == 429;
        }
        if let Some(re) = cur.downcast_ref::<reqwest::Error>()
            && re.is_connect()
        {
            return true;
        }
        if let Some(io) = cur.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        if cur.to_string().contains("Session expired (HTTP 404)") {
            return true;
        }
        source = cur.source();
    }
    false
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;
