//! The logins of a [`ServerAuth`]: starting one (callback listener, discovery and registration, the browser),
//! waiting for it in-band or for another process to finish it, completing it from the listener or a pasted
//! redirect (adopting a login another process persisted), ending or abandoning it, logout, and the server's line
//! of `auth_status()`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use pimcp_auth::{
    AuthorizationRequest, AuthorizationStart, CallbackListener, CallbackPort, Challenge, LOGIN_TIMEOUT, OAuthClient,
};
use pimcp_config::{OAuthGrant, Secret};
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::auth::actor::AuthMsg;
use crate::auth::status::{PendingLogin, ServerAuthStatus};
use crate::error::{Error, Result};

use super::{ServerAuth, auth_error};

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

/// A login waiting for its redirect.
pub(super) struct Flow {
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

impl ServerAuth {
    /// A login without asking the caller: only with `settings.autoAuth`. Joins a pending login (or starts one,
    /// opening the browser) and waits for it up to `AuthOptions::auto_auth_wait`.
    pub(super) async fn interactive(self: &Arc<Self>, kind: FlowKind) -> Result<Secret> {
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
pub(super) fn is_loopback_http(uri: &str) -> bool {
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
