//! [`OAuthClient`]: the OAuth 2.1 client of one MCP server — authorization code with PKCE S256 (start, then
//! complete from a redirect URL or a bare code), client registration (pre-registered, client ID metadata document,
//! RFC 7591 dynamic registration), scope selection and step-up, refresh, and the `client_credentials` grant with a
//! client secret or an RFC 7523 `private_key_jwt` assertion, and SEP-990 enterprise-managed authorization (an ID
//! token exchanged for an ID-JAG at the IdP by RFC 8693, then the RFC 7523 `jwt-bearer` grant at the MCP server's
//! authorization server). Token requests carry the RFC 8707 `resource`.

mod flow;
mod grants;
mod registration;
#[cfg(test)]
mod tests;
mod tokens;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pimcp_config::{OAuthConfig, OAuthGrant, Secret};
use url::Url;

use crate::discovery::{Challenge, Discovered, DiscoveryOptions, discover};
use crate::error::{Error, Result, display_url};
use crate::http::OAuthHttp;
use crate::record::{ClientRegistration, TokenRecord};

use flow::PendingFlow;

/// At most this many authorizations (first login plus step-ups) before 403 `insufficient_scope` is final.
pub const MAX_AUTHORIZATION_ATTEMPTS: u32 = 3;
/// A started authorization that is not completed within this time is forgotten.
pub const PENDING_FLOW_TTL: Duration = Duration::from_secs(10 * 60);
/// RFC 7523 `jwt-bearer` grant type (SEP-990 presents the ID-JAG with it).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// RFC 8693 token exchange grant type.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// Token type of an Identity Assertion JWT Authorization Grant (draft-ietf-oauth-identity-assertion-authz-grant).
pub const TOKEN_TYPE_ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// Client name sent in dynamic registration when `oauth.clientName` is not set.
pub const DEFAULT_CLIENT_NAME: &str = "pimcp";

/// What [`OAuthClient::new`] needs: the server, its `oauth` configuration and the secrets resolved from it.
#[derive(Clone)]
pub struct OAuthClientOptions {
    /// The server's configured name.
    pub server_name: String,
    /// The MCP server's URL (the protected resource).
    pub server_url: String,
    /// The server's `oauth` configuration.
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
    /// Options for `server_name` at `server_url`, no secrets resolved yet.
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
    /// The authorization URL to open in a browser.
    pub url: String,
    /// The CSRF `state` the redirect must carry back.
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

    /// The server's configured name.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// The MCP server's URL.
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
}

/// SEP-991: a client ID metadata document URL is https with a non-root path.
fn is_client_metadata_url(value: &str) -> bool {
    Url::parse(value)
        .map(|u| u.scheme() == "https" && u.path() != "/" && u.host_str().is_some())
        .unwrap_or(false)
}
