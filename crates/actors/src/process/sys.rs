//! Thin wrappers over the few libc calls the process layer needs (process groups, parent-death signals,
//! signal masks); each `unsafe` block is one syscall with plain integer arguments.

use std::io;
use std::time::Duration;

/// `kill(-pgid, sig)`: signal every process in a group. `Ok(false)` when the group no longer exists.
pub fn signal_group(pgid: i32, sig: i32) -> io::Result<bool> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal process group <= 1",
        ));
    }
    // SAFETY: killpg takes two integers and has no memory effects.
    #[allow(unsafe_code, reason = "killpg(2) has no safe std equivalent")]
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

/// `getppid()`.
pub fn parent_pid() -> u32 {
    // SAFETY: getppid cannot fail and touches no memory.
    #[allow(unsafe_code, reason = "getppid(2) is not exposed by std")]
    let pid = unsafe { libc::getppid() };
    pid.unsigned_abs()
}

/// Arms `PR_SET_PDEATHSIG`: `sig` is delivered when the thread that forked us exits. Linux only; a no-op elsewhere.
/// Async-signal-safe, so it may run in a `pre_exec` hook.
#[cfg(target_os = "linux")]
pub fn set_parent_death_signal(sig: i32) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG, sig) reads only its integer arguments.
    #[allow(unsafe_code, reason = "prctl(2) has no safe std equivalent")]
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::c_ulong::from(sig.unsigned_abs()), 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub fn set_parent_death_signal(_sig: i32) -> io::Result<()> {
    Ok(())
}

/// A set of signals blocked in the calling thread and collected synchronously with [`SignalSet::wait`].
#[cfg(target_os = "linux")]
pub struct SignalSet {
    set: libc::sigset_t,
}

#[cfg(target_os = "linux")]
impl SignalSet {
    /// Blocks `signals` in the calling thread (they stay pending until [`SignalSet::wait`] takes them).
    pub fn block(signals: &[i32]) -> io::Result<SignalSet> {
        // SAFETY: sigset_t is a plain bitmask; sigemptyset/sigaddset initialize it in place, and
        // pthread_sigmask reads it. No pointer outlives this function except the owned copy we return.
        #[allow(unsafe_code, reason = "signal masks have no safe std equivalent")]
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &sig in signals {
                libc::sigaddset(&mut set, sig);
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(SignalSet { set })
        }
    }

    /// Waits up to `timeout` for one of the blocked signals; `None` on timeout or interruption.
    pub fn wait(&self, timeout: Duration) -> Option<i32> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
        };
        // SAFETY: both pointers refer to live, initialized values owned by this frame or self.
        #[allow(unsafe_code, reason = "sigtimedwait(2) has no safe std equivalent")]
        let sig = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &ts) };
        (sig > 0).then_some(sig)
    }
}

/// Unblocks every signal in the calling thread (`sigprocmask(SIG_SETMASK, ∅)`). A child inherits the signal mask
/// across `fork` and `exec` (std's spawn no longer resets it), so the guardian shim, which blocks the signals it
/// collects, calls this in the server's `pre_exec` hook. It also resets ignored dispositions of the signals we use
/// (an ignored disposition survives exec too). Async-signal-safe.
pub fn reset_signal_mask() -> io::Result<()> {
    // SAFETY: sigemptyset initializes the plain bitmask in place; sigprocmask only reads it.
    #[allow(unsafe_code, reason = "signal masks have no safe std equivalent")]
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
        #[allow(unsafe_code, reason = "signal dispositions have no safe std equivalent")]
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

/// Sends `sig` to process `pid` only if it is (still) a member of group `pgid`. The process is pinned with a pidfd
/// before its group is checked, so a pid recycled in between is never signalled (the signal then fails with
/// `ESRCH`). `Ok(false)` when it is gone or not in the group. Linux ≥ 5.3.
#[cfg(target_os = "linux")]
pub fn signal_group_member(pid: u32, pgid: i32, sig: i32) -> io::Result<bool> {
    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    let gone = |err: io::Error| {
        if err.raw_os_error() == Some(libc::ESRCH) {
            Ok(false)
        } else {
            Err(err)
        }
    };
    // SAFETY: pidfd_open takes a pid and flags; on success it returns a new descriptor that we own from here on.
    #[allow(unsafe_code, reason = "pidfd_open(2) has no safe std equivalent")]
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        return gone(io::Error::last_os_error());
    }
    let raw = i32::try_from(raw).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: `raw` is a fresh descriptor returned by pidfd_open and owned by nobody else.
    #[allow(unsafe_code, reason = "taking ownership of a raw descriptor")]
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: getpgid takes an integer and touches no memory.
    #[allow(unsafe_code, reason = "getpgid(2) is not exposed by std")]
    let group = unsafe { libc::getpgid(pid) };
    if group != pgid {
        return Ok(false);
    }
    // SAFETY: a valid pidfd, a signal number, a null siginfo (kill(2) semantics) and no flags.
    #[allow(unsafe_code, reason = "pidfd_send_signal(2) has no safe std equivalent")]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 {
        Ok(true)
    } else {
        gone(io::Error::last_os_error())
    }
}

/// Points file descriptor `fd` at `/dev/null` (used by the shim to drop its copies of the server's stdio).
pub fn redirect_to_dev_null(fd: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
    // SAFETY: dup2 on two valid descriptors; `null` stays open for the duration of the call.
    #[allow(unsafe_code, reason = "dup2(2) has no safe std equivalent")]
    let rc = unsafe { libc::dup2(null.as_raw_fd(), fd) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Our own process group (`getpgrp`).
pub fn own_process_group() -> i32 {
    // SAFETY: getpgrp cannot fail and touches no memory.
    #[allow(unsafe_code, reason = "getpgrp(2) is not exposed by std")]
    unsafe {
        libc::getpgrp()
    }
}

/// Whether our child `pid` has exited, without reaping it (`waitid(WNOWAIT)`): while the zombie is unreaped its
/// pid, and so its process-group id, cannot be reused, which keeps a following `killpg` safe.
#[cfg(target_os = "linux")]
pub fn child_has_exited(pid: u32) -> io::Result<bool> {
    let id = libc::id_t::from(pid);
    // SAFETY: siginfo_t is plain data; waitid writes into it and reads nothing else.
    #[allow(unsafe_code, reason = "waitid(2) with WNOWAIT has no safe std equivalent")]
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
pub fn live_group_members(pgid: i32) -> Vec<u32> {
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

#[cfg(not(target_os = "linux"))]
pub fn child_has_exited(_pid: u32) -> io::Result<bool> {
    Ok(false)
}

#[cfg(not(target_os = "linux"))]
pub fn live_group_members(_pgid: i32) -> Vec<u32> {
    Vec::new()
}
