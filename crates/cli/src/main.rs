//! `pimcp-run`: argument parsing, exit codes and logging setup. Each command family lives in `commands/`; this file
//! only parses, dispatches and turns the outcome into an exit code. Logs go to stderr; stdout carries the command's
//! output (or, later, the MCP protocol).

#![allow(clippy::print_stdout, reason = "a command's output is printed to stdout")]
// On Linux/glibc the process starts at `entry::main`, skipping std's runtime set-up (see there).
#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]

#[macro_use]
mod output; // first: its `out!` / `outln!` / `err!` / `errln!` macros are used by the modules below
mod commands;
mod libm_shim;
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
    /// Read this file instead of <agentDir>/mcp.json (source 4); `add --global` and `init` write it.
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

/// argv\[1\] that makes pimcp-run panic inside `catch_unwind` and exit 0 once the panic is caught: a binary that
/// cannot unwind aborts or crashes instead. `scripts/build-dist.sh` runs it on the binary it rewrote after linking
/// (BOLT moves landing pads to cold code): a panic in one task must stay that task's, never end the process and every
/// server with it.
const UNWIND_CHECK_ARG: &str = "__pimcp_unwind_check__";

fn unwind_check() -> i32 {
    std::panic::set_hook(Box::new(|_| {}));
    // Getting past this line is the check: the closure cannot return, and a binary that cannot unwind ends inside it.
    let _ = std::panic::catch_unwind(|| std::panic::panic_any(UNWIND_CHECK_ARG));
    0
}

/// The process's entry point elsewhere (other C libraries, and the unit tests' harness): std's `main`.
#[cfg(not(all(target_os = "linux", target_env = "gnu", not(test))))]
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(run())
}

/// Everything `pimcp-run` does, from its arguments to its exit status.
fn run() -> u8 {
    // pimcp-run is its own guardian shim for stdio servers (`pimcp-run __pimcp_shim__ …` never returns).
    pimcp_actors::shim_main_if_requested();
    let cli = Cli::from_env();
    if cli.command.is_none() {
        one_malloc_arena();
    }
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

/// The entry point on Linux/glibc: a C `main` (`#![no_main]`) instead of std's, which before calling Rust's `main`
/// reads and parses `/proc/self/maps` (glibc's `pthread_getattr_np` for the main thread, with `fopen`, `getline`
/// and `sscanf`: four 64 KiB windows of libc's code and one of its data mapped for it, ~0.3 MiB of a served
/// session's 5 MiB) to place a stack-overflow handler. Of what that set-up does, pimcp-run keeps what matters to it:
/// descriptors 0–2 opened on `/dev/null` when closed (so that no file it opens becomes its stdout or stderr),
/// `SIGPIPE` ignored (a write to a closed pipe is an error, not death; std's spawn still gives children the default),
/// a panic that escapes ending the process with status 101, and stdout flushed at exit (`process::exit`). What it
/// gives up: the "has overflowed its stack" message (a stack overflow is a plain SIGSEGV) and the main thread's name
/// in panic messages. std still works without the set-up: on glibc the arguments come from `.init_array`.
/// `pimcp-shim` starts the same way.
#[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
mod entry {
    use std::ffi::{c_char, c_int};

    #[allow(
        unsafe_code,
        reason = "#![no_main] needs an unmangled C `main`; it calls safe code and fcntl/open/signal"
    )]
    #[unsafe(no_mangle)]
    extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
        standard_fds_open();
        // SAFETY: signal(2) with SIG_IGN installs no handler and touches no memory of ours.
        #[allow(unsafe_code, reason = "signal dispositions have no safe std equivalent")]
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        // A panic must not unwind into C (that aborts): it ends the process as std's `main` would.
        let code = std::panic::catch_unwind(super::run).map_or(101, i32::from);
        std::process::exit(code)
    }

    /// Opens `/dev/null` on each of descriptors 0, 1 and 2 that is closed, as std's set-up does: `open` returns the
    /// lowest free descriptor, so the lowest closed one is filled first. Aborts when `/dev/null` cannot be opened.
    fn standard_fds_open() {
        for fd in 0..=2 {
            // SAFETY: F_GETFD only reads the descriptor's flags; no memory is passed.
            #[allow(unsafe_code, reason = "fcntl(2) on a raw descriptor number")]
            let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
            if !closed {
                continue;
            }
            // SAFETY: a NUL-terminated constant path; the descriptor returned is the process's to keep.
            #[allow(unsafe_code, reason = "open(2) of /dev/null into a closed standard descriptor")]
            let opened = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if opened != fd {
                std::process::abort();
            }
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
        if args.first().is_some_and(|arg| arg == UNWIND_CHECK_ARG) {
            std::process::exit(unwind_check());
        }
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

/// Makes every thread allocate from glibc's main malloc arena. With no command pimcp-run is the stdio server (or the
/// `--attach` relay): one thread runs the runtime, and the few helper threads (tokio's blocking pool, the standby
/// shim's spawner; formerly also a schema warm-up) each got an arena of their own, which stays resident after
/// their short work (RssAnon 2,968 -> 2,904 KiB median in the 200-call session). `serve --http` keeps the default:
/// its worker threads allocate concurrently. Called before any second thread exists: a thread's arena is picked on
/// its first allocation.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    // SAFETY: mallopt only sets a malloc tunable from two integers; no memory is passed or touched.
    #[allow(unsafe_code, reason = "mallopt(3) has no safe std equivalent")]
    let _ = unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}

/// Other C libraries: nothing to tune.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}

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
