//! Windows: each server runs in a Job Object of its own (process-wrap's `JobObject` with
//! `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`, created suspended and resumed once assigned, so no grandchild escapes it).
//! pimcp alone holds the job's handle: `TerminateJobObject` ends the tree, and when pimcp exits or is killed the
//! system closes the handle and kills the whole tree, so no guardian process is needed. Windows has no polite stop
//! request for a console program without a console of its own: a graceful close is the closed stdin and its grace
//! period. Servers start without a console window (`CREATE_NO_WINDOW`), commands are found through `PATHEXT`
//! (`npx` is `npx.cmd`, which std runs through `cmd.exe` with its arguments escaped), and the `socket` transport
//! connects to a named pipe.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use process_wrap::tokio::{ChildWrapper, CommandWrap, CreationFlags, JobObject};
use tokio::io::{AsyncRead, AsyncWrite};
use windows::Win32::Foundation::{CloseHandle, WAIT_OBJECT_0};
use windows::Win32::System::Threading::{CREATE_NO_WINDOW, OpenProcess, PROCESS_SYNCHRONIZE, WaitForSingleObject};

use super::Stop;

/// What a server started with `inheritEnv: false` keeps of pimcp's environment: what Windows programs (node
/// among them) need to start and find their files.
pub(crate) const MINIMAL_ENV: &[&str] = &[
    "APPDATA",
    "COMSPEC",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "WINDIR",
];

/// How often an exit is checked for while someone waits for it (Windows has no `SIGCHLD`).
const EXIT_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether the process `pid` (our child, whose handle tokio holds, so the id cannot be reused) has exited.
pub(crate) fn child_has_exited(pid: u32) -> io::Result<bool> {
    // SAFETY: OpenProcess and WaitForSingleObject take plain values; the handle is closed before returning.
    #[expect(unsafe_code, reason = "process handles have no safe std equivalent by pid")]
    unsafe {
        let Ok(handle) = OpenProcess(PROCESS_SYNCHRONIZE, false, pid) else {
            // No such process any more.
            return Ok(true);
        };
        let state = WaitForSingleObject(handle, 0);
        let _ = CloseHandle(handle);
        Ok(state == WAIT_OBJECT_0)
    }
}

/// Whether anything may be left in the job after its first process exited: the job is not queried, ending it is
/// harmless when empty.
pub(crate) fn tree_has_others(_pgid: i32) -> bool {
    true
}

/// Puts a server and everything it starts in a Job Object of its own, without a console window.
pub(crate) fn contain_tree(cmd: &mut CommandWrap) {
    cmd.wrap(CreationFlags(CREATE_NO_WINDOW));
    cmd.wrap(JobObject);
}

/// Ends the server's job (`TerminateJobObject`); [`Stop::Terminate`] sends nothing (`Ok(false)`).
pub(crate) fn stop_tree(child: &mut dyn ChildWrapper, _pgid: i32, how: Stop) -> io::Result<bool> {
    match how {
        Stop::Terminate => Ok(false),
        Stop::Kill => child.start_kill().map(|()| true),
    }
}

/// Nothing to prepare: the job binds the server to pimcp's life.
pub(crate) fn prepare_server(_cmd: &mut tokio::process::Command, _our_pid: u32) {}

/// Whether `path` is a file (Windows runs any file it can find by name and extension).
pub(crate) fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Whether a command names a path rather than a program to look up on `PATH`.
pub(crate) fn names_a_path(command: &str) -> bool {
    command.contains(['/', '\\'])
}

/// The files a command `path` may be: itself when it has an extension `PATHEXT` lists, else itself with each of
/// those extensions (`npx` → `npx.COM`, `npx.EXE`, `npx.BAT`, `npx.CMD`, …; the extensionless `npx` next to them is
/// a shell script for other shells).
pub(crate) fn command_files(path: PathBuf) -> Vec<PathBuf> {
    let pathext = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
    let extensions: Vec<&str> = pathext.split(';').filter(|e| e.starts_with('.')).collect();
    let has_known_extension = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.iter().any(|x| x[1..].eq_ignore_ascii_case(e)));
    if has_known_extension {
        return vec![path];
    }
    extensions
        .iter()
        .map(|ext| {
            let mut name = path.clone().into_os_string();
            name.push(ext);
            PathBuf::from(name)
        })
        .collect()
}

/// The npm cache when neither the server nor pimcp sets one: `%LOCALAPPDATA%\npm-cache`.
pub(crate) fn default_npm_cache(lookup: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    lookup("LOCALAPPDATA").map(|dir| PathBuf::from(dir).join("npm-cache"))
}

/// Wakes whoever waits for a child's exit: a short poll.
pub(crate) struct ChildExits;

impl ChildExits {
    pub(crate) fn new() -> ChildExits {
        ChildExits
    }

    /// Resolves after the poll interval.
    pub(crate) async fn next(&mut self) {
        tokio::time::sleep(EXIT_POLL).await;
    }
}

/// A pipe whose buffered rest could be read once its writer is dead: Windows pipes offer no non-blocking
/// duplicate, so a dead server's stdout ends at the first read that would wait.
pub(crate) trait Drainable {
    fn drain_handle(&self) -> Option<std::fs::File>;
}

impl<T> Drainable for T {
    fn drain_handle(&self) -> Option<std::fs::File> {
        None
    }
}

/// The read and write halves of a `socket` transport's stream.
pub(crate) type SocketHalves = (Box<dyn AsyncRead + Send + Unpin>, Box<dyn AsyncWrite + Send + Unpin>);

/// Connects the `socket` transport: a named pipe (`\\.\pipe\NAME`).
pub(crate) async fn connect_socket(path: &Path) -> io::Result<SocketHalves> {
    if !path.to_string_lossy().starts_with(r"\\.\pipe\") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            r"on Windows the socket transport connects to a named pipe (\\.\pipe\NAME)",
        ));
    }
    let pipe = tokio::net::windows::named_pipe::ClientOptions::new().open(path)?;
    let (read, write) = tokio::io::split(pipe);
    Ok((Box::new(read), Box::new(write)))
}
