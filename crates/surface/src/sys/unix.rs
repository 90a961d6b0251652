//! Linux and macOS: `pread` and file owners.

use std::io;
use std::os::unix::fs::MetadataExt as _;

/// Reads exactly `buf.len()` bytes of `file` at `offset`, leaving its cursor alone (`pread`).
pub(crate) fn read_exact_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// The user who owns a file (its uid): the temporary directory is shared by all users.
pub(crate) fn owner(metadata: &std::fs::Metadata) -> Option<u32> {
    Some(metadata.uid())
}
