//! The Linux kernel keyutils store: join a fresh session keyring on the keyring worker thread, then build
//! `linux-keyutils-keyring-store` (works headless: containers, CI, SSH, services).

use std::sync::Arc;

use keyring_core::CredentialStore;

use crate::store::keyring_reason::keyring_reason;

/// The keyutils store, built on the keyring worker thread after it joins its own session keyring.
pub(crate) fn keyutils_store() -> std::result::Result<Arc<CredentialStore>, String> {
    join_new_session_keyring().map_err(|e| format!("cannot join a session keyring (keyctl): {e}"))?;
    let store = linux_keyutils_keyring_store::Store::new().map_err(|e| keyring_reason(&e))?;
    Ok(store)
}

/// Give the calling thread its own anonymous session keyring, like `keyctl new_session`.
///
/// Without one (containers, CI, services, `su`), keys land in the user-session keyring without possessor rights and
/// linking them into the persistent keyring fails with `EACCES`. Session keyrings belong to the thread's
/// credentials, so this affects only the keyring worker thread.
fn join_new_session_keyring() -> std::io::Result<i64> {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: keyctl(KEYCTL_JOIN_SESSION_KEYRING, name) reads `name` only; NULL asks for a new anonymous keyring,
    // so no pointer we own is passed and no memory is written.
    #[expect(unsafe_code, reason = "keyctl(2) has no safe wrapper")]
    let id = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if id < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(id)
    }
}
