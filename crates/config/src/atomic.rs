//! Atomic file replacement: write a temp file in the same directory, give it the right mode, fsync, rename over the
//! target. A reader sees the old file or the new one, never a torn one; a failure leaves the old file untouched.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Replaces `path` with `contents`. An existing file keeps its permission bits; a new file gets `new_mode`.
/// A symlink is followed: its target is replaced and the link stays.
pub(crate) fn write_atomic(path: &Path, contents: &[u8], new_mode: u32) -> std::io::Result<PathBuf> {
    let target = resolve_symlink(path);
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mode = match std::fs::metadata(&target) {
        Ok(meta) => crate::sys::permission_bits(&meta),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => new_mode,
        Err(err) => return Err(err),
    };
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)?;
    crate::sys::set_permission_bits(temp.as_file(), mode)?;
    temp.write_all(contents)?;
    temp.as_file().sync_all()?;
    temp.persist(&target).map_err(|err| err.error)?;
    if let Ok(dir) = std::fs::File::open(&dir) {
        let _ = dir.sync_all();
    }
    Ok(target)
}

/// The final target of a chain of symlinks (relative links resolve against their directory), or `path` itself.
fn resolve_symlink(path: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&current) {
            Ok(link) => {
                current = if link.is_absolute() {
                    link
                } else {
                    current.parent().map_or(link.clone(), |parent| parent.join(&link))
                };
            }
            Err(_) => break,
        }
    }
    current
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn keeps_mode_and_replaces_inode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let inode = std::fs::metadata(&path).unwrap().ino();
        write_atomic(&path, b"new", 0o600).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        assert_ne!(meta.ino(), inode, "replaced by rename, not rewritten in place");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    }

    #[test]
    fn new_file_gets_new_mode_and_parent_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/f.json");
        write_atomic(&path, b"x", 0o600).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn symlink_target_is_replaced_and_link_kept() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        write_atomic(&link, b"new", 0o600).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }
}
