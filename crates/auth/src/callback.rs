//! The loopback redirect listener of the interactive flow: `http://127.0.0.1:<port>/callback` on the port from
//! `oauth.callbackPort`, else `MCP_OAUTH_CALLBACK_PORT`, else 19847 — falling back to a free port only when the port
//! was not pinned. Each request to the callback path is handed over as the full redirect URL.

use std::net::{Ipv4Addr, SocketAddr};

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};

/// Port used when neither `oauth.callbackPort` nor `MCP_OAUTH_CALLBACK_PORT` is set.
pub const DEFAULT_CALLBACK_PORT: u16 = 19847;
/// Environment variable that pins the callback port.
pub const CALLBACK_PORT_ENV: &str = "MCP_OAUTH_CALLBACK_PORT";
/// Path of the redirect URI.
pub const CALLBACK_PATH: &str = "/callback";

/// Which port to listen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackPort {
    /// Configured: this port or an error.
    Pinned(u16),
    /// The default: this port if free, else any free port.
    Preferred(u16),
}

impl CallbackPort {
    /// `oauth.callbackPort` wins, then the value of `MCP_OAUTH_CALLBACK_PORT`, then [`DEFAULT_CALLBACK_PORT`].
    pub fn choose(configured: Option<u16>, env_value: Option<&str>) -> Result<CallbackPort> {
        if let Some(port) = configured {
            return Ok(CallbackPort::Pinned(port));
        }
        match env_value.map(str::trim).filter(|v| !v.is_empty()) {
            Some(text) => match text.parse::<u16>() {
                Ok(port) if port > 0 => Ok(CallbackPort::Pinned(port)),
                _ => Err(Error::Callback {
                    reason: format!("{CALLBACK_PORT_ENV} must be a port number from 1 to 65535"),
                }),
            },
            None => Ok(CallbackPort::Preferred(DEFAULT_CALLBACK_PORT)),
        }
    }
}

/// A running loopback listener; stops when dropped.
pub struct CallbackListener {
    redirect_uri: String,
    port: u16,
    callbacks: mpsc::Receiver<String>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for CallbackListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackListener")
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

impl CallbackListener {
    /// Listen on 127.0.0.1 at [`CALLBACK_PATH`].
    pub async fn bind(port: CallbackPort) -> Result<CallbackListener> {
        CallbackListener::bind_at(port, None, CALLBACK_PATH).await
    }

    /// Listen for a configured `oauth.redirectUri`: it must be `http://` on `127.0.0.1`, `localhost` or `[::1]`.
    /// Its port pins the listener (`{port}` stands for whichever port `port` yields); its path is served; the
    /// redirect URI is kept exactly as configured, since authorization servers compare it as a string.
    pub async fn bind_redirect_uri(redirect_uri: &str, port: CallbackPort) -> Result<CallbackListener> {
        let placeholder = redirect_uri.contains("{port}");
        let probe = redirect_uri.replace("{port}", "1");
        let url = url::Url::parse(&probe).map_err(|_| Error::Callback {
            reason: "`oauth.redirectUri` is not a valid URL".into(),
        })?;
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        if url.scheme() != "http" || !matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]") {
            return Err(Error::Callback {
                reason:
                    "`oauth.redirectUri` is not a loopback http URI; complete the login by pasting the redirect URL"
                        .into(),
            });
        }
        let port = match (placeholder, url.port()) {
            (true, _) => port,
            (false, Some(p)) => CallbackPort::Pinned(p),
            (false, None) => CallbackPort::Pinned(80),
        };
        CallbackListener::bind_at(port, Some(redirect_uri), url.path()).await
    }

    async fn bind_at(port: CallbackPort, template: Option<&str>, path: &str) -> Result<CallbackListener> {
        let listener = match port {
            CallbackPort::Pinned(p) => tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, p))
                .await
                .map_err(|e| Error::Callback {
                    reason: format!("cannot listen on 127.0.0.1:{p} (the pinned callback port): {e}"),
                })?,
            CallbackPort::Preferred(p) => match tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, p)).await {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::info!(port = p, error = %e, "callback port busy; using a free port");
                    tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                        .await
                        .map_err(|e| Error::Callback {
                            reason: format!("cannot listen on 127.0.0.1: {e}"),
                        })?
                }
            },
        };
        let addr: SocketAddr = listener.local_addr().map_err(|e| Error::Callback {
            reason: format!("no local address: {e}"),
        })?;
        let redirect_uri = match template {
            Some(t) => t.replace("{port}", &addr.port().to_string()),
            None => format!("http://127.0.0.1:{}{CALLBACK_PATH}", addr.port()),
        };
        let (tx, callbacks) = mpsc::channel::<String>(8);
        let (shutdown, stop) = oneshot::channel::<()>();
        let app = axum::Router::new()
            .route(path, axum::routing::get(on_callback))
            .with_state((tx, redirect_uri.clone()));
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stop.await;
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "oauth callback listener stopped");
            }
        });
        Ok(CallbackListener {
            redirect_uri,
            port: addr.port(),
            callbacks,
            shutdown: Some(shutdown),
        })
    }

    /// `http://127.0.0.1:<port>/callback`.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// The port the listener is bound to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The next redirect that reached the listener, as a full URL.
    pub async fn recv(&mut self) -> Option<String> {
        self.callbacks.recv().await
    }
}

impl Drop for CallbackListener {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

const PAGE_DONE: &str = "<!doctype html><meta charset=utf-8><title>pimcp</title>\
<p>Authorization received. You can close this tab and return to your terminal.</p>";
const PAGE_EMPTY: &str = "<!doctype html><meta charset=utf-8><title>pimcp</title>\
<p>This address only receives OAuth redirects.</p>";

async fn on_callback(
    State((tx, redirect_uri)): State<(mpsc::Sender<String>, String)>,
    RawQuery(query): RawQuery,
) -> impl IntoResponse {
    let Some(query) = query.filter(|q| q.contains("code=") || q.contains("error=")) else {
        return (StatusCode::BAD_REQUEST, Html(PAGE_EMPTY));
    };
    let _ = tx.send(format!("{redirect_uri}?{query}")).await;
    (StatusCode::OK, Html(PAGE_DONE))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn port_choice_order() {
        assert_eq!(
            CallbackPort::choose(Some(5000), Some("6000")).unwrap(),
            CallbackPort::Pinned(5000)
        );
        assert_eq!(
            CallbackPort::choose(None, Some("6000")).unwrap(),
            CallbackPort::Pinned(6000)
        );
        assert_eq!(
            CallbackPort::choose(None, Some(" ")).unwrap(),
            CallbackPort::Preferred(DEFAULT_CALLBACK_PORT)
        );
        assert_eq!(
            CallbackPort::choose(None, None).unwrap(),
            CallbackPort::Preferred(DEFAULT_CALLBACK_PORT)
        );
        assert!(CallbackPort::choose(None, Some("0")).is_err());
        assert!(CallbackPort::choose(None, Some("http")).is_err());
    }

    #[tokio::test]
    async fn pinned_port_in_use_is_an_error_and_preferred_falls_back() {
        let taken = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = CallbackListener::bind(CallbackPort::Pinned(port)).await.unwrap_err();
        assert!(err.to_string().contains(&port.to_string()), "{err}");
        let listener = CallbackListener::bind(CallbackPort::Preferred(port)).await.unwrap();
        assert_ne!(listener.port(), port);
    }

    #[tokio::test]
    async fn configured_redirect_uris() {
        let mut listener =
            CallbackListener::bind_redirect_uri("http://localhost:{port}/oauth/done", CallbackPort::Preferred(0))
                .await
                .unwrap();
        let expected = format!("http://localhost:{}/oauth/done", listener.port());
        assert_eq!(listener.redirect_uri(), expected);
        let url = format!("http://127.0.0.1:{}/oauth/done?code=c&state=s", listener.port());
        assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);
        assert_eq!(listener.recv().await.unwrap(), format!("{expected}?code=c&state=s"));
        assert!(
            CallbackListener::bind_redirect_uri("https://app.example/cb", CallbackPort::Preferred(0))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn delivers_the_redirect_url() {
        let mut listener = CallbackListener::bind(CallbackPort::Preferred(0)).await.unwrap();
        let url = format!("{}?code=abc&state=xyz", listener.redirect_uri());
        let response = reqwest::get(&url).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(listener.recv().await.unwrap(), url);
        let response = reqwest::get(format!("{}?nothing=1", listener.redirect_uri()))
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
    }
}
