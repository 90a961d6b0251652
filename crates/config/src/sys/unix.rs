//! Unix (Linux, macOS): permission bits, `O_NONBLOCK` opens, file kinds, `sh -c` in a process group of its own
//! (bound to pimcp's life with `PR_SET_PDEATHSIG` on Linux), `killpg`.

use std::fs::{DirBuilder, File, FileType, Metadata, OpenOptions, Permissions};
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Command, ExitStatus};

/// A directory only its owner can enter (0700).
pub(crate) fn private_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
    builder.mode(0o700)
}

/// A new file only its owner can read (0600).
pub(crate) fn private_file(options: &mut OpenOptions) -> &mut OpenOptions {
    options.mode(0o600)
}

/// A file's permission bits.
pub(crate) fn permission_bits(metadata: &Metadata) -> u32 {
    metadata.permissions().mode() & 0o7777
}

pub(crate) fn set_permission_bits(file: &File, bits: u32) -> std::io::Result<()> {
    file.set_permissions(Permissions::from_mode(bits))
}

/// Opening never blocks (a FIFO without a writer) and never takes a controlling terminal.
pub(crate) fn open_without_blocking(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
}

/// What a file that is neither a regular file nor a directory is.
pub(crate) fn special_kind(kind: &FileType) -> &'static str {
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// `sh -c <command>`.
pub(crate) fn shell(command: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command);
    cmd
}

/// The command leads a process group of its own (so [`kill_group`] ends it with its children) and, on Linux, is
/// killed when the thread that spawned it (pimcp) dies.
pub(crate) fn lead_new_group(cmd: &mut Command) {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: runs between fork and exec; prctl and getppid are async-signal-safe and allocate nothing.
        #[expect(
            unsafe_code,
            reason = "pre_exec is the only way to arm PR_SET_PDEATHSIG in the child"
        )]
        unsafe {
            cmd.pre_exec(move || {
                let signal = libc::c_ulong::from(libc::SIGKILL.unsigned_abs());
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // pimcp died between fork and prctl: the death signal would never come.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::other("parent exited during spawn"));
                }
                Ok(())
            });
        }
    }
}

/// SIGKILLs the process group led by `pid` (started with [`lead_new_group`], not yet reaped).
pub(crate) fn kill_group(pid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: killpg only sends a signal; it touches no memory. The caller has not reaped the leader, so the group
    // id cannot have been recycled.
    #[expect(unsafe_code, reason = "killpg(2) has no safe std equivalent")]
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// The signal that ended a process, if one did.
pub(crate) fn exit_signal(status: &ExitStatus) -> Option<i32> {
    status.signal()
}

/// The inode.
pub(crate) fn file_identity(metadata: &Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(metadata)
}

pub(crate) fn set_dir_permission_bits(path: &std::path::Path, bits: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, Permissions::from_mode(bits))
}
