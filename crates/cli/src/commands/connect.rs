//! `pimcp-run connect SERVER [--json]`: connect one server now (closing a crash-loop breaker), refresh its metadata
//! in the cache, and list what it offers. A failure exits 1 with the runtime's categorized error.

use clap::Args;
use pimcp_actors::ServerCatalog;
use serde_json::{Value, json};

use super::session::{Session, SessionOptions, block_on, with_session};
use super::{Ctx, usage};
use crate::EXIT_OK;
use crate::output::{Style, Table, one_line, path, print_json};

#[derive(Debug, Args)]
pub(crate) struct ConnectArgs {
    /// The server's name in the configuration.
    pub server: String,
    /// Machine-readable output (`pimcp/connect/v1`).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, args: ConnectArgs) -> anyhow::Result<u8> {
    block_on(with_session(ctx, SessionOptions { progress: true }, async |session| {
        check_server(session, &args.server)?;
        session.connect(&args.server).await?;
        let catalog = session.handle().catalog();
        let server = catalog
            .server(&args.server)
            .ok_or_else(|| anyhow::anyhow!("server `{}` left the catalog after connecting", args.server))?;
        session.progress.stop().await;
        if args.json {
            print_json(&connect_json(server))?;
        } else {
            let cache = pimcp_actors::MetadataCache::in_agent_dir(&ctx.opts.agent_dir());
            out!("{}", render(server, Style::stdout()));
            outln!("\nmetadata cached in {}", path(cache.path(), &ctx.opts.home));
        }
        Ok(EXIT_OK)
    }))
}

/// A usage error (exit 2) naming the configured servers when `name` is not one of them.
pub(crate) fn check_server(session: &Session, name: &str) -> anyhow::Result<()> {
    if session.config.server(name).is_some() {
        return Ok(());
    }
    let known: Vec<&str> = session.config.servers.iter().map(|s| s.name.as_str()).collect();
    Err(usage(if known.is_empty() {
        format!("unknown server `{name}`: no servers are configured")
    } else {
        format!("unknown server `{name}`; configured: {}", known.join(", "))
    }))
}

/// `pimcp/connect/v1`.
pub(crate) fn connect_json(server: &ServerCatalog) -> Value {
    json!({
        "schema": "pimcp/connect/v1",
        "server": server.server,
        "protocolVersion": server.protocol_version,
        "tools": server.tools.iter().map(|t| json!({
            "name": t.name,
            "originalName": t.original,
            "description": t.description,
        })).collect::<Vec<_>>(),
        "resources": server.resources.iter().map(|r| json!({
            "uri": r.uri,
            "name": r.name,
            "mimeType": r.mime_type,
        })).collect::<Vec<_>>(),
        "prompts": server.prompts.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
        "instructions": server.instructions,
    })
}

fn render(server: &ServerCatalog, style: Style) -> String {
    let mut out = format!(
        "connected {}: protocol {}, {} tool{}, {} resource{}, {} prompt{}\n",
        server.server,
        server.protocol_version.as_deref().unwrap_or("unknown"),
        server.tools.len(),
        if server.tools.len() == 1 { "" } else { "s" },
        server.resources.len(),
        if server.resources.len() == 1 { "" } else { "s" },
        server.prompts.len(),
        if server.prompts.len() == 1 { "" } else { "s" },
    );
    if let Some(instructions) = server.instructions.as_deref().filter(|i| !i.trim().is_empty()) {
        out.push_str(&format!("instructions: {}\n", one_line(instructions, 200)));
    }
    if !server.tools.is_empty() {
        let mut table = Table::new(&["TOOL", "DESCRIPTION"]);
        for tool in &server.tools {
            table.row(vec![
                tool.name.as_str().into(),
                one_line(tool.description.as_deref().unwrap_or(""), 80).into(),
            ]);
        }
        out.push('\n');
        out.push_str(&table.render(style));
    }
    out
}
