//! AuthActor: owns one [`ServerAuth`] per server that may use OAuth (created on first use, replaced when the
//! server's transport or auth configuration changes, which drops its pending login), and reconnects a server when
//! a login finished with no request waiting for it. Token work runs in the callers' tasks on the `ServerAuth`,
//! whose own lock serializes that server's flows; the actor's mailbox only hands them out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pimcp_config::{Config, Secret, ServerConfig};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use super::options::AuthOptions;
use super::server_auth::{AttachedRuntime, AuthCore, ServerAuth, auth_mode, oauth_capable};
use super::source::TokenSource;
use super::status::AuthMode;
use crate::error::{Error, Result};
use crate::handles::ServerRegistry;
use crate::msg::ServerRequest;
use crate::process::ProcessOptions;

/// Longest wait for the AuthActor to hand out a server's auth state (it never does I/O in its mailbox).
pub(crate) const AUTH_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Every configured server: name, auth mode, and the auth state of OAuth-capable ones.
pub(crate) type ServerAuthList = Vec<(String, AuthMode, Option<Arc<ServerAuth>>)>;

pub(crate) enum AuthMsg {
    /// The auth state of `server`; `None` when it cannot use OAuth (or is not configured).
    Server {
        server: String,
        reply: oneshot::Sender<Option<Arc<ServerAuth>>>,
    },
    /// Every configured server with its mode and, for OAuth-capable ones, its auth state.
    Servers {
        reply: oneshot::Sender<ServerAuthList>,
    },
    Reconfigure {
        config: Arc<Config>,
    },
    /// A login finished and no request was waiting for it: reconnect the server so it uses the new token.
    LoggedIn {
        server: String,
    },
    /// Makes the handler fail, to exercise supervision.
    #[cfg(test)]
    FailForTest,
}

pub(crate) struct AuthArgs {
    pub config: Arc<Config>,
    pub core: Arc<AuthCore>,
}

pub(crate) struct AuthState {
    config: Arc<Config>,
    core: Arc<AuthCore>,
    servers: HashMap<String, Arc<ServerAuth>>,
}

impl AuthState {
    fn entry(&mut self, server: &str) -> Option<Arc<ServerAuth>> {
        if let Some(existing) = self.servers.get(server) {
            return Some(existing.clone());
        }
        let cfg = self.config.server(server)?;
        let auth = Arc::new(ServerAuth::new(cfg, self.core.clone())?);
        self.servers.insert(server.to_owned(), auth.clone());
        Some(auth)
    }
}

pub(crate) struct AuthActor;

impl Actor for AuthActor {
    type Msg = AuthMsg;
    type State = AuthState;
    type Arguments = AuthArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<AuthMsg>,
        args: AuthArgs,
    ) -> std::result::Result<AuthState, ActorProcessingErr> {
        Ok(AuthState {
            config: args.config,
            core: args.core,
            servers: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<AuthMsg>,
        msg: AuthMsg,
        st: &mut AuthState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match msg {
            #[cfg(test)]
            AuthMsg::FailForTest => return Err("failing on purpose (test)".into()),
            AuthMsg::Server { server, reply } => {
                let _ = reply.send(st.entry(&server));
            }
            AuthMsg::Servers { reply } => {
                let config = st.config.clone();
                let all = config
                    .servers
                    .iter()
                    .map(|cfg| {
                        let mode = auth_mode(cfg);
                        let entry = if oauth_capable(mode) { st.entry(&cfg.name) } else { None };
                        (cfg.name.clone(), mode, entry)
                    })
                    .collect();
                let _ = reply.send(all);
            }
            AuthMsg::Reconfigure { config } => {
                st.servers.retain(|name, auth| {
                    let keep = config.server(name).is_some_and(|cfg| auth.same_identity(cfg));
                    if !keep {
                        auth.abandon();
                    }
                    keep
                });
                st.config = config;
            }
            AuthMsg::LoggedIn { server } => {
                let servers = st.core.runtime.get().and_then(|r| r.servers.upgrade());
                if let Some(actor) = servers.and_then(|s| s.get(&server).map(|a| a.clone())) {
                    tracing::info!(%server, "reconnecting after the login");
                    // Keep the reply's receiver alive: a connect whose caller has gone away may be dropped.
                    let (reply, answer) = oneshot::channel();
                    if actor.send(ServerRequest::Connect { force: true, reply }).is_ok() {
                        tokio::spawn(async move {
                            let _ = answer.await;
                        });
                    }
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AuthMsg>,
        st: &mut AuthState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        for auth in st.servers.values() {
            auth.abandon();
        }
        Ok(())
    }
}

/// What a connect attempt of an OAuth-capable server gets: the hook its requests use and the token to start with.
pub(crate) struct ConnectAuth {
    pub source: Arc<dyn TokenSource>,
    pub token: Option<Secret>,
    pub server: Arc<ServerAuth>,
}

/// The runtime's handle to its AuthActor (kept in [`Shared`]). The supervisor starts the actor (and restarts it
/// when it fails, see `supervisor.rs`); requests go to whichever instance runs.
#[derive(Clone)]
pub(crate) struct AuthHandle {
    pub(crate) core: Arc<AuthCore>,
}

impl AuthHandle {
    pub(crate) fn new(config: &Config, data_dir: &Path, options: AuthOptions) -> AuthHandle {
        AuthHandle {
            core: Arc::new(AuthCore::new(&config.settings, data_dir, options)),
        }
    }

    /// What a (re)start of the AuthActor needs: the configuration and the shared core.
    pub(crate) fn args(&self, config: Arc<Config>) -> AuthArgs {
        AuthArgs {
            config,
            core: self.core.clone(),
        }
    }

    /// Gives the auth layer what it needs of the runtime: process options and project directory for `!command`
    /// secrets, and the server actors (to reconnect one after its login).
    pub(crate) fn attach(&self, process: ProcessOptions, project_dir: PathBuf, servers: &Arc<ServerRegistry>) {
        let _ = self.core.runtime.set(AttachedRuntime {
            process,
            project_dir,
            servers: Arc::downgrade(servers),
        });
    }

    pub(crate) fn stop(&self) {
        if let Some(actor) = self.core.actor() {
            actor.stop(Some("runtime stopping".into()));
        }
    }

    pub(crate) fn reconfigure(&self, config: Arc<Config>) {
        if let Some(actor) = self.core.actor() {
            let _ = actor.send_message(AuthMsg::Reconfigure { config });
        }
    }

    async fn ask<T>(&self, msg: impl FnOnce(oneshot::Sender<T>) -> AuthMsg) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.core
            .actor()
            .ok_or_else(|| Error::actor("the auth actor is not running"))?
            .send_message(msg(tx))
            .map_err(|_| Error::actor("the auth actor is not running"))?;
        match tokio::time::timeout(AUTH_REPLY_TIMEOUT, rx).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err(Error::actor("the auth actor dropped the request")),
            Err(_) => Err(Error::actor("the auth actor did not answer in time")),
        }
    }

    pub(crate) async fn server(&self, server: &str) -> Result<Option<Arc<ServerAuth>>> {
        let server = server.to_owned();
        self.ask(|reply| AuthMsg::Server { server, reply }).await
    }

    pub(crate) async fn servers(&self) -> Result<ServerAuthList> {
        self.ask(|reply| AuthMsg::Servers { reply }).await
    }

    /// For a connect attempt: `None` for servers that cannot use OAuth (no message, no store); otherwise the hook
    /// and the token to start with (see [`ServerAuth::prepare`]).
    pub(crate) async fn for_connect(&self, cfg: &ServerConfig) -> Result<Option<ConnectAuth>> {
        if !oauth_capable(auth_mode(cfg)) {
            return Ok(None);
        }
        let Some(server) = self.server(&cfg.name).await? else {
            return Ok(None);
        };
        let token = server.prepare().await?;
        Ok(Some(ConnectAuth {
            source: server.source(),
            token,
            server,
        }))
    }

    /// The last authorization problem of `server` (synchronous: for server actors' status reasons).
    pub(crate) fn last_error(&self, server: &str) -> Option<Error> {
        self.core.last_error(server)
    }
}
