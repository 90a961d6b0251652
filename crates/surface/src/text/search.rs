//! The search text: ranked hits, the paging footer and the servers that were not searched.

// Hosts read these types through `pimcp`: each public item says what it is.

use super::{SEARCH_DESCRIPTION_CHARS, ServerState, one_line, plural, quoted};
use crate::search::{MatchKind, SearchPage, SearchQuery};
use crate::shapes::DEFAULT_SHAPE_CHARS;

/// Appended to a search hit's name when `approveTools` gates the tool: the user is asked before each call.
pub const APPROVAL_MARK: &str = " [needs approval]";

/// A server a search did not cover, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedServer {
    /// The server.
    pub name: String,
    /// Why it was not searched.
    pub state: ServerState,
}

/// The search text: ranked hits with parameter shapes, a `next: offset N` footer when more remain, and the servers
/// that were not searched. An empty result explains itself.
pub fn search_text(query: &SearchQuery, page: &SearchPage<'_>, skipped: &[SkippedServer]) -> String {
    let what = describe_query(query, page);
    let mut out = String::new();
    if page.hits.is_empty() {
        if page.total > 0 {
            out.push_str(&format!(
                "No results at offset {}: {} {what}; use an offset below {}.",
                page.offset,
                plural(page.total, "tool", "tools"),
                page.total
            ));
        } else {
            out.push_str(&format!("No tools {what}."));
            if skipped.is_empty() {
                out.push_str(if query.regex {
                    "\nTry a looser pattern, or search without regex."
                } else {
                    "\nTry other or fewer words, or regex: true for a pattern."
                });
            }
        }
    } else {
        let first = page.offset + 1;
        let last = page.offset + page.hits.len();
        out.push_str(&format!("{} {what}", plural(page.total, "tool", "tools")));
        if page.total > page.hits.len() {
            out.push_str(&format!(" (showing {first}–{last})"));
        }
        out.push_str(":\n");
        if page.hits.first().is_some_and(|h| h.kind == MatchKind::Weak) {
            out.push_str(
                "(weak matches: only some of your words matched; rephrase with words of a tool's name or description)\n",
            );
        }
        for hit in &page.hits {
            out.push_str(&format!("\n{}", hit.doc.name));
            if hit.doc.needs_approval {
                out.push_str(APPROVAL_MARK);
            }
            let description = one_line(&hit.doc.description, SEARCH_DESCRIPTION_CHARS);
            if !description.is_empty() {
                out.push_str(&format!(" — {description}"));
            }
            out.push_str(&format!("\n  {}\n", hit.doc.input_shape_within(DEFAULT_SHAPE_CHARS)));
        }
        if let Some(next) = page.next_offset {
            out.push_str(&format!("\nnext: offset {next}"));
        }
    }
    if !skipped.is_empty() {
        out.push_str(&format!("\nNot searched: {}.", skipped_list(skipped)));
        if skipped.iter().any(|s| s.state == ServerState::Connecting) {
            out.push_str(" Servers still connecting may have matches; retry in a moment.");
        }
        if skipped.iter().any(|s| s.state == ServerState::NotStarted) {
            out.push_str(" mcp({connect: \"name\"}) loads a server's tools.");
        }
    }
    out.trim_end().to_string()
}

/// Up to this many servers a search names each one it did not search, with its reason; beyond, it groups them by
/// reason and names at most this many per reason.
pub(super) const MAX_LISTED_SKIPPED: usize = 20;

fn skipped_list(skipped: &[SkippedServer]) -> String {
    if skipped.len() <= MAX_LISTED_SKIPPED {
        let list: Vec<String> = skipped
            .iter()
            .map(|s| format!("{} ({})", s.name, s.state.skip_reason()))
            .collect();
        return list.join(", ");
    }
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for s in skipped {
        let reason = s.state.skip_reason();
        match groups.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(&s.name),
            None => groups.push((reason, vec![&s.name])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(reason, names)| {
            let mut shown: Vec<&str> = names.iter().take(MAX_LISTED_SKIPPED).copied().collect();
            if names.len() > MAX_LISTED_SKIPPED {
                shown.push("…");
            }
            format!("{} {reason} ({})", names.len(), shown.join(", "))
        })
        .collect();
    format!("{} servers — {}", skipped.len(), parts.join("; "))
}

fn describe_query(query: &SearchQuery, page: &SearchPage<'_>) -> String {
    let listed = page.hits.first().is_some_and(|h| h.kind == MatchKind::Listed) || query.text.trim().is_empty();
    let mut what = if listed {
        "on".to_string()
    } else if query.regex {
        format!("match /{}/", query.text.trim())
    } else {
        format!("match {}", quoted(query.text.trim()))
    };
    if let Some(server) = &query.server {
        what.push_str(&format!("{}{}", if listed { " " } else { " on " }, server));
    }
    what
}
