//! `token_tool`: a small separate process for the auth crate's multi-process tests (and a usage example).
//!
//! ```text
//! token_tool refresh <data-dir> <server> <url>          wait for a line on stdin, then refresh_if_needed with a
//!                                                        FileStore and call <url> with the token; prints
//!                                                        `status=<http status> token=<sha256 of the access token>`
//! token_tool keyring-save <service> <server> <url> <token>   store a record in the OS keyring store
//! token_tool keyring-load <service> <server> <url>      prints `token=<sha256>` or `none`
//! token_tool keyring-delete <service> <server> <url>
//! ```
//! Tokens are never printed, only their SHA-256.

// The tool's answers are its stdout, read by the tests.
#![allow(clippy::print_stdout)]

use std::io::BufRead as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use pimcp_auth::{
    ClientRegistration, FileStore, KeyringStore, OAuthClient, OAuthClientOptions, StoreKey, TokenManager, TokenRecord,
    TokenStore,
};
use pimcp_config::{OAuthConfig, Secret};
use sha2::Digest as _;

fn sha(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().with_context(|| format!("missing argument {i}"));
    match arg(0)?.as_str() {
        "refresh" => {
            let data_dir = PathBuf::from(arg(1)?);
            let key = StoreKey::new(arg(2)?, arg(3)?);
            let store: Arc<dyn TokenStore> = Arc::new(FileStore::new(&data_dir));
            let manager = TokenManager::new(store, &data_dir);
            let client = OAuthClient::new(OAuthClientOptions::new(
                key.server.clone(),
                key.url.clone(),
                OAuthConfig::default(),
            ))?;
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            let http = reqwest::Client::new();
            let response = manager
                .send_authorized(&key, &client, |token| http.get(&key.url).bearer_auth(token))
                .await?;
            let record = manager.current(&key).await?.context("no record after refresh")?;
            println!(
                "status={} token={}",
                response.status().as_u16(),
                sha(record.access_token.expose())
            );
        }
        "keyring-save" => {
            let store = KeyringStore::open_with_service(&arg(1)?).await?;
            let key = StoreKey::new(arg(2)?, arg(3)?);
            let record = TokenRecord {
                access_token: Secret::new(arg(4)?),
                refresh_token: None,
                expires_at: None,
                scope: None,
                token_type: "Bearer".into(),
                server_url: key.url.clone(),
                issuer: None,
                client: ClientRegistration::default(),
                token_endpoint: None,
                resource: None,
                obtained_at_ms: 1,
            };
            store.save(&key, &record).await?;
            println!("saved vendor={}", store.vendor());
        }
        "keyring-load" => {
            let store = KeyringStore::open_with_service(&arg(1)?).await?;
            match store.load(&StoreKey::new(arg(2)?, arg(3)?)).await? {
                Some(record) => println!("token={}", sha(record.access_token.expose())),
                None => println!("none"),
            }
        }
        "keyring-delete" => {
            let store = KeyringStore::open_with_service(&arg(1)?).await?;
            store.delete(&StoreKey::new(arg(2)?, arg(3)?)).await?;
            println!("deleted");
        }
        other => bail!("unknown command `{other}`"),
    }
    Ok(())
}
