//! A tool's JSON Schema as the catalog holds it: already parsed (live discovery), or still a byte range of the
//! metadata cache, parsed on first use and kept. The range points into the cache file itself (the runtime keeps
//! the file it loaded open, so a later atomic replace of the path does not change what it reads) or into a text
//! held in memory. Cold starts from a large cache therefore hold neither the schema trees nor their text.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::sync::{Arc, OnceLock};

use rmcp::model::JsonObject;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON Schema object, parsed on first [`ToolSchema::get`]. Cloning shares the parse.
#[derive(Clone)]
pub struct ToolSchema(Arc<Cell>);

struct Cell {
    raw: Option<RawJson>,
    /// The object, or why the raw text is not one (valid JSON that is not an object, or the file is unreadable).
    parsed: OnceLock<std::result::Result<Arc<JsonObject>, Box<str>>>,
}

/// Where the text of unparsed schemas lives.
#[derive(Clone)]
pub enum Source {
    /// The whole text, in memory.
    Text(Arc<String>),
    /// The cache file the text was read from, kept open.
    File(Arc<File>),
}

/// A JSON value's text: `len` bytes at `start` of a [`Source`].
#[derive(Clone)]
struct RawJson {
    source: Source,
    start: u32,
    len: u32,
}

impl RawJson {
    fn text(&self) -> std::result::Result<Cow<'_, str>, String> {
        match &self.source {
            Source::Text(text) => (self.start as usize)
                .checked_add(self.len as usize)
                .and_then(|end| text.get(self.start as usize..end))
                .map(Cow::Borrowed)
                .ok_or_else(|| "schema range outside the cached text".to_owned()),
            Source::File(file) => {
                let mut buf = vec![0; self.len as usize];
                crate::sys::read_exact_at(file, &mut buf, u64::from(self.start))
                    .map_err(|e| format!("reading the metadata cache file: {e}"))?;
                String::from_utf8(buf)
                    .map(Cow::Owned)
                    .map_err(|_| "the metadata cache file changed under the runtime".to_owned())
            }
        }
    }
}

/// The text being deserialized and where it lives, while [`with_source`] runs on this thread.
struct Reading {
    source: Source,
    base: usize,
    len: usize,
}

thread_local! {
    // Already `const`; clippy's lint misreads std's expansion of it for some targets (Windows).
    #[allow(clippy::missing_const_for_thread_local)]
    static READING: RefCell<Option<Reading>> = const { RefCell::new(None) };
}

/// Runs `parse` (a `serde_json::from_str` of `text`) so that every [`ToolSchema`] it deserializes stays the byte
/// range of its value in `text`, read back from `source` on first use. `source` must hold `text` at offset 0.
pub fn with_source<T>(source: Source, text: &str, parse: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            READING.with(|r| r.borrow_mut().take());
        }
    }
    READING.with(|r| {
        *r.borrow_mut() = Some(Reading {
            source,
            base: text.as_ptr() as usize,
            len: text.len(),
        })
    });
    let _reset = Reset;
    parse()
}

/// The range of `raw` inside the text [`with_source`] is reading, if it is inside it.
fn range_in_reading(raw: &RawValue) -> Option<RawJson> {
    READING.with(|r| {
        let r = r.borrow();
        let reading = r.as_ref()?;
        let text = raw.get();
        let start = (text.as_ptr() as usize).checked_sub(reading.base)?;
        if start.checked_add(text.len())? > reading.len {
            return None;
        }
        Some(RawJson {
            source: reading.source.clone(),
            start: u32::try_from(start).ok()?,
            len: u32::try_from(text.len()).ok()?,
        })
    })
}

fn reading() -> bool {
    READING.with(|r| r.borrow().is_some())
}

impl ToolSchema {
    /// An already parsed schema (what discovery returns).
    pub fn parsed(schema: Arc<JsonObject>) -> ToolSchema {
        ToolSchema(Arc::new(Cell {
            raw: None,
            parsed: OnceLock::from(Ok(schema)),
        }))
    }

    fn unparsed(raw: RawJson) -> ToolSchema {
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
                Some(raw) => {
                    let text = raw.text().map_err(String::into_boxed_str)?;
                    serde_json::from_str::<JsonObject>(&text)
                        .map(Arc::new)
                        .map_err(|e| e.to_string().into_boxed_str())
                }
                None => Err("no schema".into()),
            })
            .as_ref()
            .map_err(|e| &**e)
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

    /// The cached text, when this schema has not been parsed successfully.
    fn unparsed_text(&self) -> Option<std::result::Result<Cow<'_, str>, String>> {
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
            (_, Some(raw)) => write!(f, "ToolSchema(unparsed, {} bytes)", raw.len),
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
            && let (Some(Ok(a)), Some(Ok(b))) = (self.unparsed_text(), other.unparsed_text())
            && a == b
        {
            return true;
        }
        match (self.get(), other.get()) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => match (self.unparsed_text(), other.unparsed_text()) {
                (Some(Ok(a)), Some(Ok(b))) => a == b,
                _ => false,
            },
            _ => false,
        }
    }
}

impl Serialize for ToolSchema {
    /// The parsed object, or else the cached text exactly as it was read (a write-back copies it unchanged).
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        if let Some(text) = self.unparsed_text() {
            let text = text.map_err(serde::ser::Error::custom)?;
            let raw: &RawValue = serde_json::from_str(&text).map_err(serde::ser::Error::custom)?;
            return raw.serialize(serializer);
        }
        match self.0.parsed.get() {
            Some(Ok(schema)) => schema.serialize(serializer),
            _ => Err(serde::ser::Error::custom("tool schema without a value")),
        }
    }
}

impl<'de> Deserialize<'de> for ToolSchema {
    /// Parses eagerly, except while the metadata cache loads its file, where the value's text is only
    /// skipped over and its range kept.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        if reading() {
            let raw = <&RawValue>::deserialize(deserializer)?;
            return Ok(match range_in_reading(raw) {
                Some(range) => ToolSchema::unparsed(range),
                None => ToolSchema::unparsed(RawJson {
                    source: Source::Text(Arc::new(raw.get().to_owned())),
                    start: 0,
                    len: u32::try_from(raw.get().len()).map_err(serde::de::Error::custom)?,
                }),
            });
        }
        Arc::<JsonObject>::deserialize(deserializer).map(ToolSchema::parsed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[derive(Deserialize)]
    struct Two {
        a: ToolSchema,
        b: ToolSchema,
    }

    const TEXT: &str = r#"{"a":{"type":"object","properties":{"x":{"type":"string"}}},"b":[1]}"#;

    fn check(two: Two) {
        let Two { a, b } = two;
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
        assert_eq!(ToolSchema::parsed(a.get().unwrap().clone()), a);
        let err = b.get().unwrap_err().to_owned();
        assert!(err.contains("expected a map"), "{err}");
        assert_eq!(serde_json::to_string(&b).unwrap(), "[1]");
        assert_ne!(a, b);
    }

    #[test]
    fn schemas_read_from_memory_parse_on_first_use_and_write_back_verbatim() {
        let text = Arc::new(TEXT.to_owned());
        let two: Two = with_source(Source::Text(text.clone()), &text, || serde_json::from_str(&text)).unwrap();
        assert!(!reading(), "the source is cleared after reading");
        check(two);
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "replaces a file another handle holds open, which Windows allows through std's POSIX rename semantics and Wine does not"
    )]
    fn schemas_read_from_a_file_are_read_back_from_it_even_after_the_path_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.json");
        std::fs::write(&path, TEXT).unwrap();
        let file = File::open(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let two: Two = with_source(Source::File(Arc::new(file)), &text, || serde_json::from_str(&text)).unwrap();
        drop(text);
        // An atomic replace (what `MetadataCache::update` does) leaves the open file as it was.
        std::fs::write(dir.path().join("new.json"), "{}").unwrap();
        std::fs::rename(dir.path().join("new.json"), &path).unwrap();
        check(two);
    }

    #[test]
    fn outside_a_source_schemas_parse_eagerly() {
        let two: Two = serde_json::from_str(r#"{"a":{"type":"object"},"b":{}}"#).unwrap();
        assert!(two.a.is_parsed() && two.b.is_parsed());
        assert!(
            serde_json::from_str::<Two>(TEXT).is_err(),
            "a non-object schema fails an eager parse"
        );
    }
}
