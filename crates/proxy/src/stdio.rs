//! The host's stdin/stdout as async streams on the tokio reactor, for `pimcp-run`'s stdio MCP server.
//!
//! When stdin and stdout are pipes or sockets (what every host passes on Unix), both are put in non-blocking mode and
//! registered with the reactor: a request is read and an answer written by the task that handles them, with no
//! thread hop (tokio's `stdout()` hands each write to the blocking pool; [`crate::stdin_pipe`] relays stdin
//! through a thread). Anything else (a terminal, a regular file, `/dev/null`, any handle on Windows) falls back to
//! those two. The OS side lives in `crate::sys`.
//!
//! The non-blocking flag is set on the open file description, which other processes holding the same description
//! would see. Only our end of the host's pipe holds it in practice; stdout is left alone when stderr is the same
//! file (`2>&1`), because a non-blocking stderr could make a log write fail.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::sys::{DirectStdin, DirectStdout};

/// The host's stdin.
#[derive(Debug)]
pub enum HostStdin {
    /// A pipe or a socket, read on the reactor.
    Direct(DirectStdin),
    /// Anything else, relayed by a thread ([`crate::stdin_pipe`]).
    Relayed(tokio::io::DuplexStream),
}

/// The host's stdout.
#[derive(Debug)]
pub enum HostStdout {
    /// A pipe or a socket, written on the reactor.
    Direct(DirectStdout),
    /// Anything else: tokio's stdout (the blocking pool).
    Blocking(tokio::io::Stdout),
}

impl HostStdin {
    /// Whether the reactor reads it directly (no relay thread).
    pub fn is_direct(&self) -> bool {
        matches!(self, HostStdin::Direct(_))
    }
}

impl HostStdout {
    /// Whether the reactor writes it directly (no blocking pool).
    pub fn is_direct(&self) -> bool {
        matches!(self, HostStdout::Direct(_))
    }
}

/// The host's stdin and stdout; must be called inside a tokio runtime with I/O enabled.
pub fn host_stdio() -> (HostStdin, HostStdout) {
    let stdin = match crate::sys::direct_stdin() {
        Ok(Some(s)) => HostStdin::Direct(s),
        Ok(None) => HostStdin::Relayed(crate::server::stdin_pipe()),
        Err(e) => {
            tracing::debug!(error = %e, "stdin cannot be read on the reactor; relaying it through a thread");
            HostStdin::Relayed(crate::server::stdin_pipe())
        }
    };
    let stdout = match crate::sys::direct_stdout() {
        Ok(Some(s)) => HostStdout::Direct(s),
        Ok(None) => HostStdout::Blocking(tokio::io::stdout()),
        Err(e) => {
            tracing::debug!(error = %e, "stdout cannot be written on the reactor; using the blocking pool");
            HostStdout::Blocking(tokio::io::stdout())
        }
    };
    (stdin, stdout)
}

impl AsyncRead for HostStdin {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostStdin::Direct(d) => Pin::new(d).poll_read(cx, buf),
            HostStdin::Relayed(d) => Pin::new(d).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for HostStdout {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HostStdout::Direct(d) => Pin::new(d).poll_write(cx, buf),
            HostStdout::Blocking(b) => Pin::new(b).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HostStdout::Direct(d) => Pin::new(d).poll_write_vectored(cx, bufs),
            HostStdout::Blocking(b) => Pin::new(b).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            HostStdout::Direct(d) => d.is_write_vectored(),
            HostStdout::Blocking(b) => b.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostStdout::Direct(d) => Pin::new(d).poll_flush(cx),
            HostStdout::Blocking(b) => Pin::new(b).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostStdout::Direct(d) => Pin::new(d).poll_shutdown(cx),
            HostStdout::Blocking(b) => Pin::new(b).poll_shutdown(cx),
        }
    }
}
