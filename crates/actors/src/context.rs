//! What every actor of one runtime shares: settings, the HTTP client, process options, tuning, host callbacks, the
//! auth handle, the status board, the metadata cache, the actor registry and the root cancellation token.

use std::collections::BTreeSet;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use dashmap::DashMap;
use pimcp_config::Settings;
use tokio_util::sync::CancellationToken;

use crate::cache::MetadataCache;
use crate::catalog::{MetadataSource, ServerMetadata};
use crate::handles::{RouterHandle, ServerHandle, ServerRegistry};
use crate::host::Handlers;
use crate::policy::Tuning;
use crate::process::ProcessOptions;
use crate::status::StatusBoard;
use crate::trace::TraceSink;

/// How long a control request (connect, disable) may wait for an actor's answer beyond the server's own
/// startup + discovery timeouts.
pub const CONTROL_REPLY_SLACK: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) struct Shared {
    pub settings: Settings,
    pub project_dir: PathBuf,
    pub http: crate::transport::SharedHttp,
    pub process: ProcessOptions,
    pub tuning: Tuning,
    pub handlers: Arc<Handlers>,
    pub board: StatusBoard,
    pub cache: MetadataCache,
    /// Names of the configured servers (cache pruning).
    pub configured: RwLock<BTreeSet<String>>,
    /// The problems of the configuration in use (files and entries that were skipped, fields ignored), for the
    /// model-facing status and errors; replaced on reconfigure.
    pub problems: RwLock<Arc<[pimcp_config::ConfigProblem]>>,
    /// Current ServerActor of each server (replaced on restart).
    pub registry: Arc<ServerRegistry>,
    /// The call lane of each server's current actor: callers run calls on a ready connection through it.
    pub lanes: DashMap<String, Arc<crate::lane::Lane>>,
    /// The current RouterActor (replaced on restart).
    pub router: RwLock<Option<RouterHandle>>,
    /// Every server's last known metadata, kept here so a restarted router or server actor starts from it.
    pub known: Mutex<BTreeMap<String, (Arc<ServerMetadata>, MetadataSource)>>,
    /// Root of the cancellation tree; each ServerActor holds a child.
    pub root: CancellationToken,
    pub shutting_down: AtomicBool,
    /// Longest `startup + request` timeout of any server, in ms: bounds how long a control request may wait.
    pub connect_budget_ms: std::sync::atomic::AtomicU64,
    /// Longest hard cap of a call on any server (`timeouts.tool` × [`DEFAULT_MAX_TOTAL_FACTOR`]), in ms.
    ///
    /// [`DEFAULT_MAX_TOTAL_FACTOR`]: crate::job::DEFAULT_MAX_TOTAL_FACTOR
    pub call_budget_ms: std::sync::atomic::AtomicU64,
    /// `(server, original tool)` pairs the host allowed for this session.
    pub approvals: DashMap<(String, String), ()>,
    /// The AuthActor: tokens and logins of OAuth servers.
    pub auth: crate::auth::AuthHandle,
    /// The JSONL protocol trace file (written only for servers with tracing on).
    pub trace: TraceSink,
    /// Metadata-cache writes still running on the blocking pool; shutdown closes the tracker and waits for them, so
    /// the next start finds what this run discovered.
    pub cache_writes: tokio_util::task::TaskTracker,
    /// Resources whose changes 2026-07-28 servers are asked for on their listen stream.
    pub resource_interest: crate::resource_interest::ResourceInterest,
}

impl Shared {
    pub(crate) fn config_problems(&self) -> Arc<[pimcp_config::ConfigProblem]> {
        match self.problems.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(crate) fn set_config_problems(&self, problems: &[pimcp_config::ConfigProblem]) {
        let problems: Arc<[pimcp_config::ConfigProblem]> = problems.into();
        match self.problems.write() {
            Ok(mut g) => *g = problems,
            Err(p) => *p.into_inner() = problems,
        }
    }

    pub(crate) fn configured_names(&self) -> BTreeSet<String> {
        match self.configured.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// How long a control request (connect, resolve with discovery) may wait for its answer.
    pub(crate) fn control_timeout(&self) -> std::time::Duration {
        let budget = std::time::Duration::from_millis(self.connect_budget_ms.load(Ordering::Relaxed));
        budget + CONTROL_REPLY_SLACK
    }

    /// How long a call through the router may wait for its answer: finding the tool (connecting its server), the
    /// host's approval, then the call's own hard cap, with [`CONTROL_REPLY_SLACK`](CONTROL_REPLY_SLACK)
    /// on top.
    pub(crate) fn call_reply_timeout(&self, opts: &crate::job::CallOptions) -> std::time::Duration {
        let call = opts.max_total.unwrap_or_else(|| match opts.timeout {
            Some(t) => t.saturating_mul(crate::job::DEFAULT_MAX_TOTAL_FACTOR),
            None => std::time::Duration::from_millis(self.call_budget_ms.load(Ordering::Relaxed)),
        });
        self.control_timeout() + self.tuning.approval_wait + call + CONTROL_REPLY_SLACK
    }

    /// Sets the connect and call budgets from the configured servers' timeouts.
    pub(crate) fn set_budgets(&self, servers: &[pimcp_config::ServerConfig]) {
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let connect = servers
            .iter()
            .map(|s| s.timeouts.startup + s.timeouts.request)
            .max()
            .unwrap_or_default();
        self.connect_budget_ms.store(ms(connect), Ordering::Relaxed);
        let call = servers
            .iter()
            .map(|s| s.timeouts.tool.saturating_mul(crate::job::DEFAULT_MAX_TOTAL_FACTOR))
            .max()
            .unwrap_or_default();
        self.call_budget_ms.store(ms(call), Ordering::Relaxed);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    pub(crate) fn router(&self) -> Option<RouterHandle> {
        match self.router.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(crate) fn set_router(&self, router: RouterHandle) {
        match self.router.write() {
            Ok(mut g) => *g = Some(router),
            Err(p) => *p.into_inner() = Some(router),
        }
    }

    pub(crate) fn known_metadata(&self) -> BTreeMap<String, (Arc<ServerMetadata>, MetadataSource)> {
        match self.known.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(crate) fn set_known(&self, known: BTreeMap<String, (Arc<ServerMetadata>, MetadataSource)>) {
        match self.known.lock() {
            Ok(mut g) => *g = known,
            Err(p) => *p.into_inner() = known,
        }
    }

    pub(crate) fn update_known(&self, server: &str, metadata: Option<(Arc<ServerMetadata>, MetadataSource)>) {
        let mut g = match self.known.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        match metadata {
            Some(m) => {
                g.insert(server.to_owned(), m);
            }
            None => {
                g.remove(server);
            }
        }
    }

    pub(crate) fn server_ref(&self, name: &str) -> Option<ServerHandle> {
        self.registry.get(name).map(|r| r.clone())
    }
}
