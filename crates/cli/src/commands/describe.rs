//! `pimcp-run describe TOOL [--server S] [--json]`: one tool in full (description, parameter shape, input and output
//! schemas). Names resolve like calls (prefixed, original, `-`/`_` fuzzy; an implied server is connected when
//! nothing is known about it); an unknown name exits 2 with suggestions.

use clap::Args;
use pimcp_proxy::{ToolInfo, shape};
use serde_json::{Value, json};

use super::session::{SessionOptions, block_on, with_session};
use super::{Ctx, Failure};
use crate::EXIT_OK;
use crate::output::{Colour, Style, print_json};

#[derive(Debug, Args)]
pub(crate) struct DescribeArgs {
    /// The tool's name (`fixture_echo`, or `echo` with --server).
    pub tool: String,
    /// Resolve the name within this server only.
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
    /// Machine-readable output (`pimcp/describe/v1`).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, args: DescribeArgs) -> anyhow::Result<u8> {
    block_on(with_session(ctx, SessionOptions { progress: true }, async |session| {
        let info = session
            .proxy
            .describe(&args.tool, args.server.as_deref())
            .await
            .map_err(Failure::from)?;
        session.progress.stop().await;
        if args.json {
            print_json(&describe_json(&info))?;
        } else {
            out!("{}", render(&info, Style::stdout()));
        }
        Ok(EXIT_OK)
    }))
}

fn has_schema(schema: &Value) -> bool {
    schema.as_object().is_some_and(|o| !o.is_empty())
}

/// `pimcp/describe/v1`.
fn describe_json(info: &ToolInfo) -> Value {
    let doc = &info.doc;
    let input_schema = doc.input_schema_value();
    json!({
        "schema": "pimcp/describe/v1",
        "name": doc.name,
        "server": doc.server,
        "originalName": doc.original_name,
        "title": info.title,
        "description": doc.description,
        "params": shape(has_schema(&input_schema).then_some(&input_schema)),
        "inputSchema": input_schema,
        "outputSchema": info.output_schema,
        "resourceUri": info.resource_uri,
    })
}

fn render(info: &ToolInfo, style: Style) -> String {
    let doc = &info.doc;
    let mut out = style.paint(&doc.name, Some(Colour::Bold));
    out.push_str(&format!("  (server {}", doc.server));
    if doc.original_name != doc.name {
        out.push_str(&format!(", tool {}", doc.original_name));
    }
    out.push_str(")\n");
    if let Some(title) = info.title.as_deref().filter(|t| !t.is_empty()) {
        out.push_str(&format!("{title}\n"));
    }
    let description = doc.description.trim();
    if !description.is_empty() {
        out.push_str(&format!("\n{description}\n"));
    }
    let input_schema = doc.input_schema_value();
    let with_schema = has_schema(&input_schema);
    out.push_str(&format!(
        "\nParameters: {}\n",
        shape(with_schema.then_some(&input_schema))
    ));
    if with_schema {
        out.push_str(&format!("\nInput schema:\n{}\n", pretty(&input_schema)));
    }
    if let Some(schema) = &info.output_schema {
        out.push_str(&format!("\nOutput schema:\n{}\n", pretty(schema)));
    }
    if let Some(uri) = &info.resource_uri {
        out.push_str(&format!("\nReads resource {uri}; takes no arguments.\n"));
    }
    out.push_str(&format!(
        "\nCall: pimcp-run call {} '{}'\n",
        doc.name,
        example_args(&input_schema)
    ));
    out
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// `{"text": "…"}`-style arguments naming the required parameters (all of them when none is required).
fn example_args(schema: &Value) -> String {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let names: Vec<&str> = match (properties, required.is_empty()) {
        (_, false) => required,
        (Some(p), true) => p.keys().map(String::as_str).collect(),
        (None, true) => Vec::new(),
    };
    let parts: Vec<String> = names
        .iter()
        .map(|name| {
            let kind = properties
                .and_then(|p| p.get(*name))
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("string");
            let value = match kind {
                "number" | "integer" => "0",
                "boolean" => "false",
                "array" => "[]",
                "object" => "{}",
                _ => "\"…\"",
            };
            format!("{}: {value}", Value::from(*name))
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_arguments_name_required_parameters_with_typed_placeholders() {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "n": {"type": "integer"}, "opt": {"type": "boolean"}},
            "required": ["text", "n"],
        });
        assert_eq!(example_args(&schema), r#"{"text": "…", "n": 0}"#);
        let optional = json!({"type": "object", "properties": {"a": {"type": "number"}}});
        assert_eq!(example_args(&optional), r#"{"a": 0}"#);
        assert_eq!(example_args(&json!({})), "{}");
    }
}
