//! Bench: time from `Runtime::start` to the first successful call on a lazy stdio server, against the server's own
//! spawn + handshake time measured with a bare rmcp client, 30 repetitions each, interleaved.
//!
//! Method: every repetition runs, in rotating order, (a) `runtime, no cache`: a fresh agent dir, so the first call
//! must connect, discover the catalog and call; (b) `runtime, warm cache`: an agent dir whose cache the runtime
//! wrote on an earlier run; (c) the same as (a) with the guardian disabled (diagnostic); (d) `bare`:
//! `TokioChildProcess` spawn + handshake (same lifecycle as the runtime's `auto`), then one `echo` call. Each timer
//! starts before `Runtime::start` / the spawn and stops when `echo` answered (the runtime's `ready` state event is
//! timed too); runtimes are shut down and bare clients cancelled outside the timed region.
//!
//! Run: `cargo bench -p pimcp-actors --bench first_call` (env `PIMCP_BENCH_REPS`).
#![allow(clippy::print_stdout)] // a bench prints its table

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use pimcp_actors::{CallOptions, GuardianMode, MetadataCache, RuntimeEvent, ServerState};
use serde_json::json;

#[path = "support/mod.rs"]
mod support;
use support::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One runtime repetition's timeline, all from before `Runtime::start`.
#[derive(Default)]
struct Timeline {
    started: Vec<Duration>,
    /// The server's `ready` state event was received.
    ready: Vec<Duration>,
    answered: Vec<Duration>,
}

/// One runtime repetition in `dir` (the guardian on or off), appended to `out`.
async fn runtime_rep(dir: &Path, guardian: bool, out: &mut Timeline) -> anyhow::Result<()> {
    let t = Instant::now();
    let runtime = start_runtime_with(dir, json!({ "fx": server_entry(&[]) }), |o| {
        if !guardian {
            o.process.guardian = GuardianMode::Disabled;
        }
    })
    .await?;
    let started = t.elapsed();
    let mut events = runtime.events();
    let watcher = tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            if matches!(
                &event,
                RuntimeEvent::State {
                    state: ServerState::Ready,
                    ..
                }
            ) {
                return Some(t.elapsed());
            }
        }
        None
    });
    let answer = runtime
        .call("fx_echo", echo_args("first"), CallOptions::default())
        .await?;
    let answered = t.elapsed();
    anyhow::ensure!(answer.text() == "first", "runtime echo answered {:?}", answer.text());
    let ready = tokio::time::timeout(Duration::from_secs(5), watcher)
        .await
        .context("no ready event")??
        .context("event stream closed before ready")?;
    let report = runtime.shutdown(Duration::from_secs(10)).await;
    anyhow::ensure!(report.graceful, "runtime shutdown was not graceful: {report:?}");
    out.started.push(started);
    out.ready.push(ready);
    out.answered.push(answered);
    Ok(())
}

/// One bare repetition: (spawn + handshake, + first echo).
async fn bare_rep() -> anyhow::Result<(Duration, Duration)> {
    let t = Instant::now();
    let client = bare_connect(&[]).await?;
    let connected = t.elapsed();
    let out = client.call_tool(echo_request("first")).await?;
    let answered = t.elapsed();
    anyhow::ensure!(
        bare_text(&out).as_deref() == Some("first"),
        "bare echo answered {out:?}"
    );
    client.cancel().await.context("closing the bare client")?;
    Ok((connected, answered))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let reps = env_usize("PIMCP_BENCH_REPS", 30);
    let warm_dir = tempfile::tempdir()?;
    // Fill the warm cache the way a user's first run does, then check the runtime wrote the entry.
    runtime_rep(warm_dir.path(), true, &mut Timeline::default()).await?;
    let cache = MetadataCache::in_agent_dir(&warm_dir.path().join("agent"));
    wait_until("the fx cache entry", Duration::from_secs(10), || {
        cache.load().servers.contains_key("fx")
    })
    .await?;
    // One untimed round of each to warm the page cache and the binaries.
    runtime_rep(tempfile::tempdir()?.path(), true, &mut Timeline::default()).await?;
    bare_rep().await?;

    let mut cold = Timeline::default();
    let mut warm = Timeline::default();
    let mut no_guardian = Timeline::default();
    let mut bare = (Vec::new(), Vec::new());
    for rep in 0..reps {
        for i in 0..4 {
            match (i + rep) % 4 {
                0 => runtime_rep(tempfile::tempdir()?.path(), true, &mut cold).await?,
                1 => runtime_rep(warm_dir.path(), true, &mut warm).await?,
                2 => runtime_rep(tempfile::tempdir()?.path(), false, &mut no_guardian).await?,
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
    println!(
        "| variant | `Runtime::start` returned ms (median) | connected ms (median, p90) | first `echo` answered ms \
         (median, p90) |"
    );
    println!("| --- | ---: | ---: | ---: |");
    let row = |name: &str, tl: &Timeline| {
        let (s, r, a) = (summarize(&tl.started), summarize(&tl.ready), summarize(&tl.answered));
        println!(
            "| {name} | {} | {}, {} | {}, {} |",
            ms(s.median),
            ms(r.median),
            ms(r.p90),
            ms(a.median),
            ms(a.p90)
        );
        a
    };
    let c = row("runtime, no cache (connect + discover + call)", &cold);
    let w = row("runtime, warm cache (connect + call)", &warm);
    let n = row("runtime, no cache, guardian disabled (diagnostic)", &no_guardian);
    let b = (summarize(&bare.0), summarize(&bare.1));
    println!(
        "| bare rmcp: spawn + handshake, then call | — | {}, {} | {}, {} |",
        ms(b.0.median),
        ms(b.0.p90),
        ms(b.1.median),
        ms(b.1.p90)
    );
    println!();
    println!(
        "runtime `connected` = the server's `ready` state event was received (discovery done when there is no cache)."
    );
    let ratio = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64();
    println!(
        "first call, runtime over bare (medians): no cache +{} ms ({:.2}x), warm cache +{} ms ({:.2}x), no guardian +{} ms \
         ({:.2}x); runtime first call over bare spawn + handshake: no cache {:.2}x, warm cache {:.2}x",
        ms(c.median.saturating_sub(b.1.median)),
        ratio(c.median, b.1.median),
        ms(w.median.saturating_sub(b.1.median)),
        ratio(w.median, b.1.median),
        ms(n.median.saturating_sub(b.1.median)),
        ratio(n.median, b.1.median),
        ratio(c.median, b.0.median),
        ratio(w.median, b.0.median)
    );
    Ok(())
}
