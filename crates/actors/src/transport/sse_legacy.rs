//! The legacy HTTP+SSE transport (MCP 2024-11-05), used only when `type: "sse"` is configured and a Streamable
//! HTTP POST was answered 404/405/406/415. rmcp 3.11 has no client for it, so this is a small one:
//! `GET url` opens an event stream whose first `endpoint` event names the POST URL (same origin only); each
//! client message is POSTed there; server messages arrive as `message` events.

use std::future::Future;
use std::time::Duration;

use http::HeaderMap;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, RoleClient};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::handshake::{self, Abort};
use super::http::HttpAuth;
use super::probe::display_url;
use super::{ConnectError, ConnectSpec, Connection, TransportKind};
use crate::process::StderrTail;

/// Largest SSE event we accept (like rmcp's Streamable HTTP limit).
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;
/// Cap on one POST of a client message.
const POST_TIMEOUT: Duration = Duration::from_secs(60);

/// Errors of the legacy SSE transport (never carrying header values).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LegacySseError {
    #[error("POST to the SSE message endpoint failed: {0}")]
    Post(String),
    #[error("the SSE message endpoint answered {0}")]
    Status(u16),
}

/// One parsed server-sent event.
#[derive(Debug, Default, PartialEq, Eq)]
struct SseEvent {
    event: Option<String>,
    data: String,
}

/// Incremental `text/event-stream` parser. Its own (the `sse-stream` crate rmcp brings has no bound on an event's
/// size): an event or an unterminated line over [`MAX_EVENT_BYTES`] ends the stream instead of growing memory.
#[derive(Default)]
struct SseParser {
    buf: Vec<u8>,
    current: SseEvent,
    has_data: bool,
}

impl SseParser {
    /// Feeds bytes; returns the events completed by them. `Err` when one event grows beyond the limit.
    fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, ()> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.is_empty() {
                if self.has_data || self.current.event.is_some() {
                    out.push(std::mem::take(&mut self.current));
                    self.has_data = false;
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f.to_owned(), v.strip_prefix(' ').unwrap_or(v).to_owned()),
                None => (line.clone(), String::new()),
            };
            match field.as_str() {
                "event" => self.current.event = Some(value),
                "data" => {
                    if self.has_data {
                        self.current.data.push('\n');
                    }
                    self.current.data.push_str(&value);
                    self.has_data = true;
                }
                _ => {}
            }
            if self.current.data.len() > MAX_EVENT_BYTES {
                return Err(());
            }
        }
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(());
        }
        Ok(out)
    }
}

/// The client side of one legacy SSE session.
pub(crate) struct LegacySseTransport {
    http: reqwest::Client,
    post_url: url::Url,
    headers: HeaderMap,
    bearer: Option<String>,
    rx: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for LegacySseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Transport<RoleClient> for LegacySseTransport {
    type Error = LegacySseError;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let mut request = self
            .http
            .post(self.post_url.clone())
            .timeout(POST_TIMEOUT)
            .headers(self.headers.clone())
            .json(&item);
        if let Some(token) = &self.bearer {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request
                .send()
                .await
                .map_err(|e| LegacySseError::Post(e.without_url().to_string()))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(LegacySseError::Status(response.status().as_u16()))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.rx.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.reader.abort();
        async { Ok(()) }
    }
}

pub(super) async fn connect<H: ClientHandler>(
    spec: ConnectSpec,
    http: reqwest::Client,
    url: url::Url,
    auth: HttpAuth,
    handler: H,
    deadline: Instant,
) -> Result<Connection<H>, ConnectError> {
    let name = spec.server.name.clone();
    let abort = |a: Abort| match a {
        Abort::Timeout => ConnectError::StartupTimeout {
            server: name.clone(),
            after: spec.server.timeouts.startup,
            stderr: String::new(),
        },
        Abort::Cancelled => ConnectError::Cancelled { server: name.clone() },
    };
    let shown = display_url(&url);
    let mut request = http
        .get(url.clone())
        .header(http::header::ACCEPT, "text/event-stream")
        .headers(auth.headers.clone());
    if let Some(token) = &auth.bearer {
        request = request.bearer_auth(token);
    }
    let mut response = handshake::bounded(deadline, &spec.cancel, request.send())
        .await
        .map_err(abort)?
        .map_err(|e| ConnectError::Http {
            server: name.clone(),
            status: None,
            hint: format!("cannot open the SSE stream at {shown}: {}", e.without_url()),
            transient: true,
        })?;
    let status = response.status().as_u16();
    if status == 401 {
        let challenge = response
            .headers()
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        return Err(ConnectError::NeedsAuth {
            server: name,
            challenge,
        });
    }
    let is_sse = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
    if !(200..300).contains(&status) || !is_sse {
        return Err(ConnectError::Http {
            server: name,
            status: Some(status),
            hint: format!(
                "{shown} answered {status} to the legacy SSE GET without an event stream — this URL does not speak MCP"
            ),
            transient: status >= 500,
        });
    }

    // Read until the `endpoint` event, then hand the rest of the stream to a reader task.
    let mut parser = SseParser::default();
    let mut early: Vec<SseEvent> = Vec::new();
    let endpoint = handshake::bounded(deadline, &spec.cancel, async {
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(c)) => c,
                _ => return None,
            };
            let events = parser.feed(&chunk).ok()?;
            let mut found = None;
            for ev in events {
                if found.is_none() && ev.event.as_deref() == Some("endpoint") {
                    found = Some(ev.data.trim().to_owned());
                } else {
                    early.push(ev);
                }
            }
            if found.is_some() {
                return found;
            }
        }
    })
    .await
    .map_err(abort)?
    .ok_or_else(|| ConnectError::Protocol {
        server: name.clone(),
        message: format!("the SSE stream at {shown} ended without an `endpoint` event"),
        stderr: String::new(),
    })?;
    let post_url = url
        .join(&endpoint)
        .ok()
        .filter(|u| u.origin() == url.origin())
        .ok_or_else(|| ConnectError::Protocol {
            server: name.clone(),
            message: "the SSE `endpoint` event is not a URL on the server's own origin".into(),
            stderr: String::new(),
        })?;

    let (tx, rx) = mpsc::channel::<ServerJsonRpcMessage>(64);
    let reader = tokio::spawn(async move {
        let deliver = |ev: SseEvent| {
            let tx = tx.clone();
            async move {
                if ev.event.as_deref().is_none_or(|e| e == "message")
                    && let Ok(msg) = serde_json::from_str::<ServerJsonRpcMessage>(&ev.data)
                {
                    let _ = tx.send(msg).await;
                }
            }
        };
        for ev in early {
            deliver(ev).await;
        }
        while let Ok(Some(chunk)) = response.chunk().await {
            let Ok(events) = parser.feed(&chunk) else { break };
            for ev in events {
                deliver(ev).await;
            }
        }
    });
    let transport = LegacySseTransport {
        http,
        post_url,
        headers: auth.headers.clone(),
        bearer: auth.bearer.clone(),
        rx,
        reader,
    };
    let transport = super::ended::Ended::new(crate::trace::traced(
        transport,
        spec.trace.as_ref(),
        TransportKind::LegacySse,
    ));
    let ended = transport.token();
    let client = handshake::bounded(
        deadline,
        &spec.cancel,
        handler.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
    )
    .await
    .map_err(abort)?
    .map_err(|e| ConnectError::Protocol {
        server: name.clone(),
        message: auth.redactor.apply(&handshake::describe(&e)),
        stderr: String::new(),
    })?;
    let Some(n) = handshake::negotiated(&client) else {
        return Err(ConnectError::Protocol {
            server: name,
            message: "the handshake finished without server information".into(),
            stderr: String::new(),
        });
    };
    Ok(Connection {
        ended,
        client,
        era: n.era,
        protocol_version: n.protocol_version,
        server_info: n.server_info,
        capabilities: n.capabilities,
        instructions: n.instructions,
        transport: TransportKind::LegacySse,
        pid: None,
        guarded: false,
        stderr: StderrTail::default(),
        session_id: None,
        resumed: false,
        child: None,
        http: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_events_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.feed(b"event: endpoint\r\ndata: /messages?sess").unwrap().is_empty());
        let evs = p
            .feed(b"ion=1\r\n\r\n: comment\n\ndata: {\"a\":1}\ndata: x\n\n")
            .unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(
            evs[0],
            SseEvent {
                event: Some("endpoint".into()),
                data: "/messages?session=1".into()
            }
        );
        assert_eq!(
            evs[1],
            SseEvent {
                event: None,
                data: "{\"a\":1}\nx".into()
            }
        );
    }
}
