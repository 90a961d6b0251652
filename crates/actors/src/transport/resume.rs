//! Streamable HTTP session bookkeeping and resume: a thin [`StreamableHttpClient`] over the shared reqwest
//! client that records the `Mcp-Session-Id` and `initialize` result, and can re-adopt a previous session.
//!
//! rmcp's stock worker always starts with `initialize`. To resume, this client answers that first `initialize`
//! itself with the remembered result and session id (and swallows the following `notifications/initialized`), so
//! the worker carries on inside the old session. If the server forgot the session, the next request gets 404; the
//! worker then re-runs the real `initialize` (which this client passes through) and retries the request once —
//! rmcp's own re-init-on-404 path — so a failed resume costs one round trip and is invisible to callers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, InitializeResult, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde::{Deserialize, Serialize};

/// How long a POST that carries no request (a notification, or our answer to a server request) may take.
pub(crate) const NON_REQUEST_POST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What re-adopts a Streamable HTTP session on a later connect: the session id, the URL it belongs to, and the
/// server's `initialize` result. Opaque to the caller; serializable so it can outlive a process.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionResume {
    pub session_id: String,
    pub url: String,
    initialize_result: serde_json::Value,
}

impl std::fmt::Debug for SessionResume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A session id is a bearer-like capability on some servers: never print it.
        f.debug_struct("SessionResume")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Inner {
    /// A session to re-adopt at the next `initialize`.
    pending: Option<(String, InitializeResult)>,
    swallow_initialized: bool,
    resume_applied: bool,
    /// The resumed session was rejected (404) and the transport re-initialized.
    resume_rejected: bool,
    current_session: Option<String>,
    initialize_result: Option<serde_json::Value>,
    keep_session: bool,
}

/// Shared between the client clones inside rmcp's worker and the [`super::Connection`].
pub(crate) struct SessionState {
    url: String,
    inner: Mutex<Inner>,
}

impl SessionState {
    pub(super) fn new(url: &str, resume: Option<SessionResume>) -> Arc<SessionState> {
        let mut inner = Inner::default();
        if let Some(r) = resume.filter(|r| r.url == url)
            && let Ok(result) = serde_json::from_value::<InitializeResult>(r.initialize_result.clone())
        {
            inner.pending = Some((r.session_id, result));
        }
        Arc::new(SessionState {
            url: url.to_owned(),
            inner: Mutex::new(inner),
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> Option<T> {
        self.inner.lock().ok().map(|mut g| f(&mut g))
    }

    pub(super) fn current_session(&self) -> Option<String> {
        self.with(|i| i.current_session.clone()).flatten()
    }

    /// True when the remembered session was re-adopted and not rejected.
    pub(super) fn resumed(&self) -> bool {
        self.with(|i| i.resume_applied && !i.resume_rejected).unwrap_or(false)
    }

    pub(super) fn resume_token(&self) -> Option<SessionResume> {
        self.with(|i| {
            Some(SessionResume {
                session_id: i.current_session.clone()?,
                url: self.url.clone(),
                initialize_result: i.initialize_result.clone()?,
            })
        })
        .flatten()
    }

    /// The latest `initialize` result seen (resumed or real).
    pub(super) fn initialize_result(&self) -> Option<InitializeResult> {
        let value = self.with(|i| i.initialize_result.clone()).flatten()?;
        serde_json::from_value(value).ok()
    }

    pub(super) fn keep_session_on_close(&self) {
        self.with(|i| i.keep_session = true);
    }
}

/// The reqwest client with session bookkeeping; what rmcp's Streamable HTTP worker talks through. With an `auth`
/// source every request carries its current bearer token, and a 401 / 403 `insufficient_scope` is renewed and
/// retried once.
#[derive(Clone)]
pub(crate) struct SessionClient {
    pub http: reqwest::Client,
    pub state: Arc<SessionState>,
    pub auth: Option<Arc<dyn crate::auth::TokenSource>>,
}

fn is_initialize(message: &ClientJsonRpcMessage) -> Option<rmcp::model::RequestId> {
    match message {
        ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_)) => {
            Some(r.id.clone())
        }
        _ => None,
    }
}

fn is_initialized_notification(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Notification(n) if matches!(n.notification, ClientNotification::InitializedNotification(_)))
}

fn init_result_of(message: &ServerJsonRpcMessage) -> Option<serde_json::Value> {
    match message {
        ServerJsonRpcMessage::Response(r) => match &r.result {
            ServerResult::InitializeResult(result) => serde_json::to_value(result).ok(),
            _ => None,
        },
        _ => None,
    }
}

impl StreamableHttpClient for SessionClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let init_id = is_initialize(&message);
        if let Some(id) = &init_id
            && let Some((sid, result)) = self
                .state
                .with(|i| {
                    let p = i.pending.take();
                    if p.is_some() {
                        i.swallow_initialized = true;
                        i.resume_applied = true;
                    }
                    p
                })
                .flatten()
        {
            let value = serde_json::to_value(&result).ok();
            self.state.with(|i| {
                i.current_session = Some(sid.clone());
                i.initialize_result = value;
            });
            let reply = ServerJsonRpcMessage::response(ServerResult::InitializeResult(result), id.clone());
            return Ok(StreamableHttpPostResponse::Json(reply, Some(sid)));
        }
        if is_initialized_notification(&message)
            && self
                .state
                .with(|i| std::mem::take(&mut i.swallow_initialized))
                .unwrap_or(false)
        {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if init_id.is_some() {
            self.state.with(|i| {
                if i.resume_applied {
                    i.resume_rejected = true;
                }
            });
        }
        // A request's POST may legitimately stay open as long as the call runs (its timeout and cancellation end
        // it). A notification or a response POST is answered with 202 at once; bound it (the shared client has no
        // overall timeout), so a silent network path cannot hold rmcp's worker on it forever.
        let bounded = !matches!(message, ClientJsonRpcMessage::Request(_));
        let send = async {
            match &self.auth {
                None => {
                    self.http
                        .post_message_with_response_limits(
                            uri,
                            message,
                            session_id,
                            auth_header,
                            custom_headers,
                            limits,
                        )
                        .await
                }
                Some(source) => {
                    crate::auth::send_with_bearer(source.as_ref(), |token| {
                        self.http.post_message_with_response_limits(
                            uri.clone(),
                            message.clone(),
                            session_id.clone(),
                            token,
                            custom_headers.clone(),
                            limits,
                        )
                    })
                    .await
                }
            }
        };
        let response = if bounded {
            match tokio::time::timeout(NON_REQUEST_POST_TIMEOUT, send).await {
                Ok(r) => r,
                Err(_) => Err(StreamableHttpError::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the server did not accept a notification within {}",
                        crate::error::fmt_duration(NON_REQUEST_POST_TIMEOUT)
                    ),
                ))),
            }
        } else {
            send.await
        };
        if init_id.is_none() {
            return response;
        }
        match response {
            Ok(StreamableHttpPostResponse::Json(msg, sid)) => {
                let value = init_result_of(&msg);
                self.state.with(|i| {
                    i.current_session.clone_from(&sid);
                    if value.is_some() {
                        i.initialize_result = value;
                    }
                });
                Ok(StreamableHttpPostResponse::Json(msg, sid))
            }
            Ok(StreamableHttpPostResponse::Sse(stream, sid)) => {
                self.state.with(|i| i.current_session.clone_from(&sid));
                let state = self.state.clone();
                let stream = stream
                    .inspect(move |event| {
                        if let Ok(event) = event
                            && let Some(data) = &event.data
                            && let Ok(msg) = serde_json::from_str::<ServerJsonRpcMessage>(data)
                            && let Some(value) = init_result_of(&msg)
                        {
                            state.with(|i| i.initialize_result = Some(value));
                        }
                    })
                    .boxed();
                Ok(StreamableHttpPostResponse::Sse(stream, sid))
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        if self.state.with(|i| i.keep_session).unwrap_or(false) {
            return Ok(());
        }
        let auth_header = match &self.auth {
            Some(source) => source.bearer().await.map(|t| t.expose().to_owned()),
            None => auth_header,
        };
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        match &self.auth {
            None => {
                self.http
                    .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
                    .await
            }
            Some(source) => {
                crate::auth::send_with_bearer(source.as_ref(), |token| {
                    self.http.get_stream(
                        uri.clone(),
                        session_id.clone(),
                        last_event_id.clone(),
                        token,
                        custom_headers.clone(),
                    )
                })
                .await
            }
        }
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        match &self.auth {
            None => {
                self.http
                    .get_stream_with_max_sse_event_size(
                        uri,
                        session_id,
                        last_event_id,
                        auth_header,
                        custom_headers,
                        max_sse_event_size,
                    )
                    .await
            }
            Some(source) => {
                crate::auth::send_with_bearer(source.as_ref(), |token| {
                    self.http.get_stream_with_max_sse_event_size(
                        uri.clone(),
                        session_id.clone(),
                        last_event_id.clone(),
                        token,
                        custom_headers.clone(),
                        max_sse_event_size,
                    )
                })
                .await
            }
        }
    }
}
