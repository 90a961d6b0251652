//! `pimcp-run add | remove | enable | disable`: minimal, atomic edits of pimcp's own files (see
//! `pimcp_config::add_server` and friends for what each edit touches).

use clap::Args;
use pimcp_config::{AddServer, EditOutcome, EditScope, ServerSpec};

use super::{Ctx, usage};
use crate::EXIT_OK;
use crate::output::path;

#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The server's name.
    pub name: String,
    /// Streamable HTTP endpoint (instead of `-- COMMAND ARGS…`).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Write to pimcp's global file (the default).
    #[arg(long, conflicts_with = "project")]
    pub global: bool,
    /// Environment variable for a stdio server, `KEY=VALUE` (repeatable; prefer `KEY=${VAR}` for secrets).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// HTTP header, `Name: value` (repeatable; prefer `${VAR}` for secrets).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RemoveArgs {
    pub name: String,
    /// Only from pimcp's global files.
    #[arg(long, conflicts_with = "project")]
    pub global: bool,
}

#[derive(Debug, Args)]
pub(crate) struct NameArgs {
    pub name: String,
}

fn report(ctx: &Ctx, verb: &str, name: &str, outcome: &EditOutcome) {
    let home = &ctx.opts.home;
    if !outcome.changed {
        outln!("`{name}`: nothing to change in {}", path(&outcome.path, home));
        return;
    }
    let mut line = format!("{verb} `{name}` in {}", path(&outcome.path, home));
    if outcome.created {
        line.push_str(" (new file)");
    }
    if let Some(backup) = &outcome.backup {
        line.push_str(&format!(" (previous content in {})", path(backup, home)));
    }
    outln!("{line}");
}

pub(crate) fn add(ctx: &Ctx, args: AddArgs) -> anyhow::Result<u8> {
    let spec = match (args.url, args.command.split_first()) {
        (Some(_), Some(_)) => return Err(usage("give either `--url URL` or `-- COMMAND ARGS…`, not both")),
        (None, None) => return Err(usage("give `--url URL` or `-- COMMAND ARGS…`")),
        (Some(url), None) => ServerSpec::Http { url },
        (None, Some((command, rest))) => ServerSpec::Stdio {
            command: command.clone(),
            args: rest.to_vec(),
        },
    };
    let is_stdio = matches!(spec, ServerSpec::Stdio { .. });
    if is_stdio && !args.headers.is_empty() {
        return Err(usage("`--header` applies to HTTP servers (`--url`)"));
    }
    if !is_stdio && !args.env.is_empty() {
        return Err(usage("`--env` applies to stdio servers (`-- COMMAND`)"));
    }
    let env = args
        .env
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| usage("`--env` takes KEY=VALUE"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let headers = args
        .headers
        .iter()
        .map(|pair| {
            pair.split_once(':')
                .filter(|(k, _)| !k.trim().is_empty())
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| usage("`--header` takes 'Name: value'"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let scope = if ctx.project_flag && !args.global {
        EditScope::Project
    } else {
        EditScope::Global
    };
    let request = AddServer {
        name: args.name.clone(),
        spec,
        env,
        headers,
        scope,
    };
    let outcome = pimcp_config::add_server(&ctx.opts, &request)?;
    report(ctx, "added", &args.name, &outcome);
    if scope == EditScope::Project && !pimcp_config::is_trusted(&ctx.opts.project_dir, &ctx.opts.data_dir) {
        outln!(
            "note: this project is not trusted, so its servers do not start; run `{}`",
            pimcp_config::trust_command(&ctx.opts.project_dir)
        );
    }
    Ok(EXIT_OK)
}

pub(crate) fn remove(ctx: &Ctx, args: RemoveArgs) -> anyhow::Result<u8> {
    let scope = if args.global {
        Some(EditScope::Global)
    } else if ctx.project_flag {
        Some(EditScope::Project)
    } else {
        None
    };
    for outcome in pimcp_config::remove_server(&ctx.opts, &args.name, scope)? {
        report(ctx, "removed", &args.name, &outcome);
    }
    Ok(EXIT_OK)
}

pub(crate) fn set_disabled(ctx: &Ctx, args: NameArgs, disabled: bool) -> anyhow::Result<u8> {
    let outcome = pimcp_config::set_disabled(&ctx.opts, &args.name, disabled)?;
    report(ctx, if disabled { "disabled" } else { "enabled" }, &args.name, &outcome);
    Ok(EXIT_OK)
}
