//! `!command` secrets in the runtime: a failed command is retried with backoff (not a lasting config error), and
//! shutdown ends a running command at once.

use std::time::Duration;

use serde_json::json;

use super::support::*;

#[tokio::test]
async fn a_failed_secret_command_is_retried_on_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("unlocked");
    let mut server = stdio(&[]);
    server["env"] = json!({ "TOK": format!("!test -f '{}' && echo tok", flag.display()) });
    let h = start(json!({ "mcpServers": { "vault": server } })).await;
    let first =
        h.rt.call(
            "vault_echo",
            args(json!({ "text": "hi" })),
            pimcp_actors::CallOptions::default(),
        )
        .await;
    let err = first.unwrap_err().to_string();
    assert!(err.contains("`env.TOK` command exited with code 1"), "{err}");
    assert_ne!(state_of(&h.rt, "vault"), pimcp_actors::ServerState::ConfigError);
    std::fs::write(&flag, "").unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if h.rt
            .call(
                "vault_echo",
                args(json!({ "text": "hi" })),
                pimcp_actors::CallOptions::default(),
            )
            .await
            .is_ok()
        {
            break;
        }
        assert!(std::time::Instant::now() < end, "the secret was never retried");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn shutdown_ends_a_running_secret_command_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sh.pid");
    let mut server = stdio(&[]);
    server["env"] = json!({ "TOK": format!("!echo $$ > '{}'; exec sleep 605", pid_file.display()) });
    let h = start(json!({ "mcpServers": { "slow": server } })).await;
    let rt = h.rt.clone();
    let call = tokio::spawn(async move {
        rt.call(
            "slow_echo",
            args(json!({ "text": "hi" })),
            pimcp_actors::CallOptions::default(),
        )
        .await
    });
    wait_until("the secret's pid file", Duration::from_secs(10), || {
        read_pid(&pid_file).is_some()
    })
    .await;
    let pid = read_pid(&pid_file).unwrap();
    h.rt.shutdown(Duration::from_secs(10)).await;
    // Far below the command's 10 s limit.
    wait_until("the secret command to end", Duration::from_secs(5), || !pid_alive(pid)).await;
    let _ = call.await;
}
