//! The interactive login: start the flow with the loopback listener's redirect URI, try to open a browser, then
//! complete from whichever arrives first — the browser's redirect to the listener or a redirect URL / code pasted
//! by the user (the headless path). Stray redirects (wrong `state`) are ignored; the wait is bounded.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::browser::BrowserOpener;
use crate::callback::CallbackListener;
use crate::client::{AuthorizationRequest, OAuthClient};
use crate::discovery::Challenge;
use crate::error::{Error, Result};
use crate::record::{ClientRegistration, TokenRecord};

/// Default limit for a whole interactive login.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// What the caller should tell the user (on stderr or in a UI; this crate prints nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginNotice {
    /// The browser was asked to open this URL.
    BrowserOpened {
        /// The authorization URL.
        url: String,
    },
    /// No browser (headless, or opening failed): show this URL and ask for the redirect URL or code.
    OpenManually {
        /// The authorization URL.
        url: String,
        /// Why no browser was opened.
        reason: String,
    },
    /// A redirect or pasted input was refused; still waiting.
    InputRejected {
        /// Why it was refused.
        reason: String,
    },
}

/// How [`login`] behaves.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// Try the browser (false on headless machines: only print the URL).
    pub open_browser: bool,
    /// How long to wait for the redirect or the pasted input.
    pub timeout: Duration,
    /// The 401 challenge that triggered the login, if any.
    pub challenge: Option<Challenge>,
    /// A client registered in an earlier login (from the stored record).
    pub known_client: Option<ClientRegistration>,
    /// The redirect URI when there is no listener (a non-loopback `oauth.redirectUri`: paste-only).
    pub redirect_uri: Option<String>,
}

impl Default for LoginOptions {
    fn default() -> Self {
        LoginOptions {
            open_browser: true,
            timeout: LOGIN_TIMEOUT,
            challenge: None,
            known_client: None,
            redirect_uri: None,
        }
    }
}

/// Run an interactive authorization-code login to completion.
///
/// `listener` receives the browser's redirect (`None`: paste-only, with `options.redirect_uri`); `manual` delivers
/// pasted redirect URLs or codes (e.g. from `pimcp-run auth complete`); `notify` receives what to show the user.
/// Returns the new record; storing it is the caller's job (`TokenManager::save_login`).
#[tracing::instrument(name = "auth_login", level = "info", skip_all, fields(server = %client.server()))]
pub async fn login(
    client: &OAuthClient,
    mut listener: Option<CallbackListener>,
    mut manual: Option<mpsc::Receiver<String>>,
    opener: &dyn BrowserOpener,
    options: LoginOptions,
    notify: &mut (dyn FnMut(LoginNotice) + Send),
) -> Result<TokenRecord> {
    let redirect_uri = match (&listener, &options.redirect_uri) {
        (Some(listener), _) => listener.redirect_uri().to_string(),
        (None, Some(uri)) => uri.clone(),
        (None, None) => {
            return Err(Error::Callback {
                reason: "a login needs a callback listener or a redirect URI".into(),
            });
        }
    };
    if listener.is_none() && manual.is_none() {
        return Err(Error::Callback {
            reason: "without a callback listener the redirect must be pasted".into(),
        });
    }
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri,
            challenge: options.challenge,
            known_client: options.known_client,
            scope: None,
        })
        .await?;
    if options.open_browser {
        match opener.open(&start.url) {
            Ok(()) => notify(LoginNotice::BrowserOpened { url: start.url.clone() }),
            Err(reason) => notify(LoginNotice::OpenManually {
                url: start.url.clone(),
                reason,
            }),
        }
    } else {
        notify(LoginNotice::OpenManually {
            url: start.url.clone(),
            reason: "browser opening is off".into(),
        });
    }
    let deadline = tokio::time::Instant::now() + options.timeout;
    loop {
        let input = tokio::select! {
            got = async {
                match listener.as_mut() {
                    Some(l) => l.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                if got.is_none() {
                    return Err(Error::Callback { reason: "the callback listener stopped".into() });
                }
                got
            }
            got = async {
                match manual.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                if got.is_none() {
                    manual = None;
                    if listener.is_none() {
                        return Err(Error::Callback { reason: "the paste channel closed before a redirect arrived".into() });
                    }
                    continue;
                }
                got
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(Error::Timeout { what: format!("the authorization of server `{}`", client.server()), seconds: options.timeout.as_secs() });
            }
        };
        let Some(input) = input else {
            return Err(Error::Callback {
                reason: "the callback listener stopped".into(),
            });
        };
        match client.complete(&input).await {
            Ok(record) => return Ok(record),
            Err(e @ (Error::StateMismatch { .. } | Error::InvalidInput { .. })) => {
                notify(LoginNotice::InputRejected { reason: e.to_string() });
            }
            Err(other) => return Err(other),
        }
    }
}
