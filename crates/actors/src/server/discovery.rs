//! Discovery of a server's lists (tools, resources and templates, prompts): the background discovery of a
//! connection that became ready early on cached metadata, `list_changed` (including 2026-07-28's
//! `subscriptions/listen`) and its debounced refresh, and turning lists into [`ServerMetadata`].

use std::sync::Arc;

use ractor::ActorRef;
use ractor::concurrency::JoinHandle;
use rmcp::RoleClient;
use rmcp::service::{Peer, ServiceError};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::{MetadataSource, ServerMetadata};
use crate::client::RuntimeClient;
use crate::error::{Error, ErrorCategory};
use crate::msg::{ListKind, ServerRequest};
use crate::transport::{Connection, Era, TransportKind};

use super::{ServerActor, ServerActorState, ServerMsg, Waiter};

/// Lists fetched from a server. `None` for resources/prompts: not advertised or listing failed (tolerated).
#[derive(Debug, Clone, Default)]
pub(crate) struct Discovery {
    tools: Option<(Vec<rmcp::model::Tool>, Option<u64>)>,
    resources: Option<Vec<rmcp::model::Resource>>,
    resource_templates: Option<Vec<rmcp::model::ResourceTemplate>>,
    prompts: Option<Vec<rmcp::model::Prompt>>,
}

impl ServerActor {
    /// Runs the first discovery of a connection that became ready early; `Discovered` follows.
    ///
    /// It first waits (at most `Tuning::discovery_after_calls_max`) for `calls`, the calls that were queued for this
    /// connection: they are why it was started, and an upstream handles requests concurrently, so lists sent beside a
    /// call delay its answer. Against server-everything a first call sent with the three lists was answered after them,
    /// ~20 ms after `initialize` instead of ~11 ms alone (docs/benchmarks.md, "the first call with a cache goes before
    /// the lists").
    pub(super) fn spawn_discovery(myself: &ActorRef<ServerMsg>, st: &ServerActorState, calls: Vec<JoinHandle<()>>) {
        let Some(live) = &st.live else { return };
        let peer = live.peer.clone();
        let caps = live.conn.capabilities.clone();
        let concurrent = lists_concurrently(live.conn.transport);
        let stop = live.watch_stop.clone();
        let timeout = st.cfg.timeouts.request;
        let generation = st.generation;
        let me = myself.clone();
        let span = tracing::info_span!("discover", server = %st.cfg.name, generation);
        let after_calls = st.shared.tuning.discovery_after_calls_max;
        tokio::spawn(
            async move {
                if !calls.is_empty() {
                    tokio::select! {
                        _ = tokio::time::timeout(after_calls, futures::future::join_all(calls)) => {}
                        _ = stop.cancelled() => return,
                    }
                }
                let all = [ListKind::Tools, ListKind::Resources, ListKind::Prompts];
                let result = tokio::select! {
                    r = tokio::time::timeout(timeout, discover(&peer, &caps, &all, concurrent)) => match r {
                        Ok(r) => r.map(Box::new),
                        Err(_) => Err(format!(
                            "discovery took longer than {}",
                            crate::error::fmt_duration(timeout)
                        )),
                    },
                    _ = stop.cancelled() => return,
                };
                let _ = me.send_message(ServerMsg::Discovered { generation, result });
            }
            .instrument(span),
        );
    }

    /// The background discovery of an early-ready connection finished: its lists replace the cached ones (the
    /// catalog and cache update as after `list_changed`); a failure keeps the cached catalog.
    pub(super) fn on_discovered(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        generation: u64,
        result: std::result::Result<Box<Discovery>, String>,
    ) {
        if generation != st.generation || !st.discovering {
            return;
        }
        let Some(live) = &st.live else { return };
        st.discovering = false;
        match result {
            Ok(d) => {
                let meta = discovered_metadata(st.metadata.as_ref().map(|(m, _)| m.as_ref()), *d, &live.conn);
                st.metadata = Some((Arc::new(meta), MetadataSource::Live));
                Self::publish_status(st);
                Self::publish_metadata(st);
                Self::write_cache(st);
                Self::serve_waiters(myself, st);
            }
            Err(e) => {
                let server = st.cfg.name.clone();
                tracing::info!(%server, error = %e, "discovery failed; keeping the cached catalog");
                let message = format!("discovery failed: {e}");
                st.last_error = Some((ErrorCategory::Connection, message.clone()));
                Self::publish_status(st);
                let waiters = std::mem::take(&mut st.waiters);
                for w in waiters {
                    match w {
                        Waiter::Ready(reply) => {
                            let _ = reply.send(Err(Error::Connection {
                                server: server.clone(),
                                message: message.clone(),
                                source: None,
                            }));
                        }
                        w @ Waiter::Call(..) => st.waiters.push(w),
                    }
                }
            }
        }
        if !st.refresh_dirty.is_empty() {
            Self::schedule_refresh(myself, st);
        }
    }

    /// [`ServerRequest::ListChanged`]: marks the list dirty for a debounced refresh.
    pub(super) fn on_list_changed(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        generation: u64,
        kind: ListKind,
    ) {
        if generation != st.generation || st.live.is_none() {
            return;
        }
        if !st.refresh_dirty.contains(&kind) {
            st.refresh_dirty.push(kind);
        }
        Self::schedule_refresh(myself, st);
    }

    /// [`ServerMsg::RefreshLists`]: refetches the dirty lists in a task; `ListsRefreshed` follows.
    pub(super) fn on_refresh_lists(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState, generation: u64) {
        st.refresh_scheduled = false;
        // While the first discovery runs, the dirty kinds wait: `Discovered` schedules them again.
        if generation != st.generation || st.refresh_running || st.discovering {
            return;
        }
        let Some(live) = &st.live else { return };
        let kinds = std::mem::take(&mut st.refresh_dirty);
        if kinds.is_empty() {
            return;
        }
        st.refresh_running = true;
        let peer = live.peer.clone();
        let caps = live.conn.capabilities.clone();
        let concurrent = lists_concurrently(live.conn.transport);
        let timeout = st.cfg.timeouts.request;
        let me = myself.clone();
        tokio::spawn(async move {
            let result = match tokio::time::timeout(timeout, discover(&peer, &caps, &kinds, concurrent)).await {
                Ok(r) => r.map(Box::new),
                Err(_) => Err(format!(
                    "refreshing lists took longer than {}",
                    crate::error::fmt_duration(timeout)
                )),
            };
            let _ = me.send_message(ServerMsg::ListsRefreshed { generation, result });
        });
    }

    /// [`ServerMsg::ListsRefreshed`]: the catalog and cache take the new lists; a failure keeps the old ones.
    pub(super) fn on_lists_refreshed(
        myself: &ActorRef<ServerMsg>,
        st: &mut ServerActorState,
        generation: u64,
        result: std::result::Result<Box<Discovery>, String>,
    ) {
        st.refresh_running = false;
        if generation != st.generation || st.live.is_none() {
            return;
        }
        match result {
            Ok(d) => {
                if let Some((meta, _)) = &mut st.metadata {
                    apply_discovery(Arc::make_mut(meta), *d);
                }
                Self::publish_metadata(st);
                Self::write_cache(st);
                Self::publish_status(st);
            }
            Err(e) => tracing::info!(server = %st.cfg.name, error = %e, "refresh after list_changed failed"),
        }
        if !st.refresh_dirty.is_empty() {
            Self::schedule_refresh(myself, st);
        }
    }

    fn schedule_refresh(myself: &ActorRef<ServerMsg>, st: &mut ServerActorState) {
        if st.refresh_scheduled || st.refresh_running {
            return;
        }
        st.refresh_scheduled = true;
        let generation = st.generation;
        let debounce = st
            .shared
            .tuning
            .list_changed_debounce
            .max(crate::policy::Tuning::MIN_LIST_CHANGED_DEBOUNCE);
        myself.send_after(debounce, move || ServerMsg::RefreshLists { generation });
    }
}

/// A fresh value from a connection's discovery: it replaces the tools; resources and prompts it did not list
/// (listing failed, tolerated) keep `old`'s lists. Only those lists are copied, never the tools.
pub(super) fn discovered_metadata(
    old: Option<&ServerMetadata>,
    discovery: Discovery,
    conn: &Connection<RuntimeClient>,
) -> ServerMetadata {
    let mut meta = ServerMetadata::default();
    if let Some(old) = old {
        if discovery.resources.is_none() {
            meta.resources.clone_from(&old.resources);
        }
        if discovery.resource_templates.is_none() {
            meta.resource_templates.clone_from(&old.resource_templates);
        }
        if discovery.prompts.is_none() {
            meta.prompts.clone_from(&old.prompts);
        }
        if discovery.tools.is_none() {
            meta.tools.clone_from(&old.tools);
            meta.ttl_ms = old.ttl_ms;
        }
    }
    apply_discovery(&mut meta, discovery);
    meta.instructions = conn.instructions.clone();
    meta.protocol_version = Some(conn.protocol_version.clone());
    meta.era = Some(era_name(conn.era).to_owned());
    meta
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::Stateless => "stateless",
    }
}

fn apply_discovery(meta: &mut ServerMetadata, d: Discovery) {
    if let Some((tools, ttl)) = d.tools {
        meta.tools = tools.into_iter().map(crate::catalog::ToolInfo::from).collect();
        meta.ttl_ms = ttl;
    }
    if let Some(r) = d.resources {
        meta.resources = r.into();
    }
    if let Some(t) = d.resource_templates {
        meta.resource_templates = t.into();
    }
    if let Some(p) = d.prompts {
        meta.prompts = p.into();
    }
}

/// Lists tools (all pages; failure fails), and resources/prompts when advertised (failure tolerated). The three
/// lists are independent, so they are requested at once: a first call waits for the slowest list, not for the sum
/// of three round trips.
/// Over HTTP the lists go one after another: concurrent requests race a server's session expiry (one is re-sent
/// after the re-initialization, the others fail or get HTTP 500 while the server drops the session).
pub(super) fn lists_concurrently(transport: TransportKind) -> bool {
    matches!(transport, TransportKind::Stdio | TransportKind::UnixSocket)
}

pub(super) async fn discover(
    peer: &Peer<RoleClient>,
    caps: &rmcp::model::ServerCapabilities,
    kinds: &[ListKind],
    concurrent: bool,
) -> std::result::Result<Discovery, String> {
    let tools = async {
        if !kinds.contains(&ListKind::Tools) {
            return Ok::<_, String>(None);
        }
        let merged = repeat_once_after_reinit(|| peer.list_all_tools_with_cache_hint())
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        Ok(Some((merged.items, merged.ttl_ms)))
    };
    let resources = async {
        if !kinds.contains(&ListKind::Resources) || caps.resources.is_none() {
            return None;
        }
        repeat_once_after_reinit(|| peer.list_all_resources())
            .await
            .inspect_err(|e| tracing::info!(error = %e, "resources/list failed (tolerated)"))
            .ok()
    };
    let templates = async {
        if !kinds.contains(&ListKind::Resources) || caps.resources.is_none() {
            return None;
        }
        repeat_once_after_reinit(|| peer.list_all_resource_templates())
            .await
            .inspect_err(|e| tracing::info!(error = %e, "resources/templates/list failed (tolerated)"))
            .ok()
    };
    let prompts = async {
        if !kinds.contains(&ListKind::Prompts) || caps.prompts.is_none() {
            return None;
        }
        repeat_once_after_reinit(|| peer.list_all_prompts())
            .await
            .inspect_err(|e| tracing::info!(error = %e, "prompts/list failed (tolerated)"))
            .ok()
    };
    // A failed tools/list fails discovery at once; the other lists still in flight are dropped.
    let (tools, resources, resource_templates, prompts) = if concurrent {
        tokio::try_join!(
            tools,
            async { Ok(resources.await) },
            async { Ok(templates.await) },
            async { Ok(prompts.await) }
        )?
    } else {
        let tools = tools.await?;
        (tools, resources.await, templates.await, prompts.await)
    };
    Ok(Discovery {
        tools,
        resources,
        resource_templates,
        prompts,
    })
}

/// rmcp's Streamable HTTP client fails the requests still in flight when the server expires the session and the
/// client re-initializes (`-32603` with this message), and a request racing the expiry can fail to send (the server
/// answers it with HTTP 500 while it drops the session). A listing is safe to repeat on the new session; a tool
/// call is not, and is never repeated. A send refused for authorization is not repeated either (the OAuth path
/// counts those refusals).
fn lost_to_reinit(e: &ServiceError) -> bool {
    match e {
        ServiceError::McpError(d) => {
            d.code == rmcp::model::ErrorCode::INTERNAL_ERROR
                && d.message
                    .contains("session was re-initialized before the response arrived")
        }
        ServiceError::TransportSend(_) => !e.is_authorization_required(),
        _ => false,
    }
}

/// Runs a list request, once more if its session was re-initialized under it (see [`lost_to_reinit`]).
async fn repeat_once_after_reinit<T, F, Fut>(request: F) -> std::result::Result<T, ServiceError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, ServiceError>>,
{
    match request().await {
        Err(e) if lost_to_reinit(&e) => {
            tracing::debug!(error = %e, "a listing was lost to a session re-initialization; repeating it");
            request().await
        }
        other => other,
    }
}

/// What one connection's `subscriptions/listen` stream needs.
pub(super) struct Listener {
    pub me: ActorRef<ServerMsg>,
    pub generation: u64,
    pub peer: Peer<RoleClient>,
    pub stop: CancellationToken,
    /// The resources whose changes are wanted (`resourceSubscriptions`).
    pub resources: tokio::sync::watch::Receiver<std::collections::BTreeSet<String>>,
    pub board: crate::status::StatusBoard,
    pub server: String,
}

/// 2026-07-28 servers send `list_changed` and `resources/updated` only on a `subscriptions/listen` stream: open one
/// for the advertised lists and the resources wanted from this server, and forward its notifications like the
/// ClientHandler does for initialize-era servers. One stream per connection serves every host session (they share
/// the server's catalog and its resource subscriptions). A stream that ends while the connection lives (a server
/// restarting its event source, a proxy timing the stream out) is opened again with the same filter, after a
/// backoff, and every listed kind is refreshed then: notifications sent while it was closed are not lost. When the
/// wanted resources change, the stream is replaced by one with the new filter.
pub(super) fn spawn_listener(listener: Listener, caps: &rmcp::model::ServerCapabilities) {
    let Listener {
        me,
        generation,
        peer,
        stop,
        mut resources,
        board,
        server,
    } = listener;
    let mut builder = rmcp::model::SubscriptionFilter::builder();
    let mut kinds = Vec::new();
    if caps.tools.as_ref().is_some_and(|t| t.list_changed == Some(true)) {
        builder = builder.tools_list_changed();
        kinds.push(ListKind::Tools);
    }
    if caps.resources.as_ref().is_some_and(|r| r.list_changed == Some(true)) {
        builder = builder.resources_list_changed();
        kinds.push(ListKind::Resources);
    }
    if caps.prompts.as_ref().is_some_and(|p| p.list_changed == Some(true)) {
        builder = builder.prompts_list_changed();
        kinds.push(ListKind::Prompts);
    }
    let subscribable = caps.resources.as_ref().is_some_and(|r| r.subscribe == Some(true));
    if kinds.is_empty() && !subscribable {
        return;
    }
    let lists = builder.build();
    tokio::spawn(async move {
        let mut backoff = LISTEN_REOPEN_MIN;
        let mut reopened = false;
        loop {
            let mut filter = lists.clone();
            let wanted: Vec<String> = if subscribable {
                resources.borrow_and_update().iter().cloned().collect()
            } else {
                Vec::new()
            };
            if kinds.is_empty() && wanted.is_empty() {
                // Nothing to listen for yet: wait until a resource is wanted.
                tokio::select! {
                    changed = resources.changed() => if changed.is_err() { return },
                    _ = stop.cancelled() => return,
                }
                continue;
            }
            if !wanted.is_empty() {
                filter.resource_subscriptions = Some(wanted);
            }
            let opened = tokio::select! {
                r = peer.listen(filter) => r,
                _ = stop.cancelled() => return,
            };
            let mut sub = match opened {
                Ok(s) => s,
                Err(e) if !reopened => {
                    tracing::debug!(error = %e, "subscriptions/listen refused; no list_changed for this connection");
                    return;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reopening subscriptions/listen failed; trying again");
                    if !sleep_or_stop(&stop, &mut backoff).await {
                        return;
                    }
                    continue;
                }
            };
            if reopened {
                // What changed while no stream was open.
                for kind in &kinds {
                    if me
                        .send_message(ServerMsg::from(ServerRequest::ListChanged {
                            generation,
                            kind: *kind,
                        }))
                        .is_err()
                    {
                        return;
                    }
                }
            }
            let mut delivered = false;
            let mut refilter = false;
            loop {
                let next = tokio::select! {
                    n = sub.next() => n,
                    changed = resources.changed(), if subscribable => {
                        if changed.is_err() {
                            return;
                        }
                        refilter = true;
                        let _ = sub.cancel().await;
                        break;
                    }
                    _ = stop.cancelled() => {
                        let _ = sub.cancel().await;
                        return;
                    }
                };
                let kind = match next {
                    Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))) => ListKind::Tools,
                    Ok(Some(rmcp::model::ServerNotification::ResourceListChangedNotification(_))) => {
                        ListKind::Resources
                    }
                    Ok(Some(rmcp::model::ServerNotification::PromptListChangedNotification(_))) => ListKind::Prompts,
                    Ok(Some(rmcp::model::ServerNotification::ResourceUpdatedNotification(n))) => {
                        delivered = true;
                        board.emit_notice(crate::ServerNotice::ResourceUpdated {
                            server: server.clone(),
                            uri: n.params.uri,
                        });
                        continue;
                    }
                    Ok(Some(_)) => continue,
                    Ok(None) | Err(_) => break,
                };
                delivered = true;
                if me
                    .send_message(ServerMsg::from(ServerRequest::ListChanged { generation, kind }))
                    .is_err()
                {
                    return;
                }
            }
            if peer.is_transport_closed() {
                return;
            }
            if refilter {
                tracing::debug!("the wanted resources changed; opening subscriptions/listen with the new filter");
                continue;
            }
            tracing::debug!("the subscriptions/listen stream ended; opening it again");
            reopened = true;
            if delivered {
                backoff = LISTEN_REOPEN_MIN;
            }
            if !sleep_or_stop(&stop, &mut backoff).await {
                return;
            }
        }
    });
}

/// First wait before a `subscriptions/listen` stream that ended is opened again; it doubles up to
/// [`LISTEN_REOPEN_MAX`] while streams keep ending without delivering anything.
const LISTEN_REOPEN_MIN: std::time::Duration = std::time::Duration::from_millis(100);
const LISTEN_REOPEN_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Sleeps `backoff` (then doubles it, bounded); false when `stop` fired first.
async fn sleep_or_stop(stop: &CancellationToken, backoff: &mut std::time::Duration) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(LISTEN_REOPEN_MAX);
    tokio::select! {
        () = tokio::time::sleep(wait) => true,
        _ = stop.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use rmcp::model::ErrorData;
    use rmcp::service::ServiceError;

    use super::{lost_to_reinit, repeat_once_after_reinit};

    fn reinit() -> ServiceError {
        ServiceError::McpError(ErrorData::internal_error(
            "streamable HTTP session was re-initialized before the response arrived",
            None,
        ))
    }

    /// Answers with `errors` in turn, then `Ok(n)` where n counts the requests.
    async fn run(errors: Vec<ServiceError>) -> (std::result::Result<usize, ServiceError>, usize) {
        let n = AtomicUsize::new(0);
        let errors = std::sync::Mutex::new(errors.into_iter());
        let out = repeat_once_after_reinit(|| {
            let i = n.fetch_add(1, Ordering::SeqCst) + 1;
            let next = errors.lock().unwrap().next();
            async move { next.map_or(Ok(i), Err) }
        })
        .await;
        (out, n.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_listing_lost_to_a_session_reinitialization_is_repeated_once() {
        let (out, n) = run(vec![reinit()]).await;
        assert_eq!((out.unwrap(), n), (2, 2));
        let (out, n) = run(vec![reinit(), reinit()]).await;
        assert!(lost_to_reinit(&out.unwrap_err()));
        assert_eq!(n, 2, "repeated once, not more");
        let (out, n) = run(vec![ServiceError::McpError(ErrorData::internal_error("boom", None))]).await;
        assert!(!lost_to_reinit(&out.unwrap_err()));
        assert_eq!(n, 1, "other errors are not repeated");
        let (out, n) = run(vec![]).await;
        assert_eq!((out.unwrap(), n), (1, 1));
        let send_failed = || {
            ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
                "test",
                std::any::TypeId::of::<()>(),
                Box::new(std::io::Error::other("HTTP 500")),
            ))
        };
        let (out, n) = run(vec![send_failed()]).await;
        assert_eq!((out.unwrap(), n), (2, 2), "a failed send of a listing is repeated once");
    }
}
