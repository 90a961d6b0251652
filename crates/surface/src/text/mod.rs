//! The texts the model reads for status, list, search and instructions, and error results with their category
//! (a human sentence first, the category on the last line and in `_meta["pimcp/category"]`). Pure functions
//! over plain structs; the runtime fills them in.

use std::time::Duration;

mod error;
mod search;
mod status;
#[cfg(test)]
mod tests;

pub use error::{Category, ProxyError, text_result, with_category};
pub use search::{APPROVAL_MARK, SkippedServer, search_text};
pub use status::{MAX_STATUS_LINES, config_problems_text};
pub use status::{ServerLine, ServerState, instructions_text, list_text, status_text};

/// `_meta` key carrying an error result's category.
pub const CATEGORY_META_KEY: &str = "pimcp/category";
/// Characters of server instructions shown in a list.
pub const INSTRUCTIONS_PREVIEW_CHARS: usize = 300;
/// Characters of a tool description in list lines.
pub(crate) const LIST_DESCRIPTION_CHARS: usize = 80;
/// Characters of a tool description in search results.
pub(crate) const SEARCH_DESCRIPTION_CHARS: usize = 160;

/// `1 tool`, `2 tools`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `4s`, `2m 5s`, `1h 3m`, `2d 4h`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A JSON string literal, for texts that show calls like `mcp({connect: "x"})`.
pub(crate) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The first line of `text`, at most `max_chars` characters, cut at a word boundary with `…`.
pub(crate) fn one_line(text: &str, max_chars: usize) -> String {
    let first = text.trim().lines().next().unwrap_or_default().trim();
    truncate_at_word(first, max_chars)
}

/// `text` in at most `max_chars` characters (plus `…` when cut), cut at the last space when one is near the end.
pub(crate) fn truncate_at_word(text: &str, max_chars: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return text.to_string();
    };
    let head = &text[..cut];
    let at_space = head.rfind(char::is_whitespace).filter(|&i| i * 3 >= cut * 2);
    let head = at_space.map_or(head, |i| &head[..i]).trim_end();
    format!("{head}…")
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
