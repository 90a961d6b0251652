//! The standby guardian shim: one shim started ahead of need, so that starting a lazy stdio server on its first call
//! costs one exec (the server's) instead of two (shim, then server).
//!
//! The runtime starts it (on a thread of its own, off the start-up path) when a dedicated shim is enabled and a lazy
//! stdio server has yet to start. It is spawned like any shim (own process group, `posix_spawn`, piped stdio) but with
//! [`STANDBY_ARG`](super::shim::STANDBY_ARG): it arms its parent-death signal and then blocks reading its stdin. The
//! next [`SpawnPlan`](super::SpawnPlan) that uses the same shim executable takes it: pimcp writes the
//! [`StandbySpec`] (program, arguments, working directory, the server's whole environment, the close grace) into
//! its stdin, and from then on the standby is exactly the shim that spawn would have started, with the same pipes
//! already in place. One standby at most, never replaced once taken: an idle shim is ~2 MiB.
//!
//! Nothing is left behind: dropping the slot's standby closes its stdin (it exits on EOF) and `Drop` of its
//! [`ChildProcess`](super::ChildProcess) SIGKILLs its group; when pimcp dies the pipe closes too. A standby that
//! died meanwhile, a spec that does not fit or a write that fails all fall back to the normal spawn. A first start
//! that comes while the background thread is still spawning the standby waits for it (at most 100 ms) instead of
//! spawning a second shim beside it.

use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::shim::{STANDBY_ARG, StandbySpec};
use super::{Spawned, spawn_leader, sys};

/// The runtime's standby shim, if one is waiting. Clones share it.
#[derive(Clone, Default)]
pub struct StandbySlot(Arc<Inner>);

/// How long [`StandbySlot::start`] waits for a standby the background thread is still starting (its exec takes about
/// a millisecond) before it spawns a shim of its own.
const STANDBY_WAIT: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Inner {
    waiting: Mutex<Option<Standby>>,
    /// Set while [`StandbySlot::prepare_in_background`]'s thread starts the standby: a first start that comes sooner
    /// waits for it ([`Inner::ready`]) rather than spawn a second shim, which would leave this one idle.
    preparing: AtomicBool,
    /// Notified (under `waiting`'s lock) when the background thread is done.
    ready: Condvar,
    /// Set by [`StandbySlot::prepare_in_background`]: its thread stays until this sender is dropped with the slot.
    keeper: Mutex<Option<std::sync::mpsc::Sender<()>>>,
}

struct Standby {
    shim: PathBuf,
    spawned: Spawned,
}

impl std::fmt::Debug for StandbySlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waiting = self.lock().as_ref().map(|s| s.spawned.child.pid());
        f.debug_struct("StandbySlot").field("waiting_pid", &waiting).finish()
    }
}

impl StandbySlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Standby>> {
        self.0.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a standby `shim` unless one is waiting already; returns its pid. Must run inside a tokio runtime on a
    /// long-lived thread (as [`SpawnPlan::spawn`](super::SpawnPlan::spawn): the parent-death signal is tied to the
    /// thread that spawns).
    pub fn prepare(&self, shim: &Path) -> std::io::Result<u32> {
        if let Some(waiting) = self.lock().as_ref() {
            return Ok(waiting.spawned.child.pid());
        }
        let mut cmd = tokio::process::Command::new(shim);
        // `format!`, not `to_string()`: the latter inlines integer formatting here, with a branch per digit count
        // that a laid-out build's training may never take (a 5-digit pid ran cold code when training pids had 6).
        cmd.arg(STANDBY_ARG).arg(format!("{}", std::process::id()));
        let spawned = spawn_leader(cmd, true)?;
        let pid = spawned.child.pid();
        let mut slot = self.lock();
        if let Some(waiting) = slot.as_ref() {
            // Another task prepared one meanwhile; ours is dropped (and killed).
            return Ok(waiting.spawned.child.pid());
        }
        *slot = Some(Standby {
            shim: shim.to_path_buf(),
            spawned,
        });
        tracing::debug!(pid, shim = %shim.display(), "standby guardian shim started");
        Ok(pid)
    }

    /// [`StandbySlot::prepare`] on a thread of its own, so that the spawn (the calling thread waits out the shim's
    /// exec: about a millisecond) holds up nothing else, e.g. a host's `initialize` answer. The shim's parent-death
    /// signal is tied to the thread that spawned it, so the thread then stays, parked, as long as any clone of this
    /// slot does (the runtime's parts hold them: its servers, the standby's included, are gone by then); the first
    /// call of this made inside a tokio runtime wins, later ones do nothing. Needs a tokio runtime (its handle
    /// registers the pipes): a call outside one does nothing and leaves the slot to the next call.
    pub fn prepare_in_background(&self, shim: PathBuf) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (keep, parked) = std::sync::mpsc::channel::<()>();
        {
            let mut keeper = self.0.keeper.lock().unwrap_or_else(PoisonError::into_inner);
            if keeper.is_some() {
                return;
            }
            *keeper = Some(keep);
        }
        self.0.preparing.store(true, Ordering::Release);
        let slot = Arc::downgrade(&self.0);
        let spawned = std::thread::Builder::new().name("pimcp-standby".into()).spawn(move || {
            if let Some(inner) = slot.upgrade() {
                let _in_runtime = runtime.enter();
                let slot = StandbySlot(inner);
                let prepared = slot.prepare(&shim);
                slot.prepared();
                if let Err(e) = prepared {
                    tracing::debug!(error = %e, shim = %shim.display(), "could not start a standby guardian shim");
                    return;
                }
            }
            // Returns when the slot (and with it the sender) is dropped.
            let _ = parked.recv();
        });
        if let Err(e) = spawned {
            self.prepared();
            tracing::debug!(error = %e, "could not start the standby shim's thread");
        }
    }

    /// The background preparation is over (a standby waits, or none will): wakes a start waiting for it.
    fn prepared(&self) {
        self.0.preparing.store(false, Ordering::Release);
        let _slot = self.lock();
        self.0.ready.notify_all();
    }

    /// The waiting standby's pid, if any.
    pub fn waiting_pid(&self) -> Option<u32> {
        self.lock().as_ref().map(|s| s.spawned.child.pid())
    }

    /// Drops the waiting standby, if any (it is killed).
    pub fn clear(&self) {
        drop(self.lock().take());
    }

    /// Hands the waiting standby of `shim` what to run; `None` (the caller spawns normally) when there is none, it
    /// already exited, the spec cannot be encoded or the write fails. One the background thread is still starting
    /// is waited for, up to [`STANDBY_WAIT`]. A taken standby is never put back.
    pub(crate) fn start(&self, shim: &Path, spec: &StandbySpec) -> Option<Spawned> {
        let mut slot = self.lock();
        // A first call that comes right after start-up may find the standby still being spawned: waiting for it
        // costs less than spawning a second shim, and leaves no idle one behind.
        let deadline = Instant::now() + STANDBY_WAIT;
        while slot.is_none() && self.0.preparing.load(Ordering::Acquire) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::debug!("the standby guardian shim is still starting; spawning normally");
                break;
            }
            slot = self
                .0
                .ready
                .wait_timeout(slot, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if slot.as_ref().is_none_or(|s| s.shim != shim) {
            return None;
        }
        let bytes = spec.encode()?;
        let standby = slot.take()?;
        drop(slot);
        let pid = standby.spawned.child.pid();
        if sys::child_has_exited(pid).unwrap_or(true) {
            tracing::debug!(pid, "the standby guardian shim had exited; spawning normally");
            return None;
        }
        // The pipe is fresh and the spec is at most STANDBY_SPEC_MAX bytes, under a pipe's 64 KiB: one write on the
        // (non-blocking) descriptor takes it all. Anything else drops the standby, which then dies.
        let written = standby
            .spawned
            .stdin
            .as_fd()
            .try_clone_to_owned()
            .and_then(|fd| std::fs::File::from(fd).write_all(&bytes));
        match written {
            Ok(()) => Some(standby.spawned),
            Err(e) => {
                tracing::debug!(pid, error = %e, "could not hand the standby guardian shim its server; spawning normally");
                None
            }
        }
    }
}
