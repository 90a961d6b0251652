//! Transports of the runtime: one [`connect`] that turns a server's config into a live rmcp client over
//! stdio (child process), Streamable HTTP (with session resume and the legacy SSE fallback) or a Unix socket,
//! negotiating the protocol era, bounded by the startup timeout and cancellable.
//!
//! API boundary: the server actor builds a [`ConnectSpec`] per attempt and gets back a [`Connection`] (or a
//! [`ConnectError`] that says what happened, never a secret). Closing is [`Connection::close`], bounded.

mod cancel_on_close;
mod child_pipes;
mod ended;
mod error;
mod handshake;
mod http;
pub(crate) mod kind;
pub mod lines;
mod probe;
mod resume;
mod secrets;
mod socket;
mod sse_legacy;
mod stdio;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{Implementation, ServerCapabilities};
use rmcp::service::RunningService;
use rmcp::{ClientHandler, RoleClient};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use error::ConnectError;
pub use kind::TransportKind;
pub(crate) use resume::SessionResume;
pub(crate) use secrets::{resolve as resolve_secret, secret_guardian};

use crate::process::{ChildProcess, ProcessOptions, ShutdownOutcome, StderrTail};

/// Everything one connect attempt needs; built by the server actor for each attempt.
#[derive(Clone)]
pub struct ConnectSpec {
    /// The server to connect to.
    pub server: pimcp_config::ServerConfig,
    /// Default working directory of stdio servers.
    pub project_dir: PathBuf,
    /// One shared client for the whole runtime, built on first use (see [`SharedHttp`]).
    pub http: SharedHttp,
    /// The era remembered in the metadata cache (used with protocol `auto`).
    pub era_hint: Option<Era>,
    /// How stdio servers are spawned and guarded.
    pub process: ProcessOptions,
    /// Cancelling aborts the attempt promptly and kills any child.
    pub cancel: CancellationToken,
    /// A previous Streamable HTTP session to re-adopt first (from [`Connection::resume_token`] or
    /// [`Connection::abandon`]); on 404 the transport re-initializes fresh.
    pub resume_session: Option<SessionResume>,
    /// An OAuth access token from the auth layer, sent as `Authorization: Bearer` (overrides `bearerToken`).
    pub access_token: Option<pimcp_config::Secret>,
    /// Record this connection in the JSONL protocol trace (`settings.trace` / per-server `trace`).
    pub trace: Option<crate::trace::ProtocolTrace>,
    /// Streamable HTTP: supplies every request's bearer token (overriding `access_token` once connected) and renews
    /// it on 401 / 403 `insufficient_scope` (one renewal, one retry per request).
    pub token_source: Option<Arc<dyn crate::auth::TokenSource>>,
    /// The largest message read from a stdio or socket server (`settings.maxMessageBytes`).
    pub max_message_bytes: usize,
}

impl std::fmt::Debug for ConnectSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectSpec")
            .field("server", &self.server.name)
            .field("project_dir", &self.project_dir)
            .field("era_hint", &self.era_hint)
            .field("process", &self.process)
            .field("resume_session", &self.resume_session.is_some())
            .field("trace", &self.trace.is_some())
            .field("token_source", &self.token_source.is_some())
            .finish_non_exhaustive()
    }
}

/// The protocol era a connection negotiated (remembered per server in the metadata cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Era {
    /// `initialize` handshake, protocol ≤ 2025-11-25 (has sessions and `ping`).
    Legacy,
    /// 2026-07-28 `server/discover`, per-request `_meta`, no sessions, no `ping`.
    Stateless,
}

/// A live connection: the rmcp client plus what was negotiated, and the process or session behind it.
pub struct Connection<H: ClientHandler> {
    /// The running rmcp client.
    pub client: RunningService<RoleClient, H>,
    /// The protocol era that was negotiated.
    pub era: Era,
    /// The negotiated protocol version, e.g. `2025-11-25`.
    pub protocol_version: String,
    /// The server's `serverInfo`.
    pub server_info: Option<Implementation>,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's `instructions`.
    pub instructions: Option<String>,
    /// The transport in use.
    pub transport: TransportKind,
    /// Pid of the server process (stdio; it leads the server's process group).
    pub pid: Option<u32>,
    /// Stdio only: whether the runtime's guardian watches the server's process group.
    pub guarded: bool,
    /// The child's stderr tail (empty for network transports).
    pub stderr: StderrTail,
    /// The `Mcp-Session-Id` right after connect (Streamable HTTP, legacy era).
    pub session_id: Option<String>,
    /// True when `resume_session` was re-adopted by the server (no new initialize was needed).
    pub resumed: bool,
    child: Option<ChildProcess>,
    http: Option<Arc<resume::SessionState>>,
    /// Cancelled when rmcp's service loop has ended (it closes the transport then; see `ended`).
    ended: CancellationToken,
}

impl<H: ClientHandler> std::fmt::Debug for Connection<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("era", &self.era)
            .field("protocol_version", &self.protocol_version)
            .field("transport", &self.transport)
            .field("pid", &self.pid)
            .field("resumed", &self.resumed)
            .finish_non_exhaustive()
    }
}

/// What [`Connection::close`] had to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseOutcome {
    /// A network transport was closed (an HTTP session is deleted politely).
    Disconnected,
    /// A child process was shut down and reaped.
    Process(ShutdownOutcome),
}

impl<H: ClientHandler> Connection<H> {
    /// Cancelled once rmcp's service loop for this connection has ended, whatever ended it: the connection is dead.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// The current `Mcp-Session-Id` (it changes when the transport re-initializes after a 404).
    pub fn current_session_id(&self) -> Option<String> {
        self.http.as_ref().and_then(|s| s.current_session())
    }

    /// What a later [`ConnectSpec::resume_session`] needs to re-adopt this session (Streamable HTTP, legacy era).
    pub fn resume_token(&self) -> Option<SessionResume> {
        self.http.as_ref().and_then(|s| s.resume_token())
    }

    /// Bounded graceful shutdown. Stdio: close stdin, wait `grace`, SIGTERM the process group, wait `grace`,
    /// SIGKILL the group, sweep leftovers, reap. HTTP: end the session (DELETE) within `grace` (at least 1 s).
    pub async fn close(self, grace: Duration) -> CloseOutcome {
        let Connection { client, child, .. } = self;
        // Cancelling the service closes the transport: for stdio, requests still open (a 2026-07-28
        // `subscriptions/listen` stream above all) are cancelled first, then the child's stdin is closed.
        let _ = tokio::time::timeout(grace.max(Duration::from_secs(1)), client.cancel()).await;
        match child {
            Some(mut child) => CloseOutcome::Process(child.shutdown(grace).await),
            None => CloseOutcome::Disconnected,
        }
    }

    /// Drops the connection without ending the server-side HTTP session, returning what re-adopts it (a
    /// reconnect after a transport death resumes the previous session). For stdio this is an immediate kill.
    pub async fn abandon(self) -> Option<SessionResume> {
        let token = self.resume_token();
        if let Some(state) = &self.http {
            state.keep_session_on_close();
        }
        let Connection { client, child, .. } = self;
        let _ = tokio::time::timeout(Duration::from_secs(1), client.cancel()).await;
        if let Some(mut child) = child {
            child.kill_now().await;
        }
        token
    }
}

/// The runtime's one HTTP client, built on first use: building a reqwest client loads the system root certificates
/// (a few ms and a few MiB), which a runtime whose servers are all stdio never needs. Clones share the client.
#[derive(Clone, Default)]
pub struct SharedHttp {
    cell: Arc<OnceLock<reqwest::Client>>,
}

impl SharedHttp {
    /// Built with [`default_http_client`] when a server first needs it.
    pub fn lazy() -> SharedHttp {
        SharedHttp::default()
    }

    /// The client, building it now if needed.
    pub fn client(&self) -> reqwest::Result<reqwest::Client> {
        if let Some(c) = self.cell.get() {
            return Ok(c.clone());
        }
        let built = default_http_client()?;
        Ok(self.cell.get_or_init(|| built).clone())
    }

    /// Whether the client has been built (diagnostics and tests).
    pub fn is_built(&self) -> bool {
        self.cell.get().is_some()
    }
}

impl From<reqwest::Client> for SharedHttp {
    fn from(client: reqwest::Client) -> SharedHttp {
        let cell = OnceLock::new();
        let _ = cell.set(client);
        SharedHttp { cell: Arc::new(cell) }
    }
}

impl std::fmt::Debug for SharedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedHttp").field("built", &self.is_built()).finish()
    }
}

/// A reqwest client suited as [`ConnectSpec::http`]: connect timeout, and redirects followed only within the same
/// origin (so configured headers and tokens never reach another host).
pub fn default_http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(concat!("pimcp/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if same_origin && attempt.previous().len() < 10 {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }))
        .build()
}

/// Connects one server: resolves secrets, starts the transport, runs the handshake for the configured protocol
/// era, all within `timeouts.startup` and abortable through `spec.cancel`. `handler` is cloned only when a stdio
/// server in `auto` mode hangs up on `server/discover` and is retried with `initialize`.
pub async fn connect<H: ClientHandler + Clone>(spec: ConnectSpec, handler: H) -> Result<Connection<H>, ConnectError> {
    use pimcp_config::{Availability, Transport};
    let name = spec.server.name.clone();
    match &spec.server.availability {
        Availability::Available => {}
        Availability::Disabled => {
            return Err(ConnectError::Config {
                server: name,
                message: "the server is disabled".into(),
            });
        }
        Availability::Untrusted { trust_command, .. } => {
            return Err(ConnectError::Config {
                server: name,
                message: format!("the project config is not trusted (run `{trust_command}`)"),
            });
        }
        Availability::ConfigError { message } => {
            return Err(ConnectError::Config {
                server: name,
                message: message.clone(),
            });
        }
    }
    if spec.cancel.is_cancelled() {
        return Err(ConnectError::Cancelled { server: name });
    }
    // Boxed: the three connect futures differ a lot in size, and the caller's future need not hold the largest.
    match spec.server.transport.clone() {
        Transport::Stdio(stdio) => {
            let conn = Box::pin(stdio::connect(spec, stdio, handler)).await?;
            refuse_pimcp_itself(name, conn).await
        }
        Transport::Http(http) => Box::pin(http::connect(spec, http, handler)).await,
        Transport::Socket(socket) => Box::pin(socket::connect(spec, socket, handler)).await,
    }
}

/// The `serverInfo.name` pimcp answers `initialize` and `server/discover` with.
pub const PIMCP_SERVER_NAME: &str = "pimcp";

/// A stdio server that answers the handshake as pimcp is pimcp started through a wrapper (`sh -c`, a script, `cargo
/// run`) that the configuration check could not see through: it is closed (with its process tree) and refused for
/// good, so a pimcp listed among its own servers never nests itself further. pimcp over HTTP is another instance, not
/// this one, and stays allowed.
async fn refuse_pimcp_itself<H: ClientHandler>(
    server: String,
    conn: Connection<H>,
) -> Result<Connection<H>, ConnectError> {
    if conn
        .server_info
        .as_ref()
        .is_none_or(|info| info.name != PIMCP_SERVER_NAME)
    {
        return Ok(conn);
    }
    let pid = conn.pid;
    conn.close(Duration::from_millis(500)).await;
    tracing::warn!(%server, ?pid, "the server is pimcp itself; closed and not started again");
    Err(ConnectError::Config {
        server,
        message: "this is pimcp itself (the server answered the handshake as pimcp); pimcp never runs itself as one \
                  of its servers"
            .into(),
    })
}
