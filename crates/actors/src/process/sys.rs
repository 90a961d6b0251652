//! Thin wrappers over the few libc calls the process layer needs (process groups, parent-death signals,
//! signal masks); each `unsafe` block is one syscall with plain integer arguments.

use std::io;

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

/// Ignores each of `signals` (`SIG_IGN`) in this process.
pub fn ignore_signals(signals: &[i32]) {
    for &signal in signals {
        // SAFETY: signal(2) with SIG_IGN installs no handler and touches no memory of ours.
        #[allow(unsafe_code, reason = "signal dispositions have no safe std equivalent")]
        unsafe {
            libc::signal(signal, libc::SIG_IGN);
        }
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

/// Unblocks every signal in the calling thread (`sigprocmask(SIG_SETMASK, ∅)`). A child inherits the signal mask
/// across `fork` and `exec` (std's spawn no longer resets it), so a server's `pre_exec` hook calls this: it starts with
/// no signal blocked whatever the spawning thread had blocked. It also resets ignored dispositions of the signals we use
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
