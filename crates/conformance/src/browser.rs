//! The headless "browser" of conformance runs: the suite's authorization server approves at once with a 302 to
//! the redirect URI, so following the redirects with a plain HTTP client lands on the runtime's loopback listener,
//! exactly as a person's browser would.

use pimcp_auth::BrowserOpener;

/// Opens authorization URLs by fetching them (following redirects) in the background.
#[derive(Debug, Clone)]
pub(crate) struct HeadlessBrowser {
    http: reqwest::Client,
}

impl HeadlessBrowser {
    pub(crate) fn new() -> anyhow::Result<HeadlessBrowser> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(10))
            .build()?;
        Ok(HeadlessBrowser { http })
    }
}

impl BrowserOpener for HeadlessBrowser {
    fn open(&self, url: &str) -> Result<(), String> {
        let handle = tokio::runtime::Handle::try_current().map_err(|e| format!("no async runtime: {e}"))?;
        let request = self.http.get(url);
        handle.spawn(async move {
            match request.send().await {
                Ok(response) => tracing::debug!(status = %response.status(), "authorization URL followed"),
                Err(e) => tracing::warn!(error = %e, "following the authorization URL failed"),
            }
        });
        Ok(())
    }
}
