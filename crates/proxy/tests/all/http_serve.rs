//! `serve_http` in-process on a loopback port: several host sessions (rmcp clients over real Streamable HTTP) share
//! one runtime and one upstream process; forwarded requests and approvals reach the session that made the call;
//! the guards (token, Host/Origin, body, session and per-session caps) answer with the right status; a requested
//! shutdown drains a call in flight; `attach_transport` relays a stdio-style host to the instance.

use std::net::SocketAddr;
use std::time::Duration;

use pimcp_proxy::{AttachOptions, AuthToken, HttpOptions, ServeOptions};
use rmcp::ServiceExt as _;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, model::CallToolRequestParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::support::*;
use mcp_fixture::pid_alive;

const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `serve_http` over an [`Env`]'s runtime.
struct Served {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<pimcp_proxy::Result<pimcp_actors::ShutdownReport>>,
    dir: std::sync::Arc<tempfile::TempDir>,
}

impl Served {
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    async fn stop(self) -> pimcp_actors::ShutdownReport {
        self.stop.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("serve_http returns after a shutdown request")
            .unwrap()
            .unwrap()
    }
}

async fn serve(config: Value, http: HttpOptions, drain: Duration) -> Served {
    let mut env = start(config).await;
    let runtime = env.runtime.take().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let options = ServeOptions::default()
        .with_drain_bound(drain)
        .with_shutdown_token(stop.clone());
    let task = tokio::spawn(pimcp_proxy::serve_http(
        runtime,
        env.proxy.clone(),
        env.bridge.clone(),
        listener,
        http,
        options,
    ));
    Served {
        addr,
        stop,
        task,
        dir: env.dir.clone(),
    }
}

async fn host(url: &str, token: Option<&str>, host: TestHost) -> RunningService<RoleClient, TestHost> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(t) = token {
        config = config.auth_header(t.to_owned());
    }
    host.serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

async fn call(client: &RunningService<RoleClient, TestHost>, name: &str, args: Value) -> rmcp::model::CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    tokio::time::timeout(DEADLINE, client.call_tool(params))
        .await
        .expect("call answered in time")
        .unwrap()
}

fn fixture_server() -> Value {
    json!({ "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log", "--pid-file", "{dir}/fx.pid"]) } })
}

/// Raw HTTP: a status code and headers for anything the rmcp client would not send.
async fn raw(method: reqwest::Method, url: &str, headers: &[(&str, &str)], body: Option<Value>) -> reqwest::Response {
    let client = reqwest::Client::new();
    let mut request = client
        .request(method, url)
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    request.send().await.unwrap()
}

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "1" } }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_share_one_runtime_and_one_upstream_process() {
    let served = serve(fixture_server(), HttpOptions::default(), DEADLINE).await;
    let a = host(&served.url(), None, TestHost::plain()).await;
    let b = host(&served.url(), None, TestHost::plain()).await;
    let (ra, rb) = tokio::join!(
        call(&a, "mcp", json!({ "tool": "fx_echo", "args": { "text": "from a" } })),
        call(&b, "mcp", json!({ "tool": "fx_echo", "args": { "text": "from b" } })),
    );
    assert_eq!(text_of(&ra), "from a");
    assert_eq!(text_of(&rb), "from b");
    for i in 0..5 {
        let r = call(
            &b,
            "mcp",
            json!({ "tool": "fx_echo", "args": { "text": format!("again {i}") } }),
        )
        .await;
        assert_eq!(text_of(&r), format!("again {i}"));
    }
    let log = served.path("fx.log");
    assert_eq!(
        count_events(&log, "start", None),
        1,
        "one upstream process for both sessions"
    );
    assert_eq!(count_events(&log, "call", Some("echo")), 7);
    let status: Value = raw(
        reqwest::Method::GET,
        &format!("http://{}/status", served.addr),
        &[],
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(status["schema"], "pimcp/serve-status/v1");
    assert_eq!(status["sessions"], 2, "{status}");
    assert_eq!(status["status"]["servers"][0]["name"], "fx", "{status}");
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_requests_and_approvals_reach_the_session_that_made_the_call() {
    let config = json!({
        "settings": { "approveTools": ["echo"] },
        "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) }
    });
    let served = serve(config, HttpOptions::default(), DEADLINE).await;
    let (ha, hb) = (TestHost::capable(), TestHost::capable());
    let (pa, pb) = (ha.probe.clone(), hb.probe.clone());
    // `a` initializes last, so a "most recent host" bridge would send everything to it.
    let b = host(&served.url(), None, hb).await;
    let a = host(&served.url(), None, ha).await;

    let r = call(
        &b,
        "mcp",
        json!({ "tool": "fx_elicit", "args": { "message": "for b" } }),
    )
    .await;
    assert!(text_of(&r).contains("Ada"), "{}", text_of(&r));
    assert_eq!(pb.elicitations.lock().unwrap().clone(), ["[fx] for b"]);
    assert!(
        pa.elicitations.lock().unwrap().is_empty(),
        "a never sees b's elicitation"
    );
    let r = call(&b, "mcp", json!({ "tool": "fx_sample", "args": { "prompt": "2+2?" } })).await;
    assert!(text_of(&r).contains("sampled by the host"), "{}", text_of(&r));
    assert_eq!((Probe::n(&pa.sampled), Probe::n(&pb.sampled)), (0, 1));

    // Approvals: a allows for its session; b is still asked, and b's "deny" does not touch a.
    *pa.approval.lock().unwrap() = Some("allow_for_session".into());
    *pb.approval.lock().unwrap() = Some("deny".into());
    let r = call(&a, "mcp", json!({ "tool": "fx_echo", "args": { "text": "a1" } })).await;
    assert_eq!(text_of(&r), "a1");
    let r = call(&b, "mcp", json!({ "tool": "fx_echo", "args": { "text": "b1" } })).await;
    assert_eq!(category_of(&r).as_deref(), Some("approval"), "{}", text_of(&r));
    let asked_a = pa.elicitations.lock().unwrap().len();
    let r = call(&a, "mcp", json!({ "tool": "fx_echo", "args": { "text": "a2" } })).await;
    assert_eq!(text_of(&r), "a2");
    assert_eq!(
        pa.elicitations.lock().unwrap().len(),
        asked_a,
        "allowed for a's session"
    );
    let asked_b = pb.elicitations.lock().unwrap().len();
    *pb.approval.lock().unwrap() = Some("allow_once".into());
    let r = call(&b, "mcp", json!({ "tool": "fx_echo", "args": { "text": "b2" } })).await;
    assert_eq!(text_of(&r), "b2");
    assert_eq!(
        pb.elicitations.lock().unwrap().len(),
        asked_b + 1,
        "b is asked: a's choice is a's"
    );
    assert_eq!(count_events(&served.path("fx.log"), "call", Some("echo")), 3);
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    served.stop().await;
}

/// `mcpScript` from two sessions: scripts run side by side, and a script's approvals and elicitations reach the session
/// that ran it (its calls run on tasks of their own, in its session's scope), not the session that initialized last.
/// (A server's request while two sessions have calls on it at the same moment goes to the most recent call's session,
/// as for `mcp`, so the interactive parts run one session after the other.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_from_two_sessions_run_side_by_side_and_ask_their_own_session() {
    let config = json!({
        "settings": { "approveTools": ["echo"] },
        "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) }
    });
    let served = serve(config, HttpOptions::default(), DEADLINE).await;
    let (ha, hb) = (TestHost::capable(), TestHost::capable());
    let (pa, pb) = (ha.probe.clone(), hb.probe.clone());
    // `b` initializes last, so a "most recent host" bridge would send everything to it.
    let a = host(&served.url(), None, ha).await;
    let b = host(&served.url(), None, hb).await;
    *pa.approval.lock().unwrap() = Some("allow_once".into());
    *pb.approval.lock().unwrap() = Some("deny".into());
    let sum = json!({ "code": "return (await tools.call('fx_add', {a: 1, b: 2})).sum;" });
    let (ra, rb) = tokio::join!(call(&a, "mcpScript", sum.clone()), call(&b, "mcpScript", sum));
    assert_eq!((text_of(&ra), text_of(&rb)), ("3".into(), "3".into()));
    // One after the other: approval requests carry no call identity, so two sessions' approvals on the same server at
    // the same moment could be told apart only by order.
    let echo = |who: &str| {
        json!({ "code": format!(
            "try {{ return await tools.call('fx_echo', {{text: '{who}'}}); }} catch (e) {{ return e.category; }}"
        ) })
    };
    assert_eq!(
        text_of(&call(&a, "mcpScript", echo("a")).await),
        "a",
        "a allowed its own call"
    );
    assert_eq!(
        text_of(&call(&b, "mcpScript", echo("b")).await),
        "approval",
        "b denied its own call"
    );
    let elicit = |who: &str| {
        json!({ "code": format!(
            "const asked = await tools.call('fx_elicit', {{message: 'for {who}'}}); return asked.includes('Ada');"
        ) })
    };
    assert_eq!(text_of(&call(&b, "mcpScript", elicit("b")).await), "true");
    assert_eq!(text_of(&call(&a, "mcpScript", elicit("a")).await), "true");
    let asked_a = pa.elicitations.lock().unwrap().clone();
    let asked_b = pb.elicitations.lock().unwrap().clone();
    assert!(
        asked_a.iter().any(|m| m == "[fx] for a") && !asked_a.iter().any(|m| m.contains("for b")),
        "{asked_a:?}"
    );
    assert!(
        asked_b.iter().any(|m| m == "[fx] for b") && !asked_b.iter().any(|m| m.contains("for a")),
        "{asked_b:?}"
    );
    assert!(
        asked_a.iter().any(|m| m.contains("wants to run tool `echo`")),
        "a was asked for a's call: {asked_a:?}"
    );
    assert!(
        asked_b.iter().any(|m| m.contains("wants to run tool `echo`")),
        "b was asked for b's call: {asked_b:?}"
    );
    assert_eq!(
        count_events(&served.path("fx.log"), "call", Some("echo")),
        1,
        "only a's echo ran"
    );
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_on_every_request_when_set() {
    let http = HttpOptions::default().with_token(AuthToken::new(TOKEN).unwrap());
    let served = serve(fixture_server(), http, DEADLINE).await;
    let url = served.url();
    let r = raw(reqwest::Method::POST, &url, &[], Some(initialize())).await;
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"pimcp\"");
    let r = raw(
        reqwest::Method::POST,
        &url,
        &[("authorization", "Bearer test-token-0123456789abcdeX")],
        Some(initialize()),
    )
    .await;
    assert_eq!(r.status(), 401);
    let status_url = format!("http://{}/status", served.addr);
    assert_eq!(raw(reqwest::Method::GET, &status_url, &[], None).await.status(), 401);
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(
        raw(reqwest::Method::GET, &status_url, &[("authorization", &bearer)], None)
            .await
            .status(),
        200
    );
    let client = host(&url, Some(TOKEN), TestHost::plain()).await;
    let r = call(
        &client,
        "mcp",
        json!({ "tool": "fx_echo", "args": { "text": "authorized" } }),
    )
    .await;
    assert_eq!(text_of(&r), "authorized");
    client.cancel().await.unwrap();
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_host_and_origin_headers_are_rejected() {
    let served = serve(fixture_server(), HttpOptions::default(), DEADLINE).await;
    let url = served.url();
    let r = raw(
        reqwest::Method::POST,
        &url,
        &[("host", "evil.example")],
        Some(initialize()),
    )
    .await;
    assert_eq!(r.status(), 403);
    let r = raw(
        reqwest::Method::POST,
        &url,
        &[("origin", "http://evil.example")],
        Some(initialize()),
    )
    .await;
    assert_eq!(r.status(), 403);
    let port = served.addr.port().to_string();
    let localhost = format!("localhost:{port}");
    let origin = format!("http://localhost:{port}");
    let r = raw(
        reqwest::Method::POST,
        &url,
        &[("host", &localhost), ("origin", &origin)],
        Some(initialize()),
    )
    .await;
    assert_eq!(r.status(), 200);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_session_and_per_session_caps_answer_413_503_429() {
    let http = HttpOptions::default()
        .with_max_body_bytes(4096)
        .with_max_sessions(1)
        .with_max_requests_per_session(1);
    let served = serve(fixture_server(), http, DEADLINE).await;
    let url = served.url();
    let mut big = initialize();
    big["params"]["clientInfo"]["name"] = json!("x".repeat(8192));
    assert_eq!(raw(reqwest::Method::POST, &url, &[], Some(big)).await.status(), 413);

    let first = raw(reqwest::Method::POST, &url, &[], Some(initialize())).await;
    assert_eq!(first.status(), 200);
    let session = first.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drop(first);
    let second = raw(reqwest::Method::POST, &url, &[], Some(initialize())).await;
    assert_eq!(second.status(), 503, "one session at most");

    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let r = raw(reqwest::Method::POST, &url, &headers, Some(initialized)).await;
    assert!(r.status().is_success(), "{}", r.status());
    let slow = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "mcp", "arguments": { "tool": "fx_slow", "args": { "ms": 1500 } } }
    });
    let in_flight = raw(reqwest::Method::POST, &url, &headers, Some(slow)).await;
    assert_eq!(in_flight.status(), 200);
    let ping = json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" });
    let r = raw(reqwest::Method::POST, &url, &headers, Some(ping.clone())).await;
    assert_eq!(r.status(), 429, "one request at a time in this session");
    assert_eq!(r.headers()["retry-after"], "1");
    // The slot is held until the response has been sent.
    let body = in_flight.text().await.unwrap();
    assert!(body.contains("slept 1500 ms"), "{body}");
    let r = raw(reqwest::Method::POST, &url, &headers, Some(ping)).await;
    assert_eq!(r.status(), 200);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_drains_the_call_in_flight_then_closes_the_servers() {
    let served = serve(fixture_server(), HttpOptions::default(), DEADLINE).await;
    let client = host(&served.url(), None, TestHost::plain()).await;
    let r = call(&client, "mcp", json!({ "connect": "fx" })).await;
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    let pid: u32 = std::fs::read_to_string(served.path("fx.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let slow = tokio::spawn({
        let client = client.peer().clone();
        async move {
            let mut params = CallToolRequestParams::new("mcp");
            params.arguments = json!({ "tool": "fx_slow", "args": { "ms": 1500 } })
                .as_object()
                .cloned();
            client.call_tool(params).await
        }
    });
    let log = served.path("fx.log");
    wait_until("the slow call reaches the server", DEADLINE, || {
        count_events(&log, "call", Some("slow")) == 1
    })
    .await;
    let (addr, dir) = (served.addr, served.dir.clone());
    let report = served.stop().await;
    let result = tokio::time::timeout(DEADLINE, slow)
        .await
        .expect("the call in flight was answered before the deadline")
        .unwrap()
        .expect("the call in flight was answered");
    assert_eq!(text_of(&result), "slept 1500 ms in 1 step");
    assert_eq!(count_events(&log, "cancelled", None), 0, "drained, not cancelled");
    assert!(report.graceful, "{report:?}");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener is closed"
    );
    wait_until("the fixture process is gone", DEADLINE, || !pid_alive(pid)).await;
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_relays_a_host_to_a_running_instance() {
    let http = HttpOptions::default().with_token(AuthToken::new(TOKEN).unwrap());
    let served = serve(fixture_server(), http, DEADLINE).await;
    let (relay_io, host_io) = tokio::io::duplex(1 << 20);
    let relay = tokio::spawn(pimcp_proxy::attach_transport(
        tokio::io::split(relay_io),
        AttachOptions::new(served.url()).with_token(Some(AuthToken::new(TOKEN).unwrap())),
    ));
    let test_host = TestHost::capable();
    let probe = test_host.probe.clone();
    let client = test_host.serve(tokio::io::split(host_io)).await.unwrap();
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(tools, ["mcp", "mcpScript"]);
    let r = call(
        &client,
        "mcp",
        json!({ "tool": "fx_echo", "args": { "text": "relayed" } }),
    )
    .await;
    assert_eq!(text_of(&r), "relayed");
    // A server→client request travels back through the relay.
    let r = call(
        &client,
        "mcp",
        json!({ "tool": "fx_elicit", "args": { "message": "via relay" } }),
    )
    .await;
    assert!(text_of(&r).contains("Ada"), "{}", text_of(&r));
    assert_eq!(probe.elicitations.lock().unwrap().clone(), ["[fx] via relay"]);
    client.cancel().await.unwrap();
    tokio::time::timeout(DEADLINE, relay).await.unwrap().unwrap().unwrap();

    // A wrong token: the host's requests get errors instead of hanging.
    let (relay_io, host_io) = tokio::io::duplex(1 << 20);
    let relay = tokio::spawn(pimcp_proxy::attach_transport(
        tokio::io::split(relay_io),
        AttachOptions::new(served.url()).with_token(Some(AuthToken::new("wrong-token-0123456789").unwrap())),
    ));
    let refused = tokio::time::timeout(DEADLINE, TestHost::plain().serve(tokio::io::split(host_io))).await;
    assert!(matches!(refused, Ok(Err(_))), "initialize must fail, not hang");
    relay.abort();
    assert_eq!(count_events(&served.path("fx.log"), "start", None), 1);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_to_an_unreachable_instance_answers_every_request_naming_the_url() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp?k=att4ch-secret");
    let (relay_io, host_io) = tokio::io::duplex(1 << 20);
    let relay = tokio::spawn(pimcp_proxy::attach_transport(
        tokio::io::split(relay_io),
        AttachOptions::new(url),
    ));
    let (read, mut write) = tokio::io::split(host_io);
    let mut lines = tokio::io::BufReader::new(read).lines();
    let mut answer = async |line: Value| -> Value {
        write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        let next = tokio::time::timeout(DEADLINE, lines.next_line()).await;
        let next = next
            .expect("the relay must answer, not hang")
            .unwrap()
            .expect("the relay closed stdout");
        serde_json::from_str(&next).unwrap()
    };
    let init = answer(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize()})).await;
    assert_eq!(init["id"], 1, "{init}");
    let message = init["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains(&format!("127.0.0.1:{port}/mcp")), "{init}");
    assert!(
        !message.contains("att4ch-secret"),
        "the URL's query is redacted: {init}"
    );
    // The relay is still there: later requests (whatever the host does after a failed initialize) are answered too.
    for id in 2..4 {
        let listed = answer(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})).await;
        assert_eq!(listed["id"], id, "{listed}");
        let message = listed["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("127.0.0.1:{port}/mcp")), "{listed}");
    }
    // Closing stdin ends the relay, which reports the failure.
    write.shutdown().await.unwrap();
    let outcome = tokio::time::timeout(DEADLINE, relay).await.unwrap().unwrap();
    let error = outcome
        .expect_err("an unreachable instance is a failed relay")
        .to_string();
    assert!(error.contains("cannot be reached"), "{error}");
}

/// A host that records the `notifications/message` it receives: pimcp's own (logger `pimcp`) and upstream ones.
#[derive(Clone, Default)]
struct LogHost {
    messages: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    /// (logger, level, data) of every message whose logger is not `pimcp`.
    upstream: std::sync::Arc<std::sync::Mutex<Vec<(String, String, Value)>>>,
}

impl LogHost {
    /// Connects this host to the instance at `url`.
    async fn connect(self, url: String) -> RunningService<RoleClient, LogHost> {
        self.serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url),
        ))
        .await
        .unwrap()
    }

    fn seen(&self) -> Vec<(String, Value)> {
        self.messages.lock().unwrap().clone()
    }

    /// Waits until a message matches `want`.
    async fn wait_for(&self, want: impl Fn(&str, &Value) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !self.seen().iter().any(|(level, data)| want(level, data)) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no matching log message; got {:?}",
                self.seen()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[allow(deprecated)] // logging is SEP-2577-deprecated but still on the wire
impl rmcp::ClientHandler for LogHost {
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _ctx: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level).unwrap().as_str().unwrap().to_owned();
        match params.logger.as_deref() {
            Some("pimcp") => self.messages.lock().unwrap().push((level, params.data)),
            other => {
                let logger = other.expect("every relayed message names its logger").to_owned();
                self.upstream.lock().unwrap().push((logger, level, params.data));
            }
        }
    }
}

#[allow(deprecated)]
async fn set_level(client: &RunningService<RoleClient, LogHost>, level: rmcp::model::LoggingLevel) {
    tokio::time::timeout(
        DEADLINE,
        client.set_level(rmcp::model::SetLevelRequestParams::new(level)),
    )
    .await
    .expect("setLevel answered in time")
    .unwrap();
}

fn state_is(data: &Value, server: &str, state: &str) -> bool {
    data["event"] == "server-state" && data["server"] == server && data["state"] == state
}

#[allow(deprecated)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_levels_are_per_session_and_filter_the_server_state_notices() {
    let config = json!({ "mcpServers": {
        "fx": stdio(&[]),
        "gone": { "command": "/nonexistent/pimcp-test-no-such-server" },
    } });
    let served = serve(config, HttpOptions::default(), DEADLINE).await;
    let connect = |h: LogHost| h.connect(served.url());
    let (verbose, terse, silent) = (LogHost::default(), LogHost::default(), LogHost::default());
    let a = connect(verbose.clone()).await;
    let b = connect(terse.clone()).await;
    let c = connect(silent.clone()).await;
    assert!(
        a.peer_info().unwrap().capabilities.logging.is_some(),
        "pimcp declares the logging capability"
    );
    set_level(&a, rmcp::model::LoggingLevel::Info).await;
    set_level(&b, rmcp::model::LoggingLevel::Warning).await;

    // `fx` becomes ready (info); `gone` cannot start (warning or worse).
    let mut params = CallToolRequestParams::new("mcp");
    params.arguments = json!({ "tool": "fx_echo", "args": { "text": "hi" } })
        .as_object()
        .cloned();
    let r = tokio::time::timeout(DEADLINE, a.call_tool(params))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(text_of(&r), "hi");
    verbose
        .wait_for(|level, data| level == "info" && state_is(data, "fx", "ready"))
        .await;
    let mut params = CallToolRequestParams::new("mcp");
    params.arguments = json!({ "connect": "gone" }).as_object().cloned();
    tokio::time::timeout(DEADLINE, c.call_tool(params))
        .await
        .unwrap()
        .unwrap();
    let failed = |level: &str, data: &Value| {
        matches!(level, "warning" | "error") && data["server"] == "gone" && data["state"] != "connecting"
    };
    verbose.wait_for(failed).await;
    // Messages to one session go out in event order: `terse` got the failure, so it would have got `ready` before.
    terse.wait_for(failed).await;
    let terse_levels: Vec<String> = terse.seen().into_iter().map(|(level, _)| level).collect();
    assert!(
        terse_levels.iter().all(|l| l == "warning" || l == "error"),
        "a warning-level session only gets warnings and worse: {:?}",
        terse.seen()
    );
    assert!(
        !verbose.seen().iter().any(|(level, _)| level == "debug"),
        "an info-level session gets no debug notices: {:?}",
        verbose.seen()
    );
    assert!(
        silent.seen().is_empty(),
        "a session that never set a level gets no messages"
    );

    // Lowering the level lets the debug notices through for that session only.
    set_level(&b, rmcp::model::LoggingLevel::Debug).await;
    let mut params = CallToolRequestParams::new("mcp");
    params.arguments = json!({ "connect": "gone" }).as_object().cloned();
    tokio::time::timeout(DEADLINE, c.call_tool(params))
        .await
        .unwrap()
        .unwrap();
    terse
        .wait_for(|level, data| level == "debug" && state_is(data, "gone", "connecting"))
        .await;
    for client in [a, b, c] {
        client.cancel().await.unwrap();
    }
    served.stop().await;
}

/// Upstream servers' `notifications/message` reach the sessions whose level lets them through, under the logger
/// `<server>/<their logger>`.
#[allow(deprecated)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_log_messages_are_relayed_at_each_sessions_level() {
    // `--roots-at-start`: the fixture logs an info message (logger `mcp-fixture`) right after
    // `notifications/initialized` (the initialize era).
    let mut fx = stdio(&["--roots-at-start"]);
    fx["protocol"] = json!("legacy");
    let config = json!({ "mcpServers": { "fx": fx } });
    let served = serve(config, HttpOptions::default(), DEADLINE).await;
    let connect = |h: LogHost| h.connect(served.url());
    let (info, warning) = (LogHost::default(), LogHost::default());
    let a = connect(info.clone()).await;
    let b = connect(warning.clone()).await;
    set_level(&a, rmcp::model::LoggingLevel::Info).await;
    set_level(&b, rmcp::model::LoggingLevel::Warning).await;
    let mut params = CallToolRequestParams::new("mcp");
    params.arguments = json!({ "connect": "fx" }).as_object().cloned();
    tokio::time::timeout(DEADLINE, a.call_tool(params))
        .await
        .unwrap()
        .unwrap();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let relayed = loop {
        let seen = info.upstream.lock().unwrap().clone();
        if let Some(m) = seen.into_iter().find(|(logger, _, _)| logger == "fx/mcp-fixture") {
            break m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no upstream log message relayed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(relayed.1, "info");
    assert!(relayed.2.as_str().unwrap().starts_with("Roots updated"), "{relayed:?}");
    // The warning-level session got pimcp's warnings at most, never the info message.
    assert!(warning.upstream.lock().unwrap().is_empty());
    for client in [a, b] {
        client.cancel().await.unwrap();
    }
    served.stop().await;
}
