//! Windows: files and directories under the user's profile are private to the user by their inherited ACLs, so
//! modes are not set; nothing is a FIFO or device by path; `!command` runs through `cmd.exe /d /s /c` in a new
//! process group, and its tree is ended with `taskkill /T /F`.

use std::fs::{DirBuilder, File, FileType, Metadata, OpenOptions};
use std::os::windows::process::CommandExt as _;
use std::process::{Command, ExitStatus, Stdio};

/// `CREATE_NEW_PROCESS_GROUP`: the command does not share pimcp's console control events.
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;

pub(crate) fn private_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
    builder
}

pub(crate) fn private_file(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

/// Unix-style bits for messages and round trips: read-only files are 0o444, others 0o644.
pub(crate) fn permission_bits(metadata: &Metadata) -> u32 {
    if metadata.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

pub(crate) fn set_permission_bits(_file: &File, _bits: u32) -> std::io::Result<()> {
    Ok(())
}

pub(crate) fn open_without_blocking(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

pub(crate) fn special_kind(_kind: &FileType) -> &'static str {
    "a special file"
}

/// `cmd.exe /d /s /c "<command>"`: the command line is handed over as written (cmd's own quoting rules).
pub(crate) fn shell(command: &str) -> Command {
    let mut cmd = Command::new("cmd.exe");
    cmd.args(["/d", "/s", "/c"]).raw_arg(format!("\"{command}\""));
    cmd
}

pub(crate) fn lead_new_group(cmd: &mut Command) {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP);
}

/// Ends the process `pid` and every process it started.
pub(crate) fn kill_group(pid: u32) {
    let _ = Command::new("taskkill")
        .args(["/T", "/F", "/PID", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

pub(crate) fn exit_signal(_status: &ExitStatus) -> Option<i32> {
    None
}

/// The file's creation time in nanoseconds (std has no stable file index on Windows): a file created in place of
/// another differs.
pub(crate) fn file_identity(metadata: &Metadata) -> u64 {
    metadata
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

pub(crate) fn set_dir_permission_bits(_path: &std::path::Path, _bits: u32) -> std::io::Result<()> {
    Ok(())
}
