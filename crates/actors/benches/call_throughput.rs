//! Bench: concurrent throughput of `echo` calls from 64 callers through the runtime against a bare rmcp client
//! on the same `mcp-fixture` binary, in the same run, interleaved in rounds.
//!
//! Method: one runtime with one stdio fixture server and one bare rmcp client (same lifecycle) side by side.
//! Each round starts 64 tasks that each make a fixed number of sequential calls through a cloned
//! `RuntimeHandle` or a cloned rmcp `Peer`; the round's wall time gives calls/s, every call is timed for the
//! latency percentiles. Rounds alternate ABBA (runtime, bare, bare, runtime, …) after one warm-up round per side.
//!
//! Run: `cargo bench -p pimcp-actors --bench call_throughput` (env `PIMCP_BENCH_CALLERS`, `PIMCP_BENCH_ROUNDS`,
//! `PIMCP_BENCH_CALLS_PER_CALLER`).
#![allow(clippy::print_stdout)] // a bench prints its table

use std::time::{Duration, Instant};

use anyhow::Context as _;
use pimcp_actors::{CallOptions, RuntimeHandle};
use rmcp::RoleClient;
use rmcp::service::Peer;
use serde_json::json;

#[path = "support/mod.rs"]
mod support;
use support::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[derive(Clone)]
enum Caller {
    Runtime(RuntimeHandle),
    Bare(Peer<RoleClient>),
}

impl Caller {
    async fn echo(&self, text: &str) -> anyhow::Result<String> {
        match self {
            Caller::Runtime(h) => Ok(h.call("fx_echo", echo_args(text), CallOptions::default()).await?.text()),
            Caller::Bare(p) => {
                let out = p.call_tool(echo_request(text)).await?;
                bare_text(&out).context("bare echo returned no text")
            }
        }
    }
}

/// One round: `callers` tasks × `per_caller` sequential calls. Returns the wall time and every call's latency.
async fn round(caller: &Caller, callers: usize, per_caller: usize) -> anyhow::Result<(Duration, Vec<Duration>)> {
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(callers);
    for k in 0..callers {
        let caller = caller.clone();
        tasks.push(tokio::spawn(async move {
            let text = format!("caller {k}");
            let mut lat = Vec::with_capacity(per_caller);
            for _ in 0..per_caller {
                let t = Instant::now();
                let out = caller.echo(&text).await?;
                lat.push(t.elapsed());
                anyhow::ensure!(out == text, "echo answered {out:?} to {text:?}");
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    let mut all = Vec::with_capacity(callers * per_caller);
    for t in tasks {
        all.extend(t.await.context("caller task panicked")??);
    }
    Ok((start.elapsed(), all))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let callers = env_usize("PIMCP_BENCH_CALLERS", 64);
    let rounds = env_usize("PIMCP_BENCH_ROUNDS", 12).max(2);
    let per_caller = env_usize("PIMCP_BENCH_CALLS_PER_CALLER", 50);

    let dir = tempfile::tempdir()?;
    let runtime = start_runtime(dir.path(), json!({ "fx": server_entry(&[]) })).await?;
    let bare = bare_connect(&[]).await?;
    let rt_caller = Caller::Runtime(runtime.handle());
    let bare_caller = Caller::Bare(bare.peer().clone());

    round(&rt_caller, callers, per_caller).await?;
    round(&bare_caller, callers, per_caller).await?;

    let mut rt_rates = Vec::new();
    let mut bare_rates = Vec::new();
    let mut rt_lat = Vec::new();
    let mut bare_lat = Vec::new();
    let mut rt_cpu = Vec::new();
    let mut bare_cpu = Vec::new();
    for r in 0..rounds * 2 {
        let is_runtime = (r % 2 == 0) == runtime_first((r / 2) * 2);
        let caller = if is_runtime { &rt_caller } else { &bare_caller };
        let cpu0 = process_cpu();
        let (wall, lat) = round(caller, callers, per_caller).await?;
        let cpu = (process_cpu() - cpu0).as_secs_f64() / lat.len() as f64;
        let rate = lat.len() as f64 / wall.as_secs_f64();
        if is_runtime {
            rt_cpu.push(cpu);
        } else {
            bare_cpu.push(cpu);
        }
        if is_runtime {
            rt_rates.push(rate);
            rt_lat.extend(lat);
        } else {
            bare_rates.push(rate);
            bare_lat.extend(lat);
        }
    }

    let rt = summarize(&rt_lat);
    let b = summarize(&bare_lat);
    println!("## call_throughput: {callers} concurrent callers of `echo`, runtime vs bare rmcp client");
    println!();
    println!("machine: {}", machine_line());
    println!(
        "fixture: {}; {rounds} rounds per side (ABBA) of {callers} callers x {per_caller} sequential calls, one warm-up \
         round per side",
        fixture().display()
    );
    println!();
    println!(
        "| client | calls | calls/s (median of rounds) | calls/s min–max | median µs | p90 µs | p99 µs | max µs |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, s, rates) in [
        ("runtime (`RuntimeHandle::call`)", rt, &rt_rates),
        ("bare rmcp (`Peer::call_tool`)", b, &bare_rates),
    ] {
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(0.0, f64::max);
        println!(
            "| {name} | {} | {:.0} | {lo:.0}–{hi:.0} | {} | {} | {} | {} |",
            s.n,
            median_f64(rates),
            us(s.median),
            us(s.p90),
            us(s.p99),
            us(s.max)
        );
    }
    let pair_ratios: Vec<f64> = rt_rates.iter().zip(&bare_rates).map(|(r, b)| r / b).collect();
    println!();
    println!(
        "throughput runtime / bare: {:.2}x (median of per-round-pair ratios); p99 runtime / bare: {:.2}x",
        median_f64(&pair_ratios),
        rt.p99.as_secs_f64() / b.p99.as_secs_f64()
    );

    println!(
        "CPU of this process per call (median of rounds): runtime {:.1} µs, bare {:.1} µs",
        median_f64(&rt_cpu) * 1e6,
        median_f64(&bare_cpu) * 1e6
    );

    bare.cancel().await.context("closing the bare client")?;
    runtime.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
