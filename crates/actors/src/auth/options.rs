//! [`AuthOptions`]: what a library host may set about OAuth beyond the configuration — an injected token store
//! (tests, hosts with their own storage), the browser opener, the callback port, `private_key_jwt` keys — and the
//! bound on how long an automatic login (`settings.autoAuth`) may hold a request.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pimcp_auth::{BrowserOpener, CallbackPort, OAuthHttp, TokenStore};
use pimcp_config::Secret;

/// How long a request that hit 401/403 waits for an automatic login (`settings.autoAuth`) before it fails with
/// `needs-auth`. The login itself stays pending (and reconnects the server when it completes).
pub const AUTO_AUTH_WAIT: Duration = Duration::from_secs(20);

/// OAuth knobs of [`crate::RuntimeOptions`]. `Default` is what `pimcp-run` uses: the store chosen by
/// `settings.tokenStore`, the system browser, the callback port from configuration / `MCP_OAUTH_CALLBACK_PORT`.
#[derive(Clone)]
pub struct AuthOptions {
    /// Use this token store instead of opening the one `settings.tokenStore` names (tests inject a
    /// `pimcp_auth::MemoryStore`). The store is opened lazily: servers that never use OAuth never touch it.
    pub store: Option<Arc<dyn TokenStore>>,
    /// Shows authorization URLs; `None` is the system browser (`$BROWSER`, `xdg-open`, `open`).
    pub browser: Option<Arc<dyn BrowserOpener>>,
    /// Whether to try the browser at all (a headless host only reports the URL). Default true.
    pub open_browser: bool,
    /// Callback port when the server's `oauth.callbackPort` does not pin one; `None` reads
    /// `MCP_OAUTH_CALLBACK_PORT`, else prefers 19847 and falls back to a free port.
    pub callback_port: Option<CallbackPort>,
    /// PEM (PKCS#8, P-256) private keys for `private_key_jwt` client authentication, by server name. There is no
    /// configuration field for the key yet; library hosts pass it here.
    pub private_keys: BTreeMap<String, Secret>,
    /// Directory of legacy plaintext token files to import (`MCP_OAUTH_DIR`); `None` reads that variable.
    pub legacy_dir: Option<PathBuf>,
    /// HTTP client for discovery, registration and token requests (must not follow redirects); `None` builds
    /// `pimcp_auth::OAuthHttp::new()`.
    pub http: Option<OAuthHttp>,
    /// See [`AUTO_AUTH_WAIT`].
    pub auto_auth_wait: Duration,
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            store: None,
            browser: None,
            open_browser: true,
            callback_port: None,
            private_keys: BTreeMap::new(),
            legacy_dir: None,
            http: None,
            auto_auth_wait: AUTO_AUTH_WAIT,
        }
    }
}

impl std::fmt::Debug for AuthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthOptions")
            .field("store", &self.store.as_ref().map(|s| s.name()))
            .field("browser", &self.browser.is_some())
            .field("open_browser", &self.open_browser)
            .field("callback_port", &self.callback_port)
            .field("private_keys", &self.private_keys.keys().collect::<Vec<_>>())
            .field("legacy_dir", &self.legacy_dir)
            .field("auto_auth_wait", &self.auto_auth_wait)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_servers_but_not_keys() {
        let mut options = AuthOptions::default();
        options
            .private_keys
            .insert("jwt-server".into(), Secret::new("-----BEGIN PRIVATE KEY----- planted"));
        let text = format!("{options:?}");
        assert!(text.contains("jwt-server"), "{text}");
        assert!(!text.contains("planted"), "{text}");
    }
}
