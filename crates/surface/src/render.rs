//! Turns an upstream `CallToolResult` into pieces for the model: text stays text (never JSON-quoted), images pass
//! through, embedded text resources are shown, binary payloads (blob resources, audio) are handed to the output guard
//! to become files, resource links are described, and `structuredContent` is appended as JSON unless the text blocks
//! already say it (a text block holding the same JSON, or a value made only of strings the text blocks contain). The
//! result's `structuredContent` itself is kept for hosts and `call --json`. An upstream `isError` stays an error.

use rmcp::model::{CallToolResult, ContentBlock, ImageContent, ResourceContents};
use serde_json::Value;

/// What the model sees when a result has nothing in it.
pub const EMPTY_RESULT: &str = "(empty result)";
/// What the model sees when a tool reports an error without any content.
pub const EMPTY_ERROR: &str = "(the tool reported an error without a message)";
/// Default MIME type of an image without one.
const DEFAULT_IMAGE_MIME: &str = "image/png";

/// Base64 payloads that are not images: the output guard writes them to files (or notes why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// What the payload is.
    pub kind: BinaryKind,
    /// The resource URI, for blob resources.
    pub uri: Option<String>,
    /// Its MIME type, when given.
    pub mime_type: Option<String>,
    /// Base64 as received.
    pub base64: String,
}

/// Which kind of content a [`Binary`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BinaryKind {
    /// An embedded resource with a `blob`.
    Resource,
    /// Audio content.
    Audio,
}

/// One piece of rendered output, in the upstream order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Piece {
    /// Text, in the order it came.
    Text(String),
    /// An image, kept as content for the host.
    Image(ImageContent),
    /// A non-image payload the guard writes to a file.
    Binary(Binary),
}

/// A rendered result, ready for the output guard.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The pieces, in the upstream order.
    pub pieces: Vec<Piece>,
    /// Whether the tool reported an error.
    pub is_error: bool,
}

/// Renders an upstream result (see the module docs).
pub fn render_call_result(result: &CallToolResult) -> Rendered {
    let is_error = result.is_error == Some(true);
    let mut pieces: Vec<Piece> = result.content.iter().map(render_block).collect();
    let structured = result.structured_content.as_ref().filter(|v| !v.is_null());
    if let Some(value) = structured {
        let texts: Vec<&str> = pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let duplicated = texts.iter().any(|t| text_holds_json(t, value)) || strings_all_in(value, &texts);
        if !duplicated {
            let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
            pieces.push(Piece::Text(format!("structuredContent:\n{pretty}")));
        }
    }
    if pieces.is_empty() {
        pieces.push(Piece::Text(
            if is_error { EMPTY_ERROR } else { EMPTY_RESULT }.to_string(),
        ));
    }
    Rendered { pieces, is_error }
}

fn render_block(block: &ContentBlock) -> Piece {
    match block {
        ContentBlock::Text(t) => Piece::Text(t.text.clone()),
        ContentBlock::Image(image) => {
            let mut image = image.clone();
            if image.mime_type.trim().is_empty() {
                image.mime_type = DEFAULT_IMAGE_MIME.to_string();
            }
            Piece::Image(image)
        }
        ContentBlock::Audio(audio) => Piece::Binary(Binary {
            kind: BinaryKind::Audio,
            uri: None,
            mime_type: Some(audio.mime_type.clone()).filter(|m| !m.is_empty()),
            base64: audio.data.clone(),
        }),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                Piece::Text(format!("[Resource: {uri}]\n{text}"))
            }
            ResourceContents::BlobResourceContents {
                uri, mime_type, blob, ..
            } => Piece::Binary(Binary {
                kind: BinaryKind::Resource,
                uri: Some(uri.clone()),
                mime_type: mime_type.clone(),
                base64: blob.clone(),
            }),
            #[allow(unreachable_patterns)] // `ResourceContents` is non-exhaustive upstream
            other => Piece::Text(serde_json::to_string(other).unwrap_or_default()),
        },
        ContentBlock::ResourceLink(link) => {
            let mut text = format!("[Resource link: {}]\nURI: {}", link.name, link.uri);
            if let Some(mime) = &link.mime_type {
                text.push_str(&format!("\nType: {mime}"));
            }
            if let Some(size) = link.size {
                text.push_str(&format!("\nSize: {}", human_bytes(size)));
            }
            if let Some(description) = &link.description {
                text.push_str(&format!("\n{description}"));
            }
            Piece::Text(text)
        }
        #[allow(unreachable_patterns)] // `ContentBlock` is non-exhaustive upstream
        other => Piece::Text(serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Whether `text` is the JSON serialization of `value` (servers often send both, per the MCP spec's advice).
fn text_holds_json(text: &str, value: &Value) -> bool {
    let trimmed = text.trim_start();
    let could_be = match value {
        Value::Object(_) => trimmed.starts_with('{'),
        Value::Array(_) => trimmed.starts_with('['),
        _ => true,
    };
    could_be && serde_json::from_str::<Value>(text).is_ok_and(|parsed| &parsed == value)
}

/// Whether `value` is made of strings only (in objects and arrays; keys aside), each of them non-empty and found in
/// one of `texts`: it then tells the model nothing the text blocks do not. server-filesystem answers with
/// `{"content": <its text block>}`, for instance. A number, boolean or null leaf keeps the value (`{"sum": 3}` beside
/// "3" says what the 3 is).
fn strings_all_in(value: &Value, texts: &[&str]) -> bool {
    fn walk(value: &Value, texts: &[&str], seen: &mut usize) -> bool {
        match value {
            Value::String(s) => {
                *seen += 1;
                !s.is_empty() && texts.iter().any(|t| t.contains(s.as_str()))
            }
            Value::Array(items) => items.iter().all(|v| walk(v, texts, seen)),
            Value::Object(map) => map.values().all(|v| walk(v, texts, seen)),
            _ => false,
        }
    }
    let mut seen = 0;
    !texts.is_empty() && walk(value, texts, &mut seen) && seen > 0
}

/// `1.5 KiB`-style sizes for texts.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    // Display-only rounding: the f64 conversion loses nothing that one decimal shows.
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rmcp::model::{ContentBlock, Resource};
    use serde_json::json;

    use super::*;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    fn texts(r: &Rendered) -> Vec<String> {
        r.pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Image(i) => format!("<image {}>", i.mime_type),
                Piece::Binary(b) => format!("<{:?} {:?} {:?} {}>", b.kind, b.uri, b.mime_type, b.base64),
            })
            .collect()
    }

    #[test]
    fn render_table() {
        let cases: Vec<(Value, bool, Vec<&str>)> = vec![
            (
                json!({"content": [{"type": "text", "text": "Echo: \"hi\"\nline 2"}]}),
                false,
                vec!["Echo: \"hi\"\nline 2"],
            ),
            (json!({"content": []}), false, vec![EMPTY_RESULT]),
            (json!({"content": [], "isError": true}), true, vec![EMPTY_ERROR]),
            (
                json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
                true,
                vec!["boom"],
            ),
            (
                json!({"content": [{"type": "image", "data": "iVBO", "mimeType": "image/jpeg"}, {"type": "image", "data": "x", "mimeType": ""}]}),
                false,
                vec!["<image image/jpeg>", "<image image/png>"],
            ),
            (
                json!({"content": [{"type": "audio", "data": "UklG", "mimeType": "audio/wav"}]}),
                false,
                vec!["<Audio None Some(\"audio/wav\") UklG>"],
            ),
            (
                json!({"content": [{"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}}]}),
                false,
                vec!["[Resource: file:///a.txt]\nhello"],
            ),
            (
                json!({"content": [{"type": "resource", "resource": {"uri": "file:///a.pdf", "mimeType": "application/pdf", "blob": "JVBERi0="}}]}),
                false,
                vec!["<Resource Some(\"file:///a.pdf\") Some(\"application/pdf\") JVBERi0=>"],
            ),
            (
                json!({"content": [{"type": "resource_link", "uri": "file:///r.md", "name": "readme", "mimeType": "text/markdown", "size": 2048, "description": "The readme"}]}),
                false,
                vec!["[Resource link: readme]\nURI: file:///r.md\nType: text/markdown\nSize: 2.0 KiB\nThe readme"],
            ),
            (
                json!({"content": [], "structuredContent": {"sum": 3}}),
                false,
                vec!["structuredContent:\n{\n  \"sum\": 3\n}"],
            ),
            (
                json!({"content": [{"type": "text", "text": "{\"sum\": 3}"}], "structuredContent": {"sum": 3}}),
                false,
                vec!["{\"sum\": 3}"],
            ),
            (
                json!({"content": [{"type": "text", "text": "The sum is 3"}], "structuredContent": {"sum": 3}}),
                false,
                vec!["The sum is 3", "structuredContent:\n{\n  \"sum\": 3\n}"],
            ),
            (
                // server-filesystem's `get_file_info`: the structured value only repeats the text block.
                json!({"content": [{"type": "text", "text": "size: 12\nisFile: true"}], "structuredContent": {"content": "size: 12\nisFile: true"}}),
                false,
                vec!["size: 12\nisFile: true"],
            ),
            (
                json!({"content": [{"type": "text", "text": "a\nb"}], "structuredContent": {"lines": ["a", "b"], "more": [{"x": "b"}]}}),
                false,
                vec!["a\nb"],
            ),
            (
                // A string the text does not contain keeps the value.
                json!({"content": [{"type": "text", "text": "saved"}], "structuredContent": {"content": "saved", "id": "f-91"}}),
                false,
                vec![
                    "saved",
                    "structuredContent:\n{\n  \"content\": \"saved\",\n  \"id\": \"f-91\"\n}",
                ],
            ),
            (
                json!({"content": [], "structuredContent": null}),
                false,
                vec![EMPTY_RESULT],
            ),
            (
                json!({"content": [{"type": "text", "text": "漢字 🙂"}]}),
                false,
                vec!["漢字 🙂"],
            ),
        ];
        for (input, is_error, want) in cases {
            let r = render_call_result(&result(input.clone()));
            assert_eq!(
                (r.is_error, texts(&r)),
                (is_error, want.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
                "{input}"
            );
        }
    }

    #[test]
    fn built_results_render_too() {
        let link = ContentBlock::resource_link(Resource::new("file:///x", "x"));
        let r = render_call_result(&CallToolResult::error(vec![ContentBlock::text("nope"), link]));
        assert!(r.is_error);
        assert_eq!(texts(&r), ["nope", "[Resource link: x]\nURI: file:///x"]);
    }

    #[test]
    fn human_bytes_table() {
        for (n, want) in [
            (0, "0 bytes"),
            (1023, "1023 bytes"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (10 << 20, "10.0 MiB"),
        ] {
            assert_eq!(human_bytes(n), want);
        }
    }
}
