//! [`ServerAuth`]: the OAuth state of one server — its `pimcp_auth::OAuthClient`, the token it currently sends,
//! the login waiting for its redirect (loopback listener task), and the last problem — plus [`AuthCore`], what
//! every server shares (the lazily opened token store, options, the HTTP client).
//!
//! Flows of one server are serialized by its `flows` lock: at most one login is pending, and starting or completing
//! one never overlaps another. Refreshes go through `pimcp_auth::TokenManager`, which makes them single-flight
//! across processes (file lock, re-read, adopt a sibling's token, persist before use).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::SystemTime;

use async_trait::async_trait;
use dashmap::DashMap;
use pimcp_auth::{
    AuthorizationRequest, AuthorizationStart, BrowserOpener, CALLBACK_PORT_ENV, CallbackListener, CallbackPort,
    Challenge, LOGIN_TIMEOUT, OAuthClient, OAuthClientOptions, OAuthHttp, REFRESH_SKEW, StoreKey, SystemBrowser,
    TokenManager, TokenRecord,
};
use pimcp_config::{AuthConfig, OAuthConfig, OAuthGrant, Secret, ServerConfig, Settings, TokenStoreKind, Transport};
use ractor::ActorRef;
use tokio::sync::watch;
use tracing::Instrument as _;

use super::actor::AuthMsg;
use super::options::AuthOptions;
use super::source::TokenSource;
use super::status::{AuthMode, PendingLogin, ServerAuthStatus};
use crate::context::Shared;
use crate::error::{Error, Result};

/// Environment variable naming a directory of legacy plaintext token files to import.
const LEGACY_DIR_ENV: &str = "MCP_OAUTH_DIR";

/// How a server authenticates, from its configuration alone.
pub(crate) fn auth_mode(cfg: &ServerConfig) -> AuthMode {
    match &cfg.transport {
        Transport::Http(http) => match &cfg.auth {
            AuthConfig::OAuth(_) => AuthMode::Oauth,
            AuthConfig::Bearer { .. } => AuthMode::Bearer,
            AuthConfig::Disabled => AuthMode::None,
            AuthConfig::Auto if !http.headers.is_empty() => AuthMode::Headers,
            AuthConfig::Auto => AuthMode::Auto,
        },
        Transport::Stdio(_) | Transport::Socket(_) => AuthMode::None,
    }
}

/// Whether OAuth may apply to a server: explicit, or auto-detected from a 401 challenge.
pub(crate) fn oauth_capable(mode: AuthMode) -> bool {
    matches!(mode, AuthMode::Oauth | AuthMode::Auto)
}

/// The runtime's error for a failure of the OAuth library (never carries a secret: the library's never do).
pub(crate) fn auth_error(server: &str, e: pimcp_auth::Error) -> Error {
    let server = server.to_owned();
    match e {
        pimcp_auth::Error::NeedsAuth { reason, .. } => Error::NeedsAuth { server, detail: reason },
        e @ pimcp_auth::Error::StepUpExhausted { .. } => Error::NeedsAuth {
            server,
            detail: e.to_string(),
        },
        pimcp_auth::Error::Config { reason, .. } => Error::Config {
            server,
            message: format!("oauth: {reason}"),
        },
        e @ (pimcp_auth::Error::Credential { .. }
        | pimcp_auth::Error::PrivateKey { .. }
        | pimcp_auth::Error::NoTokenStore { .. }) => Error::Config {
            server,
            message: e.to_string(),
        },
        e => Error::Auth {
            server,
            message: e.to_string(),
        },
    }
}

/// What a login is for.
#[derive(Debug, Clone)]
pub(crate) enum FlowKind {
    /// A first (or renewed) login.
    Login,
    /// Re-authorization with more scope after a 403 `insufficient_scope`.
    StepUp(Challenge),
}

/// How often a waiting login re-reads the token store for a login another process completed.
const STORE_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Outcome of a pending login, as its waiters see it.
type FlowOutcome = Option<std::result::Result<(), String>>;

/// Shared by every server of one runtime.
pub(crate) struct AuthCore {
    pub(crate) auto_auth: bool,
    store_kind: TokenStoreKind,
    data_dir: PathBuf,
    pub(crate) options: AuthOptions,
    env_port: Option<String>,
    legacy_dir: Option<PathBuf>,
    http: std::result::Result<OAuthHttp, String>,
    tokens: tokio::sync::OnceCell<TokenManager>,
    /// Started logins persisted for another process (`pimcp-run auth complete`).
    pending: pimcp_auth::PendingLogins,
    /// The last authorization problem per server (read synchronously by server actors for their status).
    errors: DashMap<String, Error>,
    flow_ids: AtomicU64,
    /// The running AuthActor (the supervisor sets it at each start), told when a login finished with nobody
    /// waiting on it.
    pub(crate) actor: std::sync::Mutex<Option<ActorRef<AuthMsg>>>,
    /// The runtime, for reconnecting a server after its login.
    pub(crate) shared: OnceLock<Weak<Shared>>,
}

impl AuthCore {
    /// The running AuthActor, if one runs.
    pub(crate) fn actor(&self) -> Option<ActorRef<AuthMsg>> {
        self.actor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_actor(&self, actor: ActorRef<AuthMsg>) {
        *self.actor.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(actor);
    }

    /// The runtime's process options (the guardian for `!command` secrets); defaults before the runtime is up.
    pub(crate) fn process(&self) -> crate::process::ProcessOptions {
        self.shared
            .get()
            .and_then(std::sync::Weak::upgrade)
            .map(|shared| shared.process.clone())
            .unwrap_or_default()
    }

    /// The project directory `!command` OAuth secrets run in (pimcp's current directory before the runtime is
    /// attached).
    pub(crate) fn project_dir(&self) -> std::path::PathBuf {
        self.shared
            .get()
            .and_then(std::sync::Weak::upgrade)
            .map(|shared| shared.project_dir.clone())
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_default())
    }

    pub(crate) fn new(settings: &Settings, data_dir: &Path, options: AuthOptions) -> AuthCore {
        let http = match &options.http {
            Some(http) => Ok(http.clone()),
            None => OAuthHttp::new().map_err(|e| e.to_string()),
        };
        let legacy_dir = options
            .legacy_dir
            .clone()
            .or_else(|| {
                std::env::var_os(LEGACY_DIR_ENV)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .or_else(|| settings.oauth_dir.clone());
        AuthCore {
            auto_auth: settings.auto_auth,
            store_kind: settings.token_store,
            data_dir: data_dir.to_path_buf(),
            env_port: std::env::var(CALLBACK_PORT_ENV).ok(),
            legacy_dir,
            http,
            tokens: tokio::sync::OnceCell::new(),
            pending: pimcp_auth::PendingLogins::new(data_dir),
            errors: DashMap::new(),
            flow_ids: AtomicU64::new(0),
            actor: std::sync::Mutex::new(None),
            shared: OnceLock::new(),
            options,
        }
    }

    /// The token manager over the injected store, or the one `settings.tokenStore` names — opened on first use,
    /// failing closed (the error names `settings.tokenStore: "file"`) and retried on the next use.
    async fn tokens(&self, server: &str) -> Result<&TokenManager> {
        self.tokens
            .get_or_try_init(|| async {
                let store = match &self.options.store {
                    Some(store) => store.clone(),
                    None => pimcp_auth::open_store(self.store_kind, &self.data_dir).await?,
                };
                Ok::<_, pimcp_auth::Error>(TokenManager::new(store, &self.data_dir))
            })
            .await
            .map_err(|e| auth_error(server, e))
    }

    fn opener(&self) -> Arc<dyn BrowserOpener> {
        match &self.options.browser {
            Some(opener) => opener.clone(),
            None => Arc::new(SystemBrowser),
        }
    }

    /// The last authorization problem of `server`, if any.
    pub(crate) fn last_error(&self, server: &str) -> Option<Error> {
        self.errors.get(server).map(|e| e.clone())
    }

    fn set_error(&self, server: &str, error: Option<Error>) {
        match error {
            Some(e) => {
                self.errors.insert(server.to_owned(), e);
            }
            None => {
                self.errors.remove(server);
            }
        }
    }
}

/// A login waiting for its redirect.
struct Flow {
    id: u64,
    url: String,
    redirect_uri: String,
    started_at_ms: u64,
    done: watch::Sender<FlowOutcome>,
    listener: Option<tokio::task::AbortHandle>,
    /// Requests held for this login (they retry with the new token themselves). Observers such as
    /// [`ServerAuth::wait`] subscribe to `done` without counting here, so a login they watch still reconnects.
    requests: Arc<AtomicU64>,
}

/// Counts one held request in [`Flow::requests`] while it lives.
struct HeldRequest(Arc<AtomicU64>);

impl HeldRequest {
    fn new(requests: Arc<AtomicU64>) -> HeldRequest {
        requests.fetch_add(1, Ordering::SeqCst);
        HeldRequest(requests)
    }
}

impl Drop for HeldRequest {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct State {
    /// An `auto` server answered 401 with a challenge.
    detected: bool,
    /// The latest challenge (seeds discovery of the next login).
    challenge: Option<Challenge>,
    /// The record whose token requests carry now.
    current: Option<TokenRecord>,
    /// Access token of a stored record whose refresh was refused: not refreshed again until it changes.
    dead: Option<Secret>,
    flow: Option<Flow>,
    legacy_checked: bool,
}

/// The OAuth side of one server.
pub(crate) struct ServerAuth {
    name: String,
    mode: AuthMode,
    /// Transport and auth as configured: a change of either replaces this value (and drops a pending login).
    identity: (Transport, AuthConfig),
    oauth: OAuthConfig,
    key: StoreKey,
    core: Arc<AuthCore>,
    client: tokio::sync::OnceCell<OAuthClient>,
    flows: tokio::sync::Mutex<()>,
    state: Mutex<State>,
    /// Counts requests whose refusal could not be cured (no token, refused refresh, abandoned login).
    refusals: AtomicU64,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ServerAuth {
    /// `None` unless the server is an HTTP server that may use OAuth.
    pub(crate) fn new(cfg: &ServerConfig, core: Arc<AuthCore>) -> Option<ServerAuth> {
        let mode = auth_mode(cfg);
        let Transport::Http(http) = &cfg.transport else {
            return None;
        };
        if !oauth_capable(mode) {
            return None;
        }
        let oauth = match &cfg.auth {
            AuthConfig::OAuth(oauth) => oauth.clone(),
            _ => OAuthConfig::default(),
        };
        Some(ServerAuth {
            name: cfg.name.clone(),
            mode,
            identity: (cfg.transport.clone(), cfg.auth.clone()),
            oauth,
            key: StoreKey::new(cfg.name.clone(), http.url.clone()),
            core,
            client: tokio::sync::OnceCell::new(),
            flows: tokio::sync::Mutex::new(()),
            state: Mutex::new(State::default()),
            refusals: AtomicU64::new(0),
        })
    }

    /// True when `cfg` still describes the server this value was made for.
    pub(crate) fn same_identity(&self, cfg: &ServerConfig) -> bool {
        self.identity.0 == cfg.transport && self.identity.1 == cfg.auth
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::SeqCst)
    }

    fn grant(&self) -> OAuthGrant {
        self.oauth.grant_type
    }

    /// The `needs-auth` error to report now: the recorded problem, else "not logged in".
    pub(crate) fn needs_auth_error(&self) -> Error {
        match self.core.last_error(&self.name) {
            Some(e @ Error::NeedsAuth { .. }) => e,
            Some(other) => Error::NeedsAuth {
                server: self.name.clone(),
                detail: other.to_string(),
            },
            None => self.not_logged_in(),
        }
    }

    fn not_logged_in(&self) -> Error {
        Error::NeedsAuth {
            server: self.name.clone(),
            detail: "not logged in (no stored token for this server URL)".into(),
        }
    }

    fn record(&self, error: Error) -> Error {
        self.core.set_error(&self.name, Some(error.clone()));
        error
    }

    fn is_dead(&self, record: &TokenRecord) -> bool {
        self.state().dead.as_ref() == Some(&record.access_token)
    }

    fn set_current(&self, record: TokenRecord) -> Secret {
        let token = record.access_token.clone();
        let mut st = self.state();
        st.current = Some(record);
        st.dead = None;
        drop(st);
        self.core.set_error(&self.name, None);
        token
    }

    /// A refresh failed: remember why; a refused refresh marks the record so it is not tried again.
    fn refresh_failed(&self, e: pimcp_auth::Error, record: Option<&TokenRecord>) -> Error {
        let error = auth_error(&self.name, e);
        if matches!(error, Error::NeedsAuth { .. })
            && let Some(record) = record
        {
            self.state().dead = Some(record.access_token.clone());
        }
        tracing::info!(server = %self.name, error = %error, "oauth token refresh failed");
        self.record(error)
    }

    async fn tokens(&self) -> Result<&TokenManager> {
        match self.core.tokens(&self.name).await {
            Ok(tokens) => Ok(tokens),
            Err(e) => Err(self.record(e)),
        }
    }

    /// Resolves an `oauth` secret as connect-time secrets are (guardian, cancelled with the connect); a failure is
    /// retried on the next connect with backoff, not a configuration error.
    async fn resolve_secret(
        &self,
        field: &str,
        value: &pimcp_config::SecretValue,
        process: &crate::process::ProcessOptions,
    ) -> Result<pimcp_config::Secret> {
        let cwd = self.core.project_dir();
        match crate::transport::resolve_secret(&self.name, field.to_owned(), value, process, &cwd).await {
            Ok(text) => Ok(pimcp_config::Secret::new(text)),
            Err(crate::transport::ConnectError::Secret { message, .. }) => Err(Error::Auth {
                server: self.name.clone(),
                message,
            }),
            Err(e) => Err(Error::Auth {
                server: self.name.clone(),
                message: e.to_string(),
            }),
        }
    }

    /// The server's OAuth client, built on first use (resolving a `!command` client secret).
    async fn client(&self) -> Result<OAuthClient> {
        let built = self
            .client
            .get_or_try_init(|| async {
                let process = self.core.process();
                let secret = match &self.oauth.client_secret {
                    Some(value) => Some(self.resolve_secret("oauth.clientSecret", value, &process).await?),
                    None => None,
                };
                let http = self.core.http.clone().map_err(|reason| Error::Auth {
                    server: self.name.clone(),
                    message: format!("cannot build the oauth http client: {reason}"),
                })?;
                // A key the host passed in `AuthOptions::private_keys` wins over `oauth.clientPrivateKey`.
                let private_key = match (
                    self.core.options.private_keys.get(&self.name),
                    &self.oauth.client_private_key,
                ) {
                    (Some(key), _) => Some(key.clone()),
                    (None, Some(value)) => Some(self.resolve_secret("oauth.clientPrivateKey", value, &process).await?),
                    (None, None) => None,
                };
                let mut options = OAuthClientOptions::new(self.name.clone(), self.key.url.clone(), self.oauth.clone());
                options.client_secret = secret;
                options.private_key_pem = private_key;
                options.http = Some(http);
                // Without a guardian (it cannot start) these commands still get their parent-death signal.
                let guardian_for = process.clone();
                options.secret_guardian =
                    tokio::task::spawn_blocking(move || crate::transport::secret_guardian(&guardian_for))
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .flatten();
                OAuthClient::new(options).map_err(|e| auth_error(&self.name, e))
            })
            .await;
        match built {
            Ok(client) => Ok(client.clone()),
            Err(e) => Err(self.record(e)),
        }
    }

    /// The stored record for the current URL, importing a legacy token file the first time there is none.
    async fn load(&self, tokens: &TokenManager) -> Result<Option<TokenRecord>> {
        let record = tokens
            .current(&self.key)
            .await
            .map_err(|e| self.record(auth_error(&self.name, e)))?;
        if record.is_some() {
            return Ok(record);
        }
        let Some(dir) = &self.core.legacy_dir else {
            return Ok(None);
        };
        if std::mem::replace(&mut self.state().legacy_checked, true) {
            return Ok(None);
        }
        pimcp_auth::import_legacy(dir, &self.key, tokens.store().as_ref())
            .await
            .map_err(|e| self.record(auth_error(&self.name, e)))
    }

    /// Before a connect attempt: the token to start with. Explicit OAuth servers (and `auto` servers already seen
    /// answering 401) read the store, refreshing a token that is about to expire; `client_credentials` servers get
    /// one. `None` connects without a token (a 401 then goes through [`TokenSource::renew`]).
    pub(crate) async fn prepare(&self) -> Result<Option<Secret>> {
        if self.mode == AuthMode::Auto && !self.state().detected {
            return Ok(None);
        }
        let tokens = self.tokens().await?;
        let client = self.client().await?;
        let record = self.load(tokens).await?;
        match &record {
            None if self.grant() == OAuthGrant::AuthorizationCode => return Ok(None),
            Some(r) if self.is_dead(r) => {
                return if self.core.auto_auth {
                    Ok(None)
                } else {
                    Err(self.needs_auth_error())
                };
            }
            _ => {}
        }
        let span = tracing::info_span!("auth", server = %self.name, step = "token");
        match tokens.refresh_if_needed(&self.key, &client).instrument(span).await {
            Ok(fresh) => Ok(Some(self.set_current(fresh))),
            Err(e) => {
                let error = self.refresh_failed(e, record.as_ref());
                if self.core.auto_auth && matches!(error, Error::NeedsAuth { .. }) {
                    Ok(None)
                } else {
                    Err(error)
                }
            }
        }
    }

    /// The current token, refreshed first when it is about to expire (a failed refresh still sends the old one:
    /// the server decides).
    async fn bearer(&self) -> Option<Secret> {
        let current = self.state().current.clone()?;
        if self.is_dead(&current) || !current.needs_refresh(REFRESH_SKEW, SystemTime::now()) {
            return Some(current.access_token);
        }
        let (Ok(tokens), Ok(client)) = (self.tokens().await, self.client().await) else {
            return Some(current.access_token);
        };
        let span = tracing::info_span!("auth", server = %self.name, step = "refresh");
        match tokens.refresh_if_needed(&self.key, &client).instrument(span).await {
            Ok(fresh) => Some(self.set_current(fresh)),
            Err(e) => {
                self.refresh_failed(e, Some(&current));
                Some(current.access_token)
            }
        }
    }

    /// A request was refused (401, or 403 `insufficient_scope`): one refresh (or a sibling's newer token), else a
    /// login when `settings.autoAuth` allows one.
    async fn renew(self: &Arc<Self>, rejected: Option<Secret>, status: u16, header: &str) -> Result<Secret> {
        let challenge = Challenge::parse(header);
        {
            let mut st = self.state();
            st.detected = true;
            if challenge.is_some() {
                st.challenge.clone_from(&challenge);
            }
        }
        if status == 403 {
            return match challenge.filter(Challenge::is_insufficient_scope) {
                Some(challenge) => self.interactive(FlowKind::StepUp(challenge)).await,
                None => Err(self.record(Error::Auth {
                    server: self.name.clone(),
                    message: "the server answered 403 without asking for more scope".into(),
                })),
            };
        }
        let tokens = self.tokens().await?;
        let client = self.client().await?;
        let span = tracing::info_span!("auth", server = %self.name, step = "refresh-after-401");
        let (attempt, record) = match rejected {
            Some(rejected) => (
                Some(
                    tokens
                        .refresh_after_unauthorized(&self.key, &client, &rejected)
                        .instrument(span)
                        .await,
                ),
                self.state().current.clone(),
            ),
            None => {
                let record = self.load(tokens).await?;
                let usable = match &record {
                    Some(r) => !self.is_dead(r),
                    None => self.grant() != OAuthGrant::AuthorizationCode,
                };
                let attempt = if usable {
                    Some(tokens.refresh_if_needed(&self.key, &client).instrument(span).await)
                } else {
                    None
                };
                (attempt, record)
            }
        };
        match attempt {
            Some(Ok(fresh)) => return Ok(self.set_current(fresh)),
            Some(Err(e)) if e.is_needs_auth() => {
                self.refresh_failed(e, record.as_ref());
            }
            Some(Err(e)) => return Err(self.refresh_failed(e, record.as_ref())),
            None => {}
        }
        if self.grant() != OAuthGrant::AuthorizationCode {
            return Err(self.needs_auth_error());
        }
        self.interactive(FlowKind::Login).await
    }

    /// A login without asking the caller: only with `settings.autoAuth`. Joins a pending login (or starts one,
    /// opening the browser) and waits for it up to `AuthOptions::auto_auth_wait`.
    async fn interactive(self: &Arc<Self>, kind: FlowKind) -> Result<Secret> {
        if !self.core.auto_auth {
            let error = match self.core.last_error(&self.name) {
                Some(e @ Error::NeedsAuth { .. }) => e,
                _ => match kind {
                    FlowKind::Login => self.not_logged_in(),
                    FlowKind::StepUp(_) => Error::NeedsAuth {
                        server: self.name.clone(),
                        detail: "the server asks for more scope; log in again".into(),
                    },
                },
            };
            return Err(self.record(error));
        }
        let pending = match kind {
            FlowKind::Login => self.state().flow.as_ref().map(|f| f.done.subscribe()),
            FlowKind::StepUp(_) => None,
        };
        let mut done = match pending {
            Some(rx) => rx,
            None => self.start_flow(kind).await?.1,
        };
        let _held = self.state().flow.as_ref().map(|f| HeldRequest::new(f.requests.clone()));
        let wait = self.core.options.auto_auth_wait;
        let outcome = tokio::time::timeout(wait, done.wait_for(Option::is_some)).await;
        let outcome: FlowOutcome = match outcome {
            Ok(Ok(value)) => value.clone(),
            Ok(Err(_)) => Some(Err("the login was abandoned".into())),
            Err(_) => {
                return Err(self.record(Error::NeedsAuth {
                    server: self.name.clone(),
                    detail: format!(
                        "a login is waiting for the browser (not finished within {}); its URL is in `pimcp-run auth \
                         status`",
                        crate::error::fmt_duration(wait)
                    ),
                }));
            }
        };
        match outcome {
            Some(Ok(())) => match self.state().current.as_ref() {
                Some(record) => Ok(record.access_token.clone()),
                None => Err(self.not_logged_in()),
            },
            Some(Err(reason)) => Err(self.record(Error::NeedsAuth {
                server: self.name.clone(),
                detail: reason,
            })),
            None => Err(self.not_logged_in()),
        }
    }

    /// Waits up to `timeout` for the pending login to finish (by the listener or a pasted redirect). `Ok` once it
    /// stored tokens; `NeedsAuth` when it failed, was abandoned, timed out, or none is pending.
    ///
    /// Another process may finish it (`pimcp-run auth complete` adopts the persisted login): the token store is
    /// re-read every [`STORE_POLL`], and a record obtained after this login started ends the wait with `Ok`.
    pub(crate) async fn wait(&self, timeout: std::time::Duration) -> Result<()> {
        let pending = self
            .state()
            .flow
            .as_ref()
            .map(|f| (f.done.subscribe(), f.id, f.started_at_ms));
        let Some((mut done, id, started_at_ms)) = pending else {
            return match self.state().current {
                Some(_) => Ok(()),
                None => Err(self.needs_auth_error()),
            };
        };
        let elsewhere = async {
            let mut tick = tokio::time::interval(STORE_POLL);
            loop {
                tick.tick().await;
                let Ok(tokens) = self.core.tokens(&self.name).await else {
                    continue;
                };
                if let Ok(Some(record)) = tokens.current(&self.key).await
                    && record.obtained_at_ms >= started_at_ms
                {
                    return record;
                }
            }
        };
        let finished = async {
            tokio::select! {
                outcome = done.wait_for(Option::is_some) => outcome.map(|v| v.clone()),
                record = elsewhere => {
                    tracing::info!(server = %self.name, "oauth login completed by another process");
                    self.set_current(record);
                    self.state().detected = true;
                    self.finish(id, Ok(()));
                    Ok(Some(Ok(())))
                }
            }
        };
        let outcome = match tokio::time::timeout(timeout, finished).await {
            Ok(Ok(value)) => value,
            Ok(Err(_)) => Some(Err("the login was abandoned".into())),
            Err(_) => Some(Err(format!(
                "the login did not finish within {}",
                crate::error::fmt_duration(timeout)
            ))),
        };
        match outcome {
            Some(Ok(())) => Ok(()),
            Some(Err(detail)) => Err(Error::NeedsAuth {
                server: self.name.clone(),
                detail,
            }),
            None => Err(self.not_logged_in()),
        }
    }

    /// Start a login: bind the callback listener, run discovery/registration, open the browser (best effort).
    /// Replaces a pending login of this server.
    pub(crate) async fn start(self: &Arc<Self>) -> Result<AuthorizationStart> {
        Ok(self.start_flow(FlowKind::Login).await?.0)
    }

    async fn start_flow(
        self: &Arc<Self>,
        kind: FlowKind,
    ) -> Result<(AuthorizationStart, watch::Receiver<FlowOutcome>)> {
        let _serial = self.flows.lock().await;
        let client = self.client().await?;
        if client.is_machine_grant() {
            return Err(Error::Config {
                server: self.name.clone(),
                message: "oauth: the server uses a machine grant (client_credentials or identity_assertion); there is no browser login".into(),
            });
        }
        let tokens = self.tokens().await?;
        let record = self.load(tokens).await?;
        let (listener, redirect_uri) = self.bind_listener().await?;
        let span = tracing::info_span!("auth", server = %self.name, step = "start");
        let started = match kind {
            FlowKind::Login => {
                let challenge = self.state().challenge.clone();
                client
                    .start_authorization(AuthorizationRequest {
                        redirect_uri: redirect_uri.clone(),
                        challenge,
                        known_client: record.map(|r| r.client),
                        scope: None,
                    })
                    .instrument(span)
                    .await
            }
            FlowKind::StepUp(challenge) => {
                client
                    .start_step_up(&challenge, record.as_ref(), &redirect_uri)
                    .instrument(span)
                    .await
            }
        };
        let start = match started {
            Ok(start) => start,
            Err(e) => return Err(self.record(auth_error(&self.name, e))),
        };
        self.persist_pending(&client, &start.state);
        let id = self.core.flow_ids.fetch_add(1, Ordering::SeqCst) + 1;
        let (done, receiver) = watch::channel(None);
        let listening = listener.is_some();
        let listener = listener.map(|listener| {
            let me = self.clone();
            tokio::spawn(async move { me.listen(id, listener).await }).abort_handle()
        });
        let previous = self.state().flow.replace(Flow {
            id,
            url: start.url.clone(),
            redirect_uri,
            started_at_ms: epoch_ms(),
            done,
            listener,
            requests: Arc::new(AtomicU64::new(0)),
        });
        if let Some(previous) = previous {
            abandon(previous, "a new login replaced it");
        }
        tracing::info!(server = %self.name, listening, "oauth login started; waiting for the redirect");
        if self.core.options.open_browser {
            let opener = self.core.opener();
            let url = start.url.clone();
            let server = self.name.clone();
            tokio::task::spawn_blocking(move || {
                if let Err(reason) = opener.open(&url) {
                    tracing::info!(%server, %reason, "could not open a browser; the login URL is in `auth status`");
                }
            });
        }
        Ok((start, receiver))
    }

    /// The redirect listener: `oauth.redirectUri` when it is a loopback http URI, none (paste-only) for another
    /// redirect URI, else `http://127.0.0.1:<port>/callback`.
    async fn bind_listener(&self) -> Result<(Option<CallbackListener>, String)> {
        let config_error = |e: pimcp_auth::Error| self.record(auth_error(&self.name, e));
        let port = match (self.oauth.callback_port, self.core.options.callback_port) {
            (Some(port), _) => CallbackPort::Pinned(port),
            (None, Some(port)) => port,
            (None, None) => CallbackPort::choose(None, self.core.env_port.as_deref()).map_err(config_error)?,
        };
        let listener = match &self.oauth.redirect_uri {
            Some(uri) if !is_loopback_http(uri) => return Ok((None, uri.clone())),
            Some(uri) => CallbackListener::bind_redirect_uri(uri, port).await,
            None => CallbackListener::bind(port).await,
        }
        .map_err(config_error)?;
        let redirect_uri = listener.redirect_uri().to_owned();
        Ok((Some(listener), redirect_uri))
    }

    /// Waits for the browser's redirect; stray redirects (wrong `state`) are ignored; bounded by `LOGIN_TIMEOUT`.
    async fn listen(self: Arc<Self>, id: u64, mut listener: CallbackListener) {
        let deadline = tokio::time::Instant::now() + LOGIN_TIMEOUT;
        loop {
            let received = tokio::time::timeout_at(deadline, listener.recv()).await;
            let Ok(Some(redirect)) = received else {
                self.finish(id, Err("the login timed out waiting for the browser".into()));
                return;
            };
            match self.complete(&redirect).await {
                Ok(waiting) => {
                    if !waiting && let Some(actor) = self.core.actor() {
                        let _ = actor.send_message(AuthMsg::LoggedIn {
                            server: self.name.clone(),
                        });
                    }
                    return;
                }
                Err(e) if self.state().flow.as_ref().is_some_and(|f| f.id == id) => {
                    tracing::info!(server = %self.name, error = %e, "ignoring a redirect that does not finish the login");
                }
                Err(_) => return,
            }
        }
    }

    /// Save a started login where another process (`pimcp-run auth complete`) can finish it; best effort (the
    /// login still completes here without it).
    fn persist_pending(&self, client: &OAuthClient, state: &str) {
        let saved = client
            .export_pending(state)
            .and_then(|login| login.map_or(Ok(()), |login| self.core.pending.save(&login)));
        if let Err(e) = saved {
            tracing::info!(server = %self.name, error = %e, "cannot persist the pending login; only this process can complete it");
        }
    }

    /// With no login of its own pending, take over the one another process started and persisted.
    fn adopt_pending(&self, client: &OAuthClient) {
        if self.state().flow.is_some() {
            return;
        }
        match self.core.pending.load(&self.key) {
            Ok(Some(login)) => {
                if let Err(e) = client.import_pending(login) {
                    tracing::info!(server = %self.name, error = %e, "ignoring a persisted pending login");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::info!(server = %self.name, error = %e, "cannot read the persisted pending login"),
        }
    }

    /// Finish the pending login with a redirect URL (or its query) or a bare code, store the tokens, and tell
    /// whoever waits in-band. Returns whether a request was waiting for it (then nothing needs reconnecting). A
    /// login started by another process (persisted by it) is completed here when this process has none pending.
    pub(crate) async fn complete(&self, input: &str) -> Result<bool> {
        let _serial = self.flows.lock().await;
        let client = self.client().await?;
        let tokens = self.tokens().await?;
        self.adopt_pending(&client);
        let span = tracing::info_span!("auth", server = %self.name, step = "complete");
        let record = match client.complete(input).instrument(span).await {
            Ok(record) => record,
            Err(
                e @ (pimcp_auth::Error::StateMismatch { .. }
                | pimcp_auth::Error::InvalidInput { .. }
                | pimcp_auth::Error::IssuerMismatch { .. }
                | pimcp_auth::Error::IssuerMissing { .. }),
            ) => {
                // Nothing was consumed: the login stays pending.
                return Err(auth_error(&self.name, e));
            }
            Err(e) => {
                let error = self.record(auth_error(&self.name, e));
                self.finish_current(Err(error.to_string()));
                return Err(error);
            }
        };
        if let Err(e) = tokens.save_login(&self.key, &record).await {
            let error = self.record(auth_error(&self.name, e));
            self.finish_current(Err(error.to_string()));
            return Err(error);
        }
        if let Err(e) = self.core.pending.remove(&self.key) {
            tracing::info!(server = %self.name, error = %e, "cannot remove the persisted pending login");
        }
        self.set_current(record);
        self.state().detected = true;
        tracing::info!(server = %self.name, "oauth login completed");
        Ok(self.finish_current(Ok(())))
    }

    /// Ends the pending login (whichever it is); returns whether anyone was waiting on it.
    fn finish_current(&self, outcome: std::result::Result<(), String>) -> bool {
        let flow = self.state().flow.take();
        match flow {
            Some(flow) => {
                let waiting = flow.requests.load(Ordering::SeqCst) > 0;
                flow.done.send_replace(Some(outcome));
                stop_listener(flow.listener);
                waiting
            }
            None => false,
        }
    }

    /// Ends login `id` if it is still the pending one.
    fn finish(&self, id: u64, outcome: std::result::Result<(), String>) {
        let mut st = self.state();
        if st.flow.as_ref().is_some_and(|f| f.id == id)
            && let Some(flow) = st.flow.take()
        {
            drop(st);
            if let Err(reason) = &outcome {
                self.core.set_error(
                    &self.name,
                    Some(Error::NeedsAuth {
                        server: self.name.clone(),
                        detail: reason.clone(),
                    }),
                );
            }
            flow.done.send_replace(Some(outcome));
            stop_listener(flow.listener);
        }
    }

    /// Drop a pending login (reconfigured away, runtime stopping).
    pub(crate) fn abandon(&self) {
        if let Some(flow) = self.state().flow.take() {
            abandon(flow, "the server was reconfigured or the runtime stopped");
        }
    }

    /// Forget the stored record (tokens and registered client) and any pending login.
    pub(crate) async fn logout(&self) -> Result<()> {
        let _serial = self.flows.lock().await;
        if let Some(flow) = self.state().flow.take() {
            abandon(flow, "logged out");
        }
        if let Err(e) = self.core.pending.remove(&self.key) {
            tracing::info!(server = %self.name, error = %e, "cannot remove the persisted pending login");
        }
        let tokens = self.tokens().await?;
        tokens
            .forget(&self.key)
            .await
            .map_err(|e| self.record(auth_error(&self.name, e)))?;
        let mut st = self.state();
        st.current = None;
        st.dead = None;
        drop(st);
        self.core.set_error(&self.name, None);
        tracing::info!(server = %self.name, "oauth tokens forgotten");
        Ok(())
    }

    /// This server's line of `auth_status()` (reads the store; never a secret).
    pub(crate) async fn status(&self) -> ServerAuthStatus {
        let mut status = ServerAuthStatus::new(&self.name, self.mode);
        status.grant = Some(
            match self.grant() {
                OAuthGrant::AuthorizationCode => "authorization_code",
                OAuthGrant::ClientCredentials => "client_credentials",
                OAuthGrant::IdentityAssertion => "identity_assertion",
            }
            .to_owned(),
        );
        {
            let st = self.state();
            status.detected = st.detected;
            status.pending = st.flow.as_ref().map(|f| PendingLogin {
                url: f.url.clone(),
                redirect_uri: f.redirect_uri.clone(),
                listening: f.listener.is_some(),
                started_at_ms: f.started_at_ms,
            });
        }
        match self.core.tokens(&self.name).await {
            Ok(tokens) => match tokens.current(&self.key).await {
                Ok(Some(record)) => {
                    status.logged_in = true;
                    status.expires_at = record.expires_at;
                    status.has_refresh_token = record.refresh_token.is_some();
                    status.scope = record.scope.clone();
                    status.issuer = record.issuer.clone();
                }
                Ok(None) => {}
                Err(e) => status.error = Some(auth_error(&self.name, e).to_string()),
            },
            Err(e) => status.error = Some(e.to_string()),
        }
        if status.error.is_none() {
            status.error = self.core.last_error(&self.name).map(|e| e.to_string());
        }
        status
    }

    /// The hook a connection of this server uses.
    pub(crate) fn source(self: &Arc<Self>) -> Arc<dyn TokenSource> {
        Arc::new(Session(self.clone()))
    }
}

/// [`TokenSource`] over a server's [`ServerAuth`].
struct Session(Arc<ServerAuth>);

#[async_trait]
impl TokenSource for Session {
    async fn bearer(&self) -> Option<Secret> {
        self.0.bearer().await
    }

    async fn renew(&self, rejected: Option<Secret>, status: u16, challenge: &str) -> Option<Secret> {
        match self.0.renew(rejected, status, challenge).await {
            Ok(token) => Some(token),
            Err(e) => {
                self.0.refusals.fetch_add(1, Ordering::SeqCst);
                tracing::info!(server = %self.0.name, error = %e, "request refused by the server; not authorized");
                None
            }
        }
    }

    fn accepted(&self) {
        if let Ok(client) = self.0.client.get().ok_or(()) {
            client.reset_attempts();
        }
    }
}

fn abandon(flow: Flow, why: &str) {
    flow.done
        .send_replace(Some(Err(format!("the login was abandoned ({why})"))));
    stop_listener(flow.listener);
}

/// Stops a listener task, unless it is the task running this code (it is about to return on its own).
fn stop_listener(listener: Option<tokio::task::AbortHandle>) {
    if let Some(handle) = listener
        && tokio::task::try_id() != Some(handle.id())
    {
        handle.abort();
    }
}

/// `http://` on 127.0.0.1, localhost or [::1] (`{port}` allowed): a redirect pimcp can receive itself.
fn is_loopback_http(uri: &str) -> bool {
    url::Url::parse(&uri.replace("{port}", "1")).is_ok_and(|u| {
        u.scheme() == "http"
            && matches!(
                u.host_str().map(str::to_ascii_lowercase).as_deref(),
                Some("127.0.0.1" | "localhost" | "[::1]")
            )
    })
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn server(entry: serde_json::Value) -> ServerConfig {
        let dir = std::env::temp_dir();
        let config = pimcp_config::load_in_memory(
            &serde_json::json!({ "mcpServers": { "s": entry } }),
            &pimcp_config::LoadOptions::new(&dir, &dir),
        );
        config.servers.into_iter().next().unwrap()
    }

    #[test]
    fn modes_follow_the_configuration() {
        let url = "https://mcp.example.com/mcp";
        assert_eq!(auth_mode(&server(serde_json::json!({"url": url}))), AuthMode::Auto);
        assert_eq!(
            auth_mode(&server(serde_json::json!({"url": url, "auth": "oauth"}))),
            AuthMode::Oauth
        );
        assert_eq!(
            auth_mode(&server(serde_json::json!({"url": url, "oauth": {"clientId": "x"}}))),
            AuthMode::Oauth
        );
        assert_eq!(
            auth_mode(&server(serde_json::json!({"url": url, "oauth": false}))),
            AuthMode::None
        );
        assert_eq!(
            auth_mode(&server(serde_json::json!({"url": url, "headers": {"X-Key": "k"}}))),
            AuthMode::Headers
        );
        assert_eq!(
            auth_mode(&server(
                serde_json::json!({"url": url, "auth": "bearer", "bearerToken": "t"})
            )),
            AuthMode::Bearer
        );
        assert_eq!(auth_mode(&server(serde_json::json!({"command": "x"}))), AuthMode::None);
        assert!(oauth_capable(AuthMode::Auto) && oauth_capable(AuthMode::Oauth));
        assert!(!oauth_capable(AuthMode::Headers) && !oauth_capable(AuthMode::Bearer));
    }

    #[test]
    fn loopback_redirects() {
        assert!(is_loopback_http("http://127.0.0.1:8765/cb"));
        assert!(is_loopback_http("http://localhost:{port}/oauth/done"));
        assert!(!is_loopback_http("https://app.example.com/cb"));
        assert!(!is_loopback_http("http://example.com/cb"));
    }

    #[test]
    fn library_errors_map_to_categories_without_secrets() {
        let e = auth_error(
            "s",
            pimcp_auth::Error::NeedsAuth {
                server: "s".into(),
                reason: "refused".into(),
            },
        );
        assert_eq!(e.category(), crate::ErrorCategory::NeedsAuth);
        let e = auth_error(
            "s",
            pimcp_auth::Error::NoTokenStore {
                reason: "no keyring".into(),
            },
        );
        assert_eq!(e.category(), crate::ErrorCategory::Config);
        assert!(e.to_string().contains("settings.tokenStore"), "{e}");
        let e = auth_error(
            "s",
            pimcp_auth::Error::Discovery {
                url: "https://x/".into(),
                reason: "404".into(),
            },
        );
        assert_eq!(e.category(), crate::ErrorCategory::NeedsAuth);
        assert!(e.to_string().starts_with("server `s`"), "{e}");
    }
}
