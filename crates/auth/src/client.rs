//! [`OAuthClient`]: the OAuth 2.1 client of one MCP server — authorization code with PKCE S256 (start, then
//! complete from a redirect URL or a bare code), client registration (pre-registered, client ID metadata document,
//! RFC 7591 dynamic registration), scope selection and step-up, refresh, and the `client_credentials` grant with a
//! client secret or an RFC 7523 `private_key_jwt` assertion, and SEP-990 enterprise-managed authorization (an ID
//! token exchanged for an ID-JAG at the IdP by RFC 8693, then the RFC 7523 `jwt-bearer` grant at the MCP server's
//! authorization server). Token requests carry the RFC 8707 `resource`.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use pimcp_config::{OAuthConfig, OAuthGrant, Secret};
use serde::Deserialize;
use url::Url;

use crate::discovery::{Challenge, Discovered, DiscoveryOptions, discover};
use crate::error::{Error, Result, display_url, remote_text};
use crate::http::OAuthHttp;
use crate::jwt::{CLIENT_ASSERTION_TYPE, client_assertion};
use crate::record::{ClientRegistration, TokenEndpointAuthMethod, TokenRecord, issuers_match, now_ms, unix_secs};

/// At most this many authorizations (first login plus step-ups) before 403 `insufficient_scope` is final.
pub const MAX_AUTHORIZATION_ATTEMPTS: u32 = 3;
/// A started authorization that is not completed within this time is forgotten.
pub const PENDING_FLOW_TTL: Duration = Duration::from_secs(10 * 60);
/// How long the unauthenticated probe for a `WWW-Authenticate` challenge may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// RFC 7523 `jwt-bearer` grant type (SEP-990 presents the ID-JAG with it).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// RFC 8693 token exchange grant type.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 token type of an OpenID Connect ID token.
const TOKEN_TYPE_ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
/// Token type of an Identity Assertion JWT Authorization Grant (draft-ietf-oauth-identity-assertion-authz-grant).
pub const TOKEN_TYPE_ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// Client name sent in dynamic registration when `oauth.clientName` is not set.
pub const DEFAULT_CLIENT_NAME: &str = "pimcp";
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

/// What [`OAuthClient::new`] needs: the server, its `oauth` configuration and the secrets resolved from it.
#[derive(Clone)]
pub struct OAuthClientOptions {
    pub server_name: String,
    pub server_url: String,
    pub config: OAuthConfig,
    /// `oauth.clientSecret`, already resolved (a `!command` has run).
    pub client_secret: Option<Secret>,
    /// PEM private key (P-256) for `private_key_jwt` client authentication.
    pub private_key_pem: Option<Secret>,
    /// The HTTP client; `None` builds one with [`OAuthHttp::new`].
    pub http: Option<OAuthHttp>,
    /// The guardian the `!command` secrets this client resolves itself (`identityAssertion.idToken`,
    /// `idpClientSecret`) run behind (see [`pimcp_config::ResolveOptions::guardian`]).
    pub secret_guardian: Option<std::sync::Arc<dyn pimcp_config::GroupWatch>>,
}

impl fmt::Debug for OAuthClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClientOptions")
            .field("server_name", &self.server_name)
            .field("server_url", &self.server_url)
            .field("config", &self.config)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "<redacted>"))
            .field("private_key_pem", &self.private_key_pem.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl OAuthClientOptions {
    pub fn new(server_name: impl Into<String>, server_url: impl Into<String>, config: OAuthConfig) -> Self {
        OAuthClientOptions {
            server_name: server_name.into(),
            server_url: server_url.into(),
            config,
            client_secret: None,
            private_key_pem: None,
            http: None,
            secret_guardian: None,
        }
    }
}

/// Input of [`OAuthClient::start_authorization`].
#[derive(Debug, Clone, Default)]
pub struct AuthorizationRequest {
    /// Where the authorization server sends the browser back (the loopback listener's URI, or a manual one).
    pub redirect_uri: String,
    /// The challenge of the 401 that started this; `None` probes the server for one.
    pub challenge: Option<Challenge>,
    /// A client registered earlier (from the stored record); reused when it fits this issuer and redirect URI.
    pub known_client: Option<ClientRegistration>,
    /// Explicit scope (space-separated); `None` selects it (configuration, challenge, metadata, else omitted).
    pub scope: Option<String>,
}

/// The URL to open and the CSRF `state` it carries.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorizationStart {
    pub url: String,
    pub state: String,
}

impl fmt::Debug for AuthorizationStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorizationStart")
            .field("url", &display_url(&self.url))
            .field("state", &"<redacted>")
            .finish()
    }
}

/// One authorization waiting for its redirect.
struct PendingFlow {
    verifier: String,
    redirect_uri: String,
    discovered: Discovered,
    client: ClientRegistration,
    requested_scope: Option<String>,
    started: Instant,
}

struct Inner {
    server: String,
    server_url: Url,
    config: OAuthConfig,
    client_secret: Option<Secret>,
    private_key_pem: Option<Secret>,
    http: OAuthHttp,
    secret_guardian: Option<std::sync::Arc<dyn pimcp_config::GroupWatch>>,
    pending: Mutex<HashMap<String, PendingFlow>>,
    attempts: AtomicU32,
}

/// The OAuth client of one MCP server. Cheap to clone (shared state: pending flows and the step-up counter).
#[derive(Clone)]
pub struct OAuthClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClient")
            .field("server", &self.inner.server)
            .field("server_url", &display_url(self.inner.server_url.as_str()))
            .field("grant", &self.inner.config.grant_type)
            .finish()
    }
}

/// A parsed authorization response.
#[derive(Debug, Default)]
struct RedirectParams {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    /// True when the input was a bare code.
    bare: bool,
}

/// A token endpoint's success response.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    /// RFC 8693: what a token exchange issued.
    #[serde(default)]
    issued_token_type: Option<String>,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct RegistrationResponse {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    client_id_issued_at: Option<u64>,
    #[serde(default)]
    client_secret_expires_at: Option<u64>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    redirect_uris: Option<Vec<String>>,
}

impl OAuthClient {
    /// A client for one server. Fails when the server URL is unusable or the configuration is inconsistent.
    pub fn new(options: OAuthClientOptions) -> Result<OAuthClient> {
        let config_err = |reason: &str| Error::Config {
            server: options.server_name.clone(),
            reason: reason.into(),
        };
        let server_url =
            Url::parse(&options.server_url).map_err(|_| config_err("the server URL is not a valid URL"))?;
        if !matches!(server_url.scheme(), "http" | "https") {
            return Err(config_err("oauth needs an http(s) server URL"));
        }
        if options.config.dpop {
            // Fail closed: silently sending bearer tokens to a user who asked for sender-constrained ones would be
            // a security surprise.
            return Err(config_err(
                "`oauth.dpop` (RFC 9449 DPoP) is not implemented yet; remove it to use bearer tokens",
            ));
        }
        if options.client_secret.is_some() && options.config.client_id.is_none() {
            return Err(config_err("`oauth.clientSecret` needs `oauth.clientId`"));
        }
        if let Some(url) = &options.config.client_metadata_url
            && !is_client_metadata_url(url)
        {
            return Err(config_err("`oauth.clientMetadataUrl` must be an https URL with a path"));
        }
        let http = match options.http {
            Some(http) => http,
            None => OAuthHttp::new()?,
        };
        Ok(OAuthClient {
            inner: Arc::new(Inner {
                server: options.server_name,
                server_url,
                config: options.config,
                client_secret: options.client_secret,
                private_key_pem: options.private_key_pem,
                http,
                secret_guardian: options.secret_guardian,
                pending: Mutex::new(HashMap::new()),
                attempts: AtomicU32::new(0),
            }),
        })
    }

    pub fn server(&self) -> &str {
        &self.inner.server
    }

    pub fn server_url(&self) -> &str {
        self.inner.server_url.as_str()
    }

    /// The configured grant.
    pub fn grant(&self) -> OAuthGrant {
        self.inner.config.grant_type
    }

    /// Whether tokens come without a person (`client_credentials`, `identity_assertion`): no browser login, and
    /// [`OAuthClient::obtain`] gets a new token whenever one is needed.
    pub fn is_machine_grant(&self) -> bool {
        self.inner.config.grant_type != OAuthGrant::AuthorizationCode
    }

    /// A new token by the configured machine grant (see [`OAuthClient::is_machine_grant`]).
    pub async fn obtain(&self) -> Result<TokenRecord> {
        match self.inner.config.grant_type {
            OAuthGrant::ClientCredentials => self.client_credentials().await,
            OAuthGrant::IdentityAssertion => self.identity_assertion().await,
            OAuthGrant::AuthorizationCode => {
                Err(self.needs_auth("the authorization_code grant needs a login (no machine grant is configured)"))
            }
        }
    }

    /// Discovery for this server (protected-resource metadata, then authorization-server metadata).
    #[tracing::instrument(name = "auth_discover", level = "info", skip_all, fields(server = %self.inner.server))]
    pub async fn discover(&self, challenge: Option<&Challenge>) -> Result<Discovered> {
        let options = DiscoveryOptions {
            auth_server_metadata_url: self.inner.config.auth_server_metadata_url.clone(),
            skip_issuer_validation: self.inner.config.skip_issuer_metadata_validation,
        };
        discover(&self.inner.http, &self.inner.server_url, challenge, &options).await
    }

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

    /// Use the refresh token of `record` (or, for the `client_credentials` grant, request a new token). A rejected
    /// refresh token is [`Error::NeedsAuth`]; `record` itself is never changed.
    #[tracing::instrument(name = "auth_refresh", level = "info", skip_all, fields(server = %self.inner.server))]
    pub async fn refresh(&self, record: &TokenRecord) -> Result<TokenRecord> {
        if self.is_machine_grant() {
            return self.obtain().await;
        }
        let Some(refresh_token) = record.refresh_token.clone() else {
            return Err(self.needs_auth("the access token expired and there is no refresh token"));
        };
        let (token_endpoint, discovered) = match &record.token_endpoint {
            Some(endpoint) => (endpoint.clone(), None),
            None => {
                let discovered = self.discover(None).await?;
                (self.token_endpoint(&discovered)?, Some(discovered))
            }
        };
        let resource = record
            .resource
            .clone()
            .unwrap_or_else(|| self.inner.server_url.to_string());
        let form = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh_token.expose().to_string()),
            ("resource", resource.clone()),
        ];
        let audience = record.issuer.clone().unwrap_or_else(|| token_endpoint.clone());
        let response = match self
            .token_request(&token_endpoint, &record.client, &audience, form, "refresh_token")
            .await
        {
            Ok(response) => response,
            Err(Error::TokenRefused { error, description, .. })
                if matches!(
                    error.as_str(),
                    "invalid_grant" | "invalid_client" | "unauthorized_client"
                ) =>
            {
                let detail = description.map(|d| format!(": {d}")).unwrap_or_default();
                return Err(self.needs_auth(&format!(
                    "the authorization server rejected the refresh token ({error}{detail})"
                )));
            }
            Err(other) => return Err(other),
        };
        let issuer = record.issuer.clone().or_else(|| discovered.and_then(|d| d.issuer));
        Ok(TokenRecord {
            issuer,
            resource: Some(resource),
            ..self.record_from(
                response,
                Some(refresh_token),
                record.scope.clone(),
                record.client.clone(),
                token_endpoint,
            )
        })
    }

    /// The `client_credentials` grant (machine-to-machine): `oauth.clientId` with the client secret
    /// (`client_secret_basic` when the server supports it, else `client_secret_post`) or with a `private_key_jwt`
    /// assertion when a private key is configured.
    #[tracing::instrument(name = "auth_client_credentials", level = "info", skip_all, fields(server = %self.inner.server))]
    pub async fn client_credentials(&self) -> Result<TokenRecord> {
        let client_id = self
            .inner
            .config
            .client_id
            .clone()
            .ok_or_else(|| self.config_error("the client_credentials grant needs `oauth.clientId`"))?;
        if self.inner.private_key_pem.is_none() && self.inner.client_secret.is_none() {
            return Err(self
                .config_error("the client_credentials grant needs `oauth.clientSecret` or `oauth.clientPrivateKey`"));
        }
        let discovered = self.discover(None).await?;
        let token_endpoint = self.token_endpoint(&discovered)?;
        let client = self.configured_client(client_id, &discovered);
        let scope = self.machine_scope(&discovered);
        let mut form = vec![
            ("grant_type", "client_credentials".to_string()),
            ("resource", discovered.resource.clone()),
        ];
        if let Some(scope) = &scope {
            form.push(("scope", scope.clone()));
        }
        let audience = discovered.issuer.clone().unwrap_or_else(|| token_endpoint.clone());
        let response = self
            .token_request(&token_endpoint, &client, &audience, form, "client_credentials")
            .await?;
        Ok(TokenRecord {
            issuer: discovered.issuer.clone(),
            resource: Some(discovered.resource.clone()),
            ..self.record_from(response, None, scope, client, token_endpoint)
        })
    }

    /// SEP-990 enterprise-managed authorization (`grantType: "identity_assertion"`, `oauth.identityAssertion`):
    ///
    /// 1. discovery of the MCP server's authorization server (its issuer is the ID-JAG's audience);
    /// 2. RFC 8693 token exchange at the IdP's token endpoint (`idpTokenEndpoint`, else the OpenID metadata of
    ///    `idpIssuer`): the user's ID token (`idToken`, resolved now so a `!command` can print a fresh one) as
    ///    `subject_token`, `requested_token_type` ID-JAG, `audience` = the issuer, `resource` = the MCP resource,
    ///    authenticated as `idpClientId` (with `idpClientSecret` by `client_secret_post` when set);
    /// 3. the RFC 7523 `jwt-bearer` grant at the authorization server with the ID-JAG as `assertion`, authenticated
    ///    as `oauth.clientId` like `client_credentials` (secret or `private_key_jwt`), or as the client ID metadata
    ///    document URL (`oauth.clientMetadataUrl`) without a secret.
    ///
    /// No refresh token is expected: a new exchange runs whenever the token is about to expire.
    #[tracing::instrument(name = "auth_identity_assertion", level = "info", skip_all, fields(server = %self.inner.server))]
    pub async fn identity_assertion(&self) -> Result<TokenRecord> {
        let ia = self
            .inner
            .config
            .identity_assertion
            .clone()
            .ok_or_else(|| self.config_error("the identity_assertion grant needs `oauth.identityAssertion`"))?;
        let idp_client_id = ia
            .idp_client_id
            .clone()
            .ok_or_else(|| self.config_error("`oauth.identityAssertion` needs `idpClientId`"))?;
        let id_token_value = ia
            .id_token
            .clone()
            .ok_or_else(|| self.config_error("`oauth.identityAssertion` needs `idToken`"))?;
        let client_id = self
            .inner
            .config
            .client_id
            .clone()
            .or_else(|| self.inner.config.client_metadata_url.clone())
            .ok_or_else(|| {
                self.config_error("the identity_assertion grant needs `oauth.clientId` (or `oauth.clientMetadataUrl`)")
            })?;

        let discovered = self.discover(None).await?;
        let token_endpoint = self.token_endpoint(&discovered)?;
        let audience = discovered.issuer.clone().ok_or_else(|| Error::Discovery {
            url: display_url(self.inner.server_url.as_str()),
            reason: "the authorization server has no issuer identifier to name as the ID-JAG audience".into(),
        })?;
        let idp_endpoint = self.idp_token_endpoint(&ia).await?;
        let id_token = self
            .resolve_secret(id_token_value, "oauth.identityAssertion.idToken")
            .await?;
        let idp_secret = match ia.idp_client_secret.clone() {
            Some(value) => Some(
                self.resolve_secret(value, "oauth.identityAssertion.idpClientSecret")
                    .await?,
            ),
            None => None,
        };
        let scope = self.machine_scope(&discovered);

        // Step 2: ID token → ID-JAG at the IdP.
        let idp_client = ClientRegistration {
            client_id: idp_client_id,
            auth_method: if idp_secret.is_some() {
                TokenEndpointAuthMethod::ClientSecretPost
            } else {
                TokenEndpointAuthMethod::None
            },
            client_secret: idp_secret,
            pre_registered: true,
            ..ClientRegistration::default()
        };
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE_GRANT.to_string()),
            ("requested_token_type", TOKEN_TYPE_ID_JAG.to_string()),
            ("audience", audience.clone()),
            ("resource", discovered.resource.clone()),
            ("subject_token", id_token.expose().to_string()),
            ("subject_token_type", TOKEN_TYPE_ID_TOKEN.to_string()),
        ];
        if let Some(scope) = &scope {
            form.push(("scope", scope.clone()));
        }
        let exchanged = self
            .post_token_form(&idp_endpoint, &idp_client, &idp_endpoint, form, "token-exchange")
            .await?;
        if exchanged.issued_token_type.as_deref() != Some(TOKEN_TYPE_ID_JAG) {
            return Err(Error::Http {
                what: "token exchange",
                url: display_url(&idp_endpoint),
                reason: format!(
                    "the identity provider issued `{}`, not an ID-JAG",
                    exchanged
                        .issued_token_type
                        .as_deref()
                        .map(remote_text)
                        .unwrap_or_else(|| "no issued_token_type".into())
                ),
            });
        }
        let jag = Secret::new(exchanged.access_token);

        // Step 3: ID-JAG → access token at the MCP server's authorization server.
        let mut client = self.configured_client(client_id, &discovered);
        if self.inner.config.client_id.is_none() {
            // Client ID metadata document as the client ID (SEP-991): a public client.
            client.client_secret = None;
            client.auth_method = TokenEndpointAuthMethod::None;
        }
        let mut form = vec![
            ("grant_type", JWT_BEARER_GRANT.to_string()),
            ("assertion", jag.expose().to_string()),
            ("resource", discovered.resource.clone()),
        ];
        if let Some(scope) = &scope {
            form.push(("scope", scope.clone()));
        }
        let response = self
            .token_request(&token_endpoint, &client, &audience, form, "jwt-bearer")
            .await?;
        tracing::info!(server = %self.inner.server, "oauth identity assertion exchanged");
        Ok(TokenRecord {
            issuer: discovered.issuer.clone(),
            resource: Some(discovered.resource.clone()),
            ..self.record_from(response, None, scope, client, token_endpoint)
        })
    }

    /// The IdP's token endpoint: configured, else from the OpenID (or RFC 8414) metadata of `idpIssuer`, whose
    /// `issuer` must be exactly `idpIssuer`. https only (plain http to loopback for tests).
    async fn idp_token_endpoint(&self, ia: &pimcp_config::IdentityAssertionConfig) -> Result<String> {
        let checked = |value: &str, what: &str| -> Result<Url> {
            let url = Url::parse(value).map_err(|_| self.config_error(&format!("`{what}` is not a valid URL")))?;
            if url.scheme() == "https" || (url.scheme() == "http" && crate::discovery::is_loopback(&url)) {
                Ok(url)
            } else {
                Err(self.config_error(&format!("`{what}` must use https")))
            }
        };
        if let Some(endpoint) = &ia.idp_token_endpoint {
            return Ok(checked(endpoint, "oauth.identityAssertion.idpTokenEndpoint")?.to_string());
        }
        let issuer = ia
            .idp_issuer
            .as_deref()
            .ok_or_else(|| self.config_error("`oauth.identityAssertion` needs `idpIssuer` or `idpTokenEndpoint`"))?;
        let issuer_url = checked(issuer, "oauth.identityAssertion.idpIssuer")?;
        let metadata = crate::discovery::issuer_metadata(&self.inner.http, &issuer_url, issuer).await?;
        let endpoint = metadata.token_endpoint.ok_or_else(|| Error::Discovery {
            url: display_url(issuer),
            reason: "the identity provider's metadata has no `token_endpoint`".into(),
        })?;
        Ok(checked(&endpoint, "token_endpoint of the identity provider")?.to_string())
    }

    /// The pre-registered client of a machine grant: `private_key_jwt` when a key is configured, else the secret by
    /// `client_secret_basic` when the server supports it, else `client_secret_post`.
    fn configured_client(&self, client_id: String, discovered: &Discovered) -> ClientRegistration {
        let metadata = &discovered.metadata;
        let (client_secret, auth_method) = match (&self.inner.private_key_pem, &self.inner.client_secret) {
            (Some(_), _) => (None, TokenEndpointAuthMethod::PrivateKeyJwt),
            (None, None) => (None, TokenEndpointAuthMethod::None),
            (None, secret) => {
                let method = if metadata.supports_auth_method("client_secret_basic") {
                    TokenEndpointAuthMethod::ClientSecretBasic
                } else if metadata.supports_auth_method("client_secret_post") {
                    TokenEndpointAuthMethod::ClientSecretPost
                } else {
                    TokenEndpointAuthMethod::ClientSecretBasic
                };
                (secret.clone(), method)
            }
        };
        ClientRegistration {
            client_id,
            client_secret,
            issuer: discovered.issuer.clone(),
            pre_registered: true,
            auth_method,
            ..ClientRegistration::default()
        }
    }

    /// Scope of a machine grant: `oauth.scope`, else the resource's `scopes_supported`, else none.
    fn machine_scope(&self, discovered: &Discovered) -> Option<String> {
        self.inner.config.scope.clone().or_else(|| {
            discovered
                .resource_metadata
                .as_ref()
                .map(|p| p.scopes_supported.join(" "))
                .filter(|s| !s.is_empty())
        })
    }

    fn pending(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, PendingFlow>>> {
        self.inner.pending.lock().map_err(|_| Error::Task {
            reason: "pending-flow lock poisoned".into(),
        })
    }

    fn config_error(&self, reason: &str) -> Error {
        Error::Config {
            server: self.inner.server.clone(),
            reason: reason.to_string(),
        }
    }

    fn needs_auth(&self, reason: &str) -> Error {
        Error::NeedsAuth {
            server: self.inner.server.clone(),
            reason: reason.to_string(),
        }
    }

    fn token_endpoint(&self, discovered: &Discovered) -> Result<String> {
        discovered
            .metadata
            .token_endpoint
            .clone()
            .ok_or_else(|| Error::Discovery {
                url: display_url(self.inner.server_url.as_str()),
                reason: "the authorization server metadata has no `token_endpoint`".into(),
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

    /// Pre-registered client, else a stored registration that still fits, else a client ID metadata document,
    /// else dynamic client registration.
    async fn resolve_client(
        &self,
        discovered: &Discovered,
        redirect_uri: &str,
        known: Option<ClientRegistration>,
        scope: Option<&str>,
    ) -> Result<ClientRegistration> {
        let metadata = &discovered.metadata;
        if let Some(client_id) = &self.inner.config.client_id {
            let secret = self.inner.client_secret.clone();
            let auth_method = match &secret {
                None => TokenEndpointAuthMethod::None,
                Some(_) if metadata.supports_auth_method("client_secret_basic") => {
                    TokenEndpointAuthMethod::ClientSecretBasic
                }
                Some(_) if metadata.supports_auth_method("client_secret_post") => {
                    TokenEndpointAuthMethod::ClientSecretPost
                }
                Some(_) => TokenEndpointAuthMethod::ClientSecretBasic,
            };
            return Ok(ClientRegistration {
                client_id: client_id.clone(),
                client_secret: secret,
                issuer: discovered.issuer.clone(),
                redirect_uris: vec![redirect_uri.to_string()],
                pre_registered: true,
                auth_method,
                ..ClientRegistration::default()
            });
        }
        if let Some(known) = known
            && !known.pre_registered
            && !known.client_id.is_empty()
            && known
                .issuer
                .as_deref()
                .zip(discovered.issuer.as_deref())
                .is_some_and(|(a, b)| issuers_match(a, b))
            && (known.redirect_uris.is_empty() || known.redirect_uris.iter().any(|u| u == redirect_uri))
            && !secret_expired(&known)
        {
            return Ok(known);
        }
        if let Some(url) = &self.inner.config.client_metadata_url
            && metadata.client_id_metadata_document_supported
        {
            return Ok(ClientRegistration {
                client_id: url.clone(),
                issuer: discovered.issuer.clone(),
                redirect_uris: vec![redirect_uri.to_string()],
                auth_method: TokenEndpointAuthMethod::None,
                ..ClientRegistration::default()
            });
        }
        let Some(endpoint) = metadata.registration_endpoint.clone() else {
            return Err(self.config_error(
                "the authorization server offers no dynamic client registration; set `oauth.clientId` (and \
                 `oauth.clientSecret` for a confidential client) or `oauth.clientMetadataUrl`",
            ));
        };
        self.register(&endpoint, discovered, redirect_uri, scope).await
    }

    /// RFC 7591 dynamic client registration of a native public client (or whatever the server insists on).
    #[tracing::instrument(name = "auth_register", level = "info", skip_all, fields(server = %self.inner.server))]
    async fn register(
        &self,
        endpoint: &str,
        discovered: &Discovered,
        redirect_uri: &str,
        scope: Option<&str>,
    ) -> Result<ClientRegistration> {
        let metadata = &discovered.metadata;
        let requested_method = ["none", "client_secret_basic", "client_secret_post"]
            .into_iter()
            .find(|m| {
                metadata
                    .token_endpoint_auth_methods_supported
                    .as_ref()
                    .is_none_or(|l| l.iter().any(|s| s == m))
            })
            .unwrap_or("none");
        let config = &self.inner.config;
        let mut body = serde_json::json!({
            "client_name": config.client_name.clone().unwrap_or_else(|| DEFAULT_CLIENT_NAME.to_string()),
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": requested_method,
            "application_type": "native",
        });
        if let Some(scope) = scope {
            body["scope"] = scope.into();
        }
        if let Some(uri) = &config.client_uri {
            body["client_uri"] = uri.clone().into();
        }
        if let Some(uri) = &config.logo_uri {
            body["logo_uri"] = uri.clone().into();
        }
        let request = self
            .inner
            .http
            .client()?
            .post(endpoint)
            .header("accept", "application/json")
            .json(&body);
        let fetched = self.inner.http.send(request, "client registration", endpoint).await?;
        if !(200..300).contains(&fetched.status) {
            let reason = match serde_json::from_slice::<ErrorResponse>(&fetched.body) {
                Ok(e) => format!(
                    "HTTP {}: {}{}",
                    fetched.status,
                    remote_text(&e.error),
                    e.error_description
                        .map(|d| format!(" ({})", remote_text(&d)))
                        .unwrap_or_default()
                ),
                Err(_) => format!("HTTP {}", fetched.status),
            };
            return Err(Error::Registration {
                endpoint: display_url(endpoint),
                reason,
            });
        }
        let response: RegistrationResponse =
            serde_json::from_slice(&fetched.body).map_err(|_| Error::Registration {
                endpoint: display_url(endpoint),
                reason: "the response is not a client information document".into(),
            })?;
        let client_secret = response.client_secret.filter(|s| !s.is_empty()).map(Secret::new);
        // RFC 7591 §3.2.1: the response echoes the registered method; when it does not, what we asked for applies
        // (a secret the server sends anyway is kept but not used with `none`). A secret method without a secret
        // falls back to `none`.
        let auth_method = response
            .token_endpoint_auth_method
            .as_deref()
            .and_then(TokenEndpointAuthMethod::parse)
            .or_else(|| TokenEndpointAuthMethod::parse(requested_method))
            .unwrap_or_default();
        let auth_method = match auth_method {
            TokenEndpointAuthMethod::ClientSecretBasic | TokenEndpointAuthMethod::ClientSecretPost
                if client_secret.is_none() =>
            {
                TokenEndpointAuthMethod::None
            }
            method => method,
        };
        tracing::info!(server = %self.inner.server, method = auth_method.as_str(), "registered an oauth client");
        Ok(ClientRegistration {
            client_id: response.client_id,
            client_secret,
            client_id_issued_at: response.client_id_issued_at,
            client_secret_expires_at: response.client_secret_expires_at,
            redirect_uris: response.redirect_uris.unwrap_or_else(|| vec![redirect_uri.to_string()]),
            issuer: discovered.issuer.clone(),
            pre_registered: false,
            auth_method,
        })
    }

    /// POST a token request for a bearer access token; errors never carry the request or response body.
    async fn token_request(
        &self,
        endpoint: &str,
        client: &ClientRegistration,
        audience: &str,
        form: Vec<(&'static str, String)>,
        grant: &'static str,
    ) -> Result<TokenResponse> {
        let response = self.post_token_form(endpoint, client, audience, form, grant).await?;
        if let Some(kind) = &response.token_type
            && !kind.eq_ignore_ascii_case("bearer")
        {
            return Err(Error::Http {
                what: "token request",
                url: display_url(endpoint),
                reason: format!("unsupported token type `{}`", remote_text(kind)),
            });
        }
        Ok(response)
    }

    /// POST a form to a token endpoint with the client's authentication and read the token response.
    async fn post_token_form(
        &self,
        endpoint: &str,
        client: &ClientRegistration,
        audience: &str,
        mut form: Vec<(&'static str, String)>,
        grant: &'static str,
    ) -> Result<TokenResponse> {
        let mut basic: Option<String> = None;
        match client.auth_method {
            TokenEndpointAuthMethod::None => form.push(("client_id", client.client_id.clone())),
            TokenEndpointAuthMethod::ClientSecretPost => {
                form.push(("client_id", client.client_id.clone()));
                if let Some(secret) = &client.client_secret {
                    form.push(("client_secret", secret.expose().to_string()));
                }
            }
            TokenEndpointAuthMethod::ClientSecretBasic => match &client.client_secret {
                Some(secret) => {
                    let id: String = url::form_urlencoded::byte_serialize(client.client_id.as_bytes()).collect();
                    let secret: String = url::form_urlencoded::byte_serialize(secret.expose().as_bytes()).collect();
                    basic = Some(base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}")));
                }
                None => form.push(("client_id", client.client_id.clone())),
            },
            TokenEndpointAuthMethod::PrivateKeyJwt => {
                let key = self
                    .inner
                    .private_key_pem
                    .as_ref()
                    .ok_or_else(|| self.config_error("private_key_jwt needs a private key"))?;
                form.push(("client_id", client.client_id.clone()));
                form.push(("client_assertion_type", CLIENT_ASSERTION_TYPE.to_string()));
                form.push(("client_assertion", client_assertion(key, &client.client_id, audience)?));
            }
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter())
            .finish();
        let mut request = self
            .inner
            .http
            .client()?
            .post(endpoint)
            .header("accept", "application/json")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(credentials) = basic {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {credentials}"))
                .map_err(|_| self.config_error("the client credentials cannot be put in a header"))?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let fetched = self.inner.http.send(request, "token request", endpoint).await?;
        if fetched.status == 200 {
            let response: TokenResponse = serde_json::from_slice(&fetched.body).map_err(|_| Error::Http {
                what: "token request",
                url: display_url(endpoint),
                reason: "the response is not a token response".into(),
            })?;
            if response.access_token.is_empty() {
                return Err(Error::Http {
                    what: "token request",
                    url: display_url(endpoint),
                    reason: "the response has an empty access token".into(),
                });
            }
            // Redacted from every log line and error from now on (an upstream may echo the token it got).
            pimcp_config::remember_secret(&response.access_token);
            if let Some(refresh) = &response.refresh_token {
                pimcp_config::remember_secret(refresh);
            }
            return Ok(response);
        }
        match serde_json::from_slice::<ErrorResponse>(&fetched.body) {
            Ok(e) if (400..500).contains(&fetched.status) => Err(Error::TokenRefused {
                endpoint: display_url(endpoint),
                grant,
                error: remote_text(&e.error),
                description: e.error_description.as_deref().map(remote_text),
            }),
            _ => Err(Error::Http {
                what: "token request",
                url: display_url(endpoint),
                reason: format!("HTTP {}", fetched.status),
            }),
        }
    }

    /// A record from a token response; `issuer` and `resource` are the client's and the server URL's until the
    /// caller sets the discovered ones.
    fn record_from(
        &self,
        response: TokenResponse,
        previous_refresh: Option<Secret>,
        requested_scope: Option<String>,
        client: ClientRegistration,
        token_endpoint: String,
    ) -> TokenRecord {
        let now = unix_secs(SystemTime::now());
        let expires_in = response.expires_in.as_ref().and_then(|v| match v {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        });
        TokenRecord {
            access_token: Secret::new(response.access_token),
            refresh_token: response
                .refresh_token
                .filter(|t| !t.is_empty())
                .map(Secret::new)
                .or(previous_refresh),
            expires_at: expires_in.map(|s| now.saturating_add(s)),
            scope: response.scope.filter(|s| !s.trim().is_empty()).or(requested_scope),
            token_type: "Bearer".to_string(),
            server_url: self.inner.server_url.to_string(),
            issuer: client.issuer.clone(),
            client,
            token_endpoint: Some(token_endpoint),
            resource: Some(self.inner.server_url.to_string()),
            obtained_at_ms: now_ms(),
        }
    }
}

impl OAuthClient {
    /// Resolves a `!command` / literal secret off the async threads, behind the client's guardian; dropping the
    /// future kills a running command's process group. The error names the field, never the value.
    async fn resolve_secret(&self, value: pimcp_config::SecretValue, field: &'static str) -> Result<Secret> {
        let cancel = CancelOnDrop(Arc::new(std::sync::atomic::AtomicBool::new(false)));
        let options = pimcp_config::ResolveOptions {
            guardian: self.inner.secret_guardian.clone(),
            cancel: Some(cancel.0.clone()),
            ..pimcp_config::ResolveOptions::default()
        };
        let resolved = tokio::task::spawn_blocking(move || value.resolve_with(field, &options))
            .await
            .map_err(|e| Error::Task {
                reason: format!("resolving {field}: {e}"),
            })?;
        drop(cancel);
        if let Ok(secret) = &resolved {
            pimcp_config::remember_secret(secret.expose());
        }
        resolved.map_err(|e| Error::Secret {
            server: self.inner.server.clone(),
            reason: e.to_string(),
        })
    }
}

/// Stops a running `!command` when its resolution is dropped.
struct CancelOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Append `offline_access` when the authorization server lists it and some scope is requested at all.
fn with_offline_access(scope: Option<String>, metadata: &crate::discovery::AuthServerMetadata) -> Option<String> {
    let scope = scope?;
    if metadata.supports_scope("offline_access") && !scope.split_whitespace().any(|s| s == "offline_access") {
        Some(format!("{scope} offline_access"))
    } else {
        Some(scope)
    }
}

fn secret_expired(client: &ClientRegistration) -> bool {
    match client.client_secret_expires_at {
        Some(0) | None => false,
        Some(at) => unix_secs(SystemTime::now()) >= at,
    }
}

/// SEP-991: a client ID metadata document URL is https with a non-root path.
fn is_client_metadata_url(value: &str) -> bool {
    Url::parse(value)
        .map(|u| u.scheme() == "https" && u.path() != "/" && u.host_str().is_some())
        .unwrap_or(false)
}

/// Read a redirect URL, a query string or a bare code.
fn parse_redirect(input: &str) -> Result<RedirectParams> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn redirect_forms() {
        let p = parse_redirect("http://127.0.0.1:19847/callback?code=abc&state=s1&iss=https%3A%2F%2Fas").unwrap();
        assert_eq!(p.code.as_deref(), Some("abc"));
        assert_eq!(p.state.as_deref(), Some("s1"));
        assert_eq!(p.iss.as_deref(), Some("https://as"));
        assert!(!p.bare);
        let p = parse_redirect("?code=abc&state=s1").unwrap();
        assert_eq!(p.state.as_deref(), Some("s1"));
        let p = parse_redirect("  abc-123  ").unwrap();
        assert!(p.bare);
        assert_eq!(p.code.as_deref(), Some("abc-123"));
        let p = parse_redirect("https://x/cb?error=access_denied&error_description=no&state=s").unwrap();
        assert_eq!(p.error.as_deref(), Some("access_denied"));
        assert!(parse_redirect("").is_err());
        assert!(parse_redirect("two words").is_err());
        assert!(parse_redirect("https://x/cb?foo=1").is_err());
    }

    #[test]
    fn offline_access_only_when_listed_and_scoped() {
        let mut meta = crate::discovery::AuthServerMetadata::default();
        assert_eq!(with_offline_access(Some("mcp".into()), &meta).as_deref(), Some("mcp"));
        meta.scopes_supported = vec!["mcp".into(), "offline_access".into()];
        assert_eq!(
            with_offline_access(Some("mcp".into()), &meta).as_deref(),
            Some("mcp offline_access")
        );
        assert_eq!(with_offline_access(None, &meta), None);
        assert_eq!(
            with_offline_access(Some("offline_access".into()), &meta).as_deref(),
            Some("offline_access")
        );
    }

    #[test]
    fn client_metadata_urls() {
        assert!(is_client_metadata_url("https://example.com/client.json"));
        assert!(!is_client_metadata_url("https://example.com/"));
        assert!(!is_client_metadata_url("http://example.com/client.json"));
    }

    #[test]
    fn options_debug_redacts() {
        let mut options = OAuthClientOptions::new("s", "https://m/mcp", OAuthConfig::default());
        options.client_secret = Some(Secret::new("planted-secret"));
        assert!(!format!("{options:?}").contains("planted"));
    }

    #[test]
    fn dpop_is_refused_rather_than_ignored() {
        let mut options = OAuthClientOptions::new("s", "https://m/mcp", OAuthConfig::default());
        options.config.dpop = true;
        let err = OAuthClient::new(options).unwrap_err();
        assert!(
            matches!(err, Error::Config { .. }) && err.to_string().contains("oauth.dpop"),
            "{err}"
        );
    }

    #[test]
    fn secret_without_client_id_is_a_config_error() {
        let mut options = OAuthClientOptions::new("s", "https://m/mcp", OAuthConfig::default());
        options.client_secret = Some(Secret::new("x"));
        assert!(matches!(OAuthClient::new(options), Err(Error::Config { .. })));
    }
}
