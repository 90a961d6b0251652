//! The runtime's guardian: one small process per runtime that kills every stdio server's process group (and every
//! `!command` secret's) when pimcp dies, even by SIGKILL.
//!
//! Each stdio server leads a process group of its own; its grandchildren stay in that group unless they leave it
//! on purpose (`setsid`). `PR_SET_PDEATHSIG` only reaches the direct child, so a grandchild that ignores stdin EOF
//! would outlive a SIGKILLed pimcp. The guardian closes that gap for all servers at once:
//!
//! - pimcp starts it on first need (`<exe> __pimcp_guardian__`, its own process group, stdin a pipe from pimcp,
//!   working directory `/`); any host binary can serve it through [`guardian_main_if_requested`] (`pimcp-run` is
//!   its own guardian).
//! - For each group pimcp writes `+<pgid>\n` right after the spawn and `-<pgid>\n` just before it reaps the group's
//!   leader (while the unreaped leader still reserves the group id, so the guardian never holds an id that could be
//!   recycled).
//! - The pipe's end (pimcp exited or died: the kernel closes its descriptors) makes the guardian `SIGKILL` every
//!   group still listed, then exit. This needs no parent-death signal, so it works where `PR_SET_PDEATHSIG` does
//!   not exist. SIGINT, SIGHUP and SIGTERM are ignored: the guardian ends only with the pipe.
//! - A guardian that dies while pimcp lives (killed by hand) is replaced at once by the thread that waits for it,
//!   and the new one is told every group still running.
//!
//! The write end of the pipe is close-on-exec, so no server inherits it (a server holding it would keep the
//! guardian from ever seeing the end).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::GUARDIAN_ARG;
use crate::sys;

/// How long a replacement waits after a guardian died young (a guardian that cannot start must not spin).
const RESPAWN_DELAY: Duration = Duration::from_millis(200);

/// If this process was started as a guardian (`argv[1] == "__pimcp_guardian__"`), runs it and exits; otherwise
/// returns at once. Call it first thing in `main` of any binary used as the guardian executable.
pub fn guardian_main_if_requested() {
    let mut args = std::env::args_os();
    let _exe = args.next();
    if args.next().as_deref() == Some(OsStr::new(GUARDIAN_ARG)) {
        sys::ignore_stop_signals();
        // Holds no directory busy (an unmount, a deleted project directory).
        let _ = std::env::set_current_dir("/");
        std::process::exit(run_guardian(std::io::stdin().lock()));
    }
}

/// The guardian process: reads `+<pgid>` / `-<pgid>` lines until `input` ends, then kills every group still listed.
fn run_guardian(input: impl std::io::BufRead) -> i32 {
    let mut groups = BTreeSet::new();
    for line in input.split(b'\n') {
        let Ok(line) = line else { break };
        let Some(pgid) = line
            .get(1..)
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(|n| n.parse::<i32>().ok())
            .filter(|&pgid| pgid > 1)
        else {
            continue;
        };
        match line.first() {
            Some(b'+') => {
                groups.insert(pgid);
            }
            Some(b'-') => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for pgid in groups {
        sys::kill_group(pgid);
    }
    0
}

/// The runtime's guardian, started on first use. Clones share it; dropping the last clone ends it.
#[derive(Clone, Default)]
pub struct Guardian(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Notified when a guardian process is started or the keeper thread gives up.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The running guardian's stdin and pid.
    pipe: Option<(ChildStdin, u32)>,
    /// Groups to kill when pimcp dies.
    watched: BTreeSet<i32>,
    /// The executable the keeper thread runs; set on first use.
    exe: Option<PathBuf>,
    /// Why the last start failed.
    failed: Option<String>,
    closing: bool,
}

impl std::fmt::Debug for Guardian {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Guardian")
            .field("pid", &state.pipe.as_ref().map(|(_, pid)| *pid))
            .field("watched", &state.watched.len())
            .finish()
    }
}

impl Guardian {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes sure a guardian runs from `exe`, starting it (and the thread that keeps it running) on first use.
    /// `Err` says why it cannot start; nothing was spawned for a server yet, so the caller can refuse the spawn.
    pub(crate) fn ensure(&self, exe: &Path) -> std::io::Result<()> {
        let mut state = self.lock();
        if state.pipe.is_some() {
            return Ok(());
        }
        if state.exe.is_none() {
            let shared = Arc::downgrade(&self.0);
            let keeper_exe = exe.to_path_buf();
            std::thread::Builder::new()
                .name("pimcp-guardian".into())
                .spawn(move || keep(&shared, &keeper_exe))?;
            state.exe = Some(exe.to_path_buf());
        }
        let (state, _) = self
            .0
            .changed
            .wait_timeout_while(state, Duration::from_secs(5), |s| {
                s.pipe.is_none() && s.failed.is_none() && !s.closing
            })
            .unwrap_or_else(PoisonError::into_inner);
        match (&state.pipe, &state.failed) {
            (Some(_), _) => Ok(()),
            (None, Some(why)) => Err(std::io::Error::other(format!(
                "cannot start the guardian `{}`: {why}",
                exe.display()
            ))),
            (None, None) => Err(std::io::Error::other(format!(
                "the guardian `{}` did not start",
                exe.display()
            ))),
        }
    }

    /// The guardian kills `pgid` if pimcp dies from now on.
    pub(crate) fn watch(&self, pgid: i32) {
        let mut state = self.lock();
        if state.watched.insert(pgid) {
            send(&mut state, b'+', pgid);
        }
    }

    /// The guardian forgets `pgid`: call it before the group's leader is reaped.
    pub(crate) fn release(&self, pgid: i32) {
        let mut state = self.lock();
        if state.watched.remove(&pgid) {
            send(&mut state, b'-', pgid);
        }
    }

    /// The guardian process's pid while one runs.
    pub fn pid(&self) -> Option<u32> {
        self.lock().pipe.as_ref().map(|(_, pid)| *pid)
    }
}

impl pimcp_config::GroupWatch for Guardian {
    fn watch(&self, pgid: i32) {
        Guardian::watch(self, pgid);
    }

    fn release(&self, pgid: i32) {
        Guardian::release(self, pgid);
    }
}

/// Writes one line to the guardian. A failed write means it died: its keeper starts another and tells it everything.
fn send(state: &mut State, op: u8, pgid: i32) {
    if let Some((pipe, _)) = &mut state.pipe {
        let line = format!("{}{pgid}\n", char::from(op));
        // One short write into a pipe pimcp alone writes: atomic, and the guardian drains it at once.
        if pipe.write_all(line.as_bytes()).is_err() {
            state.pipe = None;
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        state.closing = true;
        // Closing stdin ends the guardian; it kills what is still listed (nothing after a clean shutdown). Its
        // keeper thread reaps it.
        state.pipe = None;
    }
}

/// The keeper thread: starts the guardian, tells it every watched group, waits for it, and replaces it if it dies
/// while the runtime lives. Ends with the runtime (the last [`Guardian`] dropped).
fn keep(shared: &std::sync::Weak<Shared>, exe: &Path) {
    loop {
        let spawned = spawn_guardian(exe);
        let mut child = {
            let Some(shared) = shared.upgrade() else { return };
            let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.closing {
                return;
            }
            let child = match spawned {
                Ok(mut child) => match child.stdin.take() {
                    Some(mut stdin) => {
                        let lines: String = state.watched.iter().map(|pgid| format!("+{pgid}\n")).collect();
                        if stdin.write_all(lines.as_bytes()).is_ok() {
                            state.pipe = Some((stdin, child.id()));
                            state.failed = None;
                        }
                        Some(child)
                    }
                    None => Some(child),
                },
                Err(e) => {
                    tracing::warn!(guardian = %exe.display(), error = %e, "cannot start the guardian process");
                    state.failed = Some(e.to_string());
                    None
                }
            };
            shared.changed.notify_all();
            child
        };
        let Some(child) = child.as_mut() else {
            // A guardian that cannot start: stdio servers are refused (see `Guardian::ensure`) until it can.
            std::thread::sleep(RESPAWN_DELAY * 5);
            continue;
        };
        let _ = child.wait();
        let Some(shared) = shared.upgrade() else { return };
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closing {
            return;
        }
        state.pipe = None;
        tracing::warn!(guardian = %exe.display(), "the guardian process exited; starting another");
        drop(state);
        drop(shared);
        std::thread::sleep(RESPAWN_DELAY);
    }
}

fn spawn_guardian(exe: &Path) -> std::io::Result<Child> {
    let mut cmd = Command::new(exe);
    // Its own group: a terminal's Ctrl-C to pimcp's group does not reach it.
    sys::own_process_group(&mut cmd)
        .arg(GUARDIAN_ARG)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_guardian_kills_what_is_listed_when_its_input_ends() {
        let mut kept = Command::new("sleep").arg("30").process_group_leader();
        let mut released = Command::new("sleep").arg("30").process_group_leader();
        let (k, r) = (kept.id() as i32, released.id() as i32);
        let input = format!("+{k}\n+{r}\nnonsense\n+1\n-{r}\n");
        assert_eq!(run_guardian(input.as_bytes()), 0);
        let status = kept.wait().unwrap();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(released.try_wait().unwrap().is_none(), "a released group is left alone");
        released.kill().unwrap();
        released.wait().unwrap();
    }

    trait Leader {
        fn process_group_leader(&mut self) -> Child;
    }

    impl Leader for Command {
        fn process_group_leader(&mut self) -> Child {
            use std::os::unix::process::CommandExt as _;
            self.process_group(0).spawn().unwrap()
        }
    }
}
