//! OAuth through the runtime against `mcp-fixture --http --oauth` (a real process whose fake authorization server
//! approves at once): needs-auth → auth_start → complete (pasted redirect, or the loopback listener) → ready → call;
//! `settings.autoAuth` with a headless browser; refresh before expiry; one refresh + retry on 401; a refused refresh
//! keeps the record and reports needs-auth; a URL change invalidates the login; client_credentials (secret, and
//! `oauth.clientPrivateKey` from a `!command`); SEP-990 `identity_assertion` from configuration; and a planted
//! token never appears in status JSON, errors or logs. Tokens live in an injected in-memory store.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pimcp_actors::{CallOptions, ErrorCategory, Runtime, RuntimeOptions, ServerState};
use pimcp_auth::{BrowserOpener, CallbackPort, MemoryStore, StoreKey, TokenStore};
use pimcp_config::Secret;
use serde_json::{Value, json};

use super::support::*;

struct OAuthFixture {
    _child: tokio::process::Child,
    port: u16,
}

impl OAuthFixture {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

async fn oauth_fixture(dir: &Path) -> OAuthFixture {
    let port_file = dir.join("oauth.port");
    let child = tokio::process::Command::new(fixture())
        .args([
            "--http",
            "127.0.0.1:0",
            "--oauth",
            "--port-file",
            port_file.to_str().unwrap(),
        ])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_until("fixture port file", Duration::from_secs(20), || {
        read_pid(&port_file).is_some()
    })
    .await;
    let port = u16::try_from(read_pid(&port_file).unwrap()).unwrap();
    OAuthFixture { _child: child, port }
}

/// Follows redirects like a browser would, so the loopback listener receives the authorization response.
struct HeadlessBrowser;

impl BrowserOpener for HeadlessBrowser {
    fn open(&self, url: &str) -> Result<(), String> {
        let url = url.to_owned();
        let handle = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
        handle.spawn(async move {
            let _ = reqwest::get(url).await;
        });
        Ok(())
    }
}

struct Setup {
    rt: Runtime,
    store: Arc<MemoryStore>,
    dir: tempfile::TempDir,
    fx: OAuthFixture,
}

fn options(dir: &Path, config: &Value, store: &Arc<MemoryStore>) -> RuntimeOptions {
    let mut opts = RuntimeOptions::new(load(config, dir), dir.join("agent"), dir.join("data"));
    opts.tuning = tuning();
    opts.auth.store = Some(store.clone());
    opts.auth.open_browser = false;
    opts.auth.callback_port = Some(CallbackPort::Preferred(0));
    opts
}

/// A runtime with one server `web` (`entry` merged over `{"url": …, "protocol": "legacy"}`).
async fn setup(entry: Value, settings: Value, browser: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let fx = oauth_fixture(dir.path()).await;
    let mut server = json!({"url": fx.url(), "protocol": "legacy"});
    for (k, v) in entry.as_object().unwrap() {
        server[k] = v.clone();
    }
    let config = json!({"settings": settings, "mcpServers": {"web": server}});
    let store = Arc::new(MemoryStore::new());
    let mut opts = options(dir.path(), &config, &store);
    if browser {
        opts.auth.browser = Some(Arc::new(HeadlessBrowser));
        opts.auth.open_browser = true;
    }
    let rt = Runtime::start(opts).await.unwrap();
    Setup { rt, store, dir, fx }
}

/// GETs the authorization URL without following the redirect: the `Location` is the authorization response.
async fn authorize(url: &str) -> String {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 302, "the fake authorization server approves at once");
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// A full login by pasting the redirect URL.
async fn login(rt: &Runtime, server: &str) {
    let start = rt.auth_start(server).await.unwrap();
    let redirect = authorize(&start.url).await;
    rt.auth_complete(server, &redirect).await.unwrap();
}

fn key(s: &Setup) -> StoreKey {
    StoreKey::new("web", s.fx.url())
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

async fn echo(rt: &Runtime, text: &str) -> pimcp_actors::Result<String> {
    rt.call("web_echo", args(json!({"text": text})), CallOptions::default())
        .await
        .map(|o| o.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn needs_auth_then_login_by_pasted_redirect_then_ready_and_call() {
    let s = setup(json!({}), json!({}), false).await;
    let err = echo(&s.rt, "hi").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NeedsAuth, "{err}");
    assert!(err.to_string().contains("pimcp-run auth login web"), "{err}");
    assert_eq!(state_of(&s.rt, "web"), ServerState::NeedsAuth);
    let reason = s.rt.status().server("web").unwrap().reason.clone().unwrap();
    assert!(reason.starts_with("needs auth: not logged in"), "{reason}");

    let start = s.rt.auth_start("web").await.unwrap();
    assert!(start.url.contains("code_challenge_method=S256"), "PKCE");
    let pending = s.rt.auth_status().await.unwrap();
    let web = pending.server("web").unwrap();
    assert!(web.detected && !web.logged_in);
    assert_eq!(web.pending.as_ref().map(|p| p.url.as_str()), Some(start.url.as_str()));

    let redirect = authorize(&start.url).await;
    assert!(redirect.contains("code="), "{redirect}");
    s.rt.auth_complete("web", &redirect).await.unwrap();
    assert_eq!(state_of(&s.rt, "web"), ServerState::Ready);
    assert_eq!(echo(&s.rt, "hi").await.unwrap(), "hi");

    let status = s.rt.auth_status().await.unwrap();
    let web = status.server("web").unwrap();
    assert!(
        web.logged_in && web.has_refresh_token && web.pending.is_none(),
        "{web:?}"
    );
    assert!(web.expires_at.is_some_and(|at| at > now_secs()));
    let record = s.store.load(&key(&s)).await.unwrap().unwrap();
    assert_eq!(record.server_url, s.fx.url());
    // A pasted URL is single-use: the login is gone.
    let again = s.rt.auth_complete("web", &redirect).await.unwrap_err();
    assert_eq!(again.category(), ErrorCategory::NeedsAuth, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loopback_listener_completes_the_login_and_the_server_reconnects() {
    let s = setup(json!({"auth": "oauth"}), json!({}), false).await;
    let err = s.rt.connect("web").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NeedsAuth, "{err}");
    let nothing_pending = s.rt.auth_wait("web", Duration::from_secs(1)).await.unwrap_err();
    assert_eq!(nothing_pending.category(), ErrorCategory::NeedsAuth);
    let start = s.rt.auth_start("web").await.unwrap();
    let redirect = authorize(&start.url).await;
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
    // What the browser does next: land on the loopback listener.
    let page = reqwest::get(&redirect).await.unwrap();
    assert_eq!(page.status(), 200);
    s.rt.auth_wait("web", Duration::from_secs(30)).await.unwrap();
    assert!(s.rt.auth_status().await.unwrap().server("web").unwrap().logged_in);
    wait_until("ready after the login", Duration::from_secs(30), || {
        state_of(&s.rt, "web") == ServerState::Ready
    })
    .await;
    assert_eq!(echo(&s.rt, "via listener").await.unwrap(), "via listener");
    assert!(s.store.load(&key(&s)).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_auth_logs_in_with_a_headless_browser_and_the_first_call_succeeds() {
    let s = setup(json!({}), json!({"autoAuth": true}), true).await;
    assert_eq!(echo(&s.rt, "first").await.unwrap(), "first");
    assert_eq!(state_of(&s.rt, "web"), ServerState::Ready);
    let record = s.store.load(&key(&s)).await.unwrap().unwrap();
    assert!(record.refresh_token.is_some());
    // Logging out forgets the record; the next connect has nothing to send and logs in again by itself.
    s.rt.auth_logout("web").await.unwrap();
    assert!(s.store.load_any(&key(&s)).await.unwrap().is_none());
    s.rt.reconnect("web").await.unwrap();
    let again = s.store.load(&key(&s)).await.unwrap().unwrap();
    assert_ne!(again.access_token, record.access_token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_oauth_dir_imports_a_legacy_token_file_once() {
    let s = setup(json!({"auth": "oauth"}), json!({}), false).await;
    login(&s.rt, "web").await;
    let record = s.store.load(&key(&s)).await.unwrap().unwrap();
    // The same tokens as a legacy plaintext file (pi-mcp-adapter's `<oauthDir>/<account>/tokens.json`).
    let legacy = s.dir.path().join("legacy-oauth");
    let file = legacy.join(key(&s).account()).join("tokens.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let body = json!({
        "tokens": {
            "accessToken": record.access_token.expose(),
            "refreshToken": record.refresh_token.as_ref().map(|t| t.expose().to_owned()),
            "expiresAt": record.expires_at,
        },
        "clientInfo": { "clientId": record.client.client_id },
        "serverUrl": s.fx.url(),
    });
    std::fs::write(&file, body.to_string()).unwrap();

    // A runtime with an empty store: the first connect imports the file, and the call is authorized with it.
    let config = json!({
        "settings": { "oauthDir": legacy },
        "mcpServers": { "web": { "url": s.fx.url(), "protocol": "legacy", "auth": "oauth" } },
    });
    let store = Arc::new(MemoryStore::new());
    let rt = Runtime::start(options(s.dir.path(), &config, &store)).await.unwrap();
    assert_eq!(echo(&rt, "imported").await.unwrap(), "imported");
    let imported = store.load(&key(&s)).await.unwrap().unwrap();
    assert_eq!(imported.client.client_id, record.client.client_id);
    assert!(!file.exists(), "the plaintext file is removed once imported");
    rt.shutdown(Duration::from_secs(10)).await;
    s.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_about_to_expire_is_refreshed_before_connecting() {
    let s = setup(json!({"auth": "oauth"}), json!({}), false).await;
    login(&s.rt, "web").await;
    let mut record = s.store.load(&key(&s)).await.unwrap().unwrap();
    let before = record.clone();
    record.expires_at = Some(now_secs() + 20);
    record.obtained_at_ms = (now_secs() - 3600) * 1000;
    s.store.save(&key(&s), &record).await.unwrap();
    s.rt.reconnect("web").await.unwrap();
    let after = s.store.load(&key(&s)).await.unwrap().unwrap();
    assert_ne!(after.access_token, before.access_token, "a new access token");
    assert_ne!(
        after.refresh_token, before.refresh_token,
        "the fixture rotates refresh tokens"
    );
    assert!(after.expires_at.unwrap() > now_secs() + 600);
    assert_eq!(echo(&s.rt, "fresh").await.unwrap(), "fresh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_is_cured_by_one_refresh_and_one_retry() {
    let s = setup(json!({}), json!({}), false).await;
    login(&s.rt, "web").await;
    let mut record = s.store.load(&key(&s)).await.unwrap().unwrap();
    let refresh_before = record.refresh_token.clone();
    record.access_token = Secret::new("at-not-issued-by-the-server");
    s.store.save(&key(&s), &record).await.unwrap();
    s.rt.reconnect("web").await.unwrap();
    assert_eq!(state_of(&s.rt, "web"), ServerState::Ready);
    let after = s.store.load(&key(&s)).await.unwrap().unwrap();
    assert_ne!(after.access_token.expose(), "at-not-issued-by-the-server");
    assert_ne!(
        after.refresh_token, refresh_before,
        "refreshed (rotated), not a new login"
    );
    assert_eq!(after.client, record.client, "same registered client");
    assert_eq!(echo(&s.rt, "retried").await.unwrap(), "retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_refresh_keeps_the_record_reports_needs_auth_and_never_shows_the_tokens() {
    let logs = capture_logs();
    let s = setup(json!({"auth": "oauth"}), json!({}), false).await;
    login(&s.rt, "web").await;
    let mut planted = s.store.load(&key(&s)).await.unwrap().unwrap();
    planted.access_token = Secret::new("planted-access-7f3a9c");
    planted.refresh_token = Some(Secret::new("planted-refresh-7f3a9c"));
    s.store.save(&key(&s), &planted).await.unwrap();

    let err = s.rt.reconnect("web").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NeedsAuth, "{err}");
    assert!(err.to_string().contains("invalid_grant"), "{err}");
    assert_eq!(state_of(&s.rt, "web"), ServerState::NeedsAuth);
    let kept = s.store.load(&key(&s)).await.unwrap().unwrap();
    assert_eq!(kept, planted, "a failed refresh leaves the stored record as it was");
    // The refused record is not refreshed again on the next attempt: the answer is immediate and the same.
    let call = echo(&s.rt, "x").await.unwrap_err();
    assert_eq!(call.category(), ErrorCategory::NeedsAuth);

    let status_json = serde_json::to_string(&s.rt.status()).unwrap();
    let auth_json = serde_json::to_string(&s.rt.auth_status().await.unwrap()).unwrap();
    let texts = [
        status_json,
        auth_json,
        err.to_string(),
        format!("{err:?}"),
        call.to_string(),
        format!("{call:?}"),
        format!("{:?}", s.rt.auth_status().await.unwrap()),
        logs.text(),
    ];
    for text in &texts {
        assert!(!text.contains("7f3a9c"), "a planted token leaked: {text}");
    }
    assert!(logs.text().contains("oauth token refresh failed"), "the capture works");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_change_invalidates_the_stored_login() {
    let s = setup(json!({"auth": "oauth"}), json!({}), false).await;
    login(&s.rt, "web").await;
    let moved = format!("http://localhost:{}/mcp", s.fx.port);
    let config = json!({"mcpServers": {"web": {"url": moved, "protocol": "legacy", "auth": "oauth"}}});
    s.rt.reconfigure(load(&config, s.dir.path())).await.unwrap();
    let err = s.rt.connect("web").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NeedsAuth, "{err}");
    let status = s.rt.auth_status().await.unwrap();
    assert!(!status.server("web").unwrap().logged_in);
    let old = s.store.load_any(&key(&s)).await.unwrap().unwrap();
    assert_eq!(old.server_url, s.fx.url(), "the record stays bound to the old URL");
    assert!(s.store.load(&StoreKey::new("web", moved)).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_connect_without_a_login() {
    let dir = tempfile::tempdir().unwrap();
    let fx = oauth_fixture(dir.path()).await;
    // A confidential client, registered out of band (what an administrator would hand to a CI job).
    let registered: Value = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/register", fx.port))
        .json(&json!({
            "redirect_uris": ["http://127.0.0.1/unused"],
            "token_endpoint_auth_method": "client_secret_basic",
            "grant_types": ["client_credentials"],
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let config = json!({"mcpServers": {"web": {
        "url": fx.url(), "protocol": "legacy",
        "oauth": {"grantType": "client_credentials", "clientId": registered["client_id"],
                  "clientSecret": registered["client_secret"]},
    }}});
    let store = Arc::new(MemoryStore::new());
    let rt = Runtime::start(options(dir.path(), &config, &store)).await.unwrap();
    assert_eq!(echo(&rt, "machine").await.unwrap(), "machine");
    let record = store.load(&StoreKey::new("web", fx.url())).await.unwrap().unwrap();
    assert!(record.refresh_token.is_none());
    let err = rt.auth_start("web").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Config, "{err}");
}

/// A `!command` client secret that fails (a locked password manager) is retried on a later call, not a
/// configuration error until restart; the message names the field, never the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_oauth_secret_command_is_retried_on_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let fx = oauth_fixture(dir.path()).await;
    let registered: Value = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/register", fx.port))
        .json(&json!({
            "redirect_uris": ["http://127.0.0.1/unused"],
            "token_endpoint_auth_method": "client_secret_basic",
            "grant_types": ["client_credentials"],
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let unlocked = dir.path().join("unlocked");
    let secret = registered["client_secret"].as_str().unwrap();
    let config = json!({"mcpServers": {"web": {
        "url": fx.url(), "protocol": "legacy",
        "oauth": {"grantType": "client_credentials", "clientId": registered["client_id"],
                  "clientSecret": format!("!test -f '{}' && echo '{secret}'", unlocked.display())},
    }}});
    let store = Arc::new(MemoryStore::new());
    let rt = Runtime::start(options(dir.path(), &config, &store)).await.unwrap();
    let err = echo(&rt, "locked").await.unwrap_err();
    assert!(err.to_string().contains("oauth.clientSecret"), "{err}");
    assert!(!err.to_string().contains(secret), "{err}");
    assert_ne!(state_of(&rt, "web"), ServerState::ConfigError, "{err}");
    std::fs::write(&unlocked, "").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match echo(&rt, "unlocked").await {
            Ok(text) => break assert_eq!(text, "unlocked"),
            Err(e) => assert!(std::time::Instant::now() < deadline, "never retried: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_without_oauth_never_open_a_store_and_refuse_logins() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"settings": {"tokenStore": "file"}, "mcpServers": {
        "local": stdio(&[]),
        "keyed": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}},
    }});
    let opts = RuntimeOptions::new(
        load(&config, dir.path()),
        dir.path().join("agent"),
        dir.path().join("data"),
    );
    let rt = Runtime::start(opts).await.unwrap();
    assert_eq!(
        rt.call("local_echo", args(json!({"text": "ok"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "ok"
    );
    let status = rt.auth_status().await.unwrap();
    assert_eq!(status.server("local").unwrap().mode, pimcp_actors::AuthMode::None);
    assert_eq!(status.server("keyed").unwrap().mode, pimcp_actors::AuthMode::Headers);
    let err = rt.auth_start("keyed").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Config, "{err}");
    assert!(rt.auth_start("nope").await.is_err());
    assert!(
        !dir.path().join("data").join("mcp-oauth").exists(),
        "no token store was touched"
    );
}

/// Everything logged by any test of this binary (debug and up), for the planted-secret check.
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[derive(Clone)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() -> Logs {
    static BUFFER: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    let buffer = BUFFER.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Buffer(buffer.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        buffer
    });
    Logs(buffer.clone())
}

use mcp_fixture::oauth as fake_as;

/// An in-process MCP server (one `echo` tool) behind the fixture's fake authorization server, which the test can
/// make forget tokens mid-session.
mod guarded {
    use std::sync::Arc;

    use axum::extract::Request;
    use axum::middleware::Next;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
        ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use rmcp::{ErrorData, RoleServer, ServerHandler};

    use super::fake_as;

    #[derive(Clone)]
    struct Echo;

    impl ServerHandler for Echo {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let schema = serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}});
            let schema = schema.as_object().cloned().unwrap_or_default();
            Ok(ListToolsResult::with_all_items(vec![Tool::new(
                "echo",
                "Echoes `text`.",
                Arc::new(schema),
            )]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            let text = request
                .arguments
                .as_ref()
                .and_then(|a| a.get("text"))
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned();
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
        }
    }

    /// Serves `/mcp` (tokens checked on every request) and the authorization server on one loopback origin.
    pub(super) async fn start() -> Arc<fake_as::FakeAs> {
        start_with(fake_as::FakeAsConfig::default()).await
    }

    pub(super) async fn start_with(config: fake_as::FakeAsConfig) -> Arc<fake_as::FakeAs> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let fake = fake_as::FakeAs::new(base, config);
        let service = StreamableHttpService::new(
            || Ok(Echo),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let guard = fake.clone();
        let app = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(move |request: Request, next: Next| {
                let guard = guard.clone();
                async move {
                    match guard.check_bearer(request.headers()) {
                        Some(refusal) => refusal,
                        None => next.run(request).await,
                    }
                }
            }))
            .merge(fake_as::as_router(fake.clone()));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        fake
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_session_a_revoked_access_token_is_refreshed_and_the_call_retried_once() {
    let fake = guarded::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"web": {"url": fake.mcp_url(), "protocol": "legacy", "auth": "oauth"}}});
    let store = Arc::new(MemoryStore::new());
    let rt = Runtime::start(options(dir.path(), &config, &store)).await.unwrap();
    login(&rt, "web").await;
    assert_eq!(echo(&rt, "before").await.unwrap(), "before");
    let refreshes = fake.token_requests("refresh_token").len();

    fake.revoke_access_tokens();
    assert_eq!(
        echo(&rt, "after").await.unwrap(),
        "after",
        "refreshed and retried in the same session"
    );
    assert_eq!(
        fake.token_requests("refresh_token").len(),
        refreshes + 1,
        "exactly one refresh"
    );
    assert_eq!(state_of(&rt, "web"), ServerState::Ready);

    // Both tokens gone: the refresh is refused, the call fails with needs-auth and so does the server, the record
    // stays; a new login brings it back.
    let kept = store
        .load(&StoreKey::new("web", fake.mcp_url()))
        .await
        .unwrap()
        .unwrap();
    fake.revoke_access_tokens();
    fake.revoke_refresh_tokens();
    let err = echo(&rt, "refused").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NeedsAuth, "{err}");
    wait_until("needs-auth state", Duration::from_secs(10), || {
        state_of(&rt, "web") == ServerState::NeedsAuth
    })
    .await;
    let reason = rt.status().server("web").unwrap().reason.clone().unwrap();
    assert!(reason.contains("invalid_grant"), "{reason}");
    assert_eq!(
        store
            .load(&StoreKey::new("web", fake.mcp_url()))
            .await
            .unwrap()
            .unwrap(),
        kept
    );
    let refused = echo(&rt, "still").await.unwrap_err();
    assert_eq!(
        refused.category(),
        ErrorCategory::NeedsAuth,
        "calls are refused while logged out"
    );
    login(&rt, "web").await;
    assert_eq!(state_of(&rt, "web"), ServerState::Ready);
    assert_eq!(echo(&rt, "back").await.unwrap(), "back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_with_the_private_key_from_configuration() {
    use aws_lc_rs::signature::KeyPair as _;
    let pkcs8 = aws_lc_rs::signature::EcdsaKeyPair::generate_pkcs8(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &aws_lc_rs::rand::SystemRandom::new(),
    )
    .unwrap();
    let pair = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        pkcs8.as_ref(),
    )
    .unwrap();
    use base64::Engine as _;
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
    );
    let fake = guarded::start_with(fake_as::FakeAsConfig {
        jwt_clients: vec![("jwt-client".into(), pair.public_key().as_ref().to_vec())],
        auth_methods: vec!["private_key_jwt".into()],
        ..fake_as::FakeAsConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    // The key lives in a file, read by a `!command` as a user would configure it.
    let key_file = dir.path().join("client-key.pem");
    std::fs::write(&key_file, &pem).unwrap();
    let config = json!({"mcpServers": {"web": {"url": fake.mcp_url(), "protocol": "legacy", "oauth": {
        "grantType": "client_credentials", "clientId": "jwt-client",
        "clientPrivateKey": format!("!cat '{}'", key_file.display()),
    }}}});
    let store = Arc::new(MemoryStore::new());
    let rt = Runtime::start(options(dir.path(), &config, &store)).await.unwrap();
    assert_eq!(echo(&rt, "signed").await.unwrap(), "signed");
    let (params, used, status) = fake.token_requests("client_credentials").remove(0);
    assert_eq!(
        (used.as_str(), status),
        ("private_key_jwt", 200),
        "the fake verified the ES256 signature, iss/sub and aud"
    );
    assert!(!params.contains_key("client_secret"));
    let status = serde_json::to_string(&rt.auth_status().await.unwrap()).unwrap();
    assert!(!status.contains("PRIVATE KEY"), "{status}");
    rt.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_assertion_from_configuration_connects_without_a_login() {
    let fake = guarded::start_with(fake_as::FakeAsConfig {
        clients: vec![("xaa-client".into(), Some("xaa-secret".into()))],
        idp_id_tokens: vec!["planted-id-token".into()],
        idp_client: Some(("pimcp-at-idp".into(), None)),
        ..fake_as::FakeAsConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"web": {"url": fake.mcp_url(), "protocol": "legacy", "oauth": {
        "grantType": "identity_assertion", "clientId": "xaa-client", "clientSecret": "xaa-secret",
        "identityAssertion": {
            "idpIssuer": fake.idp_issuer(), "idpClientId": "pimcp-at-idp",
            "idToken": "!printf planted-id-token",
        },
    }}}});
    let store = Arc::new(MemoryStore::new());
    let rt = Runtime::start(options(dir.path(), &config, &store)).await.unwrap();
    assert_eq!(echo(&rt, "enterprise").await.unwrap(), "enterprise");
    let (exchange, used, status) = fake.token_requests(pimcp_auth::TOKEN_EXCHANGE_GRANT).remove(0);
    assert_eq!((used.as_str(), status), ("none", 200), "a public client at the IdP");
    assert_eq!(exchange["audience"], fake.issuer());
    assert_eq!(fake.token_requests(pimcp_auth::JWT_BEARER_GRANT).len(), 1);
    let record = store
        .load(&StoreKey::new("web", fake.mcp_url()))
        .await
        .unwrap()
        .unwrap();
    assert!(record.refresh_token.is_none());
    let status = serde_json::to_value(rt.auth_status().await.unwrap()).unwrap();
    let text = status.to_string();
    assert!(
        text.contains("identity_assertion") && !text.contains("planted"),
        "{text}"
    );
    let err = rt.auth_start("web").await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Config, "{err}");
    rt.shutdown(Duration::from_secs(5)).await;
}
