//! SupervisorActor: spawns the AuthActor, the RouterActor and one ServerActor per configured server, linked so their
//! failures arrive here. ractor's default would stop the supervisor on a child failure; instead a
//! failed child is restarted after a jittered exponential delay (backon), and a child that keeps failing trips a
//! crash-loop breaker and is left down with its status saying why. It also watches the wall clock for sleep/wake.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use pimcp_config::Config;
use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::watch;

use crate::auth::AuthActor;
use crate::catalog::{Catalog, MetadataSource, ServerMetadata};
use crate::context::Shared;
use crate::handles::{RouterHandle, ServerHandle};
use crate::msg::{RouterMsg, ServerRequest};
use crate::policy::{ClockWatch, ConnectBackoff, CrashLoopBreaker};
use crate::router::{RouterActor, RouterArgs};
use crate::server::{ServerActor, ServerArgs};
use crate::status::ServerState;

pub(crate) enum SupMsg {
    /// Respawn a crashed ServerActor (sent to self after the restart delay).
    RestartServer {
        server: String,
    },
    RestartRouter,
    RestartAuth,
    /// Periodic wall-clock check.
    ClockTick,
    /// Apply a new configuration: removed servers stop, changed ones restart, unchanged ones keep running.
    Reconfigure {
        config: Arc<Config>,
        reply: tokio::sync::oneshot::Sender<()>,
    },
}

pub(crate) struct SupArgs {
    pub config: Arc<Config>,
    pub shared: Arc<Shared>,
    pub initial: BTreeMap<String, (Arc<ServerMetadata>, MetadataSource)>,
    /// Each server's `identity_hash`, computed once by the runtime's start.
    pub hashes: HashMap<String, String>,
    pub catalog_tx: watch::Sender<Arc<Catalog>>,
}

enum Child {
    Server(String),
    Router,
    Auth,
}

struct Restarts {
    backoff: ConnectBackoff,
    breaker: CrashLoopBreaker,
}

pub(crate) struct SupState {
    config: Arc<Config>,
    shared: Arc<Shared>,
    catalog_tx: watch::Sender<Arc<Catalog>>,
    children: HashMap<ActorId, Child>,
    restarts: HashMap<String, Restarts>,
    clock: ClockWatch,
    clock_timer: Option<JoinHandle<()>>,
}

pub(crate) struct SupervisorActor;

impl SupervisorActor {
    async fn spawn_server(
        myself: &ActorRef<SupMsg>,
        st: &mut SupState,
        server: &str,
        initial: Option<(Arc<ServerMetadata>, MetadataSource)>,
        hash: Option<String>,
    ) -> Result<(), ActorProcessingErr> {
        let Some(cfg) = st.config.server(server).cloned() else {
            return Ok(());
        };
        let args = ServerArgs {
            cfg,
            shared: st.shared.clone(),
            initial,
            hash,
        };
        let (actor, _join) = Actor::spawn_linked(None, ServerActor, args, myself.get_cell()).await?;
        st.children.insert(actor.get_id(), Child::Server(server.to_owned()));
        st.shared
            .registry
            .insert(server.to_owned(), ServerHandle::new(actor.get_derived()));
        Ok(())
    }

    async fn spawn_router(
        myself: &ActorRef<SupMsg>,
        st: &mut SupState,
        publish_at_start: bool,
    ) -> Result<(), ActorProcessingErr> {
        let known = st.shared.known_metadata();
        let args = RouterArgs {
            config: st.config.clone(),
            known,
            catalog_tx: st.catalog_tx.clone(),
            shared: st.shared.clone(),
            publish_at_start,
        };
        let (router, _join) = Actor::spawn_linked(None, RouterActor, args, myself.get_cell()).await?;
        st.children.insert(router.get_id(), Child::Router);
        st.shared.set_router(RouterHandle::new(router));
        Ok(())
    }

    async fn spawn_auth(myself: &ActorRef<SupMsg>, st: &mut SupState) -> Result<(), ActorProcessingErr> {
        let args = st.shared.auth.args(st.config.clone());
        let (auth, _join) = Actor::spawn_linked(None, AuthActor, args, myself.get_cell()).await?;
        st.children.insert(auth.get_id(), Child::Auth);
        st.shared.auth.core.set_actor(auth);
        Ok(())
    }

    /// Stops a server actor politely: close its connection (bounded), then stop it. Not a failure.
    fn retire(st: &mut SupState, server: &str) {
        st.shared.lanes.remove(server);
        let Some((_, actor)) = st.shared.registry.remove(server) else {
            return;
        };
        st.children.remove(&actor.id());
        let grace = st.shared.tuning.close_grace;
        tokio::spawn(async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if actor.send(ServerRequest::Shutdown { reply: tx }).is_ok() {
                let _ = tokio::time::timeout(grace.saturating_mul(3), rx).await;
            }
            actor.stop("reconfigured");
        });
    }

    async fn reconfigure(myself: &ActorRef<SupMsg>, st: &mut SupState, config: Arc<Config>) {
        // The AuthActor first: a restarted server's first connect must see its new URL and auth.
        st.shared.auth.reconfigure(config.clone());
        let old = st.config.clone();
        st.config = config.clone();
        st.shared.set_budgets(&config.servers);
        if let Ok(mut names) = st.shared.configured.write() {
            *names = config.servers.iter().map(|s| s.name.clone()).collect();
        }
        for s in &old.servers {
            match config.server(&s.name) {
                None => {
                    Self::retire(st, &s.name);
                    st.shared.board.remove(&s.name);
                    st.shared.update_known(&s.name, None);
                    st.restarts.remove(&s.name);
                }
                Some(new) if new != s => Self::retire(st, &s.name),
                Some(_) => {}
            }
        }
        let known = st.shared.known_metadata();
        for s in &config.servers {
            let unchanged = old.server(&s.name).is_some_and(|o| o == s);
            if unchanged {
                continue;
            }
            // Keep metadata only when the identity (and so the cache key) is unchanged.
            let keep = old
                .server(&s.name)
                .is_some_and(|o| pimcp_config::identity_hash(o) == pimcp_config::identity_hash(s));
            let initial = if keep {
                known.get(&s.name).map(|(m, src)| {
                    let src = if *src == MetadataSource::Live {
                        MetadataSource::Cache
                    } else {
                        *src
                    };
                    (m.clone(), src)
                })
            } else {
                st.shared.update_known(&s.name, None);
                None
            };
            st.restarts.remove(&s.name);
            if let Err(e) = Self::spawn_server(myself, st, &s.name, initial, None).await {
                tracing::error!(server = %s.name, error = %e, "could not start the server actor");
            }
        }
        if let Some(router) = st.shared.router() {
            let _ = router.send(RouterMsg::Reconfigure { config });
        }
    }

    fn on_child_down(myself: &ActorRef<SupMsg>, st: &mut SupState, cell: &ActorCell, why: String) {
        let Some(child) = st.children.remove(&cell.get_id()) else {
            return;
        };
        if st.shared.is_shutting_down() {
            return;
        }
        match child {
            Child::Router => {
                tracing::error!(error = %why, "router actor failed; restarting");
                myself.send_after(std::time::Duration::from_millis(10), || SupMsg::RestartRouter);
            }
            Child::Auth => {
                tracing::error!(error = %why, "auth actor failed; restarting");
                myself.send_after(std::time::Duration::from_millis(10), || SupMsg::RestartAuth);
            }
            Child::Server(name) => {
                let tuning = &st.shared.tuning;
                let r = st.restarts.entry(name.clone()).or_insert_with(|| Restarts {
                    backoff: ConnectBackoff::new(tuning.connect_backoff_min, tuning.connect_backoff_max),
                    breaker: CrashLoopBreaker::new(
                        tuning.actor_restart_budget,
                        tuning.breaker_window,
                        tuning.breaker_stable_after,
                    ),
                });
                if r.breaker.record_failure(Instant::now()) {
                    tracing::error!(server = %name, error = %why, "server actor keeps failing; giving up");
                    let reason = format!("crash loop: the server actor failed repeatedly ({why})");
                    st.shared.board.update(&name, |s| {
                        s.state = ServerState::Failed { reason: reason.clone() };
                        s.reason = Some(reason);
                        s.connected_at = None;
                        s.in_flight = 0;
                    });
                    st.shared.registry.remove(&name);
                    return;
                }
                let (delay, _) = r.backoff.next_delay();
                tracing::warn!(server = %name, error = %why, delay_ms = delay.as_millis() as u64, "server actor failed; restarting");
                myself.send_after(delay, move || SupMsg::RestartServer { server: name });
            }
        }
    }
}

impl Actor for SupervisorActor {
    type Msg = SupMsg;
    type State = SupState;
    type Arguments = SupArgs;

    async fn pre_start(&self, myself: ActorRef<SupMsg>, args: SupArgs) -> Result<SupState, ActorProcessingErr> {
        let SupArgs {
            config,
            shared,
            initial,
            mut hashes,
            catalog_tx,
        } = args;
        shared.set_known(initial.clone());
        let mut st = SupState {
            config,
            shared,
            catalog_tx,
            children: HashMap::new(),
            restarts: HashMap::new(),
            clock: ClockWatch::new(SystemTime::now(), Instant::now()),
            clock_timer: None,
        };
        Self::spawn_auth(&myself, &mut st).await?;
        Self::spawn_router(&myself, &mut st, false).await?;
        let names: Vec<String> = st.config.servers.iter().map(|s| s.name.clone()).collect();
        for name in names {
            let init = initial.get(&name).cloned();
            let hash = hashes.remove(&name);
            Self::spawn_server(&myself, &mut st, &name, init, hash).await?;
        }
        let interval = st.shared.settings.health_interval;
        st.clock_timer = Some(myself.send_interval(interval, || SupMsg::ClockTick));
        Ok(st)
    }

    async fn post_stop(&self, _myself: ActorRef<SupMsg>, st: &mut SupState) -> Result<(), ActorProcessingErr> {
        if let Some(t) = st.clock_timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(&self, myself: ActorRef<SupMsg>, msg: SupMsg, st: &mut SupState) -> Result<(), ActorProcessingErr> {
        match msg {
            SupMsg::RestartServer { server } => {
                if st.shared.is_shutting_down() {
                    return Ok(());
                }
                let initial = st.shared.known_metadata().get(&server).map(|(m, s)| {
                    let src = if *s == MetadataSource::Live {
                        MetadataSource::Cache
                    } else {
                        *s
                    };
                    (m.clone(), src)
                });
                if let Err(e) = Self::spawn_server(&myself, st, &server, initial, None).await {
                    tracing::error!(%server, error = %e, "could not respawn the server actor");
                }
            }
            SupMsg::RestartRouter => {
                if !st.shared.is_shutting_down() {
                    Self::spawn_router(&myself, st, true).await?;
                }
            }
            SupMsg::RestartAuth => {
                if !st.shared.is_shutting_down() {
                    Self::spawn_auth(&myself, st).await?;
                }
            }
            SupMsg::Reconfigure { config, reply } => {
                Self::reconfigure(&myself, st, config).await;
                let _ = reply.send(());
            }
            SupMsg::ClockTick => {
                let threshold = st.shared.settings.health_interval;
                if st.clock.jumped(SystemTime::now(), Instant::now(), threshold) {
                    tracing::info!("wall clock jumped (sleep/wake?); revalidating connected servers");
                    for entry in st.shared.registry.iter() {
                        let _ = entry.value().send(ServerRequest::Revalidate);
                    }
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupMsg>,
        evt: SupervisionEvent,
        st: &mut SupState,
    ) -> Result<(), ActorProcessingErr> {
        match evt {
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
            SupervisionEvent::ActorFailed(cell, err) => Self::on_child_down(&myself, st, &cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _state, reason) => {
                // A normal stop is deliberate (shutdown, removal) unless we did not ask for it.
                if st.shared.is_shutting_down() {
                    st.children.remove(&cell.get_id());
                } else {
                    Self::on_child_down(&myself, st, &cell, reason.unwrap_or_else(|| "stopped".into()));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

    use crate::catalog::tests::server;
    use crate::msg::ServerRequest;
    use crate::policy::Tuning;
    use crate::runtime::{Runtime, RuntimeOptions};
    use crate::status::ServerState;

    async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(std::time::Instant::now() < end, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failed_server_actor_is_restarted_until_the_budget_runs_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = pimcp_config::Config::default();
        config.servers = vec![server("x")];
        let mut opts = RuntimeOptions::new(config, dir.path().join("agent"), dir.path().join("data"));
        opts.tuning = Tuning {
            connect_backoff_min: Duration::from_millis(5),
            connect_backoff_max: Duration::from_millis(20),
            actor_restart_budget: 3,
            ..Tuning::default()
        };
        let rt = Runtime::start(opts).await.unwrap();
        let shared = rt.handle().shared.clone();
        for round in 0..2 {
            let before = shared.server_ref("x").unwrap();
            before.send(ServerRequest::FailForTest).unwrap();
            wait_until(&format!("restart {round}"), || {
                shared.server_ref("x").is_some_and(|a| a.id() != before.id())
            })
            .await;
            // The supervisor is still alive and the new actor serves.
            assert_eq!(rt.status().server("x").unwrap().state, ServerState::Cached);
        }
        // Third failure within the window: the breaker opens and the server stays down, saying why.
        shared
            .server_ref("x")
            .unwrap()
            .send(ServerRequest::FailForTest)
            .unwrap();
        wait_until("crash-loop give-up", || {
            matches!(rt.status().server("x").unwrap().state, ServerState::Failed { .. })
        })
        .await;
        assert!(shared.server_ref("x").is_none());
        let reason = rt.status().server("x").unwrap().reason.clone().unwrap();
        assert!(reason.contains("crash loop"), "{reason}");
        let report = rt.shutdown(Duration::from_secs(5)).await;
        assert!(report.graceful, "{report:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_auth_actor_is_restarted_and_answers_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = pimcp_config::Config::default();
        config.servers = vec![server("x")];
        let opts = RuntimeOptions::new(config, dir.path().join("agent"), dir.path().join("data"));
        let rt = Runtime::start(opts).await.unwrap();
        let shared = rt.handle().shared.clone();
        let before = shared.auth.core.actor().unwrap();
        assert_eq!(shared.auth.servers().await.unwrap().len(), 1);
        before.send_message(crate::auth::AuthMsg::FailForTest).unwrap();
        wait_until("the auth actor's restart", || {
            shared.auth.core.actor().is_some_and(|a| a.get_id() != before.get_id())
        })
        .await;
        assert_eq!(shared.auth.servers().await.unwrap().len(), 1, "the new actor answers");
        let report = rt.shutdown(Duration::from_secs(5)).await;
        assert!(report.graceful, "{report:?}");
    }
}
