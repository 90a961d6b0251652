//! Finding the authorization server of an MCP server, as the MCP authorization spec asks:
//! `WWW-Authenticate` challenges, RFC 9728 protected-resource metadata (advertised URL, then path-based, then root),
//! RFC 8414 authorization-server metadata with path insertion and OpenID Connect discovery, issuer validation, the
//! resource-match check, and the 2025-03-26 fallbacks (metadata at the server origin, then default endpoints).

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use serde::{Deserialize, Deserializer, Serialize};
use url::Url;

use crate::error::{Error, Result, display_url};
use crate::http::OAuthHttp;
use crate::record::issuers_match;

/// A `Bearer` challenge from a `WWW-Authenticate` header (RFC 6750 section 3, RFC 9728 section 5.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: what the resource wants, space-separated.
    pub scope: Option<String>,
    /// `error`, e.g. `invalid_token` or `insufficient_scope`.
    pub error: Option<String>,
    /// `error_description`, when given.
    pub error_description: Option<String>,
}

impl Challenge {
    /// The `Bearer` challenge of one `WWW-Authenticate` value, if it has one.
    pub fn parse(header: &str) -> Option<Challenge> {
        parse_challenges(header)
            .into_iter()
            .find(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, params)| {
                let get = |name: &str| {
                    params
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(name))
                        .map(|(_, v)| v.clone())
                };
                Challenge {
                    resource_metadata: get("resource_metadata").filter(|v| !v.trim().is_empty()),
                    scope: get("scope").filter(|v| !v.trim().is_empty()),
                    error: get("error"),
                    error_description: get("error_description"),
                }
            })
    }

    /// The first `Bearer` challenge among a response's `WWW-Authenticate` headers.
    pub fn from_headers(headers: &HeaderMap) -> Option<Challenge> {
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(Challenge::parse)
    }

    /// RFC 6750 `insufficient_scope` (a 403 asking for more scope).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Split a `WWW-Authenticate` value into `(scheme, params)` challenges (RFC 7235 section 4.1; token68 kept as a param
/// with an empty name).
fn parse_challenges(header: &str) -> Vec<(String, Vec<(String, String)>)> {
    let chars: Vec<char> = header.chars().collect();
    let mut i = 0;
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let is_token_char = |c: char| !c.is_whitespace() && c != ',' && c != '=' && c != '"';
    while i < chars.len() {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        let start = i;
        while i < chars.len() && is_token_char(chars[i]) {
            i += 1;
        }
        if start == i {
            i += 1; // stray character
            continue;
        }
        let token: String = chars[start..i].iter().collect();
        let mut j = i;
        while j < chars.len() && chars[j] == ' ' {
            j += 1;
        }
        if j < chars.len() && chars[j] == '=' {
            // auth-param of the current challenge
            j += 1;
            while j < chars.len() && chars[j] == ' ' {
                j += 1;
            }
            let mut value = String::new();
            if j < chars.len() && chars[j] == '"' {
                j += 1;
                while j < chars.len() && chars[j] != '"' {
                    if chars[j] == '\\' && j + 1 < chars.len() {
                        j += 1;
                    }
                    value.push(chars[j]);
                    j += 1;
                }
                j += 1; // closing quote
            } else {
                while j < chars.len() && chars[j] != ',' && !chars[j].is_whitespace() {
                    value.push(chars[j]);
                    j += 1;
                }
            }
            i = j;
            match out.last_mut() {
                Some((_, params)) => params.push((token, value)),
                None => out.push((String::new(), vec![(token, value)])),
            }
        } else {
            out.push((token, Vec::new()));
        }
    }
    out
}

fn nullable<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// RFC 9728 protected-resource metadata (the fields this client reads).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ProtectedResourceMetadata {
    /// `resource`: the protected resource's identifier.
    #[serde(default)]
    pub resource: Option<String>,
    /// `authorization_servers`: the issuers that can grant tokens for it.
    #[serde(default, deserialize_with = "nullable")]
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`.
    #[serde(default, deserialize_with = "nullable")]
    pub scopes_supported: Vec<String>,
}

/// RFC 8414 / OpenID Connect authorization-server metadata (the fields this client reads).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct AuthServerMetadata {
    /// `issuer`.
    #[serde(default)]
    pub issuer: Option<String>,
    /// `authorization_endpoint`.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// `token_endpoint`.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// `registration_endpoint` (dynamic client registration, RFC 7591).
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// `scopes_supported`.
    #[serde(default, deserialize_with = "nullable")]
    pub scopes_supported: Vec<String>,
    /// `response_types_supported`.
    #[serde(default, deserialize_with = "nullable")]
    pub response_types_supported: Vec<String>,
    /// `grant_types_supported`.
    #[serde(default, deserialize_with = "nullable")]
    pub grant_types_supported: Vec<String>,
    /// `code_challenge_methods_supported` (PKCE; `None` when the server does not say).
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// `token_endpoint_auth_methods_supported` (`None` when the server does not say).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// `token_endpoint_auth_signing_alg_values_supported` (for `private_key_jwt`).
    #[serde(default, deserialize_with = "nullable")]
    pub token_endpoint_auth_signing_alg_values_supported: Vec<String>,
    /// `client_id_metadata_document_supported`: URL-based client IDs.
    #[serde(default, deserialize_with = "nullable")]
    pub client_id_metadata_document_supported: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    #[serde(default, deserialize_with = "nullable")]
    pub authorization_response_iss_parameter_supported: bool,
}

impl AuthServerMetadata {
    /// Whether the AS lists `method` in `token_endpoint_auth_methods_supported` (absent list: RFC 8414's default,
    /// `client_secret_basic`).
    pub fn supports_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(methods) => methods.iter().any(|m| m == method),
            None => method == "client_secret_basic",
        }
    }

    /// Whether `scopes_supported` lists `scope`.
    pub fn supports_scope(&self, scope: &str) -> bool {
        self.scopes_supported.iter().any(|s| s == scope)
    }
}

/// How the authorization-server metadata was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataSource {
    /// From an authorization server named by protected-resource metadata (current MCP spec).
    ProtectedResource,
    /// `oauth.authServerMetadataUrl` from configuration.
    Configured,
    /// 2025-03-26: metadata at the MCP server's origin (no protected-resource metadata).
    ServerOrigin,
    /// 2025-03-26: nothing published; `/authorize`, `/token`, `/register` at the server's origin.
    DefaultEndpoints,
}

/// The result of discovery for one MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovered {
    /// The protected-resource metadata document's URL, when one was found.
    pub resource_metadata_url: Option<String>,
    /// The protected-resource metadata, when one was found.
    pub resource_metadata: Option<ProtectedResourceMetadata>,
    /// The authorization server's metadata.
    pub metadata: AuthServerMetadata,
    /// Which document the metadata came from.
    pub source: MetadataSource,
    /// The validated issuer (RFC 8414), when the metadata has one.
    pub issuer: Option<String>,
    /// The RFC 8707 `resource` to send: the metadata's `resource`, else the server URL.
    pub resource: String,
}

/// Knobs from `oauth.*` configuration.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryOptions {
    /// `oauth.authServerMetadataUrl`: use this document (HTTPS) instead of discovering one.
    pub auth_server_metadata_url: Option<String>,
    /// `oauth.skipIssuerMetadataValidation`: accept metadata whose `issuer` does not match (weakens mix-up defence).
    pub skip_issuer_validation: bool,
}

/// Run discovery for `server_url`, seeded with the challenge of a 401 when there was one.
pub async fn discover(
    http: &OAuthHttp,
    server_url: &Url,
    challenge: Option<&Challenge>,
    options: &DiscoveryOptions,
) -> Result<Discovered> {
    let protected = find_protected_resource(http, server_url, challenge).await?;
    let resource = match &protected {
        Some((_, prm)) => prm.resource.clone().unwrap_or_else(|| without_fragment(server_url)),
        None => without_fragment(server_url),
    };
    let as_ids: Vec<String> = protected
        .as_ref()
        .map(|(_, prm)| prm.authorization_servers.clone())
        .unwrap_or_default();

    let (metadata, source, issuer) = if let Some(configured) = &options.auth_server_metadata_url {
        let url = Url::parse(configured).map_err(|_| Error::Discovery {
            url: display_url(server_url.as_str()),
            reason: "`oauth.authServerMetadataUrl` is not a valid URL".into(),
        })?;
        if url.scheme() != "https" && !is_loopback(&url) {
            return Err(Error::Discovery {
                url: display_url(url.as_str()),
                reason: "`oauth.authServerMetadataUrl` must use https".into(),
            });
        }
        let metadata = fetch_metadata(http, &url).await?.ok_or_else(|| Error::Discovery {
            url: display_url(url.as_str()),
            reason: "no authorization server metadata there".into(),
        })?;
        let expected = if as_ids.is_empty() {
            expected_issuer_for(&url)
        } else {
            None
        };
        let issuer = validate_issuer(&metadata, expected.as_deref(), &as_ids, options.skip_issuer_validation)?;
        (metadata, MetadataSource::Configured, issuer)
    } else if !as_ids.is_empty() {
        let metadata_url = protected
            .as_ref()
            .map(|(u, _)| display_url(u.as_str()))
            .unwrap_or_default();
        let mut found = None;
        for as_id in &as_ids {
            let Ok(as_url) = Url::parse(as_id) else {
                tracing::warn!(authorization_server = %as_id, "ignoring an authorization server that is not a URL");
                continue;
            };
            check_discovered_url(server_url, &as_url, "authorization server")?;
            if let Some(metadata) = find_as_metadata(http, &as_url).await? {
                let issuer = validate_issuer(&metadata, Some(as_id), &[], options.skip_issuer_validation)?;
                found = Some((metadata, issuer));
                break;
            }
        }
        let (metadata, issuer) = found.ok_or_else(|| Error::Discovery {
            url: metadata_url,
            reason: format!(
                "none of the authorization servers it names ({}) publishes RFC 8414 or OpenID metadata",
                as_ids.join(", ")
            ),
        })?;
        (metadata, MetadataSource::ProtectedResource, issuer)
    } else {
        let origin = origin_url(server_url);
        match find_as_metadata(http, &origin).await? {
            Some(metadata) => {
                let issuer = validate_origin_issuer(&metadata, &origin, options.skip_issuer_validation)?;
                (metadata, MetadataSource::ServerOrigin, issuer)
            }
            None => (default_endpoints(&origin), MetadataSource::DefaultEndpoints, None),
        }
    };

    for endpoint in [
        &metadata.authorization_endpoint,
        &metadata.token_endpoint,
        &metadata.registration_endpoint,
    ]
    .into_iter()
    .flatten()
    {
        let url = Url::parse(endpoint).map_err(|_| Error::Discovery {
            url: display_url(server_url.as_str()),
            reason: format!(
                "authorization server metadata has an invalid endpoint URL `{}`",
                display_url(endpoint)
            ),
        })?;
        check_discovered_url(server_url, &url, "endpoint")?;
    }

    Ok(Discovered {
        resource_metadata_url: protected.as_ref().map(|(u, _)| u.to_string()),
        resource_metadata: protected.map(|(_, prm)| prm),
        metadata,
        source,
        issuer,
        resource,
    })
}

/// RFC 9728 discovery: the challenge's `resource_metadata`, else `/.well-known/oauth-protected-resource/<path>`,
/// else `/.well-known/oauth-protected-resource`. A document that names another resource is refused.
async fn find_protected_resource(
    http: &OAuthHttp,
    server_url: &Url,
    challenge: Option<&Challenge>,
) -> Result<Option<(Url, ProtectedResourceMetadata)>> {
    let mut candidates: Vec<Url> = Vec::new();
    if let Some(advertised) = challenge.and_then(|c| c.resource_metadata.as_deref()) {
        match server_url.join(advertised) {
            Ok(url) => {
                check_discovered_url(server_url, &url, "resource metadata")?;
                candidates.push(url);
            }
            Err(_) => tracing::warn!("ignoring a resource_metadata value that is not a URL"),
        }
    }
    let path = server_url.path().trim_matches('/');
    if !path.is_empty() {
        candidates.push(well_known(
            server_url,
            &format!("/.well-known/oauth-protected-resource/{path}"),
        ));
    }
    candidates.push(well_known(server_url, "/.well-known/oauth-protected-resource"));
    candidates.dedup();

    for url in candidates {
        let fetched = http.get(&url, "protected resource metadata request").await?;
        if fetched.status != 200 {
            tracing::debug!(url = %display_url(url.as_str()), status = fetched.status, "no protected resource metadata");
            continue;
        }
        let Ok(prm) = serde_json::from_slice::<ProtectedResourceMetadata>(&fetched.body) else {
            tracing::debug!(url = %display_url(url.as_str()), "not a protected resource metadata document");
            continue;
        };
        if prm.resource.is_none() && prm.authorization_servers.is_empty() {
            continue;
        }
        match &prm.resource {
            None => {
                return Err(Error::Discovery {
                    url: display_url(url.as_str()),
                    reason: "protected resource metadata lacks the required `resource`".into(),
                });
            }
            Some(resource) => {
                let matches = Url::parse(resource)
                    .map(|r| resource_matches(server_url, &r))
                    .unwrap_or(false);
                if !matches {
                    return Err(Error::ResourceMismatch {
                        metadata_url: display_url(url.as_str()),
                        resource: display_url(resource),
                        server_url: display_url(server_url.as_str()),
                    });
                }
            }
        }
        return Ok(Some((url, prm)));
    }
    Ok(None)
}

/// RFC 9728 section 3.3 / MCP: the metadata's `resource` identifies this server when it has the same origin and its path
/// equals the server URL's path or is a prefix of it at a segment boundary.
pub(crate) fn resource_matches(server_url: &Url, resource: &Url) -> bool {
    if resource.fragment().is_some() {
        return false;
    }
    if server_url.scheme() != resource.scheme()
        || !server_url
            .host_str()
            .unwrap_or("")
            .eq_ignore_ascii_case(resource.host_str().unwrap_or(""))
        || server_url.port_or_known_default() != resource.port_or_known_default()
    {
        return false;
    }
    let server_path = server_url.path();
    let resource_path = resource.path();
    server_path == resource_path
        || server_path.trim_end_matches('/') == resource_path.trim_end_matches('/')
        || (server_path.starts_with(resource_path)
            && (resource_path.ends_with('/') || server_path.as_bytes().get(resource_path.len()) == Some(&b'/')))
}

/// RFC 8414 section 3.1 path insertion, then OpenID Connect discovery (inserted, then appended).
pub(crate) fn as_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_matches('/');
    if path.is_empty() {
        vec![
            well_known(issuer, "/.well-known/oauth-authorization-server"),
            well_known(issuer, "/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            well_known(issuer, &format!("/.well-known/oauth-authorization-server/{path}")),
            well_known(issuer, &format!("/.well-known/openid-configuration/{path}")),
            well_known(issuer, &format!("/{path}/.well-known/openid-configuration")),
        ]
    }
}

/// The metadata of a known issuer (RFC 8414 with path insertion, then OpenID Connect), whose `issuer` must be
/// exactly `issuer` (RFC 8414 section 3.3 / OpenID Discovery section 4.3). Used for the SEP-990 identity provider.
pub(crate) async fn issuer_metadata(http: &OAuthHttp, issuer_url: &Url, issuer: &str) -> Result<AuthServerMetadata> {
    let metadata = find_as_metadata(http, issuer_url)
        .await?
        .ok_or_else(|| Error::Discovery {
            url: display_url(issuer),
            reason: "no RFC 8414 or OpenID metadata for this issuer".into(),
        })?;
    validate_issuer(&metadata, Some(issuer), &[], false)?;
    Ok(metadata)
}

async fn find_as_metadata(http: &OAuthHttp, issuer: &Url) -> Result<Option<AuthServerMetadata>> {
    for url in as_metadata_urls(issuer) {
        if let Some(metadata) = fetch_metadata(http, &url).await? {
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

async fn fetch_metadata(http: &OAuthHttp, url: &Url) -> Result<Option<AuthServerMetadata>> {
    let fetched = http.get(url, "authorization server metadata request").await?;
    if fetched.status != 200 {
        tracing::debug!(url = %display_url(url.as_str()), status = fetched.status, "no authorization server metadata");
        return Ok(None);
    }
    match serde_json::from_slice::<AuthServerMetadata>(&fetched.body) {
        Ok(metadata) if metadata.authorization_endpoint.is_some() || metadata.token_endpoint.is_some() => {
            Ok(Some(metadata))
        }
        _ => {
            tracing::debug!(url = %display_url(url.as_str()), "not an authorization server metadata document");
            Ok(None)
        }
    }
}

/// The issuer a well-known metadata URL implies (for a configured metadata URL).
fn expected_issuer_for(url: &Url) -> Option<String> {
    let path = url.path();
    let suffix = [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ]
    .iter()
    .find_map(|prefix| {
        if path == *prefix {
            Some(String::new())
        } else {
            path.strip_prefix(&format!("{prefix}/")).map(|s| format!("/{s}"))
        }
    })
    .or_else(|| {
        path.strip_suffix("/.well-known/openid-configuration")
            .map(str::to_string)
    })?;
    let mut issuer = url.clone();
    issuer.set_query(None);
    issuer.set_fragment(None);
    issuer.set_path(&suffix);
    let text = issuer.to_string();
    Some(if suffix.is_empty() {
        text.trim_end_matches('/').to_string()
    } else {
        text
    })
}

/// RFC 8414 section 3.3: the metadata's `issuer` must be the identifier it was fetched for.
fn validate_issuer(
    metadata: &AuthServerMetadata,
    expected: Option<&str>,
    allowed: &[String],
    skip: bool,
) -> Result<Option<String>> {
    let received = metadata.issuer.clone();
    if skip {
        if received.is_some() && expected.is_some_and(|e| !received.as_deref().is_some_and(|r| issuers_match(r, e))) {
            tracing::warn!(
                "accepting authorization server metadata with a mismatched issuer (skipIssuerMetadataValidation)"
            );
        }
        return Ok(received);
    }
    match (expected, received.as_deref()) {
        (Some(expected), Some(received)) if issuers_match(received, expected) => Ok(Some(received.to_string())),
        (Some(expected), Some(received)) => Err(Error::IssuerMismatch {
            expected: expected.to_string(),
            received: received.to_string(),
        }),
        (Some(expected), None) => Err(Error::IssuerMissing {
            expected: expected.to_string(),
        }),
        (None, Some(received)) if allowed.is_empty() || allowed.iter().any(|a| issuers_match(received, a)) => {
            Ok(Some(received.to_string()))
        }
        (None, Some(received)) => Err(Error::IssuerMismatch {
            expected: allowed.join(" or "),
            received: received.to_string(),
        }),
        (None, None) => Ok(None),
    }
}

/// The issuer rule of the 2025-03-26 fallback ([`MetadataSource::ServerOrigin`]): no protected-resource metadata
/// named an issuer, so the document was fetched from the MCP server's own origin
/// (`<origin>/.well-known/oauth-authorization-server`, then OpenID) and there is no issuer identifier to compare
/// with exactly (RFC 8414 section 3.3 compares against the identifier the metadata URL was built from; here it was built
/// from the origin). The 2025-03-26 MCP spec calls that origin the authorization base URL and lets the server put
/// its endpoints under any path, e.g. an issuer `<origin>/oauth`.
///
/// Accepted: an `issuer` with the same scheme, host and port as the MCP server, any path, no query or fragment — the
/// party that answers at that origin published the document, and it already controls the MCP server. Refused: an
/// issuer at any other origin (a server origin claiming to be someone else's authorization server is the mix-up
/// RFC 8414 guards against), a query or fragment, and a missing `issuer`. The accepted issuer is then the one the
/// RFC 9207 `iss` of the authorization response must equal. `skip` (`oauth.skipIssuerMetadataValidation`) accepts
/// anything, with a warning, as on every other path.
fn validate_origin_issuer(metadata: &AuthServerMetadata, origin: &Url, skip: bool) -> Result<Option<String>> {
    let Some(received) = metadata.issuer.as_deref() else {
        return validate_issuer(metadata, Some(origin.as_str()), &[], skip);
    };
    let same_origin = Url::parse(received).is_ok_and(|issuer| {
        issuer.scheme() == origin.scheme()
            && issuer.host() == origin.host()
            && issuer.port_or_known_default() == origin.port_or_known_default()
            && issuer.query().is_none()
            && issuer.fragment().is_none()
            && issuer.username().is_empty()
            && issuer.password().is_none()
    });
    if same_origin {
        Ok(Some(received.to_string()))
    } else {
        validate_issuer(metadata, Some(origin.as_str()), &[], skip)
    }
}

/// Discovered URLs must be https, except plain http to a loopback host or to the (http) server's own host.
fn check_discovered_url(server_url: &Url, candidate: &Url, what: &str) -> Result<()> {
    let ok = match candidate.scheme() {
        "https" => true,
        "http" => {
            is_loopback(candidate) || (server_url.scheme() == "http" && server_url.host_str() == candidate.host_str())
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(Error::Discovery {
            url: display_url(server_url.as_str()),
            reason: format!(
                "refusing {what} URL `{}`: it must use https",
                display_url(candidate.as_str())
            ),
        })
    }
}

pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => {
            d.eq_ignore_ascii_case("localhost") || d.to_ascii_lowercase().ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

fn well_known(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.set_path(path);
    url
}

fn origin_url(url: &Url) -> Url {
    well_known(url, "/")
}

fn without_fragment(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.to_string()
}

fn default_endpoints(origin: &Url) -> AuthServerMetadata {
    AuthServerMetadata {
        authorization_endpoint: Some(well_known(origin, "/authorize").to_string()),
        token_endpoint: Some(well_known(origin, "/token").to_string()),
        registration_endpoint: Some(well_known(origin, "/register").to_string()),
        ..AuthServerMetadata::default()
    }
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
