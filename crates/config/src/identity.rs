//! The identity hash of a server: SHA-256 over the fields that decide what the server *is* — transport (with
//! env/header values, `!command`s as their command text, never executed), cwd, url, auth, protocol, tool filters and
//! `exposeResources`. The metadata cache is keyed by it: change any of these and cached metadata no longer applies.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::model::{AuthConfig, Config, ServerConfig, Transport};
use crate::secret::SecretValue;

/// Bumped when the hashed shape changes, so old cache entries stop matching.
const IDENTITY_VERSION: u32 = 1;

/// SHA-256 (lowercase hex) of the server's identity fields. Deterministic across runs and processes.
pub fn identity_hash(server: &ServerConfig) -> String {
    let canonical = identity_value(server).to_string();
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

impl ServerConfig {
    /// See [`identity_hash`].
    pub fn identity_hash(&self) -> String {
        identity_hash(self)
    }
}

impl Config {
    /// See [`identity_hash`] (the metadata-cache key of a server).
    pub fn identity_hash(server: &ServerConfig) -> String {
        identity_hash(server)
    }
}

fn secret(value: &SecretValue) -> Value {
    match value {
        SecretValue::Plain(secret) => json!({ "plain": secret.expose() }),
        SecretValue::Command(command) => json!({ "command": command }),
    }
}

fn secret_map(map: &BTreeMap<String, SecretValue>) -> Value {
    Value::Object(map.iter().map(|(k, v)| (k.clone(), secret(v))).collect())
}

fn identity_value(server: &ServerConfig) -> Value {
    let transport = match &server.transport {
        Transport::Stdio(stdio) => json!({
            "stdio": {
                "command": stdio.command,
                "args": stdio.args,
                "env": secret_map(&stdio.env),
                "cwd": stdio.cwd,
                "inheritEnv": stdio.inherit_env,
            }
        }),
        Transport::Http(http) => json!({
            "http": { "url": http.url, "headers": secret_map(&http.headers), "sse": http.allow_legacy_sse }
        }),
        Transport::Socket(socket) => json!({ "socket": socket.path }),
    };
    let auth = match &server.auth {
        AuthConfig::Auto => json!("auto"),
        AuthConfig::Disabled => json!("disabled"),
        AuthConfig::Bearer { token, token_env } => json!({
            "bearer": { "token": token.as_ref().map(secret), "tokenEnv": token_env }
        }),
        AuthConfig::OAuth(oauth) => json!({
            "oauth": {
                "grantType": oauth.grant_type,
                "clientId": oauth.client_id,
                "clientSecret": oauth.client_secret.as_ref().map(secret),
                "clientMetadataUrl": oauth.client_metadata_url,
                "scope": oauth.scope,
                "redirectUri": oauth.redirect_uri,
                "callbackPort": oauth.callback_port,
                "authorizationParams": oauth.authorization_params,
                "clientName": oauth.client_name,
                "clientUri": oauth.client_uri,
                "logoUri": oauth.logo_uri,
                "authServerMetadataUrl": oauth.auth_server_metadata_url,
                "skipIssuerMetadataValidation": oauth.skip_issuer_metadata_validation,
                "dpop": oauth.dpop,
                "clientPrivateKey": oauth.client_private_key.as_ref().map(secret),
                "identityAssertion": oauth.identity_assertion.as_ref().map(|ia| json!({
                    "idpIssuer": ia.idp_issuer,
                    "idpTokenEndpoint": ia.idp_token_endpoint,
                    "idpClientId": ia.idp_client_id,
                    "idpClientSecret": ia.idp_client_secret.as_ref().map(secret),
                    // `idToken` is left out: it is the user's short-lived credential, not what the server is.
                })),
            }
        }),
    };
    json!({
        "v": IDENTITY_VERSION,
        "transport": transport,
        "auth": auth,
        "protocol": server.protocol,
        "includeTools": server.include_tools,
        "excludeTools": server.exclude_tools,
        "exposeResources": server.expose_resources,
    })
}
