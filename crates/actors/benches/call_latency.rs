//! Bench: in-process overhead of one sequential `echo` call through the runtime (handle → router → server actor →
//! rmcp peer) against a bare rmcp client on the same `mcp-fixture` binary, in the same run, interleaved in blocks.
//!
//! Method: one runtime with one stdio fixture server and one bare rmcp client (`TokioChildProcess`, same
//! lifecycle as the runtime's `auto` mode) live side by side in one tokio runtime. After a warm-up, blocks of
//! sequential calls alternate in ABBA order (runtime, bare, bare, runtime, …) so slow drift of the noisy machine
//! cancels pairwise. Every call is timed on its own; the table gives order statistics over all calls of each side
//! and the median of the per-block-pair differences of the block medians.
//!
//! Run: `cargo bench -p pimcp-actors --bench call_latency` (env `PIMCP_BENCH_CALLS`, `PIMCP_BENCH_BLOCKS`).
#![allow(clippy::print_stdout)] // a bench prints its table

use std::time::{Duration, Instant};

use anyhow::Context as _;
use pimcp_actors::CallOptions;
use serde_json::json;

#[path = "support/mod.rs"]
mod support;
use support::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let calls = env_usize("PIMCP_BENCH_CALLS", 10_000);
    let blocks = env_usize("PIMCP_BENCH_BLOCKS", 20).max(2);
    let per_block = calls.div_ceil(blocks);
    let warmup = 500;

    let dir = tempfile::tempdir()?;
    let runtime = start_runtime(dir.path(), json!({ "fx": server_entry(&[]) })).await?;
    let bare = bare_connect(&[]).await?;
    let args = echo_args("ping");
    let request = echo_request("ping");

    // Warm-up: connects the lazy server, fills allocator pools and caches on both sides.
    for _ in 0..warmup {
        let out = runtime.call("fx_echo", args.clone(), CallOptions::default()).await?;
        anyhow::ensure!(out.text() == "ping", "runtime echo answered {:?}", out.text());
        let out = bare.call_tool(request.clone()).await?;
        anyhow::ensure!(bare_text(&out).as_deref() == Some("ping"), "bare echo answered {out:?}");
    }
    let protocol = runtime
        .status()
        .server("fx")
        .and_then(|s| s.protocol_version.clone())
        .unwrap_or_default();
    let bare_protocol = bare
        .peer_info()
        .map(|i| i.protocol_version.as_str().to_owned())
        .unwrap_or_default();

    let mut rt_all = Vec::with_capacity(per_block * blocks);
    let mut bare_all = Vec::with_capacity(per_block * blocks);
    let mut rt_block_medians = Vec::new();
    let mut bare_block_medians = Vec::new();
    let mut sample = Vec::with_capacity(per_block);
    let mut rt_cpu = Vec::new();
    let mut bare_cpu = Vec::new();
    for block in 0..blocks * 2 {
        // Blocks 0..2*blocks: each pair (2k, 2k+1) is one runtime block and one bare block, ABBA-ordered.
        let pair = block / 2;
        let is_runtime = (block % 2 == 0) == runtime_first(pair * 2);
        sample.clear();
        let cpu0 = process_cpu();
        for _ in 0..per_block {
            let t = Instant::now();
            if is_runtime {
                let out = runtime.call("fx_echo", args.clone(), CallOptions::default()).await?;
                std::hint::black_box(&out);
            } else {
                let out = bare.call_tool(request.clone()).await?;
                std::hint::black_box(&out);
            }
            sample.push(t.elapsed());
        }
        let cpu_per_call = (process_cpu() - cpu0).as_secs_f64() / per_block as f64;
        let median = summarize(&sample).median;
        if is_runtime {
            rt_cpu.push(cpu_per_call);
        } else {
            bare_cpu.push(cpu_per_call);
        }
        if is_runtime {
            rt_all.extend_from_slice(&sample);
            rt_block_medians.push(median.as_secs_f64());
        } else {
            bare_all.extend_from_slice(&sample);
            bare_block_medians.push(median.as_secs_f64());
        }
    }
    let diffs: Vec<f64> = rt_block_medians
        .iter()
        .zip(&bare_block_medians)
        .map(|(r, b)| r - b)
        .collect();
    let added_median_of_blocks = median_f64(&diffs);

    let rt = summarize(&rt_all);
    let b = summarize(&bare_all);
    println!("## call_latency: sequential `echo` calls, runtime vs bare rmcp client");
    println!();
    println!("machine: {}", machine_line());
    println!(
        "fixture: {}; protocol runtime={protocol} bare={bare_protocol}; {blocks} block pairs x {per_block} calls per side \
         (ABBA), {warmup} warm-up calls per side",
        fixture().display()
    );
    println!();
    println!("| client | calls | median µs | p90 µs | p99 µs | mean µs | min µs | max µs |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, s) in [("runtime (`RuntimeHandle::call`)", rt), ("bare rmcp (`call_tool`)", b)] {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            s.n,
            us(s.median),
            us(s.p90),
            us(s.p99),
            us(s.mean),
            us(s.min),
            us(s.max)
        );
    }
    let ratio = rt.median.as_secs_f64() / b.median.as_secs_f64();
    println!();
    println!("| added by the runtime | value |");
    println!("| --- | ---: |");
    let signed_us = |a: Duration, b: Duration| (a.as_secs_f64() - b.as_secs_f64()) * 1e6;
    println!(
        "| median − median (all calls) | {:+.1} µs |",
        signed_us(rt.median, b.median)
    );
    println!(
        "| median of per-block-pair median differences | {:+.1} µs |",
        added_median_of_blocks * 1e6
    );
    println!("| p99 − p99 | {:+.1} µs |", signed_us(rt.p99, b.p99));
    println!("| median ratio runtime / bare | {ratio:.2}x |");
    let (rc, bc) = (median_f64(&rt_cpu) * 1e6, median_f64(&bare_cpu) * 1e6);
    println!("| CPU of this process per call, runtime (median of blocks) | {rc:.1} µs |");
    println!("| CPU of this process per call, bare (median of blocks) | {bc:.1} µs |");
    println!("| CPU added per call by the runtime | {:+.1} µs |", rc - bc);
    println!(
        "| goal ≤ 30 µs added at the median | {} |",
        if added_median_of_blocks * 1e6 <= 30.0 {
            "met"
        } else {
            "MISSED"
        }
    );

    bare.cancel().await.context("closing the bare client")?;
    runtime.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
