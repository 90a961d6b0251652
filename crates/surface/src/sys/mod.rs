//! The operating system under the surface: reading a file at an offset (schemas kept as byte ranges of the metadata
//! cache) and who owns a file (the spill directory). `unix.rs` serves Linux and macOS, `windows.rs` Windows; nothing
//! else in the crate calls `std::os::*`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{owner, read_exact_at};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{owner, read_exact_at};
