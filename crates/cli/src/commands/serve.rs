//! `pimcp-run serve --http ADDR`: one shared runtime behind Streamable HTTP for any number of host sessions
//! (`pimcp_proxy::serve_http`), with the config files watched ([`crate::reload`]), graceful shutdown on the first
//! SIGINT/SIGTERM and an immediate exit on the second. Also the other two ways hosts reach a runtime from here:
//! the stdio server with reload ([`run_stdio_reloading`], used by `launch`) and `pimcp-run --attach URL`
//! ([`attach`]), a stdio relay to a running `serve` instance.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pimcp_actors::{Runtime, RuntimeOptions, ShutdownReport};
use pimcp_proxy::{AttachOptions, AuthToken, HostBridge, HttpOptions, Proxy, ProxyOptions, ServeOptions};

use super::session::{SHUTDOWN_BOUND, load_config, runtime_options};
use super::{Ctx, usage};
use crate::{EXIT_FAILED, EXIT_OK};

/// How long a stop waits for calls in flight by default.
const DEFAULT_DRAIN_SECS: u64 = 10;
/// How long the tokio runtime may take for leftover blocking work (metadata cache writes) at exit.
const TOKIO_SHUTDOWN: Duration = Duration::from_secs(2);
/// Environment variable holding the token (`serve` and `--attach`); preferred over `--auth-token`, which other
/// local users can read in the process list.
pub(crate) const TOKEN_ENV: &str = "PIMCP_AUTH_TOKEN";

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8765; port 0 picks one). Addresses other
    /// than loopback need a token.
    #[arg(long, value_name = "ADDR")]
    pub http: SocketAddr,
    /// Require `Authorization: Bearer TOKEN` on every request (at least 16 characters). Prefer
    /// --auth-token-file or PIMCP_AUTH_TOKEN: a command line is visible to other local users.
    #[arg(long, value_name = "TOKEN", env = TOKEN_ENV, hide_env_values = true, conflicts_with = "auth_token_file")]
    pub auth_token: Option<String>,
    /// Read the token from this file (first line; keep it mode 0600).
    #[arg(long, value_name = "PATH")]
    pub auth_token_file: Option<PathBuf>,
    /// Also accept this Host header (`name` or `name:port`; repeatable; `*` accepts any and needs a token).
    /// Loopback names and the bound address are always accepted.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Also accept requests from this browser Origin (`https://app.example.com`; repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Most host sessions at once; more `initialize` requests get 503.
    #[arg(long, value_name = "N", default_value_t = pimcp_proxy::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Most concurrent requests in one session; more get 429.
    #[arg(long, value_name = "N", default_value_t = pimcp_proxy::DEFAULT_MAX_REQUESTS_PER_SESSION)]
    pub max_requests_per_session: usize,
    /// Largest request body accepted; larger ones get 413.
    #[arg(long, value_name = "BYTES", default_value_t = pimcp_proxy::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// On SIGINT/SIGTERM, wait this long for calls in flight before closing the servers.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_DRAIN_SECS)]
    pub drain_timeout: u64,
}

/// The token from `--auth-token` / `PIMCP_AUTH_TOKEN` or `--auth-token-file`, if any.
pub(crate) fn token(inline: Option<&str>, file: Option<&Path>) -> anyhow::Result<Option<AuthToken>> {
    let token = match (inline, file) {
        (_, Some(path)) => AuthToken::from_file(path),
        (Some(value), None) => AuthToken::new(value),
        (None, None) => return Ok(None),
    };
    token.map(Some).map_err(|e| usage(e.to_string()))
}

fn http_options(args: &ServeArgs) -> anyhow::Result<HttpOptions> {
    let mut http = HttpOptions::default()
        .with_allowed_hosts(args.allow_hosts.clone())
        .with_allowed_origins(args.allow_origins.clone())
        .with_max_sessions(args.max_sessions)
        .with_max_requests_per_session(args.max_requests_per_session)
        .with_max_body_bytes(args.max_body_bytes);
    if let Some(token) = token(args.auth_token.as_deref(), args.auth_token_file.as_deref())? {
        http = http.with_token(token);
    }
    http.check(&args.http).map_err(|e| usage(e.to_string()))?;
    Ok(http)
}

pub(crate) fn run(ctx: &Ctx, args: ServeArgs) -> anyhow::Result<u8> {
    let http = http_options(&args)?;
    let serve_options = ServeOptions::default()
        .with_shutdown_bound(SHUTDOWN_BOUND)
        .with_drain_bound(Duration::from_secs(args.drain_timeout));
    let config = load_config(ctx);
    let options = runtime_options(ctx, config);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = rt.block_on(async {
        exit_on_second_signal();
        let listener = pimcp_proxy::bind(args.http, &http).await?;
        let local = listener.local_addr()?;
        // The one line operators and scripts look for (port 0 resolves here).
        errln!("pimcp-run: serving MCP on http://{local}{}", pimcp_proxy::MCP_PATH);
        let (runtime, proxy, bridge, config) = start(options).await?;
        let reloader = crate::reload::spawn(ctx.opts.clone(), proxy.clone(), config);
        let served = pimcp_proxy::serve_http(runtime, proxy, bridge, listener, http, serve_options).await;
        reloader.abort();
        anyhow::Ok(served?)
    });
    rt.shutdown_timeout(TOKIO_SHUTDOWN);
    let report = outcome?;
    tracing::debug!(graceful = report.graceful, elapsed = ?report.elapsed, "served");
    Ok(EXIT_OK)
}

/// Starts the runtime with a host bridge as its handlers and the proxy over it.
async fn start(mut options: RuntimeOptions) -> anyhow::Result<(Runtime, Proxy, HostBridge, pimcp_config::Config)> {
    let bridge = HostBridge::new();
    options.handlers = bridge.handlers();
    let config = options.config.clone();
    let runtime = Runtime::start(options).await?;
    let proxy = Proxy::with_options(
        runtime.handle(),
        &config,
        ProxyOptions {
            spill: None,
            bridge: Some(bridge.clone()),
        },
    );
    match proxy {
        Ok(proxy) => Ok((runtime, proxy, bridge, config)),
        Err(e) => {
            runtime.shutdown(SHUTDOWN_BOUND).await;
            Err(e.into())
        }
    }
}

/// The stdio MCP server with the config files watched: what `pimcp-run` with no command runs for a host.
pub(crate) async fn run_stdio_reloading(ctx: &Ctx, options: RuntimeOptions) -> anyhow::Result<ShutdownReport> {
    exit_on_second_signal();
    let (runtime, proxy, bridge, config) = start(options).await?;
    let reloader = crate::reload::spawn(ctx.opts.clone(), proxy.clone(), config);
    let served = pimcp_proxy::serve_stdio(
        runtime,
        proxy,
        bridge,
        ServeOptions::default().with_shutdown_bound(SHUTDOWN_BOUND),
    )
    .await;
    reloader.abort();
    Ok(served?)
}

/// `pimcp-run --attach URL`: relays this process's stdio host to a running `serve` instance. Ends the process.
pub(crate) fn attach(url: &str, token_file: Option<&Path>) -> anyhow::Result<u8> {
    let inline = std::env::var(TOKEN_ENV).ok();
    let token = token(inline.as_deref(), token_file)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = rt.block_on(pimcp_proxy::attach_stdio(AttachOptions::new(url).with_token(token)));
    let code = match outcome {
        Ok(()) => EXIT_OK,
        Err(e) => {
            errln!("pimcp-run: {e}");
            EXIT_FAILED
        }
    };
    // `exit` skips the telemetry guard in main: flush the relay's spans here, briefly.
    crate::telemetry::shutdown_within(crate::telemetry::EXIT_FLUSH_BOUND);
    // The stdin reader thread cannot be joined; nothing else is left to wait for.
    std::process::exit(i32::from(code));
}

/// A SIGINT/SIGTERM (Ctrl-C, Ctrl-Break on Windows) later than [`pimcp_proxy::SIGNAL_BURST`] after the first ends the
/// process at once (128 + signal number on Unix), after flushing the spans already ended
/// (at most [`crate::telemetry::EXIT_FLUSH_BOUND`]). The runtime's guardian kills the servers' process groups when
/// `pimcp-run` is gone (their Job Objects die with it on Windows), so no child survives.
fn exit_on_second_signal() {
    tokio::spawn(async {
        let Ok(mut signals) = pimcp_proxy::stop_signals() else {
            return;
        };
        let mut first = None;
        loop {
            let code = signals.recv().await.exit_code;
            // A burst of signals (Claude Code sends SIGINT, then SIGTERM 0.1 s later) is one graceful request.
            let first = *first.get_or_insert_with(tokio::time::Instant::now);
            if first.elapsed() >= pimcp_proxy::SIGNAL_BURST {
                errln!("pimcp-run: second signal, exiting now");
                // Spans already ended still reach the collector (bounded: this exit must stay immediate).
                crate::telemetry::shutdown_within(crate::telemetry::EXIT_FLUSH_BOUND);
                std::process::exit(code);
            }
        }
    });
}
