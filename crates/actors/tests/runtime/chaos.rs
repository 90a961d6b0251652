//! The chaos suite over stdio: every scenario ends with each call answered (result or categorized error), no
//! process left behind, and the server usable again after recovery.

use std::time::{Duration, Instant};

use pimcp_actors::{CallOptions, Error, ErrorCategory, RuntimeEvent, ServerState, Tuning};
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_exiting_at_start_goes_to_backoff_and_calls_fail_fast() {
    let t = Tuning {
        connect_backoff_min: Duration::from_secs(30),
        connect_backoff_max: Duration::from_secs(60),
        ..tuning()
    };
    let h = start_with(json!({"mcpServers": {"dies": stdio(&["--exit-at-start"])}}), t).await;
    let rt = &h.rt;
    let r = rt
        .call("dies_echo", args(json!({"text": "x"})), CallOptions::default())
        .await;
    let e = r.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Connection, "{e}");
    assert!(e.to_string().contains("exit code 2"), "{e}");
    // The transport's error is kept as the cause, not only as text.
    let cause = std::error::Error::source(&e).expect("the connect failure as the cause");
    assert!(
        matches!(
            cause.downcast_ref::<pimcp_actors::ConnectError>(),
            Some(pimcp_actors::ConnectError::ExitedAtStart { code: Some(2), .. })
        ),
        "{cause:?}"
    );
    let st = rt.status();
    let s = st.server("dies").unwrap();
    assert!(matches!(s.state, ServerState::Backoff { attempt: 1, .. }), "{s:?}");
    assert_eq!(s.last_error_category, Some(ErrorCategory::Connection));
    // While in backoff a call fails at once and says when the next attempt is.
    let e = rt
        .call("dies_echo", args(json!({"text": "x"})), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Backoff { .. }), "{e:?}");
    assert!(e.to_string().contains("next connect attempt in"), "{e}");
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_hanging_at_start_hits_the_startup_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("hang.pid");
    let config = json!({"mcpServers": {"hang": {
        "command": fixture(), "args": ["--hang-at-start", "--pid-file", pid_file.to_str().unwrap()], "startupTimeout": 1
    }}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    let e = rt.call("hang_echo", None, CallOptions::default()).await.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Connection);
    assert!(e.to_string().contains("did not finish its handshake"), "{e}");
    // The hung child was killed.
    let pid = read_pid(&pid_file).unwrap();
    wait_until("hung child gone", Duration::from_secs(10), || !pid_alive(pid)).await;
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_call_fails_fast_is_not_replayed_and_next_call_respawns() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let config = json!({"mcpServers": {"fx": {
        "command": fixture(), "args": ["--event-log", log.to_str().unwrap()], "toolTimeout": 120
    }}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.connect("fx").await.unwrap();
    let first_pid = rt.status().server("fx").unwrap().pid.unwrap();
    // `crash` is not idempotent: it must fail with `connection` (not wait for the 120 s timeout) and never rerun.
    let e = rt.call("fx_crash", None, CallOptions::default()).await.unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Connection, "{e}");
    let ev = events(&log);
    let crash_calls = ev
        .iter()
        .filter(|e| e["event"] == "call" && e["name"] == "crash")
        .count();
    assert_eq!(crash_calls, 1, "a non-idempotent call was replayed: {ev:?}");
    // The next call respawns the server.
    let out = rt
        .call("fx_echo", args(json!({"text": "back"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "back");
    let second_pid = rt.status().server("fx").unwrap().pid.unwrap();
    assert_ne!(first_pid, second_pid);
    assert!(!pid_alive(first_pid));
    let ev = events(&log);
    assert_eq!(
        ev.iter()
            .filter(|e| e["event"] == "call" && e["name"] == "crash")
            .count(),
        1
    );
    assert_eq!(events_named(&ev, "start").len(), 2);
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_mid_call_times_out_cancels_on_the_wire_and_traffic_keeps_flowing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let config = json!({"mcpServers": {
        "fx": {"command": fixture(), "args": ["--event-log", log.to_str().unwrap()], "toolTimeout": 1},
        "other": stdio(&[]),
    }});
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.connect("fx").await.unwrap();
    rt.connect("other").await.unwrap();
    let hung = {
        let h = rt.handle();
        tokio::spawn(async move {
            h.call("fx_slow", args(json!({"ms": 30000})), CallOptions::default())
                .await
        })
    };
    // Calls to the same server and to another one keep flowing while it hangs.
    for i in 0..5 {
        let a = rt.call(
            "fx_echo",
            args(json!({"text": format!("a{i}")})),
            CallOptions::default(),
        );
        let b = rt.call(
            "other_echo",
            args(json!({"text": format!("b{i}")})),
            CallOptions::default(),
        );
        let (a, b) = tokio::join!(a, b);
        assert_eq!(a.unwrap().text(), format!("a{i}"));
        assert_eq!(b.unwrap().text(), format!("b{i}"));
    }
    let e = hung.await.unwrap().unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Timeout, "{e}");
    // The timeout was sent on the wire and the server honoured it.
    wait_until("cancellation reached the server", Duration::from_secs(10), || {
        let ev = events(&log);
        !events_named(&ev, "cancel_notification").is_empty() && !events_named(&ev, "cancelled").is_empty()
    })
    .await;
    // Still usable, same process.
    assert_eq!(
        rt.call("fx_echo", args(json!({"text": "ok"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "ok"
    );
    assert_eq!(events_named(&events(&log), "start").len(), 1);
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_three_under_a_hundred_concurrent_calls_answers_every_call() {
    let t = Tuning {
        breaker_failures: 1000,
        ..tuning()
    };
    let h = start_with(json!({"mcpServers": {"fx": stdio(&["--crash-after", "3"])}}), t).await;
    let rt = &h.rt;
    let calls = (0..100).map(|i| {
        let h = rt.handle();
        async move {
            h.call(
                "fx_echo",
                args(json!({"text": format!("c{i}")})),
                CallOptions::default(),
            )
            .await
        }
    });
    let results = tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(calls))
        .await
        .expect("deadlock: not every call was answered");
    assert_eq!(results.len(), 100);
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(out) => assert_eq!(out.text(), format!("c{i}")),
            Err(e) => assert!(
                matches!(e.category(), ErrorCategory::Connection),
                "call {i} ended with an unexpected error: {e}"
            ),
        }
    }
    // Still usable afterwards: a fresh process answers its first three calls. (The burst's last process may
    // already have answered some of its three, so start a fresh one.)
    rt.reconnect("fx").await.unwrap();
    for i in 0..3 {
        let out = rt
            .call(
                "fx_echo",
                args(json!({"text": format!("after{i}")})),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), format!("after{i}"));
    }
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_flood_does_not_stall_the_server() {
    let h = start(json!({"mcpServers": {"loud": stdio(&["--stderr-flood"])}})).await;
    for i in 0..30 {
        let out =
            h.rt.call(
                "loud_echo",
                args(json!({"text": format!("{i}")})),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), format!("{i}"));
    }
    assert_eq!(state_of(&h.rt, "loud"), ServerState::Ready);
    // The (bounded) stderr tail is kept: a crash reports its last line.
    let _ = h.rt.call("loud_crash", None, CallOptions::default()).await.unwrap_err();
    wait_until("crash noticed", Duration::from_secs(10), || {
        state_of(&h.rt, "loud") == ServerState::Cached
    })
    .await;
    let reason = h.rt.status().server("loud").unwrap().reason.clone().unwrap_or_default();
    assert!(reason.contains("stderr:"), "{reason}");
    assert!(
        reason.len() < 1024,
        "reason should carry one line, not the flood: {} bytes",
        reason.len()
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_arrives_whole() {
    let h = start(json!({"mcpServers": {"big": stdio(&[])}})).await;
    let bytes = 8 * 1024 * 1024;
    let out =
        h.rt.call("big_huge", args(json!({"bytes": bytes})), CallOptions::default())
            .await
            .unwrap();
    assert_eq!(out.text().len(), bytes);
    assert_eq!(
        h.rt.call("big_echo", args(json!({"text": "after"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "after"
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_burst_is_debounced_and_catalog_correct() {
    // Initialize era: every notification reaches the ClientHandler (no listen stream coalescing them).
    let h = start(json!({"mcpServers": {"fx": {"command": fixture(), "protocol": "legacy"}}})).await;
    let rt = &h.rt;
    rt.connect("fx").await.unwrap();
    let mut events = rt.events();
    let adds = (0..40).map(|i| {
        let h = rt.handle();
        async move {
            h.call(
                "fx_add_tool",
                args(json!({"name": format!("burst_{i}")})),
                CallOptions::default(),
            )
            .await
        }
    });
    for r in futures::future::join_all(adds).await {
        r.unwrap();
    }
    let present = || {
        (0..40)
            .filter(|i| rt.catalog().get(&format!("fx_burst_{i}")).is_some())
            .count()
    };
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        while present() < 40 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "only {} of 40 new tools reached the catalog; catalog has {} tools",
        present(),
        rt.catalog().tools().count()
    );
    let mut refreshes = 0;
    while let Ok(e) = events.try_recv() {
        if let RuntimeEvent::CatalogChanged { servers, .. } = e
            && servers == ["fx"]
        {
            refreshes += 1;
        }
    }
    assert!(
        (1..40).contains(&refreshes),
        "40 notifications gave {refreshes} refreshes"
    );
    // A removal shows up too, and the new tools are callable.
    rt.call(
        "fx_remove_tool",
        args(json!({"name": "burst_0"})),
        CallOptions::default(),
    )
    .await
    .unwrap();
    wait_until("removed tool gone", Duration::from_secs(10), || {
        rt.catalog().get("fx_burst_0").is_none()
    })
    .await;
    let out = rt.call("fx_burst_1", None, CallOptions::default()).await.unwrap();
    assert!(out.text().contains("burst_1"));
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_storm_keeps_the_server_usable() {
    let h = start(json!({"mcpServers": {"storm": stdio(&["--list-changed-every", "2"])}})).await;
    let rt = &h.rt;
    rt.connect("storm").await.unwrap();
    // Notifications on the 2026-07-28 listen stream lead to refreshes (catalog versions move on).
    let v0 = rt.catalog().version();
    wait_until("refreshes from the listen stream", Duration::from_secs(10), || {
        rt.catalog().version() >= v0 + 3
    })
    .await;
    for i in 0..10 {
        let out = rt
            .call(
                "storm_echo",
                args(json!({"text": format!("{i}")})),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.text(), format!("{i}"));
    }
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_loop_opens_the_breaker_and_connect_closes_it() {
    let t = Tuning {
        connect_backoff_min: Duration::from_millis(10),
        connect_backoff_max: Duration::from_millis(40),
        ..tuning()
    };
    let h = start_with(
        json!({"mcpServers": {"loop": {"command": fixture(), "args": ["--exit-at-start"], "lifecycle": "keep-alive"}}}),
        t,
    )
    .await;
    let rt = &h.rt;
    wait_until("breaker open", Duration::from_secs(30), || {
        matches!(state_of(rt, "loop"), ServerState::Failed { .. })
    })
    .await;
    let st = rt.status();
    let s = st.server("loop").unwrap();
    assert!(s.reason.as_deref().unwrap_or("").contains("crash loop"), "{s:?}");
    assert!(s.failures >= 5, "{s:?}");
    // While open, calls fail at once with the reason.
    let e = rt.call("loop_echo", None, CallOptions::default()).await.unwrap_err();
    assert!(matches!(e, Error::CrashLoop { .. }), "{e:?}");
    assert_eq!(e.category(), ErrorCategory::Connection);
    // `connect` closes the breaker and really tries again (and fails like the server does).
    let e = rt.connect("loop").await.unwrap_err();
    assert!(matches!(e, Error::Connection { .. }), "breaker still open: {e:?}");
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_server_comes_back_by_itself_after_a_crash() {
    let h = start(json!({"mcpServers": {"ka": {"command": fixture(), "lifecycle": "keep-alive"}}})).await;
    let rt = &h.rt;
    wait_until("keep-alive ready", Duration::from_secs(20), || {
        state_of(rt, "ka") == ServerState::Ready
    })
    .await;
    let pid = rt.status().server("ka").unwrap().pid.unwrap();
    let _ = rt.call("ka_crash", None, CallOptions::default()).await.unwrap_err();
    wait_until("respawned without a user call", Duration::from_secs(20), || {
        let st = rt.status();
        let s = st.server("ka").unwrap();
        s.state == ServerState::Ready && s.pid.is_some_and(|p| p != pid)
    })
    .await;
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_keep_alive_waits_for_first_use_then_comes_back_by_itself_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lka.log");
    let config = json!({"mcpServers": {"lka": {
        "command": fixture(),
        "args": ["--event-log", log.to_str().unwrap()],
        "lifecycle": "lazy-keep-alive",
    }}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    // Lazy: nothing runs until the first use.
    assert_eq!(state_of(&rt, "lka"), ServerState::Cached);
    assert!(!log.exists() || mcp_fixture::read_event_log(&log).is_empty());
    let out = rt
        .call("lka_echo", args(json!({"text": "first use"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "first use");
    let pid = rt.status().server("lka").unwrap().pid.unwrap();
    // Kept alive from then on: a crash is repaired without a user call.
    let _ = rt.call("lka_crash", None, CallOptions::default()).await.unwrap_err();
    wait_until("respawned without a user call", Duration::from_secs(20), || {
        let st = rt.status();
        let s = st.server("lka").unwrap();
        s.state == ServerState::Ready && s.pid.is_some_and(|p| p != pid)
    })
    .await;
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_twenty_servers_and_calls_in_flight_is_bounded_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = serde_json::Map::new();
    for i in 0..20 {
        let pid = dir.path().join(format!("s{i}.pid"));
        let gc = dir.path().join(format!("s{i}.gc"));
        // Half of them ignore SIGTERM and stdin EOF: only the SIGKILL escalation ends them.
        let mut flags = vec![
            "--pid-file",
            pid.to_str().unwrap(),
            "--spawn-grandchild",
            gc.to_str().unwrap(),
        ];
        if i % 2 == 0 {
            flags.push("--ignore-sigterm");
        }
        servers.insert(
            format!("s{i}"),
            json!({"command": fixture(), "args": flags, "lifecycle": "eager"}),
        );
    }
    let rt = start_in(dir.path(), &json!({"mcpServers": servers}), tuning()).await;
    wait_until("all 20 ready", Duration::from_secs(60), || {
        rt.status().servers.iter().all(|s| s.state == ServerState::Ready)
    })
    .await;
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let h = rt.handle();
            tokio::spawn(async move {
                h.call(
                    &format!("s{i}_slow"),
                    args(json!({"ms": 60000})),
                    CallOptions::default(),
                )
                .await
            })
        })
        .collect();
    wait_until("calls in flight", Duration::from_secs(20), || {
        rt.status().servers.iter().all(|s| s.in_flight == 1)
    })
    .await;
    let mut pids = Vec::new();
    for i in 0..20 {
        pids.push(read_pid(&dir.path().join(format!("s{i}.pid"))).unwrap());
        pids.push(read_pid(&dir.path().join(format!("s{i}.gc"))).unwrap());
    }
    let bound = Duration::from_secs(15);
    let t0 = Instant::now();
    let report = rt.shutdown(bound).await;
    assert!(
        t0.elapsed() < bound + Duration::from_secs(1),
        "shutdown overran its bound: {report:?}"
    );
    for c in calls {
        let r = c.await.unwrap();
        assert!(r.is_err(), "an in-flight call must end with an error at shutdown");
    }
    wait_until(
        "every server process and grandchild gone",
        Duration::from_secs(10),
        || pids.iter().all(|p| !pid_alive(*p)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wedged_server_is_torn_down_and_reconnected_by_health_checks() {
    let t = Tuning {
        health_timeout: Duration::from_millis(200),
        close_grace: Duration::from_millis(200),
        ..tuning()
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("stuck.pid");
    let config = json!({"settings": {"healthInterval": 0.2}, "mcpServers": {"stuck": {
        "command": fixture(), "args": ["--pid-file", pid_file.to_str().unwrap()], "lifecycle": "keep-alive"
    }}});
    let rt = start_in(dir.path(), &config, t).await;
    wait_until("keep-alive ready", Duration::from_secs(20), || {
        state_of(&rt, "stuck") == ServerState::Ready
    })
    .await;
    let pid = read_pid(&pid_file).unwrap();
    std::fs::remove_file(&pid_file).unwrap();
    // Freeze the server process: the connection stays open but nothing is answered.
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    wait_until(
        "wedged server replaced by a new process",
        Duration::from_secs(30),
        || state_of(&rt, "stuck") == ServerState::Ready && read_pid(&pid_file).is_some_and(|p| p != pid),
    )
    .await;
    let last = rt
        .status()
        .server("stuck")
        .unwrap()
        .last_error
        .clone()
        .unwrap_or_default();
    assert!(last.contains("wedged"), "{last}");
    wait_until("frozen process killed", Duration::from_secs(10), || !pid_alive(pid)).await;
    let out = rt
        .call("stuck_echo", args(json!({"text": "alive"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "alive");
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_runtime_without_shutdown_kills_its_servers() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("d.pid");
    let config = json!({"mcpServers": {"d": {"command": fixture(), "args": ["--pid-file", pid_file.to_str().unwrap()], "lifecycle": "eager"}}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    wait_until("ready", Duration::from_secs(20), || {
        state_of(&rt, "d") == ServerState::Ready
    })
    .await;
    let pid = read_pid(&pid_file).unwrap();
    drop(rt);
    wait_until("server process gone after drop", Duration::from_secs(10), || {
        !pid_alive(pid)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revalidation_drops_a_connection_that_no_longer_answers() {
    let t = Tuning {
        health_timeout: Duration::from_millis(300),
        close_grace: Duration::from_millis(200),
        ..tuning()
    };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("z.pid");
    let config =
        json!({"mcpServers": {"z": {"command": fixture(), "args": ["--pid-file", pid_file.to_str().unwrap()]}}});
    let rt = start_in(dir.path(), &config, t).await;
    rt.connect("z").await.unwrap();
    let pid = read_pid(&pid_file).unwrap();
    // A healthy connection survives revalidation.
    rt.revalidate();
    assert_eq!(
        rt.call("z_echo", args(json!({"text": "1"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "1"
    );
    assert_eq!(read_pid(&pid_file), Some(pid));
    // A frozen one (as after a sleep that killed the peer) is torn down at once, without waiting for idle.
    assert!(
        std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    // `kill` returns before the process has stopped: SIGSTOP wakes one thread, which then stops the others, and on a
    // loaded machine another thread of the server can still read and answer the revalidation's request meanwhile
    // (seen: the check came back healthy 14 ms after `kill` returned, and the server stayed `ready`).
    wait_until("every thread of the server stopped", Duration::from_secs(10), || {
        all_threads_stopped(pid)
    })
    .await;
    rt.revalidate();
    wait_until("frozen connection dropped", Duration::from_secs(10), || {
        state_of(&rt, "z") == ServerState::Cached
    })
    .await;
    let reason = rt.status().server("z").unwrap().reason.clone().unwrap_or_default();
    assert!(reason.contains("revalidation"), "{reason}");
    wait_until("frozen process killed", Duration::from_secs(10), || !pid_alive(pid)).await;
    // The next call respawns it.
    assert_eq!(
        rt.call("z_echo", args(json!({"text": "2"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "2"
    );
    rt.shutdown(Duration::from_secs(10)).await;
}

/// A revalidation whose check fails while the server has just answered a call (the busy rule: "an answer arrived
/// within the last health_timeout") must check again rather than be dropped, or a server that stopped answering
/// stays `ready`. Deterministic: the fixture holds every ping (`--stall-pings-after 0`) but answers calls, and the
/// call is made once the held ping has reached the server, so its answer falls inside the failed check's window
/// (unless the call alone takes longer than health_timeout: then the first check drops the server and the test
/// passes without exercising the rule, never fails wrongly).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revalidation_dismissed_as_busy_checks_again_and_drops_a_server_that_stopped_answering() {
    let t = Tuning {
        health_timeout: Duration::from_secs(2),
        close_grace: Duration::from_millis(200),
        ..tuning()
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("z.jsonl");
    // The legacy protocol: its health check is a ping (2026-07-28's is tools/list).
    let config = json!({"mcpServers": {"z": {
        "command": fixture(),
        "args": ["--stall-pings-after", "0", "--event-log", log.to_str().unwrap()],
        "protocol": "legacy",
    }}});
    let rt = start_in(dir.path(), &config, t).await;
    rt.connect("z").await.unwrap();
    let pings = || events_named(&events(&log), "ping").len();
    assert_eq!(pings(), 0);

    rt.revalidate();
    wait_until("the revalidation's ping at the server", Duration::from_secs(10), || {
        pings() == 1
    })
    .await;
    // Answered while the ping is held: when that check fails, the server answered within health_timeout.
    assert_eq!(
        rt.call("z_echo", args(json!({"text": "busy"})), CallOptions::default())
            .await
            .unwrap()
            .text(),
        "busy"
    );
    // The dismissed check is followed by another, which fails with no answer inside its window: dropped.
    wait_until("the connection dropped", Duration::from_secs(30), || {
        state_of(&rt, "z") == ServerState::Cached
    })
    .await;
    let reason = rt.status().server("z").unwrap().reason.clone().unwrap_or_default();
    assert!(reason.contains("revalidation"), "{reason}");
    rt.shutdown(Duration::from_secs(10)).await;
}

/// Whether every thread of `pid` is in the stopped state (`T` in `/proc/<pid>/task/<tid>/stat`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            return false;
        };
        // The state follows the command name, which is in parentheses and may itself contain ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if state != Some("T") {
            return false;
        }
        any = true;
    }
    any
}

/// An answer longer than the line limit (`settings.maxMessageBytes`, 16 MiB) fails its call at once, long before the
/// call's timeout, with an error naming the answer's size and the limit; the same connection keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_line_limit_fails_its_call_at_once_and_the_connection_stays_usable() {
    // A timeout far beyond the test's deadline: only the size check can end the call in time.
    let h = start(json!({"mcpServers": {"big": {"command": fixture(), "toolTimeout": 600}}})).await;
    h.rt.connect("big").await.unwrap();
    let pid = h.rt.status().server("big").unwrap().pid;
    let call = h.rt.call(
        "big_huge",
        args(json!({"bytes": 17 * 1024 * 1024})),
        CallOptions::default(),
    );
    let e = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the oversized answer's call waited for its timeout")
        .unwrap_err();
    assert!(!matches!(e, pimcp_actors::Error::Timeout { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("MiB") && text.contains("exceeds the 16 MiB limit of `settings.maxMessageBytes`"),
        "{text}"
    );
    let out =
        h.rt.call("big_echo", args(json!({"text": "after"})), CallOptions::default())
            .await
            .unwrap();
    assert_eq!(out.text(), "after");
    assert_eq!(
        h.rt.status().server("big").unwrap().pid,
        pid,
        "the connection was replaced"
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

/// A stray line on a server's stdout before its `initialize` answer (a response or error whose id matches no
/// request, text that is not JSON) is dropped: the server connects and its tools answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stray_stdout_before_initialize_is_dropped_and_the_server_connects() {
    let kinds = ["unknown-id-response", "unknown-id-error", "garbage"];
    let mut servers = serde_json::Map::new();
    for (i, kind) in kinds.iter().enumerate() {
        servers.insert(format!("s{i}"), stdio(&["--stray-stdout", kind]));
    }
    let h = start(json!({ "mcpServers": servers })).await;
    let mut failed = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        let tool = format!("s{i}_echo");
        let call = h.rt.call(&tool, args(json!({"text": kind})), CallOptions::default());
        match tokio::time::timeout(Duration::from_secs(30), call).await {
            Ok(Ok(out)) => {
                assert_eq!(out.text(), *kind);
                assert_eq!(state_of(&h.rt, &format!("s{i}")), ServerState::Ready, "{kind}");
            }
            Ok(Err(e)) => failed.push(format!("{kind}: {e}")),
            Err(_) => failed.push(format!("{kind}: the call timed out")),
        }
    }
    h.rt.shutdown(Duration::from_secs(10)).await;
    assert!(failed.is_empty(), "servers with a stray line failed: {failed:#?}");
}

/// SIGKILL of a server whose grandchild holds the protocol stdout (so the stream never ends by itself, and the
/// server's stdin has no reader left): the death is noticed, the server restarts, the next call succeeds, and nothing
/// of the old generation is left (the server is reaped, the grandchild killed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_whose_grandchild_holds_stdout_is_noticed_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("fx.pid");
    let gc_file = dir.path().join("fx.gc");
    let config = json!({"mcpServers": {"fx": {"command": fixture(), "args": [
        "--pid-file", pid_file.to_str().unwrap(),
        "--spawn-grandchild", gc_file.to_str().unwrap(),
        "--grandchild-holds-stdout",
    ], "toolTimeout": 60}}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    let mut events = rt.events();
    let out = rt
        .call("fx_echo", args(json!({"text": "one"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "one");
    let server = rt.status().server("fx").unwrap().pid.unwrap();
    assert_eq!(read_pid(&pid_file), Some(server));
    let grandchild = read_pid(&gc_file).unwrap();
    while events.try_recv().is_ok() {}

    let killed = std::process::Command::new("kill")
        .args(["-KILL", &server.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut errors = Vec::new();
    loop {
        let call = rt.call("fx_echo", args(json!({"text": "again"})), CallOptions::default());
        match tokio::time::timeout(Duration::from_secs(10), call).await {
            Ok(Ok(out)) => {
                assert_eq!(out.text(), "again");
                break;
            }
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("timed out".into()),
        }
        assert!(
            Instant::now() < deadline,
            "no call succeeded after the server was killed: {errors:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let st = rt.status();
    let s = st.server("fx").unwrap();
    assert_eq!(s.state, ServerState::Ready);
    assert_ne!(s.pid, Some(server), "the server was not restarted");
    let mut left_ready = false;
    while let Ok(e) = events.try_recv() {
        if let RuntimeEvent::State { server, state, .. } = e
            && server == "fx"
            && state != ServerState::Ready
        {
            left_ready = true;
        }
    }
    assert!(left_ready, "the server never left `ready` after it died");
    wait_until(
        "the old server reaped, its grandchild gone",
        Duration::from_secs(15),
        || [server, grandchild].iter().all(|p| !pid_alive(*p)),
    )
    .await;
    assert!(
        !std::path::Path::new(&format!("/proc/{server}")).exists(),
        "the killed server was never reaped"
    );
    rt.shutdown(Duration::from_secs(10)).await;
}

/// A 2026-07-28 server whose `subscriptions/listen` stream ends while the connection lives: pimcp opens it again
/// (same filter), and a tool list change made meanwhile still reaches the catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_that_ends_is_opened_again_and_changes_still_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fx.log");
    let log_arg = log.to_string_lossy().into_owned();
    let config = json!({"mcpServers": {"fx": {
        "command": fixture(),
        "args": ["--end-listen-after", "150", "--event-log", log_arg],
        "protocol": "2026-07-28",
    }}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    rt.connect("fx").await.unwrap();
    let listens = || {
        mcp_fixture::read_event_log(&log)
            .iter()
            .filter(|e| e["event"] == "listen")
            .count()
    };
    wait_until(
        "the listen stream to be opened three times",
        Duration::from_secs(20),
        || listens() >= 3,
    )
    .await;
    assert!(rt.catalog().get("fx_echo").is_some());
    rt.call("fx_remove_tool", args(json!({"name": "echo"})), CallOptions::default())
        .await
        .unwrap();
    wait_until("the removed tool to leave the catalog", Duration::from_secs(20), || {
        rt.catalog().get("fx_echo").is_none()
    })
    .await;
    let pid = rt.status().server("fx").unwrap().pid;
    assert!(pid.is_some(), "the connection stayed up");
    rt.shutdown(Duration::from_secs(10)).await;
}

/// Resource subscriptions on a 2026-07-28 server (which has no `resources/subscribe`): the URI goes in the
/// `resourceSubscriptions` of the connection's listen stream, whose updates arrive as notices; unsubscribing opens
/// the stream again without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_server_reports_subscribed_resources_on_its_listen_stream() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fx.log");
    let log_arg = log.to_string_lossy().into_owned();
    let config = json!({"mcpServers": {"fx": {
        "command": fixture(), "args": ["--event-log", log_arg], "protocol": "2026-07-28",
    }}});
    let rt = start_in(dir.path(), &config, tuning()).await;
    let mut notices = rt.handle().server_notices();
    rt.connect("fx").await.unwrap();
    rt.handle().subscribe_resource("fx", "fixture://readme").await.unwrap();
    let update = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Ok(pimcp_actors::ServerNotice::ResourceUpdated { server, uri }) = notices.recv().await {
                return (server, uri);
            }
        }
    })
    .await
    .expect("no resources/updated from the listen stream");
    assert_eq!(update, ("fx".to_owned(), "fixture://readme".to_owned()));
    let listens = || -> Vec<serde_json::Value> {
        mcp_fixture::read_event_log(&log)
            .into_iter()
            .filter(|e| e["event"] == "listen")
            .map(|e| e["resources"].clone())
            .collect()
    };
    assert!(listens().contains(&json!(["fixture://readme"])), "{:?}", listens());
    rt.handle()
        .unsubscribe_resource("fx", "fixture://readme")
        .await
        .unwrap();
    wait_until(
        "the stream to be opened without the resource",
        Duration::from_secs(20),
        || listens().last() == Some(&json!([])),
    )
    .await;
    rt.shutdown(Duration::from_secs(10)).await;
}
