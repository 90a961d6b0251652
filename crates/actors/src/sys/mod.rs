//! The operating system under the actor runtime, one small interface per concern: containing a server's process
//! tree and stopping it (process groups and signals on Unix, a Job Object on Windows), telling whether a child has
//! exited without reaping it, which files are executable and how `PATH` finds a command, the signal that says a
//! child changed state, draining a dead server's stdout, the stream of the `socket` transport (a Unix socket, a
//! named pipe on Windows). `unix.rs` serves Linux and macOS (their differences are gated
//! inside it) and `windows.rs` Windows; nothing else in the crate calls `libc`, `std::os::*`, a platform module of
//! tokio or `/proc`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

/// How a server's process tree is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Politely (SIGTERM); where the OS has no such request (Windows) nothing is sent.
    Terminate,
    /// At once, the whole tree (SIGKILL to the group; `TerminateJobObject`).
    Kill,
}
