//! Client registration of [`OAuthClient`]: the pre-registered client, a stored registration that still fits, a
//! client ID metadata document (SEP-991), else RFC 7591 dynamic client registration.

use std::time::SystemTime;

use pimcp_config::Secret;
use serde::Deserialize;

use crate::discovery::Discovered;
use crate::error::{Error, Result, display_url, remote_text};
use crate::record::{ClientRegistration, TokenEndpointAuthMethod, issuers_match, unix_secs};

use super::tokens::ErrorResponse;
use super::{DEFAULT_CLIENT_NAME, OAuthClient};

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
    /// Pre-registered client, else a stored registration that still fits, else a client ID metadata document,
    /// else dynamic client registration.
    pub(super) async fn resolve_client(
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
        // RFC 7591 section 3.2.1: the response echoes the registered method; when it does not, what we asked for applies
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
}

fn secret_expired(client: &ClientRegistration) -> bool {
    match client.client_secret_expires_at {
        Some(0) | None => false,
        Some(at) => unix_secs(SystemTime::now()) >= at,
    }
}
