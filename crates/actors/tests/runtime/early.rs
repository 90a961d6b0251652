//! Early calls: a lazy server whose fresh cached metadata lists the tool takes the call as soon as `initialize`
//! completes and discovers in the background; without fresh metadata a call still waits for discovery. The
//! fixture's `--hold-tools-list FILE` holds tools/list while FILE exists, so "before discovery" is a state, not a
//! race.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pimcp_actors::{CallOptions, ErrorCategory, MetadataCache, MetadataSource, ServerState, Tuning};
use serde_json::{Value, json};

use super::support::*;

fn fx(hold: &Path, extra: Value) -> Value {
    let mut entry = stdio(&["--hold-tools-list", hold.to_str().unwrap()]);
    if let (Some(e), Some(x)) = (entry.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    json!({ "mcpServers": { "fx": entry } })
}

/// Runs once without a hold so that the metadata cache holds a fresh entry for `fx`.
async fn seed_cache(dir: &Path, hold: &Path) {
    seed_cache_for(dir, &fx(hold, json!({}))).await;
}

/// Runs `config` once so that the metadata cache holds a fresh entry for its `fx` (the entry is bound to the
/// config's hash: a later start must use the same config).
async fn seed_cache_for(dir: &Path, config: &Value) {
    let rt = start_in(dir, config, tuning()).await;
    let out = rt
        .call("fx_echo", args(json!({"text": "seed"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "seed");
    let cache = MetadataCache::in_agent_dir(&dir.join("agent"));
    wait_until("cache entry", Duration::from_secs(10), || {
        cache.load().servers.contains_key("fx")
    })
    .await;
    rt.shutdown(Duration::from_secs(10)).await;
}

fn source(rt: &pimcp_actors::Runtime) -> Option<MetadataSource> {
    rt.status().server("fx").unwrap().metadata
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_a_fresh_cache_goes_while_tools_list_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold");
    seed_cache(dir.path(), &hold).await;

    std::fs::write(&hold, b"").unwrap();
    let rt = start_in(dir.path(), &fx(&hold, json!({})), tuning()).await;
    assert_eq!(source(&rt), Some(MetadataSource::Cache), "the seeded entry is fresh");

    // tools/list is held: the call completes anyway, on the cached catalog.
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        rt.call("fx_echo", args(json!({"text": "early"})), CallOptions::default()),
    )
    .await
    .expect("a call from a fresh cache must not wait for the held tools/list")
    .unwrap();
    assert_eq!(out.text(), "early");
    assert_eq!(state_of(&rt, "fx"), ServerState::Ready);
    assert_eq!(
        source(&rt),
        Some(MetadataSource::Cache),
        "discovery cannot have finished"
    );

    // The server grows a tool the cache does not know. A call to it needs discovery: the router asks the server,
    // whose answer waits for the held discovery instead of reporting an unknown tool.
    rt.call("fx_add_tool", args(json!({"name": "late"})), CallOptions::default())
        .await
        .unwrap();
    // And drops one the cache lists: the catalog keeps it until the discovery says otherwise.
    rt.call("fx_remove_tool", args(json!({"name": "fail"})), CallOptions::default())
        .await
        .unwrap();
    assert!(rt.catalog().get("fx_fail").is_some());
    let late = {
        let h = rt.handle();
        tokio::spawn(async move { h.call("fx_late", args(json!({"x": 1})), CallOptions::default()).await })
    };
    std::fs::remove_file(&hold).unwrap();
    let out = late.await.unwrap();
    assert!(out.is_ok(), "a tool that exists is never unknown: {:?}", out.err());

    // The background discovery replaced the cached catalog and rewrote the cache.
    assert_eq!(source(&rt), Some(MetadataSource::Live));
    wait_until("the live catalog lists the new tool", Duration::from_secs(10), || {
        rt.catalog().get("fx_late").is_some()
    })
    .await;
    assert!(
        rt.catalog().get("fx_fail").is_none(),
        "a removed tool leaves the catalog"
    );
    let cache = MetadataCache::in_agent_dir(&dir.path().join("agent"));
    wait_until(
        "the cache lists the new tool and not the removed one",
        Duration::from_secs(10),
        || {
            cache.load().servers.get("fx").is_some_and(|e| {
                e.metadata.tools.iter().any(|t| t.name == "late") && !e.metadata.tools.iter().any(|t| t.name == "fail")
            })
        },
    )
    .await;
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_fresh_metadata_waits_for_discovery() {
    // A held tools/list against a 1 s request timeout: a call that waits for discovery fails with the discovery's
    // timeout; one that went early would succeed.
    let dir = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold");
    let short = json!({"requestTimeoutMs": 1000, "startupTimeout": 30});
    std::fs::write(&hold, b"").unwrap();

    // No cache at all.
    let rt = start_in(dir.path(), &fx(&hold, short.clone()), tuning()).await;
    assert_eq!(source(&rt), None);
    let r = rt
        .call("fx_echo", args(json!({"text": "x"})), CallOptions::default())
        .await;
    assert_eq!(category(&r), Some(ErrorCategory::Connection), "{r:?}");
    assert!(format!("{:?}", r.err()).contains("discovery"));
    rt.shutdown(Duration::from_secs(10)).await;

    // A stale cache entry (older than the cache's maximum age).
    std::fs::remove_file(&hold).unwrap();
    seed_cache(dir.path(), &hold).await;
    let cache = MetadataCache::in_agent_dir(&dir.path().join("agent"));
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(cache.path()).unwrap()).unwrap();
    let eight_days_ms = 8 * 24 * 3600 * 1000;
    let cached_at = file["servers"]["fx"]["cachedAt"].as_u64().unwrap();
    file["servers"]["fx"]["cachedAt"] = json!(cached_at - eight_days_ms);
    std::fs::write(cache.path(), serde_json::to_vec(&file).unwrap()).unwrap();
    std::fs::write(&hold, b"").unwrap();
    let rt = start_in(dir.path(), &fx(&hold, short), tuning()).await;
    assert_eq!(source(&rt), Some(MetadataSource::StaleCache));
    let r = rt
        .call("fx_echo", args(json!({"text": "x"})), CallOptions::default())
        .await;
    assert_eq!(category(&r), Some(ErrorCategory::Connection), "{r:?}");
    assert!(format!("{:?}", r.err()).contains("discovery"));
    rt.shutdown(Duration::from_secs(10)).await;
}

/// The fixture with an event log: its events since its latest start.
fn logged(log: &Path) -> Value {
    json!({ "mcpServers": { "fx": stdio(&["--event-log", log.to_str().unwrap()]) } })
}

/// A runtime whose `fx` (with an event log) has a fresh cache entry written by an earlier runtime.
async fn started_on_a_fresh_cache(t: Tuning) -> (tempfile::TempDir, PathBuf, pimcp_actors::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fx.jsonl");
    let config = logged(&log);
    seed_cache_for(dir.path(), &config).await;
    let rt = start_in(dir.path(), &config, t).await;
    assert_eq!(source(&rt), Some(MetadataSource::Cache));
    (dir, log, rt)
}

fn events_of_latest_start(log: &Path) -> Vec<String> {
    let all = events(log);
    let last_start = all.iter().rposition(|e| e["event"] == "start").expect("a start event");
    all[last_start..]
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_a_connection_was_started_for_are_answered_before_its_background_discovery() {
    // An upstream handles requests concurrently: lists sent beside the first call delay its answer. With a fresh
    // cache the queued call goes first and the lists only after its answer (here a 300 ms call).
    let (_dir, log, rt) = started_on_a_fresh_cache(tuning()).await;
    let out = rt
        .call("fx_slow", args(json!({"ms": 300})), CallOptions::default())
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.text());
    wait_until("the background discovery", Duration::from_secs(20), || {
        source(&rt) == Some(MetadataSource::Live)
    })
    .await;
    let ev = events_of_latest_start(&log);
    let end = ev.iter().position(|e| e == "call_end").expect("the call's answer");
    let list = ev.iter().position(|e| e == "list").expect("the discovery's lists");
    assert!(end < list, "the lists went before the call was answered: {ev:?}");
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_first_call_holds_the_background_discovery_back_only_briefly() {
    let t = Tuning {
        discovery_after_calls_max: Duration::from_millis(200),
        ..tuning()
    };
    let (_dir, log, rt) = started_on_a_fresh_cache(t).await;
    let long = {
        let h = rt.handle();
        tokio::spawn(async move {
            h.call("fx_slow", args(json!({"ms": 120_000})), CallOptions::default())
                .await
        })
    };
    wait_until("the background discovery", Duration::from_secs(20), || {
        source(&rt) == Some(MetadataSource::Live)
    })
    .await;
    let ev = events_of_latest_start(&log);
    assert!(ev.contains(&"call".to_owned()), "{ev:?}");
    assert!(
        !ev.contains(&"call_end".to_owned()),
        "the discovery did not wait for the whole call: {ev:?}"
    );
    assert!(!long.is_finished());
    rt.shutdown(Duration::from_secs(10)).await;
    let _ = long.await;
}
