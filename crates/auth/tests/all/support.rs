//! Shared helpers: start the fake AS, build clients, play the browser, find the `token_tool` example.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use pimcp_auth::{AuthorizationRequest, OAuthClient, OAuthClientOptions, TokenRecord};
use pimcp_config::OAuthConfig;

use crate::fake_as::{FakeAs, FakeAsConfig};

/// A redirect URI nobody listens on: direct flows read the redirect from the `Location` header instead.
pub(crate) const REDIRECT: &str = "http://127.0.0.1:9/callback";

pub(crate) async fn start(config: FakeAsConfig) -> Arc<FakeAs> {
    FakeAs::start(config).await.unwrap()
}

pub(crate) fn client(fake: &FakeAs, config: OAuthConfig) -> OAuthClient {
    OAuthClient::new(OAuthClientOptions::new("srv", fake.mcp_url(), config)).unwrap()
}

pub(crate) fn client_with(fake: &FakeAs, options: impl FnOnce(&mut OAuthClientOptions)) -> OAuthClient {
    let mut o = OAuthClientOptions::new("srv", fake.mcp_url(), OAuthConfig::default());
    options(&mut o);
    OAuthClient::new(o).unwrap()
}

/// Act as the browser: request the authorization URL and return where the server redirects to.
pub(crate) async fn browse(url: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = http.get(url).send().await.unwrap();
    assert_eq!(response.status(), 302, "authorize did not redirect");
    response.headers()["location"].to_str().unwrap().to_string()
}

/// Start, browse, complete.
pub(crate) async fn login(client: &OAuthClient) -> TokenRecord {
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let redirect = browse(&start.url).await;
    client.complete(&redirect).await.unwrap()
}

/// Query parameters of a URL.
pub(crate) fn query(url: &str) -> std::collections::HashMap<String, String> {
    url::Url::parse(url).unwrap().query_pairs().into_owned().collect()
}

pub(crate) fn sha(text: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// The `token_tool` example, built on first use when missing or older than the crate's sources.
pub(crate) fn token_tool() -> PathBuf {
    static TOOL: OnceLock<PathBuf> = OnceLock::new();
    TOOL.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let exe = std::env::current_exe().unwrap();
        let profile = exe
            .parent()
            .and_then(|d| if d.ends_with("deps") { d.parent() } else { Some(d) })
            .unwrap();
        let candidate = profile.join("examples").join("token_tool");
        let newest = newest_mtime(&[
            crate_dir.join("src"),
            crate_dir.join("examples"),
            crate_dir.join("Cargo.toml"),
        ]);
        let fresh = std::fs::metadata(&candidate)
            .and_then(|m| m.modified())
            .map(|t| t >= newest)
            .unwrap_or(false);
        if fresh {
            return candidate;
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let output = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "pimcp-auth",
                "--example",
                "token_tool",
                "--message-format=json",
            ])
            .arg("--manifest-path")
            .arg(crate_dir.join("Cargo.toml"))
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(output.status.success(), "building the token_tool example failed");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "token_tool")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo reported no token_tool executable")
    })
    .clone()
}

fn newest_mtime(paths: &[PathBuf]) -> std::time::SystemTime {
    fn walk(path: &Path, newest: &mut std::time::SystemTime) {
        let Ok(meta) = std::fs::metadata(path) else { return };
        if meta.is_dir() {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                walk(&entry.path(), newest);
            }
        } else if let Ok(modified) = meta.modified() {
            *newest = (*newest).max(modified);
        }
    }
    let mut newest = std::time::UNIX_EPOCH;
    for path in paths {
        walk(path, &mut newest);
    }
    newest
}

/// `record` as if it had been obtained an hour ago and expired in 10 s: inside the proactive refresh window.
pub(crate) fn nearly_expired(record: &pimcp_auth::TokenRecord) -> pimcp_auth::TokenRecord {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    pimcp_auth::TokenRecord {
        expires_at: Some(now + 10),
        obtained_at_ms: (now - 3590) * 1000,
        ..record.clone()
    }
}
