//! `pimcp-run`: argument parsing, exit codes and logging setup. Each command family lives in `commands/`; this file
//! only parses, dispatches and turns the outcome into an exit code. Logs go to stderr; stdout carries the command's
//! output (or, later, the MCP protocol).

// No unsafe code here: the operating system is reached through the lower crates' OS layers.
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout, reason = "a command's output is printed to stdout")]

#[macro_use]
mod output; // first: its `out!` / `outln!` / `err!` / `errln!` macros are used by the modules below
mod commands;
mod progress;
mod reload;
mod telemetry;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;

/// Exit status: success.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit status: the operation failed (I/O, a server already exists, …).
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit status: usage error or invalid configuration.
pub(crate) const EXIT_USAGE: u8 = 2;

const AFTER_HELP: &str = "\
Exit codes:
  0    success
  1    the operation failed (server unreachable, timeout, needs auth, the tool returned an error, …)
  2    usage error or invalid configuration (also: unknown server or tool, arguments that do not match the schema)
  130  interrupted (Ctrl-C)

With no command, pimcp-run is the stdio MCP server a host starts (SIGHUP reloads the configuration); run from a
terminal it prints how to add it to a host and the status. Read commands take --json (versioned shapes, see
docs/cli.md). Logs go to stderr (PIMCP_LOG or RUST_LOG, e.g. PIMCP_LOG=debug).";

/// One small, robust MCP client runtime: many MCP servers behind a single `mcp` proxy tool.
#[derive(Debug, Parser)]
#[command(name = "pimcp-run", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Read this file instead of `<agentDir>/mcp.json` (source 4); `add --global` and `init` write it.
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Project directory (default: the current directory). For `add` and `remove`, `--project` alone selects the
    /// project's `.mcp.json`.
    #[arg(long, global = true, value_name = "DIR", num_args = 0..=1, default_missing_value = ".")]
    pub project: Option<PathBuf>,
    /// With no command: relay this stdio host to a running `pimcp-run serve --http` instance at URL instead of
    /// starting servers (token from PIMCP_AUTH_TOKEN or --attach-token-file).
    #[arg(long, value_name = "URL")]
    pub attach: Option<String>,
    /// With --attach: read the instance's bearer token from this file.
    #[arg(long, value_name = "PATH", requires = "attach")]
    pub attach_token_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<commands::Command>,
}

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(run())
}

/// Everything `pimcp-run` does, from its arguments to its exit status.
fn run() -> u8 {
    // pimcp-run is its own runtime's guardian (`pimcp-run __pimcp_guardian__` never returns).
    pimcp_actors::guardian_main_if_requested();
    let cli = Cli::from_env();
    // Logs to stderr, OTLP export when configured; dropping the guard at the end flushes spans.
    let _telemetry = telemetry::init();
    let json = cli.command.as_ref().is_some_and(commands::Command::json);
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            let message = output::error_chain(&err);
            errln!("pimcp-run: {message}");
            let code = commands::exit_code_for(&err);
            if json {
                let _ = output::print_json(&serde_json::json!({
                    "schema": "pimcp/error/v1",
                    "error": { "category": commands::error_category(&err), "message": message, "exitCode": code },
                }));
            }
            code
        }
    }
}

impl Cli {
    /// The process's arguments, parsed. The stdio server's own command lines (nothing, or `--config PATH`: what a host
    /// writes in its MCP configuration) are read directly; for anything else clap builds its command tree (every
    /// subcommand's arguments) and parses. Keeping clap off the server's start keeps ~190 KiB of executed code out of
    /// its resident memory (docs/benchmarks.md, "less code on the serving path"); a test holds both readings to the
    /// same result.
    fn from_env() -> Cli {
        let args: Vec<OsString> = std::env::args_os().skip(1).collect();
        Cli::server_args(&args).unwrap_or_else(Cli::parse)
    }

    /// `[]`, `[--config, PATH]` or `[--config=PATH]` without clap; `None` for anything else (clap's to parse or
    /// reject), including a path that is empty or starts with `-`.
    fn server_args(args: &[OsString]) -> Option<Cli> {
        let config: Option<OsString> = match args {
            [] => None,
            [flag, path] if flag == "--config" => Some(path.clone()),
            [arg] => Some(arg.to_str()?.strip_prefix("--config=")?.into()),
            _ => return None,
        };
        if config
            .as_ref()
            .is_some_and(|p| p.is_empty() || p.as_encoded_bytes().starts_with(b"-"))
        {
            return None;
        }
        Some(Cli {
            config: config.map(PathBuf::from),
            project: None,
            attach: None,
            attach_token_file: None,
            command: None,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_servers_command_lines_read_as_clap_reads_them() {
        let server_lines: [&[&str]; 5] = [
            &[],
            &["--config", "/tmp/mcp.json"],
            &["--config=/tmp/mcp.json"],
            &["--config", "配置 dir/mcp.json"],
            &["--config=relative.json"],
        ];
        for args in server_lines {
            let direct = Cli::server_args(&os(args)).unwrap_or_else(|| panic!("{args:?} not read directly"));
            let by_clap = Cli::try_parse_from(std::iter::once("pimcp-run").chain(args.iter().copied())).unwrap();
            assert_eq!(format!("{direct:?}"), format!("{by_clap:?}"), "{args:?}");
        }
        let for_clap: [&[&str]; 10] = [
            &["--config"],
            &["--config="],
            &["--config", "-x"],
            &["--config", "a", "--config", "b"],
            &["--config", "a", "status"],
            &["status"],
            &["--help"],
            &["--version"],
            &["--project"],
            &["--attach", "http://127.0.0.1:1/mcp"],
        ];
        for args in for_clap {
            assert!(Cli::server_args(&os(args)).is_none(), "{args:?}");
        }
    }
}
