//! Shared helpers: fixture server configs, a runtime + proxy in a temp dir, a `ProxyServer` driven in-process over a
//! `tokio::io::duplex` pair by an rmcp client whose host capabilities a test chooses, polling toward deadlines and
//! the fixture's event log.
#![allow(deprecated, dead_code)] // sampling/roots are SEP-2577-deprecated; not every test uses every helper

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) use mcp_fixture::read_event_log as events;
use pimcp_actors::{Runtime, RuntimeOptions, Tuning};
use pimcp_config::{Config, LoadOptions, Severity};
use pimcp_proxy::{CallContext, HostBridge, Proxy, ProxyOptions, ProxyResponse, ProxyServer};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, Implementation,
    ListRootsResult, ProgressNotificationParam, ProtocolVersion, Root, SamplingMessage,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

pub(crate) fn fixture() -> String {
    mcp_fixture::bin_path().to_string_lossy().into_owned()
}

/// A stdio fixture server entry with extra flags.
pub(crate) fn stdio(args: &[&str]) -> Value {
    json!({ "command": fixture(), "args": args })
}

/// Short timings so recovery shows up quickly in tests.
pub(crate) fn tuning() -> Tuning {
    Tuning {
        connect_backoff_min: Duration::from_millis(50),
        connect_backoff_max: Duration::from_millis(400),
        close_grace: Duration::from_millis(500),
        ..Tuning::default()
    }
}

pub(crate) fn load(config: &Value, dir: &Path) -> Config {
    let cfg = pimcp_config::load_in_memory(config, &LoadOptions::new(dir.join("home"), dir));
    let errors: Vec<_> = cfg.problems.iter().filter(|p| p.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "config problems: {errors:?}");
    cfg
}

/// A runtime and proxy over `config`, with the host bridge installed (as `pimcp-run` does).
pub(crate) struct Env {
    pub dir: Arc<tempfile::TempDir>,
    pub runtime: Option<Runtime>,
    pub proxy: Proxy,
    pub bridge: HostBridge,
    pub config: Config,
}

impl Env {
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A `ProxyServer` over this env's proxy and bridge.
    pub(crate) fn server(&self) -> ProxyServer {
        ProxyServer::new(self.proxy.clone(), self.bridge.clone())
    }

    pub(crate) async fn call(&self, tool: &str, args: Value) -> ProxyResponse {
        self.proxy
            .call(
                tool,
                args.as_object().cloned().unwrap_or_default(),
                None,
                &CallContext::default(),
            )
            .await
    }

    /// Runs the `mcp` tool with these arguments.
    pub(crate) async fn mcp(&self, arguments: Value) -> ProxyResponse {
        self.proxy
            .handle_arguments(Some(&arguments), &CallContext::default())
            .await
    }

    pub(crate) async fn shutdown(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown(Duration::from_secs(5)).await;
        }
    }
}

/// `config` is the JSON of an mcp.json; `{dir}` in any string is replaced by the temp dir.
pub(crate) async fn start(config: Value) -> Env {
    start_in(Arc::new(tempfile::tempdir().unwrap()), config).await
}

/// [`start`] in an existing directory (a second run sees the first run's metadata cache).
pub(crate) async fn start_in(dir: Arc<tempfile::TempDir>, config: Value) -> Env {
    start_env(dir, config, &[]).await
}

/// [`start_in`] with these environment variables visible to the config loader (`MCP_DIRECT_TOOLS`, …).
pub(crate) async fn start_env(dir: Arc<tempfile::TempDir>, config: Value, env: &[(&str, &str)]) -> Env {
    let text = config.to_string().replace("{dir}", &dir.path().to_string_lossy());
    let config: Value = serde_json::from_str(&text).unwrap();
    let mut options = LoadOptions::new(dir.path().join("home"), dir.path());
    for (k, v) in env {
        options.env.insert(*k, *v);
    }
    let cfg = pimcp_config::load_in_memory(&config, &options);
    assert!(
        !cfg.problems.iter().any(|p| p.severity == Severity::Error),
        "config problems: {:?}",
        cfg.problems
    );
    let bridge = HostBridge::new();
    let mut opts = RuntimeOptions::new(cfg.clone(), dir.path().join("agent"), dir.path().join("data"));
    opts.tuning = tuning();
    opts.handlers = bridge.handlers();
    let runtime = Runtime::start(opts).await.unwrap();
    let proxy = Proxy::with_options(
        runtime.handle(),
        &cfg,
        ProxyOptions {
            spill: None,
            bridge: Some(bridge.clone()),
        },
    )
    .unwrap();
    Env {
        dir,
        runtime: Some(runtime),
        proxy,
        bridge,
        config: cfg,
    }
}

/// Polls `f` every 20 ms until it is true; panics naming `what` after `deadline`.
pub(crate) async fn wait_until(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    loop {
        if f() {
            return;
        }
        assert!(Instant::now() < end, "timed out after {deadline:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn count_events(path: &Path, name: &str, tool: Option<&str>) -> usize {
    events(path)
        .iter()
        .filter(|e| e["event"] == name && tool.is_none_or(|t| e["name"] == t))
        .count()
}

/// The text of a tool result.
pub(crate) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `_meta` category of an error result.
pub(crate) fn category_of(result: &CallToolResult) -> Option<String> {
    result
        .meta
        .as_ref()
        .and_then(|m| m.0.get("pimcp/category"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Asserts an error response with `category` (in `_meta`, in the text's last line and in `ProxyResponse`).
pub(crate) fn assert_error(r: &ProxyResponse, category: &str) {
    assert!(r.is_error(), "expected an error, got {:?}", r.text());
    assert_eq!(r.category.map(|c| c.as_str()), Some(category), "{}", r.text());
    assert_eq!(category_of(&r.result).as_deref(), Some(category));
    assert!(
        r.text().ends_with(&format!("category: {category}")),
        "text must end with the category: {}",
        r.text()
    );
}

pub(crate) fn assert_ok(r: &ProxyResponse) {
    assert!(!r.is_error(), "expected success, got {:?}", r.text());
}

/// What the test host records.
#[derive(Default)]
pub(crate) struct Probe {
    pub tools_changed: AtomicUsize,
    pub prompts_changed: AtomicUsize,
    pub resources_changed: AtomicUsize,
    pub sampled: AtomicUsize,
    pub elicitations: Mutex<Vec<String>>,
    pub roots_asked: AtomicUsize,
    /// The value the host picks in an approval form (`allow_once`, `allow_for_session`, `deny`).
    pub approval: Mutex<Option<String>>,
    /// `notifications/progress` received: (progress, total).
    pub progress: Mutex<Vec<(f64, Option<f64>)>>,
    /// URIs of the `notifications/resources/updated` received.
    pub updated: Mutex<Vec<String>>,
}

impl Probe {
    pub(crate) fn n(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}

/// An rmcp client playing the host, declaring the capabilities a test asks for.
#[derive(Clone)]
pub(crate) struct TestHost {
    pub caps: ClientCapabilities,
    pub version: ProtocolVersion,
    pub probe: Arc<Probe>,
}

impl TestHost {
    pub(crate) fn plain() -> TestHost {
        TestHost {
            caps: ClientCapabilities::default(),
            version: ProtocolVersion::V_2025_11_25,
            probe: Arc::default(),
        }
    }

    /// Declares sampling, elicitation and roots.
    pub(crate) fn capable() -> TestHost {
        TestHost {
            caps: ClientCapabilities::builder()
                .enable_roots()
                .enable_sampling()
                .enable_elicitation()
                .build(),
            ..TestHost::plain()
        }
    }
}

impl ClientHandler for TestHost {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(self.caps.clone(), Implementation::new("test-host", "1.0"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.probe.sampled.fetch_add(1, Ordering::SeqCst);
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("sampled by the host"),
            "host-model".to_owned(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        self.probe.elicitations.lock().unwrap().push(message.clone());
        if message.starts_with("MCP server") {
            return Ok(match self.probe.approval.lock().unwrap().clone() {
                Some(choice) => {
                    ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "decision": choice }))
                }
                None => ElicitResult::new(ElicitationAction::Decline),
            });
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({ "name": "Ada", "confirm": true })))
    }

    async fn list_roots(&self, _ctx: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        self.probe.roots_asked.fetch_add(1, Ordering::SeqCst);
        Ok(ListRootsResult::new(vec![Root::new("file:///host/project")]))
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.probe.tools_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.probe.prompts_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.probe.resources_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.probe.updated.lock().unwrap().push(params.uri);
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _ctx: NotificationContext<RoleClient>) {
        self.probe
            .progress
            .lock()
            .unwrap()
            .push((params.progress, params.total));
    }
}

/// A host connected in-process to a `ProxyServer`.
pub(crate) struct Session {
    pub client: RunningService<RoleClient, TestHost>,
    /// The server this host is connected to.
    pub server: ProxyServer,
    pub probe: Arc<Probe>,
    pub served: tokio::task::JoinHandle<pimcp_proxy::Result<()>>,
}

impl Session {
    /// Calls a tool on pimcp-run (the `mcp` tool or a direct tool).
    pub(crate) async fn call(&self, name: &str, arguments: Value) -> CallToolResult {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments.as_object().cloned();
        self.client.call_tool(params).await.unwrap()
    }

    pub(crate) async fn mcp(&self, arguments: Value) -> CallToolResult {
        self.call("mcp", arguments).await
    }

    pub(crate) async fn tool_names(&self) -> Vec<String> {
        self.client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }
}

/// Connects `host` to `server` over an in-memory duplex pipe, served as `pimcp-run` serves its stdio
/// ([`pimcp_proxy::serve_lines`], rmcp's byte-stream transport).
pub(crate) async fn connect(server: ProxyServer, host: TestHost) -> Session {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    let served = tokio::spawn(pimcp_proxy::serve_lines(
        server.clone(),
        read,
        write,
        tokio_util::sync::CancellationToken::new(),
    ));
    let probe = host.probe.clone();
    let client = host.serve(tokio::io::split(client_io)).await.unwrap();
    Session {
        client,
        server,
        probe,
        served,
    }
}
