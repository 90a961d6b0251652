//! `pimcp-run` as the stdio MCP server driven by an rmcp client: the `mcp` tool over a fixture upstream, and SIGHUP
//! reloading the configuration (a valid new file is applied, an invalid one keeps the running setup).

use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::support::Sandbox;

async fn mcp(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>, args: Value) -> String {
    let result = client
        .call_tool(CallToolRequestParams::new("mcp").with_arguments(args.as_object().cloned().unwrap()))
        .await
        .unwrap();
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn config(servers: &[&str]) -> String {
    let entries: serde_json::Map<String, Value> = servers
        .iter()
        .map(|name| ((*name).to_owned(), json!({ "command": mcp_fixture::bin_path() })))
        .collect();
    json!({ "mcpServers": entries }).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_configuration_and_keeps_it_when_invalid() {
    let sb = Sandbox::new();
    sb.write(sb.global(), &config(&["alpha"]));
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_pimcp-run"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &sb.home)
        .env("PIMCP_DATA_DIR", &sb.data)
        .current_dir(&sb.project);
    let log = sb.root.path().join("pimcp-run.log");
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = transport.id().unwrap();
    let client = ().serve(transport).await.unwrap();

    let echoed = mcp(&client, json!({ "tool": "alpha_echo", "args": { "text": "one" } })).await;
    assert_eq!(echoed, "one");
    let status = mcp(&client, json!({})).await;
    assert!(status.contains("alpha") && !status.contains("beta"), "{status}");

    let hup = || {
        let sent = std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    sb.write(sb.global(), &config(&["alpha", "beta"]));
    hup();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = String::new();
    while Instant::now() < deadline {
        status = mcp(&client, json!({})).await;
        if status.contains("beta") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(status.contains("beta"), "SIGHUP did not apply the new server: {status}");
    let beta = mcp(&client, json!({ "tool": "beta_echo", "args": { "text": "two" } })).await;
    assert_eq!(beta, "two");

    // An invalid file is refused: both servers stay and keep working.
    sb.write(sb.global(), "{ \"mcpServers\": { \"alpha\": ");
    hup();
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("keeping the running setup") || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        refused.contains("keeping the running setup"),
        "no refusal logged:\n{refused}"
    );
    let after = mcp(&client, json!({ "tool": "alpha_echo", "args": { "text": "three" } })).await;
    assert_eq!(after, "three");
    let status = mcp(&client, json!({})).await;
    assert!(status.contains("alpha") && status.contains("beta"), "{status}");
    let _ = client.cancel().await;
}
