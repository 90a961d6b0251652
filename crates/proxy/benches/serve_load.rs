//! Load through `pimcp-run serve --http`: N concurrent host sessions (default 8) × M sequential `tools/call` each
//! (default 1,000) against the real `pimcp-run` binary fronting `mcp-fixture --http`, and the same load from the
//! same rmcp client straight to that `mcp-fixture --http` (the baseline). Runs direct, serve, direct, serve and
//! prints calls, errors, wall time, throughput and latency percentiles for each, plus the CPU time the `pimcp-run`
//! and `mcp-fixture` processes spent per call during the run (from `/proc/<pid>/stat`: a count that the load of a
//! shared machine disturbs far less than wall time); exits 1 if any call failed.
//!
//! `cargo bench -p pimcp-proxy --bench serve_load` (env `SERVE_LOAD_SESSIONS`, `SERVE_LOAD_CALLS`). Not a test: the
//! figures go to docs/benchmarks.md (## Serve mode), nothing asserts on them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;

const WARMUP_CALLS: usize = 20;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `target/<profile>/pimcp-run`, built for the bench's profile.
fn pimcp_run() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "-p", "pimcp-cli", "--bin", "pimcp-run"]);
    if profile.ends_with("release") {
        build.arg("--release");
    }
    assert!(build.status().unwrap().success(), "building pimcp-run failed");
    profile.join("pimcp-run")
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[derive(Debug)]
struct Run {
    label: &'static str,
    calls: usize,
    errors: usize,
    wall: Duration,
    latencies: Vec<Duration>,
    /// CPU time of `pimcp-run` and of `mcp-fixture` during the run.
    cpu: (Duration, Duration),
}

impl Run {
    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i]
    }

    fn print(&self) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let per_call_us = |d: Duration| d.as_secs_f64() * 1e6 / self.calls.max(1) as f64;
        println!(
            "| {:<22} | {:>6} | {:>6} | {:>7.2} | {:>9.0} | {:>7.2} | {:>7.2} | {:>7.2} | {:>9.0} | {:>9.0} |",
            self.label,
            self.calls,
            self.errors,
            self.wall.as_secs_f64(),
            self.calls as f64 / self.wall.as_secs_f64(),
            ms(self.percentile(0.50)),
            ms(self.percentile(0.99)),
            ms(*self.latencies.last().unwrap_or(&Duration::ZERO)),
            per_call_us(self.cpu.0),
            per_call_us(self.cpu.1),
        );
    }
}

/// `sessions` clients, each making `calls` sequential calls of `tool`; all sessions at once.
async fn load(label: &'static str, url: &str, tool: &str, sessions: usize, calls: usize) -> Run {
    let mut clients = Vec::new();
    for _ in 0..sessions {
        let client = ().serve(StreamableHttpClientTransport::from_uri(url.to_owned())).await.unwrap();
        for i in 0..WARMUP_CALLS {
            let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(
                serde_json::json!({ "text": format!("warm {i}") })
                    .as_object()
                    .cloned()
                    .unwrap(),
            );
            client.call_tool(params).await.unwrap();
        }
        clients.push(client);
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        let peer = client.peer().clone();
        let tool = tool.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(calls);
            let mut errors = 0;
            for i in 0..calls {
                let text = format!("s{s} c{i}");
                let params = CallToolRequestParams::new(tool.clone())
                    .with_arguments(serde_json::json!({ "text": text }).as_object().cloned().unwrap());
                let t = Instant::now();
                match peer.call_tool(params).await {
                    Ok(r)
                        if r.is_error != Some(true)
                            && r.content
                                .first()
                                .and_then(|c| c.as_text())
                                .is_some_and(|t| t.text == text) =>
                    {
                        latencies.push(t.elapsed())
                    }
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        latencies.extend(l);
        errors += e;
    }
    let wall = start.elapsed();
    for client in clients {
        let _ = client.cancel().await;
    }
    latencies.sort();
    Run {
        label,
        calls: sessions * calls,
        errors,
        wall,
        latencies,
        cpu: (Duration::ZERO, Duration::ZERO),
    }
}

/// User + system CPU time of process `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // After the command name: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    #[cfg(unix)]
    #[expect(unsafe_code, reason = "sysconf(3) reads a constant of the running system")]
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    // No `/proc` elsewhere: the ticks are zero and so is the time.
    #[cfg(not(unix))]
    let per_second = 100;
    Duration::from_micros(ticks * 1_000_000 / per_second)
}

/// Runs `f` and records the CPU time `pimcp-run` (`serve`) and `mcp-fixture` (`fixture`) spent meanwhile.
fn measured(serve: u32, fixture: u32, f: impl FnOnce() -> Run) -> Run {
    let before = (cpu_time(serve), cpu_time(fixture));
    let mut run = f();
    run.cpu = (
        cpu_time(serve).saturating_sub(before.0),
        cpu_time(fixture).saturating_sub(before.1),
    );
    run
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument other than this bench's name skips it.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"serve_load".contains(a.as_str()))
    {
        return;
    }
    let sessions = env_usize("SERVE_LOAD_SESSIONS", 8);
    let calls = env_usize("SERVE_LOAD_CALLS", 1000);
    let dir = tempfile::tempdir().unwrap();
    let fixture_port = dir.path().join("fixture.port");
    let _fixture = Killed(
        Command::new(mcp_fixture::bin_path())
            .args(["--http", "127.0.0.1:0", "--port-file"])
            .arg(&fixture_port)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let port: u16 = wait_for("mcp-fixture --http", || {
        std::fs::read_to_string(&fixture_port).ok()?.trim().parse().ok()
    });
    let direct_url = format!("http://127.0.0.1:{port}/mcp");
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::json!({ "mcpServers": { "fx": { "url": direct_url, "directTools": ["echo"] } } }).to_string(),
    )
    .unwrap();
    for d in ["home", "data", "agent"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let log = dir.path().join("serve.log");
    let _serve = Killed(
        Command::new(pimcp_run())
            .arg("--config")
            .arg(&config)
            .args(["serve", "--http", "127.0.0.1:0", "--max-requests-per-session", "64"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.path().join("home"))
            .env("PI_CODING_AGENT_DIR", dir.path().join("agent"))
            .env("PIMCP_DATA_DIR", dir.path().join("data"))
            .env("PIMCP_CONFIG_MODE", "exclusive")
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let serve_url = wait_for("pimcp-run serve", || {
        std::fs::read_to_string(&log)
            .ok()?
            .lines()
            .find_map(|l| l.split("serving MCP on ").nth(1).map(|u| u.trim().to_owned()))
    });

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // A lazy server with nothing cached exposes no direct tools yet: connect it once and wait for `fx_echo`.
    rt.block_on(async {
        let admin = ().serve(StreamableHttpClientTransport::from_uri(serve_url.clone())).await.unwrap();
        let connect = CallToolRequestParams::new("mcp")
            .with_arguments(serde_json::json!({ "connect": "fx" }).as_object().cloned().unwrap());
        admin.call_tool(connect).await.unwrap();
        let end = Instant::now() + Duration::from_secs(30);
        while !admin
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "fx_echo")
        {
            assert!(Instant::now() < end, "fx_echo never appeared");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = admin.cancel().await;
    });
    println!("serve_load: {sessions} sessions × {calls} calls, `echo` (direct tool `fx_echo` through pimcp-run)");
    println!(
        "| run                    |  calls | errors |  wall s |   calls/s | p50 ms  | p99 ms  | max ms  | pimcp µs/call | fixture µs/call |"
    );
    println!(
        "|------------------------|-------:|-------:|--------:|----------:|--------:|--------:|--------:|----------:|----------:|"
    );
    let (serve_pid, fixture_pid) = (_serve.0.id(), _fixture.0.id());
    let mut failed = 0;
    for round in 0..2 {
        let direct = measured(serve_pid, fixture_pid, || {
            rt.block_on(load(
                if round == 0 {
                    "direct mcp-fixture #1"
                } else {
                    "direct mcp-fixture #2"
                },
                &direct_url,
                "echo",
                sessions,
                calls,
            ))
        });
        direct.print();
        let served = measured(serve_pid, fixture_pid, || {
            rt.block_on(load(
                if round == 0 {
                    "pimcp-run serve #1"
                } else {
                    "pimcp-run serve #2"
                },
                &serve_url,
                "fx_echo",
                sessions,
                calls,
            ))
        });
        served.print();
        failed += direct.errors + served.errors;
    }
    // Stop both servers before exiting (exit skips destructors).
    drop(rt);
    drop(_serve);
    drop(_fixture);
    if failed > 0 {
        eprintln!("serve_load: {failed} calls failed");
        std::process::exit(1);
    }
}
