//! Token endpoint requests of [`OAuthClient`]: refresh, the token request with the client's authentication
//! (`none`, `client_secret_post`, `client_secret_basic` or a `private_key_jwt` assertion), the token endpoint's
//! success and error responses, and the [`TokenRecord`] made from a token response.

use std::time::SystemTime;

use base64::Engine as _;
use pimcp_config::Secret;
use serde::Deserialize;

use crate::error::{Error, Result, display_url, remote_text};
use crate::jwt::{CLIENT_ASSERTION_TYPE, client_assertion};
use crate::record::{ClientRegistration, TokenEndpointAuthMethod, TokenRecord, now_ms, unix_secs};

use super::OAuthClient;

/// A token endpoint's success response.
#[derive(Deserialize)]
pub(super) struct TokenResponse {
    pub(super) access_token: String,
    /// RFC 8693: what a token exchange issued.
    #[serde(default)]
    pub(super) issued_token_type: Option<String>,
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
pub(super) struct ErrorResponse {
    pub(super) error: String,
    #[serde(default)]
    pub(super) error_description: Option<String>,
}

impl OAuthClient {
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

    /// POST a token request for a bearer access token; errors never carry the request or response body.
    pub(super) async fn token_request(
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
                source: None,
            });
        }
        Ok(response)
    }

    /// POST a form to a token endpoint with the client's authentication and read the token response.
    pub(super) async fn post_token_form(
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
                source: None,
            })?;
            if response.access_token.is_empty() {
                return Err(Error::Http {
                    what: "token request",
                    url: display_url(endpoint),
                    reason: "the response has an empty access token".into(),
                    source: None,
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
                source: None,
            }),
        }
    }

    /// A record from a token response; `issuer` and `resource` are the client's and the server URL's until the
    /// caller sets the discovered ones.
    pub(super) fn record_from(
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
