//! Shared helpers of the runtime benchmarks: the fixture command, the bare rmcp client used as the baseline,
//! runtime start-up from an in-memory config, latency summaries, and the machine line printed with every table.
#![allow(dead_code)] // each bench binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use pimcp_actors::{Runtime, RuntimeOptions};
use rmcp::model::{CallToolRequestParams, JsonObject, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientLifecycleMode, ClientServiceExt as _, RoleClient};
use serde_json::{Value, json};

/// The bare baseline client: rmcp's no-op client handler over a child process.
pub(crate) type BareClient = RunningService<RoleClient, ()>;

/// The `mcp-fixture` binary of this profile (built by cargo next to the bench when missing or stale).
pub(crate) fn fixture() -> PathBuf {
    mcp_fixture::bin_path()
}

/// A `tokio` command for the fixture with `args`, stdin/stdout piped by rmcp, stderr discarded, and no inherited
/// `MCP_FIXTURE_*` variables.
pub(crate) fn fixture_command(args: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(fixture());
    cmd.args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("MCP_FIXTURE_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// The lifecycle the runtime runs for a stdio server in `auto` protocol mode without a remembered era
/// (`server/discover` for 2026-07-28, falling back to `initialize`), so both sides speak the same protocol.
pub(crate) fn auto_lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// Spawns the fixture and runs the handshake with a bare rmcp client.
pub(crate) async fn bare_connect(args: &[String]) -> anyhow::Result<BareClient> {
    let (transport, _stderr) = TokioChildProcess::builder(fixture_command(args))
        .stderr(Stdio::null())
        .spawn()
        .context("spawning the fixture for the bare client")?;
    ().serve_with_lifecycle(transport, auto_lifecycle())
        .await
        .context("bare client handshake")
}

/// `tools/call` request for `echo`.
pub(crate) fn echo_request(text: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("echo").with_arguments(echo_args(text).unwrap_or_default())
}

/// `{"text": text}` as a JSON object.
pub(crate) fn echo_args(text: &str) -> Option<JsonObject> {
    json!({ "text": text }).as_object().cloned()
}

/// The first text block of a bare result.
pub(crate) fn bare_text(result: &rmcp::model::CallToolResult) -> Option<String> {
    result.content.iter().find_map(|c| c.as_text().map(|t| t.text.clone()))
}

/// One stdio server entry for the config: the fixture with `args`.
pub(crate) fn server_entry(args: &[String]) -> Value {
    json!({ "command": fixture(), "args": args })
}

/// Starts a runtime over `servers` (an `mcpServers` object) with its agent and data dirs under `dir`.
pub(crate) async fn start_runtime(dir: &Path, servers: Value) -> anyhow::Result<Runtime> {
    start_runtime_with(dir, servers, |_| {}).await
}

/// [`start_runtime`] with `tweak` applied to the options first.
pub(crate) async fn start_runtime_with(
    dir: &Path,
    servers: Value,
    tweak: impl FnOnce(&mut RuntimeOptions),
) -> anyhow::Result<Runtime> {
    let config = load_config(dir, &json!({ "mcpServers": servers }));
    let mut opts = RuntimeOptions::new(config, dir.join("agent"), dir.join("data"));
    tweak(&mut opts);
    Runtime::start(opts).await.context("starting the runtime")
}

/// `load_in_memory` with both the home and project directory at `dir` (as the example does).
pub(crate) fn load_config(dir: &Path, json: &Value) -> pimcp_config::Config {
    pimcp_config::load_in_memory(json, &pimcp_config::LoadOptions::new(dir, dir))
}

/// Order-statistic summary of a sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summary {
    pub n: usize,
    pub median: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub mean: Duration,
    pub min: Duration,
    pub max: Duration,
}

/// Nearest-rank percentile `q` (0..=1) of a sorted sample.
pub(crate) fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn summarize(sample: &[Duration]) -> Summary {
    let mut sorted = sample.to_vec();
    sorted.sort_unstable();
    let total: Duration = sorted.iter().sum();
    Summary {
        n: sorted.len(),
        median: percentile(&sorted, 0.5),
        p90: percentile(&sorted, 0.9),
        p99: percentile(&sorted, 0.99),
        mean: if sorted.is_empty() {
            Duration::ZERO
        } else {
            total / u32::try_from(sorted.len()).unwrap_or(u32::MAX)
        },
        min: sorted.first().copied().unwrap_or_default(),
        max: sorted.last().copied().unwrap_or_default(),
    }
}

/// Median of plain numbers (per-block statistics).
pub(crate) fn median_f64(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Microseconds with one decimal.
pub(crate) fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Milliseconds with two decimals.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// `ABBA` interleaving: block `i` runs the runtime first when this is true, so drift cancels pairwise.
pub(crate) fn runtime_first(block: usize) -> bool {
    matches!(block % 4, 0 | 3)
}

/// Date, host facts and load, printed above every table.
pub(crate) fn machine_line() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!("{date}; nproc {nproc}; load {}; {cpu}", load.join(" "))
}

/// Polls `check` every 5 ms until it holds or `within` passes.
pub(crate) async fn wait_until(what: &str, within: Duration, mut check: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    while !check() {
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {within:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// CPU time consumed so far by every thread of this process (sum of `/proc/self/task/*/schedstat` run times, ns
/// resolution). Differences over a block measure work done here, independent of time spent waiting for the server
/// or descheduled by other load.
pub(crate) fn process_cpu() -> Duration {
    let mut total = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
                total += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(total)
}
