//! Token stores: URL binding, file permissions and format, keyring (mock and real kernel keyutils across
//! processes), legacy import, and failing closed.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;
use std::sync::Arc;

use pimcp_auth::{
    ClientRegistration, Error, FileStore, KeyringStore, MemoryStore, StoreKey, TokenRecord, TokenStore, import_legacy,
    open_store,
};
use pimcp_config::{Secret, TokenStoreKind};

use crate::support::{sha, token_tool};

fn record(url: &str, token: &str) -> TokenRecord {
    TokenRecord {
        access_token: Secret::new(token),
        refresh_token: Some(Secret::new(format!("{token}-refresh"))),
        expires_at: Some(4_000_000_000),
        scope: Some("mcp".into()),
        token_type: "Bearer".into(),
        server_url: url.into(),
        issuer: Some("https://as.example".into()),
        client: ClientRegistration {
            client_id: "c1".into(),
            ..ClientRegistration::default()
        },
        token_endpoint: Some("https://as.example/token".into()),
        resource: Some(url.into()),
        obtained_at_ms: 7,
    }
}

async fn url_change_invalidates(store: &dyn TokenStore) {
    let old = StoreKey::new("github", "https://old.example/mcp");
    store.save(&old, &record(&old.url, "at-old")).await.unwrap();
    assert!(store.load(&old).await.unwrap().is_some());
    let moved = StoreKey::new("github", "https://new.example/mcp");
    assert!(
        store.load(&moved).await.unwrap().is_none(),
        "{} returned tokens bound to another URL",
        store.name()
    );
    assert!(store.load_any(&moved).await.unwrap().is_some());
    store.save(&moved, &record(&moved.url, "at-new")).await.unwrap();
    assert!(store.load(&old).await.unwrap().is_none());
    store.delete(&moved).await.unwrap();
    store.delete(&moved).await.unwrap();
    assert!(store.load_any(&moved).await.unwrap().is_none());
}

#[tokio::test]
async fn url_change_invalidates_stored_tokens_in_every_store() {
    url_change_invalidates(&MemoryStore::new()).await;
    let dir = tempfile::tempdir().unwrap();
    url_change_invalidates(&FileStore::new(dir.path())).await;
    let mock = KeyringStore::open_with(
        || {
            keyring_core::mock::Store::new()
                .map(|s| s as Arc<keyring_core::CredentialStore>)
                .map_err(|e| e.to_string())
        },
        "pimcp.test",
    )
    .await
    .unwrap();
    url_change_invalidates(&mock).await;
}

#[tokio::test]
async fn file_store_writes_private_files_in_the_seed_format() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let key = StoreKey::new("github", "https://m.example/mcp");
    store.save(&key, &record(&key.url, "at-1")).await.unwrap();
    store.save(&key, &record(&key.url, "at-2")).await.unwrap();

    let path = store.path_for(&key);
    assert_eq!(
        path,
        dir.path().join("mcp-oauth").join(key.account()).join("tokens.json")
    );
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(entries, ["tokens.json"], "no temp files left behind");

    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["tokens"]["accessToken"], "at-2");
    assert_eq!(json["tokens"]["refreshToken"], "at-2-refresh");
    assert_eq!(
        json["tokens"]["expiresAt"], 4_000_000_000u64,
        "unix seconds, an integer"
    );
    assert_eq!(json["clientInfo"]["clientId"], "c1");
    assert_eq!(json["serverUrl"], key.url);

    // A loosened file is tightened again on read.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(store.load(&key).await.unwrap().is_some());
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
}

#[tokio::test]
async fn open_store_honours_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(TokenStoreKind::File, dir.path()).await.unwrap();
    assert_eq!(store.name(), "file");
}

#[tokio::test]
async fn an_unusable_keyring_fails_closed_naming_the_file_setting() {
    let err = KeyringStore::open_with(|| Err("no D-Bus session and no keyutils".to_string()), "pimcp.test")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoTokenStore { .. }));
    let text = err.to_string();
    assert!(
        text.contains("settings.tokenStore: \"file\"") && text.contains("no D-Bus session"),
        "{text}"
    );
}

#[tokio::test]
async fn legacy_token_files_are_imported_once() {
    let legacy = tempfile::tempdir().unwrap();
    let key = StoreKey::new("github", "https://m.example/mcp");
    let dir = legacy.path().join(key.account());
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens.json");
    std::fs::write(
        &file,
        format!(
            r#"{{"tokens":{{"accessToken":"legacy-at","refreshToken":"legacy-rt","expiresAt":1900000000,"scope":"mcp"}},
               "clientInfo":{{"clientId":"legacy-client"}},"serverUrl":"{}"}}"#,
            key.url
        ),
    )
    .unwrap();
    let store = MemoryStore::new();
    // Bound to another URL: ignored and left alone.
    let other = StoreKey::new("github", "https://elsewhere.example/mcp");
    assert!(import_legacy(legacy.path(), &other, &store).await.unwrap().is_none());
    assert!(file.exists());

    let imported = import_legacy(legacy.path(), &key, &store).await.unwrap().unwrap();
    assert_eq!(imported.access_token.expose(), "legacy-at");
    assert_eq!(imported.client.client_id, "legacy-client");
    assert_eq!(store.load(&key).await.unwrap().unwrap(), imported);
    assert!(!file.exists(), "the plaintext legacy file is removed after import");
    assert!(import_legacy(legacy.path(), &key, &store).await.unwrap().is_none());
}

fn tool(args: &[&str]) -> String {
    // No session bus: the child uses kernel keyutils even where a Secret Service runs (see secret_service.rs).
    let out = Command::new(token_tool())
        .args(args)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "token_tool {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Real kernel keyutils, headless: one process stores, a second one (its own session keyring) reads and deletes.
#[tokio::test]
async fn keyutils_store_round_trips_across_processes() {
    let service = format!("pimcp.test.{}.{:x}", std::process::id(), rand::random::<u64>());
    let url = "https://m.example/mcp";
    let saved = tokio::task::spawn_blocking({
        let service = service.clone();
        move || tool(&["keyring-save", &service, "github", url, "keyutils-planted-token"])
    })
    .await
    .unwrap();
    assert!(saved.contains("Linux keyutils"), "{saved}");
    let loaded = tokio::task::spawn_blocking({
        let service = service.clone();
        move || tool(&["keyring-load", &service, "github", url])
    })
    .await
    .unwrap();
    assert_eq!(loaded, format!("token={}", sha("keyutils-planted-token")));
    let other_url = tokio::task::spawn_blocking({
        let service = service.clone();
        move || tool(&["keyring-load", &service, "github", "https://moved.example/mcp"])
    })
    .await
    .unwrap();
    assert_eq!(other_url, "none", "a URL change invalidates");
    tokio::task::spawn_blocking({
        let service = service.clone();
        move || tool(&["keyring-delete", &service, "github", url])
    })
    .await
    .unwrap();
    let gone = tokio::task::spawn_blocking(move || tool(&["keyring-load", &service, "github", url]))
        .await
        .unwrap();
    assert_eq!(gone, "none");
}
