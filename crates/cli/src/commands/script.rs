//! `pimcp-run script FILE|- [--timeout SECS] [--json]`: run an `mcpScript` (the body of an async JavaScript function
//! that calls `tools.call`, `tools.search` and `tools.describe`) against the configured servers, as a host's model
//! would, and print its value and `console` lines. Without the output guard: a person gets the whole text. The exit
//! code is 0 when the script returned, 1 when it failed (2 for a usage error).

use std::io::Read as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use pimcp_config::ScriptLimits;
use pimcp_proxy::{CallContext, ScriptOutcome};
use serde_json::{Value, json};

use super::session::{SessionOptions, block_on, with_session};
use super::{Ctx, usage};
use crate::output::print_json;
use crate::{EXIT_FAILED, EXIT_OK};

#[derive(Debug, Args)]
pub(crate) struct ScriptArgs {
    /// The script's file; `-` reads it from stdin.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Wall time of the script in seconds (default: `settings.scriptMode.timeoutMs`, 30 s).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Machine-readable output (`pimcp/script/v1`), also for failed scripts.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, args: ScriptArgs) -> anyhow::Result<u8> {
    let code = read_code(&args.file)?;
    let timeout = match args.timeout {
        Some(secs) if secs.is_finite() && secs > 0.0 => Some(Duration::from_secs_f64(secs)),
        Some(_) => return Err(usage("`--timeout` takes a positive number of seconds")),
        None => None,
    };
    block_on(with_session(ctx, SessionOptions { progress: true }, async |session| {
        session.progress.set_label("running the script".to_string());
        let mut limits = session.proxy.config().settings.script.unwrap_or(ScriptLimits::DEFAULT);
        if let Some(timeout) = timeout {
            limits.timeout = timeout;
        }
        let outcome = session
            .proxy
            .script_with_limits(&code, limits, &CallContext::default())
            .await;
        session.progress.stop().await;
        if args.json {
            print_json(&script_json(&outcome))?;
        } else {
            match &outcome.value {
                Ok(_) => outln!("{}", outcome.text()),
                Err(_) => errln!("pimcp-run: {}", outcome.text()),
            }
        }
        Ok(if outcome.value.is_ok() { EXIT_OK } else { EXIT_FAILED })
    }))
}

fn read_code(file: &std::path::Path) -> anyhow::Result<String> {
    let code = if file.as_os_str() == "-" {
        let mut code = String::new();
        std::io::stdin()
            .read_to_string(&mut code)
            .map_err(|e| usage(format!("cannot read the script from stdin: {e}")))?;
        code
    } else {
        let bytes = pimcp_config::read_bounded(file, pimcp_config::CONFIG_FILE_LIMIT)
            .map_err(|e| usage(format!("cannot read the script {}: {e}", file.display())))?;
        String::from_utf8(bytes).map_err(|_| usage(format!("the script {} is not UTF-8", file.display())))?
    };
    if code.trim().is_empty() {
        return Err(usage("the script is empty"));
    }
    Ok(code)
}

/// `pimcp/script/v1`.
fn script_json(outcome: &ScriptOutcome) -> Value {
    let (value, error) = match &outcome.value {
        Ok(value) => (value.clone(), Value::Null),
        Err(e) => (
            Value::Null,
            json!({ "category": e.category().as_str(), "message": e.to_string() }),
        ),
    };
    json!({
        "schema": "pimcp/script/v1",
        "ok": outcome.value.is_ok(),
        "value": value,
        "error": error,
        "logs": outcome.logs,
        "droppedLogs": outcome.dropped_logs,
        "calls": outcome.calls.iter().map(|c| json!({
            "tool": c.tool,
            "category": c.category,
            "elapsedMs": c.elapsed.as_millis() as u64,
        })).collect::<Vec<_>>(),
    })
}
