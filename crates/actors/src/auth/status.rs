//! What `auth_status()` reports per server: how it authenticates, whether a login is stored for its current URL,
//! when the token expires, and a pending login's URL. Never a token, refresh token, client secret or `state`
//! value (the authorization URL carries `state`, which is the user's to open).

use serde::Serialize;

/// How a server authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    /// stdio or socket transport, `auth: false` / `oauth: false`, or a public HTTP server.
    None,
    /// Static `headers` (which turn OAuth detection off).
    Headers,
    /// `auth: "bearer"`.
    Bearer,
    /// `auth: "oauth"` or an `oauth` object.
    Oauth,
    /// No auth configured: OAuth is used if the server answers 401 with `WWW-Authenticate`.
    Auto,
}

/// One server's line of [`AuthStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerAuthStatus {
    /// The server's name.
    pub name: String,
    /// How it authenticates.
    pub mode: AuthMode,
    /// `authorization_code` or `client_credentials` (OAuth-capable servers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// An `auto` server answered 401 with a `WWW-Authenticate` challenge in this process.
    pub detected: bool,
    /// Tokens are stored for the server's current URL.
    pub logged_in: bool,
    /// Unix seconds; absent when unknown or the server gave no lifetime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Whether a refresh token is stored.
    pub has_refresh_token: bool,
    /// The granted scopes, space-separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The authorization server that issued the tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// A login started in this process and waiting for its redirect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingLogin>,
    /// The last authorization problem (refused refresh, no stored token, unusable store…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ServerAuthStatus {
    /// A server's line before anything is known: not logged in, no token, no error.
    pub fn new(name: &str, mode: AuthMode) -> ServerAuthStatus {
        ServerAuthStatus {
            name: name.to_owned(),
            mode,
            grant: None,
            detected: false,
            logged_in: false,
            expires_at: None,
            has_refresh_token: false,
            scope: None,
            issuer: None,
            pending: None,
            error: None,
        }
    }
}

/// A login waiting for the browser's redirect (or a pasted redirect URL / code).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingLogin {
    /// The authorization URL to open.
    pub url: String,
    /// Where the browser is sent back (the loopback listener, or a configured `oauth.redirectUri`).
    pub redirect_uri: String,
    /// Whether a loopback listener is waiting for that redirect (otherwise it must be pasted).
    pub listening: bool,
    /// Unix milliseconds.
    pub started_at_ms: u64,
}

/// Authentication state of every configured server (`pimcp-run auth status --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthStatus {
    /// Every configured server, by name.
    pub servers: Vec<ServerAuthStatus>,
}

impl AuthStatus {
    /// One server's line.
    pub fn server(&self, name: &str) -> Option<&ServerAuthStatus> {
        self.servers.iter().find(|s| s.name == name)
    }
}
