//! Bench: memory and time to the first `status()` of a fresh process whose runtime has 200 configured lazy stdio
//! servers, all served from the metadata cache; baseline: the same binary building only a tokio runtime.
//!
//! Method: the parent writes the config (200 `mcp-fixture` servers, each `--tools N --seed K`), then fills the
//! metadata cache the way a user's first run does: a runtime connects every server (real processes, real
//! discovery) and the cache file is what the runtime itself wrote. It then runs this same binary as a child, once
//! per variant and repetition, in rotating order: `baseline` (build the tokio runtime, nothing else),
//! `cached` (build the tokio runtime, load the config, `Runtime::start`, `status()`), and `empty` (the same with
//! no cache file). The child times itself from the first line of `main`, reads its own `/proc/self/status`
//! (VmHWM = peak RSS, VmRSS = RSS now) right after `status()`, prints one JSON line and exits; the parent also
//! times spawn → that line (exec, dynamic loading and all).
//!
//! Run: `cargo bench -p pimcp-actors --bench cold_start` (env `PIMCP_BENCH_SERVERS`, `PIMCP_BENCH_TOOLS`,
//! `PIMCP_BENCH_REPS`).
#![allow(clippy::print_stdout)] // a bench prints its table

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use pimcp_actors::{MetadataCache, MetadataSource, Runtime, RuntimeOptions};
use serde_json::{Value, json};

#[path = "support/mod.rs"]
mod support;
use support::*;

const CHILD_ENV: &str = "PIMCP_BENCH_CHILD";
const DIR_ENV: &str = "PIMCP_BENCH_DIR";
/// `cache-load` is diagnostic: only `MetadataCache::load()` of the same file, the first step of `Runtime::start`.
const VARIANTS: [&str; 4] = ["baseline", "cached", "empty", "cache-load"];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    let t0 = Instant::now();
    if let Ok(variant) = std::env::var(CHILD_ENV) {
        return child(t0, &variant);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(parent())
}

/// `VmHWM` and `VmRSS` of this process in KiB.
fn own_memory() -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> anyhow::Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("no {name} in /proc/self/status"))
    };
    Ok((field("VmHWM:")?, field("VmRSS:")?))
}

fn child(t0: Instant, variant: &str) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let dir = PathBuf::from(std::env::var_os(DIR_ENV).context("PIMCP_BENCH_DIR is not set")?);
    let mut report = json!({ "variant": variant });
    if variant == "baseline" {
        rt.block_on(async {});
        report["readyUs"] = json!(t0.elapsed().as_micros());
    } else if variant == "cache-load" {
        let file = MetadataCache::in_agent_dir(&dir.join("agent")).load();
        report["readyUs"] = json!(t0.elapsed().as_micros());
        report["servers"] = json!(file.servers.len());
        let (hwm, rss) = own_memory()?;
        report["vmHwmKiB"] = json!(hwm);
        report["vmRssKiB"] = json!(rss);
        println!("{report}");
        drop(file);
        return Ok(());
    } else {
        let agent = match variant {
            "cached" => dir.join("agent"),
            _ => dir.join("agent-empty"),
        };
        let runtime = rt.block_on(async {
            let text = std::fs::read_to_string(dir.join("config.json"))?;
            let json: Value = serde_json::from_str(&text)?;
            let config = load_config(&dir, &json);
            let configured = t0.elapsed();
            let runtime = Runtime::start(RuntimeOptions::new(config, agent, dir.join("data"))).await?;
            let started = t0.elapsed();
            let status = runtime.status();
            let ready = t0.elapsed();
            let from_cache = status
                .servers
                .iter()
                .filter(|s| {
                    matches!(s.metadata, Some(MetadataSource::Cache | MetadataSource::StaleCache)) && s.tool_count > 0
                })
                .count();
            let states: BTreeMap<&str, usize> = status.servers.iter().fold(BTreeMap::new(), |mut m, s| {
                *m.entry(s.state.name()).or_default() += 1;
                m
            });
            let sources: BTreeMap<String, usize> = status.servers.iter().fold(BTreeMap::new(), |mut m, s| {
                let key = s.metadata.map_or_else(|| "none".to_owned(), |m| format!("{m:?}"));
                *m.entry(key).or_default() += 1;
                m
            });
            report["sources"] = json!(sources);
            report["toolCounts"] = json!(status.servers.iter().map(|s| s.tool_count).sum::<usize>());
            report["configUs"] = json!(configured.as_micros());
            report["startUs"] = json!(started.as_micros());
            report["readyUs"] = json!(ready.as_micros());
            report["servers"] = json!(status.servers.len());
            report["fromCache"] = json!(from_cache);
            report["states"] = json!(states);
            report["catalogTools"] = json!(runtime.catalog().tools().count());
            anyhow::Ok(runtime)
        })?;
        let (hwm, rss) = own_memory()?;
        report["vmHwmKiB"] = json!(hwm);
        report["vmRssKiB"] = json!(rss);
        println!("{report}");
        rt.block_on(runtime.shutdown(Duration::from_secs(5)));
        return Ok(());
    }
    let (hwm, rss) = own_memory()?;
    report["vmHwmKiB"] = json!(hwm);
    report["vmRssKiB"] = json!(rss);
    println!("{report}");
    Ok(())
}

/// Runs one child and returns its report plus the parent-side wall time from spawn to the report line.
fn run_child(dir: &Path, variant: &str) -> anyhow::Result<(Value, Duration)> {
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let mut child = Command::new(exe)
        .env(CHILD_ENV, variant)
        .env(DIR_ENV, dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().context("child stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let wall = start.elapsed();
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "child {variant} exited with {status}");
    let report: Value = serde_json::from_str(&line).with_context(|| format!("child {variant} printed {line:?}"))?;
    Ok((report, wall))
}

async fn fill_cache(dir: &Path, names: &[String], config: &Value) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let runtime = Runtime::start(RuntimeOptions::new(
        load_config(dir, config),
        dir.join("agent"),
        dir.join("data"),
    ))
    .await?;
    let handle = runtime.handle();
    let results: Vec<_> = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let handle = handle.clone();
            async move {
                handle
                    .connect(&name)
                    .await
                    .with_context(|| format!("connecting {name}"))
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for r in results {
        r?;
    }
    let cache = MetadataCache::in_agent_dir(&dir.join("agent"));
    wait_until("the cache to hold every server", Duration::from_secs(120), || {
        cache.load().servers.len() == names.len()
    })
    .await?;
    let report = runtime.shutdown(Duration::from_secs(20)).await;
    anyhow::ensure!(
        report.graceful,
        "the cache-filling runtime did not shut down gracefully: {report:?}"
    );
    Ok(start.elapsed())
}

fn kib(v: f64) -> String {
    format!("{:.1}", v / 1024.0)
}

async fn parent() -> anyhow::Result<()> {
    let n_servers = env_usize("PIMCP_BENCH_SERVERS", 200);
    let n_tools = env_usize("PIMCP_BENCH_TOOLS", 20);
    let reps = env_usize("PIMCP_BENCH_REPS", 15);
    let dir = tempfile::tempdir()?;
    if std::env::var_os("PIMCP_BENCH_KEEP").is_some() {
        let kept = dir.keep();
        println!("keeping {} (PIMCP_BENCH_KEEP)", kept.display());
        return parent_in(&kept, n_servers, n_tools, reps).await;
    }
    parent_in(dir.path(), n_servers, n_tools, reps).await
}

async fn parent_in(dir: &Path, n_servers: usize, n_tools: usize, reps: usize) -> anyhow::Result<()> {
    let names: Vec<String> = (0..n_servers).map(|k| format!("s{k:03}")).collect();
    let servers: serde_json::Map<String, Value> = names
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let args = [
                "--tools".to_owned(),
                n_tools.to_string(),
                "--seed".to_owned(),
                (k + 1).to_string(),
                "--name".to_owned(),
                name.clone(),
            ];
            (name.clone(), server_entry(&args))
        })
        .collect();
    let config = json!({ "mcpServers": servers });
    std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&config)?)?;
    let fill = fill_cache(dir, &names, &config).await?;
    let cache = MetadataCache::in_agent_dir(&dir.join("agent"));
    let cache_bytes = std::fs::metadata(cache.path())?.len();
    let cached_tools: usize = cache.load().servers.values().map(|e| e.metadata.tools.len()).sum();

    let mut reports: BTreeMap<&str, Vec<(Value, Duration)>> = BTreeMap::new();
    // One discarded round first (page cache, binary warm), then `reps` rounds in rotating order.
    for round in 0..=reps {
        for i in 0..VARIANTS.len() {
            let variant = VARIANTS[(i + round) % VARIANTS.len()];
            let (report, wall) = tokio::task::block_in_place(|| run_child(dir, variant))?;
            if variant == "cached" {
                anyhow::ensure!(
                    report["fromCache"].as_u64() == Some(n_servers as u64),
                    "not every server was served from the cache: {report}"
                );
            }
            if round > 0 {
                reports.entry(variant).or_default().push((report, wall));
            }
        }
    }

    println!("## cold_start: {n_servers} lazy servers served from the metadata cache, fresh process");
    println!();
    println!("machine: {}", machine_line());
    println!(
        "fixture: {}; {n_servers} servers x (`--tools {n_tools}` + 14 built-ins); cache written by the runtime in {} s: \
         {} bytes, {cached_tools} tools; {reps} repetitions per variant (rotating order, one warm-up round discarded)",
        fixture().display(),
        ms(fill)
            .parse::<f64>()
            .map_or_else(|_| "?".into(), |m| format!("{:.1}", m / 1000.0)),
        cache_bytes
    );
    if let Some(first) = reports.get("cached").and_then(|r| r.first()) {
        println!(
            "cached child: {} servers, states {}, {} catalog tools",
            first.0["servers"], first.0["states"], first.0["catalogTools"]
        );
    }
    println!();
    println!(
        "| variant | VmHWM MiB (median, max) | VmRSS MiB (median) | config loaded ms | `Runtime::start` returned ms | \
         first `status()` ms (median, max) | spawn → report ms (parent, median) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut medians: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for variant in VARIANTS {
        let rows = reports.get(variant).map(Vec::as_slice).unwrap_or_default();
        let col = |key: &str| -> Vec<f64> { rows.iter().filter_map(|(r, _)| r[key].as_f64()).collect() };
        let max = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
        let hwm = col("vmHwmKiB");
        let ready = col("readyUs");
        let walls: Vec<f64> = rows.iter().map(|(_, w)| w.as_secs_f64() * 1e3).collect();
        let ms_of = |v: &[f64]| {
            if v.is_empty() {
                "—".to_owned()
            } else {
                format!("{:.2}", median_f64(v) / 1000.0)
            }
        };
        medians.insert(variant, (median_f64(&hwm), median_f64(&ready)));
        let label = match variant {
            "baseline" => "baseline: tokio runtime only",
            "cached" => "runtime, servers served from the cache",
            "empty" => "runtime, same servers, no cache file",
            _ => "diagnostic: `MetadataCache::load()` only",
        };
        println!(
            "| {label} | {}, {} | {} | {} | {} | {:.2}, {:.2} | {:.2} |",
            kib(median_f64(&hwm)),
            kib(max(&hwm)),
            kib(median_f64(&col("vmRssKiB"))),
            ms_of(&col("configUs")),
            ms_of(&col("startUs")),
            median_f64(&ready) / 1000.0,
            max(&ready) / 1000.0,
            median_f64(&walls)
        );
    }
    if let (Some(base), Some(cached)) = (medians.get("baseline"), medians.get("cached")) {
        println!();
        println!(
            "runtime over baseline (medians): +{} MiB peak RSS, +{:.2} ms to first status",
            kib(cached.0 - base.0),
            (cached.1 - base.1) / 1000.0
        );
        println!(
            "goals: VmHWM ≤ 20 MiB → {} ({} MiB); first status ≤ 20 ms → {} ({:.2} ms)",
            if cached.0 / 1024.0 <= 20.0 { "met" } else { "MISSED" },
            kib(cached.0),
            if cached.1 / 1000.0 <= 20.0 { "met" } else { "MISSED" },
            cached.1 / 1000.0
        );
    }
    Ok(())
}
