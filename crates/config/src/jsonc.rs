//! JSON with comments and trailing commas: strips them (keeping every line and column in place) and parses with serde_json.

use serde_json::Value;

/// A JSONC parse failure, positioned in the original text (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsoncError {
    /// The line of the error (1-based).
    pub line: usize,
    /// The column of the error (1-based).
    pub column: usize,
    /// What the parser expected.
    pub message: String,
}

impl std::fmt::Display for JsoncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

/// Parses JSON that may contain `//` and `/* */` comments and trailing commas.
///
/// An empty or comment-only document yields `Ok(None)`.
pub fn parse(text: &str) -> Result<Option<Value>, JsoncError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let cleaned = strip(text);
    if cleaned.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(&cleaned).map(Some).map_err(|err| JsoncError {
        line: err.line(),
        column: err.column(),
        message: strip_position_suffix(&err.to_string()),
    })
}

/// serde_json appends " at line L column C"; we report those separately.
fn strip_position_suffix(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(idx) => message[..idx].to_string(),
        None => message.to_string(),
    }
}

/// Replaces comments and trailing commas with spaces, byte for byte, so positions are unchanged.
pub fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = bytes.to_vec();
    let mut i = 0;
    // Index of the last comma seen outside strings, not yet followed by a significant byte.
    let mut pending_comma: Option<usize> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                pending_comma = None;
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    blank(&mut out, i);
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                blank(&mut out, i);
                blank(&mut out, i + 1);
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    blank(&mut out, i);
                    i += 1;
                }
                if i < bytes.len() {
                    blank(&mut out, i);
                    blank(&mut out, i + 1);
                    i += 2;
                }
            }
            b',' => {
                pending_comma = Some(i);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(comma) = pending_comma.take() {
                    out[comma] = b' ';
                }
                i += 1;
            }
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            _ => {
                pending_comma = None;
                i += 1;
            }
        }
    }
    // Only ASCII bytes were replaced by ASCII spaces, and never inside a multi-byte sequence
    // (comment bodies are blanked byte by byte, which may split a character): re-validate lossily.
    String::from_utf8(out).unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}

/// Blanks one byte, keeping newlines so line numbers stay true.
fn blank(out: &mut [u8], idx: usize) {
    if let Some(b) = out.get_mut(idx)
        && *b != b'\n'
        && *b != b'\r'
    {
        *b = b' ';
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn comments_and_trailing_commas() {
        let text = "{\n  // a comment\n  \"a\": [1, 2,], /* block\n comment */ \"b\": \"//not a comment\",\n}\n";
        let v = parse(text).unwrap().unwrap();
        assert_eq!(v["a"], serde_json::json!([1, 2]));
        assert_eq!(v["b"], "//not a comment");
    }

    #[test]
    fn empty_and_comment_only() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("  // nothing\n/* here */").unwrap(), None);
    }

    #[test]
    fn error_position_is_in_original_text() {
        let text = "{\n  // comment\n  \"a\": 1,\n  \"b\" 2\n}";
        let err = parse(text).unwrap_err();
        assert_eq!((err.line, err.column), (4, 7));
        assert!(err.message.contains("expected `:`"), "{}", err.message);
    }

    #[test]
    fn escaped_quote_in_string() {
        let v = parse(r#"{"a": "x\"//y", }"#).unwrap().unwrap();
        assert_eq!(v["a"], "x\"//y");
    }

    #[test]
    fn non_ascii_inside_comment() {
        let v = parse("{\"a\": 1 // ünïcødé ✓\n}").unwrap().unwrap();
        assert_eq!(v["a"], 1);
    }
}
