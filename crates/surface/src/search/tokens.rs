//! Text for ranking and lookups: name keys, normalization (camelCase, separators, case) and tokenizing (words,
//! character bigrams of scripts written without spaces).

use super::MAX_TOKEN_CHARS;

/// Comparison key of a tool name: trimmed, lowercase, `-` read as `_`.
pub(crate) fn name_key(name: &str) -> String {
    name.trim()
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == '-' { '_' } else { c })
        .collect()
}

/// Combining marks that `char::is_alphanumeric` does not cover but belong inside a word.
fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F | 0x3099..=0x309A)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_mark(c)
}

/// Scripts written without spaces between words: split into character bigrams.
fn is_unspaced_script(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF      // Thai, Lao
        | 0x1000..=0x109F    // Myanmar
        | 0x1780..=0x17FF    // Khmer
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x2E80..=0x2FDF    // CJK radicals, Kangxi
        | 0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3100..=0x31FF    // Bopomofo, Hangul compatibility Jamo, Katakana extensions
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xA960..=0xA97F    // Hangul Jamo Extended-A
        | 0xAC00..=0xD7FF    // Hangul syllables, Jamo Extended-B
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0xFF66..=0xFF9F    // Halfwidth Katakana
        | 0x20000..=0x3FFFF) // CJK Extensions B and later
}

/// Normalizes text for ranking: camelCase boundaries become spaces, runs of other characters become one space,
/// letters are lowercased.
pub(crate) fn normalize(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for (i, &c) in chars.iter().enumerate() {
        if !is_word_char(c) {
            gap = true;
            continue;
        }
        if i > 0 && c.is_uppercase() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower) {
                gap = true;
            }
        }
        if gap && !out.is_empty() {
            out.push(' ');
        }
        gap = false;
        out.extend(c.to_lowercase());
    }
    out
}

/// Splits normalized text into tokens (see the module docs).
pub(crate) fn tokenize(normalized: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in normalized.split(' ').filter(|w| !w.is_empty()) {
        if !word.chars().any(is_unspaced_script) {
            out.push(cap_token(word));
            continue;
        }
        let chars: Vec<char> = word.chars().collect();
        let mut start = 0;
        while start < chars.len() {
            let unspaced = is_unspaced_script(chars[start]);
            let end = chars[start..]
                .iter()
                .position(|&c| is_unspaced_script(c) != unspaced)
                .map_or(chars.len(), |p| start + p);
            let run = &chars[start..end];
            if !unspaced || run.len() == 1 {
                out.push(cap_token(&run.iter().collect::<String>()));
            } else {
                out.extend(run.windows(2).map(|w| w.iter().collect::<String>()));
            }
            start = end;
        }
    }
    out
}

fn cap_token(word: &str) -> String {
    match word.char_indices().nth(MAX_TOKEN_CHARS) {
        Some((cut, _)) => word[..cut].to_string(),
        None => word.to_string(),
    }
}
