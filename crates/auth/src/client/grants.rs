//! The machine grants of [`OAuthClient`] (tokens without a person or a browser): `client_credentials` with a
//! client secret or a `private_key_jwt` assertion, and SEP-990 `identity_assertion` (an ID token exchanged for an
//! ID-JAG at the IdP, then the `jwt-bearer` grant), with the IdP's token endpoint, the pre-registered client and
//! scope of a machine grant, and the `!command` secrets the client resolves itself.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use pimcp_config::Secret;
use url::Url;

use crate::discovery::Discovered;
use crate::error::{Error, Result, display_url, remote_text};
use crate::record::{ClientRegistration, TokenEndpointAuthMethod, TokenRecord};

use super::{JWT_BEARER_GRANT, OAuthClient, TOKEN_EXCHANGE_GRANT, TOKEN_TYPE_ID_JAG};

/// RFC 8693 token type of an OpenID Connect ID token.
const TOKEN_TYPE_ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";

impl OAuthClient {
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
                source: None,
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
            source: Some(e),
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
