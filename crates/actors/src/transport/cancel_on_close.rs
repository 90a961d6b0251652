//! A client transport wrapper that, when the connection is closed, first sends `notifications/cancelled` for every
//! request still waiting for its answer, then closes the inner transport; and that drops answers to requests we never
//! sent, already cancelled, or abandoned (a `server/discover` probe once the `initialize` fallback goes out: its late
//! answer must never be taken for the answer to `initialize`).
//!
//! Why: an rmcp server (and any server that finishes in-flight work before exiting) treats stdin EOF as "finish what
//! is running, then exit". A 2026-07-28 `subscriptions/listen` request never finishes on its own — it is a stream
//! that ends only when the client cancels it — so without the cancellation an rmcp 3.11 server keeps running for its
//! 5 s drain after EOF, and our bounded close had to fall through to SIGTERM. Requests abandoned by the close (a
//! long `tools/call`) are cancelled the same way, as the protocol asks of a client that stops waiting.

use std::borrow::Cow;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, ClientRequest,
    JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;

/// Upper bound for writing all cancellations at close (a server that stopped reading must not delay the close).
const CANCEL_WRITE_LIMIT: Duration = Duration::from_millis(500);
/// The `reason` sent with each cancellation.
const REASON: &str = "the client is closing the connection";

/// See the module docs. Ids are tracked from the requests we send until their response or error arrives, or until a
/// cancellation of ours for them has been written.
pub(crate) struct CancelOnClose<T> {
    inner: T,
    pending: Arc<Mutex<HashSet<RequestId>>>,
    /// `server/discover` probes sent and not answered yet.
    probes: Vec<RequestId>,
}

impl<T> CancelOnClose<T> {
    pub(crate) fn new(inner: T) -> Self {
        CancelOnClose {
            inner,
            pending: Arc::default(),
            probes: Vec::new(),
        }
    }
}

fn lock(pending: &Mutex<HashSet<RequestId>>) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

fn cancellation(id: RequestId) -> ClientJsonRpcMessage {
    let notification = CancelledNotification::new(CancelledNotificationParam::new(Some(id), Some(REASON.into())));
    ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(notification))
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for CancelOnClose<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // A cancellation of ours retires its id only once it was written: rmcp runs sends as tasks that are dropped
        // when the service stops, so one queued just before the close may never reach the server.
        let mut retires = None;
        match &item {
            JsonRpcMessage::Request(request) => {
                let mut pending = lock(&self.pending);
                match &request.request {
                    ClientRequest::DiscoverRequest(_) => self.probes.push(request.id.clone()),
                    // rmcp's `auto` lifecycle gave up on the probe: an answer to it from now on is stale.
                    ClientRequest::InitializeRequest(_) => {
                        for probe in self.probes.drain(..) {
                            if pending.remove(&probe) {
                                tracing::debug!(id = %probe, "server/discover probe abandoned for initialize");
                            }
                        }
                    }
                    _ => {}
                }
                pending.insert(request.id.clone());
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification {
                    retires = c.params.request_id.clone();
                }
            }
            _ => {}
        }
        let pending = self.pending.clone();
        let fut = self.inner.send(item);
        async move {
            let result = fut.await;
            if result.is_ok()
                && let Some(id) = retires
            {
                lock(&pending).remove(&id);
            }
            result
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        let pending = self.pending.clone();
        let inner = &mut self.inner;
        async move {
            loop {
                let message = inner.receive().await;
                let answered = match &message {
                    Some(JsonRpcMessage::Response(r)) => Some(&r.id),
                    Some(JsonRpcMessage::Error(e)) => e.id.as_ref(),
                    _ => None,
                };
                if let Some(id) = answered
                    && !lock(&pending).remove(id)
                {
                    // An answer to nothing we asked (a stray line before `initialize`, a late answer to a request
                    // we cancelled): rmcp's handshake would take it for a broken initialize answer.
                    tracing::debug!(%id, "dropping an answer to no request of ours");
                    continue;
                }
                return message;
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let mut ids: Vec<RequestId> = lock(&self.pending).drain().collect();
        ids.sort_by_key(ToString::to_string);
        cancel_then_close(&mut self.inner, ids.into_iter().map(cancellation))
    }
}

/// Writes `cancellations` through `transport` (all of them within [`CANCEL_WRITE_LIMIT`]; stops at the first that
/// fails), then closes it.
async fn cancel_then_close<T: Transport<RoleClient>>(
    transport: &mut T,
    cancellations: impl IntoIterator<Item = ClientJsonRpcMessage>,
) -> Result<(), T::Error> {
    let deadline = tokio::time::Instant::now() + CANCEL_WRITE_LIMIT;
    for message in cancellations {
        match tokio::time::timeout_at(deadline, transport.send(message)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => break,
            Err(_) => {
                tracing::debug!("cancellations at close were not written within {CANCEL_WRITE_LIMIT:?}");
                break;
            }
        }
    }
    transport.close().await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rmcp::model::{PingRequest, ServerResult};

    /// Records what was sent; `receive` hands out a scripted message list.
    #[derive(Default)]
    struct Recorder {
        sent: Arc<Mutex<Vec<ClientJsonRpcMessage>>>,
        inbox: Vec<ServerJsonRpcMessage>,
        /// How many messages had been sent when `close` was called.
        closed_after: Arc<Mutex<Option<usize>>>,
    }

    impl Transport<RoleClient> for Recorder {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: ClientJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let sent = self.sent.clone();
            async move {
                sent.lock().unwrap().push(item);
                Ok(())
            }
        }

        fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
            let next = (!self.inbox.is_empty()).then(|| self.inbox.remove(0));
            async move { next }
        }

        fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
            let (sent, closed_after) = (self.sent.clone(), self.closed_after.clone());
            async move {
                let n = sent.lock().unwrap().len();
                *closed_after.lock().unwrap() = Some(n);
                Ok(())
            }
        }
    }

    fn ping(id: i64) -> ClientJsonRpcMessage {
        ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(PingRequest::default()),
            RequestId::Number(id),
        )
    }

    fn cancelled_ids(sent: &[ClientJsonRpcMessage]) -> Vec<RequestId> {
        sent.iter()
            .filter_map(|m| match m {
                JsonRpcMessage::Notification(n) => match &n.notification {
                    ClientNotification::CancelledNotification(c) => c.params.request_id.clone(),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn close_cancels_exactly_the_unanswered_requests_then_closes() {
        let recorder = Recorder {
            inbox: vec![ServerJsonRpcMessage::response(
                ServerResult::empty(()),
                RequestId::Number(1),
            )],
            ..Recorder::default()
        };
        let (sent, closed_after) = (recorder.sent.clone(), recorder.closed_after.clone());
        let mut t = CancelOnClose::new(recorder);
        for id in 1..=4 {
            t.send(ping(id)).await.unwrap();
        }
        // 1 is answered; 3 is cancelled by the client itself before the close.
        assert!(t.receive().await.is_some());
        t.send(cancellation(RequestId::Number(3))).await.unwrap();
        t.close().await.unwrap();
        // 4 pings, our own cancellation of 3, then the two cancellations, and only then the close.
        assert_eq!(*closed_after.lock().unwrap(), Some(7));
        let cancelled = cancelled_ids(&sent.lock().unwrap());
        assert_eq!(
            cancelled,
            vec![RequestId::Number(3), RequestId::Number(2), RequestId::Number(4)]
        );
        // Nothing is left for a second close.
        t.close().await.unwrap();
        assert_eq!(cancelled_ids(&sent.lock().unwrap()).len(), 3);
    }

    #[tokio::test]
    async fn a_late_answer_to_an_abandoned_discover_probe_is_dropped() {
        use rmcp::model::{DiscoverRequest, DiscoverRequestParams, InitializeRequest, InitializeRequestParams};
        let recorder = Recorder {
            // The probe's answer arrives after the fallback went out, then initialize's own answer.
            inbox: vec![
                ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(0)),
                ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(1)),
            ],
            ..Recorder::default()
        };
        let mut t = CancelOnClose::new(recorder);
        let probe = ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {}));
        t.send(ClientJsonRpcMessage::request(probe, RequestId::Number(0)))
            .await
            .unwrap();
        let init = ClientRequest::InitializeRequest(InitializeRequest::new(InitializeRequestParams::default()));
        t.send(ClientJsonRpcMessage::request(init, RequestId::Number(1)))
            .await
            .unwrap();
        // The late probe answer is dropped; initialize's answer comes through.
        let Some(JsonRpcMessage::Response(answer)) = t.receive().await else {
            panic!("expected initialize's answer");
        };
        assert_eq!(answer.id, RequestId::Number(1));
        assert!(lock(&t.pending).is_empty());
    }
}
