//! `RuntimeHandle::warm`: a lazy server that has not started starts connecting at once and nobody waits for it;
//! a server that is running, disabled or in restart backoff is left as it is; an unknown name is an error.
//!
//! The actor handles its messages in order, so a later control request to the same server (`read_resource`, a
//! call) shows what the warm did: it is answered only after the warm was handled.

use std::time::Duration;

use pimcp_actors::{CallOptions, Error, ServerState, Tuning};
use serde_json::json;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_starts_a_lazy_server_without_waiting_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("slow.pid");
    let log = dir.path().join("fx.jsonl");
    // `slow` never answers initialize: waiting for its connection would never end (within the test).
    let config = json!({"mcpServers": {
        "slow": stdio(&["--hang-at-start", "--pid-file", pid_file.to_str().unwrap()]),
        "fx": stdio(&["--event-log", log.to_str().unwrap()]),
    }});
    let rt = start_in(dir.path(), &config, tuning()).await;
    assert_eq!(state_of(&rt, "slow"), ServerState::Cached);
    assert!(!pid_file.exists(), "a lazy server must not start before use");

    rt.warm("slow").unwrap();
    wait_until("the warmed server's process", Duration::from_secs(10), || {
        pid_file.exists()
    })
    .await;
    assert_eq!(state_of(&rt, "slow"), ServerState::Connecting);

    // A healthy lazy server gets ready with no call at all, and the first call uses that connection.
    rt.warm("fx").unwrap();
    wait_until("fx ready without a call", Duration::from_secs(20), || {
        state_of(&rt, "fx") == ServerState::Ready
    })
    .await;
    assert!(events_named(&events(&log), "call").is_empty());
    // Warming a ready server does nothing either.
    rt.warm("fx").unwrap();
    let out = rt
        .call("fx_echo", args(json!({"text": "warm"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.text(), "warm");
    assert_eq!(
        events_named(&events(&log), "start").len(),
        1,
        "one process for warm and call"
    );
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_never_starts_a_server_in_backoff_or_disabled() {
    let t = Tuning {
        connect_backoff_min: Duration::from_secs(30),
        connect_backoff_max: Duration::from_secs(60),
        ..tuning()
    };
    let dir = tempfile::tempdir().unwrap();
    let off_pid = dir.path().join("off.pid");
    let config = json!({"mcpServers": {
        "dies": stdio(&["--exit-at-start"]),
        "off": {"command": fixture(), "args": ["--pid-file", off_pid.to_str().unwrap()], "disabled": true},
    }});
    let rt = start_in(dir.path(), &config, t).await;

    let e = rt
        .call("dies_echo", args(json!({"text": "x"})), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Connection { .. }), "{e:?}");
    assert!(matches!(state_of(&rt, "dies"), ServerState::Backoff { attempt: 1, .. }));

    rt.warm("dies").unwrap();
    // Handled after the warm: still refused by the same backoff, not a second failed attempt.
    let e = rt.read_resource("dies", "fixture://readme").await.unwrap_err();
    assert!(matches!(e, Error::Backoff { .. }), "{e:?}");
    let st = rt.status();
    let dies = st.server("dies").unwrap();
    assert!(
        matches!(dies.state, ServerState::Backoff { attempt: 1, .. }),
        "{dies:?}"
    );
    assert_eq!(dies.failures, 1, "{dies:?}");

    rt.warm("off").unwrap();
    let e = rt.read_resource("off", "fixture://readme").await.unwrap_err();
    assert!(matches!(e, Error::Disabled { .. }), "{e:?}");
    assert_eq!(state_of(&rt, "off"), ServerState::Disabled);
    assert!(!off_pid.exists(), "a disabled server was started");
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_names_an_unknown_server() {
    let h = start(json!({"mcpServers": {"fx": stdio(&[])}})).await;
    let e = h.rt.warm("nope").unwrap_err();
    assert!(
        matches!(&e, Error::UnknownServer { server } if server == "nope"),
        "{e:?}"
    );
    assert!(e.to_string().contains("nope"), "{e}");
    assert_eq!(state_of(&h.rt, "fx"), ServerState::Cached);
    h.rt.shutdown(Duration::from_secs(10)).await;
}
