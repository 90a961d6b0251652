//! [`ServerAuth`]: the OAuth state of one server — its `pimcp_auth::OAuthClient`, the token it currently sends,
//! the login waiting for its redirect (loopback listener task), and the last problem — plus [`AuthCore`], what
//! every server shares (the lazily opened token store, options, the HTTP client).
//!
//! Flows of one server are serialized by its `flows` lock: at most one login is pending, and starting or completing
//! one never overlaps another. Refreshes go through `pimcp_auth::TokenManager`, which makes them single-flight
//! across processes (file lock, re-read, adopt a sibling's token, persist before use).

mod auth_core;
mod login;
#[cfg(test)]
mod tests;
mod tokens;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pimcp_auth::{Challenge, OAuthClient, OAuthClientOptions, StoreKey, TokenManager, TokenRecord};
use pimcp_config::{AuthConfig, OAuthConfig, OAuthGrant, Secret, ServerConfig, Transport};

use super::status::AuthMode;
use crate::error::{Error, Result};

pub(crate) use auth_core::{AttachedRuntime, AuthCore};
use login::Flow;

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
            source: Some(crate::error::Cause::new(e)),
        },
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
                source: None,
            }),
            Err(e) => Err(Error::Auth {
                server: self.name.clone(),
                message: e.to_string(),
                source: Some(crate::error::Cause::new(e)),
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
                    source: None,
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
}
