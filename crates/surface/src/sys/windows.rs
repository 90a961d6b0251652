//! Windows: reading at an offset and file owners.

use std::io;

/// Reads exactly `buf.len()` bytes of `file` at `offset` (`seek_read`, which moves the cursor; callers share no
/// cursor).
pub(crate) fn read_exact_at(file: &std::fs::File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Every file of the per-user temporary directory counts as the user's.
pub(crate) fn owner(_metadata: &std::fs::Metadata) -> Option<u32> {
    None
}
