//! Serving hosts: [`serve`] over any transport, [`serve_lines`] over newline-delimited JSON-RPC, the stdio entry
//! points [`serve_stdio`] and [`run_stdio`], and [`stdin_pipe`], the thread-fed stdin reader.

use pimcp_actors::lines::JsonLines;
use pimcp_actors::{Runtime, RuntimeOptions, ShutdownReport};
use rmcp::RoleServer;
use rmcp::service::ServiceExt;
use rmcp::transport::IntoTransport;
use tokio_util::sync::CancellationToken;

use super::{
    ProxyServer, STDIO_SETTLE, ServeOptions, ShutdownSignals, run_until_shutdown, shutdown_runtime, spawn_reload_watch,
};
use crate::error::{Error, Result};
use crate::facade::{Proxy, ProxyOptions};
use crate::forward::HostBridge;
use crate::host_input::HostLines;

/// Serves one host connection over `transport` until the host closes it or `cancel` fires. A host that goes away
/// before initializing is not an error.
pub async fn serve<T, E, A>(server: ProxyServer, transport: T, cancel: CancellationToken) -> Result<()>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = match server.serve_with_ct(transport, cancel.child_token()).await {
        Ok(running) => running,
        Err(
            rmcp::service::ServerInitializeError::ConnectionClosed(_) | rmcp::service::ServerInitializeError::Cancelled,
        ) => {
            return Ok(());
        }
        Err(e) => {
            return Err(Error::Serve {
                transport: "mcp",
                message: e.to_string(),
            });
        }
    };
    let reason = running.waiting().await.map_err(|e| Error::Serve {
        transport: "mcp",
        message: format!("the service task failed: {e}"),
    })?;
    tracing::debug!(?reason, "host session ended");
    Ok(())
}

/// Serves one host over newline-delimited JSON-RPC on `read` / `write` (what [`serve_stdio`] does on stdin/stdout)
/// until the host closes `read` or `cancel` fires: [`serve`] over pimcp's line transport, which answers the lines
/// that are no valid message itself (`host_input`) and hands rmcp the rest.
///
/// When `read` ends, the calls in flight are cancelled (upstream too) and answered as cancelled: a host that closed
/// its input is gone, and a call it made must not keep pimcp-run running.
pub async fn serve_lines<R, W>(server: ProxyServer, read: R, write: W, cancel: CancellationToken) -> Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let closed = CancellationToken::new();
    let limit = server.proxy().config().settings.max_message_bytes;
    let transport = JsonLines::new(read, write, limit, HostLines::new(closed.clone()));
    let watch = {
        let server = server.clone();
        async move {
            closed.cancelled().await;
            if server.in_flight() > 0 {
                tracing::info!(
                    in_flight = server.in_flight(),
                    "the host closed its input; cancelling its calls"
                );
            }
            server.cancel_calls();
            std::future::pending::<std::convert::Infallible>().await
        }
    };
    tokio::select! {
        served = serve(server, transport, cancel) => served,
        never = watch => match never {},
    }
}

/// Serves MCP on stdin/stdout until stdin closes, SIGINT or SIGTERM, then shuts the runtime down within
/// `options.shutdown_bound` (no child process survives). `bridge` must be the one whose handlers the runtime has.
///
/// Pipes and sockets are read and written on the reactor ([`crate::host_stdio`]); other stdin is read by a plain
/// thread (see [`stdin_pipe`]). Either way, returning on a signal while the host keeps stdin open leaves nothing for
/// the tokio runtime to wait on when it is dropped.
pub async fn serve_stdio(
    runtime: Runtime,
    proxy: Proxy,
    bridge: HostBridge,
    options: ServeOptions,
) -> Result<ShutdownReport> {
    let server = ProxyServer::new(proxy.clone(), bridge);
    let cancel = CancellationToken::new();
    let signals = ShutdownSignals::watch(options.shutdown.clone());
    let reloads = options.reload.clone().map(|reload| spawn_reload_watch(proxy, reload));
    let (stdin, stdout) = crate::stdio::host_stdio();
    let serving = serve_lines(server.clone(), stdin, stdout, cancel.clone());
    // Answers of drained calls are written right after the handlers return (by rmcp's
    // service loop for other requests).
    let settle = tokio::time::sleep(STDIO_SETTLE);
    let (served, immediate) =
        run_until_shutdown(&server, serving, &signals, &cancel, options.drain_bound, settle).await;
    if let Err(e) = &served {
        tracing::error!(error = %e, "stdio session failed");
    }
    server.stop();
    if let Some(r) = reloads {
        r.abort();
    }
    let report = shutdown_runtime(runtime, &signals, options.shutdown_bound, immediate).await;
    signals.stop();
    served.map(|()| report)
}

/// The whole stdio entry point of `pimcp-run`: installs a [`HostBridge`] as the runtime's handlers, starts the
/// runtime, builds the [`Proxy`] and runs [`serve_stdio`].
pub async fn run_stdio(options: RuntimeOptions, serve_options: ServeOptions) -> Result<ShutdownReport> {
    let (runtime, proxy, bridge) = start_bridged(options, serve_options.shutdown_bound).await?;
    serve_stdio(runtime, proxy, bridge, serve_options).await
}

/// What `run_stdio` and `run_http` start from: a [`HostBridge`] installed as the runtime's handlers, the runtime and
/// the [`Proxy`] over it (the runtime is shut down within `shutdown_bound` when the proxy cannot be built).
pub(crate) async fn start_bridged(
    options: RuntimeOptions,
    shutdown_bound: std::time::Duration,
) -> Result<(Runtime, Proxy, HostBridge)> {
    let bridge = HostBridge::new();
    let mut options = options;
    options.handlers = bridge.handlers();
    let config = options.config.clone();
    let runtime = Runtime::start(options).await?;
    let proxy = match Proxy::with_options(
        runtime.handle(),
        &config,
        ProxyOptions {
            spill: None,
            bridge: Some(bridge.clone()),
        },
    ) {
        Ok(p) => p,
        Err(e) => {
            runtime.shutdown(shutdown_bound).await;
            return Err(e);
        }
    };
    Ok((runtime, proxy, bridge))
}

/// Stdin as an async reader fed by a detached OS thread. tokio's own `stdin()` reads on the blocking pool, and a
/// tokio runtime waits for its blocking threads when dropped: a host that keeps stdin open after SIGTERM would hang
/// the exit. This thread is never joined; it ends at EOF, on a read error, or with the process.
pub fn stdin_pipe() -> tokio::io::DuplexStream {
    use std::io::Read as _;
    use tokio::io::AsyncWriteExt as _;
    const CHUNK_BYTES: usize = 64 * 1024;
    let (reader, mut writer) = tokio::io::duplex(CHUNK_BYTES);
    let spawned = std::thread::Builder::new().name("pimcp-stdin".into()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; CHUNK_BYTES];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "reading stdin failed");
                    break;
                }
            };
            // The duplex needs no tokio driver, so a plain executor can wait for room in it.
            if futures::executor::block_on(writer.write_all(&buf[..n])).is_err() {
                break;
            }
        }
        let _ = futures::executor::block_on(writer.shutdown());
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the stdin reader thread");
    }
    reader
}
