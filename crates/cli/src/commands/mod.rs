//! The command families of `pimcp-run`, one module each, and what they share: the load options built from the
//! global flags, the in-process runtime session (`session`), and the mapping from failures to exit codes and
//! `--json` error objects. New families add a variant to [`Command`] and a module here.

mod auth;
mod call;
mod config;
mod connect;
mod describe;
mod edit;
mod init;
mod launch;
mod prompts;
mod remote;
mod script;
mod search;
mod serve;
mod session;
mod status;
mod trust;
mod watch;

use std::path::PathBuf;

use clap::Subcommand;
use pimcp_config::LoadOptions;

use crate::{Cli, EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// OAuth logins of HTTP servers: `auth login|complete|logout|status`.
    #[command(subcommand)]
    Auth(auth::AuthCommand),
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
    /// Show every server's state (from the metadata cache, or live with `--connect`).
    Status(status::StatusArgs),
    /// Search the tools of every server (works offline from the metadata cache).
    Search(search::SearchArgs),
    /// Show one tool in full: description, parameters, input and output schemas.
    Describe(describe::DescribeArgs),
    /// Call a tool: `call NAME '{"arg": "value"}'`.
    Call(call::CallArgs),
    /// Run a script that chains tool calls (`mcpScript`): `script FILE` or `script -` for stdin.
    Script(script::ScriptArgs),
    /// Connect a server now, refresh its cached metadata and list its tools.
    Connect(connect::ConnectArgs),
    /// List the prompts servers offer.
    Prompts(prompts::PromptsArgs),
    /// Serve MCP over Streamable HTTP for many host sessions sharing one set of servers.
    Serve(serve::ServeArgs),
}

impl Command {
    /// Whether the command was asked for machine-readable output (failures are then reported as JSON too).
    pub(crate) fn json(&self) -> bool {
        match self {
            Command::Auth(c) => c.json(),
            Command::Status(a) => a.json,
            Command::Search(a) => a.json,
            Command::Describe(a) => a.json,
            Command::Call(a) => a.json,
            Command::Script(a) => a.json,
            Command::Connect(a) => a.json,
            Command::Prompts(a) => a.json,
            Command::Config(_)
            | Command::Init(_)
            | Command::Trust(_)
            | Command::Add(_)
            | Command::Remove(_)
            | Command::Enable(_)
            | Command::Disable(_)
            | Command::Serve(_) => false,
        }
    }
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
    if cli.attach.is_some() && cli.command.is_some() {
        return Err(usage(
            "--attach relays a host to a running instance; it takes no command",
        ));
    }
    match cli.command {
        None => match cli.attach.as_deref() {
            Some(url) => serve::attach(url, cli.attach_token_file.as_deref()),
            None => launch::run(&ctx),
        },
        Some(command) => run_command(&ctx, command),
    }
}

/// The commands.
fn run_command(ctx: &Ctx, command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Auth(command) => auth::run(ctx, command),
        Command::Config(command) => config::run(ctx, command),
        Command::Init(args) => init::run(ctx, args),
        Command::Trust(args) => trust::run(ctx, args),
        Command::Add(args) => edit::add(ctx, args),
        Command::Remove(args) => edit::remove(ctx, args),
        Command::Enable(args) => edit::set_disabled(ctx, args, false),
        Command::Disable(args) => edit::set_disabled(ctx, args, true),
        Command::Status(args) => status::run(ctx, args),
        Command::Search(args) => search::run(ctx, args),
        Command::Describe(args) => describe::run(ctx, args),
        Command::Call(args) => call::run(ctx, args),
        Command::Script(args) => script::run(ctx, args),
        Command::Connect(args) => connect::run(ctx, args),
        Command::Prompts(args) => prompts::run(ctx, args),
        Command::Serve(args) => serve::run(ctx, args),
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

/// The exit code of a failure: 2 for usage and configuration errors (including an unknown server or tool and
/// arguments that do not match a tool's schema), 1 otherwise.
pub(crate) fn exit_code_for(err: &anyhow::Error) -> u8 {
    if let Some(exit) = err.downcast_ref::<Exit>() {
        return exit.code;
    }
    if let Some(failure) = err.downcast_ref::<Failure>() {
        return exit_code_for_category(failure.category);
    }
    if let Some(err) = err.downcast_ref::<pimcp_actors::Error>() {
        return exit_code_for_category(err.category().as_str());
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

/// 2 for what the person must fix in the command line or configuration, 1 for everything that failed at run time.
pub(crate) fn exit_code_for_category(category: &str) -> u8 {
    match category {
        "unknown-tool" | "validation" | "config" | "untrusted" | "usage" => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

/// A failure reported by the runtime or the proxy, with its error category (`unknown-tool`, `connection`, …).
#[derive(Debug)]
pub(crate) struct Failure {
    pub category: &'static str,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl From<pimcp_proxy::ProxyError> for Failure {
    fn from(e: pimcp_proxy::ProxyError) -> Failure {
        let mut message = e.message.clone();
        for hint in &e.hints {
            message.push('\n');
            message.push_str(hint);
        }
        Failure {
            category: e.category.as_str(),
            message,
        }
    }
}

/// The `category` of a failure in `--json` error objects: an error category, or `usage` / `interrupted`.
pub(crate) fn error_category(err: &anyhow::Error) -> &'static str {
    if let Some(exit) = err.downcast_ref::<Exit>() {
        return match exit.code {
            EXIT_USAGE => "usage",
            session::EXIT_INTERRUPTED => "interrupted",
            _ => "other",
        };
    }
    if let Some(failure) = err.downcast_ref::<Failure>() {
        return failure.category;
    }
    if let Some(err) = err.downcast_ref::<pimcp_actors::Error>() {
        return err.category().as_str();
    }
    if exit_code_for(err) == EXIT_USAGE {
        "config"
    } else {
        "other"
    }
}
