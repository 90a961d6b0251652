//! Regex search: compiled patterns (cached, ASCII-only when that is exact), the multi-line pre-scan and the
//! per-field check.

use super::{FIELD_KEYWORDS, MAX_REGEX_CHARS, MatchKind, REGEX_SIZE_LIMIT_BYTES, Scored, SearchIndex, WEIGHTS, to_u32};
use crate::error::{Error, Result};

impl SearchIndex {
    pub(super) fn regex_scored(&self, pattern: &str, server: Option<&str>) -> Result<Vec<Scored>> {
        let len = pattern.chars().count();
        if len > MAX_REGEX_CHARS {
            return Err(Error::QueryTooLong {
                len,
                max: MAX_REGEX_CHARS,
            });
        }
        let ascii = !self.fold_traps && ascii_fast_path_is_exact(pattern);
        let build = |multi_line: bool| compiled(pattern, multi_line, ascii);
        // Candidates come from a multi-line scan; a field is then checked with the same multi-line regex unless it
        // holds a newline and the pattern has `^`/`$`, where only the strict (whole-field) regex is right. The
        // strict one is compiled only when needed: compiling a case-insensitive Unicode regex is the main cost on
        // small catalogs.
        let (lines, candidates): (Pattern, Vec<usize>) = if prescan_is_exact_superset(pattern) {
            let lines = build(true)?;
            let candidates = self.prescan(&lines);
            (lines, candidates)
        } else {
            (build(false)?, (0..self.docs.len()).collect())
        };
        let anchored = prescan_is_exact_superset(pattern) && (pattern.contains('^') || pattern.contains('$'));
        let strict: std::cell::OnceCell<Option<Pattern>> = std::cell::OnceCell::new();
        let is_match = |field: &str| {
            if anchored && field.contains('\n') {
                strict
                    .get_or_init(|| build(false).ok())
                    .as_ref()
                    .is_some_and(|r| r.is_match(field))
            } else {
                lines.is_match(field)
            }
        };
        let mut out = Vec::new();
        for i in candidates {
            let doc = &self.docs[i];
            if server.is_some_and(|s| doc.server != s) {
                continue;
            }
            let fields = [&doc.name, &doc.original_name, &doc.server, &doc.description];
            let mut score: u32 = fields
                .iter()
                .zip(WEIGHTS)
                .filter(|(f, _)| is_match(f))
                .map(|(_, w)| w)
                .sum();
            if doc.keywords.iter().any(|k| is_match(k)) {
                score += WEIGHTS[FIELD_KEYWORDS];
            }
            if score > 0 {
                out.push(Scored {
                    tier: 0,
                    score,
                    rank: self.prepared[i].rank,
                    doc: to_u32(i),
                    kind: MatchKind::Regex,
                });
            }
        }
        Ok(out)
    }

    /// Documents where the multi-line pattern matches somewhere in their lines: one scan of the whole catalog,
    /// jumping to the next document after each hit. Every per-field match is also a match here (fields are whole
    /// lines, and `^`/`$`/`\b` see the same boundaries), so this is a superset the per-field check narrows down.
    fn prescan(&self, multi_line: &Pattern) -> Vec<usize> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < self.haystack.len() {
            let Some(start) = multi_line.find_at(&self.haystack, pos) else {
                break;
            };
            let doc = self.doc_starts.partition_point(|&s| s <= start).saturating_sub(1);
            out.push(doc);
            pos = self.doc_starts.get(doc + 1).copied().unwrap_or(self.haystack.len());
        }
        out
    }
}

/// Characters outside ASCII that Unicode simple case folding maps onto ASCII letters (KELVIN SIGN → k, LATIN SMALL
/// LETTER LONG S → s). They are the only way a case-insensitive pattern made of ASCII matches non-ASCII text.
pub(super) const ASCII_FOLD_TRAPS: [char; 2] = ['\u{212A}', '\u{017F}'];

/// Compiled regexes kept for repeated queries (a model pages through results or retries the same pattern).
const REGEX_CACHE_ENTRIES: usize = 32;

/// A compiled regex query: Unicode-aware (the meaning of the pattern), or ASCII-only over bytes when that gives
/// the same matches on this catalog (see [`ascii_fast_path_is_exact`]). The ASCII form compiles in a fraction of
/// the time and keeps literal prefilters that Unicode case folding defeats (`s` also matches `ſ`).
#[derive(Clone, Debug)]
pub(super) enum Pattern {
    Unicode(regex::Regex),
    Ascii(regex::bytes::Regex),
}

impl Pattern {
    pub(super) fn is_match(&self, text: &str) -> bool {
        match self {
            Pattern::Unicode(r) => r.is_match(text),
            Pattern::Ascii(r) => r.is_match(text.as_bytes()),
        }
    }

    /// Start of the first match at or after `pos`.
    pub(super) fn find_at(&self, text: &str, pos: usize) -> Option<usize> {
        match self {
            Pattern::Unicode(r) => r.find_at(text, pos).map(|m| m.start()),
            Pattern::Ascii(r) => r.find_at(text.as_bytes(), pos).map(|m| m.start()),
        }
    }
}

/// `pattern` compiled case-insensitively (from a small process-wide cache).
pub(super) fn compiled(pattern: &str, multi_line: bool, ascii: bool) -> Result<Pattern> {
    type Cache = std::sync::Mutex<Vec<(String, bool, bool, Pattern)>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    {
        let mut entries = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = entries
            .iter()
            .position(|(p, m, a, _)| p == pattern && *m == multi_line && *a == ascii)
        {
            let entry = entries.remove(i);
            let found = entry.3.clone();
            entries.push(entry);
            return Ok(found);
        }
    }
    let invalid = |e: regex::Error| Error::InvalidRegex {
        pattern: pattern.to_string(),
        reason: regex_reason(&e),
    };
    let ascii_form = if ascii { ascii_form(pattern) } else { None };
    let built = if let Some(ascii_form) = ascii_form {
        regex::bytes::RegexBuilder::new(&ascii_form)
            .unicode(false)
            .case_insensitive(true)
            .multi_line(multi_line)
            .size_limit(REGEX_SIZE_LIMIT_BYTES)
            .dfa_size_limit(REGEX_SIZE_LIMIT_BYTES)
            .build()
            .map(Pattern::Ascii)
            .map_err(invalid)?
    } else {
        regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .multi_line(multi_line)
            .size_limit(REGEX_SIZE_LIMIT_BYTES)
            .dfa_size_limit(REGEX_SIZE_LIMIT_BYTES)
            .build()
            .map(Pattern::Unicode)
            .map_err(invalid)?
    };
    let mut entries = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if entries.len() >= REGEX_CACHE_ENTRIES {
        entries.remove(0);
    }
    entries.push((pattern.to_owned(), multi_line, ascii, built.clone()));
    Ok(built)
}

/// What `.` matches (any character but `\n`) as UTF-8 bytes. Exact on valid UTF-8 (every `&str`): at a character
/// boundary the lead byte's range picks the one branch whose length is that character's, so a match starts and ends
/// on character boundaries as the Unicode `.` does.
const UTF8_DOT: &str =
    r"(?:[\x00-\x09\x0B-\x7F]|[\xC0-\xDF][\x80-\xBF]|[\xE0-\xEF][\x80-\xBF]{2}|[\xF0-\xF7][\x80-\xBF]{3})";

/// Whether matching `pattern` ASCII-only (bytes, ASCII case folding) finds exactly what the Unicode regex finds, on
/// text without [`ASCII_FOLD_TRAPS`]: see [`ascii_form`].
pub(super) fn ascii_fast_path_is_exact(pattern: &str) -> bool {
    ascii_form(pattern).is_some()
}

/// `pattern` for the ASCII-only bytes regex, when that regex finds exactly what the Unicode regex finds on text
/// without [`ASCII_FOLD_TRAPS`]: every piece of the pattern can only match ASCII (ASCII literals, escaped
/// punctuation, non-negated classes, POSIX classes, groups, alternation, repetition and `^`/`$`), except `.`, which
/// is spelled out as one UTF-8-encoded character ([`UTF8_DOT`]). Perl classes (`\w`, `\d`, `\s`, `\b`), other
/// escapes, negated classes, nested classes, inline flags and non-ASCII text keep the Unicode regex (`None`).
fn ascii_form(pattern: &str) -> Option<String> {
    if !pattern.is_ascii() || pattern.contains("(?") || pattern.contains("[^") {
        return None;
    }
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len());
    let mut in_class = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\\' => match bytes.get(i + 1) {
                Some(&c) if c.is_ascii_punctuation() => {
                    out.push('\\');
                    out.push(char::from(c));
                    i += 1;
                }
                _ => return None,
            },
            // A POSIX class (`[:alpha:]`, ASCII in both modes) inside a class is copied whole; another nested
            // class is left to the Unicode regex.
            b'[' if in_class => {
                let rest = pattern.get(i..)?;
                let end = rest.strip_prefix("[:")?.find(":]")? + 4;
                out.push_str(rest.get(..end)?);
                i += end - 1;
            }
            b'[' => {
                in_class = true;
                out.push('[');
                // A `]` right after the opening bracket is a literal.
                if bytes.get(i + 1) == Some(&b']') {
                    out.push(']');
                    i += 1;
                }
            }
            b']' if in_class => {
                in_class = false;
                out.push(']');
            }
            b'.' if !in_class => out.push_str(UTF8_DOT),
            _ => out.push(char::from(b)),
        }
        i += 1;
    }
    (!in_class).then_some(out)
}

/// Whether the multi-line pre-scan finds every document the per-field match would: not when the pattern uses
/// whole-text anchors (`\A`, `\z`) or inline flags (`(?s)`, `(?-m)`, …) that could change line semantics.
fn prescan_is_exact_superset(pattern: &str) -> bool {
    !(pattern.contains("\\A") || pattern.contains("\\z") || pattern.contains("(?"))
}

fn regex_reason(e: &regex::Error) -> String {
    match e {
        regex::Error::CompiledTooBig(limit) => format!("compiled pattern exceeds {limit} bytes"),
        other => other
            .to_string()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .trim_start_matches("error: ")
            .to_string(),
    }
}
