//! Unix (Linux and macOS): a server leads its own process group, stopped with SIGTERM and SIGKILL to the group;
//! `PR_SET_PDEATHSIG` on Linux and the guardian everywhere bind it to pimcp's life; `waitid(WNOWAIT)` tells an exit
//! without reaping; the group's live members come from `/proc` (Linux) or `libproc` (macOS). Each `unsafe` block is
//! one syscall with plain arguments.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use tokio::io::{AsyncRead, AsyncWrite};

use super::Stop;

/// `kill(-pgid, sig)`: signal every process in a group. `Ok(false)` when the group no longer exists.
pub(crate) fn signal_group(pgid: i32, sig: i32) -> io::Result<bool> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal process group <= 1",
        ));
    }
    // SAFETY: killpg takes two integers and has no memory effects.
    #[expect(unsafe_code, reason = "killpg(2) has no safe std equivalent")]
    let rc = unsafe { libc::killpg(pgid, sig) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Ignores each of `signals` (`SIG_IGN`) in this process.
fn ignore_signals(signals: &[i32]) {
    for &signal in signals {
        // SAFETY: signal(2) with SIG_IGN installs no handler and touches no memory of ours.
        #[expect(unsafe_code, reason = "signal dispositions have no safe std equivalent")]
        unsafe {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
}

/// `getppid()`.
fn parent_pid() -> u32 {
    // SAFETY: getppid cannot fail and touches no memory.
    #[expect(unsafe_code, reason = "getppid(2) is not exposed by std")]
    let pid = unsafe { libc::getppid() };
    pid.unsigned_abs()
}

/// Arms `PR_SET_PDEATHSIG`: `sig` is delivered when the thread that forked us exits. Linux only; a no-op elsewhere.
/// Async-signal-safe, so it may run in a `pre_exec` hook.
#[cfg(target_os = "linux")]
fn set_parent_death_signal(sig: i32) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG, sig) reads only its integer arguments.
    #[expect(unsafe_code, reason = "prctl(2) has no safe std equivalent")]
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::c_ulong::from(sig.unsigned_abs()), 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_sig: i32) -> io::Result<()> {
    Ok(())
}

/// Unblocks every signal in the calling thread (`sigprocmask(SIG_SETMASK, ∅)`). A child inherits the signal mask
/// across `fork` and `exec` (std's spawn no longer resets it), so a server's `pre_exec` hook calls this: it starts with
/// no signal blocked whatever the spawning thread had blocked. It also resets ignored dispositions of the signals we use
/// (an ignored disposition survives exec too). Async-signal-safe.
fn reset_signal_mask() -> io::Result<()> {
    // SAFETY: sigemptyset initializes the plain bitmask in place; sigprocmask only reads it.
    #[expect(unsafe_code, reason = "signal masks have no safe std equivalent")]
    let rc = unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    reset_signal_dispositions()
}

/// Signals whose disposition a server must start with at its default: an ignored SIGINT or SIGHUP inherited from a
/// background job or `nohup` (exec keeps `SIG_IGN`) would otherwise change how servers react to our group signals.
const RESET_TO_DEFAULT: [libc::c_int; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGTERM,
    libc::SIGCHLD,
];

/// Sets the signals of [`RESET_TO_DEFAULT`] back to `SIG_DFL` with `sigaction`. Async-signal-safe.
fn reset_signal_dispositions() -> io::Result<()> {
    for sig in RESET_TO_DEFAULT {
        // SAFETY: a zeroed sigaction with SIG_DFL as handler and an empty mask is a valid argument; sigaction is
        // async-signal-safe and only reads it.
        #[expect(unsafe_code, reason = "signal dispositions have no safe std equivalent")]
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether our child `pid` has exited, without reaping it (`waitid(WNOWAIT)`): while the zombie is unreaped its
/// pid, and so its process-group id, cannot be reused, which keeps a following `killpg` safe.
pub(crate) fn child_has_exited(pid: u32) -> io::Result<bool> {
    let id = libc::id_t::from(pid);
    // SAFETY: siginfo_t is plain data; waitid writes into it and reads nothing else.
    #[expect(unsafe_code, reason = "waitid(2) with WNOWAIT has no safe std equivalent")]
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            id,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        if rc != 0 {
            let err = io::Error::last_os_error();
            // Already reaped (or not our child): it is gone.
            return if err.raw_os_error() == Some(libc::ECHILD) {
                Ok(true)
            } else {
                Err(err)
            };
        }
        Ok(info.si_pid() != 0)
    }
}

/// Live (non-zombie) members of process group `pgid`, found by scanning `/proc` (Linux).
#[cfg(target_os = "linux")]
pub(crate) fn live_group_members(pgid: i32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ..."; comm may contain anything, so parse after the last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let _ppid = fields.next();
        let group = fields.next().and_then(|g| g.parse::<i32>().ok());
        if group == Some(pgid) && state != Some("Z") && state != Some("X") {
            out.push(pid);
        }
    }
    out
}

/// Live (non-zombie) members of process group `pgid`, listed by `libproc` (macOS).
#[cfg(target_os = "macos")]
pub(crate) fn live_group_members(pgid: i32) -> Vec<u32> {
    let mut pids = vec![0 as libc::pid_t; 256];
    let size = libc::c_int::try_from(std::mem::size_of_val(pids.as_slice())).unwrap_or(libc::c_int::MAX);
    // SAFETY: the buffer is `size` bytes of plain integers; proc_listpgrppids writes at most that many.
    #[expect(unsafe_code, reason = "libproc has no safe std equivalent")]
    let written = unsafe { libc::proc_listpgrppids(pgid, pids.as_mut_ptr().cast(), size) };
    let count = usize::try_from(written).unwrap_or(0) / std::mem::size_of::<libc::pid_t>();
    pids.truncate(count);
    pids.into_iter()
        .filter(|&pid| pid > 0 && !is_zombie(pid))
        .map(i32::unsigned_abs)
        .collect()
}

#[cfg(target_os = "macos")]
fn is_zombie(pid: libc::pid_t) -> bool {
    // SAFETY: proc_bsdinfo is plain data; proc_pidinfo writes at most its size into it.
    #[expect(unsafe_code, reason = "libproc has no safe std equivalent")]
    unsafe {
        let mut info: libc::proc_bsdinfo = std::mem::zeroed();
        let size = libc::c_int::try_from(std::mem::size_of::<libc::proc_bsdinfo>()).unwrap_or(libc::c_int::MAX);
        let n = libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast(), size);
        // Unreadable: gone (or not ours to judge); either way nothing to stop.
        n != size || info.pbi_status == libc::SZOMB
    }
}

/// Whether processes other than an exited leader are left in the group `pgid`.
pub(crate) fn tree_has_others(pgid: i32) -> bool {
    !live_group_members(pgid).is_empty()
}

/// Makes a server the leader of a process group of its own: its tree can be signalled as one.
pub(crate) fn contain_tree(cmd: &mut CommandWrap) {
    cmd.wrap(ProcessGroup::leader());
}

/// Asks the tree of group `pgid` to stop; `Ok(false)` when the group no longer exists.
pub(crate) fn stop_tree(_child: &mut dyn ChildWrapper, pgid: i32, how: Stop) -> io::Result<bool> {
    signal_group(
        pgid,
        match how {
            Stop::Terminate => libc::SIGTERM,
            Stop::Kill => libc::SIGKILL,
        },
    )
}

/// What a server started with `inheritEnv: false` keeps of pimcp's environment.
pub(crate) const MINIMAL_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Kills group `pgid` at once (the guardian's job when pimcp is gone).
pub(crate) fn kill_group(pgid: i32) {
    let _ = signal_group(pgid, libc::SIGKILL);
}

/// Binds a server to the thread that spawns it and starts it with a clean signal state: between `fork` and `exec`
/// it arms `PR_SET_PDEATHSIG` (Linux), clears the signal mask and the ignored dispositions it would inherit, and
/// refuses to run when pimcp (`our_pid`) already exited.
pub(crate) fn prepare_server(cmd: &mut tokio::process::Command, our_pid: u32) {
    // SAFETY: runs between fork and exec; prctl, sigprocmask, sigaction and getppid are async-signal-safe and
    // allocate nothing.
    #[expect(
        unsafe_code,
        reason = "pre_exec is the only way to arm PR_SET_PDEATHSIG in the child"
    )]
    unsafe {
        cmd.pre_exec(move || {
            set_parent_death_signal(libc::SIGKILL)?;
            // The child inherits the spawning thread's signal mask; start it with none blocked.
            reset_signal_mask()?;
            if parent_pid() != our_pid {
                return Err(io::Error::other("parent exited during spawn"));
            }
            Ok(())
        });
    }
}

/// The guardian ends only with its input: terminal and shutdown signals are ignored.
pub(crate) fn ignore_stop_signals() {
    ignore_signals(&[libc::SIGINT, libc::SIGHUP, libc::SIGTERM]);
}

/// Starts `cmd` in a process group of its own (a terminal's Ctrl-C to pimcp's group does not reach it).
pub(crate) fn own_process_group(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt as _;
    cmd.process_group(0)
}

/// Whether `path` is a file someone may execute.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether a command names a path rather than a program to look up on `PATH`.
pub(crate) fn names_a_path(command: &str) -> bool {
    command.contains('/')
}

/// The files a command `path` may be: the path itself.
pub(crate) fn command_files(path: PathBuf) -> Vec<PathBuf> {
    vec![path]
}

/// The npm cache when neither the server nor pimcp sets one: `~/.npm`.
pub(crate) fn default_npm_cache(lookup: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    lookup("HOME").map(|home| PathBuf::from(home).join(".npm"))
}

/// Wakes whoever waits for a child's exit: `SIGCHLD`, else a slow poll.
pub(crate) struct ChildExits(Option<tokio::signal::unix::Signal>);

impl ChildExits {
    /// Registered before the first check, so a `SIGCHLD` between the check and the wait is not missed.
    pub(crate) fn new() -> ChildExits {
        use tokio::signal::unix::{SignalKind, signal};
        ChildExits(
            signal(SignalKind::child())
                .inspect_err(|e| tracing::debug!(error = %e, "no SIGCHLD stream; watching exits by polling"))
                .ok(),
        )
    }

    /// Resolves when some child may have changed state (or never, without a `SIGCHLD` stream).
    pub(crate) async fn next(&mut self) {
        match self.0.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
}

/// A pipe whose buffered rest can still be read once its writer is known dead.
pub(crate) trait Drainable {
    /// A non-blocking duplicate of the pipe to read what it holds, if the OS offers one.
    fn drain_handle(&self) -> Option<std::fs::File>;
}

impl<T: std::os::fd::AsFd> Drainable for T {
    fn drain_handle(&self) -> Option<std::fs::File> {
        self.as_fd()
            .try_clone_to_owned()
            .inspect_err(|e| tracing::debug!(error = %e, "cannot read the rest of a dead server's stdout"))
            .ok()
            .map(std::fs::File::from)
    }
}

/// The read and write halves of a `socket` transport's stream.
pub(crate) type SocketHalves = (Box<dyn AsyncRead + Send + Unpin>, Box<dyn AsyncWrite + Send + Unpin>);

/// Connects the `socket` transport: a Unix domain socket at `path`.
pub(crate) async fn connect_socket(path: &Path) -> io::Result<SocketHalves> {
    let (read, write) = tokio::net::UnixStream::connect(path).await?.into_split();
    Ok((Box::new(read), Box::new(write)))
}
