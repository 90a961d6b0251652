//! `pimcp-run call TOOL [ARGS_JSON|-] [--server S] [--timeout SECS] [--json]`: call one tool exactly as the `mcp`
//! tool would (name resolution, lazy connect, argument validation against the tool's schema, approval, rendering),
//! but without the output guard: a person gets the whole text. Images and binary payloads are written to a fresh
//! private directory and their paths printed. The exit code follows the result's category.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use clap::Args;
use pimcp_proxy::{CallContext, ProxyResponse, json_kind};
use rmcp::model::ContentBlock;
use serde_json::{Map, Value, json};

use super::session::{SessionOptions, block_on, with_session};
use super::{Ctx, exit_code_for_category, usage};
use crate::EXIT_OK;
use crate::output::print_json;

/// Prefix of the directory images and binary results are saved in (under the system temporary directory).
const SAVE_DIR_PREFIX: &str = "pimcp-run-output-";

#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// The tool's name (`fixture_echo`, or `echo` with --server).
    pub tool: String,
    /// The arguments as one JSON object (`'{"text": "hi"}'`); `-` reads them from stdin; default `{}`.
    #[arg(value_name = "ARGS_JSON")]
    pub args: Option<String>,
    /// Resolve the name within this server only.
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
    /// Give up after this many seconds without a result or progress (default: the server's tool timeout).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Machine-readable output (`pimcp/call/v1`), also for error results.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, args: CallArgs) -> anyhow::Result<u8> {
    let arguments = parse_arguments(args.args.as_deref())?;
    let timeout = match args.timeout {
        Some(secs) if secs.is_finite() && secs > 0.0 => Some(Duration::from_secs_f64(secs)),
        Some(_) => return Err(usage("`--timeout` takes a positive number of seconds")),
        None => None,
    };
    block_on(with_session(ctx, SessionOptions { progress: true }, async |session| {
        session.progress.set_label(format!("calling {}", args.tool));
        let call_ctx = CallContext {
            timeout,
            ..CallContext::default()
        };
        let handle = session.handle();
        let (resolved, mut response) = match handle.resolve(&args.tool, args.server.as_deref()).await {
            Ok(tool) => {
                let response = session.proxy.call_resolved(&tool, arguments, &call_ctx).await;
                (Some(tool), response)
            }
            // The proxy turns the resolution failure into the categorized result the `mcp` tool would return.
            Err(_) => (
                None,
                session
                    .proxy
                    .call(&args.tool, arguments, args.server.as_deref(), &call_ctx)
                    .await,
            ),
        };
        session.progress.stop().await;
        keep_spilled_files(&mut response)?;
        let code = response
            .category
            .map_or(EXIT_OK, |c| exit_code_for_category(c.as_str()));
        if args.json {
            print_json(&call_json(resolved.as_deref(), &response))?;
        } else if response.is_error() {
            errln!("pimcp-run: {}", response.text());
        } else {
            out!("{}", render_human(&response)?);
        }
        Ok(code)
    }))
}

/// The arguments object: absent → `{}`, `-` → stdin; anything but a JSON object is a usage error.
fn parse_arguments(raw: Option<&str>) -> anyhow::Result<Map<String, Value>> {
    let text = match raw {
        None => return Ok(Map::new()),
        Some("-") => {
            let mut buf = String::new();
            std::io::stdin()
                .read_to_string(&mut buf)
                .map_err(|e| usage(format!("cannot read the arguments from stdin: {e}")))?;
            buf
        }
        Some(text) => text.to_owned(),
    };
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(usage(format!(
            "ARGS_JSON must be a JSON object like '{{\"text\": \"hi\"}}', not {}",
            json_kind(&other)
        ))),
        Err(e) => Err(usage(format!("ARGS_JSON is not valid JSON: {e}"))),
    }
}

/// `pimcp/call/v1`.
fn call_json(tool: Option<&pimcp_actors::CatalogTool>, response: &ProxyResponse) -> Value {
    json!({
        "schema": "pimcp/call/v1",
        "tool": tool.map(|t| t.name.clone()),
        "server": tool.map(|t| t.server.clone()),
        "originalName": tool.map(|t| t.original.clone()),
        "isError": response.is_error(),
        "category": response.category.map(|c| c.as_str()),
        "text": response.text(),
        "content": response.result.content,
        "structuredContent": response.result.structured_content,
    })
}

/// Spilled binaries live in the proxy's temporary directory, removed when the command ends: move them to a kept
/// directory and point the result's text at the new paths.
fn keep_spilled_files(response: &mut ProxyResponse) -> anyhow::Result<()> {
    let files: Vec<PathBuf> = response.guard.as_ref().map(|g| g.files.clone()).unwrap_or_default();
    if files.is_empty() {
        return Ok(());
    }
    let dir = save_dir()?;
    let mut renames = Vec::new();
    for file in files {
        let Some(name) = file.file_name() else { continue };
        let kept = dir.join(name);
        std::fs::copy(&file, &kept)?;
        renames.push((file.display().to_string(), kept.display().to_string()));
    }
    for block in &mut response.result.content {
        if let ContentBlock::Text(text) = block {
            for (from, to) in &renames {
                text.text = text.text.replace(from.as_str(), to);
            }
        }
    }
    Ok(())
}

/// A fresh private directory that outlives the command.
fn save_dir() -> anyhow::Result<PathBuf> {
    let dir = tempfile::Builder::new().prefix(SAVE_DIR_PREFIX).tempdir()?.keep();
    pimcp_config::private_fs::restrict_dir(&dir)?;
    Ok(dir)
}

/// Text blocks as they are; images written to files and noted.
fn render_human(response: &ProxyResponse) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut dir: Option<PathBuf> = None;
    for (idx, block) in response.result.content.iter().enumerate() {
        match block {
            ContentBlock::Text(text) => out.push_str(&text.text),
            ContentBlock::Image(image) => {
                let dir = match &dir {
                    Some(d) => d.clone(),
                    None => dir.insert(save_dir()?).clone(),
                };
                out.push_str(&save_image(&dir, idx, &image.mime_type, &image.data));
            }
            other => out.push_str(&serde_json::to_string(other)?),
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

fn save_image(dir: &Path, idx: usize, mime: &str, data: &str) -> String {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data.trim()) else {
        return format!("[image ({mime}) not saved: the data is not valid base64]");
    };
    let ext = match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        _ => "bin",
    };
    let path = dir.join(format!("image-{idx}.{ext}"));
    match std::fs::write(&path, &bytes) {
        Ok(()) => format!(
            "[image ({mime}, {}) saved to {}]",
            pimcp_proxy::human_bytes(bytes.len() as u64),
            path.display()
        ),
        Err(e) => format!("[image ({mime}) not saved: {e}]"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn arguments_must_be_one_json_object() {
        assert!(parse_arguments(None).unwrap().is_empty());
        assert!(parse_arguments(Some("  ")).unwrap().is_empty());
        assert_eq!(parse_arguments(Some(r#"{"a": 1}"#)).unwrap()["a"], 1);
        let array = parse_arguments(Some("[1]")).unwrap_err();
        assert!(array.to_string().contains("not an array"), "{array}");
        assert_eq!(super::super::exit_code_for(&array), crate::EXIT_USAGE);
        let broken = parse_arguments(Some("{")).unwrap_err();
        assert!(
            broken.to_string().starts_with("ARGS_JSON is not valid JSON"),
            "{broken}"
        );
    }
}
