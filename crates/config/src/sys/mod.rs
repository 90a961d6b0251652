//! The operating system under the configuration crate, one small interface per concern: private file and directory
//! modes, opening a file without blocking and naming what a non-regular file is, and the shell, process group and
//! group kill of `!command` secrets. `unix.rs` (Linux, macOS) and `windows.rs` implement it; nothing else in the
//! crate calls `libc` or `std::os::*`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
