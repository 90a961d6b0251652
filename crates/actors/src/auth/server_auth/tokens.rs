//! The tokens of a [`ServerAuth`]: the one a connect starts with, the one each request carries (refreshed before
//! it expires), renewal after a refusal (one refresh, else a login), and the [`TokenSource`] hook its connections
//! use.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use async_trait::async_trait;
use pimcp_auth::{Challenge, REFRESH_SKEW};
use pimcp_config::{OAuthGrant, Secret};
use tracing::Instrument as _;

use crate::auth::source::TokenSource;
use crate::auth::status::AuthMode;
use crate::error::{Error, Result};

use super::ServerAuth;
use super::login::FlowKind;

impl ServerAuth {
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
                    source: None,
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
