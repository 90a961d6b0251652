//! Single-pass decodes of the two lines every proxied tool call carries: the host's `tools/call` request and the
//! upstream's tool result, read once with `serde_json` straight into rmcp's types (no pre-scan, no serde `Content`
//! buffering, which rmcp's flattened and internally tagged derives go through).
//!
//! The contract is rmcp's own decode (`JsonRpcMessage`'s deserializer): a line these functions accept decodes to
//! exactly what rmcp gives for it, and serializes back the same. They accept only a strict grammar whose rmcp
//! decode is certain and answer `None` (decode it another way) for anything else: a key given twice, a value of an
//! unexpected type, a content block other than `text`/`image`/`audio`, `inputResponses`, a `resultType` other than
//! `complete`, an unknown key in a tool result (another `ServerResult` type might claim it), a line with `result`
//! or `error` beside `method`, trailing bytes, bad JSON. What they rely on from rmcp 3.11 (each pinned by the
//! differential tests in `lines.rs`):
//! - `tools/call` is claimed by `CallToolRequest` alone in `ClientRequest`; `params._meta` goes to the request's
//!   extensions as a `RequestMetaObject` (the params' own `meta` stays `None`); unknown keys are ignored at the top
//!   and in `params`; `"arguments": null` is `None`.
//! - A result whose keys are all among `content`, `structuredContent`, `isError`, `_meta`, `resultType` is claimed
//!   by `CallToolResult`; `"structuredContent": null` is `Some(Null)`, other `null`s are `None`; content blocks and
//!   annotations ignore unknown keys; a priority is read as a JSON number, then narrowed to `f32`.
//! - Ids decode through `RequestId`'s and `jsonrpc` through `JsonRpcVersion2_0`'s own deserializers.

use std::fmt;

use rmcp::model::{
    Annotations, AudioContent, CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ImageContent, JsonObject, JsonRpcMessage, JsonRpcRequest, JsonRpcResponse, JsonRpcVersion2_0, MetaObject,
    RequestId, RequestMetaObject, ResultType, Role, ServerResult, TextContent,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::{RoleClient, RoleServer};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A `tools/call` request (server role), or `None`.
pub(super) fn tool_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let (jsonrpc, id, request) = decode_whole::<CallLine>(line)?.0;
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc,
        id,
        request: ClientRequest::CallToolRequest(request),
    }))
}

/// A response carrying a plain tool result (client role), or `None`.
pub(super) fn tool_result(line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
    let (jsonrpc, id, result) = decode_whole::<ResultLine>(line)?.0;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc,
        id,
        result: ServerResult::CallToolResult(result),
    }))
}

/// `T` from the whole line (trailing whitespace only, as `serde_json::from_slice`).
fn decode_whole<'de, T: Deserialize<'de>>(line: &'de [u8]) -> Option<T> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let value = T::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// The answer when a line leaves the strict grammar: the caller decodes it another way.
fn decline<E: de::Error>() -> E {
    E::custom("not a line the fast decode is sure of")
}

/// Stores a key's value, declining a key given twice (rmcp refuses those for its known fields).
macro_rules! once {
    ($slot:ident, $value:expr) => {
        if $slot.replace($value).is_some() {
            return Err(decline());
        }
    };
}

/// The value of a required key, or decline.
macro_rules! need {
    ($value:expr) => {
        match $value {
            Some(value) => value,
            None => return Err(decline()),
        }
    };
}

/// Every key the grammar knows, told apart without allocating; each level reads the ones it has.
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Name,
    Arguments,
    Meta,
    InputResponses,
    RequestState,
    Content,
    StructuredContent,
    IsError,
    ResultType,
    Type,
    Text,
    Data,
    MimeType,
    Annotations,
    Audience,
    Priority,
    LastModified,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "jsonrpc" => Key::Jsonrpc,
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "params" => Key::Params,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    "name" => Key::Name,
                    "arguments" => Key::Arguments,
                    "_meta" => Key::Meta,
                    "inputResponses" => Key::InputResponses,
                    "requestState" => Key::RequestState,
                    "content" => Key::Content,
                    "structuredContent" => Key::StructuredContent,
                    "isError" => Key::IsError,
                    "resultType" => Key::ResultType,
                    "type" => Key::Type,
                    "text" => Key::Text,
                    "data" => Key::Data,
                    "mimeType" => Key::MimeType,
                    "annotations" => Key::Annotations,
                    "audience" => Key::Audience,
                    "priority" => Key::Priority,
                    "lastModified" => Key::LastModified,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

/// Deserializes from a JSON string equal to one of `Self::ACCEPTED`, giving its index; anything else declines.
trait OneOf: Sized {
    const ACCEPTED: &'static [&'static str];
    fn pick(index: usize) -> Self;
}

fn deserialize_one_of<'de, T: OneOf, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    struct V<T>(std::marker::PhantomData<T>);
    impl<T: OneOf> Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a known string")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
            T::ACCEPTED
                .iter()
                .position(|a| *a == s)
                .map(T::pick)
                .ok_or_else(decline)
        }
    }
    deserializer.deserialize_str(V(std::marker::PhantomData))
}

macro_rules! one_of_deserialize {
    ($t:ty) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserialize_one_of(deserializer)
            }
        }
    };
}

/// The method `tools/call`.
struct ToolsCall;
impl OneOf for ToolsCall {
    const ACCEPTED: &'static [&'static str] = &["tools/call"];
    fn pick(_: usize) -> Self {
        ToolsCall
    }
}
one_of_deserialize!(ToolsCall);

/// `resultType: "complete"`, the one value with which rmcp's `CallToolResult` claims a result.
struct Complete;
impl OneOf for Complete {
    const ACCEPTED: &'static [&'static str] = &["complete"];
    fn pick(_: usize) -> Self {
        Complete
    }
}
one_of_deserialize!(Complete);

/// A content block's `type` among those decoded here.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Image,
    Audio,
}
impl OneOf for Kind {
    const ACCEPTED: &'static [&'static str] = &["text", "image", "audio"];
    fn pick(index: usize) -> Self {
        match index {
            0 => Kind::Text,
            1 => Kind::Image,
            _ => Kind::Audio,
        }
    }
}
one_of_deserialize!(Kind);

/// An audience entry written as a plain string.
struct AudienceRole(Role);
impl OneOf for AudienceRole {
    const ACCEPTED: &'static [&'static str] = &["user", "assistant"];
    fn pick(index: usize) -> Self {
        AudienceRole(if index == 0 { Role::User } else { Role::Assistant })
    }
}
one_of_deserialize!(AudienceRole);

/// Defines a `Deserialize` that reads a JSON object with the given visitor body.
macro_rules! object_deserialize {
    ($t:ty, $expecting:literal, |$map:ident| $body:block) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut $map: A) -> Result<$t, A::Error> $body
                }
                deserializer.deserialize_map(V)
            }
        }
    };
}

/// A whole `tools/call` request line.
struct CallLine((JsonRpcVersion2_0, RequestId, CallToolRequest));

object_deserialize!(CallLine, "a tools/call request", |map| {
    let (mut jsonrpc, mut id, mut method, mut params) = (None, None, None, None);
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Jsonrpc => once!(jsonrpc, map.next_value::<JsonRpcVersion2_0>()?),
            Key::Id => once!(id, map.next_value::<RequestId>()?),
            Key::Method => once!(method, map.next_value::<ToolsCall>()?),
            Key::Params => once!(params, map.next_value::<CallParams>()?),
            // Not a request in rmcp's classification.
            Key::Result | Key::Error => return Err(decline()),
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    let (Some(jsonrpc), Some(id), Some(ToolsCall), Some(params)) = (jsonrpc, id, method, params) else {
        return Err(decline());
    };
    Ok(CallLine((jsonrpc, id, params.into_request())))
});

/// `params` of a `tools/call` request.
struct CallParams {
    meta: Option<JsonObject>,
    name: String,
    arguments: Option<JsonObject>,
    request_state: Option<String>,
}

impl CallParams {
    /// As rmcp builds it: `_meta` in the extensions, not in the params.
    fn into_request(self) -> CallToolRequest {
        let mut params = CallToolRequestParams::new(self.name);
        params.arguments = self.arguments;
        params.request_state = self.request_state;
        let mut request = CallToolRequest::new(params);
        if let Some(meta) = self.meta {
            request.extensions.insert(RequestMetaObject::from(meta));
        }
        request
    }
}

object_deserialize!(CallParams, "tools/call params", |map| {
    let (mut meta, mut name, mut arguments, mut input_responses, mut request_state) = (None, None, None, None, None);
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Meta => once!(meta, map.next_value::<Option<JsonObject>>()?),
            Key::Name => once!(name, map.next_value::<String>()?),
            Key::Arguments => once!(arguments, map.next_value::<Option<JsonObject>>()?),
            Key::InputResponses => once!(input_responses, map.next_value::<Option<IgnoredAny>>()?),
            Key::RequestState => once!(request_state, map.next_value::<Option<String>>()?),
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    // Responses to input requests (MRTR) are left to rmcp.
    if input_responses.is_some_and(|r| r.is_some()) {
        return Err(decline());
    }
    Ok(CallParams {
        meta: meta.flatten(),
        name: need!(name),
        arguments: arguments.flatten(),
        request_state: request_state.flatten(),
    })
});

/// A whole response line carrying a tool result.
struct ResultLine((JsonRpcVersion2_0, RequestId, CallToolResult));

object_deserialize!(ResultLine, "a tool result response", |map| {
    let (mut jsonrpc, mut id, mut result) = (None, None, None);
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Jsonrpc => once!(jsonrpc, map.next_value::<JsonRpcVersion2_0>()?),
            Key::Id => once!(id, map.next_value::<RequestId>()?),
            Key::Result => once!(result, map.next_value::<ToolResult>()?),
            // Not a response in rmcp's classification.
            Key::Method | Key::Error => return Err(decline()),
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    let (Some(jsonrpc), Some(id), Some(ToolResult(result))) = (jsonrpc, id, result) else {
        return Err(decline());
    };
    Ok(ResultLine((jsonrpc, id, result)))
});

/// A result object with tool-result keys only, `content` among them.
struct ToolResult(CallToolResult);

object_deserialize!(ToolResult, "a tool result", |map| {
    let (mut content, mut structured, mut is_error, mut meta, mut result_type) = (None, None, None, None, None);
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Content => once!(content, map.next_value::<Blocks>()?.0),
            Key::StructuredContent => once!(structured, map.next_value::<Value>()?),
            Key::IsError => once!(is_error, map.next_value::<Option<bool>>()?),
            Key::Meta => once!(meta, map.next_value::<Option<JsonObject>>()?),
            Key::ResultType => once!(result_type, map.next_value::<Option<Complete>>()?),
            // Another `ServerResult` type might claim the object.
            _ => return Err(decline()),
        }
    }
    let mut result = CallToolResult::default();
    result.result_type = result_type.flatten().map(|Complete| ResultType::COMPLETE);
    result.content = need!(content);
    result.structured_content = structured;
    result.is_error = is_error.flatten();
    result.meta = meta.flatten().map(MetaObject);
    Ok(ToolResult(result))
});

/// A tool result's `content` array.
struct Blocks(Vec<ContentBlock>);

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Blocks;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a content array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Blocks, A::Error> {
                let mut blocks = Vec::new();
                while let Some(Block(block)) = seq.next_element()? {
                    blocks.push(block);
                }
                Ok(Blocks(blocks))
            }
        }
        deserializer.deserialize_seq(V)
    }
}

/// One `text`, `image` or `audio` content block.
struct Block(ContentBlock);

object_deserialize!(Block, "a content block", |map| {
    let (mut kind, mut text, mut data, mut mime_type, mut meta, mut annotations) = (None, None, None, None, None, None);
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Type => once!(kind, map.next_value::<Kind>()?),
            Key::Text => once!(text, map.next_value::<String>()?),
            Key::Data => once!(data, map.next_value::<String>()?),
            Key::MimeType => once!(mime_type, map.next_value::<String>()?),
            Key::Meta => once!(meta, map.next_value::<Option<JsonObject>>()?),
            Key::Annotations => once!(annotations, map.next_value::<Option<Annots>>()?),
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    let meta = meta.flatten().map(MetaObject);
    let annotations = annotations.flatten().map(|Annots(a)| a);
    let block = match need!(kind) {
        Kind::Text => {
            let mut t = TextContent::new(need!(text));
            t.meta = meta;
            t.annotations = annotations;
            ContentBlock::Text(t)
        }
        Kind::Image => {
            let mut i = ImageContent::new(need!(data), need!(mime_type));
            i.meta = meta;
            i.annotations = annotations;
            ContentBlock::Image(i)
        }
        Kind::Audio => {
            let mut a = AudioContent::new(need!(data), need!(mime_type));
            a.meta = meta;
            a.annotations = annotations;
            ContentBlock::Audio(a)
        }
    };
    Ok(Block(block))
});

/// A block's `annotations` object.
struct Annots(Annotations);

object_deserialize!(Annots, "annotations", |map| {
    let (mut audience, mut priority, mut last_modified) = (None, None, None);
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Audience => once!(audience, map.next_value::<Option<Vec<AudienceRole>>>()?),
            Key::Priority => once!(priority, map.next_value::<Option<serde_json::Number>>()?),
            Key::LastModified => once!(last_modified, map.next_value::<Option<String>>()?),
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    let mut annotations = Annotations::default();
    annotations.audience = audience
        .flatten()
        .map(|roles| roles.into_iter().map(|AudienceRole(r)| r).collect());
    // As rmcp reads it: a JSON number, as `f64`, narrowed with `as`.
    annotations.priority = match priority.flatten() {
        Some(n) => Some(need!(n.as_f64()) as f32),
        None => None,
    };
    annotations.last_modified = last_modified.flatten();
    Ok(Annots(annotations))
});

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
        fn below(&mut self, n: usize) -> usize {
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
                    field("arguments", 80, false, true, Gen::Of(ARGUMENTS)),
                    field("_meta", 35, false, true, Gen::Of(REQUEST_META)),
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
                    field("structuredContent", 25, false, true, Gen::Of(STRUCTURED)),
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
    #[test]
    fn generated_tool_calls_decode_like_rmcp() {
        let lines = corpus::tool_calls(&mut Rng::new(0x5eed_0001), 4000);
        let mut taken = 0;
        for (line, sure) in &lines {
            let fast = tool_call(line.as_bytes()).map(|m| m.fingerprint());
            let rmcp = rmcp_decode::<RoleServer>(line);
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
    fn generated_tool_results_decode_like_rmcp() {
        let lines = corpus::tool_results(&mut Rng::new(0x5eed_0002), 4000);
        let mut taken = 0;
        for (line, sure) in &lines {
            let fast = tool_result(line.as_bytes()).map(|m| m.fingerprint());
            let rmcp = rmcp_decode::<RoleClient>(line);
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
