//! The OAuth part of the library API on [`RuntimeHandle`]: start a login (loopback listener + browser), complete
//! it with a pasted redirect URL or code, log out, and report every server's authentication state.

use std::sync::Arc;

use pimcp_auth::AuthorizationStart;

use super::server_auth::ServerAuth;
use super::status::{AuthMode, AuthStatus, ServerAuthStatus};
use crate::error::{Error, Result};
use crate::runtime::RuntimeHandle;

impl RuntimeHandle {
    /// Starts an OAuth login for `server`: binds the loopback callback listener, runs discovery and client
    /// registration, opens the browser (best effort) and returns the authorization URL to show. When the browser
    /// is redirected back the login completes by itself and the server reconnects; on a headless machine pass the
    /// redirect URL (or code) to [`RuntimeHandle::auth_complete`]. Starting again replaces a pending login.
    pub async fn auth_start(&self, server: &str) -> Result<AuthorizationStart> {
        self.oauth_server(server).await?.start().await
    }

    /// Waits up to `timeout` for the pending login of `server` (see [`RuntimeHandle::auth_start`]) to finish,
    /// whether by the browser's redirect to the loopback listener or by [`RuntimeHandle::auth_complete`]. Errors
    /// with `NeedsAuth` when it failed, was abandoned or replaced, or did not finish in time.
    pub async fn auth_wait(&self, server: &str, timeout: std::time::Duration) -> Result<()> {
        self.oauth_server(server).await?.wait(timeout).await
    }

    /// Completes the pending login of `server` with the redirect URL (or its query string, or the bare code),
    /// stores the tokens, then reconnects the server and returns once it is ready (an error then is the
    /// connect's; the login is stored either way).
    pub async fn auth_complete(&self, server: &str, code_or_redirect_url: &str) -> Result<()> {
        let auth = self.oauth_server(server).await?;
        let waiting = auth.complete(code_or_redirect_url).await?;
        if waiting {
            // A request was waiting for this login and retries with the new token itself.
            return Ok(());
        }
        self.reconnect(server).await
    }

    /// Deletes `server`'s stored OAuth record (tokens and registered client) and any pending login. Revoking the
    /// grant at the provider is up to the user.
    pub async fn auth_logout(&self, server: &str) -> Result<()> {
        self.oauth_server(server).await?.logout().await
    }

    /// How every configured server authenticates and whether a login is stored for its current URL. Reads the
    /// token store for OAuth-capable servers only; never contains a token or secret.
    pub async fn auth_status(&self) -> Result<AuthStatus> {
        if self.shared.is_shutting_down() {
            return Err(Error::ShuttingDown);
        }
        let servers = self.shared.auth.servers().await?;
        let mut out = Vec::with_capacity(servers.len());
        for (name, mode, auth) in servers {
            out.push(match auth {
                Some(auth) => auth.status().await,
                None => ServerAuthStatus::new(&name, mode),
            });
        }
        Ok(AuthStatus { servers: out })
    }

    async fn oauth_server(&self, server: &str) -> Result<Arc<ServerAuth>> {
        if self.shared.is_shutting_down() {
            return Err(Error::ShuttingDown);
        }
        if let Some(auth) = self.shared.auth.server(server).await? {
            return Ok(auth);
        }
        let statuses = self.shared.auth.servers().await?;
        match statuses.iter().find(|(name, _, _)| name == server) {
            None => Err(Error::UnknownServer {
                server: server.to_owned(),
            }),
            Some((_, mode, _)) => Err(Error::Config {
                server: server.to_owned(),
                message: format!("the server does not use OAuth ({})", describe(*mode)),
            }),
        }
    }
}

fn describe(mode: AuthMode) -> &'static str {
    match mode {
        AuthMode::None => "no authentication: stdio/socket transport, or `oauth: false`",
        AuthMode::Headers => "static `headers` turn OAuth off",
        AuthMode::Bearer => "it uses `auth: \"bearer\"`",
        AuthMode::Oauth | AuthMode::Auto => "oauth",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_say_why_oauth_is_off() {
        assert!(describe(AuthMode::Headers).contains("headers"));
        assert!(describe(AuthMode::Bearer).contains("bearer"));
        assert!(describe(AuthMode::None).contains("oauth: false"));
    }
}
