//! What an upstream line longer than the line limit answered: a streaming scan of its top-level `id` while the
//! line is skipped, and the error that then fails the request it answers.
//!
//! A JSON-RPC response carries its `id` at the top level, before or after the `result` (the TypeScript SDK writes
//! it last, Python and rmcp first). While [`super::LineTransport`] discards an over-long line it feeds every byte
//! through [`IdScan`], which tracks strings, escapes and nesting depth and keeps only the raw value of a top-level
//! `id` (at most [`MAX_ID_BYTES`]) and whether a top-level `method` key was seen; nothing else of the line is kept.
//! A line with an `id` and no `method` is a response (or error) to one of our requests: it becomes a JSON-RPC error
//! with that id, which reaches the waiting request whichever path sent it (the fast client's or rmcp's), so the
//! call fails at once instead of waiting for its timeout.

use super::lines::MAX_LINE_LENGTH;

/// The longest raw `id` value kept (a longer one is no id we sent).
const MAX_ID_BYTES: usize = 64;

/// The JSON-RPC error code of the synthesized answer (internal error: the client could not take the answer).
pub(crate) const OVERSIZED_CODE: i32 = -32603;

/// Scans the bytes of one over-long line, chunk by chunk (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct IdScan {
    len: usize,
    depth: usize,
    top_object: bool,
    in_string: bool,
    escape: bool,
    /// At depth 1 in the top-level object, the next string is a key.
    expect_key: bool,
    /// The key being read (`None` when the current string is not a top-level key, or it grew too long).
    key: Option<Vec<u8>>,
    key_overflow: bool,
    /// The last top-level key read.
    last_key: LastKey,
    /// The raw value of a top-level `id` being read.
    capture: Option<Vec<u8>>,
    id: Option<Vec<u8>>,
    method: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum LastKey {
    #[default]
    Other,
    Id,
}

impl IdScan {
    /// Feeds the next bytes of the line.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.len = self.len.saturating_add(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string && !self.escape && self.key.is_none() && self.capture.is_none() {
                // The bulk of a large answer is string content: jump to the next quote or backslash.
                match bytes[i..].iter().position(|b| *b == b'"' || *b == b'\\') {
                    Some(skip) => i += skip,
                    None => return,
                }
            }
            let b = bytes[i];
            i += 1;
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        let at_top = self.depth == 1 && self.top_object;
        if let Some(value) = &mut self.capture {
            let ends = at_top && !self.in_string && (b == b',' || b == b'}');
            if ends {
                let raw = value.trim_ascii().to_vec();
                self.capture = None;
                if !raw.is_empty() && raw.len() <= MAX_ID_BYTES {
                    self.id = Some(raw);
                }
            } else if value.len() <= MAX_ID_BYTES {
                value.push(b);
            }
        }
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.last_key = if !self.key_overflow && key == b"id" {
                        LastKey::Id
                    } else {
                        if !self.key_overflow && key == b"method" {
                            self.method = true;
                        }
                        LastKey::Other
                    };
                }
                return;
            }
            if let Some(key) = &mut self.key {
                if key.len() < 8 {
                    key.push(b);
                } else {
                    self.key_overflow = true;
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if at_top && self.expect_key {
                    self.expect_key = false;
                    self.key = Some(Vec::new());
                    self.key_overflow = false;
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.top_object = b == b'{';
                    self.expect_key = self.top_object;
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if at_top => {
                self.expect_key = true;
                self.last_key = LastKey::Other;
            }
            b':' if at_top && self.last_key == LastKey::Id => {
                self.last_key = LastKey::Other;
                self.capture = Some(Vec::new());
            }
            _ => {}
        }
    }

    /// The bytes seen so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The error answer to the request this line answered (one JSON-RPC line), when the line was a response or
    /// error with a readable top-level `id`.
    pub(crate) fn answer(&self) -> Option<Vec<u8>> {
        let id = self.id.as_deref().filter(|_| !self.method)?;
        // Only what could be an id we sent: a number or a string.
        let id: serde_json::Value = serde_json::from_slice(id).ok()?;
        if !(id.is_number() || id.is_string()) {
            return None;
        }
        let message = format!(
            "the answer ({} bytes) exceeded the {} MiB line limit of stdio and socket connections and was discarded",
            self.len,
            MAX_LINE_LENGTH / (1024 * 1024)
        );
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": OVERSIZED_CODE, "message": message},
        });
        serde_json::to_vec(&answer).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn scan(line: &str, chunk: usize) -> IdScan {
        let mut s = IdScan::default();
        for part in line.as_bytes().chunks(chunk.max(1)) {
            s.feed(part);
        }
        s
    }

    fn id_of(line: &str) -> Option<serde_json::Value> {
        let mut ids = Vec::new();
        for chunk in [1, 2, 3, 7, 1000] {
            let a = scan(line, chunk).answer();
            ids.push(a.map(|a| serde_json::from_slice::<serde_json::Value>(&a).unwrap()["id"].clone()));
        }
        assert!(
            ids.windows(2).all(|w| w[0] == w[1]),
            "chunking changed the scan: {ids:?}"
        );
        ids.pop().unwrap()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        let text = "x".repeat(5000);
        let first =
            format!(r#"{{"jsonrpc":"2.0","id":42,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#);
        assert_eq!(id_of(&first), Some(serde_json::json!(42)));
        let last =
            format!(r#"{{"result":{{"content":[{{"type":"text","text":"{text}"}}]}},"jsonrpc":"2.0","id":"a,}}b"}}"#);
        assert_eq!(id_of(&last), Some(serde_json::json!("a,}b")));
        let spaced = r#" { "result" : {} , "id" : 4294967296 } "#;
        assert_eq!(id_of(spaced), Some(serde_json::json!(4_294_967_296_u64)));
        let error = r#"{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":7}"#;
        assert_eq!(id_of(error), Some(serde_json::json!(7)));
    }

    #[test]
    fn nested_ids_escaped_quotes_requests_and_non_messages_give_no_answer() {
        // Only nested ids (in the result, in a string with escaped quotes).
        let nested = r#"{"jsonrpc":"2.0","result":{"id":1,"text":"\"id\":2"}}"#;
        assert_eq!(id_of(nested), None);
        // A request from the server is no answer to ours.
        let request = r#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}"#;
        assert_eq!(id_of(request), None);
        // Not an object, an object id, garbage, a cut line.
        assert_eq!(id_of(r#"[{"id":1,"result":{}}]"#), None);
        assert_eq!(id_of(r#"{"id":{"a":1},"result":{}}"#), None);
        assert_eq!(id_of("xxxxxxxx"), None);
        assert_eq!(id_of(r#"{"result":{},"id":5"#), None);
        // A key that only starts like `id`.
        assert_eq!(id_of(r#"{"idx":5,"result":{}}"#), None);
    }

    #[test]
    fn the_answer_names_the_limit_and_the_size() {
        let s = scan(r#"{"id":9,"result":{}}"#, 4);
        let answer: serde_json::Value = serde_json::from_slice(&s.answer().unwrap()).unwrap();
        assert_eq!(answer["error"]["code"], OVERSIZED_CODE);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("16 MiB line limit"), "{message}");
        assert!(message.contains(&format!("({} bytes)", s.len())), "{message}");
    }
}
