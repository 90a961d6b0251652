//! What a token store holds for one server: [`TokenRecord`] (tokens, client registration, the URL and issuer they
//! are bound to) and [`StoreKey`] (server name + URL), plus the on-disk JSON shape shared by every store —
//! pi-mcp-adapter's `tokens.json` format (`tokens` / `clientInfo` / `serverUrl`), extended with optional fields that
//! older readers ignore.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pimcp_config::Secret;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Identifies one server's record in a store: its configured name and its URL.
///
/// Records are found by name (the account is `sha256-<hex sha256(name)>`, as pi-mcp-adapter names them) and only used
/// when the stored `serverUrl` equals [`StoreKey::url`]: a URL change invalidates them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreKey {
    /// The server's configured name.
    pub server: String,
    /// The server's URL.
    pub url: String,
}

impl StoreKey {
    /// The key of `server` at `url`.
    pub fn new(server: impl Into<String>, url: impl Into<String>) -> StoreKey {
        StoreKey {
            server: server.into(),
            url: url.into(),
        }
    }

    /// `sha256-<hex sha256(server name)>`: the keyring account and the file-store directory name.
    pub fn account(&self) -> String {
        format!("sha256-{}", hex::encode(Sha256::digest(self.server.as_bytes())))
    }
}

/// How the client authenticates at the token endpoint (RFC 7591 `token_endpoint_auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenEndpointAuthMethod {
    /// Public client: `client_id` in the body, no secret.
    #[default]
    None,
    /// HTTP Basic with the URL-encoded id and secret (RFC 6749 section 2.3.1).
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body.
    ClientSecretPost,
    /// RFC 7523 signed client assertion.
    PrivateKeyJwt,
}

impl TokenEndpointAuthMethod {
    /// The RFC 7591 name of the method.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenEndpointAuthMethod::None => "none",
            TokenEndpointAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenEndpointAuthMethod::ClientSecretPost => "client_secret_post",
            TokenEndpointAuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method an RFC 7591 name stands for (`None` for a name this client does not know).
    pub fn parse(text: &str) -> Option<TokenEndpointAuthMethod> {
        match text {
            "none" => Some(TokenEndpointAuthMethod::None),
            "client_secret_basic" => Some(TokenEndpointAuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(TokenEndpointAuthMethod::ClientSecretPost),
            "private_key_jwt" => Some(TokenEndpointAuthMethod::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// The OAuth client this record's tokens were issued to.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ClientRegistration {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for confidential clients.
    pub client_secret: Option<Secret>,
    /// Unix seconds (RFC 7591).
    pub client_id_issued_at: Option<u64>,
    /// Unix seconds; 0 means "never" (RFC 7591).
    pub client_secret_expires_at: Option<u64>,
    /// The redirect URIs the client registered.
    pub redirect_uris: Vec<String>,
    /// The authorization server the client is registered with.
    pub issuer: Option<String>,
    /// From configuration (`oauth.clientId`), not from dynamic registration or a metadata document.
    pub pre_registered: bool,
    /// How the client authenticates at the token endpoint.
    pub auth_method: TokenEndpointAuthMethod,
}

impl fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "<redacted>"))
            .field("client_id_issued_at", &self.client_id_issued_at)
            .field("client_secret_expires_at", &self.client_secret_expires_at)
            .field("redirect_uris", &self.redirect_uris)
            .field("issuer", &self.issuer)
            .field("pre_registered", &self.pre_registered)
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

/// Tokens for one server, bound to its URL and to the issuer that minted them. `Debug` redacts every secret.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The access token.
    pub access_token: Secret,
    /// The refresh token, when the server issued one.
    pub refresh_token: Option<Secret>,
    /// Unix seconds; `None` when the server gave no `expires_in`.
    pub expires_at: Option<u64>,
    /// Granted scopes, space-separated.
    pub scope: Option<String>,
    /// `Bearer` (the only type sent today).
    pub token_type: String,
    /// The MCP server URL the tokens are bound to.
    pub server_url: String,
    /// The authorization server (RFC 8414 `issuer`) that issued them.
    pub issuer: Option<String>,
    /// The client the tokens were issued to.
    pub client: ClientRegistration,
    /// Where to refresh, so a refresh needs no discovery.
    pub token_endpoint: Option<String>,
    /// The RFC 8707 `resource` the tokens were requested for.
    pub resource: Option<String>,
    /// Unix milliseconds when these tokens were obtained; a larger value is a newer record.
    pub obtained_at_ms: u64,
}

impl fmt::Debug for TokenRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRecord")
            .field("access_token", &"<redacted>")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "<redacted>"))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("token_type", &self.token_type)
            .field("server_url", &self.server_url)
            .field("issuer", &self.issuer)
            .field("client", &self.client)
            .field("token_endpoint", &self.token_endpoint)
            .field("resource", &self.resource)
            .field("obtained_at_ms", &self.obtained_at_ms)
            .finish()
    }
}

impl TokenRecord {
    /// True when the record may be used for `url` (and, when both are known, `issuer`).
    pub fn is_bound_to(&self, url: &str, issuer: Option<&str>) -> bool {
        if self.server_url != url {
            return false;
        }
        match (self.issuer.as_deref(), issuer) {
            (Some(stored), Some(current)) => issuers_match(stored, current),
            _ => true,
        }
    }

    /// True when the access token expires within `skew` of `now` (never for tokens without an expiry).
    pub fn expires_within(&self, skew: Duration, now: SystemTime) -> bool {
        match self.expires_at {
            Some(at) => unix_secs(now).saturating_add(skew.as_secs()) >= at,
            None => false,
        }
    }

    /// True when the token should be refreshed now: it expires within `skew`, or within half its lifetime when
    /// that is shorter (a 2-second token is not refreshed before every use). Never for tokens without an expiry.
    pub fn needs_refresh(&self, skew: Duration, now: SystemTime) -> bool {
        let Some(expires_at) = self.expires_at else {
            return false;
        };
        let obtained = self.obtained_at_ms / 1000;
        let window = if obtained > 0 && expires_at > obtained {
            skew.as_secs().min((expires_at - obtained) / 2)
        } else {
            skew.as_secs()
        };
        unix_secs(now).saturating_add(window) >= expires_at
    }

    /// Serialize in pi-mcp-adapter's `tokens.json` shape (with our extra fields).
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(&TokenFile::from(self)).map_err(|e| Error::Store {
            store: "record",
            reason: format!("cannot serialize a token record: {e}"),
        })
    }

    /// The same JSON without whitespace (kernel keyrings have small per-user byte quotas).
    pub fn to_json_compact(&self) -> Result<String> {
        serde_json::to_string(&TokenFile::from(self)).map_err(|e| Error::Store {
            store: "record",
            reason: format!("cannot serialize a token record: {e}"),
        })
    }

    /// Parse the `tokens.json` shape (ours or pi-mcp-adapter's). The error never quotes the input.
    pub fn from_json(text: &str) -> Result<TokenRecord> {
        let file: TokenFile = serde_json::from_str(text).map_err(|e| Error::Store {
            store: "record",
            reason: format!(
                "token record is not valid JSON at line {} column {}",
                e.line(),
                e.column()
            ),
        })?;
        file.into_record()
    }
}

/// RFC 8414 issuer comparison: exact, except that a bare origin may or may not end in `/`.
pub(crate) fn issuers_match(a: &str, b: &str) -> bool {
    fn normalize(issuer: &str) -> &str {
        match issuer.strip_suffix('/') {
            Some(stripped) if url::Url::parse(issuer).map(|u| u.path() == "/").unwrap_or(false) => stripped,
            _ => issuer,
        }
    }
    a == b || normalize(a) == normalize(b)
}

pub(crate) fn unix_secs(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// On-disk shape. Field names follow pi-mcp-adapter's format; everything beyond
/// `tokens.{accessToken,refreshToken,expiresAt,scope}`, `clientInfo.{clientId,clientSecret}` and `serverUrl` is optional.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokenFile {
    tokens: TokensPart,
    #[serde(default)]
    client_info: Option<ClientPart>,
    #[serde(default)]
    server_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resource: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokensPart {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    /// Unix seconds (values above 10^12 are read as milliseconds, which some writers used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    obtained_at: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClientPart {
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_id_issued_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret_expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    redirect_uris: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issuer: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    config_pre_registered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_endpoint_auth_method: Option<String>,
}

impl From<&TokenRecord> for TokenFile {
    fn from(record: &TokenRecord) -> TokenFile {
        let client = &record.client;
        TokenFile {
            tokens: TokensPart {
                access_token: record.access_token.expose().to_string(),
                refresh_token: record.refresh_token.as_ref().map(|t| t.expose().to_string()),
                expires_at: record.expires_at.map(serde_json::Value::from),
                scope: record.scope.clone(),
                issuer: record.issuer.clone(),
                token_type: Some(record.token_type.clone()),
                obtained_at: Some(record.obtained_at_ms),
            },
            client_info: Some(ClientPart {
                client_id: client.client_id.clone(),
                client_secret: client.client_secret.as_ref().map(|s| s.expose().to_string()),
                client_id_issued_at: client.client_id_issued_at,
                client_secret_expires_at: client.client_secret_expires_at,
                redirect_uris: client.redirect_uris.clone(),
                issuer: client.issuer.clone(),
                config_pre_registered: client.pre_registered,
                token_endpoint_auth_method: Some(client.auth_method.as_str().to_string()),
            }),
            server_url: Some(record.server_url.clone()),
            token_endpoint: record.token_endpoint.clone(),
            resource: record.resource.clone(),
        }
    }
}

impl TokenFile {
    fn into_record(self) -> Result<TokenRecord> {
        let server_url = self.server_url.ok_or_else(|| Error::Store {
            store: "record",
            reason: "token record has no `serverUrl`; it is not bound to a server and is ignored".to_string(),
        })?;
        if self.tokens.access_token.is_empty() {
            return Err(Error::Store {
                store: "record",
                reason: "token record has an empty access token".into(),
            });
        }
        let client = match self.client_info {
            Some(c) => ClientRegistration {
                auth_method: c
                    .token_endpoint_auth_method
                    .as_deref()
                    .and_then(TokenEndpointAuthMethod::parse)
                    .unwrap_or(if c.client_secret.is_some() {
                        TokenEndpointAuthMethod::ClientSecretBasic
                    } else {
                        TokenEndpointAuthMethod::None
                    }),
                client_id: c.client_id,
                client_secret: c.client_secret.filter(|s| !s.is_empty()).map(Secret::new),
                client_id_issued_at: c.client_id_issued_at,
                client_secret_expires_at: c.client_secret_expires_at,
                redirect_uris: c.redirect_uris,
                issuer: c.issuer,
                pre_registered: c.config_pre_registered,
            },
            None => ClientRegistration::default(),
        };
        let expires_at = self
            .tokens
            .expires_at
            .as_ref()
            .and_then(|v| match v {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            })
            .filter(|v| v.is_finite() && *v > 0.0)
            .map(|v| if v > 1e12 { (v / 1000.0) as u64 } else { v as u64 });
        Ok(TokenRecord {
            access_token: Secret::new(self.tokens.access_token),
            refresh_token: self.tokens.refresh_token.filter(|t| !t.is_empty()).map(Secret::new),
            expires_at,
            scope: self.tokens.scope,
            token_type: self.tokens.token_type.unwrap_or_else(|| "Bearer".to_string()),
            server_url,
            issuer: self.tokens.issuer.or_else(|| client.issuer.clone()),
            client,
            token_endpoint: self.token_endpoint,
            resource: self.resource,
            obtained_at_ms: self.tokens.obtained_at.unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn sample() -> TokenRecord {
        TokenRecord {
            access_token: Secret::new("AT-planted-secret"),
            refresh_token: Some(Secret::new("RT-planted-secret")),
            expires_at: Some(2_000_000_000),
            scope: Some("mcp offline_access".into()),
            token_type: "Bearer".into(),
            server_url: "https://mcp.example.com/mcp".into(),
            issuer: Some("https://auth.example.com".into()),
            client: ClientRegistration {
                client_id: "client-1".into(),
                client_secret: Some(Secret::new("CS-planted-secret")),
                auth_method: TokenEndpointAuthMethod::ClientSecretPost,
                ..Default::default()
            },
            token_endpoint: Some("https://auth.example.com/token".into()),
            resource: Some("https://mcp.example.com/mcp".into()),
            obtained_at_ms: 42,
        }
    }

    #[test]
    fn json_round_trip_keeps_everything() {
        let record = sample();
        let back = TokenRecord::from_json(&record.to_json().unwrap()).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn reads_the_seed_000_shape() {
        let text = r#"{"tokens":{"accessToken":"a","refreshToken":"r","expiresAt":1234567890,"scope":"s"},
                       "clientInfo":{"clientId":"c","clientSecret":"x"},"serverUrl":"https://m/mcp"}"#;
        let record = TokenRecord::from_json(text).unwrap();
        assert_eq!(record.access_token.expose(), "a");
        assert_eq!(record.refresh_token.unwrap().expose(), "r");
        assert_eq!(record.expires_at, Some(1_234_567_890));
        assert_eq!(record.client.client_id, "c");
        assert_eq!(record.client.auth_method, TokenEndpointAuthMethod::ClientSecretBasic);
        assert_eq!(record.token_type, "Bearer");
    }

    #[test]
    fn millisecond_expiry_is_read_as_seconds() {
        let text = r#"{"tokens":{"accessToken":"a","expiresAt":1234567890123},"serverUrl":"https://m/mcp"}"#;
        assert_eq!(TokenRecord::from_json(text).unwrap().expires_at, Some(1_234_567_890));
    }

    #[test]
    fn records_without_server_url_are_refused() {
        let err = TokenRecord::from_json(r#"{"tokens":{"accessToken":"a"}}"#).unwrap_err();
        assert!(err.to_string().contains("serverUrl"));
    }

    #[test]
    fn parse_errors_do_not_quote_the_input() {
        let err = TokenRecord::from_json(r#"{"tokens":{"accessToken":"AT-planted-secret""#).unwrap_err();
        assert!(!err.to_string().contains("planted"));
    }

    #[test]
    fn debug_redacts_secrets() {
        let text = format!("{:?}", sample());
        assert!(!text.contains("planted"), "{text}");
        assert!(text.contains("client-1"));
    }

    #[test]
    fn binding_checks_url_and_issuer() {
        let record = sample();
        assert!(record.is_bound_to("https://mcp.example.com/mcp", None));
        assert!(record.is_bound_to("https://mcp.example.com/mcp", Some("https://auth.example.com/")));
        assert!(!record.is_bound_to("https://mcp.example.com/other", None));
        assert!(!record.is_bound_to("https://mcp.example.com/mcp", Some("https://evil.example.com")));
    }

    #[test]
    fn expiry_uses_the_skew() {
        let record = sample();
        let at = UNIX_EPOCH + Duration::from_secs(2_000_000_000 - 100);
        assert!(!record.expires_within(Duration::from_secs(60), at));
        assert!(record.expires_within(Duration::from_secs(120), at));
    }

    #[test]
    fn short_lived_tokens_refresh_at_half_life() {
        let mut record = sample();
        record.obtained_at_ms = 1_000_000 * 1000;
        record.expires_at = Some(1_000_002);
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        assert!(!record.needs_refresh(Duration::from_secs(60), at(1_000_000)));
        assert!(record.needs_refresh(Duration::from_secs(60), at(1_000_001)));
        record.expires_at = Some(1_003_600);
        assert!(!record.needs_refresh(Duration::from_secs(60), at(1_003_539)));
        assert!(record.needs_refresh(Duration::from_secs(60), at(1_003_540)));
        record.expires_at = None;
        assert!(!record.needs_refresh(Duration::from_secs(60), at(2_000_000)));
    }

    #[test]
    fn account_is_sha256_of_the_name() {
        let key = StoreKey::new("github", "https://x");
        assert_eq!(
            key.account(),
            "sha256-c0b0109d9439de57fe3cf03abeccbc52f4c98170c732d3b69af5e6395ace574e"
        );
    }
}
