//! Bounded file reads: every file pimcp reads (configs, imports, plugin manifests, trust records, caches, token files)
//! is read only when it is a regular file (or a symlink to one) and only up to a size cap, so a file that is a FIFO,
//! a device such as `/dev/zero` or a huge file is a problem naming the file, never a hang or an unbounded allocation.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The cap for configuration files, host configs, imports, plugin manifests and trust records.
pub const CONFIG_FILE_LIMIT: u64 = 16 * 1024 * 1024;

/// Reads at most `limit` bytes of `path`.
///
/// The file is opened non-blocking (opening a FIFO without a writer cannot hang) and checked with `fstat` before a
/// byte is read: anything but a regular file is an [`io::ErrorKind::InvalidInput`] error saying what it is, and a
/// file longer than `limit` is an [`io::ErrorKind::FileTooLarge`] error naming the limit. A missing file keeps
/// [`io::ErrorKind::NotFound`], so callers that treat absence as normal still can. Messages never contain the path;
/// callers name it.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_capped(open_regular(path)?, limit)
}

/// Opens `path` for reading only when it is a regular file (or a symlink to one), as [`read_bounded`] does; for a
/// reader that keeps the file open (pair it with [`read_capped`]).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = crate::sys::open_without_blocking(std::fs::OpenOptions::new().read(true)).open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file", describe(kind)),
        ));
    }
    Ok(file)
}

/// [`read_bounded`] as UTF-8 text; invalid UTF-8 is an [`io::ErrorKind::InvalidData`] error.
pub fn read_text_bounded(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "is not valid UTF-8"))
}

/// Reads all of `reader` when it holds at most `limit` bytes; more is an [`io::ErrorKind::FileTooLarge`] error.
pub fn read_capped(reader: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("is larger than the {} limit", human(limit)),
        ));
    }
    Ok(bytes)
}

fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else {
        crate::sys::special_kind(&kind)
    }
}

fn human(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    const KIB: u64 = 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes}-byte")
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_regular_file_and_a_symlink_to_one_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.json");
        std::fs::write(&file, "{}").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_text_bounded(&file, 2).unwrap(), "{}");
        assert_eq!(read_text_bounded(&link, 2).unwrap(), "{}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_naming_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.json");
        std::fs::write(&file, vec![b' '; 2049]).unwrap();
        let err = read_bounded(&file, 2048).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "is larger than the 2 KiB limit");
    }

    #[test]
    fn dev_zero_a_fifo_and_a_directory_are_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_bounded(&zero, CONFIG_FILE_LIMIT).unwrap_err();
        assert_eq!(err.to_string(), "is a character device, not a regular file");

        let fifo = dir.path().join("fifo.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        #[expect(unsafe_code, reason = "mkfifo(3) has no std wrapper; the path is a valid C string")]
        let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(made, 0);
        // Without O_NONBLOCK this open would wait for a writer forever.
        let err = read_bounded(&fifo, CONFIG_FILE_LIMIT).unwrap_err();
        assert_eq!(err.to_string(), "is a FIFO, not a regular file");

        let err = read_bounded(dir.path(), CONFIG_FILE_LIMIT).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "is a directory, not a regular file");
    }

    #[test]
    fn a_missing_file_stays_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_bounded(&dir.path().join("nope"), 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
