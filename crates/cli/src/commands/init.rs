//! `pimcp-run init`: detect the hosts that have MCP config files, show the `imports` line, and (after confirmation,
//! or with `--yes`) add it to pimcp's global file with a backup. Without a terminal and without `--yes` it only
//! shows what it would write.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;
use pimcp_config::imports::{self, HostKind};
use serde_json::Value;

use super::Ctx;
use crate::EXIT_OK;
use crate::output::path;

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// Write without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub(crate) fn run(ctx: &Ctx, args: InitArgs) -> anyhow::Result<u8> {
    let home = &ctx.opts.home;
    let detected = imports::detect_hosts(&ctx.opts.import_env());
    if detected.is_empty() {
        outln!(
            "no host MCP configs found (looked for: {})",
            HostKind::ALL.map(|h| h.id()).join(", ")
        );
        return Ok(EXIT_OK);
    }
    outln!("Found MCP configs of:");
    for (host, files) in &detected {
        let files: Vec<String> = files.iter().map(|f| path(f, home)).collect();
        outln!("  {:<15} {}", host.id(), files.join(", "));
    }
    let target = ctx.opts.global_file();
    let listed = listed_imports(&target);
    let new: Vec<HostKind> = detected
        .iter()
        .map(|(h, _)| *h)
        .filter(|h| !listed.contains(h))
        .collect();
    if new.is_empty() {
        outln!("\n{} already imports all of them.", path(&target, home));
        return Ok(EXIT_OK);
    }
    let mut all = listed.clone();
    all.extend(new.iter().copied());
    let line = format!(
        "\"imports\": [{}]",
        all.iter()
            .map(|h| format!("\"{}\"", h.id()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    outln!("\nThe line for {}:\n  {line}", path(&target, home));
    let confirmed = if args.yes {
        true
    } else if std::io::stdin().is_terminal() {
        err!("Write it (a backup of the current file is kept)? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    } else {
        outln!("(not written: run `pimcp-run init --yes` to write it)");
        return Ok(EXIT_OK);
    };
    if !confirmed {
        outln!("not written");
        return Ok(EXIT_OK);
    }
    let outcome = pimcp_config::add_imports(&ctx.opts, &new)?;
    match &outcome.backup {
        Some(backup) => outln!(
            "wrote {} (previous content in {})",
            path(&outcome.path, home),
            path(backup, home)
        ),
        None => outln!("wrote {}", path(&outcome.path, home)),
    }
    Ok(EXIT_OK)
}

/// Hosts the target file already lists (nothing when it is absent or unreadable; the edit reports those errors).
fn listed_imports(target: &std::path::Path) -> Vec<HostKind> {
    let Ok(text) = pimcp_config::read_text_bounded(target, pimcp_config::CONFIG_FILE_LIMIT) else {
        return Vec::new();
    };
    let Ok(Some(value)) = pimcp_config::parse_jsonc(&text) else {
        return Vec::new();
    };
    value
        .get("imports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(HostKind::from_id)
        .collect()
}
