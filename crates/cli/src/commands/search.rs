//! `pimcp-run search QUERY [--server S] [--limit N] [--offset N] [--regex] [--connect] [--json]`: the `mcp` tool's
//! ranked search over every startable server's known tools (live or cached, so it works offline), with the servers
//! that could not be searched and why.

use clap::Args;
use pimcp_proxy::{MatchKind, SearchOutcome, SearchQuery};
use serde_json::{Value, json};

use super::connect::check_server;
use super::session::{SessionOptions, block_on, with_session};
use super::{Ctx, Failure};
use crate::EXIT_OK;
use crate::output::{Colour, Style, Table, cell, one_line, print_json};

/// Characters of a parameter shape in the table.
const SHAPE_CHARS: usize = 48;
/// Characters of a description in the table.
const DESCRIPTION_CHARS: usize = 70;

#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
    /// Words to look for in tool names, descriptions, server names and keywords (empty with --server: list it).
    pub query: String,
    /// Only this server's tools.
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
    /// Results per page (default 12, at most 100).
    #[arg(long, value_name = "N", default_value_t = pimcp_proxy::DEFAULT_LIMIT)]
    pub limit: usize,
    /// Skip this many results (the footer says where the next page starts).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub offset: usize,
    /// Treat QUERY as a regular expression (linear-time engine, at most 256 characters).
    #[arg(long)]
    pub regex: bool,
    /// Connect every available server first, so servers with nothing cached are searched too.
    #[arg(long)]
    pub connect: bool,
    /// Machine-readable output (`pimcp/search/v1`).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, args: SearchArgs) -> anyhow::Result<u8> {
    block_on(with_session(ctx, SessionOptions { progress: true }, async |session| {
        if let Some(server) = &args.server {
            check_server(session, server)?;
        }
        if args.connect {
            session.connect_all().await;
        }
        let mut query = SearchQuery::new(args.query.clone())
            .with_regex(args.regex)
            .with_limit(args.limit)
            .with_offset(args.offset);
        if let Some(server) = &args.server {
            query = query.with_server(server.clone());
        }
        let outcome = session.proxy.search(&query).map_err(Failure::from)?;
        session.progress.stop().await;
        if args.json {
            print_json(&search_json(&args, &outcome))?;
        } else {
            out!("{}", render(&args, &outcome, Style::stdout()));
        }
        Ok(EXIT_OK)
    }))
}

fn kind_name(kind: MatchKind) -> &'static str {
    match kind {
        MatchKind::ExactName => "exact-name",
        MatchKind::NamePrefix => "name-prefix",
        MatchKind::Ranked => "ranked",
        MatchKind::Weak => "weak",
        MatchKind::Regex => "regex",
        MatchKind::Listed => "listed",
        _ => "other",
    }
}

/// `pimcp/search/v1`.
fn search_json(args: &SearchArgs, outcome: &SearchOutcome) -> Value {
    json!({
        "schema": "pimcp/search/v1",
        "query": args.query,
        "server": args.server,
        "regex": args.regex,
        "total": outcome.total,
        "offset": outcome.offset,
        "limit": outcome.limit,
        "nextOffset": outcome.next_offset,
        "results": outcome.hits.iter().map(|h| json!({
            "name": h.doc.name,
            "server": h.doc.server,
            "originalName": h.doc.original_name,
            "description": h.doc.description,
            "params": h.doc.input_shape_within(pimcp_proxy::DEFAULT_SHAPE_CHARS),
            "match": kind_name(h.kind),
            "score": h.score,
        })).collect::<Vec<_>>(),
        "notSearched": outcome.skipped.iter().map(|s| json!({
            "server": s.name,
            "reason": s.state.skip_reason(),
        })).collect::<Vec<_>>(),
    })
}

fn render(args: &SearchArgs, outcome: &SearchOutcome, style: Style) -> String {
    let mut out = String::new();
    if outcome.hits.is_empty() {
        out.push_str(&if outcome.total > 0 {
            format!("no results at offset {} ({} in all)\n", outcome.offset, outcome.total)
        } else {
            format!("no tools match \"{}\"\n", args.query)
        });
    } else {
        let mut table = Table::new(&["TOOL", "SERVER", "PARAMS", "DESCRIPTION"]);
        for hit in &outcome.hits {
            table.row(vec![
                cell(hit.doc.name.clone(), Some(Colour::Cyan)),
                hit.doc.server.as_str().into(),
                hit.doc.input_shape_within(SHAPE_CHARS).into(),
                one_line(&hit.doc.description, DESCRIPTION_CHARS).into(),
            ]);
        }
        out.push_str(&table.render(style));
        let first = outcome.offset + 1;
        let last = outcome.offset + outcome.hits.len();
        out.push_str(&format!("\n{first}–{last} of {}", outcome.total));
        if let Some(next) = outcome.next_offset {
            out.push_str(&format!("; next page: --offset {next}"));
        }
        out.push('\n');
    }
    if !outcome.skipped.is_empty() {
        let names: Vec<String> = outcome
            .skipped
            .iter()
            .map(|s| format!("{} ({})", s.name, s.state.skip_reason()))
            .collect();
        out.push_str(&format!("not searched: {}\n", names.join(", ")));
        if !args.connect {
            out.push_str("(`--connect` connects every available server first)\n");
        }
    }
    out
}
