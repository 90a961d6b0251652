//! The guardian shim: a tiny process between pimcp and a stdio server that kills the server's whole
//! process group when pimcp dies, even by SIGKILL.
//!
//! Invocation (hidden; any host binary can serve it through [`shim_main_if_requested`]):
//! `<exe> __pimcp_shim__ <parent-pid> <program> [args…]`, or, for a *standby* shim started ahead of need,
//! `<exe> __pimcp_shim_standby__ <parent-pid>`: it arms itself the same way, then reads what to run from its stdin
//! ([`StandbySpec`]: program, arguments, working directory, the server's whole environment, the close grace) and
//! carries on as a shim started with those would. EOF instead of a spec (pimcp dropped the standby, or died) ends
//! it. pimcp keeps one standby ready while a lazy stdio server has yet to start, so the first call's path skips the
//! shim's own exec (see `process::standby`).
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

/// `eprintln!` that cannot panic: the shim writes to the server's stderr, and a write that fails (the reader gone)
/// must not turn the guardian into a panicking process.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use std::ffi::OsString;
use std::time::Duration;

/// argv[1] that switches a binary into shim mode.
pub const SHIM_ARG: &str = "__pimcp_shim__";

/// argv[1] of a standby shim, which reads what to run from its stdin.
pub const STANDBY_ARG: &str = "__pimcp_shim_standby__";

/// Largest encoded [`StandbySpec`] (length prefix included): pimcp writes it in one go into the standby's fresh,
/// empty stdin pipe (64 KiB), so the write never waits for the shim. A larger environment takes the normal spawn.
pub(crate) const STANDBY_SPEC_MAX: usize = 60 * 1024;

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
    let code = match args.next().as_deref().and_then(std::ffi::OsStr::to_str) {
        Some(SHIM_ARG) => run_shim(args.collect()),
        Some(STANDBY_ARG) => run_standby(args.collect()),
        _ => return,
    };
    std::process::exit(code);
}

/// Runs a standby shim with the arguments after [`STANDBY_ARG`] (the parent's pid); returns the exit code.
pub fn run_standby(args: Vec<OsString>) -> i32 {
    let parent: Option<u32> = args.first().and_then(|p| p.to_str().and_then(|p| p.parse().ok()));
    let (Some(parent), 1) = (parent, args.len()) else {
        say!("pimcp-shim: usage: pimcp-shim {STANDBY_ARG} <parent-pid> (then the spec on stdin)");
        return EXIT_USAGE;
    };
    imp::run_standby(parent)
}

/// What a standby shim runs: everything a normal shim gets from its arguments and its own environment.
#[derive(PartialEq, Eq)]
pub(crate) struct StandbySpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: OsString,
    /// The server's whole environment (values may be secrets: never printed).
    pub env: Vec<(OsString, OsString)>,
    /// How long leftovers of an exited server get between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl std::fmt::Debug for StandbySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandbySpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env_keys", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("grace", &self.grace)
            .finish()
    }
}

impl StandbySpec {
    /// The bytes pimcp writes to a standby's stdin: the payload's length as a little-endian `u32`, then the payload,
    /// NUL-terminated fields: program, working directory, grace in milliseconds, the number of arguments, each
    /// argument, the number of variables, each `KEY=VALUE`. `None` when a field holds a NUL (exec could not take it
    /// either; the normal spawn reports that) or the whole exceeds [`STANDBY_SPEC_MAX`].
    pub(crate) fn encode(&self) -> Option<Vec<u8>> {
        use std::os::unix::ffi::OsStrExt as _;
        let mut payload = Vec::with_capacity(1024);
        let mut field = |bytes: &[u8]| -> Option<()> {
            if bytes.contains(&0) {
                return None;
            }
            payload.extend_from_slice(bytes);
            payload.push(0);
            Some(())
        };
        field(self.program.as_bytes())?;
        field(self.cwd.as_bytes())?;
        field(self.grace.as_millis().to_string().as_bytes())?;
        field(self.args.len().to_string().as_bytes())?;
        for arg in &self.args {
            field(arg.as_bytes())?;
        }
        field(self.env.len().to_string().as_bytes())?;
        for (key, value) in &self.env {
            if key.is_empty() || key.as_bytes().contains(&b'=') {
                return None;
            }
            let mut entry = key.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            field(&entry)?;
        }
        let len = u32::try_from(payload.len()).ok()?;
        if payload.len() + 4 > STANDBY_SPEC_MAX {
            return None;
        }
        let mut out = Vec::with_capacity(payload.len() + 4);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&payload);
        Some(out)
    }

    /// The inverse of [`StandbySpec::encode`] for the payload (after the length); `None` when malformed.
    pub(crate) fn decode(payload: &[u8]) -> Option<StandbySpec> {
        use std::os::unix::ffi::OsStringExt as _;
        let body = payload.strip_suffix(&[0])?;
        let mut fields = body.split(|&b| b == 0);
        let text = |fields: &mut dyn Iterator<Item = &[u8]>| -> Option<String> {
            String::from_utf8(fields.next()?.to_vec()).ok()
        };
        let program = OsString::from_vec(fields.next()?.to_vec());
        let cwd = OsString::from_vec(fields.next()?.to_vec());
        let grace = Duration::from_millis(text(&mut fields)?.parse().ok()?);
        let n_args: usize = text(&mut fields)?.parse().ok()?;
        let mut args = Vec::with_capacity(n_args.min(4096));
        for _ in 0..n_args {
            args.push(OsString::from_vec(fields.next()?.to_vec()));
        }
        let n_env: usize = text(&mut fields)?.parse().ok()?;
        let mut env = Vec::with_capacity(n_env.min(4096));
        for _ in 0..n_env {
            let entry = fields.next()?;
            let eq = entry.iter().position(|&b| b == b'=')?;
            env.push((
                OsString::from_vec(entry[..eq].to_vec()),
                OsString::from_vec(entry[eq + 1..].to_vec()),
            ));
        }
        if fields.next().is_some() || program.is_empty() {
            return None;
        }
        Some(StandbySpec {
            program,
            args,
            cwd,
            env,
            grace,
        })
    }
}

/// Reads a [`StandbySpec`] from stdin without reading a byte past it (the rest of the stream is the server's).
/// `Ok(None)`: EOF before a whole spec (pimcp dropped the standby, or died).
fn read_standby_spec() -> std::io::Result<Option<StandbySpec>> {
    use std::io::Read as _;
    use std::os::fd::AsFd as _;
    // A duplicate of fd 0 read through `File`: unbuffered, so exactly the spec's bytes leave the pipe.
    let mut stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let mut len = [0u8; 4];
    match stdin.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = usize::try_from(u32::from_le_bytes(len)).unwrap_or(usize::MAX);
    if len + 4 > STANDBY_SPEC_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a spec of {len} bytes is over the limit"),
        ));
    }
    let mut payload = vec![0; len];
    match stdin.read_exact(&mut payload) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    StandbySpec::decode(&payload)
        .map(Some)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "malformed spec"))
}

/// Runs the shim with the arguments after [`SHIM_ARG`]; returns the exit code.
pub fn run_shim(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter();
    let parent: Option<u32> = args.next().and_then(|p| p.to_str().and_then(|p| p.parse().ok()));
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        say!("pimcp-shim: usage: pimcp-shim {SHIM_ARG} <parent-pid> <program> [args...]");
        return EXIT_USAGE;
    };
    let rest: Vec<OsString> = args.collect();
    imp::run(parent, program, rest)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::{OsStr, OsString};
    use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::{DEFAULT_LEFTOVER_GRACE, EXIT_CANNOT_START, EXIT_USAGE, GRACE_ENV, PARENT_POLL};
    use crate::process::sys;

    /// How often leftovers of an exited server are re-counted (they are not our children: no SIGCHLD).
    const LEFTOVER_POLL: Duration = Duration::from_millis(20);
    /// How long we wait for SIGKILLed leftovers to disappear (only D-state processes linger).
    const KILL_WAIT: Duration = Duration::from_secs(2);

    pub fn run(parent: u32, program: OsString, args: Vec<OsString>) -> i32 {
        let signals = match arm(parent) {
            Ok(s) => s,
            Err(code) => return code,
        };
        let grace = std::env::var(GRACE_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(DEFAULT_LEFTOVER_GRACE, Duration::from_millis);
        let mut cmd = Command::new(&program);
        cmd.args(&args).env_remove(GRACE_ENV);
        supervise(parent, &signals, cmd, &program, grace)
    }

    pub fn run_standby(parent: u32) -> i32 {
        let signals = match arm(parent) {
            Ok(s) => s,
            Err(code) => return code,
        };
        let spec = match super::read_standby_spec() {
            Ok(Some(spec)) => spec,
            // Never used: nothing to guard.
            Ok(None) => return 0,
            Err(e) => {
                say!("pimcp-shim: cannot read what to run from stdin: {e}");
                return EXIT_USAGE;
            }
        };
        if sys::parent_pid() != parent {
            // pimcp died after sending the spec: there is nothing to guard.
            return EXIT_CANNOT_START;
        }
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd);
        supervise(parent, &signals, cmd, &spec.program, spec.grace)
    }

    /// Start-up of every shim: empty mask, default dispositions, our signals blocked, the parent-death signal armed
    /// and the parent checked. `Err` is the exit code.
    fn arm(parent: u32) -> Result<sys::SignalSet, i32> {
        // pimcp spawns us without a `pre_exec` hook (posix_spawn): start from an empty mask and default
        // dispositions ourselves, as the server will (an inherited ignored SIGCHLD would even stop us from reaping it).
        if let Err(e) = sys::reset_signal_mask() {
            say!("pimcp-shim: cannot reset the signal mask: {e}");
        }
        // Block first: everything below is then collected by sigtimedwait and nothing can kill us half-way.
        let signals =
            match sys::SignalSet::block(&[libc::SIGCHLD, libc::SIGUSR1, libc::SIGTERM, libc::SIGINT, libc::SIGHUP]) {
                Ok(s) => s,
                Err(e) => {
                    say!("pimcp-shim: cannot block signals: {e}");
                    return Err(EXIT_CANNOT_START);
                }
            };
        if let Err(e) = sys::set_parent_death_signal(libc::SIGUSR1) {
            say!("pimcp-shim: cannot arm the parent-death signal: {e}");
        }
        if sys::parent_pid() != parent {
            // pimcp died before we were armed: there is nothing to guard.
            return Err(EXIT_CANNOT_START);
        }
        Ok(signals)
    }

    /// Spawns the server from `cmd` and guards it until it exits (or the parent dies); returns the exit code.
    fn supervise(parent: u32, signals: &sys::SignalSet, mut cmd: Command, program: &OsStr, grace: Duration) -> i32 {
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
                say!("pimcp-shim: cannot start `{}`: {e}", program.to_string_lossy());
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
                    end_leftovers(parent, signals, grace);
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
            say!("pimcp-shim: processes of group {group} survived SIGKILL for {KILL_WAIT:?}");
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
                say!("pimcp-shim: cannot start `{}`: {e}", program.to_string_lossy());
                super::EXIT_CANNOT_START
            }
        }
    }

    pub fn run_standby(_parent: u32) -> i32 {
        let spec = match super::read_standby_spec() {
            Ok(Some(spec)) => spec,
            Ok(None) => return 0,
            Err(e) => {
                say!("pimcp-shim: cannot read what to run from stdin: {e}");
                return super::EXIT_USAGE;
            }
        };
        let status = Command::new(&spec.program)
            .args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd)
            .status();
        match status {
            Ok(status) => status.code().unwrap_or(1),
            Err(e) => {
                say!("pimcp-shim: cannot start `{}`: {e}", spec.program.to_string_lossy());
                super::EXIT_CANNOT_START
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn spec() -> StandbySpec {
        StandbySpec {
            program: "/usr/bin/env".into(),
            args: vec!["a b".into(), "".into(), "ünï=code".into()],
            cwd: "/tmp/x y".into(),
            env: vec![
                ("PATH".into(), "/bin:/usr/bin".into()),
                ("EMPTY".into(), "".into()),
                ("EQ".into(), "a=b=c".into()),
            ],
            grace: Duration::from_millis(1500),
        }
    }

    #[test]
    fn a_spec_survives_the_wire() {
        let bytes = spec().encode().unwrap();
        let len = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(len, bytes.len() - 4);
        assert_eq!(StandbySpec::decode(&bytes[4..]).unwrap(), spec());
        let bare = StandbySpec {
            args: vec![],
            env: vec![],
            ..spec()
        };
        assert_eq!(StandbySpec::decode(&bare.encode().unwrap()[4..]).unwrap(), bare);
    }

    #[test]
    fn what_exec_could_not_take_or_does_not_fit_is_refused() {
        let nul_arg = StandbySpec {
            args: vec!["a\0b".into()],
            ..spec()
        };
        assert!(nul_arg.encode().is_none());
        let nul_value = StandbySpec {
            env: vec![("K".into(), "v\0".into())],
            ..spec()
        };
        assert!(nul_value.encode().is_none());
        let eq_key = StandbySpec {
            env: vec![("A=B".into(), "v".into())],
            ..spec()
        };
        assert!(eq_key.encode().is_none());
        let huge = StandbySpec {
            env: vec![("BIG".into(), "x".repeat(STANDBY_SPEC_MAX).into())],
            ..spec()
        };
        assert!(huge.encode().is_none());
        let just_fits = StandbySpec {
            env: vec![("BIG".into(), "x".repeat(STANDBY_SPEC_MAX / 2).into())],
            ..spec()
        };
        assert!(just_fits.encode().is_some());
    }

    #[test]
    fn malformed_payloads_are_refused() {
        let good = spec().encode().unwrap()[4..].to_vec();
        // Truncated anywhere (a field lost, or the final NUL).
        for cut in [0, 1, good.len() / 2, good.len() - 1] {
            assert!(StandbySpec::decode(&good[..cut]).is_none(), "cut at {cut}");
        }
        // A trailing extra field, a non-numeric count, an entry without `=`, an empty program.
        let mut extra = good.clone();
        extra.extend_from_slice(b"more\0");
        assert!(StandbySpec::decode(&extra).is_none());
        assert!(StandbySpec::decode(b"/bin/sh\0/\x00100\0x\0").is_none());
        assert!(StandbySpec::decode(b"/bin/sh\0/\x00100\x000\x001\0NOEQUALS\0").is_none());
        assert!(StandbySpec::decode(b"\0/\x00100\x000\x000\0").is_none());
        assert!(StandbySpec::decode(b"/bin/sh\0/\x00100\x000\x000\0").is_some());
    }

    #[test]
    fn the_debug_output_names_variables_but_not_their_values() {
        let text = format!("{:?}", spec());
        assert!(text.contains("PATH") && !text.contains("/usr/bin\""), "{text}");
        assert!(!text.contains("a=b=c"), "{text}");
    }
}
