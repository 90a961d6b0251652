//! The Secret Service store (GNOME Keyring, KWallet, KeePassXC) over D-Bus with `zbus-secret-service-keyring-store`
//! (pure Rust: zbus, Rust crypto for the encrypted session). Used on Linux when a D-Bus session bus is configured
//! and its Secret Service answers with an unlocked default collection.

use std::sync::Arc;

use keyring_core::CredentialStore;
use secret_service::EncryptionType;
use secret_service::blocking::SecretService;

use crate::store::keyring_reason::keyring_reason;

/// The environment variable that says a D-Bus session bus exists.
pub(crate) const SESSION_BUS_ENV: &str = "DBUS_SESSION_BUS_ADDRESS";

/// Whether a D-Bus session bus is configured (`DBUS_SESSION_BUS_ADDRESS` set and not empty).
pub(crate) fn session_bus_configured() -> bool {
    std::env::var_os(SESSION_BUS_ENV).is_some_and(|address| !address.is_empty())
}

/// The Secret Service store, built on the keyring worker thread.
///
/// Before the store is built, the default collection must exist and be unlocked: pimcp never asks the provider to
/// unlock or create a collection, because that opens a password prompt which blocks a headless process forever.
pub(crate) fn secret_service_store() -> std::result::Result<Arc<CredentialStore>, String> {
    let service = SecretService::connect(EncryptionType::Dh).map_err(|e| format!("Secret Service: {e}"))?;
    let collection = service
        .get_default_collection()
        .map_err(|e| format!("Secret Service has no default collection: {e}"))?;
    if collection
        .is_locked()
        .map_err(|e| format!("Secret Service default collection: {e}"))?
    {
        return Err("the Secret Service default collection is locked".into());
    }
    let store = zbus_secret_service_keyring_store::Store::new().map_err(|e| keyring_reason(&e))?;
    Ok(store)
}
