//! Single-pass decodes of the two lines every proxied tool call carries: the host's `tools/call` request and the
//! upstream's tool result, read once, byte by byte, straight into rmcp's types (no pre-scan, no serde `Content`
//! buffering, which rmcp's flattened and internally tagged derives go through, no visitor layers).
//!
//! The contract is rmcp's own decode (`JsonRpcMessage`'s deserializer): a line these functions accept decodes to
//! exactly what rmcp gives for it, and serializes back the same. They accept only a strict grammar whose rmcp
//! decode is certain and answer `None` (decode it another way) for anything else: a key given twice, a value of an
//! unexpected type, a content block other than `text`/`image`/`audio`, `inputResponses`, a `resultType` other than
//! `complete`, an unknown key in a tool result (another `ServerResult` type might claim it), a line with `result`
//! or `error` beside `method`, nesting deeper than [`MAX_DEPTH`], trailing bytes, bad JSON. The JSON syntax is
//! checked here; what serde_json decides (a string with escapes, a number's value) is left to serde_json on that
//! token, so strings and numbers come out exactly as in rmcp's decode. What they rely on from rmcp 3.11 (each
//! pinned by the differential tests here and in `lines.rs`):
//! - `tools/call` is claimed by `CallToolRequest` alone in `ClientRequest`; `params._meta` goes to the request's
//!   extensions as a `RequestMetaObject` (the params' own `meta` stays `None`); unknown keys are ignored at the top
//!   and in `params`; `"arguments": null` is `None`.
//! - A result whose keys are all among `content`, `structuredContent`, `isError`, `_meta`, `resultType` is claimed
//!   by `CallToolResult`; `"structuredContent": null` is `Some(Null)`, other `null`s are `None`; content blocks and
//!   annotations ignore unknown keys; a priority is read as a JSON number, then narrowed to `f32`.
//! - Ids decode as `RequestId`'s own deserializer decodes them; objects are built as serde_json builds a `Map`
//!   (insertion order, a repeated key keeps its first place and its last value).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    Annotations, AudioContent, CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ImageContent, JsonObject, JsonRpcMessage, JsonRpcRequest, JsonRpcResponse, JsonRpcVersion2_0, MetaObject,
    RequestId, RequestMetaObject, ResultType, Role, ServerResult, TextContent,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::{RoleClient, RoleServer};
use serde_json::Value;

/// Nesting deeper than this is declined (serde_json refuses a line nested 128 deep; well within that, the two
/// decodes agree).
pub(super) const MAX_DEPTH: usize = 100;

/// A `tools/call` request (server role), or `None`.
pub(super) fn tool_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let mut c = Cursor::new(line)?;
    let (mut jsonrpc, mut id, mut method, mut params) = (None, None, None, None);
    c.object(|c, key| match &*key {
        "jsonrpc" => set(&mut jsonrpc, c.exact("2.0")?),
        "id" => set(&mut id, c.request_id()?),
        "method" => set(&mut method, c.exact("tools/call")?),
        "params" => set(&mut params, c.call_params()?),
        // Not a request in rmcp's classification.
        "result" | "error" => None,
        _ => c.skip(2),
    })?;
    c.end()?;
    jsonrpc?;
    method?;
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: JsonRpcVersion2_0,
        id: id?,
        request: ClientRequest::CallToolRequest(params?),
    }))
}

/// A response carrying a plain tool result (client role), or `None`.
pub(super) fn tool_result(line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
    let mut c = Cursor::new(line)?;
    let (mut jsonrpc, mut id, mut result) = (None, None, None);
    c.object(|c, key| match &*key {
        "jsonrpc" => set(&mut jsonrpc, c.exact("2.0")?),
        "id" => set(&mut id, c.request_id()?),
        "result" => set(&mut result, c.tool_result()?),
        // Not a response in rmcp's classification.
        "method" | "error" => None,
        _ => c.skip(2),
    })?;
    c.end()?;
    jsonrpc?;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id: id?,
        result: ServerResult::CallToolResult(result?),
    }))
}

/// Stores a key's value; `None` (decline) when the key was given before (rmcp refuses those for its fields).
fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

/// A position in a line. Every method answers `None` for what it does not accept, leaving the cursor anywhere.
struct Cursor<'a> {
    /// The line, checked as UTF-8 once (serde_json refuses a line that is not: invalid bytes inside a string are
    /// an error, anywhere else a syntax error).
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn new(line: &'a [u8]) -> Option<Cursor<'a>> {
        let s = std::str::from_utf8(line).ok()?;
        Some(Cursor { s, b: line, i: 0 })
    }

    /// The next byte after JSON whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        while let Some(&c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(c);
            }
            self.i += 1;
        }
        None
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Only whitespace is left.
    fn end(&mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }

    /// An object; `member` reads each value, given its key (the cursor stands before the value).
    fn object(&mut self, mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            member(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array; `element` reads each element.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            element(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string, borrowed when it has no escapes; one with escapes is decoded by serde_json, as rmcp's decode does.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let rest = self.b.get(start..)?;
        let n = rest.iter().position(|&c| matches!(c, b'"' | b'\\' | 0..=0x1f))?;
        match rest[n] {
            b'"' => {
                // Both ends are ASCII quotes: char boundaries.
                let s = self.s.get(start..start + n)?;
                self.i = start + n + 1;
                Some(Cow::Borrowed(s))
            }
            b'\\' => self.escaped_string(),
            // serde_json refuses control characters in strings.
            _ => None,
        }
    }

    fn escaped_string(&mut self) -> Option<Cow<'a, str>> {
        let mut j = self.i + 1;
        loop {
            match *self.b.get(j)? {
                b'"' => break,
                b'\\' => j += 2,
                _ => j += 1,
            }
        }
        let s = serde_json::from_slice::<String>(self.b.get(self.i..=j)?).ok()?;
        self.i = j + 1;
        Some(Cow::Owned(s))
    }

    /// A string equal to `expected` (after unescaping).
    fn exact(&mut self, expected: &str) -> Option<()> {
        (self.string()? == expected).then_some(())
    }

    /// The bytes of a number token, handed to serde_json as `T` (which checks its syntax).
    fn number<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        self.peek()?;
        let start = self.i;
        while matches!(self.b.get(self.i), Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
            self.i += 1;
        }
        serde_json::from_slice(&self.b[start..self.i]).ok()
    }

    /// `true`, `false` or `null`, spelled out.
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.peek()?;
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    fn null(&mut self) -> Option<()> {
        self.literal(b"null")
    }

    /// A JSON value at nesting `depth`, built as serde_json builds a `Value`.
    fn value(&mut self, depth: usize) -> Option<Value> {
        Some(match self.peek()? {
            b'{' => Value::Object(self.map(depth)?),
            b'[' => {
                if depth > MAX_DEPTH {
                    return None;
                }
                let mut items = Vec::new();
                self.array(|c| {
                    items.push(c.value(depth + 1)?);
                    Some(())
                })?;
                Value::Array(items)
            }
            b'"' => Value::String(self.string()?.into_owned()),
            b't' => self.literal(b"true").map(|()| Value::Bool(true))?,
            b'f' => self.literal(b"false").map(|()| Value::Bool(false))?,
            b'n' => self.null().map(|()| Value::Null)?,
            _ => Value::Number(self.number()?),
        })
    }

    /// An object at nesting `depth` as a map (`Map::insert` for each member, as serde_json's `Value` does).
    fn map(&mut self, depth: usize) -> Option<JsonObject> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut map = JsonObject::new();
        self.object(|c, key| {
            // serde_json's `Value` treats its private marker keys (raw values, arbitrary-precision numbers) apart.
            if key.starts_with("$serde_json::private::") {
                return None;
            }
            let value = c.value(depth + 1)?;
            map.insert(key.into_owned(), value);
            Some(())
        })?;
        Some(map)
    }

    /// A value that is read for its syntax only.
    fn skip(&mut self, depth: usize) -> Option<()> {
        self.value(depth).map(drop)
    }

    /// `null` (`None`) or an object.
    fn optional_map(&mut self, depth: usize) -> Option<Option<JsonObject>> {
        match self.peek()? {
            b'n' => self.null().map(|()| None),
            _ => self.map(depth).map(Some),
        }
    }

    /// `null` (`None`) or a string.
    fn optional_string(&mut self) -> Option<Option<String>> {
        match self.peek()? {
            b'n' => self.null().map(|()| None),
            _ => self.string().map(|s| Some(s.into_owned())),
        }
    }

    /// `null` (`None`), `true` or `false`.
    fn optional_bool(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b'n' => self.null().map(|()| None),
            b't' => self.literal(b"true").map(|()| Some(true)),
            _ => self.literal(b"false").map(|()| Some(false)),
        }
    }

    /// An id, as `RequestId`'s deserializer reads it (a string, or a number serde_json parses).
    fn request_id(&mut self) -> Option<RequestId> {
        match self.peek()? {
            b'"' => Some(RequestId::String(Arc::from(self.string()?))),
            b'0'..=b'9' => {
                // A plain integer of up to 18 digits, no leading zero, fits an `i64`: read here. Anything else
                // (a sign, a fraction, an exponent, more digits) goes to serde_json.
                let digits = self.b[self.i..].iter().take_while(|c| c.is_ascii_digit()).count();
                let end = self.i + digits;
                let plain = (digits == 1 || self.b[self.i] != b'0') && digits <= 18;
                if plain && !matches!(self.b.get(end), Some(b'.' | b'e' | b'E' | b'+' | b'-')) {
                    let n = self.b[self.i..end]
                        .iter()
                        .fold(0i64, |n, &c| n * 10 + i64::from(c - b'0'));
                    self.i = end;
                    return Some(RequestId::Number(n));
                }
                self.number::<RequestId>()
            }
            b'-' => self.number::<RequestId>(),
            _ => None,
        }
    }

    /// `params` of a `tools/call` request, built into the request as rmcp builds it: `_meta` in the extensions,
    /// not in the params.
    fn call_params(&mut self) -> Option<CallToolRequest> {
        let (mut meta, mut name, mut arguments, mut input_responses, mut request_state) =
            (None, None, None, None, None);
        self.object(|c, key| match &*key {
            "_meta" => set(&mut meta, c.optional_map(3)?),
            "name" => set(&mut name, c.string()?.into_owned()),
            "arguments" => set(&mut arguments, c.optional_map(3)?),
            // Responses to input requests (MRTR) are left to rmcp.
            "inputResponses" => set(&mut input_responses, c.null()?),
            "requestState" => set(&mut request_state, c.optional_string()?),
            _ => c.skip(3),
        })?;
        let mut params = CallToolRequestParams::new(name?);
        params.arguments = arguments.flatten();
        params.request_state = request_state.flatten();
        let mut request = CallToolRequest::new(params);
        if let Some(meta) = meta.flatten() {
            request.extensions.insert(RequestMetaObject::from(meta));
        }
        Some(request)
    }

    /// A result object with tool-result keys only, `content` among them.
    fn tool_result(&mut self) -> Option<CallToolResult> {
        let (mut content, mut structured, mut is_error, mut meta, mut result_type) = (None, None, None, None, None);
        self.object(|c, key| match &*key {
            "content" => set(&mut content, c.blocks()?),
            "structuredContent" => set(&mut structured, c.value(3)?),
            "isError" => set(&mut is_error, c.optional_bool()?),
            "_meta" => set(&mut meta, c.optional_map(3)?),
            "resultType" => set(
                &mut result_type,
                match c.peek()? {
                    b'n' => c.null().map(|()| None)?,
                    // The one value with which rmcp's `CallToolResult` claims a result.
                    _ => c.exact("complete").map(|()| Some(ResultType::COMPLETE))?,
                },
            ),
            // Another `ServerResult` type might claim the object.
            _ => None,
        })?;
        let mut result = CallToolResult::default();
        result.result_type = result_type.flatten();
        result.content = content?;
        result.structured_content = structured;
        result.is_error = is_error.flatten();
        result.meta = meta.flatten().map(MetaObject);
        Some(result)
    }

    /// A tool result's `content` array of `text`, `image` and `audio` blocks.
    fn blocks(&mut self) -> Option<Vec<ContentBlock>> {
        let mut blocks = Vec::new();
        self.array(|c| {
            blocks.push(c.block()?);
            Some(())
        })?;
        Some(blocks)
    }

    fn block(&mut self) -> Option<ContentBlock> {
        let (mut kind, mut text, mut data, mut mime_type, mut meta, mut annotations) =
            (None, None, None, None, None, None);
        self.object(|c, key| match &*key {
            "type" => set(&mut kind, c.string()?),
            "text" => set(&mut text, c.string()?),
            "data" => set(&mut data, c.string()?),
            "mimeType" => set(&mut mime_type, c.string()?),
            "_meta" => set(&mut meta, c.optional_map(5)?),
            "annotations" => set(&mut annotations, c.annotations()?),
            _ => c.skip(5),
        })?;
        let meta = meta.flatten().map(MetaObject);
        let annotations = annotations.flatten();
        Some(match &*kind? {
            "text" => {
                let mut t = TextContent::new(text?);
                t.meta = meta;
                t.annotations = annotations;
                ContentBlock::Text(t)
            }
            "image" => {
                let mut i = ImageContent::new(data?, mime_type?);
                i.meta = meta;
                i.annotations = annotations;
                ContentBlock::Image(i)
            }
            "audio" => {
                let mut a = AudioContent::new(data?, mime_type?);
                a.meta = meta;
                a.annotations = annotations;
                ContentBlock::Audio(a)
            }
            _ => return None,
        })
    }

    /// A block's `annotations`: `null` or an object (`audience` as plain role strings).
    fn annotations(&mut self) -> Option<Option<Annotations>> {
        if self.peek()? == b'n' {
            return self.null().map(|()| None);
        }
        let (mut audience, mut priority, mut last_modified) = (None, None, None);
        self.object(|c, key| match &*key {
            "audience" => set(
                &mut audience,
                match c.peek()? {
                    b'n' => c.null().map(|()| None)?,
                    _ => {
                        let mut roles = Vec::new();
                        c.array(|c| {
                            roles.push(match &*c.string()? {
                                "user" => Role::User,
                                "assistant" => Role::Assistant,
                                _ => return None,
                            });
                            Some(())
                        })?;
                        Some(roles)
                    }
                },
            ),
            "priority" => set(
                &mut priority,
                match c.peek()? {
                    b'n' => c.null().map(|()| None)?,
                    // As rmcp reads it: a JSON number, as `f64`, narrowed with `as`.
                    b'-' | b'0'..=b'9' => Some(c.number::<serde_json::Number>()?.as_f64()? as f32),
                    _ => return None,
                },
            ),
            "lastModified" => set(&mut last_modified, c.optional_string()?),
            _ => c.skip(6),
        })?;
        let mut annotations = Annotations::default();
        annotations.audience = audience.flatten();
        annotations.priority = priority.flatten();
        annotations.last_modified = last_modified.flatten();
        Some(Some(annotations))
    }
}

/// The oracle and the generated lines the differential tests (here and in `lines.rs`) compare against rmcp.
#[cfg(test)]
pub(super) mod corpus {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
    use rmcp::service::ServiceRole;

    use super::*;

    /// All of a decoded message the proxy can see: its `Debug` text (every field, `None` and `Some(Null)` apart,
    /// the union variant), the JSON it serializes back to, and a request's `_meta` kept in its extensions (which
    /// `Debug` does not show).
    pub(crate) trait Fingerprint {
        fn fingerprint(&self) -> String;
    }

    impl Fingerprint for ClientJsonRpcMessage {
        fn fingerprint(&self) -> String {
            let meta = match self {
                JsonRpcMessage::Request(JsonRpcRequest {
                    request: ClientRequest::CallToolRequest(r),
                    ..
                }) => format!("{:?}", r.extensions.get::<RequestMetaObject>()),
                _ => String::new(),
            };
            format!("{self:?}\n{}\n{meta}", serde_json::to_string(self).unwrap())
        }
    }

    impl Fingerprint for ServerJsonRpcMessage {
        fn fingerprint(&self) -> String {
            format!("{self:?}\n{}", serde_json::to_string(self).unwrap())
        }
    }

    /// rmcp's own decode of a line (a leading BOM stripped, as the transport does), fingerprinted.
    pub(crate) fn rmcp_decode<Role: ServiceRole>(line: &str) -> Option<String>
    where
        RxJsonRpcMessage<Role>: Fingerprint,
    {
        serde_json::from_str::<RxJsonRpcMessage<Role>>(line.strip_prefix('\u{feff}').unwrap_or(line))
            .ok()
            .map(|m| m.fingerprint())
    }

    /// A small deterministic generator (xorshift64*): the corpus is the same on every run.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed | 1)
        }
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
    }

    /// A value's JSON text, and whether the fast decode must take a line that holds it.
    type Variant = (&'static str, bool);

    enum Gen {
        Of(&'static [Variant]),
        By(fn(&mut Rng) -> (String, bool)),
    }

    /// One key of a generated object. A `known` key is one the grammar reads: given twice, the line is declined.
    /// A `required` key left out makes the line declined too.
    struct Field {
        key: &'static str,
        percent: u64,
        required: bool,
        known: bool,
        value: Gen,
    }

    const fn field(key: &'static str, percent: u64, required: bool, known: bool, value: Gen) -> Field {
        Field {
            key,
            percent,
            required,
            known,
            value,
        }
    }

    fn generate(rng: &mut Rng, value: &Gen) -> (String, bool) {
        match value {
            // One in ten picks a value the fast decode declines, when there is one.
            Gen::Of(variants) => {
                let declined = variants.iter().any(|v| !v.1) && (rng.chance(10) || variants.iter().all(|v| !v.1));
                let pool: Vec<&Variant> = variants.iter().filter(|v| v.1 != declined).collect();
                let (json, sure) = *pool[rng.below(pool.len())];
                (json.to_string(), sure)
            }
            Gen::By(f) => f(rng),
        }
    }

    /// Some spacing JSON allows between tokens.
    fn space(rng: &mut Rng) -> &'static str {
        [" ", "\t", "  ", ""][rng.below(8).min(3)]
    }

    /// A key as JSON, now and then with its first character escaped (`"\u0069d"` is `"id"`).
    fn key_json(rng: &mut Rng, key: &str) -> String {
        if rng.chance(10) {
            let mut chars = key.chars();
            let first = chars.next().unwrap();
            format!("\"\\u{:04x}{}\"", first as u32, chars.as_str())
        } else {
            format!("\"{key}\"")
        }
    }

    /// An object of `fields`, each present with its odds (some given twice), in shuffled order.
    fn object(rng: &mut Rng, fields: &[Field]) -> (String, bool) {
        let mut entries = Vec::new();
        let mut sure = true;
        for f in fields {
            if !rng.chance(f.percent) {
                sure &= !f.required;
                continue;
            }
            let times = if rng.chance(4) { 2 } else { 1 };
            sure &= !(times == 2 && f.known);
            for _ in 0..times {
                let (value, ok) = generate(rng, &f.value);
                sure &= ok;
                let (a, b) = (space(rng), space(rng));
                entries.push(format!("{}{a}:{b}{value}", key_json(rng, f.key)));
            }
        }
        for i in (1..entries.len()).rev() {
            let j = rng.below(i + 1);
            entries.swap(i, j);
        }
        let sep = if rng.chance(20) { ", " } else { "," };
        (format!("{{{}{}}}", space(rng), entries.join(sep)), sure)
    }

    /// `value`, or now and then one of `others` (all declined) in its place.
    fn or_else(rng: &mut Rng, percent: u64, others: &[&str], value: fn(&mut Rng) -> (String, bool)) -> (String, bool) {
        if rng.chance(percent) {
            (others[rng.below(others.len())].to_string(), false)
        } else {
            value(rng)
        }
    }

    const JSONRPC: &[Variant] = &[
        (r#""2.0""#, true),
        (r#""2.0""#, true),
        (r#""2\u002e0""#, true),
        (r#""1.0""#, false),
        (r#""2.0 ""#, false),
        ("2.0", false),
        ("null", false),
    ];
    const ID: &[Variant] = &[
        ("7", true),
        ("7", true),
        ("0", true),
        ("-3", true),
        ("-0", true),
        ("4294967296", true),
        ("9223372036854775807", true),
        ("-9223372036854775808", true),
        ("1.0", true),
        ("1e2", true),
        (r#""r-1""#, true),
        (r#""""#, true),
        (r#""\u00e9\n\"""#, true),
        ("9223372036854775808", false),
        ("18446744073709551616", false),
        ("1.5", false),
        ("null", false),
        ("true", false),
        ("[1]", false),
        ("{}", false),
    ];
    const SPOILERS: &[Variant] = &[("{}", false), (r#"{"code":1,"message":"m"}"#, false), ("null", false)];
    const UNKNOWN: &[Variant] = &[("1", true), (r#"{"a":[null,{"b":"c"}]}"#, true), ("null", true)];

    const METHOD: &[Variant] = &[
        (r#""tools/call""#, true),
        (r#""tools/call""#, true),
        (r#""tools\/call""#, true),
        (r#""tools/list""#, false),
        (r#""tools/call ""#, false),
        (r#""Tools/call""#, false),
        ("5", false),
        ("null", false),
    ];
    const NAME: &[Variant] = &[
        (r#""echo""#, true),
        (r#""mcp""#, true),
        (r#""""#, true),
        (r#""日本 \"q\" \\ \/ \ud83d\ude00 \u0000""#, true),
        ("5", false),
        ("null", false),
        (r#"["a"]"#, false),
    ];
    const ARGUMENTS: &[Variant] = &[
        ("{}", true),
        (r#"{"text":"hi"}"#, true),
        (
            r#"{"tool":"fixture_echo","args":{"text":"hi","n":[1,2.5,-0,1e3,-7,18446744073709551615,1.0e-7,null,true,"s"]}}"#,
            true,
        ),
        (r#"{"a":1,"a":2,"b":{"c":1,"c":[]}}"#, true),
        (r#"{"z":1,"a":2,"m":{"y":1,"b":2}}"#, true),
        ("null", true),
        ("[1]", false),
        (r#""s""#, false),
        ("5", false),
    ];
    /// A random JSON value (any depth up to `depth`), written with random spacing: tricky numbers, escapes,
    /// non-ASCII text, repeated keys.
    pub(crate) fn random_json(rng: &mut Rng, depth: usize) -> String {
        const NUMBERS: &[&str] = &[
            "0",
            "-0",
            "7",
            "-12",
            "1e5",
            "1E+2",
            "-1.5e-3",
            "0.1",
            "1e308",
            "2.5E-320",
            "123456789012345678901234567890",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "9007199254740993",
        ];
        const STRINGS: &[&str] = &[
            r#""""#,
            r#""plain""#,
            r#""\"quoted\" \\ \/ \b\f\n\r\t""#,
            r#""\u00e9\u65e5\ud83d\ude00""#,
            r#""é 日本 😀""#,
            r#""\u0000""#,
            r#""$serde_json::private::Number""#,
        ];
        const KEYS: &[&str] = &[
            r#""a""#,
            r#""b""#,
            r#""a""#,
            r#""\u0061""#,
            r#""é""#,
            r#""""#,
            r#""k\n""#,
        ];
        let pick = |rng: &mut Rng, xs: &[&str]| xs[rng.below(xs.len())].to_string();
        match if depth == 0 { rng.below(4) } else { rng.below(7) } {
            0 | 3 => pick(rng, NUMBERS),
            1 => pick(rng, STRINGS),
            2 => pick(rng, &["true", "false", "null"]),
            4 | 5 => {
                let n = rng.below(4);
                let members: Vec<String> = (0..n)
                    .map(|_| {
                        let (a, b) = (space(rng), space(rng));
                        format!("{}{a}:{b}{}", pick(rng, KEYS), random_json(rng, depth - 1))
                    })
                    .collect();
                let sep = format!("{},", space(rng));
                format!("{{{}{}}}", space(rng), members.join(&sep))
            }
            _ => {
                let n = rng.below(4);
                let items: Vec<String> = (0..n).map(|_| random_json(rng, depth - 1)).collect();
                format!("[{}{}]", space(rng), items.join(", "))
            }
        }
    }

    fn random_object(rng: &mut Rng) -> (String, bool) {
        let n = rng.below(4);
        let members: Vec<String> = (0..n)
            .map(|i| format!(r#""k{}":{}"#, i % 2, random_json(rng, 4)))
            .collect();
        (format!("{{{}}}", members.join(",")), true)
    }

    fn random_value(rng: &mut Rng) -> (String, bool) {
        (random_json(rng, 5), true)
    }

    /// A listed variant or a random value, half and half.
    fn either(rng: &mut Rng, variants: &'static [Variant], random: fn(&mut Rng) -> (String, bool)) -> (String, bool) {
        if rng.chance(50) {
            generate(rng, &Gen::Of(variants))
        } else {
            random(rng)
        }
    }

    fn arguments(rng: &mut Rng) -> (String, bool) {
        either(rng, ARGUMENTS, random_object)
    }

    fn request_meta(rng: &mut Rng) -> (String, bool) {
        either(rng, REQUEST_META, random_object)
    }

    fn structured(rng: &mut Rng) -> (String, bool) {
        either(rng, STRUCTURED, random_value)
    }

    const REQUEST_META: &[Variant] = &[
        ("null", true),
        ("{}", true),
        (r#"{"progressToken":1}"#, true),
        (r#"{"progressToken":"p-1","x":{"y":[1]}}"#, true),
        (r#"{"a":1,"a":2}"#, true),
        ("5", false),
        ("[]", false),
        (r#""m""#, false),
    ];
    const REQUEST_STATE: &[Variant] = &[(r#""opaque""#, true), ("null", true), ("5", false)];
    const INPUT_RESPONSES: &[Variant] = &[("null", true), ("{}", false), (r#"{"a":1}"#, false)];
    const PARAMS_UNKNOWN: &[Variant] = &[(r#"{"ttl":1000}"#, true), ("null", true), ("[]", true)];

    fn call_params(rng: &mut Rng) -> (String, bool) {
        or_else(rng, 5, &["null", "[]", r#""x""#, r#"[{"name":"echo"}]"#], |rng| {
            object(
                rng,
                &[
                    field("name", 96, true, true, Gen::Of(NAME)),
                    field("arguments", 80, false, true, Gen::By(arguments)),
                    field("_meta", 35, false, true, Gen::By(request_meta)),
                    field("requestState", 8, false, true, Gen::Of(REQUEST_STATE)),
                    field("inputResponses", 6, false, true, Gen::Of(INPUT_RESPONSES)),
                    field("task", 8, false, false, Gen::Of(PARAMS_UNKNOWN)),
                    field("Name", 4, false, false, Gen::Of(UNKNOWN)),
                ],
            )
        })
    }

    /// `tools/call` request lines, and whether the fast decode must take each.
    pub(crate) fn tool_calls(rng: &mut Rng, n: usize) -> Vec<(String, bool)> {
        (0..n)
            .map(|_| {
                object(
                    rng,
                    &[
                        field("jsonrpc", 97, true, true, Gen::Of(JSONRPC)),
                        field("id", 96, true, true, Gen::Of(ID)),
                        field("method", 97, true, true, Gen::Of(METHOD)),
                        field("params", 96, true, true, Gen::By(call_params)),
                        field(
                            "_meta",
                            5,
                            false,
                            false,
                            Gen::Of(&[(r#"{"progressToken":1}"#, true), ("[]", true)]),
                        ),
                        field("x", 10, false, false, Gen::Of(UNKNOWN)),
                        field("result", 3, false, true, Gen::Of(SPOILERS)),
                        field("error", 3, false, true, Gen::Of(SPOILERS)),
                    ],
                )
            })
            .collect()
    }

    const TEXT_KIND: &[Variant] = &[(r#""text""#, true), (r#""te\u0078t""#, true)];
    const TEXT: &[Variant] = &[
        (r#""hi""#, true),
        (r#""hi""#, true),
        (r#""""#, true),
        (r#""é \"q\" \ud83d\ude00 \n\t""#, true),
        ("5", false),
        ("null", false),
    ];
    const BLOCK_META: &[Variant] = &[("null", true), ("{}", true), (r#"{"k":1}"#, true), ("[]", false)];
    const ANNOTATIONS: &[Variant] = &[
        ("null", true),
        ("{}", true),
        (r#"{"audience":["user"],"priority":0.5}"#, true),
        (
            r#"{"audience":["user","assistant"],"priority":1,"lastModified":"2025-01-12T15:00:58Z","x":1}"#,
            true,
        ),
        (r#"{"priority":null,"audience":null,"lastModified":null}"#, true),
        (r#"{"priority":1e-50,"audience":[]}"#, true),
        (r#"{"priority":1e39}"#, true),
        (r#"{"priority":-2,"lastModified":"yesterday"}"#, true),
        (r#"{"audience":["robot"]}"#, false),
        (r#"{"audience":"user"}"#, false),
        (r#"{"audience":[{"user":null}]}"#, false),
        (r#"{"priority":"high"}"#, false),
        (r#"{"priority":0.1,"priority":0.2}"#, false),
        ("[]", false),
        ("5", false),
    ];
    const TEXT_MIME: &[Variant] = &[(r#""text/plain""#, true), ("5", false)];
    const DATA: &[Variant] = &[(r#""aGk=""#, true), (r#""""#, true), ("5", false)];
    const IMAGE_MIME: &[Variant] = &[(r#""image/png""#, true), ("null", false)];
    const AUDIO_MIME: &[Variant] = &[(r#""audio/wav""#, true), ("[]", false)];

    fn block(rng: &mut Rng) -> (String, bool) {
        let kind = rng.below(100);
        let fields: &[Field] = match kind {
            0..66 => &[
                field("type", 97, true, true, Gen::Of(TEXT_KIND)),
                field("text", 96, true, true, Gen::Of(TEXT)),
                field("_meta", 20, false, true, Gen::Of(BLOCK_META)),
                field("annotations", 30, false, true, Gen::Of(ANNOTATIONS)),
                field("mimeType", 5, false, true, Gen::Of(TEXT_MIME)),
                field("x", 8, false, false, Gen::Of(UNKNOWN)),
                field("y", 8, false, false, Gen::By(random_value)),
            ],
            66..78 => &[
                field("type", 97, true, true, Gen::Of(&[(r#""image""#, true)])),
                field("data", 96, true, true, Gen::Of(DATA)),
                field("mimeType", 96, true, true, Gen::Of(IMAGE_MIME)),
                field("_meta", 20, false, true, Gen::Of(BLOCK_META)),
                field("annotations", 30, false, true, Gen::Of(ANNOTATIONS)),
                field("x", 8, false, false, Gen::Of(UNKNOWN)),
            ],
            78..86 => &[
                field("type", 97, true, true, Gen::Of(&[(r#""audio""#, true)])),
                field("data", 96, true, true, Gen::Of(DATA)),
                field("mimeType", 96, true, true, Gen::Of(AUDIO_MIME)),
                field("_meta", 20, false, true, Gen::Of(BLOCK_META)),
                field("annotations", 30, false, true, Gen::Of(ANNOTATIONS)),
            ],
            86..90 => &[
                field("type", 100, true, true, Gen::Of(&[(r#""resource""#, false)])),
                field(
                    "resource",
                    95,
                    true,
                    true,
                    Gen::Of(&[(r#"{"uri":"file:///a","text":"x"}"#, false)]),
                ),
            ],
            90..94 => &[
                field("type", 100, true, true, Gen::Of(&[(r#""resource_link""#, false)])),
                field("uri", 95, true, true, Gen::Of(&[(r#""file:///a""#, false)])),
                field("name", 95, true, true, Gen::Of(&[(r#""a""#, false)])),
            ],
            94..97 => &[
                field("type", 100, true, true, Gen::Of(&[(r#""video""#, false), ("0", false)])),
                field("text", 100, true, true, Gen::Of(TEXT)),
            ],
            _ => return (["null", "[]", r#""text""#][rng.below(3)].to_string(), false),
        };
        object(rng, fields)
    }

    fn content(rng: &mut Rng) -> (String, bool) {
        or_else(rng, 4, &["null", "{}", r#""s""#], |rng| {
            let n = rng.below(4);
            let mut sure = true;
            let blocks: Vec<String> = (0..n)
                .map(|_| {
                    let (b, ok) = block(rng);
                    sure &= ok;
                    b
                })
                .collect();
            (format!("[{}]", blocks.join(",")), sure)
        })
    }

    const STRUCTURED: &[Variant] = &[
        (r#"{"a":[1,2]}"#, true),
        ("null", true),
        (r#"[1,"x"]"#, true),
        (r#""s""#, true),
        ("3.5", true),
        (r#"{"k":{"k":1,"k":2}}"#, true),
    ];
    const IS_ERROR: &[Variant] = &[
        ("true", true),
        ("false", true),
        ("null", true),
        (r#""yes""#, false),
        ("1", false),
    ];
    const RESULT_META: &[Variant] = &[
        ("null", true),
        ("{}", true),
        (r#"{"progressToken":3,"k":"v"}"#, true),
        ("[]", false),
        ("5", false),
    ];
    const RESULT_TYPE: &[Variant] = &[
        (r#""complete""#, true),
        ("null", true),
        (r#""input_required""#, false),
        (r#""task""#, false),
        (r#""other""#, false),
        ("5", false),
    ];

    fn tool_result(rng: &mut Rng) -> (String, bool) {
        or_else(rng, 4, &["null", "[]", "5"], |rng| {
            object(
                rng,
                &[
                    field("content", 95, true, true, Gen::By(content)),
                    field("structuredContent", 30, false, true, Gen::By(structured)),
                    field("isError", 40, false, true, Gen::Of(IS_ERROR)),
                    field("_meta", 25, false, true, Gen::Of(RESULT_META)),
                    field("resultType", 20, false, true, Gen::Of(RESULT_TYPE)),
                    field("tools", 3, false, true, Gen::Of(&[("[]", false)])),
                    field("nextCursor", 3, false, true, Gen::Of(&[(r#""c""#, false)])),
                    field("task", 3, false, true, Gen::Of(&[(r#"{"taskId":"t"}"#, false)])),
                    field("extra", 3, false, true, Gen::Of(&[("1", false)])),
                ],
            )
        })
    }

    /// Response lines carrying tool results, and whether the fast decode must take each.
    pub(crate) fn tool_results(rng: &mut Rng, n: usize) -> Vec<(String, bool)> {
        (0..n)
            .map(|_| {
                object(
                    rng,
                    &[
                        field("jsonrpc", 97, true, true, Gen::Of(JSONRPC)),
                        field("id", 96, true, true, Gen::Of(ID)),
                        field("result", 97, true, true, Gen::By(tool_result)),
                        field("extra", 10, false, false, Gen::Of(UNKNOWN)),
                        field("method", 3, false, true, Gen::Of(&[(r#""x""#, false)])),
                        field("error", 3, false, true, Gen::Of(SPOILERS)),
                    ],
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::corpus::{Fingerprint, Rng, rmcp_decode};
    use super::*;

    /// The generated lines: the fast decode takes exactly those built from parts it is sure of, and each line it
    /// takes decodes to what rmcp gives (fingerprint: `Debug`, re-serialized JSON, request `_meta`).
    fn generated_lines_decode_like_rmcp<Role: rmcp::service::ServiceRole>(
        lines: &[(String, bool)],
        fast: impl Fn(&[u8]) -> Option<RxJsonRpcMessage<Role>>,
    ) where
        RxJsonRpcMessage<Role>: Fingerprint,
    {
        let mut taken = 0;
        for (line, sure) in lines {
            let fast = fast(line.as_bytes()).map(|m| m.fingerprint());
            let rmcp = rmcp_decode::<Role>(line);
            assert_eq!(fast.is_some(), *sure, "line {line}\nrmcp: {rmcp:?}");
            if fast.is_some() {
                taken += 1;
                assert_eq!(fast, rmcp, "line {line}");
            }
        }
        assert!(taken >= 600, "only {taken} of {} lines were taken", lines.len());
        assert!(
            taken <= lines.len() - 600,
            "only {} lines were declined",
            lines.len() - taken
        );
    }

    #[test]
    fn generated_tool_calls_decode_like_rmcp() {
        generated_lines_decode_like_rmcp::<RoleServer>(
            &corpus::tool_calls(&mut Rng::new(0x5eed_0001), 4000),
            tool_call,
        );
    }

    #[test]
    fn generated_tool_results_decode_like_rmcp() {
        generated_lines_decode_like_rmcp::<RoleClient>(
            &corpus::tool_results(&mut Rng::new(0x5eed_0002), 4000),
            tool_result,
        );
    }

    /// Every proper prefix of a line the fast decode takes, and the line with bytes after it, is declined; trailing
    /// whitespace is not (as `serde_json::from_slice`).
    #[test]
    fn cut_or_trailed_lines_are_declined() {
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp","arguments":{"tool":"fixture_echo","args":{"text":"hi"}},"_meta":{"progressToken":1}}}"#;
        let result = r#"{"jsonrpc":"2.0","id":4294967296,"result":{"content":[{"type":"text","text":"hi","annotations":{"priority":0.5}}],"structuredContent":{"a":1},"isError":false}}"#;
        assert!(tool_call(call.as_bytes()).is_some());
        assert!(tool_result(result.as_bytes()).is_some());
        for cut in 0..call.len() {
            assert!(tool_call(&call.as_bytes()[..cut]).is_none(), "{}", &call[..cut]);
        }
        for cut in 0..result.len() {
            assert!(tool_result(&result.as_bytes()[..cut]).is_none(), "{}", &result[..cut]);
        }
        for tail in ["x", "}", ",", "{}", "\u{0}"] {
            assert!(tool_call(format!("{call}{tail}").as_bytes()).is_none(), "{tail}");
            assert!(tool_result(format!("{result}{tail}").as_bytes()).is_none(), "{tail}");
        }
        for tail in [" ", "\t", "\r", "  \t"] {
            let line = format!("{call}{tail}");
            assert_eq!(
                tool_call(line.as_bytes()).map(|m| m.fingerprint()),
                rmcp_decode::<RoleServer>(&line)
            );
            let line = format!("{result}{tail}");
            assert_eq!(
                tool_result(line.as_bytes()).map(|m| m.fingerprint()),
                rmcp_decode::<RoleClient>(&line)
            );
        }
        // Not UTF-8 inside a string: rmcp refuses the line, so does the fast decode.
        let mut bad = call.as_bytes().to_vec();
        let at = call.find("mcp").unwrap();
        bad[at] = 0xff;
        assert!(tool_call(&bad).is_none());
        assert!(serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(&bad).is_err());
    }

    /// Lines a byte away from ones the fast decode takes (a byte dropped, doubled, replaced or inserted): whatever
    /// it takes among them decodes as rmcp decodes it, so its JSON syntax check is no looser than serde_json's.
    #[test]
    fn mutated_lines_decode_like_rmcp_or_are_declined() {
        const BYTES: &[u8] = b"{}[],:\"\\ \t\n\r0123456789-+.eEtrufalsn\x00\x01\x1f\x7f\xc3\xa9\xff/ubx";
        let mut rng = Rng::new(0x5eed_0005);
        let calls = corpus::tool_calls(&mut rng, 300);
        let results = corpus::tool_results(&mut rng, 300);
        let lines = calls.iter().map(|(l, s)| (l, *s, true));
        let lines = lines.chain(results.iter().map(|(l, s)| (l, *s, false)));
        let (mut tried, mut taken) = (0, 0);
        for (line, _, is_call) in lines.filter(|(_, sure, _)| *sure) {
            for _ in 0..25 {
                let mut bytes = line.as_bytes().to_vec();
                let at = rng.below(bytes.len());
                let byte = BYTES[rng.below(BYTES.len())];
                match rng.below(4) {
                    0 => drop(bytes.remove(at)),
                    1 => bytes.insert(at, bytes[at]),
                    2 => bytes[at] = byte,
                    _ => bytes.insert(at, byte),
                }
                tried += 1;
                let (fast, rmcp) = if is_call {
                    let rmcp = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(&bytes).ok();
                    (
                        tool_call(&bytes).map(|m| m.fingerprint()),
                        rmcp.map(|m| m.fingerprint()),
                    )
                } else {
                    let rmcp = serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(&bytes).ok();
                    (
                        tool_result(&bytes).map(|m| m.fingerprint()),
                        rmcp.map(|m| m.fingerprint()),
                    )
                };
                if fast.is_some() {
                    taken += 1;
                    assert_eq!(fast, rmcp, "mutated line {}", String::from_utf8_lossy(&bytes));
                }
            }
        }
        assert!(tried >= 3000 && taken >= 300, "{taken} of {tried} mutated lines taken");
    }

    /// Nesting: taken up to [`MAX_DEPTH`], declined beyond (serde_json itself stops at 128).
    #[test]
    fn deep_nesting_is_taken_up_to_max_depth() {
        let line = |depth: usize| {
            // The arguments object is at depth 3, its member's value at 4.
            let inner = depth - 3;
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"a":{}1{}}}}}}}"#,
                "[".repeat(inner),
                "]".repeat(inner)
            )
        };
        for depth in [4, 50, MAX_DEPTH] {
            let l = line(depth);
            let fast = tool_call(l.as_bytes()).map(|m| m.fingerprint());
            assert!(fast.is_some(), "depth {depth}");
            assert_eq!(fast, rmcp_decode::<RoleServer>(&l), "depth {depth}");
        }
        for depth in [MAX_DEPTH + 1, 127, 128, 200] {
            assert!(tool_call(line(depth).as_bytes()).is_none(), "depth {depth}");
        }
        assert!(rmcp_decode::<RoleServer>(&line(200)).is_none());
    }

    /// The request's `_meta` lands where rmcp puts it (the extensions, not the params) and is written back.
    #[test]
    fn request_meta_lands_in_the_extensions() {
        let line =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"t"}}"#;
        let Some(JsonRpcMessage::Request(r)) = tool_call(line) else {
            panic!("not taken")
        };
        let ClientRequest::CallToolRequest(call) = &r.request else {
            panic!("not a tool call")
        };
        assert!(call.params.meta.is_none());
        let meta = call.extensions.get::<RequestMetaObject>().unwrap();
        assert_eq!(meta.0.0.get("progressToken"), Some(&Value::from("p")));
        let back: Value = serde_json::to_value(&r).unwrap();
        assert_eq!(back["params"]["_meta"]["progressToken"], "p");
    }
}
