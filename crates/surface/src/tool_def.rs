//! The `mcp` tool definition: name, description and input schema, at most [`MAX_DEFINITION_CHARS`] characters as
//! serialized in `tools/list` (plus [`MAX_DESCRIPTIONS_CHARS`] when servers have descriptions), teaching every mode
//! and naming the servers with their short descriptions. A pure function of [`ToolDefOptions`], so it is byte-stable for
//! prompt caching.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

/// The proxy tool's name.
pub const TOOL_NAME: &str = "mcp";
/// Upper bound of the serialized definition (`{"name","description","inputSchema"}`), in characters.
pub const MAX_DEFINITION_CHARS: usize = 1000;

/// The description without the server list. ASCII only and free of `"` so that characters equal bytes and JSON
/// escaping adds only the newlines' backslashes.
const DESCRIPTION: &str = "\
MCP server gateway. Set one mode; the first listed wins:
action auth-start|auth-complete + server: OAuth (complete: args.redirectUrl)
tool + args: call a tool; args = its parameters
task H: follow a call still running as task H
connect S: (re)connect server S
describe T: full schema of tool T
instructions S: usage notes of server S
search + server?, regex?, limit?, offset?: find tools
server S: list its tools
nothing: status of all servers
Unsure of a tool? Search or describe it first.";

/// The longest server description the definition and status show (longer ones are cut with `…`).
pub const MAX_SERVER_DESCRIPTION_CHARS: usize = 80;
/// How many characters server descriptions may add to the definition beyond [`MAX_DEFINITION_CHARS`]; servers
/// whose names and descriptions do not fit are counted (`+N more`) like names.
pub const MAX_DESCRIPTIONS_CHARS: usize = 1000;

/// What the definition depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDefOptions {
    /// Configured server names (any order; shown sorted, as many as fit).
    pub servers: Vec<String>,
    /// Server descriptions (`description` in the config) by server name, shown after the name.
    pub descriptions: std::collections::BTreeMap<String, String>,
}

impl ToolDefOptions {
    /// The names and descriptions of `config`'s servers.
    pub fn from_config(config: &pimcp_config::Config) -> ToolDefOptions {
        ToolDefOptions {
            servers: config.servers.iter().map(|s| s.name.clone()).collect(),
            descriptions: config
                .servers
                .iter()
                .filter_map(|s| Some((s.name.clone(), s.description.clone()?)))
                .collect(),
        }
    }
}

/// A server description as the model reads it: one line, at most [`MAX_SERVER_DESCRIPTION_CHARS`] characters.
/// `None` for an empty one.
pub fn short_description(description: &str) -> Option<String> {
    let line = description.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return None;
    }
    if line.chars().count() <= MAX_SERVER_DESCRIPTION_CHARS {
        return Some(line);
    }
    let cut: String = line.chars().take(MAX_SERVER_DESCRIPTION_CHARS - 1).collect();
    Some(format!("{}…", cut.trim_end()))
}

/// The `mcp` tool as `tools/list` sends it.
pub fn mcp_tool(options: &ToolDefOptions) -> Tool {
    let mut servers: Vec<&str> = options
        .servers
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    servers.sort_unstable();
    servers.dedup();
    let described: Vec<String> = servers
        .iter()
        .map(
            |name| match options.descriptions.get(*name).and_then(|d| short_description(d)) {
                Some(d) => format!("{name} ({d})"),
                None => (*name).to_owned(),
            },
        )
        .collect();
    let servers: Vec<&str> = described.iter().map(String::as_str).collect();
    let budget = if options.descriptions.is_empty() {
        MAX_DEFINITION_CHARS
    } else {
        MAX_DEFINITION_CHARS + MAX_DESCRIPTIONS_CHARS
    };
    // Show as many server names as fit; the rest are counted. Each name shown adds at least three characters
    // (`, x`) while the `+N more` count loses at most one, so the length grows with the number shown and the
    // largest count that fits is found by bisection: O(log n) builds, not one per count.
    let fits = |shown: usize| serialized_len(&build(&servers[..shown], servers.len() - shown)) <= budget;
    if fits(servers.len()) {
        return build(&servers, 0);
    }
    if !fits(0) {
        return build(&[], 0);
    }
    // Invariant: `fits(lo)` and not `fits(hi)`.
    let (mut lo, mut hi) = (0, servers.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    build(&servers[..lo], servers.len() - lo)
}

/// The serialized definition, exactly as measured against [`MAX_DEFINITION_CHARS`].
pub fn mcp_tool_json(options: &ToolDefOptions) -> String {
    serde_json::to_string(&mcp_tool(options)).unwrap_or_default()
}

fn build(servers: &[&str], hidden: usize) -> Tool {
    let mut description = DESCRIPTION.to_string();
    if !servers.is_empty() || hidden > 0 {
        description.push_str("\nServers: ");
        description.push_str(&servers.join(", "));
        if hidden > 0 {
            description.push_str(&format!("{}+{hidden} more", if servers.is_empty() { "" } else { ", " }));
        }
    }
    Tool::new(TOOL_NAME, description, Arc::new(input_schema()))
}

fn input_schema() -> JsonObject {
    let string = || json!({"type": "string"});
    let schema = json!({
        "type": "object",
        "properties": {
            "tool": string(),
            "args": {"type": "object"},
            "task": string(),
            "server": string(),
            "search": string(),
            "regex": {"type": "boolean"},
            "limit": {"type": "integer"},
            "offset": {"type": "integer"},
            "describe": string(),
            "instructions": string(),
            "connect": string(),
            "action": {"type": "string", "enum": ["auth-start", "auth-complete"]}
        }
    });
    match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn serialized_len(tool: &Tool) -> usize {
    serde_json::to_string(tool).map_or(usize::MAX, |s| s.chars().count())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn definition_snapshot_and_size() {
        let json = mcp_tool_json(&ToolDefOptions::default());
        let len = json.chars().count();
        assert_eq!(len, json.len(), "ASCII only");
        assert!(len <= MAX_DEFINITION_CHARS, "{len}");
        assert_eq!(len, 944, "the exact size; update docs when it changes");
        insta::assert_snapshot!(json, @r###"{"name":"mcp","description":"MCP server gateway. Set one mode; the first listed wins:\naction auth-start|auth-complete + server: OAuth (complete: args.redirectUrl)\ntool + args: call a tool; args = its parameters\ntask H: follow a call still running as task H\nconnect S: (re)connect server S\ndescribe T: full schema of tool T\ninstructions S: usage notes of server S\nsearch + server?, regex?, limit?, offset?: find tools\nserver S: list its tools\nnothing: status of all servers\nUnsure of a tool? Search or describe it first.","inputSchema":{"type":"object","properties":{"tool":{"type":"string"},"args":{"type":"object"},"task":{"type":"string"},"server":{"type":"string"},"search":{"type":"string"},"regex":{"type":"boolean"},"limit":{"type":"integer"},"offset":{"type":"integer"},"describe":{"type":"string"},"instructions":{"type":"string"},"connect":{"type":"string"},"action":{"type":"string","enum":["auth-start","auth-complete"]}}}}"###);
    }

    #[test]
    fn every_parameter_and_mode_is_taught() {
        let tool = mcp_tool(&ToolDefOptions::default());
        let description = tool.description.clone().unwrap_or_default();
        let properties = tool.input_schema["properties"].as_object().unwrap();
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "tool",
                "args",
                "task",
                "server",
                "search",
                "regex",
                "limit",
                "offset",
                "describe",
                "instructions",
                "connect",
                "action"
            ]
        );
        for name in names
            .iter()
            .chain(&["auth-start", "auth-complete", "redirectUrl", "status"])
        {
            assert!(description.contains(name), "description does not mention {name}");
        }
    }

    #[test]
    fn servers_are_listed_while_they_fit_and_output_is_byte_stable() {
        let few = ToolDefOptions {
            servers: vec!["github".into(), "everything".into(), "github".into()],
            ..ToolDefOptions::default()
        };
        let json = mcp_tool_json(&few);
        assert!(json.contains("\\nServers: everything, github\""), "{json}");
        let reordered = ToolDefOptions {
            servers: vec!["everything".into(), "github".into()],
            ..ToolDefOptions::default()
        };
        assert_eq!(mcp_tool_json(&reordered), json, "a pure function of the set of servers");

        let many = ToolDefOptions {
            servers: (0..500).map(|i| format!("server-number-{i:03}")).collect(),
            ..ToolDefOptions::default()
        };
        let json = mcp_tool_json(&many);
        assert!(json.chars().count() <= MAX_DEFINITION_CHARS, "{}", json.chars().count());
        assert!(json.contains("server-number-000, "), "{json}");
        assert!(json.contains(" more\""), "{json}");
        let odd = ToolDefOptions {
            servers: vec!["\"quoted\"\n".into(), "日本語サーバー".into()],
            ..ToolDefOptions::default()
        };
        assert!(mcp_tool_json(&odd).chars().count() <= MAX_DEFINITION_CHARS);
    }

    #[test]
    fn server_descriptions_follow_their_names_short_and_byte_stable() {
        let options = ToolDefOptions {
            servers: vec!["memory".into(), "files".into(), "everything".into()],
            descriptions: [
                ("files".to_string(), "Read and write files\nunder ~/work".to_string()),
                ("memory".to_string(), "A knowledge graph. ".repeat(10)),
            ]
            .into_iter()
            .collect(),
        };
        let json = mcp_tool_json(&options);
        assert!(
            json.contains(
                "\\nServers: everything, files (Read and write files under ~/work), memory (A knowledge graph."
            ),
            "{json}"
        );
        assert!(json.contains("…)\""), "a long description is cut: {json}");
        assert_eq!(mcp_tool_json(&options.clone()), json);
        let long = short_description(&"x".repeat(500)).unwrap();
        assert_eq!(long.chars().count(), MAX_SERVER_DESCRIPTION_CHARS);
        assert_eq!(short_description(" \n "), None);
        // Many described servers stay within the larger budget and are counted beyond it.
        let many = ToolDefOptions {
            servers: (0..300).map(|i| format!("s{i:03}")).collect(),
            descriptions: (0..300)
                .map(|i| (format!("s{i:03}"), "does things ".repeat(8)))
                .collect(),
        };
        let json = mcp_tool_json(&many);
        assert!(json.chars().count() <= MAX_DEFINITION_CHARS + MAX_DESCRIPTIONS_CHARS);
        assert!(json.contains(" more\""), "{json}");
    }
}
