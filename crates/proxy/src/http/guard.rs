//! The guards in front of every HTTP route of `pimcp-run serve`, in this order: `Host` and `Origin` validation
//! (403; DNS rebinding and cross-site pages), the bearer token (401, compared in constant time, never logged),
//! draining after a shutdown request (503), and for MCP POSTs the body cap (413), a body that is no valid message
//! (400 with the JSON-RPC error `host_input.rs` gives it), the session cap on `initialize`
//! (503) and the per-session cap on concurrent requests (429). A request that passes keeps its slot until its
//! response body (an SSE stream for a tool call) has been sent or dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt as _;
use http::{HeaderValue, Method, StatusCode, header};
use rmcp::model::{ClientRequest, JsonRpcMessage};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{AppState, HttpOptions, MCP_PATH};
use crate::error::{Error, Result};

/// Host names always accepted (any port).
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// The session header of Streamable HTTP.
const SESSION_HEADER: &str = "mcp-session-id";
/// Smallest token accepted: shorter ones are guessable.
const MIN_TOKEN_CHARS: usize = 16;

/// The bearer token of `pimcp-run serve`. `Debug` never shows it; compare with [`AuthToken::matches`].
#[derive(Clone)]
pub struct AuthToken(Arc<str>);

impl std::fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthToken(<redacted>)")
    }
}

impl AuthToken {
    /// A token of at least 16 visible ASCII characters (no spaces).
    pub fn new(token: impl Into<String>) -> Result<AuthToken> {
        let token = token.into();
        let token = token.trim();
        if token.chars().count() < MIN_TOKEN_CHARS {
            return Err(token_error(format!(
                "the auth token is too short: use at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"
            )));
        }
        if !token.chars().all(|c| c.is_ascii_graphic()) {
            return Err(token_error(
                "the auth token must be visible ASCII characters without spaces".to_owned(),
            ));
        }
        Ok(AuthToken(Arc::from(token)))
    }

    /// The token in `path` (surrounding whitespace and a trailing newline are ignored).
    pub fn from_file(path: &Path) -> Result<AuthToken> {
        let text = pimcp_config::read_text_bounded(path, 64 * 1024)
            .map_err(|e| token_error(format!("cannot read the auth token file `{}`: {e}", path.display())))?;
        AuthToken::new(text).map_err(|e| token_error(format!("auth token file `{}`: {e}", path.display())))
    }

    /// Whether `presented` is the token, in time that does not depend on where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), presented)
    }

    /// The token itself, for a client that must send it (`--attach`).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

fn token_error(message: String) -> Error {
    Error::Serve {
        transport: "http",
        message,
    }
}

/// Compares every byte of the longer input whatever the contents; only the lengths' equality leaks.
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let mut diff = u8::from(expected.len() != presented.len());
    for i in 0..expected.len().max(presented.len()) {
        let a = expected.get(i).copied().unwrap_or(0);
        let b = presented.get(i).copied().unwrap_or(0xff);
        diff |= a ^ b;
    }
    std::hint::black_box(diff) == 0
}

/// One accepted `Host` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    host: String,
    port: Option<u16>,
}

fn normalize_host(host: &str) -> String {
    host.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn parse_rule(entry: &str) -> Option<HostRule> {
    let entry = entry.trim();
    if entry.is_empty() {
        return None;
    }
    if let Ok(authority) = http::uri::Authority::try_from(entry) {
        return Some(HostRule {
            host: normalize_host(authority.host()),
            port: authority.port_u16(),
        });
    }
    // A bare IPv6 address (`::1`) is not an authority.
    Some(HostRule {
        host: normalize_host(entry),
        port: None,
    })
}

/// The guards' configuration and per-session bookkeeping.
pub(crate) struct Guard {
    token: Option<AuthToken>,
    any_host: bool,
    hosts: Vec<HostRule>,
    origins: Vec<String>,
    max_body: usize,
    max_sessions: usize,
    per_session: usize,
    /// Serializes `initialize` requests so the session cap cannot be overshot.
    initializing: tokio::sync::Mutex<()>,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Requests without a session (2026-07-28) share these.
    stateless: Arc<Semaphore>,
    /// MCP responses whose body is still being sent.
    sending: Arc<Sending>,
}

/// Counts response bodies being sent; notified when the count drops to zero.
#[derive(Default)]
struct Sending {
    count: AtomicUsize,
    idle: tokio::sync::Notify,
}

/// One response body being sent.
struct SendingGuard(Arc<Sending>);

impl SendingGuard {
    fn new(sending: &Arc<Sending>) -> SendingGuard {
        sending.count.fetch_add(1, Ordering::SeqCst);
        SendingGuard(sending.clone())
    }
}

impl Drop for SendingGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Guard {
    pub(crate) fn new(http: &HttpOptions, local: SocketAddr) -> Guard {
        let mut hosts: Vec<HostRule> = LOOPBACK_HOSTS.iter().filter_map(|h| parse_rule(h)).collect();
        if !local.ip().is_unspecified() {
            hosts.push(HostRule {
                host: normalize_host(&local.ip().to_string()),
                port: None,
            });
        }
        let any_host = http.allowed_hosts.iter().any(|h| h.trim() == "*");
        hosts.extend(
            http.allowed_hosts
                .iter()
                .filter(|h| h.trim() != "*")
                .filter_map(|h| parse_rule(h)),
        );
        hosts.dedup();
        let origins = http
            .allowed_origins
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
            .filter(|o| !o.is_empty())
            .collect();
        Guard {
            token: http.token.clone(),
            any_host,
            hosts,
            origins,
            max_body: http.max_body_bytes,
            max_sessions: http.max_sessions.max(1),
            per_session: http.max_requests_per_session.max(1),
            initializing: tokio::sync::Mutex::new(()),
            slots: Mutex::new(HashMap::new()),
            stateless: Arc::new(Semaphore::new(
                http.max_sessions.max(1) * http.max_requests_per_session.max(1),
            )),
            sending: Arc::default(),
        }
    }

    /// Waits until every MCP response that passed the guards has been sent (or dropped), at most `bound`.
    pub(crate) async fn responses_sent(&self, bound: Duration) {
        let all_sent = async {
            loop {
                let notified = self.sending.idle.notified();
                if self.sending.count.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(bound, all_sent).await;
    }

    /// The same host list for rmcp's own check, or `None` when any host is accepted.
    pub(crate) fn rmcp_hosts(&self) -> Option<Vec<String>> {
        if self.any_host {
            return None;
        }
        Some(
            self.hosts
                .iter()
                .map(|r| match (r.port, r.host.contains(':')) {
                    (Some(p), true) => format!("[{}]:{p}", r.host),
                    (Some(p), false) => format!("{}:{p}", r.host),
                    (None, _) => r.host.clone(),
                })
                .collect(),
        )
    }

    fn host_allowed(&self, request: &Request) -> bool {
        if self.any_host {
            return true;
        }
        let authority = match request.headers().get(header::HOST).and_then(|h| h.to_str().ok()) {
            Some(h) => http::uri::Authority::try_from(h).ok(),
            None => request.uri().authority().cloned(),
        };
        let Some(authority) = authority else {
            return false;
        };
        let host = normalize_host(authority.host());
        let port = authority.port_u16();
        self.hosts
            .iter()
            .any(|r| r.host == host && r.port.is_none_or(|p| Some(p) == port))
    }

    /// No `Origin` (not a browser) passes; a browser origin must be http(s) on an accepted host, or listed.
    fn origin_allowed(&self, request: &Request) -> bool {
        let Some(origin) = request.headers().get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let normalized = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        if self.origins.contains(&normalized) {
            return true;
        }
        let Ok(uri) = http::Uri::try_from(normalized.as_str()) else {
            return false;
        };
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return false;
        }
        let Some(authority) = uri.authority() else {
            return false;
        };
        if self.any_host && self.origins.is_empty() {
            return true;
        }
        let host = normalize_host(authority.host());
        self.hosts.iter().any(|r| r.host == host)
    }

    fn authorized(&self, request: &Request) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let Some(value) = request.headers().get(header::AUTHORIZATION) else {
            return false;
        };
        let value = value.as_bytes();
        let Some(space) = value.iter().position(|&b| b == b' ') else {
            return false;
        };
        let (scheme, rest) = value.split_at(space);
        scheme.eq_ignore_ascii_case(b"bearer") && token.matches(rest.trim_ascii())
    }

    fn session_slot(&self, id: &str) -> Arc<Semaphore> {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slots
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_session)))
            .clone()
    }

    fn forget_sessions_except(&self, live: &[String]) {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slots.retain(|id, _| live.iter().any(|l| l == id));
    }
}

/// The middleware.
pub(crate) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let guard = &state.guard;
    if !guard.host_allowed(&request) {
        tracing::warn!("rejected a request with a Host header that is not accepted (possible DNS rebinding)");
        return plain(StatusCode::FORBIDDEN, "Forbidden: Host header is not allowed");
    }
    if !guard.origin_allowed(&request) {
        tracing::warn!("rejected a request with an Origin header that is not accepted");
        return plain(StatusCode::FORBIDDEN, "Forbidden: Origin header is not allowed");
    }
    if !guard.authorized(&request) {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: a valid bearer token is required",
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"pimcp\""),
        );
        return response;
    }
    if state.server.is_draining() && request.method() != Method::DELETE {
        let mut response = plain(StatusCode::SERVICE_UNAVAILABLE, "pimcp-run is shutting down");
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    if request.method() != Method::POST || request.uri().path() != MCP_PATH {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > guard.max_body as u64) {
        return too_large(guard.max_body);
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, guard.max_body).await {
        Ok(b) => b,
        Err(_) => return too_large(guard.max_body),
    };
    // The body is decoded once here, as rmcp will decode it: one that yields no message gets the JSON-RPC error it
    // is owed (`host_input.rs`); the message itself says whether a request without a session is an `initialize`.
    let message = match crate::host_input::decode(&bytes) {
        Ok(message) => Some(message),
        Err(skip) => {
            if let Some(answer) = crate::host_input::reject(&bytes, &skip) {
                let mut response = Response::new(Body::from(answer));
                *response.status_mut() = StatusCode::BAD_REQUEST;
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                return response;
            }
            None
        }
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = session {
        // Unknown ids go through untouched: rmcp answers 404 and the host re-initializes.
        if !state.sessions.sessions.read().await.contains_key(id.as_str()) {
            return next.run(request).await;
        }
        let Ok(permit) = guard.session_slot(&id).try_acquire_owned() else {
            return busy(guard.per_session, "session");
        };
        let sending = SendingGuard::new(&guard.sending);
        return hold(next.run(request).await, (permit, sending));
    }
    // No session: an `initialize` (a new session) or a stateless 2026-07-28 request.
    let initialize_id = match &message {
        Some(JsonRpcMessage::Request(r)) if matches!(r.request, ClientRequest::InitializeRequest(_)) => {
            Some(r.id.clone())
        }
        _ => None,
    };
    if let Some(id) = initialize_id {
        let _one_at_a_time = guard.initializing.lock().await;
        let live: Vec<String> = state
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .map(ToString::to_string)
            .collect();
        guard.forget_sessions_except(&live);
        if live.len() >= guard.max_sessions {
            tracing::warn!(
                sessions = live.len(),
                "refused a new session: the session cap is reached"
            );
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32000,
                    "message": format!("pimcp-run serves at most {} sessions at once; try again later", guard.max_sessions),
                },
            });
            let mut response = json_response(StatusCode::SERVICE_UNAVAILABLE, &body);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return response;
        }
        return next.run(request).await;
    }
    let Ok(permit) = guard.stateless.clone().try_acquire_owned() else {
        return busy(
            guard.per_session * guard.max_sessions,
            "server (requests without a session)",
        );
    };
    let sending = SendingGuard::new(&guard.sending);
    hold(next.run(request).await, (permit, sending))
}

/// Keeps `permit` (a request slot and the sending count) until the response body has been sent or dropped.
fn hold(response: Response, permit: (OwnedSemaphorePermit, SendingGuard)) -> Response {
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &permit;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn too_large(max: usize) -> Response {
    let mut response = Response::new(Body::from(format!(
        "Payload Too Large: request bodies are limited to {max} bytes"
    )));
    *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
    response
}

fn busy(limit: usize, scope: &str) -> Response {
    let mut response = Response::new(Body::from(format!(
        "Too Many Requests: at most {limit} concurrent requests per {scope}"
    )));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = Response::new(Body::from(Bytes::from(bytes)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn guard(http: HttpOptions) -> Guard {
        Guard::new(&http, "127.0.0.1:8080".parse().unwrap())
    }

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut builder = http::Request::builder().method(Method::POST).uri("/mcp");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn equal_tokens_match_and_any_difference_does_not() {
        assert!(constant_time_eq(b"0123456789abcdef", b"0123456789abcdef"));
        assert!(!constant_time_eq(b"0123456789abcdef", b"0123456789abcdeF"));
        assert!(!constant_time_eq(b"0123456789abcdef", b"0123456789abcde"));
        assert!(!constant_time_eq(b"0123456789abcdef", b"0123456789abcdef0"));
        assert!(!constant_time_eq(b"0123456789abcdef", b""));
    }

    #[test]
    fn tokens_must_be_long_and_visible_and_never_show_in_debug() {
        assert!(AuthToken::new("short").is_err());
        assert!(AuthToken::new("has a space in it, long enough").is_err());
        let token = AuthToken::new(" 0123456789abcdef0123\n").unwrap();
        assert_eq!(token.expose(), "0123456789abcdef0123");
        assert!(!format!("{token:?}").contains("0123"));
        let options = HttpOptions::default().with_token(token);
        assert!(!format!("{options:?}").contains("0123"), "{options:?}");
    }

    #[test]
    fn loopback_hosts_pass_and_others_do_not() {
        let g = guard(HttpOptions::default());
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST",
            "127.0.0.1",
        ] {
            assert!(g.host_allowed(&request(&[("host", host)])), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost.evil",
        ] {
            assert!(!g.host_allowed(&request(&[("host", host)])), "{host}");
        }
        let g = guard(HttpOptions::default().with_allowed_hosts(["mcp.internal:9000"]));
        assert!(g.host_allowed(&request(&[("host", "mcp.internal:9000")])));
        assert!(!g.host_allowed(&request(&[("host", "mcp.internal:9001")])));
    }

    #[test]
    fn browser_origins_must_be_loopback_or_listed() {
        let g = guard(HttpOptions::default().with_allowed_origins(["https://app.example.com"]));
        assert!(g.origin_allowed(&request(&[])), "no Origin: not a browser");
        assert!(g.origin_allowed(&request(&[("origin", "http://localhost:3000")])));
        assert!(g.origin_allowed(&request(&[("origin", "https://app.example.com")])));
        assert!(!g.origin_allowed(&request(&[("origin", "http://evil.example")])));
        assert!(!g.origin_allowed(&request(&[("origin", "null")])));
        assert!(!g.origin_allowed(&request(&[("origin", "file://localhost")])));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_the_token_exact() {
        let token = AuthToken::new("0123456789abcdef0123").unwrap();
        let g = guard(HttpOptions::default().with_token(token));
        assert!(g.authorized(&request(&[("authorization", "Bearer 0123456789abcdef0123")])));
        assert!(g.authorized(&request(&[("authorization", "bearer 0123456789abcdef0123")])));
        assert!(!g.authorized(&request(&[("authorization", "Bearer 0123456789abcdef012")])));
        assert!(!g.authorized(&request(&[("authorization", "Basic 0123456789abcdef0123")])));
        assert!(!g.authorized(&request(&[("authorization", "0123456789abcdef0123")])));
        assert!(!g.authorized(&request(&[])));
        assert!(
            guard(HttpOptions::default()).authorized(&request(&[])),
            "no token configured"
        );
    }

    #[test]
    fn off_loopback_needs_a_token() {
        let open = HttpOptions::default();
        assert!(open.check(&"127.0.0.1:1".parse().unwrap()).is_ok());
        assert!(
            open.check(&"127.0.0.2:1".parse().unwrap()).is_ok(),
            "all of 127/8 is loopback"
        );
        assert!(open.check(&"[::1]:1".parse().unwrap()).is_ok());
        let err = open.check(&"0.0.0.0:1".parse().unwrap()).unwrap_err().to_string();
        assert!(err.contains("without a token"), "{err}");
        assert!(open.check(&"192.168.1.10:1".parse().unwrap()).is_err());
        assert!(
            HttpOptions::default()
                .with_allowed_hosts(["*"])
                .check(&"127.0.0.1:1".parse().unwrap())
                .is_err()
        );
        let token = AuthToken::new("0123456789abcdef0123").unwrap();
        assert!(
            HttpOptions::default()
                .with_token(token)
                .check(&"0.0.0.0:1".parse().unwrap())
                .is_ok()
        );
    }
}
