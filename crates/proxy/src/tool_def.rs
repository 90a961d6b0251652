//! The `mcp` tool definition: name, description and input schema, at most [`MAX_DEFINITION_CHARS`] characters as
//! serialized in `tools/list`, teaching every mode. A pure function of [`ToolDefOptions`], so it is byte-stable for
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
connect S: (re)connect server S
describe T: full schema of tool T
instructions S: usage notes of server S
search + server?, regex?, limit?, offset?: find tools
server S: list its tools
nothing: status of all servers
Unsure of a tool? Search or describe it first.";

/// What the definition depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDefOptions {
    /// Configured server names (any order; shown sorted, as many as fit).
    pub servers: Vec<String>,
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
    // Show as many server names as fit; the rest are counted. Each name shown adds at least three characters
    // (`, x`) while the `+N more` count loses at most one, so the length grows with the number shown and the
    // largest count that fits is found by bisection: O(log n) builds, not one per count.
    let fits = |shown: usize| serialized_len(&build(&servers[..shown], servers.len() - shown)) <= MAX_DEFINITION_CHARS;
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
        assert_eq!(len, 872, "the exact size; update docs when it changes");
        insta::assert_snapshot!(json, @r###"{"name":"mcp","description":"MCP server gateway. Set one mode; the first listed wins:\naction auth-start|auth-complete + server: OAuth (complete: args.redirectUrl)\ntool + args: call a tool; args = its parameters\nconnect S: (re)connect server S\ndescribe T: full schema of tool T\ninstructions S: usage notes of server S\nsearch + server?, regex?, limit?, offset?: find tools\nserver S: list its tools\nnothing: status of all servers\nUnsure of a tool? Search or describe it first.","inputSchema":{"type":"object","properties":{"tool":{"type":"string"},"args":{"type":"object"},"server":{"type":"string"},"search":{"type":"string"},"regex":{"type":"boolean"},"limit":{"type":"integer"},"offset":{"type":"integer"},"describe":{"type":"string"},"instructions":{"type":"string"},"connect":{"type":"string"},"action":{"type":"string","enum":["auth-start","auth-complete"]}}}}"###);
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
        };
        let json = mcp_tool_json(&few);
        assert!(json.contains("\\nServers: everything, github\""), "{json}");
        let reordered = ToolDefOptions {
            servers: vec!["everything".into(), "github".into()],
        };
        assert_eq!(mcp_tool_json(&reordered), json, "a pure function of the set of servers");

        let many = ToolDefOptions {
            servers: (0..500).map(|i| format!("server-number-{i:03}")).collect(),
        };
        let json = mcp_tool_json(&many);
        assert!(json.chars().count() <= MAX_DEFINITION_CHARS, "{}", json.chars().count());
        assert!(json.contains("server-number-000, "), "{json}");
        assert!(json.contains(" more\""), "{json}");
        let odd = ToolDefOptions {
            servers: vec!["\"quoted\"\n".into(), "日本語サーバー".into()],
        };
        assert!(mcp_tool_json(&odd).chars().count() <= MAX_DEFINITION_CHARS);
    }
}
