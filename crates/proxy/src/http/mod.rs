//! `pimcp-run serve --http`: the `pimcp-run` MCP server over Streamable HTTP at [`MCP_PATH`], shared by any number
//! of host sessions. One runtime serves them all, so each upstream server starts once and the sessions' calls are
//! multiplexed over its connection; server→client requests and approvals go to the session that made the call (see
//! [`HostBridge`]). Sessions of 2025-11-25 and older hosts are stateful (`Mcp-Session-Id`); 2026-07-28 requests
//! are answered statelessly. [`STATUS_PATH`] answers the runtime's status as JSON.
//!
//! In front of rmcp's `StreamableHttpService` sit the guards of [`guard`]: Host/Origin validation against DNS
//! rebinding, a bearer token (compared in constant time) that is mandatory whenever the listener is not loopback,
//! a request body cap, a cap on sessions and one on concurrent requests per session. Shutdown (first SIGINT/SIGTERM
//! or [`ServeOptions::shutdown`]): the listener closes, new requests get 503, calls in flight get up to
//! [`ServeOptions::drain_bound`], then sessions end and the runtime closes every server; a second signal kills at
//! once. [`attach_stdio`] is the other end: a stdio MCP server that relays a host to a running instance.

mod attach;
mod guard;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use pimcp_actors::{Runtime, RuntimeOptions, ShutdownReport};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::facade::Proxy;
use crate::forward::HostBridge;
use crate::server::{
    ProxyServer, ServeOptions, ShutdownSignals, run_until_shutdown, shutdown_runtime, spawn_reload_watch,
};

pub use attach::{AttachOptions, attach_stdio, attach_transport};
pub use guard::{AuthToken, LOOPBACK_HOSTS};

/// Where MCP is served.
pub const MCP_PATH: &str = "/mcp";
/// Where the status JSON is served (`GET`, same guards as MCP).
pub const STATUS_PATH: &str = "/status";
/// Schema name of the status JSON.
pub const STATUS_SCHEMA: &str = "pimcp/serve-status/v1";
/// Default cap of one request body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default cap of concurrent host sessions.
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Default cap of concurrent requests in one session.
pub const DEFAULT_MAX_REQUESTS_PER_SESSION: usize = 16;
/// Default idle time after which a session is forgotten (its host re-initializes on the next request).
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// How long the HTTP server may take to close its connections once sessions have ended.
const CONNECTIONS_CLOSE_BOUND: Duration = Duration::from_secs(2);
/// How long a shutdown waits, after the drain, for responses still being sent.
const RESPONSES_SETTLE_BOUND: Duration = Duration::from_secs(2);

/// How the HTTP server guards itself. `Debug` never shows the token.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Required as `Authorization: Bearer …` on every request when set; mandatory off loopback.
    pub token: Option<AuthToken>,
    /// `Host` values accepted besides [`LOOPBACK_HOSTS`] and the bound address (`host` or `host:port`; `*` accepts
    /// any host and needs a token).
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin`s accepted besides loopback ones (`scheme://host[:port]`). Requests without `Origin` pass.
    pub allowed_origins: Vec<String>,
    /// The largest request body accepted (default [`DEFAULT_MAX_BODY_BYTES`]); larger ones get 413.
    pub max_body_bytes: usize,
    /// The most sessions at once (default [`DEFAULT_MAX_SESSIONS`]); one more `initialize` gets 503.
    pub max_sessions: usize,
    /// The most requests of one session in flight at once (default [`DEFAULT_MAX_REQUESTS_PER_SESSION`]).
    pub max_requests_per_session: usize,
    /// How long a session may go unused before it is closed (default [`DEFAULT_SESSION_IDLE`]).
    pub session_idle: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_requests_per_session: DEFAULT_MAX_REQUESTS_PER_SESSION,
            session_idle: DEFAULT_SESSION_IDLE,
        }
    }
}

impl HttpOptions {
    /// Requires `token` as a bearer token on every request.
    pub fn with_token(mut self, token: AuthToken) -> Self {
        self.token = Some(token);
        self
    }

    /// Accepts these `Host` values too.
    pub fn with_allowed_hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// Accepts these browser origins too.
    pub fn with_allowed_origins(mut self, origins: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// Another body limit.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Another session cap.
    pub fn with_max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions.max(1);
        self
    }

    /// Another per-session cap.
    pub fn with_max_requests_per_session(mut self, requests: usize) -> Self {
        self.max_requests_per_session = requests.max(1);
        self
    }

    /// Another idle timeout for sessions.
    pub fn with_session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }

    /// Refuses a configuration that would expose the server without a token: any address that is not loopback
    /// (`0.0.0.0`, a LAN address, …) needs one, and so does `*` in [`HttpOptions::allowed_hosts`].
    pub fn check(&self, addr: &SocketAddr) -> Result<()> {
        if self.token.is_some() {
            return Ok(());
        }
        if !addr.ip().is_loopback() {
            return Err(Error::Serve {
                transport: "http",
                message: format!(
                    "refusing to serve on {addr} without a token: addresses other than loopback need \
                     --auth-token or --auth-token-file"
                ),
            });
        }
        if self.allowed_hosts.iter().any(|h| h.trim() == "*") {
            return Err(Error::Serve {
                transport: "http",
                message: "accepting any Host header needs a token (--auth-token or --auth-token-file)".to_owned(),
            });
        }
        Ok(())
    }
}

/// Binds `addr` after [`HttpOptions::check`].
pub async fn bind(addr: SocketAddr, http: &HttpOptions) -> Result<TcpListener> {
    http.check(&addr)?;
    TcpListener::bind(addr).await.map_err(|e| Error::Serve {
        transport: "http",
        message: format!("cannot listen on {addr}: {e}"),
    })
}

/// What the guards and the status route share.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) server: ProxyServer,
    pub(crate) sessions: Arc<LocalSessionManager>,
    pub(crate) guard: Arc<guard::Guard>,
}

/// Serves MCP over Streamable HTTP on `listener` until a shutdown is requested (first SIGINT/SIGTERM, or
/// `options.shutdown`), then drains and shuts the runtime down within `options.shutdown_bound`. `bridge` must be
/// the one whose handlers the runtime has. Checks `http` against the listener's address first.
pub async fn serve_http(
    runtime: Runtime,
    proxy: Proxy,
    bridge: HostBridge,
    listener: TcpListener,
    http: HttpOptions,
    options: ServeOptions,
) -> Result<ShutdownReport> {
    let local = match listener.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            runtime.shutdown(options.shutdown_bound).await;
            return Err(Error::Serve {
                transport: "http",
                message: format!("the listener has no address: {e}"),
            });
        }
    };
    if let Err(e) = http.check(&local) {
        runtime.shutdown(options.shutdown_bound).await;
        return Err(e);
    }
    let server = ProxyServer::new(proxy.clone(), bridge);
    let signals = ShutdownSignals::watch(options.shutdown.clone());
    let reloads = options.reload.clone().map(|reload| spawn_reload_watch(proxy, reload));
    let sessions_ct = CancellationToken::new();
    let guard = Arc::new(guard::Guard::new(&http, local));
    let app = router(&server, &http, guard.clone(), sessions_ct.clone());
    tracing::info!(url = %format!("http://{local}{MCP_PATH}"), token = http.token.is_some(), "serving MCP over HTTP");

    // The listener closes at the first request to stop; connections end once the sessions do.
    let stop_accepting = signals.graceful.clone();
    let serving = {
        let sessions_ct = sessions_ct.clone();
        async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(stop_accepting.cancelled_owned());
            let lingering = async {
                sessions_ct.cancelled().await;
                tokio::time::sleep(CONNECTIONS_CLOSE_BOUND).await;
            };
            tokio::select! {
                r = served => r.map_err(|e| Error::Serve { transport: "http", message: format!("the HTTP server failed: {e}") }),
                () = lingering => {
                    tracing::debug!("connections still open after the sessions ended; closing them");
                    Ok(())
                }
            }
        }
    };
    // Drained calls' answers are still being streamed to their hosts: wait for those responses (briefly: a
    // 2026-07-28 `subscriptions/listen` stream never ends by itself).
    let settle = {
        let guard = guard.clone();
        async move { guard.responses_sent(RESPONSES_SETTLE_BOUND).await }
    };
    let (served, immediate) =
        run_until_shutdown(&server, serving, &signals, &sessions_ct, options.drain_bound, settle).await;
    if let Err(e) = &served {
        tracing::error!(error = %e, "HTTP server failed");
    }
    server.stop();
    if let Some(r) = reloads {
        r.abort();
    }
    let report = shutdown_runtime(runtime, &signals, options.shutdown_bound, immediate).await;
    signals.stop();
    served.map(|()| report)
}

/// The whole HTTP entry point: installs a [`HostBridge`] as the runtime's handlers, starts the runtime, builds the
/// [`Proxy`] and runs [`serve_http`].
pub async fn run_http(
    options: RuntimeOptions,
    listener: TcpListener,
    http: HttpOptions,
    serve_options: ServeOptions,
) -> Result<ShutdownReport> {
    let (runtime, proxy, bridge) = crate::server::start_bridged(options, serve_options.shutdown_bound).await?;
    serve_http(runtime, proxy, bridge, listener, http, serve_options).await
}

/// `/mcp` (rmcp's service behind the guards) and `/status`.
fn router(
    server: &ProxyServer,
    http: &HttpOptions,
    guard: Arc<guard::Guard>,
    sessions_ct: CancellationToken,
) -> Router {
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(http.session_idle);
    let sessions = Arc::new(manager);
    // rmcp checks Host too (defence in depth), with the same list; Origin is checked by the guard only.
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(sessions_ct)
        .with_max_request_body_bytes(http.max_body_bytes);
    config = match guard.rmcp_hosts() {
        Some(hosts) => config.with_allowed_hosts(hosts),
        None => config.disable_allowed_hosts(),
    };
    let factory_server = server.clone();
    let service = StreamableHttpService::new(move || Ok(factory_server.clone()), sessions.clone(), config);
    let state = AppState {
        server: server.clone(),
        sessions,
        guard,
    };
    Router::new()
        .route(STATUS_PATH, axum::routing::get(status))
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::guard))
        .with_state(state)
}

/// `GET /status`: sessions, calls in flight, the operator notice and the runtime's status snapshot.
async fn status(State(state): State<AppState>) -> Response {
    let sessions = state.sessions.sessions.read().await.len();
    let proxy = state.server.proxy();
    let body = serde_json::json!({
        "schema": STATUS_SCHEMA,
        "sessions": sessions,
        "inFlight": state.server.in_flight(),
        "draining": state.server.is_draining(),
        "notice": proxy.notice(),
        "status": proxy.status(),
    });
    guard::json_response(http::StatusCode::OK, &body)
}
