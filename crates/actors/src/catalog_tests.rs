//! Tests of `catalog.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use pimcp_config::{StdioTransport, Transport};

pub(crate) fn server(name: &str) -> ServerConfig {
    ServerConfig::new(name, Transport::Stdio(StdioTransport::new("true", Vec::new())))
}

pub(crate) fn tool(name: &str) -> ToolInfo {
    Tool::new(name.to_owned(), format!("the {name} tool"), Arc::new(JsonObject::new())).into()
}

fn meta(tools: &[&str]) -> ServerMetadata {
    ServerMetadata {
        tools: tools.iter().map(|t| tool(t)).collect(),
        ..Default::default()
    }
}

fn build(servers: &[(ServerConfig, Option<ServerMetadata>)], mode: ToolPrefix) -> Catalog {
    let inputs: Vec<ServerInput<'_>> = servers
        .iter()
        .map(|(c, m)| ServerInput {
            config: c,
            metadata: m.as_ref().map(|m| (m, MetadataSource::Live)),
        })
        .collect();
    Catalog::build(mode, &inputs)
}

#[test]
fn prefixed_and_original_names_resolve() {
    let c = build(
        &[(server("everything"), Some(meta(&["echo", "get-sum"])))],
        ToolPrefix::Server,
    );
    let names: Vec<_> = c.tools().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["everything_echo", "everything_get-sum"]);
    let found = |r: Resolution| match r {
        Resolution::Found(t) => t.name.clone(),
        other => panic!("not found: {other:?}"),
    };
    assert_eq!(found(c.resolve("everything_echo", None)), "everything_echo");
    assert_eq!(found(c.resolve("echo", None)), "everything_echo");
    assert_eq!(found(c.resolve("everything_get_sum", None)), "everything_get-sum");
    assert_eq!(found(c.resolve("get_sum", Some("everything"))), "everything_get-sum");
    assert_eq!(found(c.resolve("echo", Some("everything"))), "everything_echo");
}

#[test]
fn ambiguity_lists_candidates() {
    let c = build(
        &[
            (server("a"), Some(meta(&["echo"]))),
            (server("b"), Some(meta(&["echo"]))),
        ],
        ToolPrefix::Server,
    );
    assert_eq!(
        c.resolve("echo", None),
        Resolution::Ambiguous(vec!["a_echo".into(), "b_echo".into()])
    );
    assert!(matches!(c.resolve("a_echo", None), Resolution::Found(_)));
}

#[test]
fn collisions_are_dropped() {
    let c = build(
        &[
            (server("a"), Some(meta(&["echo"]))),
            (server("b"), Some(meta(&["echo", "x"]))),
        ],
        ToolPrefix::None,
    );
    assert_eq!(c.collisions(), ["echo"]);
    assert_eq!(c.tools().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["x"]);
}

#[test]
fn filters_apply_and_resources_become_tools() {
    let mut s = server("docs");
    s.exclude_tools = vec!["*secret*".into()];
    let mut m = meta(&["search", "secret_tool"]);
    m.resources = vec![Resource::new("file:///README.md", "README.md")].into();
    let c = build(&[(s.clone(), Some(m.clone()))], ToolPrefix::Server);
    let names: Vec<_> = c.tools().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["docs_search", "docs_read_readme_md"]);
    let read = c.get("docs_read_readme_md").unwrap();
    assert_eq!(read.resource_uri.as_deref(), Some("file:///README.md"));
    assert!(read.is_replay_safe());
    s.expose_resources = false;
    let c = build(&[(s, Some(m))], ToolPrefix::Server);
    assert_eq!(c.tools().count(), 1);
}

#[test]
fn unknown_metadata_asks_for_discovery() {
    let c = build(
        &[(server("lazy"), None), (server("known"), Some(meta(&["a"])))],
        ToolPrefix::Server,
    );
    assert_eq!(
        c.resolve("lazy_thing", None),
        Resolution::NeedsDiscovery(vec!["lazy".into()])
    );
    assert_eq!(
        c.resolve("thing", None),
        Resolution::NeedsDiscovery(vec!["lazy".into()])
    );
    assert_eq!(
        c.resolve("thing", Some("lazy")),
        Resolution::NeedsDiscovery(vec!["lazy".into()])
    );
    assert_eq!(c.resolve("x", Some("nope")), Resolution::UnknownServer("nope".into()));
}

#[test]
fn cached_metadata_still_discovers_implied_server() {
    let s = server("gh");
    let m = meta(&["a"]);
    let inputs = [ServerInput {
        config: &s,
        metadata: Some((&m, MetadataSource::Cache)),
    }];
    let c = Catalog::build(ToolPrefix::Server, &inputs);
    assert_eq!(
        c.resolve("gh_new_tool", None),
        Resolution::NeedsDiscovery(vec!["gh".into()])
    );
}

#[test]
fn typos_get_suggestions() {
    let c = build(
        &[(
            server("everything"),
            Some(meta(&["echo", "add", "longRunningOperation"])),
        )],
        ToolPrefix::Server,
    );
    match c.resolve("everything_ecoh", None) {
        Resolution::NotFound {
            suggestions,
            server,
            available,
        } => {
            assert_eq!(suggestions.first().map(String::as_str), Some("everything_echo"));
            assert_eq!(server.as_deref(), Some("everything"));
            assert_eq!(available.len(), 3);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn longest_prefix_wins() {
    let c = build(
        &[
            (server("git"), Some(meta(&["hub_x"]))),
            (server("git_hub"), Some(meta(&["x"]))),
        ],
        ToolPrefix::Server,
    );
    assert_eq!(c.implied_servers("git_hub_x"), ["git_hub", "git"]);
}
