//! Tests of the model-facing texts: status, list, search, configuration problems, error results and helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    Category, MAX_STATUS_LINES, ProxyError, ServerLine, ServerState, SkippedServer, config_problems_text,
    human_duration, instructions_text, list_text, one_line, quoted, search_text, status_text, truncate_at_word,
};
use crate::error::Error;
use crate::search::{SearchIndex, SearchQuery, ToolDoc};

fn tool(server: &str, name: &str, description: &str, schema: Value) -> ToolDoc {
    ToolDoc {
        name: format!("{server}_{name}"),
        original_name: name.to_string(),
        server: server.to_string(),
        description: description.to_string(),
        keywords: Vec::new(),
        input_schema: crate::search::doc_schema(schema),
        needs_approval: false,
    }
}

fn line(name: &str, state: ServerState, n_tools: Option<usize>, reason: Option<&str>) -> ServerLine {
    ServerLine {
        name: name.into(),
        state,
        n_tools,
        reason: reason.map(String::from),
        description: None,
    }
}

#[test]
fn status_of_ten_thousand_servers_counts_them_and_lists_only_those_needing_attention() {
    let mut servers: Vec<ServerLine> = (0..10_000)
        .map(|i| line(&format!("server-{i:05}"), ServerState::Cached, Some(3), None))
        .collect();
    servers[7].state = ServerState::Ready;
    for s in servers.iter_mut().skip(100).take(50) {
        s.state = ServerState::NeedsAuth;
    }
    let text = status_text(&servers);
    assert!(text.len() < 6_000, "{} characters", text.len());
    assert!(
        text.starts_with("MCP: 1 of 10000 servers ready, 30000 tools\n"),
        "{text}"
    );
    assert!(
        text.contains("By state: 9949 cached, 50 need auth, 1 ready.\n"),
        "{text}"
    );
    assert!(
        text.contains("Needing attention (50):\n⚠ server-00100: needs auth"),
        "{text}"
    );
    assert!(
        text.contains("… and 10 more (`pimcp-run status` lists every server)"),
        "{text}"
    );
    assert!(!text.contains("server-00007"), "ready servers are counted, not listed");
    // Up to the line limit every server has its line.
    let few = &servers[..MAX_STATUS_LINES];
    assert_eq!(status_text(few).matches(" server-").count(), MAX_STATUS_LINES);
}

#[test]
fn config_problems_name_the_skipped_files_and_entries_and_are_bounded() {
    let problem = |path: &str, server: Option<&str>, message: &str, severity| {
        let mut problem = pimcp_config::ConfigProblem::new(severity, message);
        problem.path = Some(path.into());
        problem.server = server.map(String::from);
        problem
    };
    assert_eq!(config_problems_text(&[]), None);
    let warning = problem("/h/mcp.json", None, "unknown field", pimcp_config::Severity::Warning);
    assert_eq!(
        config_problems_text(std::slice::from_ref(&warning)),
        None,
        "warnings are for config check"
    );
    let mut problems = vec![
        warning,
        problem(
            "/h/mcp.json",
            None,
            "expected `,` or `}`",
            pimcp_config::Severity::Error,
        ),
        problem(
            "/p/.mcp.json",
            Some("db"),
            "`command` must be a string",
            pimcp_config::Severity::Error,
        ),
    ];
    insta::assert_snapshot!(config_problems_text(&problems).unwrap(), @r"
    Configuration problems (2 skipped; tell the user, `pimcp-run config check` shows them all):
    - /h/mcp.json: expected `,` or `}`
    - /p/.mcp.json: server `db`: `command` must be a string
    ");
    for i in 0..100 {
        problems.push(problem(
            "/h/x.json",
            None,
            &"long ".repeat(100 + i),
            pimcp_config::Severity::Error,
        ));
    }
    let text = config_problems_text(&problems).unwrap();
    assert!(text.len() < 2_500, "{} characters", text.len());
    assert!(text.ends_with("\n- … and 97 more"), "{text}");
}

#[test]
fn a_search_miss_over_ten_thousand_servers_groups_those_not_searched() {
    let index = SearchIndex::build(vec![tool("a", "echo", "Echoes", json!({}))]);
    let q = SearchQuery::new("zzz");
    let page = index.search(&q).unwrap();
    let mut skipped: Vec<SkippedServer> = (0..10_000)
        .map(|i| SkippedServer {
            name: format!("s{i:05}"),
            state: ServerState::NotStarted,
        })
        .collect();
    skipped[5].state = ServerState::NeedsAuth;
    let text = search_text(&q, &page, &skipped);
    assert!(text.len() < 1_000, "{} characters: {text}", text.len());
    assert!(
        text.contains("Not searched: 10000 servers — 9999 not started, nothing cached yet (s00000, s00001,"),
        "{text}"
    );
    assert!(text.contains(", s00020, …); 1 needs auth (s00005)."), "{text}");
}

#[test]
fn categories_are_kebab_case_and_distinct() {
    let names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        names,
        [
            "needs-auth",
            "timeout",
            "connection",
            "unknown-tool",
            "validation",
            "approval",
            "config",
            "untrusted",
            "input-required",
            "tool-error",
            "script",
            "other"
        ]
    );
}

#[test]
fn error_results_carry_text_first_and_category_in_meta() {
    let e = ProxyError::new(
        Category::Timeout,
        "tool `slow_op` on server `slow` did not answer within 60s",
    )
    .with_hint("The server is still running; try again or raise `timeout`.");
    let result = serde_json::to_value(e.clone().into_call_result()).unwrap();
    assert_eq!(
        result,
        json!({
            "content": [{"type": "text", "text": "Tool `slow_op` on server `slow` did not answer within 60s\nThe server is still running; try again or raise `timeout`.\ncategory: timeout"}],
            "isError": true,
            "_meta": {"pimcp/category": "timeout"},
            "resultType": "complete"
        })
    );
    let from_error = ProxyError::from(Error::EmptyQuery);
    assert_eq!(from_error.category, Category::Validation);
}

#[test]
fn status_snapshot() {
    let servers = vec![
        line("everything", ServerState::Ready, Some(20), None),
        line("github", ServerState::Cached, Some(25), None),
        line("linear", ServerState::NeedsAuth, None, None),
        line(
            "broken",
            ServerState::Failed {
                ago: Duration::from_secs(12),
            },
            Some(3),
            Some("connection refused\nmore"),
        ),
        line(
            "flaky",
            ServerState::Backoff {
                retry_in: Duration::from_secs(4),
            },
            None,
            Some("exit status 1"),
        ),
        line("slow", ServerState::Connecting, None, None),
        line("old", ServerState::Disabled, Some(2), None),
        line("proj", ServerState::Untrusted, None, None),
        line("fresh", ServerState::NotStarted, None, None),
    ];
    insta::assert_snapshot!(status_text(&servers), @r#"
    MCP: 1 of 9 servers ready, 50 tools

    ✓ everything: 20 tools
    ○ github: 25 tools, cached
    ⚠ linear: needs auth — mcp({action: "auth-start", server: "linear"})
    ✗ broken: failed 12s ago, 3 tools cached: connection refused
    ↻ flaky: backoff, next try in 4s: exit status 1
    ◌ slow: connecting
    ⊘ old: disabled
    ⊗ proj: untrusted — project config is not trusted (`pimcp-run trust`)
    · fresh: not started, nothing cached yet

    mcp({server: "name"}) lists tools · mcp({search: "words"}) finds tools
    "#);
    assert!(status_text(&[]).starts_with("MCP: no servers configured."));
}

#[test]
fn list_snapshot() {
    let echo = tool("everything", "echo", "Echoes back the input string", json!({}));
    let long = tool(
        "everything",
        "annotatedMessage",
        "Demonstrates how annotations can be used to provide metadata about content, with priorities and audiences\nSecond line",
        json!({}),
    );
    let instructions = "Use echo for testing. ".repeat(20);
    insta::assert_snapshot!(list_text("everything", &ServerState::Cached, &[&echo, &long], Some(&instructions)), @r#"
    everything: 2 tools (from cache, not connected; mcp({connect: "everything"}) connects)

    - everything_annotatedMessage — Demonstrates how annotations can be used to provide metadata about content,…
    - everything_echo — Echoes back the input string

    Instructions: Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for…
    mcp({instructions: "everything"}) shows them in full.
    "#);
    assert_eq!(list_text("empty", &ServerState::Ready, &[], None), "empty: no tools");
    assert_eq!(instructions_text("s", Some("  Do X.  ")), "s instructions:\n\nDo X.");
    assert_eq!(instructions_text("s", None), "s provides no instructions.");
}

fn catalog() -> SearchIndex {
    SearchIndex::build(vec![
        tool(
            "everything",
            "echo",
            "Echoes back the input string",
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        ),
        tool(
            "everything",
            "echo_twice",
            "Echoes twice",
            json!({"type": "object", "properties": {"message": {"type": "string"}, "n": {"type": "integer"}}, "required": ["message"]}),
        ),
        tool("everything", "echo_loud", "Echoes in capitals", json!({})),
        tool(
            "everything",
            "add",
            "Adds two numbers",
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        ),
    ])
}

#[test]
fn search_snapshots() {
    let index = catalog();
    let q = SearchQuery::new("echo").with_limit(2);
    let page = index.search(&q).unwrap();
    let skipped = vec![SkippedServer {
        name: "linear".into(),
        state: ServerState::NeedsAuth,
    }];
    insta::assert_snapshot!(search_text(&q, &page, &skipped), @r#"
    3 tools match "echo" (showing 1–2):

    everything_echo — Echoes back the input string
      {message: string}

    everything_echo_loud — Echoes in capitals
      {}

    next: offset 2
    Not searched: linear (needs auth).
    "#);
    let q = q.with_offset(2);
    let page = index.search(&q).unwrap();
    insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"
    3 tools match "echo" (showing 3–3):

    everything_echo_twice — Echoes twice
      {message: string, n?: number}
    "#);
    let q = q.with_offset(9);
    let page = index.search(&q).unwrap();
    insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"No results at offset 9: 3 tools match "echo"; use an offset below 3."#);
    let q = SearchQuery::new("").with_server("everything").with_limit(1);
    let page = index.search(&q).unwrap();
    insta::assert_snapshot!(search_text(&q, &page, &[]), @r"
    4 tools on everything (showing 1–1):

    everything_add — Adds two numbers
      {a: number, b: number}

    next: offset 1
    ");
    let q = SearchQuery::new("^everything_a").with_regex(true);
    let page = index.search(&q).unwrap();
    assert!(search_text(&q, &page, &[]).starts_with("1 tool match /^everything_a/:\n"));
}

#[test]
fn empty_search_explains_itself() {
    let index = catalog();
    let q = SearchQuery::new("calendar");
    let page = index.search(&q).unwrap();
    let skipped = vec![
        SkippedServer {
            name: "gcal".into(),
            state: ServerState::Connecting,
        },
        SkippedServer {
            name: "outlook".into(),
            state: ServerState::NeedsAuth,
        },
        SkippedServer {
            name: "caldav".into(),
            state: ServerState::Failed {
                ago: Duration::from_secs(75),
            },
        },
        SkippedServer {
            name: "ical".into(),
            state: ServerState::Disabled,
        },
        SkippedServer {
            name: "proj".into(),
            state: ServerState::Untrusted,
        },
        SkippedServer {
            name: "new".into(),
            state: ServerState::NotStarted,
        },
    ];
    insta::assert_snapshot!(search_text(&q, &page, &skipped), @r#"
    No tools match "calendar".
    Not searched: gcal (connecting), outlook (needs auth), caldav (failed 1m 15s ago), ical (disabled), proj (untrusted), new (not started, nothing cached yet). Servers still connecting may have matches; retry in a moment. mcp({connect: "name"}) loads a server's tools.
    "#);
    insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"
    No tools match "calendar".
    Try other or fewer words, or regex: true for a pattern.
    "#);
    let q = SearchQuery::new("calendar").with_server("everything");
    let page = index.search(&q).unwrap();
    assert_eq!(
        search_text(&q, &page, &[]).lines().next(),
        Some("No tools match \"calendar\" on everything.")
    );
}

#[test]
fn helpers_table() {
    for (secs, want) in [
        (0, "0s"),
        (59, "59s"),
        (60, "1m 0s"),
        (3599, "59m 59s"),
        (3600, "1h 0m"),
        (90_000, "1d 1h"),
    ] {
        assert_eq!(human_duration(Duration::from_secs(secs)), want);
    }
    for (text, max, want) in [
        ("short", 10, "short"),
        ("hello wonderful world", 15, "hello wonderful…"),
        ("abcdefghij", 4, "abcd…"),
        ("漢字漢字漢字", 3, "漢字漢…"),
        ("one two", 5, "one t…"),
    ] {
        assert_eq!(truncate_at_word(text, max), want, "{text}/{max}");
    }
    assert_eq!(one_line("  first\nsecond", 80), "first");
    assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
}

#[test]
fn search_marks_tools_that_need_approval() {
    let mut gated = tool("everything", "delete_all", "Deletes everything", json!({}));
    gated.needs_approval = true;
    let index = SearchIndex::build(vec![
        gated,
        tool("everything", "delete_one", "Deletes one thing", json!({})),
    ]);
    let q = SearchQuery::new("delete");
    let page = index.search(&q).unwrap();
    insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"
    2 tools match "delete":

    everything_delete_all [needs approval] — Deletes everything
      {}

    everything_delete_one — Deletes one thing
      {}
    "#);
}
