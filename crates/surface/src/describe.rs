//! The `describe` texts: one tool's full description and schemas, and the errors for unknown and ambiguous names
//! (with suggestions from [`crate::SearchIndex::suggest`]).

use serde_json::Value;

use crate::search::ToolDoc;
use crate::shapes::shape;
use crate::text::{Category, ProxyError, quoted};

/// The text of `mcp({describe})`: name, server and original name, the full description, the parameter shape, the
/// full input schema and, when the tool has one, the output schema.
pub fn describe_text(doc: &ToolDoc, output_schema: Option<&Value>) -> String {
    let mut out = format!("{}\nServer: {}", doc.name, doc.server);
    if doc.original_name != doc.name {
        out.push_str(&format!(" (tool {})", quoted(&doc.original_name)));
    }
    out.push('\n');
    let description = doc.description.trim();
    if !description.is_empty() {
        out.push_str(&format!("\n{description}\n"));
    }
    let input_schema = doc.input_schema_value();
    let has_schema = input_schema.as_object().is_some_and(|o| !o.is_empty());
    out.push_str(&format!(
        "\nParameters: {}\n",
        shape(has_schema.then_some(&input_schema))
    ));
    if has_schema {
        out.push_str(&format!("\nInput schema:\n{}\n", pretty(&input_schema)));
    }
    if let Some(schema) = output_schema {
        out.push_str(&format!("\nOutput schema:\n{}\n", pretty(schema)));
    }
    if doc.needs_approval {
        out.push_str(&format!("\n{APPROVAL_NOTE}\n"));
    }
    out.push_str(&format!("\nCall: mcp({{tool: {}, args: {{…}}}})", quoted(&doc.name)));
    out
}

/// What `describe` says about a tool `approveTools` gates.
pub const APPROVAL_NOTE: &str = "Needs approval: the user is asked before each call (approveTools).";

/// `Tool "x" not found[ on server "s"].` with suggestions and how to search. Category `unknown-tool`.
pub fn tool_not_found(name: &str, server: Option<&str>, suggestions: &[&ToolDoc]) -> ProxyError {
    let mut message = format!("tool {} not found", quoted(name));
    if let Some(server) = server {
        message.push_str(&format!(" on server {}", quoted(server)));
    }
    message.push('.');
    let mut error = ProxyError::new(Category::UnknownTool, message);
    if !suggestions.is_empty() {
        let names: Vec<&str> = suggestions.iter().map(|d| d.name.as_str()).collect();
        error = error.with_hint(format!("Did you mean: {}?", names.join(", ")));
    }
    error.with_hint("mcp({search: \"words\"}) searches all tools.")
}

/// `Tool "x" exists on several servers` listing them. Category `validation`: the call needs `server` or a full name.
pub fn tool_ambiguous(name: &str, candidates: &[&ToolDoc]) -> ProxyError {
    let list: Vec<String> = candidates
        .iter()
        .map(|d| format!("{} (server {})", d.name, d.server))
        .collect();
    ProxyError::new(
        Category::Validation,
        format!("tool {} exists on several servers: {}.", quoted(name), list.join(", ")),
    )
    .with_hint("Pass `server`, or use the full tool name.")
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::search::SearchIndex;

    fn doc(server: &str, name: &str, description: &str, schema: Value) -> ToolDoc {
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

    #[test]
    fn describe_snapshot() {
        let d = doc(
            "everything",
            "get-sum",
            "Returns the sum of two numbers",
            json!({"type": "object", "properties": {"a": {"type": "number", "description": "First"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
        );
        let output = json!({"type": "object", "properties": {"sum": {"type": "number"}}});
        insta::assert_snapshot!(describe_text(&d, Some(&output)), @r#"
        everything_get-sum
        Server: everything (tool "get-sum")

        Returns the sum of two numbers

        Parameters: {a: number, b: number}

        Input schema:
        {
          "type": "object",
          "properties": {
            "a": {
              "type": "number",
              "description": "First"
            },
            "b": {
              "type": "number"
            }
          },
          "required": [
            "a",
            "b"
          ]
        }

        Output schema:
        {
          "type": "object",
          "properties": {
            "sum": {
              "type": "number"
            }
          }
        }

        Call: mcp({tool: "everything_get-sum", args: {…}})
        "#);
        let bare = ToolDoc {
            name: "ping".into(),
            original_name: "ping".into(),
            ..doc("s", "ping", "", json!(null))
        };
        insta::assert_snapshot!(describe_text(&bare, None), @r#"
        ping
        Server: s

        Parameters: {}

        Call: mcp({tool: "ping", args: {…}})
        "#);
    }

    #[test]
    fn unknown_names_suggest_typo_fixes() {
        let index = SearchIndex::build(vec![
            doc("everything", "echo", "Echoes back the input string", json!({})),
            doc("everything", "add", "Adds two numbers", json!({})),
        ]);
        let suggestions = index.suggest("everything_ecoh", 5);
        insta::assert_snapshot!(tool_not_found("everything_ecoh", None, &suggestions).text(), @r#"
        Tool "everything_ecoh" not found.
        Did you mean: everything_echo?
        mcp({search: "words"}) searches all tools.
        category: unknown-tool
        "#);
        let none = tool_not_found("zzz", Some("everything"), &[]).text();
        assert!(
            none.starts_with("Tool \"zzz\" not found on server \"everything\".\nmcp({search"),
            "{none}"
        );
        let a = doc("a", "echo", "", json!({}));
        let b = doc("b", "echo", "", json!({}));
        insta::assert_snapshot!(tool_ambiguous("echo", &[&a, &b]).text(), @r#"
        Tool "echo" exists on several servers: a_echo (server a), b_echo (server b).
        Pass `server`, or use the full tool name.
        category: validation
        "#);
    }
}
