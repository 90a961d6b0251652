//! The shape probe: after a failed HTTP connect, one plain POST that turns an opaque transport error into a
//! hint a person can act on (`endpoint returned HTML (200) — this URL does not speak MCP`, `401 without
//! WWW-Authenticate`, connection refused, TLS not trusted, …).
//!
//! The probe sends a JSON-RPC `ping` without a session: a Streamable HTTP server answers it with JSON (usually a
//! 4xx "session required"), so no session is created on the server as a side effect.

use std::time::Duration;

use http::HeaderMap;

/// Cap on the whole probe.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the probe learned about an endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ProbeFinding {
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// One sentence for a person.
    pub hint: String,
    /// Whether trying again later may succeed (refused, timeout, 5xx, 429).
    pub transient: bool,
    /// `WWW-Authenticate` of a 401, when present.
    pub challenge: Option<String>,
    /// The status suggests the legacy HTTP+SSE transport (404/405/406/415 on POST).
    pub legacy_sse_candidate: bool,
    /// The endpoint answered like an MCP server (JSON or SSE).
    pub speaks_mcp: bool,
}

/// `origin + path` of a URL, never its query (which may carry a token).
pub(crate) fn display_url(url: &url::Url) -> String {
    format!("{}{}", url.origin().ascii_serialization(), url.path())
}

/// Probes `url` with the server's headers (and bearer token, if any).
pub(super) async fn probe_endpoint(
    http: &reqwest::Client,
    url: &url::Url,
    headers: &HeaderMap,
    bearer: Option<&str>,
) -> ProbeFinding {
    let shown = display_url(url);
    let mut request = http
        .post(url.clone())
        .timeout(PROBE_TIMEOUT)
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .header(http::header::CONTENT_TYPE, "application/json")
        .headers(headers.clone())
        .body(r#"{"jsonrpc":"2.0","id":"pimcp-probe","method":"ping"}"#);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => return classify_send_error(&shown, &e),
    };
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default();
    let challenge = response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let speaks_mcp = content_type == "application/json" || content_type == "text/event-stream";
    let mut finding = ProbeFinding {
        status: Some(status),
        hint: String::new(),
        transient: false,
        challenge: challenge.clone(),
        legacy_sse_candidate: matches!(status, 404 | 405 | 406 | 415),
        speaks_mcp,
    };
    finding.hint = match status {
        401 if challenge.is_some() => format!("{shown} requires authorization (401 with a WWW-Authenticate challenge)"),
        401 => format!(
            "{shown} answered 401 without WWW-Authenticate — it wants credentials but does not say how; set `headers` \
             or `auth: \"bearer\"`"
        ),
        403 => format!("{shown} answered 403 Forbidden — the credentials were rejected or lack permission"),
        404 => format!("{shown} answered 404 Not Found — check the URL path (MCP endpoints are often /mcp)"),
        405 | 406 | 415 => format!(
            "{shown} answered {status} to a Streamable HTTP POST — it may speak the legacy HTTP+SSE transport (set \
             `type: \"sse\"`) or this is not the MCP endpoint"
        ),
        429 => {
            finding.transient = true;
            format!("{shown} answered 429 Too Many Requests — rate limited, try again later")
        }
        500..=599 => {
            finding.transient = true;
            format!("{shown} answered {status} — the server failed")
        }
        _ if content_type == "text/html" => {
            format!("endpoint returned HTML ({status}) — this URL does not speak MCP ({shown})")
        }
        _ if !speaks_mcp => format!(
            "endpoint returned {} ({status}) — this URL does not speak MCP ({shown})",
            if content_type.is_empty() {
                "no content type"
            } else {
                content_type.as_str()
            }
        ),
        _ => format!("{shown} answers like an MCP endpoint ({status}), but the handshake failed"),
    };
    finding
}

fn classify_send_error(shown: &str, e: &reqwest::Error) -> ProbeFinding {
    let chain = error_chain(e);
    let (hint, transient) = if e.is_timeout() {
        (
            format!("{shown} did not answer within {}s", PROBE_TIMEOUT.as_secs()),
            true,
        )
    } else if chain.contains("certificate") || chain.contains("unknownissuer") || chain.contains("tls") {
        (
            format!("TLS certificate of {shown} is not trusted (or the TLS handshake failed)"),
            false,
        )
    } else if chain.contains("refused") {
        (format!("connection refused by {shown} — is the server running?"), true)
    } else if chain.contains("dns") || chain.contains("resolve") || chain.contains("name or service not known") {
        (format!("host of {shown} could not be resolved"), true)
    } else if e.is_connect() {
        (format!("cannot connect to {shown}"), true)
    } else {
        (format!("request to {shown} failed"), true)
    };
    ProbeFinding {
        status: None,
        hint,
        transient,
        challenge: None,
        legacy_sse_candidate: false,
        speaks_mcp: false,
    }
}

/// The lower-cased text of an error and all its sources, without the URL.
fn error_chain(e: &reqwest::Error) -> String {
    let mut out = String::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&s.to_string().to_ascii_lowercase());
        out.push(' ');
        source = s.source();
    }
    out
}
