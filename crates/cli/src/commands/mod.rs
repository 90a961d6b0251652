//! The command families of `pimcp-run`, one module each, and what they share: the load options built from the
//! global flags and the mapping from failures to exit codes. New families (`status`, `search`, `call`, `serve`,
//! `auth`, …) add a variant to [`Command`] and a module here.

mod config;
mod edit;
mod init;
mod launch;
mod trust;

use std::path::PathBuf;

use clap::Subcommand;
use pimcp_config::LoadOptions;

use crate::{Cli, EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show, check, describe or preview the configuration.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Detect other hosts' MCP configs and add them to `imports` in pimcp's global file.
    Init(init::InitArgs),
    /// Trust a project directory's config files (they can start programs).
    Trust(trust::TrustArgs),
    /// Add a server: `add NAME -- COMMAND ARGS…` or `add NAME --url URL`.
    Add(edit::AddArgs),
    /// Remove a server from pimcp's files.
    Remove(edit::RemoveArgs),
    /// Enable a server in this project (writes `disabled` into `.pi/mcp.json`).
    Enable(edit::NameArgs),
    /// Disable a server in this project (writes `disabled: true` into `.pi/mcp.json`).
    Disable(edit::NameArgs),
}

/// What every command gets.
pub(crate) struct Ctx {
    pub opts: LoadOptions,
    /// `--project` was given (for `add`/`remove`: the project scope).
    pub project_flag: bool,
}

impl Ctx {
    fn new(cli: &Cli) -> Ctx {
        let project = cli.project.clone().unwrap_or_else(|| PathBuf::from("."));
        let mut opts = LoadOptions::from_process(project, cli.config.clone());
        // `--project .` and the default resolve to the same absolute path; keep it tidy.
        if let Ok(canonical) = std::fs::canonicalize(&opts.project_dir) {
            opts.project_dir = canonical;
        }
        Ctx {
            opts,
            project_flag: cli.project.is_some(),
        }
    }
}

pub(crate) fn run(cli: Cli) -> anyhow::Result<u8> {
    let ctx = Ctx::new(&cli);
    match cli.command {
        None => launch::run(&ctx),
        Some(Command::Config(command)) => config::run(&ctx, command),
        Some(Command::Init(args)) => init::run(&ctx, args),
        Some(Command::Trust(args)) => trust::run(&ctx, args),
        Some(Command::Add(args)) => edit::add(&ctx, args),
        Some(Command::Remove(args)) => edit::remove(&ctx, args),
        Some(Command::Enable(args)) => edit::set_disabled(&ctx, args, false),
        Some(Command::Disable(args)) => edit::set_disabled(&ctx, args, true),
    }
}

/// A failure that carries its exit code.
#[derive(Debug)]
pub(crate) struct Exit {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// A usage error (exit 2).
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    Exit {
        code: EXIT_USAGE,
        message: message.into(),
    }
    .into()
}

/// The exit code of a failure: 2 for usage and configuration errors, 1 otherwise.
pub(crate) fn exit_code_for(err: &anyhow::Error) -> u8 {
    if let Some(exit) = err.downcast_ref::<Exit>() {
        return exit.code;
    }
    match err.downcast_ref::<pimcp_config::Error>() {
        Some(
            pimcp_config::Error::Syntax { .. }
            | pimcp_config::Error::Invalid { .. }
            | pimcp_config::Error::InvalidName { .. }
            | pimcp_config::Error::UnknownServer { .. }
            | pimcp_config::Error::NotEditable { .. },
        ) => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}
