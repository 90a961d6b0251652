//! Host resource subscriptions through `pimcp-run`: `resources/subscribe` / `resources/unsubscribe` of
//! initialize-era sessions, and the `resourceSubscriptions` of 2026-07-28 hosts' `subscriptions/listen` streams. A
//! URI is subscribed upstream, on the server that lists it or whose template matches it, once for all the sessions
//! and streams that asked; the server's `notifications/resources/updated` for it go to each of them. A server that
//! restarts forgets its subscriptions, so they are made again each time it becomes ready. The last session to
//! unsubscribe (or to go away, or the last stream to end) ends the upstream subscription.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use pimcp_actors::{RuntimeEvent, ServerNotice, ServerState};
use pimcp_surface::{Category, ProxyError};
use rmcp::RoleServer;
use rmcp::model::{InitializeRequestParams, ResourceUpdatedNotificationParam};
use rmcp::service::{Peer, SubscriptionSink};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::facade::Proxy;

/// Subscribed URIs and who asked. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct ResourceSubs {
    by_uri: Arc<Mutex<BTreeMap<String, Subscription>>>,
}

struct Subscription {
    server: String,
    sessions: Vec<Subscriber>,
}

/// Who gets a URI's updates.
#[derive(Clone)]
enum Subscriber {
    /// An initialize-era session; its identity is its initialize parameters, shared by every clone of its peer.
    Session {
        info: Arc<InitializeRequestParams>,
        peer: Peer<RoleServer>,
    },
    /// A 2026-07-28 host's `subscriptions/listen` stream, by the key its `listen` was given.
    Stream { key: u64, sink: SubscriptionSink },
}

impl Subscriber {
    fn is_closed(&self) -> bool {
        match self {
            Subscriber::Session { peer, .. } => peer.is_transport_closed(),
            Subscriber::Stream { .. } => false,
        }
    }

    fn is_session(&self, info: &Arc<InitializeRequestParams>) -> bool {
        matches!(self, Subscriber::Session { info: mine, .. } if Arc::ptr_eq(mine, info))
    }

    fn is_stream(&self, key: u64) -> bool {
        matches!(self, Subscriber::Stream { key: mine, .. } if *mine == key)
    }

    async fn notify(&self, uri: &str) {
        let sent = match self {
            Subscriber::Session { peer, .. } => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .map_err(|e| e.to_string()),
            Subscriber::Stream { sink, .. } => sink.notify_resource_updated(uri).await.map_err(|e| e.to_string()),
        };
        if let Err(e) = sent {
            tracing::debug!(error = %e, "a host session did not take a resource update");
        }
    }
}

impl ResourceSubs {
    /// Starts relaying updates (and re-subscribing restarted servers) until `stop` is cancelled.
    pub(crate) fn start(proxy: &Proxy, stop: CancellationToken) -> ResourceSubs {
        let subs = ResourceSubs::default();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return subs;
        };
        let runtime = proxy.runtime().clone();
        let mut notices = runtime.server_notices();
        let mut events = runtime.events();
        let relay = subs.clone();
        handle.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    notice = notices.recv() => match notice {
                        Ok(ServerNotice::ResourceUpdated { server, uri }) => relay.updated(&server, &uri).await,
                        Ok(_) => {}
                        Err(RecvError::Lagged(n)) => tracing::debug!(skipped = n, "resource updates skipped"),
                        Err(RecvError::Closed) => return,
                    },
                    event = events.recv() => match event {
                        Ok(RuntimeEvent::State { server, state: ServerState::Ready, .. }) => {
                            for uri in relay.uris_of(&server) {
                                if let Err(e) = runtime.subscribe_resource(&server, &uri).await {
                                    tracing::warn!(%server, %uri, error = %e, "re-subscribing a resource failed");
                                }
                            }
                        }
                        Ok(_) | Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => return,
                    },
                }
            }
        });
        subs
    }

    /// `resources/subscribe` from `peer`. The first session to subscribe a URI subscribes it upstream.
    pub(crate) async fn subscribe(&self, proxy: &Proxy, peer: &Peer<RoleServer>, uri: &str) -> Result<(), ProxyError> {
        let Some(server) = proxy.resource_server(uri) else {
            return Err(ProxyError::new(
                Category::UnknownTool,
                format!("resource {uri:?} is not listed by any server, nor matched by a resource template."),
            ));
        };
        let Some(info) = peer.peer_info() else {
            return Err(ProxyError::new(
                Category::Validation,
                "resources/subscribe needs a session (the initialize era); this request has none.",
            ));
        };
        let subscriber = Subscriber::Session {
            info: info.clone(),
            peer: peer.clone(),
        };
        self.add(proxy, server, uri, subscriber, |s| s.is_session(&info)).await
    }

    /// The `resourceSubscriptions` of a 2026-07-28 host's listen stream (`key` names the stream until
    /// [`ResourceSubs::end_stream`]): each URI a server has is subscribed, the others are skipped. Returns the URIs
    /// subscribed.
    pub(crate) async fn subscribe_stream(&self, proxy: &Proxy, key: u64, sink: &SubscriptionSink) -> Vec<String> {
        let mut subscribed = Vec::new();
        for uri in sink.accepted().resource_subscriptions.iter().flatten() {
            let Some(server) = proxy.resource_server(uri) else {
                continue;
            };
            let subscriber = Subscriber::Stream {
                key,
                sink: sink.clone(),
            };
            match self.add(proxy, server, uri, subscriber, |s| s.is_stream(key)).await {
                Ok(()) => subscribed.push(uri.clone()),
                Err(e) => tracing::debug!(%uri, error = %e.text(), "a listen stream's resource was not subscribed"),
            }
        }
        subscribed
    }

    /// The listen stream `key` ended: it leaves every URI it had.
    pub(crate) async fn end_stream(&self, proxy: &Proxy, key: u64, uris: &[String]) {
        for uri in uris {
            self.leave(proxy, uri, |s| s.is_stream(key)).await;
        }
    }

    /// Adds `subscriber` to `uri` (once: `same` finds it); the first one subscribes upstream.
    async fn add(
        &self,
        proxy: &Proxy,
        server: String,
        uri: &str,
        subscriber: Subscriber,
        same: impl Fn(&Subscriber) -> bool,
    ) -> Result<(), ProxyError> {
        let first = {
            let mut by_uri = self.lock();
            let sub = by_uri.entry(uri.to_owned()).or_insert_with(|| Subscription {
                server: server.clone(),
                sessions: Vec::new(),
            });
            sub.sessions.retain(|s| !s.is_closed());
            let first = sub.sessions.is_empty();
            if !sub.sessions.iter().any(&same) {
                sub.sessions.push(subscriber);
            }
            first
        };
        if first && let Err(e) = proxy.runtime().subscribe_resource(&server, uri).await {
            self.lock().remove(uri);
            return Err(proxy.runtime_error(e, Some(&server)));
        }
        Ok(())
    }

    /// `resources/unsubscribe` from `peer`. The last session to leave a URI unsubscribes it upstream.
    pub(crate) async fn unsubscribe(&self, proxy: &Proxy, peer: &Peer<RoleServer>, uri: &str) {
        let info = peer.peer_info();
        self.leave(proxy, uri, |s| info.as_ref().is_some_and(|i| s.is_session(i)))
            .await;
    }

    /// Removes the subscribers `which` finds from `uri`; the last one to go unsubscribes upstream.
    async fn leave(&self, proxy: &Proxy, uri: &str, which: impl Fn(&Subscriber) -> bool) {
        let server = {
            let mut by_uri = self.lock();
            let Some(sub) = by_uri.get_mut(uri) else {
                return;
            };
            sub.sessions.retain(|s| !s.is_closed() && !which(s));
            if !sub.sessions.is_empty() {
                return;
            }
            let server = sub.server.clone();
            by_uri.remove(uri);
            server
        };
        if let Err(e) = proxy.runtime().unsubscribe_resource(&server, uri).await {
            tracing::debug!(%server, %uri, error = %e, "unsubscribing a resource failed");
        }
    }

    /// Sends `notifications/resources/updated` to the sessions subscribed to `uri` on `server`.
    async fn updated(&self, server: &str, uri: &str) {
        let targets: Vec<Subscriber> = {
            let mut by_uri = self.lock();
            let Some(sub) = by_uri.get_mut(uri).filter(|s| s.server == server) else {
                return;
            };
            sub.sessions.retain(|s| !s.is_closed());
            sub.sessions.clone()
        };
        for target in targets {
            target.notify(uri).await;
        }
    }

    fn uris_of(&self, server: &str) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, s)| s.server == server)
            .map(|(uri, _)| uri.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Subscription>> {
        self.by_uri.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
