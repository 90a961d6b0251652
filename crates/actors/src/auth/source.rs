//! The bearer-token hook of Streamable HTTP connections: a [`TokenSource`] supplies the token of every request
//! (refreshing it first when it is about to expire) and renews it when the server answers 401, or 403
//! `insufficient_scope`; [`send_with_bearer`] applies at most one renewal and one retry per request.

use std::future::Future;

use async_trait::async_trait;
use pimcp_config::Secret;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// Where an HTTP connection gets its `Authorization: Bearer` token. The runtime's OAuth layer implements it per
/// server; a library host calling [`crate::transport::connect`] directly may supply its own.
#[async_trait]
pub trait TokenSource: Send + Sync {
    /// The token for the next request, or `None` to send none.
    async fn bearer(&self) -> Option<Secret>;

    /// The server refused a request: `status` is 401, or 403 (`insufficient_scope`); `challenge` is the
    /// `WWW-Authenticate` value and `rejected` the token that was sent. Returns a token to retry the request once
    /// with, or `None` to give up (the refusal then reaches the caller).
    async fn renew(&self, rejected: Option<Secret>, status: u16, challenge: &str) -> Option<Secret>;

    /// The retried request was accepted with the renewed token.
    fn accepted(&self) {}
}

/// Sends one HTTP exchange with the source's token; on 401/403-with-challenge renews once and sends once more.
/// `send` receives the bearer token (without the `Bearer ` prefix) and is called at most twice.
pub(crate) async fn send_with_bearer<T, E, F, Fut>(
    source: &dyn TokenSource,
    send: F,
) -> Result<T, StreamableHttpError<E>>
where
    E: std::error::Error + Send + Sync + 'static,
    F: Fn(Option<String>) -> Fut,
    Fut: Future<Output = Result<T, StreamableHttpError<E>>>,
{
    let token = source.bearer().await;
    let first = send(token.as_ref().map(|t| t.expose().to_owned())).await;
    let (status, challenge) = match &first {
        Err(StreamableHttpError::AuthRequired(e)) => (401, e.www_authenticate_header.clone()),
        Err(StreamableHttpError::InsufficientScope(e)) => (403, e.www_authenticate_header.clone()),
        _ => return first,
    };
    let Some(renewed) = source.renew(token, status, &challenge).await else {
        return first;
    };
    let second = send(Some(renewed.expose().to_owned())).await;
    if second.is_ok() {
        source.accepted();
    }
    second
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};

    use super::*;

    type HttpResult = Result<&'static str, StreamableHttpError<std::io::Error>>;

    /// Hands out `first`, renews to `renewed` (if any), records what it was asked.
    struct Fake {
        first: Option<&'static str>,
        renewed: Option<&'static str>,
        renewals: Mutex<Vec<(Option<String>, u16, String)>>,
        accepted: AtomicUsize,
    }

    impl Fake {
        fn new(first: Option<&'static str>, renewed: Option<&'static str>) -> Fake {
            Fake {
                first,
                renewed,
                renewals: Mutex::new(Vec::new()),
                accepted: AtomicUsize::new(0),
            }
        }
    }

    #[async_trait]
    impl TokenSource for Fake {
        async fn bearer(&self) -> Option<Secret> {
            self.first.map(Secret::new)
        }
        async fn renew(&self, rejected: Option<Secret>, status: u16, challenge: &str) -> Option<Secret> {
            self.renewals
                .lock()
                .unwrap()
                .push((rejected.map(|s| s.expose().to_owned()), status, challenge.to_owned()));
            self.renewed.map(Secret::new)
        }
        fn accepted(&self) {
            self.accepted.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn unauthorized() -> HttpResult {
        Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            "Bearer resource_metadata=\"http://x/prm\"".into(),
        )))
    }

    #[tokio::test]
    async fn a_401_is_renewed_once_and_retried_once() {
        let source = Fake::new(Some("old"), Some("new"));
        let sent = Mutex::new(Vec::new());
        let result = send_with_bearer(&source, |token| {
            sent.lock().unwrap().push(token.clone());
            async move {
                if token.as_deref() == Some("new") {
                    Ok("ok")
                } else {
                    unauthorized()
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), "ok");
        assert_eq!(
            *sent.lock().unwrap(),
            vec![Some("old".to_owned()), Some("new".to_owned())]
        );
        let renewals = source.renewals.lock().unwrap().clone();
        assert_eq!(renewals.len(), 1);
        assert_eq!(renewals[0].0.as_deref(), Some("old"));
        assert_eq!(renewals[0].1, 401);
        assert!(renewals[0].2.contains("resource_metadata"));
        assert_eq!(source.accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_second_refusal_is_final_and_no_renewal_means_the_first_error() {
        let source = Fake::new(None, Some("new"));
        let calls = AtomicUsize::new(0);
        let result = send_with_bearer(&source, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { unauthorized() }
        })
        .await;
        assert!(matches!(result, Err(StreamableHttpError::AuthRequired(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 2, "one retry, never a loop");
        assert_eq!(source.accepted.load(Ordering::SeqCst), 0);

        let source = Fake::new(Some("t"), None);
        let calls = AtomicUsize::new(0);
        let result = send_with_bearer(&source, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                Err::<&'static str, _>(StreamableHttpError::<std::io::Error>::InsufficientScope(
                    InsufficientScopeError::new("Bearer error=\"insufficient_scope\"".into(), None),
                ))
            }
        })
        .await;
        assert!(matches!(result, Err(StreamableHttpError::InsufficientScope(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(source.renewals.lock().unwrap()[0].1, 403);
    }

    #[tokio::test]
    async fn other_outcomes_pass_through_untouched() {
        let source = Fake::new(Some("t"), Some("n"));
        let result: HttpResult =
            send_with_bearer(&source, |_| async { Err(StreamableHttpError::SessionExpired) }).await;
        assert!(matches!(result, Err(StreamableHttpError::SessionExpired)));
        assert!(source.renewals.lock().unwrap().is_empty());
    }
}
