//! The standby guardian shim at the transport level: a server started through it gets exactly what a freshly
//! spawned shim would give it (arguments, working directory, environment), an unused one dies when dropped, and a
//! dead one falls back to the normal spawn.

use std::time::Duration;

use pimcp_config::Transport;

use super::support::*;

/// The command line of a live process, NUL-separated arguments joined with spaces.
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Whether `pid` runs as a standby shim. Polled: `posix_spawn` returns once the child has left our memory, which
/// is before exec has laid out its new command line (until then `/proc/<pid>/cmdline` reads empty).
fn is_standby(pid: u32) -> bool {
    cmdline(pid).contains(pimcp_actors::process::STANDBY_ARG)
}

#[tokio::test]
async fn a_server_started_through_the_standby_gets_its_args_cwd_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().canonicalize().unwrap();
    let sub = project.join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());

    let mut t = stdio_transport(&["--name", "standby-fx"]);
    t.env.insert("PIMCP_TEST_VAR".into(), plain("12345"));
    t.cwd = Some(sub.clone());
    t.inherit_env = false;
    let spec = spec(server("standby", Transport::Stdio(t)), &project);
    let standby = spec.process.standby.clone();
    let standby_pid = standby.prepare(&shim()).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || is_standby(standby_pid)).await,
        "{standby_pid} is not a standby shim: {}",
        cmdline(standby_pid)
    );
    assert_eq!(standby.waiting_pid(), Some(standby_pid));

    let conn = pimcp_actors::transport::connect(spec, ()).await.unwrap();
    assert_eq!(standby.waiting_pid(), None, "the standby was taken");
    let me = whoami(&conn, Some("PIMCP_TEST_VAR")).await;
    assert_eq!(me["ppid"].as_u64(), Some(u64::from(standby_pid)), "{me}");
    assert_eq!(me["server"], "standby-fx", "the arguments reached the server");
    assert_eq!(me["cwd"], sub.to_str().unwrap());
    assert_eq!(
        (me["env"]["set"].as_bool(), me["env"]["length"].as_u64()),
        (Some(true), Some(5))
    );
    // `inheritEnv: false`: the minimal environment, not ours; and never the shim's own variable.
    assert_eq!(whoami(&conn, Some("CARGO_MANIFEST_DIR")).await["env"]["set"], false);
    assert_eq!(whoami(&conn, Some("PATH")).await["env"]["set"], true);
    assert_eq!(whoami(&conn, Some("PIMCP_SHIM_GRACE_MS")).await["env"]["set"], false);
    let server_pid = u32::try_from(me["pid"].as_u64().unwrap()).unwrap();
    conn.close(Duration::from_secs(2)).await;
    assert!(
        eventually(Duration::from_secs(10), || is_dead(server_pid) && is_dead(standby_pid)).await,
        "the server and its standby shim outlived the connection"
    );
}

#[tokio::test]
async fn an_inheriting_server_gets_our_environment_through_the_standby() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(stdio_server("standby-inherit", &[]), dir.path());
    let standby_pid = spec.process.standby.prepare(&shim()).unwrap();
    let conn = pimcp_actors::transport::connect(spec, ()).await.unwrap();
    let me = whoami(&conn, Some("CARGO_MANIFEST_DIR")).await;
    assert_eq!(me["ppid"].as_u64(), Some(u64::from(standby_pid)), "{me}");
    assert_eq!(me["env"]["set"], true);
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn an_unused_standby_dies_when_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(stdio_server("standby-unused", &[]), dir.path());
    let slot = spec.process.standby.clone();
    let pid = slot.prepare(&shim()).unwrap();
    assert!(!is_dead(pid));
    // A second prepare keeps the one that waits.
    assert_eq!(slot.prepare(&shim()).unwrap(), pid);
    slot.clear();
    assert_eq!(slot.waiting_pid(), None);
    assert!(
        eventually(Duration::from_secs(10), || is_dead(pid)).await,
        "the dropped standby shim {pid} is still running"
    );
}

#[tokio::test]
async fn a_dead_standby_falls_back_to_a_normal_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(stdio_server("standby-dead", &[]), dir.path());
    let slot = spec.process.standby.clone();
    let standby_pid = slot.prepare(&shim()).unwrap();
    kill_pid(standby_pid);
    assert!(eventually(Duration::from_secs(10), || is_dead(standby_pid)).await);
    let conn = pimcp_actors::transport::connect(spec, ()).await.unwrap();
    let me = whoami(&conn, None).await;
    let ppid = u32::try_from(me["ppid"].as_u64().unwrap()).unwrap();
    assert_ne!(ppid, standby_pid);
    assert!(
        cmdline(ppid).contains(pimcp_actors::process::SHIM_ARG),
        "{}",
        cmdline(ppid)
    );
    conn.close(Duration::from_secs(2)).await;
}

/// Threads of this process named `pimcp-standby`.
fn standby_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "pimcp-standby"))
                .count()
        })
        .unwrap_or(0)
}

/// Held by the tests that count `pimcp-standby` threads, so that one does not see the other's thread.
static STANDBY_THREAD_COUNT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_background_standby_keeps_its_thread_until_the_slot_is_gone() {
    let _counting = STANDBY_THREAD_COUNT.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(stdio_server("standby-thread", &[]), dir.path());
    let slot = spec.process.standby.clone();
    let before = standby_threads();
    slot.prepare_in_background(shim());
    slot.prepare_in_background(shim());
    assert!(
        eventually(Duration::from_secs(10), || slot.waiting_pid().is_some()).await,
        "no standby from the background thread"
    );
    let standby_pid = slot.waiting_pid().unwrap();
    assert_eq!(standby_threads(), before + 1, "one thread for two calls");

    // The server started through it keeps the thread (the shim's parent-death signal is tied to it).
    let conn = pimcp_actors::transport::connect(spec, ()).await.unwrap();
    assert_eq!(whoami(&conn, None).await["ppid"].as_u64(), Some(u64::from(standby_pid)));
    assert_eq!(standby_threads(), before + 1);
    conn.close(Duration::from_secs(2)).await;
    drop(slot);
    assert!(
        eventually(Duration::from_secs(10), || standby_threads() == before).await,
        "the standby thread outlived its slot"
    );
}

#[tokio::test]
async fn a_first_start_racing_the_background_standby_waits_for_it() {
    let _counting = STANDBY_THREAD_COUNT.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(stdio_server("standby-race", &[]), dir.path());
    let slot = spec.process.standby.clone();
    // The connect starts at once, while the background thread is still spawning the standby: it must take that
    // standby, not spawn a second shim and leave the standby idle.
    slot.prepare_in_background(shim());
    let conn = pimcp_actors::transport::connect(spec, ()).await.unwrap();
    let ppid = whoami(&conn, None).await["ppid"].as_u64().unwrap();
    assert_eq!(
        slot.waiting_pid(),
        None,
        "a standby was left idle beside the server's shim"
    );
    assert!(
        is_standby(u32::try_from(ppid).unwrap()),
        "the server's shim {ppid} was not the standby"
    );
    conn.close(Duration::from_secs(2)).await;
}

#[test]
fn a_background_standby_asked_outside_a_runtime_is_still_prepared_by_a_later_call_inside_one() {
    let _counting = STANDBY_THREAD_COUNT.blocking_lock();
    let slot = pimcp_actors::process::StandbySlot::default();
    let before = standby_threads();
    // No tokio runtime here: nothing can be prepared, and nothing may be claimed either.
    slot.prepare_in_background(shim());
    assert_eq!(slot.waiting_pid(), None);
    assert_eq!(standby_threads(), before, "no thread without a runtime");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        slot.prepare_in_background(shim());
        assert!(
            eventually(Duration::from_secs(10), || slot.waiting_pid().is_some()).await,
            "the call inside a runtime prepared no standby after one outside a runtime"
        );
    });
    let standby_pid = slot.waiting_pid().unwrap();
    rt.block_on(async {
        assert!(
            eventually(Duration::from_secs(10), || is_standby(standby_pid)).await,
            "{standby_pid} is not a standby shim: {}",
            cmdline(standby_pid)
        );
    });
    drop(slot);
    rt.block_on(async {
        assert!(
            eventually(Duration::from_secs(10), || is_dead(standby_pid)
                && standby_threads() == before)
            .await,
            "the standby shim {standby_pid} or its thread outlived the slot"
        );
    });
}
