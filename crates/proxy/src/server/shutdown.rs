//! Shutdown: the SIGINT/SIGTERM watch ([`ShutdownSignals`]), the drain of calls in flight
//! ([`run_until_shutdown`]), the bounded runtime shutdown ([`shutdown_runtime`]) and the SIGHUP reload watch.

use std::time::Duration;

use pimcp_actors::{Runtime, ShutdownReport};
use tokio_util::sync::CancellationToken;

use super::{IMMEDIATE_SHUTDOWN_BOUND, ProxyServer, ReloadFn, SIGNAL_BURST};
use crate::error::Result;
use crate::facade::Proxy;

/// The first and second shutdown request: SIGINT/SIGTERM, or an embedder's token for the first.
#[derive(Debug)]
pub(crate) struct ShutdownSignals {
    /// Stop accepting, drain, close.
    pub(crate) graceful: CancellationToken,
    /// Stop waiting, kill.
    pub(crate) immediate: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ShutdownSignals {
    /// Watches SIGINT/SIGTERM (Ctrl-C, Ctrl-Break, console close on Windows) and `external`, which counts as a first
    /// request.
    pub(crate) fn watch(external: Option<CancellationToken>) -> ShutdownSignals {
        let graceful = CancellationToken::new();
        let immediate = CancellationToken::new();
        let task = {
            let (graceful, immediate) = (graceful.clone(), immediate.clone());
            tokio::spawn(async move {
                let external = external.unwrap_or_default();
                let Ok(mut signals) = crate::sys::stop_signals() else {
                    tracing::warn!("cannot watch the stop signals");
                    external.cancelled().await;
                    graceful.cancel();
                    return;
                };
                tokio::select! {
                    s = signals.recv() => tracing::info!("{}: shutting down (a second signal stops at once)", s.name),
                    _ = external.cancelled() => tracing::info!("shutdown requested"),
                }
                graceful.cancel();
                // Hosts stop a server with more than one signal (Claude Code: SIGINT, then SIGTERM 0.1 s later):
                // the signals of one burst are one request to stop gracefully.
                let first = tokio::time::Instant::now();
                loop {
                    signals.recv().await;
                    if first.elapsed() >= SIGNAL_BURST {
                        break;
                    }
                    tracing::debug!("a signal right after the first: the same request to stop");
                }
                tracing::warn!("second signal: stopping at once");
                immediate.cancel();
            })
        };
        ShutdownSignals {
            graceful,
            immediate,
            task,
        }
    }

    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

/// Drives `serving` until it ends by itself, or a shutdown is requested: then new calls are refused, calls in
/// flight get up to `drain_bound` (less if a second request comes), `settle` lets their answers reach the hosts,
/// and `cancel` ends the serving. Returns the serving's outcome and whether the shutdown must be immediate.
pub(crate) async fn run_until_shutdown<F, S>(
    server: &ProxyServer,
    serving: F,
    signals: &ShutdownSignals,
    cancel: &CancellationToken,
    drain_bound: Duration,
    settle: S,
) -> (Result<()>, bool)
where
    F: std::future::Future<Output = Result<()>>,
    S: std::future::Future<Output = ()>,
{
    tokio::pin!(serving);
    tokio::select! {
        served = &mut serving => return (served, signals.immediate.is_cancelled()),
        _ = signals.graceful.cancelled() => {}
    }
    server.begin_drain();
    let in_flight = server.in_flight();
    if in_flight > 0 {
        tracing::info!(
            in_flight,
            bound_ms = drain_bound.as_millis() as u64,
            "waiting for calls in flight"
        );
    }
    let mut served = None;
    let mut drained = false;
    tokio::select! {
        r = &mut serving => served = Some(r),
        done = server.drain(drain_bound) => {
            drained = done;
            if !done {
                tracing::warn!(in_flight = server.in_flight(), "calls still in flight after the drain bound; cancelling them");
            }
        }
        _ = signals.immediate.cancelled() => {}
    }
    if drained && served.is_none() {
        tokio::select! {
            r = &mut serving => served = Some(r),
            () = settle => {}
            _ = signals.immediate.cancelled() => {}
        }
    }
    cancel.cancel();
    let served = match served {
        Some(r) => r,
        None => serving.await,
    };
    (served, signals.immediate.is_cancelled())
}

/// Shuts the runtime down within `bound`, or kills the servers at once when `immediate` (or a second signal comes
/// while waiting).
pub(crate) async fn shutdown_runtime(
    runtime: Runtime,
    signals: &ShutdownSignals,
    bound: Duration,
    immediate: bool,
) -> ShutdownReport {
    let bound = if immediate {
        IMMEDIATE_SHUTDOWN_BOUND.min(bound)
    } else {
        bound
    };
    let shutdown = runtime.shutdown(bound);
    tokio::pin!(shutdown);
    let report = tokio::select! {
        report = &mut shutdown => report,
        _ = signals.immediate.cancelled(), if !immediate => {
            // The graceful close is under way; the runtime's guardian kills what is left when the process exits.
            tracing::warn!("second signal during shutdown: not waiting for the servers to close");
            ShutdownReport::new(false, Duration::ZERO)
        }
    };
    tracing::info!(
        graceful = report.graceful,
        elapsed_ms = report.elapsed.as_millis() as u64,
        "pimcp-run stopped"
    );
    report
}

/// Applies `reload`'s config on every SIGHUP.
pub(crate) fn spawn_reload_watch(proxy: Proxy, reload: ReloadFn) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut hup = match crate::sys::reload_signal() {
            Ok(hup) => hup,
            Err(e) => {
                tracing::debug!(error = %e, "no reload signal");
                return;
            }
        };
        while hup.recv().await.is_some() {
            let reload = reload.clone();
            let config = match tokio::task::spawn_blocking(move || reload()).await {
                Ok(Some(config)) => config,
                Ok(None) => {
                    tracing::warn!("SIGHUP: the new configuration was not applied; the running one stays");
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: reloading the configuration failed");
                    continue;
                }
            };
            match proxy.reconfigure(config).await {
                Ok(()) => tracing::info!("SIGHUP: configuration reloaded"),
                Err(e) => tracing::error!(error = %e.text(), "SIGHUP: applying the configuration failed"),
            }
        }
    })
}
