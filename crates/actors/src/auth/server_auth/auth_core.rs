//! [`AuthCore`]: what every server of one runtime shares — the lazily opened token store, the options, the HTTP
//! client, the persisted pending logins, the last authorization problem per server, the running AuthActor and the
//! runtime.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock, Weak};

use dashmap::DashMap;
use pimcp_auth::{BrowserOpener, CALLBACK_PORT_ENV, OAuthHttp, SystemBrowser, TokenManager};
use pimcp_config::{Settings, TokenStoreKind};
use ractor::ActorRef;

use crate::auth::actor::AuthMsg;
use crate::auth::options::AuthOptions;
use crate::error::{Error, Result};
use crate::handles::ServerRegistry;
use crate::process::ProcessOptions;

use super::auth_error;

/// Environment variable naming a directory of legacy plaintext token files to import.
const LEGACY_DIR_ENV: &str = "MCP_OAUTH_DIR";

/// What the auth layer needs of the runtime it serves: how `!command` secrets of the `oauth` section run (the guardian,
/// the project directory) and the server actors, to reconnect one after its login.
pub(crate) struct AttachedRuntime {
    pub(crate) process: ProcessOptions,
    pub(crate) project_dir: PathBuf,
    /// Weak: the runtime owns its actors.
    pub(crate) servers: Weak<ServerRegistry>,
}

/// Shared by every server of one runtime.
pub(crate) struct AuthCore {
    pub(crate) auto_auth: bool,
    store_kind: TokenStoreKind,
    data_dir: PathBuf,
    pub(crate) options: AuthOptions,
    pub(super) env_port: Option<String>,
    pub(super) legacy_dir: Option<PathBuf>,
    pub(super) http: std::result::Result<OAuthHttp, String>,
    tokens: tokio::sync::OnceCell<TokenManager>,
    /// Started logins persisted for another process (`pimcp-run auth complete`).
    pub(super) pending: pimcp_auth::PendingLogins,
    /// The last authorization problem per server (read synchronously by server actors for their status).
    errors: DashMap<String, Error>,
    pub(super) flow_ids: AtomicU64,
    /// The running AuthActor (the supervisor sets it at each start), told when a login finished with nobody
    /// waiting on it.
    pub(crate) actor: std::sync::Mutex<Option<ActorRef<AuthMsg>>>,
    /// What the auth layer needs of the runtime it serves, once the runtime is up.
    pub(crate) runtime: OnceLock<AttachedRuntime>,
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
        self.runtime.get().map(|r| r.process.clone()).unwrap_or_default()
    }

    /// The project directory `!command` OAuth secrets run in (pimcp's current directory before the runtime is
    /// attached).
    pub(crate) fn project_dir(&self) -> std::path::PathBuf {
        self.runtime
            .get()
            .map(|r| r.project_dir.clone())
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
            runtime: OnceLock::new(),
            options,
        }
    }

    /// The token manager over the injected store, or the one `settings.tokenStore` names — opened on first use,
    /// failing closed (the error names `settings.tokenStore: "file"`) and retried on the next use.
    pub(super) async fn tokens(&self, server: &str) -> Result<&TokenManager> {
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

    pub(super) fn opener(&self) -> Arc<dyn BrowserOpener> {
        match &self.options.browser {
            Some(opener) => opener.clone(),
            None => Arc::new(SystemBrowser),
        }
    }

    /// The last authorization problem of `server`, if any.
    pub(crate) fn last_error(&self, server: &str) -> Option<Error> {
        self.errors.get(server).map(|e| e.clone())
    }

    pub(super) fn set_error(&self, server: &str, error: Option<Error>) {
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
