//! A tool's JSON Schema as the catalog holds it: already parsed (live discovery), or still the raw text of the
//! metadata cache (a byte range of the one buffer the cache file was read into), parsed on first use and kept.
//! Cold starts from a large cache therefore never build the schema trees nobody asked for.

use std::fmt;
use std::sync::{Arc, OnceLock};

use rmcp::model::JsonObject;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON Schema object, parsed on first [`ToolSchema::get`]. Cloning shares the parse.
#[derive(Clone)]
pub struct ToolSchema(Arc<Cell>);

struct Cell {
    raw: Option<RawJson>,
    /// The object, or why the raw text is not one (valid JSON that is not an object).
    parsed: OnceLock<std::result::Result<Arc<JsonObject>, String>>,
}

/// A JSON value's text inside a shared buffer.
#[derive(Clone)]
pub(crate) struct RawJson {
    buf: Arc<String>,
    start: usize,
    end: usize,
}

impl RawJson {
    /// `raw` must have been borrowed from `buf` (as `serde_json::from_str` does for `&RawValue`); otherwise its
    /// text is copied into a buffer of its own.
    pub(crate) fn within(buf: &Arc<String>, raw: &RawValue) -> RawJson {
        let text = raw.get();
        let base = buf.as_ptr() as usize;
        if let Some(start) = (text.as_ptr() as usize).checked_sub(base)
            && let Some(end) = start.checked_add(text.len())
            && buf.get(start..end).is_some_and(|s| s.as_ptr() == text.as_ptr())
        {
            return RawJson {
                buf: buf.clone(),
                start,
                end,
            };
        }
        RawJson {
            buf: Arc::new(text.to_owned()),
            start: 0,
            end: text.len(),
        }
    }

    fn text(&self) -> &str {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }
}

impl ToolSchema {
    /// An already parsed schema (what discovery returns).
    pub fn parsed(schema: Arc<JsonObject>) -> ToolSchema {
        ToolSchema(Arc::new(Cell {
            raw: None,
            parsed: OnceLock::from(Ok(schema)),
        }))
    }

    /// A schema kept as its JSON text until first use.
    pub(crate) fn raw(raw: RawJson) -> ToolSchema {
        ToolSchema(Arc::new(Cell {
            raw: Some(raw),
            parsed: OnceLock::new(),
        }))
    }

    /// The schema object, parsing the cached text on first use; `Err` says why the text is not a JSON object.
    pub fn get(&self) -> std::result::Result<&Arc<JsonObject>, &str> {
        self.0
            .parsed
            .get_or_init(|| match &self.0.raw {
                Some(raw) => serde_json::from_str::<JsonObject>(raw.text())
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
                None => Err("no schema".to_owned()),
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// Whether the schema has been parsed (or came parsed): false until the first [`ToolSchema::get`] of a
    /// schema read from the cache.
    pub fn is_parsed(&self) -> bool {
        self.0.parsed.get().is_some()
    }

    /// Both handles share one schema (and its parse).
    pub fn ptr_eq(&self, other: &ToolSchema) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The unparsed cached text, when this schema has not been parsed successfully.
    fn unparsed_text(&self) -> Option<&str> {
        match self.0.parsed.get() {
            Some(Ok(_)) => None,
            _ => self.0.raw.as_ref().map(RawJson::text),
        }
    }
}

impl From<Arc<JsonObject>> for ToolSchema {
    fn from(schema: Arc<JsonObject>) -> ToolSchema {
        ToolSchema::parsed(schema)
    }
}

impl From<JsonObject> for ToolSchema {
    fn from(schema: JsonObject) -> ToolSchema {
        ToolSchema::parsed(Arc::new(schema))
    }
}

impl fmt::Debug for ToolSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0.parsed.get(), &self.0.raw) {
            (Some(Ok(schema)), _) => schema.fmt(f),
            (_, Some(raw)) => write!(f, "ToolSchema(unparsed, {} bytes)", raw.end - raw.start),
            (_, None) => f.write_str("ToolSchema(none)"),
        }
    }
}

impl PartialEq for ToolSchema {
    fn eq(&self, other: &ToolSchema) -> bool {
        if self.ptr_eq(other) {
            return true;
        }
        if !self.is_parsed()
            && !other.is_parsed()
            && let (Some(a), Some(b)) = (self.unparsed_text(), other.unparsed_text())
            && a == b
        {
            return true;
        }
        match (self.get(), other.get()) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => self.unparsed_text() == other.unparsed_text(),
            _ => false,
        }
    }
}

impl Serialize for ToolSchema {
    /// The parsed object, or else the cached text exactly as it was read (a write-back copies it unchanged).
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        if let Some(text) = self.unparsed_text() {
            let raw: &RawValue = serde_json::from_str(text).map_err(serde::ser::Error::custom)?;
            return raw.serialize(serializer);
        }
        match self.0.parsed.get() {
            Some(Ok(schema)) => schema.serialize(serializer),
            _ => Err(serde::ser::Error::custom("tool schema without a value")),
        }
    }
}

impl<'de> Deserialize<'de> for ToolSchema {
    /// Parses eagerly; the metadata cache reads schemas lazily through its own path.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        Arc::<JsonObject>::deserialize(deserializer).map(ToolSchema::parsed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn lazy(buf: &Arc<String>, json: &str) -> ToolSchema {
        let start = buf.find(json).unwrap();
        ToolSchema::raw(RawJson {
            buf: buf.clone(),
            start,
            end: start + json.len(),
        })
    }

    #[test]
    fn raw_schemas_parse_on_first_use_and_write_back_verbatim() {
        let buf = Arc::new(r#"{"a":{"type":"object","properties":{"x":{"type":"string"}}},"b":[1]}"#.to_owned());
        let a = lazy(&buf, r#"{"type":"object","properties":{"x":{"type":"string"}}}"#);
        assert!(!a.is_parsed());
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"type":"object","properties":{"x":{"type":"string"}}}"#
        );
        assert!(!a.is_parsed(), "writing it back must not parse it");
        let clone = a.clone();
        assert_eq!(a.get().unwrap()["type"], "object");
        assert!(clone.is_parsed(), "clones share the parse");
        assert!(Arc::ptr_eq(a.get().unwrap(), clone.get().unwrap()));
        let parsed = ToolSchema::parsed(a.get().unwrap().clone());
        assert_eq!(parsed, a);

        let b = lazy(&buf, "[1]");
        let err = b.get().unwrap_err().to_owned();
        assert!(err.contains("expected a map"), "{err}");
        assert_eq!(serde_json::to_string(&b).unwrap(), "[1]");
        assert_ne!(a, b);
    }

    #[test]
    fn raw_values_outside_the_buffer_are_copied() {
        let buf = Arc::new(String::from("{}"));
        let other: Box<RawValue> = serde_json::from_str(r#"{"type":"object"}"#).unwrap();
        let raw = RawJson::within(&buf, &other);
        assert!(!Arc::ptr_eq(&raw.buf, &buf));
        assert_eq!(raw.text(), r#"{"type":"object"}"#);
        let inner: &RawValue = serde_json::from_str(&buf).unwrap();
        let raw = RawJson::within(&buf, inner);
        assert!(Arc::ptr_eq(&raw.buf, &buf));
        assert_eq!(raw.text(), "{}");
    }
}
