//! `pimcp-run` with no command. Hosts start it this way and speak MCP over stdio (stdin is not a terminal): the
//! runtime starts on one thread with `pimcp-run` itself as its guardian and the `mcp` proxy is served until stdin
//! closes,
//! SIGINT or SIGTERM. A person at a terminal gets the config entry to paste into a host and a one-screen summary
//! instead of a silent wait.

use std::io::IsTerminal;
use std::time::SystemTime;

use super::session::{SessionOptions, block_on, load_config, runtime_options, with_session};
use super::{Ctx, status};
use crate::output::Style;
use crate::{EXIT_FAILED, EXIT_OK};

/// The entry hosts need.
pub(crate) const HOST_ENTRY: &str = r#"{"mcpServers": {"pimcp": {"command": "pimcp-run"}}}"#;

pub(crate) fn run(ctx: &Ctx) -> anyhow::Result<u8> {
    if !std::io::stdin().is_terminal() {
        serve_stdio(ctx);
    }
    hint(ctx)
}

/// Serves MCP over stdio and ends the process: the blocking stdin reader cannot be joined, so the process exits
/// as soon as the runtime has shut down (every server process is gone by then).
///
/// One thread runs everything (a current-thread tokio runtime): a host's request, the upstream call and the answer
/// are handled by the same thread without waking another one, which on a busy machine is most of a proxied call's
/// overhead. Blocking work (config reload, file reads) still goes to tokio's blocking pool.
fn serve_stdio(ctx: &Ctx) -> ! {
    let config = load_config(ctx);
    let options = runtime_options(ctx, config);
    let code = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => {
            // Config files are watched and SIGHUP reloads; an invalid config keeps the running setup.
            let served = rt.block_on(super::serve::run_stdio_reloading(ctx, options));
            match served {
                Ok(report) => {
                    tracing::debug!(graceful = report.graceful, elapsed = ?report.elapsed, "served");
                    EXIT_OK
                }
                Err(e) => {
                    errln!("pimcp-run: {e}");
                    EXIT_FAILED
                }
            }
        }
        Err(e) => {
            errln!("pimcp-run: cannot start the async runtime: {e}");
            EXIT_FAILED
        }
    };
    // `exit` skips destructors: flush the OpenTelemetry exporter first.
    crate::telemetry::shutdown();
    std::process::exit(i32::from(code));
}

fn hint(ctx: &Ctx) -> anyhow::Result<u8> {
    err!(
        "pimcp-run fronts all your MCP servers with one `mcp` tool. Hosts (Claude Code, Cursor, Codex, Pi, Zed, VS Code, …)\n\
         start it over stdio; add this entry to the host's MCP config:\n\n  {HOST_ENTRY}\n\n"
    );
    let snapshot = block_on(with_session(ctx, SessionOptions::default(), async |session| {
        Ok(session.handle().status())
    }))?;
    err!("{}", status::render(&snapshot, Style::stderr(), SystemTime::now()));
    errln!("\nRun `pimcp-run --help` for the commands (status, search, describe, call, connect, prompts, …).");
    Ok(EXIT_OK)
}
