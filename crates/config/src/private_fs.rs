//! Files and directories only their owner may read, for every crate of pimcp that writes state (tokens, caches,
//! traces, spill files): mode 0700/0600 on Unix; on Windows the user's profile directories are private by their
//! inherited ACLs, so nothing is set. The OS calls live in `sys`.

use std::fs::{DirBuilder, File, Metadata, OpenOptions};

/// `builder` creates directories only their owner can enter (0700 on Unix).
pub fn dir(builder: &mut DirBuilder) -> &mut DirBuilder {
    crate::sys::private_dir(builder)
}

/// `options` creates files only their owner can read (0600 on Unix).
pub fn file(options: &mut OpenOptions) -> &mut OpenOptions {
    crate::sys::private_file(options)
}

/// Makes an existing file private to its owner (0600 on Unix) when it is not already: a file made by someone else,
/// or before pimcp restricted it, keeps the mode it was created with.
pub fn restrict(file: &File) -> std::io::Result<()> {
    if crate::sys::permission_bits(&file.metadata()?) & 0o077 != 0 {
        crate::sys::set_permission_bits(file, 0o600)?;
    }
    Ok(())
}

/// Makes an existing directory private to its owner (0700 on Unix).
pub fn restrict_dir(path: &std::path::Path) -> std::io::Result<()> {
    crate::sys::set_dir_permission_bits(path, 0o700)
}

/// The permission bits of a file as Unix writes them (Windows: 0o444 read-only, else 0o644), for messages and tests.
pub fn permission_bits(metadata: &Metadata) -> u32 {
    crate::sys::permission_bits(metadata)
}

/// A number that tells one file from another on the same device (the inode on Unix, the creation time on Windows),
/// to notice that a path now names a different file (rotation, replacement).
pub fn identity(metadata: &Metadata) -> u64 {
    crate::sys::file_identity(metadata)
}
