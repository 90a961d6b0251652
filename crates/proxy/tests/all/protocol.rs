//! The `pimcp-run` MCP server driven in-process by an rmcp client (and by raw JSON-RPC lines): the tool definition
//! on the wire, version negotiation, `server/discover`, ping, malformed input, prompts, resources, resource
//! templates, completions and resource subscriptions, and a host that disconnects mid-call.

use rmcp::model::{
    ArgumentInfo, ClientRequest, CompleteRequestParams, GetPromptRequestParams, PingRequest, ProtocolVersion,
    ReadResourceRequestParams, Reference, ResourceContents, ServerNotification, ServerResult, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::support::*;

fn one_server() -> Value {
    json!({ "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log", "--tools", "200"]) } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_tool_is_small_on_the_wire_and_the_list_does_not_grow() {
    let env = start(one_server()).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let tools = session.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 2, "mcp and mcpScript");
    let wire = serde_json::to_string(&tools[0]).unwrap();
    assert!(wire.chars().count() <= 1000, "{} chars: {wire}", wire.chars().count());
    assert!(wire.contains("\"name\":\"mcp\""));
    assert!(wire.contains("\"inputSchema\""));

    // 200 synthetic tools later, still the same two tools.
    let r = session.mcp(json!({ "connect": "fx" })).await;
    assert!(r.is_error != Some(true), "{}", text_of(&r));
    assert!(env.proxy.runtime().catalog().tools().count() > 200);
    assert_eq!(session.tool_names().await, ["mcp", "mcpScript"]);
    let r = session
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "over the wire" } }))
        .await;
    assert_eq!(text_of(&r), "over the wire");
    assert_eq!(r.is_error, Some(false));
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_tool_results_never_protocol_errors() {
    let env = start(one_server()).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let r = session.mcp(json!({ "tool": "fx_nope" })).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(category_of(&r).as_deref(), Some("unknown-tool"));
    let r = session.call("not_a_tool", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(category_of(&r).as_deref(), Some("unknown-tool"));
    let r = session.mcp(json!({ "tool": "fx_fail" })).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(category_of(&r).as_deref(), Some("tool-error"));
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_versions_are_negotiated_and_ping_is_answered() {
    let env = start(one_server()).await;
    for version in [
        ProtocolVersion::V_2024_11_05,
        ProtocolVersion::V_2025_03_26,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_11_25,
    ] {
        let host = TestHost {
            version: version.clone(),
            ..TestHost::plain()
        };
        let session = connect(env.server(), host).await;
        let info = session.client.peer().peer_info().unwrap();
        assert_eq!(info.protocol_version, version, "the requested version is echoed");
        assert_eq!(info.server_info.as_ref().unwrap().name, "pimcp");
        let pong = session
            .client
            .send_request(ClientRequest::PingRequest(PingRequest::default()))
            .await
            .unwrap();
        assert!(matches!(pong, ServerResult::EmptyResult(_)), "{pong:?}");
        session.client.cancel().await.unwrap();
    }
    env.shutdown().await;
}

/// Raw newline-delimited JSON-RPC against the server, as a host process sees it.
struct Raw {
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    read: BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    served: tokio::task::JoinHandle<pimcp_proxy::Result<()>>,
}

impl Raw {
    fn start(env: &Env) -> Raw {
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_io);
        let served = tokio::spawn(pimcp_proxy::serve_lines(
            env.server(),
            server_read,
            server_write,
            tokio_util::sync::CancellationToken::new(),
        ));
        let (read, write) = tokio::io::split(client_io);
        Raw {
            write,
            read: BufReader::new(read),
            served,
        }
    }

    /// Closes the pipe (both halves) and waits for the server to finish.
    async fn close(self) {
        let Raw { write, read, served } = self;
        drop(write);
        drop(read);
        tokio::time::timeout(DEADLINE, served).await.unwrap().unwrap().unwrap();
    }

    async fn send(&mut self, line: &str) {
        self.write.write_all(line.as_bytes()).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// The next message with this id (notifications in between are skipped).
    async fn answer(&mut self, id: i64) -> Value {
        let read = async {
            loop {
                let mut line = String::new();
                let n = self.read.read_line(&mut line).await.unwrap();
                assert!(n > 0, "the server closed the connection");
                let v: Value = serde_json::from_str(&line).unwrap();
                if v["id"] == id {
                    return v;
                }
            }
        };
        tokio::time::timeout(DEADLINE, read).await.expect("an answer")
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_discover_is_answered_then_initialize_works() {
    let env = start(one_server()).await;
    let mut raw = Raw::start(&env);
    // What the Python `mcp` 2.x client sends first.
    raw.send(
        r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"py","version":"2"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    )
    .await;
    let discover = raw.answer(1).await;
    let versions = discover["result"]["supportedVersions"]
        .as_array()
        .unwrap_or_else(|| panic!("{discover}"));
    assert!(versions.contains(&json!("2026-07-28")), "{discover}");
    assert!(versions.contains(&json!("2025-11-25")), "{discover}");
    // A discover without the required metadata is an error, not a dropped connection.
    raw.send(r#"{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{}}"#)
        .await;
    assert!(raw.answer(9).await["error"]["code"].is_i64());
    raw.send(INIT).await;
    let init = raw.answer(2).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#).await;
    assert_eq!(raw.answer(3).await["result"]["tools"][0]["name"], "mcp");
    raw.close().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_lines_are_ignored_or_answered_and_serving_continues() {
    let env = start(one_server()).await;
    let mut raw = Raw::start(&env);
    raw.send(INIT).await;
    raw.answer(2).await;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    raw.send("{this is not json").await;
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":42}"#).await;
    raw.send(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#).await;
    let pong = raw.answer(5).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    raw.send(r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"mcp","arguments":{"tool":"fx_echo","args":"{oops"}}}"#)
        .await;
    let bad = raw.answer(6).await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert_eq!(bad["result"]["_meta"]["pimcp/category"], "validation", "{bad}");
    raw.send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).await;
    assert_eq!(raw.answer(7).await["result"]["tools"][0]["name"], "mcp");
    raw.close().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_resources_pass_through() {
    let env = start(one_server()).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let prompts = session.client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fx_greet", "fx_summarize", "fx_brief", "fx_translate"]);
    assert_eq!(prompts[0].arguments.as_ref().unwrap()[0].name, "name");
    // A prompt without arguments and an argument without a description pass through as they are.
    assert!(prompts[2].arguments.is_none());
    assert_eq!(prompts[3].arguments.as_ref().unwrap()[1].description, None);
    let mut params = GetPromptRequestParams::new("fx_greet");
    params.arguments = json!({ "name": "Ada" }).as_object().cloned();
    let got = session.client.get_prompt(params).await.unwrap();
    let text = serde_json::to_string(&got.messages).unwrap();
    assert!(text.contains("greeting for Ada"), "{text}");
    let missing = session.client.get_prompt(GetPromptRequestParams::new("fx_greet")).await;
    assert!(missing.is_err(), "a missing required argument is the upstream's error");

    let resources = session.client.list_all_resources().await.unwrap();
    assert!(resources.iter().any(|r| r.uri == "fixture://readme"), "{resources:?}");
    let read = session
        .client
        .read_resource(ReadResourceRequestParams::new("fixture://readme"))
        .await
        .unwrap();
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert!(!text.is_empty()),
        other => panic!("{other:?}"),
    }
    let unknown = session
        .client
        .read_resource(ReadResourceRequestParams::new("fixture://nope"))
        .await;
    assert!(unknown.is_err());
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_templates_and_completions_pass_through() {
    let env = start(one_server()).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let session = connect(env.server(), TestHost::plain()).await;
    let info = session.client.peer().peer_info().unwrap();
    assert!(info.capabilities.completions.is_some(), "pimcp declares completions");

    let templates = session.client.list_all_resource_templates().await.unwrap();
    let uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(uris, ["fixture://items/{id}"]);
    // A URI only the template describes reaches its server.
    let read = session
        .client
        .read_resource(ReadResourceRequestParams::new("fixture://items/7"))
        .await
        .unwrap();
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert!(text.contains('7'), "{text}"),
        other => panic!("{other:?}"),
    }

    // Completions: a prompt by its exposed name (the server gets its own), and a resource template.
    let complete = |reference: Reference, name: &str, value: &str| {
        let params = CompleteRequestParams::new(reference, ArgumentInfo::new(name, value));
        let peer = session.client.peer().clone();
        async move { peer.complete(params).await }
    };
    let languages = complete(Reference::for_prompt("fx_translate"), "to", "g")
        .await
        .unwrap();
    assert_eq!(languages.completion.values, ["German"]);
    let ids = complete(Reference::for_resource("fixture://items/{id}"), "id", "1")
        .await
        .unwrap();
    assert_eq!(ids.completion.values, ["1", "10", "11", "12"]);
    let unknown = complete(Reference::for_prompt("fx_nope"), "to", "").await;
    assert!(unknown.is_err(), "{unknown:?}");
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

/// `resources/subscribe` from two host sessions: one upstream subscription, updates to both, made again when the
/// server restarts, and ended when the last session unsubscribes.
#[allow(deprecated)] // resources/subscribe is legacy-only in rmcp
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_subscriptions_reach_the_server_and_its_updates_the_hosts() {
    let mut fx = stdio(&["--event-log", "{dir}/fx.log"]);
    fx["protocol"] = json!("legacy");
    let env = start(json!({ "mcpServers": { "fx": fx } })).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let log = env.path("fx.log");
    // Both sessions on one server, as every session of one `pimcp-run` is.
    let server = env.server();
    let a = connect(server.clone(), TestHost::plain()).await;
    let b = connect(server, TestHost::plain()).await;
    let info = a.client.peer().peer_info().unwrap();
    assert_eq!(
        info.capabilities.resources.as_ref().and_then(|r| r.subscribe),
        Some(true)
    );
    let subscribe = |s: &Session, uri: &str| {
        let peer = s.client.peer().clone();
        let params = SubscribeRequestParams::new(uri);
        async move { peer.subscribe(params).await }
    };
    subscribe(&a, "fixture://readme").await.unwrap();
    subscribe(&b, "fixture://readme").await.unwrap();
    assert_eq!(
        count_events(&log, "subscribe", None),
        1,
        "one upstream subscription for both"
    );
    wait_until("the update reached the first session", DEADLINE, || {
        a.probe.updated.lock().unwrap().iter().any(|u| u == "fixture://readme")
    })
    .await;

    // The server restarts: pimcp subscribes again, and the update it sends reaches both sessions.
    env.mcp(json!({ "connect": "fx" })).await;
    wait_until("re-subscribed after the restart", DEADLINE, || {
        count_events(&log, "subscribe", None) == 2
    })
    .await;
    wait_until("the update reached the second session", DEADLINE, || {
        b.probe.updated.lock().unwrap().iter().any(|u| u == "fixture://readme")
    })
    .await;

    // A URI nobody lists is refused; the last unsubscribe ends the upstream subscription.
    assert!(subscribe(&a, "fixture://nope").await.is_err());
    let unsubscribe = |s: &Session| {
        let peer = s.client.peer().clone();
        async move {
            peer.unsubscribe(UnsubscribeRequestParams::new("fixture://readme"))
                .await
        }
    };
    unsubscribe(&a).await.unwrap();
    assert_eq!(count_events(&log, "unsubscribe", None), 0, "b is still subscribed");
    unsubscribe(&b).await.unwrap();
    assert_eq!(count_events(&log, "unsubscribe", None), 1);
    a.client.cancel().await.unwrap();
    b.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_disconnects_mid_call_cancels_the_upstream_call() {
    let env = start(one_server()).await;
    let log = env.path("fx.log");
    let session = connect(env.server(), TestHost::plain()).await;
    let peer = session.client.peer().clone();
    let call = tokio::spawn(async move {
        let mut params = rmcp::model::CallToolRequestParams::new("mcp");
        params.arguments = json!({ "tool": "fx_slow", "args": { "ms": 60000, "steps": 60 } })
            .as_object()
            .cloned();
        peer.call_tool(params).await
    });
    wait_until("the slow call to reach the fixture", DEADLINE, || {
        count_events(&log, "call", Some("slow")) == 1
    })
    .await;
    // The host goes away (its transport closes) while the call runs.
    session.client.cancel().await.unwrap();
    let _ = call.await;
    wait_until("the fixture to see the call cancelled", DEADLINE, || {
        count_events(&log, "cancelled", Some("slow")) == 1
    })
    .await;
    tokio::time::timeout(DEADLINE, session.served)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The runtime is still usable, and nothing is left running on the server.
    wait_until("no call in flight", DEADLINE, || {
        env.proxy.status().server("fx").is_some_and(|s| s.in_flight == 0)
    })
    .await;
    let r = env.call("fx_echo", json!({ "text": "still here" })).await;
    assert_eq!(r.text(), "still here");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_host_discovers_calls_and_listens_for_changes() {
    let env = start(json!({ "mcpServers": { "fx": {
        "command": fixture(), "args": ["--event-log", "{dir}/fx.log"], "directTools": true,
    }}}))
    .await;
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let served = tokio::spawn(pimcp_proxy::serve(
        env.server(),
        tokio::io::split(server_io),
        tokio_util::sync::CancellationToken::new(),
    ));
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let client = TestHost::plain()
        .serve_with_lifecycle(tokio::io::split(client_io), lifecycle)
        .await
        .unwrap();
    let info = client.peer().peer_info().unwrap();
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools[0].name, "mcp");
    let mut params = rmcp::model::CallToolRequestParams::new("mcp");
    params.arguments = json!({ "tool": "fx_echo", "args": { "text": "stateless" } })
        .as_object()
        .cloned();
    let r = client.call_tool(params).await.unwrap();
    assert_eq!(text_of(&r), "stateless");

    // Discovery added direct tools: the change arrives on the subscription stream.
    let mut subscription = client
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();
    env.mcp(json!({ "connect": "fx" })).await;
    let next = tokio::time::timeout(DEADLINE, subscription.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(next, Some(ServerNotification::ToolListChangedNotification(_))),
        "{next:?}"
    );
    assert!(
        client
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "fx_echo")
    );
    client.cancel().await.unwrap();
    tokio::time::timeout(DEADLINE, served).await.unwrap().unwrap().unwrap();
    env.shutdown().await;
}

/// A 2026-07-28 host subscribes to a resource in its listen stream's `resourceSubscriptions`: pimcp subscribes it
/// upstream (on a 2026-07-28 server, in that server's own listen stream) and relays the server's
/// `notifications/resources/updated` on the host's stream; a URI no server has is not accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_host_gets_resource_updates_on_its_listen_stream() {
    let env = start(json!({ "mcpServers": { "fx": {
        "command": fixture(), "args": ["--event-log", "{dir}/fx.log"],
    }}}))
    .await;
    env.mcp(json!({ "connect": "fx" })).await;
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let served = tokio::spawn(pimcp_proxy::serve(
        env.server(),
        tokio::io::split(server_io),
        tokio_util::sync::CancellationToken::new(),
    ));
    let client = TestHost::plain()
        .serve_with_lifecycle(
            tokio::io::split(client_io),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let mut filter = SubscriptionFilter::builder().tools_list_changed().build();
    filter.resource_subscriptions = Some(vec!["fixture://readme".into(), "nowhere://x".into()]);
    let mut subscription = client.peer().listen(filter).await.unwrap();
    let next = tokio::time::timeout(DEADLINE, async {
        loop {
            match subscription.next().await.unwrap() {
                Some(ServerNotification::ResourceUpdatedNotification(n)) => return n.params.uri,
                Some(_) => continue,
                None => panic!("the stream ended"),
            }
        }
    })
    .await
    .expect("no resources/updated on the host's stream");
    assert_eq!(next, "fixture://readme");
    let listens: Vec<Value> = events(&env.path("fx.log"))
        .into_iter()
        .filter(|e| e["event"] == "listen")
        .map(|e| e["resources"].clone())
        .collect();
    assert!(listens.contains(&json!(["fixture://readme"])), "{listens:?}");
    client.cancel().await.unwrap();
    tokio::time::timeout(DEADLINE, served).await.unwrap().unwrap().unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_progress_reaches_the_host_that_asked_for_it() {
    let env = start(one_server()).await;
    let session = connect(env.server(), TestHost::plain()).await;
    // rmcp puts a progressToken on every request, so the host asks; the fixture's `slow` reports 0..=steps, 100 ms
    // apart. The first call waits for the lazy connect (the server actor's path), the second runs on the ready
    // server's lane. The last report races the result (rmcp handles notifications on spawned tasks), so only the
    // ones sent well before it must arrive.
    for round in 1..=2 {
        session.probe.progress.lock().unwrap().clear();
        let r = session
            .mcp(json!({ "tool": "fx_slow", "args": { "ms": 400, "steps": 4 } }))
            .await;
        assert_eq!(r.is_error, Some(false), "round {round}: {}", text_of(&r));
        wait_until("four progress notifications", DEADLINE, || {
            session.probe.progress.lock().unwrap().len() >= 4
        })
        .await;
        let seen = session.probe.progress.lock().unwrap().clone();
        let steps: Vec<f64> = seen.iter().map(|(p, _)| *p).collect();
        assert!(
            steps == [0.0, 1.0, 2.0, 3.0] || steps == [0.0, 1.0, 2.0, 3.0, 4.0],
            "round {round}: {steps:?}"
        );
        assert!(
            seen.iter().all(|(_, total)| *total == Some(4.0)),
            "round {round}: {seen:?}"
        );
    }
    // A call that reports nothing sends nothing.
    session.probe.progress.lock().unwrap().clear();
    let r = session
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "quiet" } }))
        .await;
    assert_eq!(text_of(&r), "quiet");
    assert!(session.probe.progress.lock().unwrap().is_empty());
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}
