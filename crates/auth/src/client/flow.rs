//! The authorization-code flow of [`OAuthClient`] with PKCE S256: starting an authorization (and a step-up with
//! more scope), the pending flows (exported to and imported from another process), completing one from a redirect
//! URL or a bare code, the unauthenticated probe for a challenge, scope selection and redirect parsing.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use url::Url;

use crate::discovery::{Challenge, Discovered};
use crate::error::{Error, Result, display_url, remote_text};
use crate::record::{ClientRegistration, TokenRecord, issuers_match, now_ms};

use super::{
    AuthorizationRequest, AuthorizationStart, DEFAULT_CLIENT_NAME, MAX_AUTHORIZATION_ATTEMPTS, OAuthClient,
    PENDING_FLOW_TTL,
};

/// How long the unauthenticated probe for a `WWW-Authenticate` challenge may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Parameters this client sets itself; `oauth.authorizationParams` cannot override them.
const RESERVED_AUTHORIZE_PARAMS: &[&str] = &[
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "resource",
];

/// One authorization waiting for its redirect.
pub(super) struct PendingFlow {
    verifier: String,
    redirect_uri: String,
    discovered: Discovered,
    client: ClientRegistration,
    requested_scope: Option<String>,
    started: Instant,
}

/// A parsed authorization response.
#[derive(Debug, Default)]
pub(super) struct RedirectParams {
    pub(super) code: Option<String>,
    pub(super) state: Option<String>,
    pub(super) iss: Option<String>,
    pub(super) error: Option<String>,
    error_description: Option<String>,
    /// True when the input was a bare code.
    pub(super) bare: bool,
}

impl OAuthClient {
    /// Begin an authorization-code flow: discovery, client registration, scope selection, PKCE and state.
    /// Returns the URL to open; finish with [`OAuthClient::complete`].
    #[tracing::instrument(name = "auth_start_authorization", level = "info", skip_all, fields(server = %self.inner.server))]
    pub async fn start_authorization(&self, request: AuthorizationRequest) -> Result<AuthorizationStart> {
        if self.is_machine_grant() {
            return Err(self.config_error(
                "the server uses a machine grant (client_credentials or identity_assertion); there is no browser login",
            ));
        }
        let redirect =
            Url::parse(&request.redirect_uri).map_err(|_| self.config_error("the redirect URI is not a valid URL"))?;
        let challenge = match request.challenge {
            Some(challenge) => Some(challenge),
            None => self.probe_challenge().await,
        };
        let discovered = self.discover(challenge.as_ref()).await?;
        let metadata = &discovered.metadata;
        let authorization_endpoint = metadata
            .authorization_endpoint
            .clone()
            .ok_or_else(|| Error::Discovery {
                url: display_url(self.inner.server_url.as_str()),
                reason: "the authorization server metadata has no `authorization_endpoint`".into(),
            })?;
        if !metadata.response_types_supported.is_empty()
            && !metadata.response_types_supported.iter().any(|t| t == "code")
        {
            return Err(self.config_error("the authorization server does not support the `code` response type"));
        }
        if let Some(methods) = &metadata.code_challenge_methods_supported
            && !methods.iter().any(|m| m == "S256")
        {
            return Err(self.config_error("the authorization server does not support PKCE with S256"));
        }
        let scope = match request.scope {
            Some(scope) => with_offline_access(Some(scope), metadata),
            None => self.select_scope(challenge.as_ref(), &discovered),
        };
        let client = self
            .resolve_client(
                &discovered,
                &request.redirect_uri,
                request.known_client,
                scope.as_deref(),
            )
            .await?;

        let (challenge_code, verifier) = oauth2::PkceCodeChallenge::new_random_sha256();
        let state = hex::encode(rand::random::<[u8; 32]>());
        let mut url = Url::parse(&authorization_endpoint).map_err(|_| Error::Discovery {
            url: display_url(self.inner.server_url.as_str()),
            reason: "the authorization endpoint is not a valid URL".into(),
        })?;
        {
            let existing: Vec<String> = url.query_pairs().map(|(k, _)| k.into_owned()).collect();
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", redirect.as_str())
                .append_pair("state", &state)
                .append_pair("code_challenge", challenge_code.as_str())
                .append_pair("code_challenge_method", "S256");
            if let Some(scope) = &scope {
                query.append_pair("scope", scope);
            }
            query.append_pair("resource", &discovered.resource);
            for (name, value) in &self.inner.config.authorization_params {
                if RESERVED_AUTHORIZE_PARAMS.contains(&name.as_str()) || existing.contains(name) {
                    tracing::warn!(server = %self.inner.server, param = %name, "ignoring an authorization parameter that would override a reserved one");
                    continue;
                }
                query.append_pair(name, value);
            }
        }
        self.inner.attempts.fetch_add(1, Ordering::SeqCst);
        let flow = PendingFlow {
            verifier: verifier.secret().to_string(),
            redirect_uri: redirect.to_string(),
            discovered,
            client,
            requested_scope: scope,
            started: Instant::now(),
        };
        {
            let mut pending = self.pending()?;
            pending.retain(|_, f| f.started.elapsed() < PENDING_FLOW_TTL);
            pending.insert(state.clone(), flow);
        }
        tracing::info!(server = %self.inner.server, "oauth authorization started");
        Ok(AuthorizationStart {
            url: url.to_string(),
            state,
        })
    }

    /// Re-authorize with more scope after a 403 `insufficient_scope`: the union of the granted and the challenged
    /// scope. Fails with [`Error::StepUpExhausted`] once [`MAX_AUTHORIZATION_ATTEMPTS`] authorizations were started
    /// since the last [`OAuthClient::reset_attempts`].
    #[tracing::instrument(name = "auth_step_up", level = "info", skip_all, fields(server = %self.inner.server))]
    pub async fn start_step_up(
        &self,
        challenge: &Challenge,
        current: Option<&TokenRecord>,
        redirect_uri: &str,
    ) -> Result<AuthorizationStart> {
        let attempts = self.inner.attempts.load(Ordering::SeqCst);
        if attempts >= MAX_AUTHORIZATION_ATTEMPTS {
            return Err(Error::StepUpExhausted {
                server: self.inner.server.clone(),
                attempts,
            });
        }
        let mut scopes: Vec<String> = Vec::new();
        for scope in [current.and_then(|r| r.scope.as_deref()), challenge.scope.as_deref()]
            .into_iter()
            .flatten()
        {
            for s in scope.split_whitespace() {
                if !scopes.iter().any(|have| have == s) {
                    scopes.push(s.to_string());
                }
            }
        }
        self.start_authorization(AuthorizationRequest {
            redirect_uri: redirect_uri.to_string(),
            challenge: Some(challenge.clone()),
            known_client: current.map(|r| r.client.clone()),
            scope: if scopes.is_empty() {
                None
            } else {
                Some(scopes.join(" "))
            },
        })
        .await
    }

    /// The started login with this `state`, to persist for another process ([`crate::PendingLogins`]): its PKCE
    /// verifier, redirect URI, discovery result and client. `None` when no such login is pending.
    pub fn export_pending(&self, state: &str) -> Result<Option<crate::pending::PendingLogin>> {
        let pending = self.pending()?;
        Ok(pending.get(state).map(|flow| crate::pending::PendingLogin {
            server: self.inner.server.clone(),
            server_url: self.inner.server_url.to_string(),
            state: state.to_string(),
            verifier: flow.verifier.clone(),
            redirect_uri: flow.redirect_uri.clone(),
            discovered: flow.discovered.clone(),
            client: crate::pending::PendingClient::from(&flow.client),
            requested_scope: flow.requested_scope.clone(),
            created_at_ms: now_ms().saturating_sub(u64::try_from(flow.started.elapsed().as_millis()).unwrap_or(0)),
        }))
    }

    /// Take over a login another process started (see [`OAuthClient::export_pending`]), so
    /// [`OAuthClient::complete`] can finish it here. Refused when it belongs to another server name or URL, or has
    /// expired; it keeps its original age.
    pub fn import_pending(&self, login: crate::pending::PendingLogin) -> Result<()> {
        if login.server != self.inner.server || login.server_url != self.inner.server_url.as_str() {
            return Err(Error::StateMismatch {
                reason: "the pending login belongs to another server or server URL".into(),
            });
        }
        if login.is_expired() {
            return Err(Error::StateMismatch {
                reason: "the pending login expired".into(),
            });
        }
        let age = Duration::from_millis(login.age_ms());
        let started = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        let flow = PendingFlow {
            verifier: login.verifier,
            redirect_uri: login.redirect_uri,
            discovered: login.discovered,
            client: login.client.into(),
            requested_scope: login.requested_scope,
            started,
        };
        let mut pending = self.pending()?;
        pending.retain(|_, f| f.started.elapsed() < PENDING_FLOW_TTL);
        pending.insert(login.state, flow);
        Ok(())
    }

    /// Forget the authorization attempts counted toward [`MAX_AUTHORIZATION_ATTEMPTS`] (call after a request
    /// succeeded with the new token).
    pub fn reset_attempts(&self) {
        self.inner.attempts.store(0, Ordering::SeqCst);
    }

    /// Finish an authorization: `input` is the full redirect URL, its query string, or the bare code.
    ///
    /// A redirect URL or query must carry the `state` of a pending flow (CSRF check); an `error` the authorization
    /// server put there is returned as [`Error::AuthorizationDenied`]. A bare code is accepted only while exactly one
    /// flow is pending (it was copied from the user's own browser, so there is no cross-site request to defend
    /// against). The RFC 9207 `iss`, when present or required, must be the authorization server's issuer.
    #[tracing::instrument(name = "auth_complete", level = "info", skip_all, fields(server = %self.inner.server))]
    pub async fn complete(&self, input: &str) -> Result<TokenRecord> {
        let params = parse_redirect(input)?;
        let (state, flow_issuer, require_iss) = {
            let mut pending = self.pending()?;
            pending.retain(|_, f| f.started.elapsed() < PENDING_FLOW_TTL);
            let state = match &params.state {
                Some(state) => {
                    if !pending.contains_key(state) {
                        return Err(Error::StateMismatch {
                            reason: "its `state` matches no pending authorization (expired, already used, or forged)"
                                .into(),
                        });
                    }
                    state.clone()
                }
                None if params.bare => match pending.len() {
                    1 => pending.keys().next().cloned().unwrap_or_default(),
                    0 => {
                        return Err(Error::StateMismatch {
                            reason: "no authorization is pending".into(),
                        });
                    }
                    _ => {
                        return Err(Error::StateMismatch {
                            reason:
                                "several authorizations are pending; paste the full redirect URL instead of the code"
                                    .into(),
                        });
                    }
                },
                None => {
                    return Err(Error::StateMismatch {
                        reason: "it carries no `state` parameter".into(),
                    });
                }
            };
            let flow = pending.get(&state).ok_or_else(|| Error::StateMismatch {
                reason: "no pending authorization".into(),
            })?;
            (
                state,
                flow.discovered.issuer.clone(),
                flow.discovered.metadata.authorization_response_iss_parameter_supported,
            )
        };
        // RFC 9207: checked before the flow is consumed, so a forged response cannot burn the real one.
        match (&params.iss, &flow_issuer) {
            (Some(received), Some(expected)) if !issuers_match(received, expected) => {
                return Err(Error::IssuerMismatch {
                    expected: expected.clone(),
                    received: received.clone(),
                });
            }
            (Some(received), None) => {
                return Err(Error::IssuerMismatch {
                    expected: "no issuer".into(),
                    received: received.clone(),
                });
            }
            (None, Some(expected)) if require_iss => {
                return Err(Error::IssuerMissing {
                    expected: expected.clone(),
                });
            }
            _ => {}
        }
        let flow = self.pending()?.remove(&state).ok_or_else(|| Error::StateMismatch {
            reason: "the authorization was completed concurrently".into(),
        })?;
        if let Some(error) = params.error {
            return Err(Error::AuthorizationDenied {
                error: remote_text(&error),
                description: params.error_description.as_deref().map(remote_text),
            });
        }
        let code = params.code.ok_or_else(|| Error::InvalidInput {
            reason: "the redirect carries no `code`".into(),
        })?;
        let token_endpoint = self.token_endpoint(&flow.discovered)?;
        let form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code),
            ("redirect_uri", flow.redirect_uri.clone()),
            ("code_verifier", flow.verifier.clone()),
            ("resource", flow.discovered.resource.clone()),
        ];
        let audience = flow.discovered.issuer.clone().unwrap_or_else(|| token_endpoint.clone());
        let response = self
            .token_request(&token_endpoint, &flow.client, &audience, form, "authorization_code")
            .await?;
        tracing::info!(server = %self.inner.server, "oauth authorization completed");
        Ok(TokenRecord {
            issuer: flow.discovered.issuer.clone().or_else(|| flow.client.issuer.clone()),
            resource: Some(flow.discovered.resource.clone()),
            ..self.record_from(response, None, flow.requested_scope, flow.client, token_endpoint)
        })
    }

    fn pending(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, PendingFlow>>> {
        self.inner.pending.lock().map_err(|_| Error::Task {
            reason: "pending-flow lock poisoned".into(),
        })
    }

    /// An unauthenticated `initialize` POST, only to read the 401's `WWW-Authenticate` challenge.
    async fn probe_challenge(&self) -> Option<Challenge> {
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": DEFAULT_CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}}
        });
        let request = self
            .inner
            .http
            .client()
            .ok()?
            .post(self.inner.server_url.clone())
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .send();
        match tokio::time::timeout(PROBE_TIMEOUT, request).await {
            Ok(Ok(response)) if response.status() == reqwest::StatusCode::UNAUTHORIZED => {
                Challenge::from_headers(response.headers())
            }
            Ok(Ok(response)) => {
                tracing::debug!(server = %self.inner.server, status = %response.status(), "probe got no 401");
                None
            }
            _ => None,
        }
    }

    /// Scope to request: `oauth.scope`, else the challenge's, else the resource's `scopes_supported`, else none;
    /// plus `offline_access` when the authorization server lists it.
    fn select_scope(&self, challenge: Option<&Challenge>, discovered: &Discovered) -> Option<String> {
        let chosen = self
            .inner
            .config
            .scope
            .clone()
            .or_else(|| challenge.and_then(|c| c.scope.clone()))
            .or_else(|| {
                discovered
                    .resource_metadata
                    .as_ref()
                    .map(|p| p.scopes_supported.join(" "))
                    .filter(|s| !s.is_empty())
            });
        with_offline_access(chosen, &discovered.metadata)
    }
}

/// Append `offline_access` when the authorization server lists it and some scope is requested at all.
pub(super) fn with_offline_access(
    scope: Option<String>,
    metadata: &crate::discovery::AuthServerMetadata,
) -> Option<String> {
    let scope = scope?;
    if metadata.supports_scope("offline_access") && !scope.split_whitespace().any(|s| s == "offline_access") {
        Some(format!("{scope} offline_access"))
    } else {
        Some(scope)
    }
}

/// Read a redirect URL, a query string or a bare code.
pub(super) fn parse_redirect(input: &str) -> Result<RedirectParams> {
    let input = input.trim();
    if input.is_empty() {
        return Err(Error::InvalidInput {
            reason: "it is empty".into(),
        });
    }
    let query: Option<String> = if input.starts_with("http://") || input.starts_with("https://") {
        let url = Url::parse(input).map_err(|_| Error::InvalidInput {
            reason: "it is not a valid URL".into(),
        })?;
        let query = url
            .query()
            .filter(|q| !q.is_empty())
            .or(url.fragment())
            .unwrap_or("")
            .to_string();
        Some(query)
    } else if input.contains('=') {
        Some(input.trim_start_matches(['?', '#']).to_string())
    } else {
        None
    };
    match query {
        Some(query) => {
            let mut params = RedirectParams::default();
            for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
                let value = Some(value.into_owned());
                match name.as_ref() {
                    "code" => params.code = value,
                    "state" => params.state = value,
                    "iss" => params.iss = value,
                    "error" => params.error = value,
                    "error_description" => params.error_description = value,
                    _ => {}
                }
            }
            if params.code.is_none() && params.error.is_none() {
                return Err(Error::InvalidInput {
                    reason: "it has neither a `code` nor an `error` parameter".into(),
                });
            }
            Ok(params)
        }
        None => {
            if input.chars().any(|c| c.is_whitespace() || c == '&' || c == '?') {
                return Err(Error::InvalidInput {
                    reason: "it is neither a redirect URL nor a single authorization code".into(),
                });
            }
            Ok(RedirectParams {
                code: Some(input.to_string()),
                bare: true,
                ..RedirectParams::default()
            })
        }
    }
}
