//! The host's stdin/stdout as async streams on the tokio reactor, for `pimcp-run`'s stdio MCP server.
//!
//! When stdin and stdout are pipes or sockets (what every host passes), both are put in non-blocking mode and
//! registered with the reactor: a request is read and an answer written by the task that handles them, with no
//! thread hop (tokio's `stdout()` hands each write to the blocking pool; [`crate::stdin_pipe`] relays stdin
//! through a thread). Anything else (a terminal, a regular file, `/dev/null`) falls back to those two.
//!
//! The non-blocking flag is set on the open file description, which other processes holding the same description
//! would see. Only our end of the host's pipe holds it in practice; stdout is left alone when stderr is the same
//! file (`2>&1`), because a non-blocking stderr could make a log write fail.

use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The host's stdin.
#[derive(Debug)]
pub enum HostStdin {
    /// A pipe, read on the reactor.
    Pipe(tokio::net::unix::pipe::Receiver),
    /// A socket (e.g. node's `child_process` stdio), read on the reactor.
    Socket(tokio::net::UnixStream),
    /// Anything else, relayed by a thread ([`crate::stdin_pipe`]).
    Relayed(tokio::io::DuplexStream),
}

/// The host's stdout.
#[derive(Debug)]
pub enum HostStdout {
    /// A pipe, written on the reactor.
    Pipe(tokio::net::unix::pipe::Sender),
    /// A socket, written on the reactor.
    Socket(tokio::net::UnixStream),
    /// Anything else: tokio's stdout (the blocking pool).
    Blocking(tokio::io::Stdout),
}

impl HostStdin {
    /// Whether the reactor reads it directly (no relay thread).
    pub fn is_direct(&self) -> bool {
        !matches!(self, HostStdin::Relayed(_))
    }
}

impl HostStdout {
    /// Whether the reactor writes it directly (no blocking pool).
    pub fn is_direct(&self) -> bool {
        !matches!(self, HostStdout::Blocking(_))
    }
}

/// The host's stdin and stdout; must be called inside a tokio runtime with I/O enabled.
pub fn host_stdio() -> (HostStdin, HostStdout) {
    let stdin = match direct_stdin() {
        Ok(Some(s)) => s,
        Ok(None) => HostStdin::Relayed(crate::server::stdin_pipe()),
        Err(e) => {
            tracing::debug!(error = %e, "stdin cannot be read on the reactor; relaying it through a thread");
            HostStdin::Relayed(crate::server::stdin_pipe())
        }
    };
    let stdout = match direct_stdout() {
        Ok(Some(s)) => s,
        Ok(None) => HostStdout::Blocking(tokio::io::stdout()),
        Err(e) => {
            tracing::debug!(error = %e, "stdout cannot be written on the reactor; using the blocking pool");
            HostStdout::Blocking(tokio::io::stdout())
        }
    };
    (stdin, stdout)
}

enum Kind {
    Fifo,
    Socket,
    Other,
}

fn kind_of(fd: &OwnedFd) -> io::Result<(Kind, u64, u64)> {
    let file = std::fs::File::from(fd.try_clone()?);
    let meta = file.metadata()?;
    let ft = meta.file_type();
    let kind = if ft.is_fifo() {
        Kind::Fifo
    } else if ft.is_socket() {
        Kind::Socket
    } else {
        Kind::Other
    };
    Ok((kind, meta.dev(), meta.ino()))
}

fn direct_stdin() -> io::Result<Option<HostStdin>> {
    let fd = io::stdin().as_fd().try_clone_to_owned()?;
    Ok(match kind_of(&fd)?.0 {
        Kind::Fifo => Some(HostStdin::Pipe(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?)),
        Kind::Socket => Some(HostStdin::Socket(socket(fd)?)),
        Kind::Other => None,
    })
}

fn direct_stdout() -> io::Result<Option<HostStdout>> {
    let fd = io::stdout().as_fd().try_clone_to_owned()?;
    let (kind, dev, ino) = kind_of(&fd)?;
    if let Ok(err) = io::stderr().as_fd().try_clone_to_owned()
        && let Ok((_, err_dev, err_ino)) = kind_of(&err)
        && (err_dev, err_ino) == (dev, ino)
    {
        return Ok(None);
    }
    Ok(match kind {
        Kind::Fifo => Some(HostStdout::Pipe(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)),
        Kind::Socket => Some(HostStdout::Socket(socket(fd)?)),
        Kind::Other => None,
    })
}

fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}

impl AsyncRead for HostStdin {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostStdin::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            HostStdin::Socket(s) => Pin::new(s).poll_read(cx, buf),
            HostStdin::Relayed(d) => Pin::new(d).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for HostStdout {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HostStdout::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            HostStdout::Socket(s) => Pin::new(s).poll_write(cx, buf),
            HostStdout::Blocking(b) => Pin::new(b).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HostStdout::Pipe(p) => Pin::new(p).poll_write_vectored(cx, bufs),
            HostStdout::Socket(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            HostStdout::Blocking(b) => Pin::new(b).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            HostStdout::Pipe(p) => p.is_write_vectored(),
            HostStdout::Socket(s) => s.is_write_vectored(),
            HostStdout::Blocking(b) => b.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HostStdout::Pipe(p) => Pin::new(p).poll_flush(cx),
            HostStdout::Socket(s) => Pin::new(s).poll_flush(cx),
            HostStdout::Blocking(b) => Pin::new(b).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            // Shutting a socket down would also end the host's direction on a shared socket; closing is the
            // process's job at exit, as for a pipe.
            HostStdout::Pipe(_) | HostStdout::Socket(_) => Poll::Ready(Ok(())),
            HostStdout::Blocking(b) => Pin::new(b).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn kinds_are_told_apart() {
        let (r, _w) = std::io::pipe().unwrap();
        assert!(matches!(kind_of(&OwnedFd::from(r)).unwrap().0, Kind::Fifo));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(kind_of(&OwnedFd::from(a)).unwrap().0, Kind::Socket));
        let file = tempfile::tempfile().unwrap();
        assert!(matches!(kind_of(&OwnedFd::from(file)).unwrap().0, Kind::Other));
    }
}
