//! The guardian shim (SPEC 4): a tiny process between pimcp and a stdio server that kills the server's whole
//! process group when pimcp dies, even by SIGKILL.
//!
//! Invocation (hidden; any host binary can serve it through [`shim_main_if_requested`]):
//! `<exe> __pimcp_shim__ <parent-pid> <program> [args…]`.
//!
//! Design: pimcp spawns the shim (with `posix_spawn`, no hook of its own) as the leader of a new process group with
//! the server's stdio, env and cwd. The shim resets its inherited signal mask and dispositions, blocks the signals it
//! cares about, arms `PR_SET_PDEATHSIG(SIGUSR1)`, spawns the server (same group,
//! inherited stdin/stdout/stderr, so nothing is relayed; the server gets `PR_SET_PDEATHSIG(SIGKILL)` tied to the
//! shim) and then sleeps in `sigtimedwait`:
//! - parent gone (`SIGUSR1`, or `getppid()` changed, re-checked every [`PARENT_POLL`]) → `killpg(own group,
//!   SIGKILL)`, which takes the server, every grandchild left in the group and the shim itself. This is checked
//!   *before* the server's exit: a server that exits on stdin EOF dies together with pimcp, and must not make the
//!   shim forget its grandchildren;
//! - server exited (pimcp alive) → whatever it left in the group gets `SIGTERM`, then `SIGKILL` after the close
//!   grace ([`GRACE_ENV`], default [`DEFAULT_LEFTOVER_GRACE`]), while the shim keeps watching its parent; then the
//!   shim exits with the server's code (128 + signal when killed by a signal). The shim never exits while its
//!   group still has members, so no moment exists in which a grandchild runs unguarded;
//! - `SIGTERM`/`SIGINT`/`SIGHUP` sent to the group are ignored by the shim (the server received them too); it keeps
//!   waiting so that pimcp's escalation to SIGKILL still finds a guardian.
//!
//! The server starts with an empty signal mask: a child inherits the mask across `fork`/`exec`, so the shim's
//! `pre_exec` hook unblocks everything (a server with `SIGTERM` blocked could never be stopped gracefully, one with
//! `SIGCHLD` blocked cannot manage children). The shim ignores no signal, so dispositions are what pimcp had.

use std::ffi::OsString;
use std::time::Duration;

/// argv[1] that switches a binary into shim mode.
pub const SHIM_ARG: &str = "__pimcp_shim__";

/// How often the shim re-checks `getppid()` in case the death signal was missed.
pub const PARENT_POLL: Duration = Duration::from_millis(500);

/// Environment variable through which pimcp passes its close grace (milliseconds) to the shim; removed from the
/// server's environment.
pub const GRACE_ENV: &str = "PIMCP_SHIM_GRACE_MS";

/// How long leftovers of an exited server get between `SIGTERM` and `SIGKILL` when [`GRACE_ENV`] is not set.
pub const DEFAULT_LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// Exit code when the server program cannot be started (as a shell does).
const EXIT_CANNOT_START: i32 = 127;
/// Exit code for a malformed shim invocation.
const EXIT_USAGE: i32 = 2;

/// If this process was started as the shim (`argv[1] == "__pimcp_shim__"`), runs the shim and exits; otherwise
/// returns immediately. Call it first thing in `main` of any binary that may be used as the shim executable.
pub fn shim_main_if_requested() {
    let mut args = std::env::args_os();
    let _exe = args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(SHIM_ARG)) {
        return;
    }
    let code = run_shim(args.collect());
    std::process::exit(code);
}

/// Runs the shim with the arguments after [`SHIM_ARG`]; returns the exit code.
pub fn run_shim(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter();
    let parent: Option<u32> = args.next().and_then(|p| p.to_str().and_then(|p| p.parse().ok()));
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        eprintln!("pimcp-shim: usage: pimcp-shim {SHIM_ARG} <parent-pid> <program> [args...]");
        return EXIT_USAGE;
    };
    let rest: Vec<OsString> = args.collect();
    imp::run(parent, program, rest)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::OsString;
    use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::{DEFAULT_LEFTOVER_GRACE, EXIT_CANNOT_START, GRACE_ENV, PARENT_POLL};
    use crate::process::sys;

    /// How often leftovers of an exited server are re-counted (they are not our children: no SIGCHLD).
    const LEFTOVER_POLL: Duration = Duration::from_millis(20);
    /// How long we wait for SIGKILLed leftovers to disappear (only D-state processes linger).
    const KILL_WAIT: Duration = Duration::from_secs(2);

    pub fn run(parent: u32, program: OsString, args: Vec<OsString>) -> i32 {
        // pimcp spawns us without a `pre_exec` hook (posix_spawn): start from an empty mask and default
        // dispositions ourselves, as the server will (an inherited ignored SIGCHLD would even stop us from reaping it).
        if let Err(e) = sys::reset_signal_mask() {
            eprintln!("pimcp-shim: cannot reset the signal mask: {e}");
        }
        // Block first: everything below is then collected by sigtimedwait and nothing can kill us half-way.
        let signals =
            match sys::SignalSet::block(&[libc::SIGCHLD, libc::SIGUSR1, libc::SIGTERM, libc::SIGINT, libc::SIGHUP]) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("pimcp-shim: cannot block signals: {e}");
                    return EXIT_CANNOT_START;
                }
            };
        if let Err(e) = sys::set_parent_death_signal(libc::SIGUSR1) {
            eprintln!("pimcp-shim: cannot arm the parent-death signal: {e}");
        }
        if sys::parent_pid() != parent {
            // pimcp died before we were armed: there is nothing to guard.
            return EXIT_CANNOT_START;
        }
        let grace = std::env::var(GRACE_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(DEFAULT_LEFTOVER_GRACE, Duration::from_millis);
        let mut cmd = Command::new(&program);
        cmd.args(&args).env_remove(GRACE_ENV);
        // SAFETY: the hook runs between fork and exec and only calls async-signal-safe prctl/sigprocmask.
        #[allow(
            unsafe_code,
            reason = "pre_exec is the only way to arm PR_SET_PDEATHSIG and reset the signal mask in the child"
        )]
        unsafe {
            cmd.pre_exec(|| {
                sys::set_parent_death_signal(libc::SIGKILL)?;
                // The mask survives fork and exec (std does not reset it): without this the server would start
                // with SIGTERM, SIGCHLD, … blocked.
                sys::reset_signal_mask()?;
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pimcp-shim: cannot start `{}`: {e}", program.to_string_lossy());
                return EXIT_CANNOT_START;
            }
        };
        // Drop our copies of the protocol pipes: EOF on either side must depend on the server alone.
        let _ = sys::redirect_to_dev_null(0);
        let _ = sys::redirect_to_dev_null(1);
        loop {
            // Parent first: when pimcp is SIGKILLed the server often exits on stdin EOF at the same moment, and
            // seeing that exit first must not let us leave without killing the group.
            if sys::parent_pid() != parent {
                kill_own_group(&mut child);
            }
            match child.try_wait() {
                Ok(Some(status)) => {
                    end_leftovers(parent, &signals, grace);
                    return status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
                }
                Ok(None) => {}
                Err(_) => return EXIT_CANNOT_START,
            }
            // SIGCHLD and SIGUSR1 wake us up early; SIGTERM/SIGINT/SIGHUP are swallowed (the server got them).
            let _ = signals.wait(PARENT_POLL);
        }
    }

    /// The server has exited (and was reaped) while pimcp lives: its leftovers in our group (grandchildren that
    /// ignored stdin EOF) get SIGTERM, `grace`, then SIGKILL, before we exit, so they never outlive their guardian.
    /// The parent is still watched meanwhile (its death means SIGKILL to the group at once). Only when we lead our
    /// own group: never a stranger's.
    fn end_leftovers(parent: u32, signals: &sys::SignalSet, grace: Duration) {
        let group = sys::own_process_group();
        let me = std::process::id();
        if u32::try_from(group).ok() != Some(me) {
            return;
        }
        let leftovers = || -> Vec<u32> {
            sys::live_group_members(group)
                .into_iter()
                .filter(|&pid| pid != me)
                .collect()
        };
        if leftovers().is_empty() {
            return;
        }
        // SIGTERM reaches us too; it is blocked here and swallowed by the waits below.
        let _ = sys::signal_group(group, libc::SIGTERM);
        let watch = |limit: Duration| -> bool {
            let deadline = Instant::now() + limit;
            loop {
                if sys::parent_pid() != parent {
                    let _ = sys::signal_group(group, libc::SIGKILL);
                    std::process::exit(137);
                }
                if leftovers().is_empty() {
                    return true;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                let _ = signals.wait(LEFTOVER_POLL);
            }
        };
        if watch(grace) {
            return;
        }
        // SIGKILL each leftover, not the group: we must survive to report the server's exit code.
        for pid in leftovers() {
            let _ = sys::signal_group_member(pid, group, libc::SIGKILL);
        }
        if !watch(KILL_WAIT) {
            eprintln!("pimcp-shim: processes of group {group} survived SIGKILL for {KILL_WAIT:?}");
        }
    }

    /// SIGKILL to our whole process group, ourselves included. When we do not lead our own group (started by
    /// hand, not by pimcp) only the server is killed, never a stranger's group.
    fn kill_own_group(child: &mut std::process::Child) -> ! {
        let group = sys::own_process_group();
        if u32::try_from(group).ok() == Some(std::process::id()) {
            let _ = sys::signal_group(group, libc::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        std::process::exit(137)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::ffi::OsString;
    use std::process::Command;

    /// Without PR_SET_PDEATHSIG the shim only runs the server and forwards its exit code.
    pub fn run(_parent: u32, program: OsString, args: Vec<OsString>) -> i32 {
        match Command::new(&program).args(&args).status() {
            Ok(status) => status.code().unwrap_or(1),
            Err(e) => {
                eprintln!("pimcp-shim: cannot start `{}`: {e}", program.to_string_lossy());
                super::EXIT_CANNOT_START
            }
        }
    }
}
