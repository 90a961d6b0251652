//! The operating system under the proxy, one small interface per concern: the host's stdin and stdout on the
//! reactor, and the signals that stop `pimcp-run` and reload its configuration. `unix.rs` serves
//! Linux and macOS, `windows.rs` Windows; nothing else in the crate calls `libc`, `std::os::*` or a platform module
//! of tokio.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::{DirectStdin, DirectStdout, ReloadSignal, StopSignals};
#[cfg(unix)]
pub(crate) use unix::{direct_stdin, direct_stdout};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{DirectStdin, DirectStdout, ReloadSignal, StopSignals};
#[cfg(windows)]
pub(crate) use windows::{direct_stdin, direct_stdout};

/// A request to stop that reached the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopSignal {
    /// As logged: `SIGINT`, `SIGTERM`, `Ctrl-C`, `Ctrl-Break`, `console close`.
    pub name: &'static str,
    /// The exit code of a process it ends at once (128 + the signal number on Unix).
    pub exit_code: i32,
}

/// Watches the stop signals (SIGINT and SIGTERM; Ctrl-C, Ctrl-Break and the console's close on Windows).
pub fn stop_signals() -> std::io::Result<StopSignals> {
    StopSignals::new()
}

/// Watches the reload signal (SIGHUP); Windows has none (`Err`), the configuration files are watched instead.
pub fn reload_signal() -> std::io::Result<ReloadSignal> {
    ReloadSignal::new()
}
