//! `pimcp-conformance-client`: the client that `@modelcontextprotocol/conformance client` launches. It reads
//! `MCP_CONFORMANCE_SCENARIO` / `MCP_CONFORMANCE_CONTEXT` and the server URL the suite appends as the last
//! argument, builds an in-memory pimcp configuration with that one server, and runs the scenario's steps through
//! the pimcp runtime (`Runtime::start`, `connect`, `call`). OAuth runs headlessly: `settings.autoAuth` starts the
//! login, [`browser::HeadlessBrowser`] follows the authorization URL to the runtime's loopback listener.
//!
//! Exit status 0 when every step succeeded, 1 otherwise (the error on stderr). Logs go to stderr (`RUST_LOG`).

mod browser;
mod elicit;
mod scenario;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use pimcp_actors::{CallOptions, Runtime, RuntimeOptions};
use pimcp_auth::{CallbackPort, MemoryStore};
use pimcp_config::{LoadOptions, Severity};
use serde_json::Value;

use crate::scenario::{SERVER, Step};

/// Bound on the final shutdown (the suite's own timeout is 30 s per scenario).
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("pimcp-conformance-client: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pimcp-conformance-client: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::args()
        .skip(1)
        .last()
        .context("usage: pimcp-conformance-client SERVER_URL (the conformance suite appends it)")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Option<Value> = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => Some(serde_json::from_str(&text).context("MCP_CONFORMANCE_CONTEXT is not JSON")?),
        Err(_) => None,
    };
    tracing::info!(%scenario, %url, "conformance scenario");
    let plan = scenario::plan(&scenario, &url, context.as_ref())?;

    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let config = pimcp_config::load_in_memory(&plan.config(), &LoadOptions::new(dir.path(), dir.path()));
    if let Some(problem) = config.problems.iter().find(|p| p.severity == Severity::Error) {
        anyhow::bail!("the generated configuration is invalid: {problem}");
    }
    let mut options = RuntimeOptions::new(config, dir.path().join("agent"), dir.path().join("data"));
    options.handlers.elicitation = Some(Arc::new(elicit::AcceptDefaults));
    options.auth.store = Some(Arc::new(MemoryStore::new()));
    options.auth.browser = Some(Arc::new(browser::HeadlessBrowser::new()?));
    // Any free port: the suite may run scenarios in parallel.
    options.auth.callback_port = Some(CallbackPort::Preferred(0));
    let runtime = Runtime::start(options).await.context("starting the pimcp runtime")?;
    let outcome = execute(&runtime, &plan.steps).await;
    runtime.shutdown(SHUTDOWN_BOUND).await;
    outcome
}

async fn execute(runtime: &Runtime, steps: &[Step]) -> anyhow::Result<()> {
    let scoped = || CallOptions {
        server: Some(SERVER.to_owned()),
        ..CallOptions::default()
    };
    for step in steps {
        match step {
            Step::Connect => {
                runtime.connect(SERVER).await.context("connect")?;
                let tools = runtime.list_tools(Some(SERVER))?;
                tracing::info!(tools = tools.len(), "connected");
            }
            Step::Call { tool, args } => {
                let output = runtime
                    .call(tool, args.as_object().cloned(), scoped())
                    .await
                    .with_context(|| format!("calling `{tool}`"))?;
                tracing::info!(%tool, result = %output.text(), "called");
            }
            Step::CallIfListed(tool) => {
                let listed = runtime.list_tools(Some(SERVER))?.iter().any(|t| t.original == *tool);
                if listed {
                    let output = runtime
                        .call(tool, Some(serde_json::Map::new()), scoped())
                        .await
                        .with_context(|| format!("calling `{tool}`"))?;
                    tracing::info!(%tool, result = %output.text(), "called");
                }
            }
        }
    }
    Ok(())
}
