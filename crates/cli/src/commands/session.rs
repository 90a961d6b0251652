//! The in-process runtime behind the people-facing commands (`status`, `search`, `describe`, `call`, `connect`,
//! `prompts`): load the configuration, start the actor runtime with the metadata cache in the agent directory and
//! `pimcp-run` itself as the runtime's guardian, run the command (Ctrl-C interrupts it), and always shut the runtime
//! down within [`SHUTDOWN_BOUND`] so no server process outlives the command.

use std::future::Future;
use std::time::Duration;

use pimcp_actors::{GuardianMode, ProcessOptions, Runtime, RuntimeHandle, RuntimeOptions};
use pimcp_config::{Availability, Config};
use pimcp_proxy::Proxy;
use tokio::task::JoinSet;

use super::{Ctx, Exit};
use crate::progress::Progress;

/// How long the runtime may take to close every server when a command ends.
pub(crate) const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);
/// How long the tokio runtime waits for stray blocking tasks once the command is done.
const TOKIO_SHUTDOWN: Duration = Duration::from_secs(1);
/// Exit status after Ctrl-C (128 + SIGINT, as shells report it).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;
/// Name of the npx resolution cache in the data directory.
const NPX_CACHE_FILE: &str = "npx-cache.json";

/// Runs `future` on a fresh multi-threaded tokio runtime and waits at most [`TOKIO_SHUTDOWN`] for leftovers.
pub(crate) fn block_on<T>(future: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let out = rt.block_on(future);
    rt.shutdown_timeout(TOKIO_SHUTDOWN);
    out
}

/// The merged configuration, with its error-level problems reported on stderr (the runtime still starts: each
/// server that could be read is usable).
pub(crate) fn load_config(ctx: &Ctx) -> Config {
    let config = pimcp_config::load(&ctx.opts);
    let errors = config.problems.iter().filter(|p| p.is_error()).count();
    if errors > 0 {
        errln!(
            "pimcp-run: {errors} configuration error{}; run `pimcp-run config check` for details",
            if errors == 1 { "" } else { "s" }
        );
    }
    config
}

/// Runtime options for `config` as `pimcp-run` uses them everywhere (commands and the MCP server).
pub(crate) fn runtime_options(ctx: &Ctx, config: Config) -> RuntimeOptions {
    let mut opts = RuntimeOptions::new(config, ctx.opts.agent_dir(), ctx.opts.data_dir.clone());
    opts.process = ProcessOptions {
        guardian: GuardianMode::CurrentExe,
        npx_cache: Some(ctx.opts.data_dir.join(NPX_CACHE_FILE)),
        ..ProcessOptions::default()
    };
    opts
}

/// How long a command waits for the router to publish a freshly connected server's live metadata.
const CATALOG_WAIT: Duration = Duration::from_secs(5);

/// What a command wants from its session.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessionOptions {
    /// Draw the progress line (only ever on a terminal).
    pub progress: bool,
}

/// A started runtime, the `mcp` proxy façade over it, the configuration it was started from and the progress line.
pub(crate) struct Session {
    pub runtime: Runtime,
    pub proxy: Proxy,
    pub config: Config,
    pub progress: Progress,
}

impl Session {
    pub(crate) fn handle(&self) -> RuntimeHandle {
        self.runtime.handle()
    }

    /// Connects `server` and waits until the catalog shows its live metadata (the router publishes it just
    /// after the connect reply).
    pub(crate) async fn connect(&self, server: &str) -> pimcp_actors::Result<()> {
        let handle = self.handle();
        handle.connect(server).await?;
        wait_for_live(&handle, server).await;
        Ok(())
    }

    /// Connects every available server at once; returns each server's outcome, sorted by name.
    pub(crate) async fn connect_all(&self) -> Vec<(String, pimcp_actors::Result<()>)> {
        let mut set = JoinSet::new();
        for server in &self.config.servers {
            if server.availability != Availability::Available {
                continue;
            }
            let handle = self.handle();
            let name = server.name.clone();
            set.spawn(async move {
                let outcome = handle.connect(&name).await;
                if outcome.is_ok() {
                    wait_for_live(&handle, &name).await;
                }
                (name, outcome)
            });
        }
        let mut out = Vec::new();
        while let Some(joined) = set.join_next().await {
            if let Ok(pair) = joined {
                out.push(pair);
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// Waits (at most [`CATALOG_WAIT`]) until the catalog has `server`'s live metadata.
async fn wait_for_live(handle: &RuntimeHandle, server: &str) {
    let mut watch = handle.catalog_watch();
    let live = |c: &pimcp_actors::Catalog| {
        c.server(server)
            .is_some_and(|s| s.source == Some(pimcp_actors::MetadataSource::Live))
    };
    let _ = tokio::time::timeout(CATALOG_WAIT, watch.wait_for(|c| live(c))).await;
}

/// Starts a session for `ctx`, runs `body` with it (Ctrl-C ends it with [`EXIT_INTERRUPTED`]), then shuts the
/// runtime down within [`SHUTDOWN_BOUND`] whatever `body` returned.
pub(crate) async fn with_session<T>(
    ctx: &Ctx,
    opts: SessionOptions,
    body: impl AsyncFnOnce(&Session) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let config = load_config(ctx);
    let runtime = Runtime::start(runtime_options(ctx, config.clone())).await?;
    // A person at a terminal gets the whole output (pipe it into a pager or a file): no output guard here.
    let mut unguarded = config.clone();
    unguarded.settings.output_guard = None;
    let proxy = match Proxy::new(runtime.handle(), &unguarded) {
        Ok(proxy) => proxy,
        Err(e) => {
            runtime.shutdown(SHUTDOWN_BOUND).await;
            return Err(e.into());
        }
    };
    let progress = Progress::start(runtime.handle(), opts.progress);
    let session = Session {
        runtime,
        proxy,
        config,
        progress,
    };
    let outcome = tokio::select! {
        outcome = body(&session) => outcome,
        _ = tokio::signal::ctrl_c() => Err(Exit { code: EXIT_INTERRUPTED, message: "interrupted".into() }.into()),
    };
    session.progress.stop().await;
    let Session { runtime, proxy, .. } = session;
    drop(proxy);
    let report = runtime.shutdown(SHUTDOWN_BOUND).await;
    if !report.graceful {
        tracing::warn!(elapsed = ?report.elapsed, "some servers did not close in time and were killed");
    }
    outcome
}
