//! `pimcp-run config show | check | schema | import`: the merged configuration with provenance (secrets redacted),
//! validation with every problem listed, the JSON Schema, and a preview of host imports.

use clap::{Args, Subcommand};
use pimcp_config::imports::HostKind;
use pimcp_config::{ConfigProblem, ConfigView, Origin, Severity, json_schema};
use serde_json::json;

use super::{Ctx, usage};
use crate::output::{compact, path, print_json};
use crate::{EXIT_OK, EXIT_USAGE};

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Show the merged configuration: every server field with the file that set it (secrets redacted).
    Show(JsonFlag),
    /// Validate every config file; exit 2 listing each problem when something is invalid.
    Check(JsonFlag),
    /// Print the JSON Schema of a config file.
    Schema,
    /// Show what host imports add (the active ones and every host with a config file).
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub(crate) struct JsonFlag {
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// Preview only this host (repeatable): cursor, claude-code, claude-desktop, opencode, vscode, windsurf, codex.
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, command: ConfigCommand) -> anyhow::Result<u8> {
    match command {
        ConfigCommand::Show(flag) => show(ctx, flag.json),
        ConfigCommand::Check(flag) => check(ctx, flag.json),
        ConfigCommand::Schema => {
            print_json(&json_schema())?;
            Ok(EXIT_OK)
        }
        ConfigCommand::Import(args) => import(ctx, args),
    }
}

fn origin(origin: &Origin, ctx: &Ctx) -> String {
    let home = &ctx.opts.home;
    match origin {
        Origin::File { path: p, .. } => path(p, home),
        Origin::Import { host, path: p } => format!("{} (import {host})", path(p, home)),
        Origin::Plugin { plugin, path: p } => format!("{} (plugin {plugin})", path(p, home)),
        Origin::InMemory => "in-memory".into(),
    }
}

fn problem_line(problem: &ConfigProblem, ctx: &Ctx) -> String {
    let level = match problem.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let mut shown = problem.clone();
    if let Some(p) = &problem.path {
        shown.path = Some(path(p, &ctx.opts.home).into());
    }
    format!("{level}: {shown}")
}

fn show(ctx: &Ctx, json: bool) -> anyhow::Result<u8> {
    let (_, view) = pimcp_config::explain(&ctx.opts);
    if json {
        print_json(&view)?;
        return Ok(EXIT_OK);
    }
    out!("{}", render_show(&view, ctx));
    Ok(EXIT_OK)
}

fn render_show(view: &ConfigView, ctx: &Ctx) -> String {
    let mut out = String::new();
    let home = &ctx.opts.home;
    out.push_str(&format!(
        "Project: {}\n\nSources (lowest precedence first):\n",
        path(&view.project_dir, home)
    ));
    for source in &view.sources {
        let state = match (source.exists, source.loaded, source.trusted) {
            (false, _, _) => "missing",
            (true, false, _) => "error",
            (true, true, Some(false)) => "untrusted",
            (true, true, _) => "loaded",
        };
        out.push_str(&format!("  {state:<10} {}\n", origin(&source.origin, ctx)));
    }
    out.push_str("\nSettings:\n");
    if view.settings.is_empty() {
        out.push_str("  (defaults)\n");
    }
    let width = view.settings.keys().map(String::len).max().unwrap_or(0);
    for (key, field) in &view.settings {
        out.push_str(&format!(
            "  {key:<width$}  {}  ← {}\n",
            compact(&field.value),
            origin(&field.from, ctx)
        ));
    }
    out.push_str(&format!("\nServers ({}):\n", view.servers.len()));
    if view.servers.is_empty() {
        out.push_str("  (none)\n");
    }
    for server in &view.servers {
        out.push_str(&format!("  {}  [{}, {}]", server.name, server.status, server.transport));
        if let Some(reason) = &server.reason {
            out.push_str(&format!(" {reason}"));
        }
        out.push('\n');
        let width = server.fields.keys().map(String::len).max().unwrap_or(0);
        for (key, field) in &server.fields {
            out.push_str(&format!(
                "      {key:<width$}  {}  ← {}\n",
                compact(&field.value),
                origin(&field.from, ctx)
            ));
        }
    }
    if !view.problems.is_empty() {
        out.push_str(&format!("\nProblems ({}):\n", view.problems.len()));
        for problem in &view.problems {
            out.push_str(&format!("  {}\n", problem_line(problem, ctx)));
        }
    }
    out
}

fn check(ctx: &Ctx, json: bool) -> anyhow::Result<u8> {
    let config = pimcp_config::load(&ctx.opts);
    let errors = config.problems.iter().filter(|p| p.is_error()).count();
    let warnings = config.problems.len() - errors;
    let code = if errors > 0 { EXIT_USAGE } else { EXIT_OK };
    if json {
        print_json(&json!({
            "valid": errors == 0,
            "errors": errors,
            "warnings": warnings,
            "servers": config.servers.len(),
            "problems": config.problems,
        }))?;
        return Ok(code);
    }
    for problem in &config.problems {
        outln!("{}", problem_line(problem, ctx));
    }
    if errors == 0 {
        let available = config
            .servers
            .iter()
            .filter(|s| s.availability == pimcp_config::Availability::Available)
            .count();
        outln!(
            "configuration is valid: {} server{} ({available} available), {warnings} warning{}",
            config.servers.len(),
            plural(config.servers.len()),
            plural(warnings)
        );
    } else {
        outln!(
            "configuration is invalid: {errors} error{}, {warnings} warning{}",
            plural(errors),
            plural(warnings)
        );
    }
    Ok(code)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn import(ctx: &Ctx, args: ImportArgs) -> anyhow::Result<u8> {
    let mut hosts = Vec::new();
    for id in &args.hosts {
        let host = HostKind::from_id(id).ok_or_else(|| {
            let known: Vec<&str> = HostKind::ALL.iter().map(|h| h.id()).collect();
            usage(format!("unknown host `{id}`; expected one of {}", known.join(", ")))
        })?;
        hosts.push(host);
    }
    let previews = pimcp_config::preview_imports(&ctx.opts, &hosts);
    if args.json {
        print_json(&json!({ "hosts": previews }))?;
        return Ok(EXIT_OK);
    }
    if previews.is_empty() {
        outln!(
            "no host MCP configs found (looked for: {})",
            HostKind::ALL.map(|h| h.id()).join(", ")
        );
        return Ok(EXIT_OK);
    }
    let home = &ctx.opts.home;
    for preview in &previews {
        let state = if preview.active {
            "imported"
        } else {
            "not imported; add it with `pimcp-run init`"
        };
        outln!("{} ({state})", preview.host);
        if preview.files.is_empty() {
            outln!("  no config file found");
        }
        for file in &preview.files {
            let mut line = format!("  {} ({})", path(&file.path, home), file.scope);
            if file.trusted == Some(false) {
                line.push_str(" untrusted");
            }
            if let Some(error) = &file.error {
                line.push_str(&format!(" error: {error}"));
            }
            outln!("{line}");
        }
        let width = preview.servers.iter().map(|s| s.name.len()).max().unwrap_or(0);
        for server in &preview.servers {
            let by = if server.by.is_empty() {
                String::new()
            } else {
                format!(" ({})", server.by.join(", "))
            };
            outln!(
                "    {:<width$}  {:<6} {}{by}",
                server.name,
                server.transport,
                server.status
            );
        }
        for note in &preview.notes {
            outln!("  {}", problem_line(note, ctx));
        }
    }
    Ok(EXIT_OK)
}
