//! [`KeyringStore`]: records as JSON in the OS credential store through `keyring-core`, and the explicit choice of
//! store per platform: Linux uses Secret Service when a D-Bus session answers, else kernel keyutils (headless);
//! macOS the login Keychain; Windows the Credential Manager; any other platform fails closed.
//!
//! All keyring calls run on one dedicated thread. Keyring calls block (syscalls or D-Bus round trips), and on
//! Linux the keyutils *session keyring* is part of a thread's credentials: the worker thread joins a fresh session
//! keyring once (`KEYCTL_JOIN_SESSION_KEYRING`) and every entry is built and used on that thread, so the store works
//! in containers, CI and SSH sessions without touching the credentials of the host's other threads.

use std::sync::{Arc, Mutex, mpsc};

use async_trait::async_trait;
use keyring_core::{CredentialStore, Entry};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::record::{StoreKey, TokenRecord};
use crate::store::TokenStore;
use crate::store::keyring_reason::keyring_reason;

/// Keyring service name of OAuth records (the account is [`StoreKey::account`]).
pub const KEYRING_SERVICE: &str = "pimcp.oauth";
/// Account used by the probe that checks the store works before it is used.
const PROBE_ACCOUNT: &str = "pimcp-store-probe";

type Job = Box<dyn FnOnce(&Arc<CredentialStore>) + Send>;

/// A [`TokenStore`] in the OS credential store.
pub struct KeyringStore {
    jobs: Mutex<mpsc::Sender<Job>>,
    service: String,
    vendor: String,
}

impl std::fmt::Debug for KeyringStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringStore")
            .field("service", &self.service)
            .field("vendor", &self.vendor)
            .finish()
    }
}

impl KeyringStore {
    /// The platform's credential store under [`KEYRING_SERVICE`], probed with a write/read/delete round trip.
    /// Fails with [`Error::NoTokenStore`] (naming `settings.tokenStore: "file"`) when it cannot be used.
    ///
    /// Which store: on Linux, Secret Service when `DBUS_SESSION_BUS_ADDRESS` is set and the service answers with an
    /// unlocked default collection (within 15 s), otherwise kernel keyutils after joining a session keyring; on macOS
    /// the login Keychain; on Windows the Credential Manager; no other platform has one.
    pub async fn open_default() -> Result<KeyringStore> {
        KeyringStore::open_with_service(KEYRING_SERVICE).await
    }

    /// The platform's credential store under another service name (tests use a unique one), chosen as in
    /// [`KeyringStore::open_default`].
    pub async fn open_with_service(service: &str) -> Result<KeyringStore> {
        let store = open_platform(service).await?;
        tracing::info!(store = %store.vendor, "oauth tokens live in the OS credential store");
        Ok(store)
    }

    /// A store built by `factory` on the worker thread (after the Linux session-keyring join), under `service`.
    /// Tests pass `keyring_core::mock::Store::new`; hosts may pass another `keyring-core` store.
    pub async fn open_with<F>(factory: F, service: &str) -> Result<KeyringStore>
    where
        F: FnOnce() -> std::result::Result<Arc<CredentialStore>, String> + Send + 'static,
    {
        let (jobs, receiver) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = oneshot::channel::<std::result::Result<String, String>>();
        std::thread::Builder::new()
            .name("pimcp-keyring".into())
            .spawn(move || worker(factory, receiver, ready_tx))
            .map_err(|e| Error::NoTokenStore {
                reason: format!("cannot start the keyring thread: {e}"),
            })?;
        let vendor = ready_rx
            .await
            .map_err(|_| Error::NoTokenStore {
                reason: "the keyring thread exited during start-up".into(),
            })?
            .map_err(|reason| Error::NoTokenStore { reason })?;
        let store = KeyringStore {
            jobs: Mutex::new(jobs),
            service: service.to_string(),
            vendor,
        };
        store
            .probe()
            .await
            .map_err(|e| Error::NoTokenStore { reason: e.to_string() })?;
        Ok(store)
    }

    /// Which backend this is (e.g. "Linux keyutils, …").
    pub fn vendor(&self) -> &str {
        &self.vendor
    }

    async fn probe(&self) -> Result<()> {
        let service = self.service.clone();
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, PROBE_ACCOUNT).map_err(store_error)?;
            entry.set_secret(b"probe").map_err(store_error)?;
            let back = entry.get_secret().map_err(store_error)?;
            let _ = entry.delete_credential();
            if back == b"probe" {
                Ok(())
            } else {
                Err(Error::Store {
                    store: "keyring",
                    reason: "probe read back a different value".into(),
                })
            }
        })
        .await
    }

    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Arc<CredentialStore>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        let boxed: Job = Box::new(move |store| {
            let _ = reply.send(job(store));
        });
        self.jobs
            .lock()
            .map_err(|_| Error::Store {
                store: "keyring",
                reason: "job queue lock poisoned".into(),
            })?
            .send(boxed)
            .map_err(|_| Error::Store {
                store: "keyring",
                reason: "the keyring thread is gone".into(),
            })?;
        answer.await.map_err(|_| Error::Store {
            store: "keyring",
            reason: "the keyring thread dropped a request".into(),
        })?
    }
}

fn worker<F>(factory: F, jobs: mpsc::Receiver<Job>, ready: oneshot::Sender<std::result::Result<String, String>>)
where
    F: FnOnce() -> std::result::Result<Arc<CredentialStore>, String>,
{
    let store = match factory() {
        Ok(store) => store,
        Err(reason) => {
            let _ = ready.send(Err(reason));
            return;
        }
    };
    let _ = ready.send(Ok(store.vendor()));
    while let Ok(job) = jobs.recv() {
        job(&store);
    }
}

/// How long the Secret Service may take to answer the start-up probe before pimcp falls back to keyutils. A provider
/// that opens an unlock prompt never answers a headless process; the worker thread stuck on it is left behind.
#[cfg(target_os = "linux")]
const SECRET_SERVICE_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The reason inside a failed open (they are all [`Error::NoTokenStore`]).
#[cfg(target_os = "linux")]
fn open_reason(err: Error) -> String {
    match err {
        Error::NoTokenStore { reason } => reason,
        other => other.to_string(),
    }
}

/// Linux: Secret Service when a D-Bus session is configured and answers, else kernel keyutils.
#[cfg(target_os = "linux")]
async fn open_platform(service: &str) -> Result<KeyringStore> {
    use crate::store::keyutils::keyutils_store;
    use crate::store::secret_service::{secret_service_store, session_bus_configured};

    open_linux(service, session_bus_configured(), secret_service_store, keyutils_store).await
}

/// The Linux selection rule over two store factories: with a session bus, try `secret_service` (probed, within
/// [`SECRET_SERVICE_WAIT`]); otherwise, or when it fails, `keyutils`; neither → [`Error::NoTokenStore`] with both
/// reasons (its message names `settings.tokenStore: "file"`).
#[cfg(target_os = "linux")]
async fn open_linux<S, K>(service: &str, session_bus: bool, secret_service: S, keyutils: K) -> Result<KeyringStore>
where
    S: FnOnce() -> std::result::Result<Arc<CredentialStore>, String> + Send + 'static,
    K: FnOnce() -> std::result::Result<Arc<CredentialStore>, String> + Send + 'static,
{
    use crate::store::secret_service::SESSION_BUS_ENV;

    let secret_service_reason = if session_bus {
        let attempt = tokio::time::timeout(SECRET_SERVICE_WAIT, KeyringStore::open_with(secret_service, service)).await;
        let reason = match attempt {
            Ok(Ok(store)) => return Ok(store),
            Ok(Err(err)) => open_reason(err),
            Err(_) => format!(
                "Secret Service did not answer within {} s",
                SECRET_SERVICE_WAIT.as_secs()
            ),
        };
        tracing::info!(%reason, "Secret Service is not usable; using kernel keyutils for oauth tokens");
        reason
    } else {
        format!("{SESSION_BUS_ENV} is not set, so no Secret Service")
    };
    KeyringStore::open_with(keyutils, service)
        .await
        .map_err(|err| Error::NoTokenStore {
            reason: format!("{secret_service_reason}; kernel keyutils: {}", open_reason(err)),
        })
}

/// macOS: the user's login Keychain.
#[cfg(target_os = "macos")]
async fn open_platform(service: &str) -> Result<KeyringStore> {
    KeyringStore::open_with(crate::store::keychain::keychain_store, service).await
}

/// Windows: the Credential Manager.
#[cfg(target_os = "windows")]
async fn open_platform(service: &str) -> Result<KeyringStore> {
    KeyringStore::open_with(crate::store::wincred::credential_manager_store, service).await
}

/// Other platforms have no OS credential store in pimcp: fail closed (the error names the file store).
#[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
async fn open_platform(_service: &str) -> Result<KeyringStore> {
    Err(Error::NoTokenStore {
        reason: "pimcp has no OS credential store for this platform".into(),
    })
}

fn store_error(err: keyring_core::Error) -> Error {
    Error::Store {
        store: "keyring",
        reason: keyring_reason(&err),
    }
}

#[async_trait]
impl TokenStore for KeyringStore {
    fn name(&self) -> &'static str {
        "keyring"
    }

    async fn load_any(&self, key: &StoreKey) -> Result<Option<TokenRecord>> {
        let service = self.service.clone();
        let account = key.account();
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, &account).map_err(store_error)?;
            match entry.get_secret() {
                Ok(bytes) => {
                    let json = String::from_utf8(bytes).map_err(|_| Error::Store {
                        store: "keyring",
                        reason: "stored value is not UTF-8".into(),
                    })?;
                    TokenRecord::from_json(&json).map(Some)
                }
                Err(keyring_core::Error::NoEntry) => Ok(None),
                Err(e) => Err(store_error(e)),
            }
        })
        .await
    }

    async fn save(&self, key: &StoreKey, record: &TokenRecord) -> Result<()> {
        let service = self.service.clone();
        let account = key.account();
        let json = record.to_json_compact()?;
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, &account).map_err(store_error)?;
            entry.set_secret(json.as_bytes()).map_err(store_error)
        })
        .await
    }

    async fn delete(&self, key: &StoreKey) -> Result<()> {
        let service = self.service.clone();
        let account = key.account();
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, &account).map_err(store_error)?;
            match entry.delete_credential() {
                Ok(()) | Err(keyring_core::Error::NoEntry) => Ok(()),
                Err(e) => Err(store_error(e)),
            }
        })
        .await
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    type Factory = Box<dyn FnOnce() -> std::result::Result<Arc<CredentialStore>, String> + Send>;

    /// A factory that records that it ran and then builds a mock store (or fails with `fail`).
    fn factory(ran: &Arc<AtomicBool>, fail: Option<&str>) -> Factory {
        let ran = ran.clone();
        let fail = fail.map(str::to_string);
        Box::new(move || {
            ran.store(true, Ordering::SeqCst);
            match fail {
                Some(reason) => Err(reason),
                None => keyring_core::mock::Store::new()
                    .map(|s| s as Arc<CredentialStore>)
                    .map_err(|e| e.to_string()),
            }
        })
    }

    struct Ran {
        secret_service: Arc<AtomicBool>,
        keyutils: Arc<AtomicBool>,
    }

    async fn open(session_bus: bool, ss_fail: Option<&str>, ku_fail: Option<&str>) -> (Result<KeyringStore>, Ran) {
        let ran = Ran {
            secret_service: Arc::new(AtomicBool::new(false)),
            keyutils: Arc::new(AtomicBool::new(false)),
        };
        let result = open_linux(
            "pimcp.unit",
            session_bus,
            factory(&ran.secret_service, ss_fail),
            factory(&ran.keyutils, ku_fail),
        )
        .await;
        (result, ran)
    }

    #[tokio::test]
    async fn a_session_bus_with_a_working_secret_service_wins() {
        let (store, ran) = open(true, None, None).await;
        assert!(store.is_ok());
        assert!(ran.secret_service.load(Ordering::SeqCst));
        assert!(!ran.keyutils.load(Ordering::SeqCst), "keyutils is not opened");
    }

    #[tokio::test]
    async fn without_a_session_bus_secret_service_is_not_tried() {
        let (store, ran) = open(false, None, None).await;
        assert!(store.is_ok());
        assert!(!ran.secret_service.load(Ordering::SeqCst));
        assert!(ran.keyutils.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_failing_secret_service_falls_back_to_keyutils() {
        let (store, ran) = open(true, Some("ServiceUnknown: org.freedesktop.secrets"), None).await;
        assert!(store.is_ok());
        assert!(ran.secret_service.load(Ordering::SeqCst));
        assert!(ran.keyutils.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn neither_store_fails_closed_with_both_reasons_and_the_opt_in() {
        let (store, _) = open(true, Some("collection is locked"), Some("keyctl: EPERM")).await;
        let err = store.unwrap_err();
        assert!(matches!(err, Error::NoTokenStore { .. }), "{err:?}");
        let text = err.to_string();
        for part in [
            "collection is locked",
            "kernel keyutils: keyctl: EPERM",
            "settings.tokenStore: \"file\"",
        ] {
            assert!(text.contains(part), "`{part}` missing from: {text}");
        }

        let (store, _) = open(false, None, Some("keyctl: EPERM")).await;
        let text = store.unwrap_err().to_string();
        assert!(
            text.contains("DBUS_SESSION_BUS_ADDRESS is not set") && text.contains("settings.tokenStore: \"file\""),
            "{text}"
        );
    }
}
