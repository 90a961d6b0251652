//! Streamable HTTP transport: headers and bearer tokens resolved at connect, capped SSE resumption, session resume,
//! 401 → needs-auth, the shape probe on failure, and the legacy HTTP+SSE fallback when `type: "sse"` allows it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use pimcp_config::{AuthConfig, HttpTransport};
use rmcp::model::{ClientRequest, PingRequest, ServerPeerInfo};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _};
use tokio::time::Instant;

use super::handshake::{self, Abort};
use super::probe::{self, display_url};
use super::resume::{SessionClient, SessionState};
use super::secrets::{self, Redactor};
use super::{ConnectError, ConnectSpec, Connection, TransportKind, sse_legacy};
use crate::process::StderrTail;

/// SSE stream resumption (`Last-Event-ID`): at most this many reconnects per stream…
const SSE_MAX_RETRIES: usize = 5;
/// …with exponential delays capped here (rmcp's default retries forever).
const SSE_MAX_DELAY: Duration = Duration::from_secs(10);
/// Headers rmcp owns; configuring them is an error.
const RESERVED_HEADERS: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// Resolved credentials for one attempt.
pub(super) struct HttpAuth {
    pub headers: HeaderMap,
    pub bearer: Option<String>,
    pub redactor: Redactor,
}

pub(super) async fn resolve_auth(
    spec: &ConnectSpec,
    http: &HttpTransport,
    deadline: Instant,
) -> Result<HttpAuth, ConnectError> {
    let name = &spec.server.name;
    let abort = |a: Abort| abort_error(spec, a);
    let mut redactor = Redactor::default();
    // An API key in the URL (`?api_key=`) or a password in its user-info is a secret like a header value.
    pimcp_config::remember_url_secrets(&http.url);
    let mut headers = HeaderMap::new();
    for (key, value) in &http.headers {
        let header = HeaderName::from_bytes(key.as_bytes()).map_err(|_| ConnectError::Config {
            server: name.clone(),
            message: format!("`headers.{key}` is not a valid HTTP header name"),
        })?;
        if RESERVED_HEADERS.contains(&header.as_str()) {
            return Err(ConnectError::Config {
                server: name.clone(),
                message: format!("`headers.{key}` is managed by the MCP transport and cannot be configured"),
            });
        }
        let resolved = handshake::bounded(
            deadline,
            &spec.cancel,
            secrets::resolve(name, format!("headers.{key}"), value, &spec.process, &spec.project_dir),
        )
        .await
        .map_err(abort)??;
        redactor.add(&resolved);
        if let Some(token) = resolved.strip_prefix("Bearer ") {
            redactor.add(token);
        }
        let value = HeaderValue::from_str(&resolved).map_err(|_| ConnectError::Secret {
            server: name.clone(),
            message: format!("`headers.{key}` resolved to a value that is not a valid HTTP header value"),
            source: None,
        })?;
        headers.insert(header, value);
    }
    let mut bearer = None;
    if let AuthConfig::Bearer { token, token_env } = &spec.server.auth {
        let resolved = match (token, token_env) {
            (Some(token), _) => Some(
                handshake::bounded(
                    deadline,
                    &spec.cancel,
                    secrets::resolve(name, "bearerToken".into(), token, &spec.process, &spec.project_dir),
                )
                .await
                .map_err(abort)??,
            ),
            // Not a `!command`: nothing a retry could change, so a configuration error.
            (None, Some(var)) => Some(std::env::var(var).map_err(|_| ConnectError::Config {
                server: name.clone(),
                message: format!("`bearerTokenEnv` names `{var}`, which is not set"),
            })?),
            (None, None) => None,
        };
        bearer = resolved.filter(|t| !t.is_empty());
    }
    if let Some(token) = &spec.access_token {
        bearer = Some(token.expose().to_owned());
    }
    if let Some(t) = &bearer {
        redactor.add(t);
    }
    Ok(HttpAuth {
        headers,
        bearer,
        redactor,
    })
}

/// The error of a legacy fallback that did not connect either: the Streamable HTTP answer comes first (it is what a
/// user most likely mistyped), then what the legacy attempt said. Timeouts and cancellation stay what they are.
fn legacy_fallback_failed(server: &str, status: Option<u16>, hint: String, legacy: ConnectError) -> ConnectError {
    match legacy {
        ConnectError::StartupTimeout { .. } | ConnectError::Cancelled { .. } | ConnectError::NeedsAuth { .. } => legacy,
        other => ConnectError::Http {
            server: server.to_owned(),
            status,
            hint: format!("{hint}; the legacy HTTP+SSE transport did not connect either: {other}"),
            transient: false,
        },
    }
}

fn abort_error(spec: &ConnectSpec, a: Abort) -> ConnectError {
    match a {
        Abort::Timeout => ConnectError::StartupTimeout {
            server: spec.server.name.clone(),
            after: spec.server.timeouts.startup,
            stderr: String::new(),
        },
        Abort::Cancelled => ConnectError::Cancelled {
            server: spec.server.name.clone(),
        },
    }
}

pub(super) async fn connect<H: ClientHandler + Clone>(
    spec: ConnectSpec,
    http: HttpTransport,
    handler: H,
) -> Result<Connection<H>, ConnectError> {
    let name = spec.server.name.clone();
    let deadline = Instant::now() + spec.server.timeouts.startup;
    let url = url::Url::parse(&http.url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| ConnectError::Config {
            server: name.clone(),
            message: "`url` is not a valid http(s) URL".into(),
        })?;
    let auth = resolve_auth(&spec, &http, deadline).await?;
    let client = spec.http.client().map_err(|e| ConnectError::Config {
        server: name.clone(),
        message: format!("cannot build the HTTP client: {e}"),
    })?;

    let mut custom: HashMap<HeaderName, HeaderValue> = HashMap::new();
    for (k, v) in &auth.headers {
        custom.insert(k.clone(), v.clone());
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(http.url.clone())
        .custom_headers(custom)
        .reinit_on_expired_session(true);
    if let Some(token) = &auth.bearer {
        config = config.auth_header(token.clone());
    }
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(SSE_MAX_RETRIES);
    retry.max_delay = Some(SSE_MAX_DELAY);
    config.retry_config = Arc::new(retry);

    // `type: "sse"`: one POST decides; 404/405/406/415 means the endpoint is the legacy HTTP+SSE transport.
    if http.allow_legacy_sse {
        let finding = handshake::bounded(
            deadline,
            &spec.cancel,
            probe::probe_endpoint(&client, &url, &auth.headers, auth.bearer.as_deref()),
        )
        .await
        .map_err(|a| abort_error(&spec, a))?;
        if finding.legacy_sse_candidate {
            tracing::info!(server = %name, status = ?finding.status, "using the legacy HTTP+SSE transport");
            return sse_legacy::connect(spec, client, url, auth, handler, deadline).await;
        }
    }

    let state = SessionState::new(&http.url, spec.resume_session.clone());
    let session_client = SessionClient {
        http: client.clone(),
        state: state.clone(),
        auth: spec.token_source.clone(),
    };
    let transport = super::ended::Ended::new(crate::trace::traced(
        StreamableHttpClientTransport::with_client(session_client, config),
        spec.trace.as_ref(),
        TransportKind::StreamableHttp,
    ));
    let ended = transport.token();
    // A session to resume proves the initialize era: skip the discover probe.
    let lifecycle = if spec.resume_session.as_ref().is_some_and(|r| r.url == http.url) {
        ClientLifecycleMode::Initialize
    } else {
        handshake::lifecycle(spec.server.protocol, spec.era_hint)
    };
    let result = handshake::bounded(
        deadline,
        &spec.cancel,
        handler.clone().serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .map_err(|a| abort_error(&spec, a))?;
    let client = match result {
        Ok(client) => client,
        Err(error) => {
            if error.is_authorization_required() || error.auth_challenge().is_some() {
                return Err(ConnectError::NeedsAuth {
                    server: name,
                    challenge: error.auth_challenge().map(str::to_owned),
                });
            }
            let finding = handshake::bounded(
                deadline.max(Instant::now() + probe::PROBE_TIMEOUT),
                &spec.cancel,
                probe::probe_endpoint(&client, &url, &auth.headers, auth.bearer.as_deref()),
            )
            .await
            .map_err(|a| abort_error(&spec, a))?;
            if finding.status == Some(401) {
                return Err(ConnectError::NeedsAuth {
                    server: name,
                    challenge: finding.challenge,
                });
            }
            // A definitive "not this transport" answer (404/405/406/415 to the POST) from a `url` server: it may be
            // the legacy HTTP+SSE transport. Auth failures and timeouts returned above, so they never fall back.
            if finding.legacy_sse_candidate && !http.allow_legacy_sse {
                tracing::info!(server = %name, status = ?finding.status, "Streamable HTTP refused; trying the legacy HTTP+SSE transport");
                let legacy_name = name.clone();
                return sse_legacy::connect(spec, client, url, auth, handler, deadline)
                    .await
                    .map_err(|e| legacy_fallback_failed(&legacy_name, finding.status, finding.hint, e));
            }
            let detail = auth.redactor.apply(&handshake::describe(&error));
            let hint = if finding.speaks_mcp {
                format!("{} ({detail})", finding.hint)
            } else {
                finding.hint
            };
            return Err(ConnectError::Http {
                server: name,
                status: finding.status,
                hint,
                transient: finding.transient,
            });
        }
    };

    // A re-adopted session is confirmed with one ping: on 404 the transport re-initializes and retries it.
    if state.resumed() {
        let ping = client.send_request(ClientRequest::PingRequest(PingRequest::default()));
        let _ = handshake::bounded(deadline, &spec.cancel, ping).await;
        if !state.resumed()
            && let Some(result) = state.initialize_result()
        {
            client.peer().set_peer_info(ServerPeerInfo::from(result));
        }
    }
    let Some(n) = handshake::negotiated(&client) else {
        return Err(ConnectError::Protocol {
            server: name,
            message: "the handshake finished without server information".into(),
            stderr: String::new(),
        });
    };
    tracing::debug!(server = %name, url = %display_url(&url), era = ?n.era, resumed = state.resumed(), "connected");
    Ok(Connection {
        ended,
        client,
        era: n.era,
        protocol_version: n.protocol_version,
        server_info: n.server_info,
        capabilities: n.capabilities,
        instructions: n.instructions,
        transport: TransportKind::StreamableHttp,
        pid: None,
        guarded: false,
        stderr: StderrTail::default(),
        session_id: state.current_session(),
        resumed: state.resumed(),
        child: None,
        http: Some(state),
    })
}
