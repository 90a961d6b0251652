//! What the operations tests share: the `pimcp-run` and `mcp-fixture` binaries, the real peers from
//! `.ci/setup-peers` (a missing one fails with that command), a sandbox (temp HOME, data dir and `--config` file,
//! `PIMCP_CONFIG_MODE=exclusive`), a `pimcp-run serve --http 127.0.0.1:0` daemon whose URL is read from its log,
//! rmcp clients over Streamable HTTP, raw HTTP for status codes, signals, and polling toward deadlines.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A peer file installed by `.ci/setup-peers`; the test fails when it is missing.
pub fn peer(relative: &str) -> PathBuf {
    let path = Path::new(ROOT).join(".ci/peers").join(relative);
    assert!(
        path.exists(),
        "peer missing: {} — run `.ci/setup-peers` (it installs the inspector, Node 22 and the Python `mcp` client)",
        path.display()
    );
    path
}

pub fn node() -> PathBuf {
    peer("node22/package/bin/node")
}

pub fn inspector_js() -> PathBuf {
    let link = peer("node_modules/.bin/mcp-inspector");
    std::fs::canonicalize(&link).unwrap_or(link)
}

pub fn python() -> PathBuf {
    peer("venv/bin/python")
}

/// `target/<profile>/pimcp-run`, built once per test process (cargo skips the work when it is fresh).
pub fn pimcp_run() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        let deps = exe.parent().expect("test directory");
        let profile = if deps.ends_with("deps") {
            deps.parent().expect("profile dir")
        } else {
            deps
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args(["build", "--quiet", "-p", "pimcp-cli", "--bin", "pimcp-run"])
            .arg("--manifest-path")
            .arg(Path::new(ROOT).join("Cargo.toml"));
        if profile.ends_with("release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "building pimcp-run failed");
        profile.join("pimcp-run")
    })
    .clone()
}

pub fn fixture() -> String {
    mcp_fixture::bin_path().to_string_lossy().into_owned()
}

/// A private HOME, data dir and config file.
pub struct Sandbox {
    _root: tempfile::TempDir,
    pub dir: PathBuf,
    pub config: PathBuf,
}

impl Sandbox {
    /// A sandbox whose config file is `config` (a whole mcp.json).
    pub fn new(config: &Value) -> Sandbox {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().canonicalize().expect("canonical tempdir");
        for d in ["home", "data", "agent"] {
            std::fs::create_dir_all(dir.join(d)).expect("sandbox dir");
        }
        let sandbox = Sandbox {
            config: dir.join("mcp.json"),
            dir,
            _root: root,
        };
        sandbox.write_config(config);
        sandbox
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Replaces the config file atomically (as editors do: write a temp file, rename it over); `{dir}` in any
    /// string becomes the sandbox directory.
    pub fn write_config(&self, config: &Value) {
        self.write_config_text(&serde_json::to_string_pretty(config).expect("json"));
    }

    pub fn write_config_text(&self, text: &str) {
        let text = text.replace("{dir}", &self.dir.to_string_lossy());
        let tmp = self.dir.join("mcp.json.tmp");
        std::fs::write(&tmp, text).expect("write config");
        std::fs::rename(&tmp, &self.config).expect("rename config");
    }

    /// `pimcp-run --config <file> ARGS` with only the sandbox environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(pimcp_run());
        cmd.arg("--config")
            .arg(&self.config)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.join("home"))
            .env("PI_CODING_AGENT_DIR", self.dir.join("agent"))
            .env("PIMCP_DATA_DIR", self.dir.join("data"))
            .env("PIMCP_CONFIG_MODE", "exclusive")
            .env("PIMCP_LOG", "info")
            .current_dir(&self.dir);
        cmd
    }

    /// Starts `pimcp-run serve --http 127.0.0.1:0 EXTRA` and waits for the URL it prints.
    pub fn serve(&self, extra: &[&str]) -> Serve {
        let mut args = vec!["serve", "--http", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let log = self.dir.join(format!("serve-{}.log", unique()));
        let file = std::fs::File::create(&log).expect("create log");
        let mut cmd = self.command(&args);
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
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A running `pimcp-run serve`; killed (SIGKILL) and reaped if the test did not stop it.
pub struct Serve {
    pub child: Child,
    pub log: PathBuf,
    pub addr: SocketAddr,
}

impl Serve {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, name: &str) {
        signal(self.pid(), name);
    }

    /// Waits for the exit at most `deadline`; the exit code, or `None` if it is still running.
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<std::process::ExitStatus> {
        let child = &mut self.child;
        poll_until(deadline, || child.try_wait().ok().flatten())
    }

    /// `GET /status` as JSON.
    pub fn status(&self) -> Value {
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
pub fn signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{name} {pid} failed");
}

/// An rmcp client over Streamable HTTP (legacy `initialize` session).
pub async fn client(url: &str, token: Option<&str>) -> RunningService<RoleClient, ()> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(t) = token {
        config = config.auth_header(t.to_owned());
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize over HTTP")
}

/// Calls `tool` and returns its result (a protocol error fails the test).
pub async fn call(client: &rmcp::service::Peer<RoleClient>, tool: &str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    tokio::time::timeout(Duration::from_secs(60), client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool}({args}) did not answer within 60 s"))
        .unwrap_or_else(|e| panic!("{tool}({args}) failed: {e}"))
}

pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One HTTP/1.1 request with `Connection: close`; the status code and the body.
pub fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
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

pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// Headers of an MCP POST.
pub const MCP_HEADERS: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

/// Polls `f` every 50 ms until it returns `Some` or `deadline` passes.
pub fn poll_until<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Async polling: runs `f` every 100 ms until it holds or `deadline` passes; returns whether it held.
pub async fn eventually(deadline: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f().await {
            return true;
        }
        if start.elapsed() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The fixture's event log lines.
pub fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn count_events(path: &Path, event: &str, tool: Option<&str>) -> usize {
    events(path)
        .iter()
        .filter(|e| e["event"] == event && tool.is_none_or(|t| e["name"] == t))
        .count()
}

/// Pids of the fixture processes that started (from `start` events).
pub fn started_pids(path: &Path) -> Vec<u32> {
    events(path)
        .iter()
        .filter(|e| e["event"] == "start")
        .filter_map(|e| e["pid"].as_u64().map(|p| p as u32))
        .collect()
}

/// True while the process exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

/// Waits until none of `pids` is alive.
pub fn all_gone(pids: &[u32], deadline: Duration) -> bool {
    poll_until(deadline, || pids.iter().all(|&p| !pid_alive(p)).then_some(())).is_some()
}
