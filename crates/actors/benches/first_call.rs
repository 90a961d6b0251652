//! Bench: time from `Runtime::start` to the first successful call on a lazy stdio server, against the server's own
//! spawn + handshake time measured with a bare rmcp client, 30 repetitions each, interleaved.
//!
//! Method: every repetition runs, in rotating order, (a) `runtime, no cache`: a fresh agent dir, so the first call
//! must connect, discover the catalog and call; (b) `runtime, warm cache`: an agent dir whose cache the runtime
//! wrote on an earlier run, so the tool resolves from the cache and the call only connects and calls; (c) `bare`:
//! `TokioChildProcess` spawn + handshake (same lifecycle as the runtime's `auto`), then one `echo` call. Each timer
//! starts before `Runtime::start` / the spawn and stops when `echo` answered; runtimes are shut down and bare
//! clients cancelled outside the timed region.
//!
//! Run: `cargo bench -p pimcp-actors --bench first_call` (env `PIMCP_BENCH_REPS`).
#![allow(clippy::print_stdout)] // a bench prints its table

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use pimcp_actors::{CallOptions, MetadataCache};
use serde_json::json;

#[path = "support/mod.rs"]
mod support;
use support::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One runtime repetition in `dir`: (start returned, first echo answered), both from before `Runtime::start`.
async fn runtime_rep(dir: &Path) -> anyhow::Result<(Duration, Duration)> {
    let t = Instant::now();
    let runtime = start_runtime(dir, json!({ "fx": server_entry(&[]) })).await?;
    let started = t.elapsed();
    let out = runtime.call("fx_echo", echo_args("first"), CallOptions::default()).await?;
    let answered = t.elapsed();
    anyhow::ensure!(out.text() == "first", "runtime echo answered {:?}", out.text());
    let report = runtime.shutdown(Duration::from_secs(10)).await;
    anyhow::ensure!(report.graceful, "runtime shutdown was not graceful: {report:?}");
    Ok((started, answered))
}

/// One bare repetition: (spawn + handshake, + first echo).
async fn bare_rep() -> anyhow::Result<(Duration, Duration)> {
    let t = Instant::now();
    let client = bare_connect(&[]).await?;
    let connected = t.elapsed();
    let out = client.call_tool(echo_request("first")).await?;
    let answered = t.elapsed();
    anyhow::ensure!(bare_text(&out).as_deref() == Some("first"), "bare echo answered {out:?}");
    client.cancel().await.context("closing the bare client")?;
    Ok((connected, answered))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let reps = env_usize("PIMCP_BENCH_REPS", 30);
    let warm_dir = tempfile::tempdir()?;
    // Fill the warm cache the way a user's first run does, then check the runtime wrote the entry.
    runtime_rep(warm_dir.path()).await?;
    let cache = MetadataCache::in_agent_dir(&warm_dir.path().join("agent"));
    wait_until("the fx cache entry", Duration::from_secs(10), || {
        cache.load().servers.contains_key("fx")
    })
    .await?;
    // One untimed round of each to warm the page cache and the binaries.
    runtime_rep(tempfile::tempdir()?.path()).await?;
    bare_rep().await?;

    let mut cold = (Vec::new(), Vec::new());
    let mut warm = (Vec::new(), Vec::new());
    let mut bare = (Vec::new(), Vec::new());
    for rep in 0..reps {
        for i in 0..3 {
            match (i + rep) % 3 {
                0 => {
                    let dir = tempfile::tempdir()?;
                    let (s, a) = runtime_rep(dir.path()).await?;
                    cold.0.push(s);
                    cold.1.push(a);
                }
                1 => {
                    let (s, a) = runtime_rep(warm_dir.path()).await?;
                    warm.0.push(s);
                    warm.1.push(a);
                }
                _ => {
                    let (c, a) = bare_rep().await?;
                    bare.0.push(c);
                    bare.1.push(a);
                }
            }
        }
    }

    println!("## first_call: runtime start → first successful call on a lazy stdio server vs bare spawn + handshake");
    println!();
    println!("machine: {}", machine_line());
    println!(
        "fixture: {}; {reps} repetitions per variant, rotating order, one untimed warm-up each",
        fixture().display()
    );
    println!();
    println!("| variant | `Runtime::start` returned ms (median) | connected ms (median, p90) | first `echo` answered ms (median, p90) |");
    println!("| --- | ---: | ---: | ---: |");
    let c = (summarize(&cold.0), summarize(&cold.1));
    let w = (summarize(&warm.0), summarize(&warm.1));
    let b = (summarize(&bare.0), summarize(&bare.1));
    println!(
        "| runtime, no cache (connect + discover + call) | {} | — | {}, {} |",
        ms(c.0.median),
        ms(c.1.median),
        ms(c.1.p90)
    );
    println!(
        "| runtime, warm cache (connect + call) | {} | — | {}, {} |",
        ms(w.0.median),
        ms(w.1.median),
        ms(w.1.p90)
    );
    println!(
        "| bare rmcp: spawn + handshake, then call | — | {}, {} | {}, {} |",
        ms(b.0.median),
        ms(b.0.p90),
        ms(b.1.median),
        ms(b.1.p90)
    );
    println!();
    println!(
        "runtime over bare first call (medians): no cache +{} ms ({:.2}x), warm cache +{} ms ({:.2}x); over bare \
         spawn + handshake: no cache {:.2}x, warm cache {:.2}x",
        ms(c.1.median.saturating_sub(b.1.median)),
        c.1.median.as_secs_f64() / b.1.median.as_secs_f64(),
        ms(w.1.median.saturating_sub(b.1.median)),
        w.1.median.as_secs_f64() / b.1.median.as_secs_f64(),
        c.1.median.as_secs_f64() / b.0.median.as_secs_f64(),
        w.1.median.as_secs_f64() / b.0.median.as_secs_f64()
    );
    Ok(())
}
