//! `pimcp-run prompts [SERVER] [--connect] [--json]`: the prompts servers offer, from the metadata cache or a live
//! connection. Naming a server whose metadata is unknown connects it; `--connect` connects every available server.

use clap::Args;
use pimcp_actors::{Catalog, MetadataSource, ServerCatalog};
use serde_json::{Value, json};

use super::Ctx;
use super::connect::check_server;
use super::session::{SessionOptions, block_on, with_session};
use crate::output::{Colour, Style, Table, cell, one_line, print_json};
use crate::{EXIT_FAILED, EXIT_OK};

#[derive(Debug, Args)]
pub(crate) struct PromptsArgs {
    /// Only this server's prompts (connects it when nothing is known about it yet).
    pub server: Option<String>,
    /// Connect every available server first.
    #[arg(long)]
    pub connect: bool,
    /// Machine-readable output (`pimcp/prompts/v1`).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, args: PromptsArgs) -> anyhow::Result<u8> {
    block_on(with_session(ctx, SessionOptions { progress: true }, async |session| {
        let handle = session.handle();
        let mut failed = 0;
        if let Some(server) = &args.server {
            check_server(session, server)?;
            let known = handle.catalog().server(server).is_some_and(|s| s.source.is_some());
            if args.connect || !known {
                session.connect(server).await?;
            }
        } else if args.connect {
            failed = session.connect_all().await.iter().filter(|(_, o)| o.is_err()).count();
        }
        let catalog = handle.catalog();
        session.progress.stop().await;
        let servers = selected(&catalog, args.server.as_deref());
        if args.json {
            print_json(&prompts_json(&servers))?;
        } else {
            out!("{}", render(&servers, Style::stdout()));
        }
        Ok(if failed > 0 { EXIT_FAILED } else { EXIT_OK })
    }))
}

fn selected<'a>(catalog: &'a Catalog, server: Option<&str>) -> Vec<&'a ServerCatalog> {
    catalog
        .servers()
        .filter(|s| server.is_none_or(|name| s.server == name))
        .collect()
}

fn source_name(source: Option<MetadataSource>) -> Value {
    match source {
        Some(MetadataSource::Live) => "live".into(),
        Some(MetadataSource::Cache) => "cache".into(),
        Some(MetadataSource::StaleCache) => "stale-cache".into(),
        None => Value::Null,
    }
}

/// `pimcp/prompts/v1`.
fn prompts_json(servers: &[&ServerCatalog]) -> Value {
    json!({
        "schema": "pimcp/prompts/v1",
        "servers": servers.iter().map(|s| json!({
            "server": s.server,
            "metadata": source_name(s.source),
            "prompts": s.prompts.iter().map(|p| json!({
                "name": p.name,
                "title": p.title,
                "description": p.description,
                "arguments": p.arguments.iter().flatten().map(|a| json!({
                    "name": a.name,
                    "description": a.description,
                    "required": a.required.unwrap_or(false),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn render(servers: &[&ServerCatalog], style: Style) -> String {
    let mut table = Table::new(&["SERVER", "PROMPT", "ARGUMENTS", "DESCRIPTION"]);
    let mut unknown = Vec::new();
    for s in servers {
        if s.source.is_none() {
            unknown.push(s.server.as_str());
            continue;
        }
        for p in s.prompts.iter() {
            let arguments: Vec<String> = p
                .arguments
                .iter()
                .flatten()
                .map(|a| {
                    if a.required == Some(true) {
                        a.name.clone()
                    } else {
                        format!("{}?", a.name)
                    }
                })
                .collect();
            table.row(vec![
                s.server.as_str().into(),
                cell(p.name.clone(), Some(Colour::Cyan)),
                arguments.join(", ").into(),
                one_line(p.description.as_deref().unwrap_or(""), 70).into(),
            ]);
        }
    }
    let mut out = if table.is_empty() {
        "no prompts known\n".to_owned()
    } else {
        table.render(style)
    };
    if !unknown.is_empty() {
        out.push_str(&format!(
            "\nnothing known yet about: {} (run `pimcp-run prompts --connect` or `pimcp-run connect SERVER`)\n",
            unknown.join(", ")
        ));
    }
    out
}
