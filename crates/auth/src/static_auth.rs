//! Static credentials of an HTTP server: configured `headers` (values may be `!command` secrets) and
//! `auth: "bearer"` (`bearerToken`, itself possibly a `!command`, or `bearerTokenEnv`). They are resolved at
//! connect time and only ever attached to requests for the server's own origin.

use std::fmt;

use pimcp_config::{AuthConfig, EnvMap, HttpTransport, SecretValue};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use url::Url;

use crate::error::{Error, Result, display_url};

/// Resolved static headers for one server, bound to its origin. `Debug` shows header names only.
#[derive(Clone)]
pub struct StaticCredentials {
    origin: url::Origin,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("StaticCredentials")
            .field("origin", &self.origin.ascii_serialization())
            .field("headers", &names)
            .finish()
    }
}

impl StaticCredentials {
    /// Resolve `transport.headers` and, for `auth: "bearer"`, the bearer token (a `bearerToken` wins over a
    /// configured `Authorization` header). `!command`s run on a blocking thread; `env` supplies `bearerTokenEnv`.
    /// Errors name the field, never a value.
    pub async fn resolve(
        server: &str,
        transport: &HttpTransport,
        auth: &AuthConfig,
        env: &EnvMap,
    ) -> Result<StaticCredentials> {
        let url = Url::parse(&transport.url).map_err(|_| Error::Credential {
            server: server.to_string(),
            field: "url".into(),
            reason: "not a valid URL".into(),
            source: None,
        })?;
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
        for (name, value) in &transport.headers {
            let field = format!("headers.{name}");
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| Error::Credential {
                server: server.to_string(),
                field: field.clone(),
                reason: "not a valid header name".into(),
                source: None,
            })?;
            let resolved = resolve_secret(server, &field, value).await?;
            headers.push((header_name, header_value(server, &field, &resolved)?));
        }
        if let AuthConfig::Bearer { token, token_env } = auth {
            let raw = match (token, token_env) {
                (Some(token), _) => resolve_secret(server, "bearerToken", token).await?,
                (None, Some(var)) => env
                    .get(var)
                    .filter(|v| !v.trim().is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| Error::Credential {
                        server: server.to_string(),
                        field: "bearerTokenEnv".into(),
                        reason: format!("environment variable `{var}` is not set or empty"),
                        source: None,
                    })?,
                (None, None) => {
                    return Err(Error::Credential {
                        server: server.to_string(),
                        field: "bearerToken".into(),
                        reason: "`auth: \"bearer\"` needs `bearerToken` or `bearerTokenEnv`".into(),
                        source: None,
                    });
                }
            };
            let token = raw.trim();
            let token = match token.get(..7) {
                Some(prefix) if prefix.eq_ignore_ascii_case("bearer ") => token[7..].trim_start(),
                _ => token,
            };
            if headers.iter().any(|(n, _)| n == AUTHORIZATION) {
                tracing::warn!(
                    server,
                    "both `bearerToken` and an Authorization header are configured; using the bearer token"
                );
                headers.retain(|(n, _)| n != AUTHORIZATION);
            }
            headers.push((
                AUTHORIZATION,
                header_value(server, "bearerToken", &format!("Bearer {token}"))?,
            ));
        }
        Ok(StaticCredentials {
            origin: url.origin(),
            headers,
        })
    }

    /// True when nothing is configured.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// True when `url` has the server's origin (scheme, host and port).
    pub fn applies_to(&self, url: &str) -> bool {
        Url::parse(url).map(|u| u.origin() == self.origin).unwrap_or(false)
    }

    /// The headers for a request to `url`: all of them for the server's origin, none for any other.
    pub fn headers_for(&self, url: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        if self.applies_to(url) {
            for (name, value) in &self.headers {
                map.insert(name.clone(), value.clone());
            }
        } else if !self.headers.is_empty() {
            tracing::debug!(url = %display_url(url), "not sending static credentials to another origin");
        }
        map
    }

    /// Attach the headers to `request` when `url` is the server's origin.
    pub fn apply(&self, request: reqwest::RequestBuilder, url: &str) -> reqwest::RequestBuilder {
        request.headers(self.headers_for(url))
    }
}

/// A redirect policy for clients that carry static credentials: follow at most 10 redirects, and none that leaves
/// the origin it started from (reqwest keeps custom headers such as `X-API-Key` across redirects).
pub fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.follow();
        };
        if attempt.previous().len() > 10 {
            attempt.error("too many redirects")
        } else if attempt.url().origin() != first.origin() {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

async fn resolve_secret(server: &str, field: &str, value: &SecretValue) -> Result<String> {
    match value {
        SecretValue::Plain(secret) => Ok(secret.expose().to_string()),
        SecretValue::Command(_) => {
            let value = value.clone();
            let context = field.to_string();
            let resolved = tokio::task::spawn_blocking(move || value.resolve(&context))
                .await
                .map_err(|e| Error::Task {
                    reason: format!("secret command task: {e}"),
                })?;
            resolved.map(|s| s.expose().to_string()).map_err(|e| Error::Credential {
                server: server.to_string(),
                field: field.to_string(),
                reason: e.to_string(),
                source: Some(e),
            })
        }
    }
}

fn header_value(server: &str, field: &str, value: &str) -> Result<HeaderValue> {
    let mut value = HeaderValue::from_str(value).map_err(|_| Error::Credential {
        server: server.to_string(),
        field: field.to_string(),
        reason: "the value cannot be sent in an HTTP header (control characters or non-ASCII)".into(),
        source: None,
    })?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeMap;

    use pimcp_config::Secret;

    use super::*;

    fn transport(headers: &[(&str, SecretValue)]) -> HttpTransport {
        let mut transport = HttpTransport::new("https://mcp.example.com/mcp");
        transport.headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>();
        transport
    }

    fn plain(v: &str) -> SecretValue {
        SecretValue::Plain(Secret::new(v))
    }

    #[tokio::test]
    async fn headers_only_go_to_the_servers_origin() {
        let creds = StaticCredentials::resolve(
            "s",
            &transport(&[("X-Api-Key", plain("planted-secret"))]),
            &AuthConfig::Auto,
            &EnvMap::new(),
        )
        .await
        .unwrap();
        assert_eq!(creds.headers_for("https://mcp.example.com/other").len(), 1);
        assert_eq!(creds.headers_for("https://mcp.example.com:443/mcp").len(), 1);
        assert!(creds.headers_for("https://evil.example.com/mcp").is_empty());
        assert!(creds.headers_for("http://mcp.example.com/mcp").is_empty());
        assert!(creds.headers_for("https://mcp.example.com:8443/mcp").is_empty());
        assert!(!format!("{creds:?}").contains("planted"));
    }

    #[tokio::test]
    async fn bearer_from_token_command_and_env() {
        let auth = AuthConfig::Bearer {
            // `cmd.exe` on Windows, `sh` elsewhere.
            token: Some(SecretValue::Command(
                if cfg!(windows) {
                    "echo Bearer  tok-1"
                } else {
                    "printf 'Bearer  tok-1'"
                }
                .into(),
            )),
            token_env: None,
        };
        let creds = StaticCredentials::resolve(
            "s",
            &transport(&[("Authorization", plain("Basic x"))]),
            &auth,
            &EnvMap::new(),
        )
        .await
        .unwrap();
        let headers = creds.headers_for("https://mcp.example.com/mcp");
        assert_eq!(headers.get(AUTHORIZATION).unwrap().to_str().unwrap(), "Bearer tok-1");
        assert!(headers.get(AUTHORIZATION).unwrap().is_sensitive());

        let env: EnvMap = [("MY_TOKEN".to_string(), "tok-2".to_string())].into_iter().collect();
        let auth = AuthConfig::Bearer {
            token: None,
            token_env: Some("MY_TOKEN".into()),
        };
        let creds = StaticCredentials::resolve("s", &transport(&[]), &auth, &env)
            .await
            .unwrap();
        assert_eq!(
            creds.headers_for("https://mcp.example.com/mcp")[AUTHORIZATION],
            "Bearer tok-2"
        );

        let auth = AuthConfig::Bearer {
            token: None,
            token_env: Some("MISSING".into()),
        };
        let err = StaticCredentials::resolve("s", &transport(&[]), &auth, &env)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("MISSING"), "{err}");
    }

    #[tokio::test]
    async fn bad_values_are_named_not_shown() {
        let err = StaticCredentials::resolve(
            "s",
            &transport(&[("X-Key", plain("planted\nsecret"))]),
            &AuthConfig::Auto,
            &EnvMap::new(),
        )
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("headers.X-Key") && !text.contains("planted"), "{text}");
        let err = StaticCredentials::resolve(
            "s",
            &transport(&[("X-Key", SecretValue::Command("exit 3".into()))]),
            &AuthConfig::Auto,
            &EnvMap::new(),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("exited with code 3"), "{err}");
    }
}
