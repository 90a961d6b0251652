//! The runtime's guardian where none is needed (Windows): each server's Job Object dies with pimcp's handle to it,
//! which ends the server's whole tree however pimcp exits. The type keeps the guardian's interface, so the runtime
//! reads the same on every OS; no guardian process is ever started.

use std::path::Path;

/// Returns at once: there is no guardian process on this OS.
pub fn guardian_main_if_requested() {}

/// The runtime's guardian: nothing to run (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Guardian(());

impl Guardian {
    /// Never called (no guardian executable is chosen on this OS); accepts without starting anything.
    pub(crate) fn ensure(&self, _exe: &Path) -> std::io::Result<()> {
        Ok(())
    }

    /// The job watches the tree already.
    pub(crate) fn watch(&self, _pgid: i32) {}

    /// The job forgets the tree with its handle.
    pub(crate) fn release(&self, _pgid: i32) {}

    /// No guardian process runs.
    pub fn pid(&self) -> Option<u32> {
        None
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
