//! The resources whose changes are wanted from each server: on a 2026-07-28 server there is no
//! `resources/subscribe`, so the URIs go in the `resourceSubscriptions` of the connection's one
//! `subscriptions/listen` stream, which is opened again whenever the set changes (`server/discovery.rs`). Kept per
//! server name, so a reconnected server's stream asks for the same URIs.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;

#[derive(Default)]
pub(crate) struct ResourceInterest {
    by_server: Mutex<HashMap<String, watch::Sender<BTreeSet<String>>>>,
}

impl ResourceInterest {
    /// The URIs wanted from `server`, and their changes.
    pub(crate) fn watch(&self, server: &str) -> watch::Receiver<BTreeSet<String>> {
        self.lock()
            .entry(server.to_owned())
            .or_insert_with(|| watch::channel(BTreeSet::new()).0)
            .subscribe()
    }

    pub(crate) fn add(&self, server: &str, uri: &str) {
        let mut by_server = self.lock();
        let sender = by_server
            .entry(server.to_owned())
            .or_insert_with(|| watch::channel(BTreeSet::new()).0);
        sender.send_if_modified(|uris| uris.insert(uri.to_owned()));
    }

    pub(crate) fn remove(&self, server: &str, uri: &str) {
        if let Some(sender) = self.lock().get(server) {
            sender.send_if_modified(|uris| uris.remove(uri));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<BTreeSet<String>>>> {
        self.by_server.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
