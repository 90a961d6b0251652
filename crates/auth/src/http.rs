//! The HTTP side of OAuth: one `reqwest` client that never follows redirects on its own (token endpoints must not
//! redirect; discovery follows same-origin redirects explicitly), a 30 s timeout and response bodies capped at
//! 1 MiB.

use std::time::Duration;

use reqwest::header::{HeaderMap, LOCATION};
use url::Url;

use crate::error::{Error, Result, display_url, http_reason};

/// Per-request timeout of every OAuth HTTP exchange.
pub const OAUTH_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response body read from a metadata, registration or token endpoint.
pub const MAX_OAUTH_BODY_BYTES: usize = 1024 * 1024;
/// Same-origin redirects followed during discovery.
const MAX_DISCOVERY_REDIRECTS: usize = 5;
/// Protocol version sent on discovery requests (MCP asks clients to send `MCP-Protocol-Version` there).
const DISCOVERY_PROTOCOL_VERSION: &str = "2025-11-25";

/// A response read into memory.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// The HTTP client used for discovery, registration and token requests. Clones share one client.
#[derive(Debug, Clone)]
pub struct OAuthHttp {
    /// Built on first use: building loads the system root certificates, which a runtime that never runs an OAuth
    /// flow should not pay for at start.
    client: std::sync::Arc<std::sync::OnceLock<reqwest::Client>>,
}

impl OAuthHttp {
    /// A client with no automatic redirects and the [`OAUTH_HTTP_TIMEOUT`], built when first used.
    pub fn new() -> Result<OAuthHttp> {
        Ok(OAuthHttp {
            client: std::sync::Arc::default(),
        })
    }

    /// Use a caller's client (proxy, TLS roots). It must be built with `redirect(Policy::none())`.
    pub fn from_client(client: reqwest::Client) -> OAuthHttp {
        OAuthHttp {
            client: std::sync::Arc::new(client.into()),
        }
    }

    /// The client, built now if needed. A failed build (a TLS backend that cannot start) is an error for this request
    /// and is tried again on the next one; there is no fallback client, since any other would follow redirects.
    pub(crate) fn client(&self) -> Result<&reqwest::Client> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let built = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(OAUTH_HTTP_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Http {
                what: "http client setup",
                url: String::new(),
                reason: http_reason(&e),
                source: Some(e.without_url()),
            })?;
        Ok(self.client.get_or_init(|| built))
    }

    /// GET `url` following same-origin redirects only.
    pub(crate) async fn get(&self, url: &Url, what: &'static str) -> Result<Fetched> {
        let mut current = url.clone();
        for _ in 0..=MAX_DISCOVERY_REDIRECTS {
            let request = self
                .client()?
                .get(current.clone())
                .header("accept", "application/json")
                .header("mcp-protocol-version", DISCOVERY_PROTOCOL_VERSION);
            let fetched = self.send(request, what, current.as_str()).await?;
            if !(300..400).contains(&fetched.status) {
                return Ok(fetched);
            }
            let Some(location) = fetched.headers.get(LOCATION).and_then(|v| v.to_str().ok()) else {
                return Ok(fetched);
            };
            let next = current.join(location).map_err(|_| Error::Http {
                what,
                url: display_url(current.as_str()),
                reason: "redirect to an invalid location".into(),
                source: None,
            })?;
            if next.origin() != current.origin() {
                return Err(Error::Http {
                    what,
                    url: display_url(current.as_str()),
                    reason: format!(
                        "refusing a redirect to another origin (`{}`)",
                        display_url(next.as_str())
                    ),
                    source: None,
                });
            }
            current = next;
        }
        Err(Error::Http {
            what,
            url: display_url(url.as_str()),
            reason: "too many redirects".into(),
            source: None,
        })
    }

    /// Send a prepared request (no redirects followed) and read the body up to [`MAX_OAUTH_BODY_BYTES`].
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
        what: &'static str,
        url: &str,
    ) -> Result<Fetched> {
        let fail = |reason: String, source: Option<reqwest::Error>| Error::Http {
            what,
            url: display_url(url),
            reason,
            source: source.map(reqwest::Error::without_url),
        };
        let mut response = request.send().await.map_err(|e| fail(http_reason(&e), Some(e)))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| fail(http_reason(&e), Some(e)))? {
            if body.len() + chunk.len() > MAX_OAUTH_BODY_BYTES {
                return Err(fail(
                    format!("response body exceeds {MAX_OAUTH_BODY_BYTES} bytes"),
                    None,
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched { status, headers, body })
    }
}
