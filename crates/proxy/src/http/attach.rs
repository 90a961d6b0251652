//! `pimcp-run --attach URL`: a stdio MCP server that relays its host, message for message, to a running
//! `pimcp-run serve --http` instance, so a host that only speaks stdio shares that instance's servers by changing
//! one line of its config. Requests the instance cannot take (connection refused, 401, …) are answered to the host
//! with a JSON-RPC error naming the URL instead of hanging; once the instance is unreachable or gone, every further
//! request is answered that way. The relay ends when stdin closes (exit status 1 if the instance went away) or on
//! SIGINT/SIGTERM.

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, Transport};
use rmcp::{RoleClient, RoleServer};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::guard::AuthToken;
use crate::error::{Error, Result};
use crate::server::stdin_pipe;

/// Where and how to attach.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AttachOptions {
    /// The instance's MCP endpoint, e.g. `http://127.0.0.1:8765/mcp`.
    pub url: String,
    /// The instance's bearer token, when it requires one.
    pub token: Option<AuthToken>,
    /// Cancelling it ends the relay (besides stdin EOF and SIGINT/SIGTERM).
    pub shutdown: Option<CancellationToken>,
}

impl AttachOptions {
    /// Attach to `url` with no token.
    pub fn new(url: impl Into<String>) -> AttachOptions {
        AttachOptions {
            url: url.into(),
            token: None,
            shutdown: None,
        }
    }

    /// Sends `token` as the bearer token.
    pub fn with_token(mut self, token: Option<AuthToken>) -> Self {
        self.token = token;
        self
    }

    /// Ends the relay when `token` is cancelled.
    pub fn with_shutdown_token(mut self, token: CancellationToken) -> Self {
        self.shutdown = Some(token);
        self
    }
}

/// Relays stdin/stdout to the instance at `options.url` until stdin closes, a signal, or the instance ends the
/// connection (an error).
pub async fn attach_stdio(options: AttachOptions) -> Result<()> {
    let host = (stdin_pipe(), tokio::io::stdout());
    attach_transport(host, options).await
}

/// The relay over any host-side transport (tests use an in-memory pipe). The whole relay is one `attach` span
/// (exported over OTLP like every pimcp span) recording how many host requests it relayed and its outcome.
pub async fn attach_transport<T, E, A>(host: T, options: AttachOptions) -> Result<()>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let span = tracing::info_span!(
        "attach",
        requests = tracing::field::Empty,
        outcome = tracing::field::Empty
    );
    let mut requests = 0u64;
    let outcome = relay(host, options, &mut requests).instrument(span.clone()).await;
    span.record("requests", requests);
    span.record("outcome", if outcome.is_ok() { "ok" } else { "error" });
    outcome
}

async fn relay<T, E, A>(host: T, options: AttachOptions, requests: &mut u64) -> Result<()>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let url = options.url.trim().to_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(attach_error(format!("--attach needs an http(s) URL, got `{url}`")));
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
    if let Some(token) = &options.token {
        config = config.auth_header(token.expose().to_owned());
    }
    let mut upstream = StreamableHttpClientTransport::from_config(config);
    let mut host = host.into_transport();
    let stop = options.shutdown.clone().unwrap_or_default();
    let signals = tokio::spawn({
        let stop = stop.clone();
        async move {
            if let Ok(mut signals) = crate::sys::stop_signals() {
                signals.recv().await;
                stop.cancel();
            }
        }
    });
    tracing::info!(%url, "relaying stdio to a pimcp-run instance");

    // Sends run concurrently (a POST lasts as long as its call) but start in arrival order.
    let mut to_upstream = FuturesUnordered::new();
    let mut to_host = FuturesUnordered::new();
    let shown = pimcp_config::redact_url(&url);
    // Set once the instance's connection has ended (refused at the first request, or closed later): from then on
    // every host request is answered at once with an error naming the URL, until the host closes stdin.
    let mut gone: Option<String> = None;
    let outcome = loop {
        tokio::select! {
            _ = stop.cancelled() => break Ok(()),
            message = host.receive() => {
                let Some(message) = message else { break Ok(()) };
                let id = match &message {
                    ClientJsonRpcMessage::Request(r) => {
                        *requests += 1;
                        Some(r.id.clone())
                    }
                    _ => None,
                };
                if let Some(reason) = &gone {
                    if let Some(id) = id {
                        let error = ErrorData::internal_error(format!("pimcp-run --attach: {reason}"), None);
                        to_host.push(Transport::<RoleServer>::send(&mut host, ServerJsonRpcMessage::error(error, Some(id))));
                    }
                    continue;
                }
                let send = Transport::<RoleClient>::send(&mut upstream, message);
                to_upstream.push(async move { (id, send.await) });
            }
            message = upstream.receive(), if gone.is_none() => {
                let Some(message) = message else {
                    let reason = format!(
                        "the pimcp-run instance at {shown} cannot be reached or closed the connection; \
                         check that `pimcp-run serve --http` runs there, then restart this MCP server"
                    );
                    tracing::warn!("{reason}");
                    gone = Some(reason);
                    continue;
                };
                to_host.push(Transport::<RoleServer>::send(&mut host, message));
            }
            Some((id, sent)) = to_upstream.next(), if !to_upstream.is_empty() => {
                if let Err(e) = sent {
                    tracing::warn!(error = %e, "relaying a message to the pimcp-run instance failed");
                    if let Some(id) = id {
                        // rmcp's error quotes the request URL, query and all.
                        let reason = format!("pimcp-run --attach could not reach the instance at {shown}: {e}");
                        let error = ErrorData::internal_error(pimcp_config::redact_text(&reason).into_owned(), None);
                        to_host.push(Transport::<RoleServer>::send(&mut host, ServerJsonRpcMessage::error(error, Some(id))));
                    }
                }
            }
            Some(sent) = to_host.next(), if !to_host.is_empty() => {
                if let Err(e) = sent {
                    break Err(attach_error(format!("writing to the host failed: {e}")));
                }
            }
        }
    };
    // The host closed stdin after the instance went away: the exit status says the relay failed.
    let outcome = match (outcome, gone) {
        (Ok(()), Some(reason)) => Err(attach_error(reason)),
        (outcome, _) => outcome,
    };
    // Let replies already on their way reach the host, then end the session with the instance.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while to_host.next().await.is_some() {}
    })
    .await;
    signals.abort();
    let _ = Transport::<RoleClient>::close(&mut upstream).await;
    let _ = Transport::<RoleServer>::close(&mut host).await;
    outcome
}

fn attach_error(message: String) -> Error {
    Error::Serve {
        transport: "http (attach)",
        message,
    }
}
