//! Lifecycle, catalog, cache and call semantics on healthy servers.

use std::time::Duration;

use pimcp_actors::{CallOptions, Error, ErrorCategory, MetadataSource, ServerState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_run_starts_nothing_then_first_call_connects_and_caches() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("fx.pid");
    let config = json!({"mcpServers": {"fx": stdio(&["--pid-file", pid_file.to_str().unwrap()])}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    assert_eq!(state_of(&rt, "fx"), ServerState::Cached);
    assert!(
        rt.catalog().server("fx").unwrap().source.is_none(),
        "no metadata before the first connect"
    );
    assert!(!pid_file.exists(), "a lazy server must not start before use");

    // The catalog is unknown: the call connects, discovers, and succeeds (never "unknown tool").
    let out = rt
        .call("fx_echo", args(json!({"text": "hi"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "hi");
    assert_eq!(out.server, "fx");
    assert_eq!(state_of(&rt, "fx"), ServerState::Ready);
    let st = rt.status();
    let fx = st.server("fx").unwrap();
    assert!(fx.tool_count >= 10, "{fx:?}");
    assert_eq!(fx.resource_count, 3);
    assert!(fx.protocol_version.is_some());
    assert!(fx.uptime_ms.is_some());
    let catalog = rt.catalog();
    assert_eq!(catalog.server("fx").unwrap().source, Some(MetadataSource::Live));
    assert!(catalog.get("fx_read_readme").is_some() || catalog.tools().any(|t| t.name.starts_with("fx_read_")));
    let live_schema = catalog.get("fx_echo").unwrap().input_schema().unwrap();
    assert!(live_schema.contains_key("properties"), "{live_schema:?}");

    // The cache file is written (0600) with this server's entry.
    let cache = pimcp_actors::MetadataCache::in_agent_dir(&dir.path().join("agent"));
    wait_until("cache entry", Duration::from_secs(5), || {
        cache.load().servers.contains_key("fx")
    })
    .await;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(cache.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let report = rt.shutdown(Duration::from_secs(10)).await;
    assert!(report.graceful, "{report:?}");

    // Next start: the catalog comes from the cache, and still nothing runs.
    std::fs::remove_file(&pid_file).unwrap();
    let rt = start_in(dir.path(), &config, tuning()).await;
    let catalog = rt.catalog();
    // Fresh, or stale when the server's ttlMs hint has passed: either way it is served.
    let source = catalog.server("fx").unwrap().source;
    assert!(
        matches!(source, Some(MetadataSource::Cache | MetadataSource::StaleCache)),
        "{source:?}"
    );
    // Its schemas stay unparsed until asked for, then equal what discovery returned.
    let echo = catalog.get("fx_echo").unwrap();
    assert!(!echo.input_schema.is_parsed(), "cached schemas are not parsed at start");
    let described = rt.describe("fx_echo").await.unwrap();
    assert_eq!(described.input_schema().unwrap(), live_schema);
    assert!(echo.input_schema.is_parsed(), "the parse is shared with the catalog");
    assert!(rt.instructions("fx").is_some());
    assert_eq!(state_of(&rt, "fx"), ServerState::Cached);
    assert!(!pid_file.exists());
    rt.shutdown(Duration::from_secs(10)).await;
}

/// The metadata cache is written on the blocking pool after discovery; `shutdown` waits for that write, so what a run
/// discovered is there for the next start (without the wait, the proxy's direct-tool tests, which start again from
/// the cache, failed about 1 run in 4 under load). The test holds the cache's file lock, so the write cannot finish
/// before the test lets it: `shutdown` must still be waiting after half a second, and return once the lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_the_metadata_cache_write() {
    let dir = tempfile::tempdir().unwrap();
    let cache = pimcp_actors::MetadataCache::in_agent_dir(&dir.path().join("agent"));
    std::fs::create_dir_all(cache.path().parent().unwrap()).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(cache.path().with_extension("json.lock"))
        .unwrap();
    fs4::FileExt::lock(&lock).unwrap();

    let rt = start_in(dir.path(), &json!({"mcpServers": {"fx": stdio(&[])}}), tuning()).await;
    rt.connect("fx").await.unwrap();
    let mut shutdown = tokio::spawn(async move { rt.shutdown(Duration::from_secs(30)).await });
    if let Ok(report) = tokio::time::timeout(Duration::from_millis(500), &mut shutdown).await {
        panic!("shutdown returned while the cache write was still waiting for its lock: {report:?}");
    }
    fs4::FileExt::unlock(&lock).unwrap();
    let report = shutdown.await.unwrap();
    assert!(report.graceful, "{report:?}");
    assert!(
        cache.load().servers.contains_key("fx"),
        "no cache entry for fx after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_server_connects_at_start() {
    let h = start(json!({"mcpServers": {"e": {"command": fixture(), "lifecycle": "eager"}}})).await;
    wait_until("eager server ready", Duration::from_secs(20), || {
        state_of(&h.rt, "e") == ServerState::Ready
    })
    .await;
    // The router publishes the discovered catalog right after (its own mailbox).
    wait_until("eager server's tools in the catalog", Duration::from_secs(5), || {
        h.rt.list_tools(Some("e")).unwrap().iter().any(|t| t.name == "e_echo")
    })
    .await;
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_one_server_run_concurrently_and_status_stays_responsive() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let config = json!({"mcpServers": {"fx": stdio(&["--event-log", log.to_str().unwrap()])}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.connect("fx").await.unwrap();

    // A 60 s call in flight...
    let cancel = CancellationToken::new();
    let slow = {
        let h = rt.handle();
        let opts = CallOptions {
            cancel: Some(cancel.clone()),
            ..CallOptions::default()
        };
        tokio::spawn(async move { h.call("fx_slow", args(json!({"ms": 60000})), opts).await })
    };
    wait_until("slow call in flight", Duration::from_secs(10), || {
        rt.status().server("fx").unwrap().in_flight == 1
    })
    .await;
    // ...does not block status or another call to the same server.
    for i in 0..5 {
        let out = rt
            .call(
                "fx_echo",
                args(json!({"text": format!("n{i}")})),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), format!("n{i}"));
    }
    wait_until("only the slow call in flight", Duration::from_secs(10), || {
        rt.status().server("fx").unwrap().in_flight == 1
    })
    .await;
    assert!(!slow.is_finished());
    // Cancelling sends notifications/cancelled to the server.
    cancel.cancel();
    let r = slow.await.unwrap();
    assert!(r.is_err());
    wait_until("cancel notification logged", Duration::from_secs(10), || {
        !events_named(&events(&log), "cancel_notification").is_empty()
    })
    .await;
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolution_resources_errors_and_suggestions() {
    let h = start(json!({"mcpServers": {
        "a": stdio(&[]),
        "b": stdio(&["--no-resources", "--no-prompts"]),
    }}))
    .await;
    let rt = &h.rt;
    rt.connect("a").await.unwrap();
    rt.connect("b").await.unwrap();
    // Original names shared by both servers are ambiguous and list the candidates.
    match rt
        .call("echo", args(json!({"text": "x"})), CallOptions::default())
        .await
    {
        Err(Error::AmbiguousTool { candidates, .. }) => assert_eq!(candidates, ["a_echo", "b_echo"]),
        other => panic!("{other:?}"),
    }
    // Scoped to a server, the original name resolves.
    let opts = CallOptions {
        server: Some("b".into()),
        ..CallOptions::default()
    };
    assert_eq!(
        rt.call("echo", args(json!({"text": "x"})), opts).await.unwrap().server,
        "b"
    );
    // `-`/`_` fuzz and resources as read_ tools.
    let readme = rt
        .catalog()
        .tools()
        .find(|t| t.server == "a" && t.resource_uri.is_some())
        .cloned()
        .unwrap();
    let out = rt.call(&readme.name, None, CallOptions::default()).await.unwrap();
    assert!(!out.content.is_empty());
    assert!(
        rt.catalog()
            .tools()
            .all(|t| !(t.server == "b" && t.resource_uri.is_some()))
    );
    // Typos get suggestions; a tool error is categorized with its text.
    match rt.call("a_ecoh", None, CallOptions::default()).await {
        Err(e @ Error::UnknownTool { .. }) => {
            assert_eq!(e.category(), ErrorCategory::UnknownTool);
            assert!(e.to_string().contains("a_echo"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let r = rt
        .call("a_fail", args(json!({"message": "boom"})), CallOptions::default())
        .await;
    assert_eq!(category(&r), Some(ErrorCategory::ToolError));
    assert!(r.unwrap_err().to_string().contains("boom"));
    // Unknown server.
    let opts = CallOptions {
        server: Some("zzz".into()),
        ..CallOptions::default()
    };
    assert_eq!(
        category(&rt.call("echo", None, opts).await),
        Some(ErrorCategory::Config)
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_close_never_during_a_call() {
    // idleTimeout 0.005 min = 300 ms.
    let h = start(json!({"mcpServers": {"fx": {"command": fixture(), "idleTimeout": 0.005}}})).await;
    let rt = &h.rt;
    let slow = {
        let h = rt.handle();
        tokio::spawn(async move {
            h.call("fx_slow", args(json!({"ms": 1500, "steps": 3})), CallOptions::default())
                .await
        })
    };
    // Far longer than the idle timeout passes while the call runs; the server must stay up.
    let mut events = rt.events();
    let out = slow.await.unwrap().unwrap();
    assert!(out.text().contains("slept 1500 ms"));
    while let Ok(e) = events.try_recv() {
        if let pimcp_actors::RuntimeEvent::State { state, .. } = e {
            assert_ne!(state, ServerState::Draining, "idle close during a call");
        }
    }
    // Once idle, it closes exactly on its timer and is served from metadata.
    wait_until("idle close", Duration::from_secs(10), || {
        state_of(rt, "fx") == ServerState::Cached
    })
    .await;
    assert_eq!(rt.status().server("fx").unwrap().reason.as_deref(), Some("idle"));
    assert!(rt.catalog().get("fx_echo").is_some());
    // The next call reconnects transparently.
    assert_eq!(
        rt.call("fx_echo", args(json!({"text": "again"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "again"
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_refuses_and_enable_restores() {
    let h = start(json!({"mcpServers": {"fx": stdio(&[]), "off": {"command": fixture(), "disabled": true}}})).await;
    let rt = &h.rt;
    assert_eq!(state_of(rt, "off"), ServerState::Disabled);
    let opts = CallOptions {
        server: Some("off".into()),
        ..CallOptions::default()
    };
    assert_eq!(
        category(&rt.call("echo", None, opts).await),
        Some(ErrorCategory::Config)
    );
    rt.connect("fx").await.unwrap();
    rt.disable("fx").await.unwrap();
    assert_eq!(state_of(rt, "fx"), ServerState::Disabled);
    let r = rt
        .call("fx_echo", args(json!({"text": "x"})), CallOptions::default())
        .await;
    assert!(matches!(r, Err(Error::Disabled { .. })), "{r:?}");
    rt.enable("fx").await.unwrap();
    assert_eq!(
        rt.call("fx_echo", args(json!({"text": "x"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "x"
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfigure_keeps_unchanged_restarts_changed_and_stops_removed() {
    let h = start(json!({"mcpServers": {"keep": stdio(&[]), "change": stdio(&[]), "gone": stdio(&[])}})).await;
    let rt = &h.rt;
    for s in ["keep", "change", "gone"] {
        rt.connect(s).await.unwrap();
    }
    let keep_pid = rt.status().server("keep").unwrap().pid.unwrap();
    let change_pid = rt.status().server("change").unwrap().pid.unwrap();
    let gone_pid = rt.status().server("gone").unwrap().pid.unwrap();
    let new = load(
        &json!({"mcpServers": {"keep": stdio(&[]), "change": stdio(&["--name", "changed"]), "added": stdio(&[])}}),
        h.dir.path(),
    );
    rt.reconfigure(new).await.unwrap();
    // Removed: gone from status and catalog, process stopped.
    wait_until("removed server stopped", Duration::from_secs(10), || {
        !pid_alive(gone_pid)
    })
    .await;
    assert!(rt.status().server("gone").is_none());
    wait_until("catalog without removed server", Duration::from_secs(5), || {
        rt.catalog().server("gone").is_none()
    })
    .await;
    // Changed: restarted (old process gone); unchanged: same process.
    wait_until("changed server's old process stopped", Duration::from_secs(10), || {
        !pid_alive(change_pid)
    })
    .await;
    assert_eq!(rt.status().server("keep").unwrap().pid, Some(keep_pid));
    assert_eq!(state_of(rt, "keep"), ServerState::Ready);
    assert_eq!(
        rt.call("change_echo", args(json!({"text": "c"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "c"
    );
    assert_eq!(
        rt.call("added_echo", args(json!({"text": "a"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "a"
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_reads_every_page_and_warm_cache_connects_servers_without_metadata() {
    let h = start(json!({
        "settings": {"warmCache": true},
        "mcpServers": {"many": stdio(&["--tools", "120", "--page-size", "7"])}
    }))
    .await;
    let rt = &h.rt;
    // warmCache: a lazy server with no metadata connects at start to fill the cache.
    wait_until("warm-cache connect and discovery", Duration::from_secs(20), || {
        rt.catalog().server("many").unwrap().source == Some(MetadataSource::Live)
    })
    .await;
    assert_eq!(state_of(rt, "many"), ServerState::Ready);
    let tools = rt.list_tools(Some("many")).unwrap();
    let resources = tools.iter().filter(|t| t.resource_uri.is_some()).count();
    assert_eq!(tools.len() - resources, 14 + 120, "every tools/list page was read");
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_extends_the_call_deadline_up_to_the_total_cap() {
    // toolTimeout 1 s: a 3 s call that reports progress every 0.5 s completes...
    let h = start(json!({"mcpServers": {"fx": {"command": fixture(), "toolTimeout": 1}}})).await;
    let rt = &h.rt;
    let out = rt
        .call("fx_slow", args(json!({"ms": 3000, "steps": 6})), CallOptions::default())
        .await
        .unwrap();
    assert!(out.text().contains("slept 3000 ms"), "{}", out.text());
    // ...but not past the total cap, and a silent call times out.
    let opts = CallOptions {
        max_total: Some(Duration::from_millis(1500)),
        ..CallOptions::default()
    };
    let e = rt
        .call("fx_slow", args(json!({"ms": 3000, "steps": 6})), opts)
        .await
        .unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Timeout, "{e}");
    let e = rt
        .call("fx_slow", args(json!({"ms": 3000})), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Timeout, "{e}");
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_asks_receives_the_servers_progress() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"fx": stdio(&[])}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    // Lazy first call (through the server actor), then a call on the ready server's lane.
    for round in 1..=2 {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let opts = CallOptions {
            progress: Some(tx),
            ..CallOptions::default()
        };
        let out = rt
            .call("fx_slow", args(json!({"ms": 300, "steps": 3})), opts)
            .await
            .unwrap();
        assert_eq!(out.text(), "slept 300 ms in 3 steps");
        // The route is gone with the call: the channel closes once the reports are read.
        let mut seen = Vec::new();
        while let Some(p) = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap() {
            seen.push(p);
        }
        let steps: Vec<f64> = seen.iter().map(|p| p.progress).collect();
        // The last report races the answer (rmcp handles notifications on spawned tasks).
        assert!(
            steps == [0.0, 1.0, 2.0] || steps == [0.0, 1.0, 2.0, 3.0],
            "round {round}: {steps:?}"
        );
        assert!(seen.iter().all(|p| p.total == Some(3.0)), "round {round}: {seen:?}");
    }
    rt.shutdown(Duration::from_secs(5)).await;
}

/// Tasks (the 2026-07-28 tasks extension): a `tools/call` answered with a task handle is followed with `tasks/get`
/// at the server's interval, its status messages arrive as progress, and its result is the call's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answered_with_a_task_is_followed_to_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fx.log");
    let config = json!({"mcpServers": {"fx": stdio(&["--task-calls", "--event-log", log.to_str().unwrap()])}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let opts = CallOptions {
        progress: Some(tx),
        ..CallOptions::default()
    };
    let out = rt.call("fx_slow", args(json!({"ms": 400})), opts).await.unwrap();
    assert_eq!(out.text(), "slept 400 ms as a task");
    let mut messages = Vec::new();
    while let Ok(p) = rx.try_recv() {
        messages.extend(p.message);
    }
    assert!(messages.contains(&"halfway".to_owned()), "{messages:?}");
    let events = mcp_fixture::read_event_log(&log);
    assert!(
        events.iter().filter(|e| e["event"] == "task-get").count() >= 2,
        "{events:#?}"
    );
    assert_eq!(events.iter().filter(|e| e["event"] == "task-done").count(), 1);
    rt.shutdown(Duration::from_secs(10)).await;
}

/// Cancelling a call that runs as a task cancels the task upstream (`tasks/cancel`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_task_call_cancels_the_task_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fx.log");
    let config = json!({"mcpServers": {"fx": stdio(&["--task-calls", "--event-log", log.to_str().unwrap()])}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let opts = CallOptions {
        cancel: Some(cancel.clone()),
        ..CallOptions::default()
    };
    let handle = rt.handle();
    let call = tokio::spawn(async move { handle.call("fx_slow", args(json!({"ms": 600_000})), opts).await });
    let events = || mcp_fixture::read_event_log(&log);
    // Once pimcp polls the task it follows it (a cancel before the handle arrives cancels the request instead).
    wait_until("pimcp to follow the task", Duration::from_secs(20), || {
        events().iter().any(|e| e["event"] == "task-get")
    })
    .await;
    cancel.cancel();
    let e = call.await.unwrap().unwrap_err();
    assert!(e.to_string().contains("cancelled"), "{e}");
    wait_until("the task to be cancelled upstream", Duration::from_secs(20), || {
        events().iter().any(|e| e["event"] == "task-cancelled")
    })
    .await;
    assert!(events().iter().any(|e| e["event"] == "task-cancel"));
    rt.shutdown(Duration::from_secs(10)).await;
}

/// A task still running when the call's time is up is left running and reported with its id; following it later
/// returns its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_the_call_timeout_is_reported_and_can_be_followed() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"fx": stdio(&["--task-calls"])}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    let opts = CallOptions {
        timeout: Some(Duration::from_millis(300)),
        ..CallOptions::default()
    };
    let e = rt.call("fx_slow", args(json!({"ms": 2000})), opts).await.unwrap_err();
    let pimcp_actors::Error::TaskPending { task_id, .. } = &e else {
        panic!("expected a pending task, got {e}");
    };
    assert_eq!(e.category(), pimcp_actors::ErrorCategory::Timeout);
    let out = rt
        .handle()
        .follow_task(
            "fx_slow",
            task_id,
            CallOptions {
                timeout: Some(Duration::from_secs(30)),
                ..CallOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "slept 2000 ms as a task");
    rt.shutdown(Duration::from_secs(10)).await;
}
