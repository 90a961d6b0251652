//! Surgical edits of JSONC text: a syntax tree with byte spans, and operations that set or remove one member while
//! leaving every other byte (comments, formatting, key order) as it was. New members follow the file's indentation.

use serde_json::Value;

/// A value with its byte span `[start, end)` in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Object {
        start: usize,
        end: usize,
        members: Vec<Member>,
    },
    Array {
        start: usize,
        end: usize,
    },
    Scalar {
        start: usize,
        end: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub key: String,
    pub key_start: usize,
    pub value: Node,
}

impl Node {
    pub(crate) fn span(&self) -> (usize, usize) {
        match self {
            Node::Object { start, end, .. } | Node::Array { start, end } | Node::Scalar { start, end } => {
                (*start, *end)
            }
        }
    }

    pub(crate) fn member(&self, key: &str) -> Option<&Member> {
        match self {
            Node::Object { members, .. } => members.iter().rev().find(|m| m.key == key),
            _ => None,
        }
    }
}

/// Parses JSONC text already known to be valid (`crate::parse_jsonc` accepted it). `None` if it is not.
pub(crate) fn parse(text: &str) -> Option<Node> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    parser.skip();
    let node = parser.value()?;
    parser.skip();
    (parser.pos == parser.bytes.len()).then_some(node)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips whitespace and comments.
    fn skip(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    self.pos += 2;
                    while self.pos < self.bytes.len()
                        && !(self.bytes[self.pos] == b'*' && self.bytes.get(self.pos + 1) == Some(&b'/'))
                    {
                        self.pos += 1;
                    }
                    self.pos = (self.pos + 2).min(self.bytes.len());
                }
                _ => return,
            }
        }
    }

    fn value(&mut self) -> Option<Node> {
        match self.peek()? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => {
                let (start, end) = self.string()?;
                Some(Node::Scalar { start, end })
            }
            _ => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n' | b'/'))
                {
                    self.pos += 1;
                }
                (self.pos > start).then_some(Node::Scalar { start, end: self.pos })
            }
        }
    }

    fn string(&mut self) -> Option<(usize, usize)> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek()? {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    return Some((start, self.pos));
                }
                _ => self.pos += 1,
            }
        }
    }

    fn object(&mut self) -> Option<Node> {
        let start = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip();
            match self.peek()? {
                b'}' => {
                    self.pos += 1;
                    return Some(Node::Object {
                        start,
                        end: self.pos,
                        members,
                    });
                }
                b',' => self.pos += 1,
                b'"' => {
                    let (key_start, key_end) = self.string()?;
                    let key: String = serde_json::from_str(self.text.get(key_start..key_end)?).ok()?;
                    self.skip();
                    if self.peek()? != b':' {
                        return None;
                    }
                    self.pos += 1;
                    self.skip();
                    let value = self.value()?;
                    members.push(Member { key, key_start, value });
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self) -> Option<Node> {
        let start = self.pos;
        self.pos += 1;
        loop {
            self.skip();
            match self.peek()? {
                b']' => {
                    self.pos += 1;
                    return Some(Node::Array { start, end: self.pos });
                }
                b',' => self.pos += 1,
                _ => {
                    self.value()?;
                }
            }
        }
    }
}

/// The file's indentation unit and line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Style {
    pub unit: String,
    pub newline: &'static str,
}

impl Style {
    pub(crate) fn detect(text: &str) -> Style {
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let unit = text
            .lines()
            .map(|line| {
                let trimmed = line.trim_start_matches([' ', '\t']);
                (&line[..line.len() - trimmed.len()], trimmed)
            })
            .find(|(indent, rest)| !indent.is_empty() && !rest.is_empty())
            .map(|(indent, _)| {
                if indent.starts_with('\t') {
                    "\t".to_string()
                } else {
                    indent.to_string()
                }
            })
            .unwrap_or_else(|| "  ".to_string());
        Style { unit, newline }
    }
}

/// Leading whitespace of the line containing `pos`.
fn line_indent(text: &str, pos: usize) -> &str {
    let line_start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let trimmed = line.trim_start_matches([' ', '\t']);
    &line[..line.len() - trimmed.len()]
}

/// Pretty JSON with the file's indentation, continuation lines indented by `base`.
fn render(value: &Value, style: &Style, base: &str) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(style.unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    if value.serialize(&mut ser).is_err() {
        return value.to_string();
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    text.replace('\n', &format!("{}{base}", style.newline))
}

fn render_member(key: &str, value: &Value, style: &Style, base: &str) -> String {
    format!("{}: {}", Value::String(key.to_string()), render(value, style, base))
}

/// Skips spaces, tabs and comments on the current line; returns the position of the line end (or of the next token).
fn rest_of_line(text: &str, mut pos: usize) -> usize {
    let bytes = text.as_bytes();
    loop {
        match bytes.get(pos) {
            Some(b' ' | b'\t') => pos += 1,
            Some(b'/') if bytes.get(pos + 1) == Some(&b'/') => {
                while bytes.get(pos).is_some_and(|b| *b != b'\n' && *b != b'\r') {
                    pos += 1;
                }
            }
            Some(b'/') if bytes.get(pos + 1) == Some(&b'*') => match text[pos + 2..].find("*/") {
                Some(end) if !text[pos..pos + 2 + end].contains('\n') => pos += end + 4,
                _ => return pos,
            },
            _ => return pos,
        }
    }
}

/// Position of a comma following `pos` (after whitespace and comments), if any.
fn comma_after(text: &str, pos: usize) -> Option<usize> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos,
    };
    parser.skip();
    (parser.peek() == Some(b',')).then_some(parser.pos)
}

/// Sets `key` of the object `obj` to `value`: replaces the member's value if present, else inserts a member.
pub(crate) fn set_member(text: &str, obj: &Node, key: &str, value: &Value) -> String {
    let style = Style::detect(text);
    let Node::Object { start, end, members } = obj else {
        return text.to_string();
    };
    if let Some(member) = members.iter().rev().find(|m| m.key == key) {
        let (vs, ve) = member.value.span();
        let base = line_indent(text, member.key_start).to_string();
        return format!("{}{}{}", &text[..vs], render(value, &style, &base), &text[ve..]);
    }
    let close = end - 1;
    let obj_indent = line_indent(text, *start).to_string();
    let multiline = text[*start..*end].contains('\n') || (members.is_empty() && text.contains('\n'));
    match members.last() {
        None if multiline => {
            let child = format!("{obj_indent}{}", style.unit);
            let interior_end = text[..close]
                .trim_end_matches([' ', '\t', '\r', '\n'])
                .len()
                .max(start + 1);
            format!(
                "{}{nl}{child}{}{nl}{obj_indent}{}",
                &text[..interior_end],
                render_member(key, value, &style, &child),
                &text[close..],
                nl = style.newline
            )
        }
        None => format!(
            "{}{}: {}{}",
            &text[..close],
            Value::String(key.to_string()),
            value,
            &text[close..]
        ),
        Some(last) => {
            let (_, after_last) = last.value.span();
            let comma = comma_after(text, after_last).filter(|c| *c < close);
            if multiline {
                let child = line_indent(text, last.key_start).to_string();
                let (head, insert_at) = match comma {
                    Some(c) => (text[..c + 1].to_string(), c + 1),
                    None => (format!("{},", &text[..after_last]), after_last),
                };
                let eol = rest_of_line(text, insert_at);
                let eol = if matches!(text.as_bytes().get(eol), Some(b'\n' | b'\r')) {
                    eol
                } else {
                    insert_at
                };
                format!(
                    "{head}{}{nl}{child}{}{}",
                    &text[insert_at..eol],
                    render_member(key, value, &style, &child),
                    &text[eol..],
                    nl = style.newline
                )
            } else {
                let compact = Value::String(key.to_string()).to_string() + ": " + &value.to_string();
                match comma {
                    Some(c) => format!("{} {compact}{}", &text[..c + 1], &text[c + 1..]),
                    None => format!("{}, {compact}{}", &text[..after_last], &text[after_last..]),
                }
            }
        }
    }
}

/// Removes member `key` from the object `obj` (and its separating comma); whole lines go when the member had them
/// to itself.
pub(crate) fn remove_member(text: &str, obj: &Node, key: &str) -> String {
    let Node::Object { members, .. } = obj else {
        return text.to_string();
    };
    let Some(idx) = members.iter().rposition(|m| m.key == key) else {
        return text.to_string();
    };
    let member = &members[idx];
    let (_, value_end) = member.value.span();
    let bytes = text.as_bytes();
    let (mut start, mut end) = (member.key_start, value_end);
    // The separator: the comma after the member, else (last member) the one before it.
    let mut prev_comma = None;
    if let Some(comma) = comma_after(text, value_end) {
        end = comma + 1;
    } else if idx > 0 {
        let (_, prev_end) = members[idx - 1].value.span();
        prev_comma = comma_after(text, prev_end).filter(|c| *c < member.key_start);
    }
    // Take the whole line(s) when the member stood alone on them.
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let alone_before = text[line_start..start].trim().is_empty();
    let eol = rest_of_line(text, end);
    let line_ends = matches!(bytes.get(eol), Some(b'\n' | b'\r'));
    let trailing_comment = text[end..eol].trim_start().starts_with("//");
    if !(alone_before && line_ends && !trailing_comment) {
        // Inline: also drop the spaces that separated the removed member from the next one.
        let mut next = end;
        while matches!(bytes.get(next), Some(b' ' | b'\t')) {
            next += 1;
        }
        if next > end
            && bytes.get(next).is_some_and(|b| !matches!(b, b'\n' | b'\r' | b'/'))
            && start == member.key_start
            && prev_comma.is_none()
        {
            end = next;
        }
    } else {
        start = line_start;
        end = eol;
        if bytes.get(end) == Some(&b'\r') {
            end += 1;
        }
        if bytes.get(end) == Some(&b'\n') {
            end += 1;
        }
    }
    match prev_comma {
        Some(comma) => format!("{}{}{}", &text[..comma], &text[comma + 1..start], &text[end..]),
        None => format!("{}{}", &text[..start], &text[end..]),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn set(text: &str, path: &[&str], value: Value) -> String {
        let root = parse(text).unwrap();
        let mut node = &root;
        for key in &path[..path.len() - 1] {
            node = &node.member(key).unwrap().value;
        }
        let out = set_member(text, node, path[path.len() - 1], &value);
        assert!(crate::parse_jsonc(&out).is_ok(), "invalid result:\n{out}");
        out
    }

    fn remove(text: &str, path: &[&str]) -> String {
        let root = parse(text).unwrap();
        let mut node = &root;
        for key in &path[..path.len() - 1] {
            node = &node.member(key).unwrap().value;
        }
        let out = remove_member(text, node, path[path.len() - 1]);
        assert!(crate::parse_jsonc(&out).is_ok(), "invalid result:\n{out}");
        out
    }

    const FILE: &str = r#"{
  // my servers
  "mcpServers": {
    "a": { "command": "x" }, // inline note
    "b": {
      "url": "https://b/mcp"
    }
  }
}
"#;

    #[test]
    fn insert_keeps_everything_else() {
        let out = set(FILE, &["mcpServers", "c"], json!({"command": "y", "args": ["1"]}));
        assert_eq!(
            out,
            r#"{
  // my servers
  "mcpServers": {
    "a": { "command": "x" }, // inline note
    "b": {
      "url": "https://b/mcp"
    },
    "c": {
      "command": "y",
      "args": [
        "1"
      ]
    }
  }
}
"#
        );
    }

    #[test]
    fn replace_member_value() {
        let out = set(FILE, &["mcpServers", "b", "url"], json!("https://new/mcp"));
        assert_eq!(out, FILE.replace("https://b/mcp", "https://new/mcp"));
    }

    #[test]
    fn insert_into_inline_object() {
        let out = set(FILE, &["mcpServers", "a", "disabled"], json!(true));
        assert!(
            out.contains(r#""a": { "command": "x", "disabled": true }, // inline note"#),
            "{out}"
        );
    }

    #[test]
    fn insert_into_empty_object_and_root() {
        let text = "{\n  \"mcpServers\": {}\n}\n";
        let out = set(text, &["mcpServers", "x"], json!({"disabled": true}));
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"x\": {\n      \"disabled\": true\n    }\n  }\n}\n"
        );
        let out = set("{}", &["imports"], json!(["cursor"]));
        assert_eq!(out, r#"{"imports": ["cursor"]}"#);
    }

    #[test]
    fn insert_after_trailing_comma_and_comment() {
        let text = "{\n    \"a\": 1, // one\n}\n";
        let out = set(text, &["b"], json!(2));
        assert_eq!(out, "{\n    \"a\": 1, // one\n    \"b\": 2\n}\n");
        let text = "{\n\t\"a\": 1 // one\n}\n";
        let out = set(text, &["b"], json!(2));
        assert_eq!(out, "{\n\t\"a\": 1, // one\n\t\"b\": 2\n}\n");
    }

    #[test]
    fn remove_members() {
        let out = remove(FILE, &["mcpServers", "b"]);
        assert_eq!(
            out,
            r#"{
  // my servers
  "mcpServers": {
    "a": { "command": "x" } // inline note
  }
}
"#
        );
        let out = remove(FILE, &["mcpServers", "a"]);
        assert!(!out.contains("\"a\""), "{out}");
        assert!(out.contains("\"b\": {"), "{out}");
        let out = remove(r#"{"a": 1, "b": 2, "c": 3}"#, &["b"]);
        assert_eq!(out, r#"{"a": 1, "c": 3}"#);
        let out = remove(r#"{"a": 1}"#, &["a"]);
        assert_eq!(out, r#"{}"#);
        let out = remove("{\n  \"a\": 1,\n  \"b\": 2\n}\n", &["a"]);
        assert_eq!(out, "{\n  \"b\": 2\n}\n");
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let text = "{\r\n  \"a\": 1\r\n}\r\n";
        let out = set(text, &["b"], json!({"c": 2}));
        assert_eq!(out, "{\r\n  \"a\": 1,\r\n  \"b\": {\r\n    \"c\": 2\r\n  }\r\n}\r\n");
    }
}
