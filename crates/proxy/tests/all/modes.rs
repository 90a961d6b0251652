//! Every read mode of the `mcp` tool through the façade: status, list, search, describe, instructions, connect, and
//! the auth actions on a server without OAuth (the OAuth flow itself is in `auth.rs`).

use std::sync::Arc;
use std::time::Duration;

use pimcp_proxy::{SearchQuery, ServerState};
use serde_json::json;

use super::support::*;

const LONG_INSTRUCTIONS: &str = "This fixture server exists for tests. It echoes text, adds numbers, sleeps on request, \
    crashes on request, produces huge output, fails on request, returns images and mixed content, reports who it is, \
    adds and removes tools at run time, and asks its client for sampling, elicitation and roots. Nothing it does has \
    side effects outside its own process, and every answer is deterministic so tests can compare texts exactly. The \
    final sentence of these instructions is only visible in full mode: the end marker is ZEBRA-END.";

fn two_servers() -> serde_json::Value {
    json!({ "mcpServers": {
        "fx": stdio(&["--event-log", "{dir}/fx.log", "--instructions", LONG_INSTRUCTIONS]),
        "other": stdio(&["--event-log", "{dir}/other.log"]),
        "off": { "command": fixture(), "disabled": true },
    }})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_every_server_and_never_connects() {
    let env = start(two_servers()).await;
    let r = env.mcp(json!({})).await;
    assert_ok(&r);
    let text = r.text();
    assert!(text.starts_with("MCP: 0 of 3 servers ready"), "{text}");
    assert!(text.contains("⊘ off: disabled"), "{text}");
    assert!(text.contains("· fx: not started, nothing cached yet"), "{text}");
    let lines = env.proxy.server_lines();
    assert_eq!(
        lines.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
        ["fx", "off", "other"]
    );
    assert_eq!(lines[0].state, ServerState::NotStarted);
    assert_eq!(env.proxy.status().servers.len(), 3);
    // Nothing started: no fixture ever wrote its event log.
    assert_eq!(count_events(&env.path("fx.log"), "start", None), 0);
    assert_eq!(count_events(&env.path("other.log"), "start", None), 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_connects_an_unknown_server_then_a_second_run_lists_from_the_cache() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let env = start_in(dir.clone(), two_servers()).await;
    let r = env.mcp(json!({ "server": "fx" })).await;
    assert_ok(&r);
    let text = r.text();
    assert!(text.starts_with("fx: "), "{text}");
    assert!(text.contains("- fx_echo — "), "{text}");
    assert!(text.contains("- fx_read_readme"), "resources are read_ tools: {text}");
    assert!(
        text.contains("Instructions: This fixture server exists for tests."),
        "{text}"
    );
    assert!(!text.contains("ZEBRA-END"), "the list shows a preview only: {text}");
    assert!(
        text.contains("mcp({instructions: \"fx\"}) shows them in full."),
        "{text}"
    );
    assert_eq!(count_events(&env.path("fx.log"), "start", None), 1);
    env.shutdown().await;

    // Second run over the same agent dir: the cache answers, nothing starts.
    let env = start_in(dir, two_servers()).await;
    let listing = env.proxy.list("fx").await.unwrap();
    assert_eq!(listing.state, ServerState::Cached);
    assert!(listing.tools.iter().any(|t| t.name == "fx_echo"));
    assert!(
        listing.text().contains("(from cache, not connected;"),
        "{}",
        listing.text()
    );
    assert_eq!(
        count_events(&env.path("fx.log"), "start", None),
        1,
        "listing from cache must not connect"
    );
    let status = env.mcp(json!({})).await.text();
    assert!(status.contains("○ fx: "), "{status}");
    assert!(status.contains(", cached"), "{status}");
    env.shutdown().await;
}

/// A search over servers served from the metadata cache builds its index without parsing any cached schema, and
/// parses only the schemas of the hits it shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_over_cached_servers_parses_only_the_schemas_it_shows() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let env = start_in(dir.clone(), two_servers()).await;
    assert_ok(&env.mcp(json!({ "server": "fx" })).await);
    env.shutdown().await;

    let env = start_in(dir, two_servers()).await;
    let catalog = env.runtime.as_ref().unwrap().handle().catalog();
    let parsed = |name: &str| catalog.get(name).unwrap().input_schema.is_parsed();
    assert!(
        catalog
            .tools()
            .filter(|t| t.server == "fx" && t.resource_uri.is_none())
            .all(|t| !t.input_schema.is_parsed()),
        "cached schemas start unparsed (the `read_*` resource tools share one built-in schema)"
    );
    let r = env.mcp(json!({ "search": "echo", "limit": 1 })).await;
    assert_ok(&r);
    let text = r.text();
    assert!(text.contains("fx_echo"), "{text}");
    assert!(text.contains("text"), "the hit shows its parameters: {text}");
    assert!(parsed("fx_echo"), "the hit's schema was parsed to show it");
    assert!(!text.contains("fx_add"), "{text}");
    assert!(!parsed("fx_add"), "a tool the search did not show stays unparsed");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_ranks_pages_and_explains_what_was_not_searched() {
    let env = start(two_servers()).await;
    // Nothing known yet: the library's offline search says which servers were not searched and why.
    let text = env.proxy.search(&SearchQuery::new("echo")).unwrap().text();
    assert!(text.starts_with("No tools match \"echo\"."), "{text}");
    assert!(
        text.contains("Not searched: fx (not started, nothing cached yet)"),
        "{text}"
    );
    assert!(text.contains("other (not started, nothing cached yet)"), "{text}");
    assert!(text.contains("off (disabled)"), "{text}");
    assert_eq!(
        count_events(&env.path("fx.log"), "start", None),
        0,
        "the offline search never connects"
    );

    // The mcp tool's search discovers one named server without starting the other.
    let r = env.mcp(json!({ "search": "echo", "server": "fx" })).await;
    let text = r.text();
    assert!(text.contains("\nfx_echo — "), "{text}");
    assert!(text.contains("{text: string}"), "a parameter shape: {text}");
    assert_eq!(count_events(&env.path("other.log"), "start", None), 0);
    let text = env.proxy.search(&SearchQuery::new("echo")).unwrap().text();
    assert!(text.contains("Not searched: other (not started"), "{text}");
    assert!(
        !text.contains("off (disabled)"),
        "disabled servers are only named when nothing matched: {text}"
    );

    let page = env
        .proxy
        .search(&SearchQuery::new("fixture").with_server("fx").with_limit(1))
        .unwrap();
    assert_eq!(page.hits.len(), 1);
    assert!(page.total > 1);
    assert_eq!(page.next_offset, Some(1));
    assert!(page.text().contains("next: offset 1"), "{}", page.text());
    let exact = env.proxy.search(&SearchQuery::new("fx_add")).unwrap();
    assert_eq!(exact.hits[0].doc.name, "fx_add", "exact names rank first");

    // Regex search, and its limit.
    let r = env.mcp(json!({ "search": "^fx_(echo|add)$", "regex": true })).await;
    assert!(
        r.text().contains("fx_echo") && r.text().contains("fx_add"),
        "{}",
        r.text()
    );
    let r = env.mcp(json!({ "search": "a".repeat(257), "regex": true })).await;
    assert_error(&r, "validation");
    assert!(
        r.text().contains("257 characters long; the limit is 256"),
        "{}",
        r.text()
    );
    let r = env.mcp(json!({ "search": "echo", "offset": -1 })).await;
    assert_error(&r, "validation");
    let r = env.mcp(json!({ "search": "echo", "server": "nope" })).await;
    assert_error(&r, "config");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_discovery_timeout_searches_only_what_is_known() {
    let env = start(json!({
        "settings": { "discoveryTimeout": 0 },
        "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) },
    }))
    .await;
    assert_eq!(env.config.settings.discovery_timeout, Duration::ZERO);
    let text = env.mcp(json!({ "search": "echo" })).await.text();
    assert!(
        text.contains("Not searched: fx (not started, nothing cached yet)"),
        "{text}"
    );
    assert_eq!(count_events(&env.path("fx.log"), "start", None), 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_descriptions_appear_in_status_and_the_definition() {
    let mut fx = stdio(&[]);
    fx["description"] = json!("Echo, add and\nother test tools");
    let env = start(json!({ "mcpServers": { "fx": fx, "plain": stdio(&[]) } })).await;
    let text = env.mcp(json!({})).await.text();
    assert!(
        text.contains("fx (Echo, add and other test tools): not started"),
        "{text}"
    );
    assert!(text.contains("plain: not started"), "{text}");
    let tools = env.server().tools();
    let definition = tools.iter().find(|t| t.name == "mcp").unwrap();
    let description = definition.description.as_deref().unwrap_or_default();
    assert!(
        description.ends_with("Servers: fx (Echo, add and other test tools), plain"),
        "{description}"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_search_connects_the_servers_nothing_is_known_of_and_finds_their_tools() {
    let env = start(json!({ "mcpServers": {
        "fx": stdio(&["--event-log", "{dir}/fx.log"]),
        "other": stdio(&["--event-log", "{dir}/other.log"]),
        "broken": { "command": "{dir}/no-such-server" },
        "off": { "command": fixture(), "disabled": true },
    }}))
    .await;
    // A fresh install: nothing cached, nothing started. One search reaches the tools of every startable server.
    let r = env.mcp(json!({ "search": "echo" })).await;
    assert_ok(&r);
    let text = r.text();
    assert!(text.contains("fx_echo"), "{text}");
    assert!(text.contains("other_echo"), "{text}");
    // The server that could not start is named with why; the disabled one is never started.
    let text = env.proxy.search(&SearchQuery::new("zzz-nothing")).unwrap().text();
    assert!(
        text.contains("broken (failed") || text.contains("broken (backoff"),
        "the server that did not start is named with its state: {text}"
    );
    assert!(text.contains("off (disabled)"), "{text}");
    // The call the search pointed at works, and a second search connects nothing new.
    let r = env.mcp(json!({ "tool": "fx_echo", "args": { "text": "found" } })).await;
    assert_eq!(r.text(), "found");
    let _ = env.mcp(json!({ "search": "add numbers" })).await;
    assert_eq!(count_events(&env.path("fx.log"), "start", None), 1);
    assert_eq!(count_events(&env.path("other.log"), "start", None), 1);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_connects_lazily_and_suggests_on_typos() {
    let env = start(two_servers()).await;
    // The catalog is unknown: describe connects the implied server instead of answering "not found".
    let r = env.mcp(json!({ "describe": "fx_add" })).await;
    assert_ok(&r);
    let text = r.text();
    assert!(text.starts_with("fx_add\nServer: fx (tool \"add\")"), "{text}");
    assert!(text.contains("Input schema:"), "{text}");
    assert!(text.contains("Output schema:"), "{text}");
    let info = env.proxy.describe("echo", Some("fx")).await.unwrap();
    assert_eq!(info.doc.name, "fx_echo");

    let r = env.mcp(json!({ "describe": "fx_ecoh" })).await;
    assert_error(&r, "unknown-tool");
    assert!(r.text().contains("Did you mean: fx_echo"), "{}", r.text());
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructions_and_connect() {
    let env = start(two_servers()).await;
    let r = env.mcp(json!({ "instructions": "fx" })).await;
    assert_ok(&r);
    assert!(
        r.text().starts_with("fx instructions:\n\nThis fixture server"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("ZEBRA-END"), "{}", r.text());
    let r = env.mcp(json!({ "instructions": "nope" })).await;
    assert_error(&r, "config");
    assert!(r.text().contains("Configured servers: fx, off, other."), "{}", r.text());

    // connect forces a fresh session, then lists.
    let before = count_events(&env.path("fx.log"), "start", None);
    let r = env.mcp(json!({ "connect": "fx" })).await;
    assert_ok(&r);
    assert!(r.text().contains("- fx_echo"), "{}", r.text());
    assert_eq!(count_events(&env.path("fx.log"), "start", None), before + 1);
    let r = env.mcp(json!({ "connect": "off" })).await;
    assert_error(&r, "config");
    assert!(r.text().contains("disabled"), "{}", r.text());
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_actions_on_a_server_without_oauth_say_so() {
    let env = start(two_servers()).await;
    for action in ["auth-start", "auth-complete"] {
        let r = env
            .mcp(json!({ "action": action, "server": "fx", "args": { "code": "x" } }))
            .await;
        assert_error(&r, "config");
        assert!(r.text().contains("does not use OAuth"), "{}", r.text());
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_keywords_and_reconfigure() {
    let env = start(json!({ "mcpServers": {
        "fx": { "command": fixture(), "searchKeywords": { "echo": ["parrot", "mirror"] } },
    }}))
    .await;
    env.mcp(json!({ "connect": "fx" })).await;
    let found = env.proxy.search(&SearchQuery::new("parrot")).unwrap();
    assert_eq!(found.hits[0].doc.name, "fx_echo", "{}", found.text());

    // A new config: fx removed, fz added. Status, search and calls follow it.
    let dir = env.dir.clone();
    let next = load(&json!({ "mcpServers": { "fz": stdio(&[]) } }), dir.path());
    env.proxy.reconfigure(next).await.unwrap();
    let names: Vec<String> = env.proxy.server_lines().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["fz"]);
    let r = env
        .mcp(json!({ "tool": "fz_echo", "args": { "text": "new server" } }))
        .await;
    assert_eq!(r.text(), "new server");
    let found = env.proxy.search(&SearchQuery::new("parrot")).unwrap();
    assert_eq!(found.total, 0, "{}", found.text());
    env.shutdown().await;
}

/// A mistyped tool name with many servers that have no metadata yet starts a bounded number of them (it started
/// every one: 750+ live children within a second), and the answer is the unknown-tool error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_tool_starts_a_bounded_number_of_uncached_servers() {
    let servers: serde_json::Map<String, serde_json::Value> = (0..40)
        .map(|i| (format!("srv{i:02}"), stdio(&["--event-log", "{dir}/all.log"])))
        .collect();
    let env = start(json!({ "mcpServers": servers })).await;
    let r = env.mcp(json!({ "tool": "ehco_louder", "args": {} })).await;
    assert_error(&r, "unknown-tool");
    let started = count_events(&env.path("all.log"), "start", None);
    assert!(
        (1..=pimcp_actors::MAX_DISCOVERY_STARTS).contains(&started),
        "{started} servers started for one mistyped name"
    );
    env.shutdown().await;
}

/// The first search of a session with 10,000 configured servers and nothing cached connects at most
/// `COLD_DISCOVERY_MAX` of them, and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_search_over_ten_thousand_servers_starts_at_most_the_bound() {
    let servers: serde_json::Map<String, serde_json::Value> = (0..10_000)
        .map(|i| (format!("srv{i:05}"), stdio(&["--event-log", "{dir}/all.log"])))
        .collect();
    let env = start(json!({ "mcpServers": servers })).await;
    let r = env.mcp(json!({ "search": "echo" })).await;
    assert_ok(&r);
    assert!(r.text().contains("srv00000_echo"), "{}", r.text());
    let started = count_events(&env.path("all.log"), "start", None);
    assert!(
        (1..=pimcp_proxy::COLD_DISCOVERY_MAX).contains(&started),
        "{started} servers started for one search"
    );
    env.shutdown().await;
}

/// A typo of a known server's tool is "unknown tool" with suggestions, even when another configured server cannot
/// start (its connect error used to be the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_of_a_known_servers_tool_is_unknown_tool_while_another_server_is_broken() {
    let env = start(json!({ "mcpServers": {
        "fx": stdio(&[]),
        "broken": { "command": "{dir}/no-such-server" },
    }}))
    .await;
    // The session's first search: fx is discovered, broken fails to start.
    assert_ok(&env.mcp(json!({ "search": "echo" })).await);
    let r = env.mcp(json!({ "tool": "fx_ecoh", "args": { "text": "x" } })).await;
    assert_error(&r, "unknown-tool");
    let text = r.text();
    assert!(text.contains("fx_echo"), "suggests the tool: {text}");
    assert!(
        !text.contains("no-such-server"),
        "not the broken server's error: {text}"
    );
    // A name that points at the broken server still says why it cannot be reached.
    let r = env.mcp(json!({ "tool": "broken_echo", "args": {} })).await;
    assert_error(&r, "connection");
    env.shutdown().await;
}

/// pimcp's own texts go through the output guard like upstream results: a list longer than the limit is cut and
/// saved in full to a spill file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_guard_applies_to_pimcps_own_texts() {
    let env = start(json!({
        "settings": { "outputGuard": { "maxBytes": 400, "maxLines": 2000 } },
        "mcpServers": { "fx": stdio(&[]) },
    }))
    .await;
    let r = env.mcp(json!({ "server": "fx" })).await;
    assert_ok(&r);
    let text = r.text();
    assert!(text.len() < 1_000, "{} characters: {text}", text.len());
    assert!(text.contains("full output: "), "{text}");
    let spilled = text.split("full output: ").nth(1).unwrap();
    let path = spilled.split([' ', ';', '\n', ']']).next().unwrap();
    let full = std::fs::read_to_string(path).unwrap();
    assert!(
        full.contains("fx_read_logo_png"),
        "the spill file holds the whole list: {full}"
    );
    env.shutdown().await;
}
