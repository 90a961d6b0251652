//! The standby guardian shim in a runtime: started when a lazy stdio server has yet to start, taken by that
//! server's first start (its parent is the standby), not replaced, and gone with the runtime when unused.

use std::time::Duration;

use pimcp_actors::{CallOptions, ServerState};
use serde_json::{Value, json};

use super::support::*;

async fn whoami(rt: &pimcp_actors::Runtime) -> Value {
    let out = rt.call("fx_whoami", None, CallOptions::default()).await.unwrap();
    serde_json::from_str(&out.text()).unwrap()
}

#[tokio::test]
async fn a_lazy_servers_first_start_takes_the_standby_shim() {
    let h = start(json!({ "mcpServers": { "fx": stdio(&[]) } })).await;
    wait_until("a standby shim", Duration::from_secs(10), || {
        h.rt.standby_shim_pid().is_some()
    })
    .await;
    let standby = h.rt.standby_shim_pid().unwrap();
    assert!(pid_alive(standby));

    let me = whoami(&h.rt).await;
    assert_eq!(me["ppid"].as_u64(), Some(u64::from(standby)), "{me}");
    assert_eq!(h.rt.standby_shim_pid(), None, "a taken standby is not replaced");
    let server = u32::try_from(me["pid"].as_u64().unwrap()).unwrap();

    h.rt.shutdown(Duration::from_secs(10)).await;
    wait_until("server and shim gone", Duration::from_secs(10), || {
        !pid_alive(server) && !pid_alive(standby)
    })
    .await;
}

#[tokio::test]
async fn an_unused_standby_shim_ends_with_the_runtime() {
    let h = start(json!({ "mcpServers": { "fx": stdio(&[]) } })).await;
    wait_until("a standby shim", Duration::from_secs(10), || {
        h.rt.standby_shim_pid().is_some()
    })
    .await;
    let standby = h.rt.standby_shim_pid().unwrap();
    h.rt.shutdown(Duration::from_secs(10)).await;
    wait_until("the standby shim gone", Duration::from_secs(10), || !pid_alive(standby)).await;
}

#[tokio::test]
async fn no_standby_without_a_lazy_stdio_server() {
    let mut eager = stdio(&[]);
    eager["lifecycle"] = json!("eager");
    let mut off = stdio(&[]);
    off["enabled"] = json!(false);
    let h = start(json!({ "mcpServers": { "fx": eager, "off": off } })).await;
    wait_until("fx ready", Duration::from_secs(10), || {
        state_of(&h.rt, "fx") == ServerState::Ready
    })
    .await;
    let me = whoami(&h.rt).await;
    assert!(me["ppid"].as_u64().is_some());
    // The spawn task would have run by now: the runtime yielded through a whole connect and call.
    assert_eq!(h.rt.standby_shim_pid(), None);
    h.rt.shutdown(Duration::from_secs(10)).await;
}
