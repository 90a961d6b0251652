//! Host resource subscriptions through `pimcp-run` (`resources/subscribe` / `resources/unsubscribe`, the
//! initialize era): a URI is subscribed upstream, on the server that lists it or whose template matches it, once
//! for all the host sessions that asked; the server's `notifications/resources/updated` for it go to those sessions.
//! A server that restarts forgets its subscriptions, so they are made again each time it becomes ready. The last
//! session to unsubscribe (or to go away) ends the upstream subscription.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use pimcp_actors::{RuntimeEvent, ServerNotice, ServerState};
use rmcp::RoleServer;
use rmcp::model::{InitializeRequestParams, ResourceUpdatedNotificationParam};
use rmcp::service::Peer;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::facade::Proxy;
use crate::text::{Category, ProxyError};

/// Subscribed URIs and who asked. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct ResourceSubs {
    by_uri: Arc<Mutex<BTreeMap<String, Subscription>>>,
}

struct Subscription {
    server: String,
    sessions: Vec<Session>,
}

struct Session {
    /// The session's identity: its initialize parameters, shared by every clone of its peer.
    info: Arc<InitializeRequestParams>,
    peer: Peer<RoleServer>,
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
        let first = {
            let mut by_uri = self.lock();
            let sub = by_uri.entry(uri.to_owned()).or_insert_with(|| Subscription {
                server: server.clone(),
                sessions: Vec::new(),
            });
            sub.sessions.retain(|s| !s.peer.is_transport_closed());
            let first = sub.sessions.is_empty();
            if !sub.sessions.iter().any(|s| Arc::ptr_eq(&s.info, &info)) {
                sub.sessions.push(Session {
                    info,
                    peer: peer.clone(),
                });
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
        let server = {
            let mut by_uri = self.lock();
            let Some(sub) = by_uri.get_mut(uri) else {
                return;
            };
            sub.sessions
                .retain(|s| !s.peer.is_transport_closed() && !info.as_ref().is_some_and(|i| Arc::ptr_eq(&s.info, i)));
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
        let peers: Vec<Peer<RoleServer>> = {
            let mut by_uri = self.lock();
            let Some(sub) = by_uri.get_mut(uri).filter(|s| s.server == server) else {
                return;
            };
            sub.sessions.retain(|s| !s.peer.is_transport_closed());
            sub.sessions.iter().map(|s| s.peer.clone()).collect()
        };
        for peer in peers {
            if let Err(e) = peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
            {
                tracing::debug!(error = %e, "a host session did not take a resource update");
            }
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
