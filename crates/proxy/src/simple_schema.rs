//! The common subset of JSON Schema checked without the `jsonschema` crate: the fast path of argument and output
//! validation (`validate.rs`).
//!
//! Most MCP tool schemas are flat objects of typed properties (zod, schemars and pydantic all emit them). For a schema
//! made only of the keywords below, [`compile`] builds a [`Simple`] checker whose [`Simple::check`] walks the
//! instance and returns exactly what `jsonschema` would report (the same masked messages at the same instance
//! paths), with no meta-schema to build: jsonschema builds and keeps one per draft (~4.7 M instructions and ~0.35 MB
//! of heap for 2020-12) before it compiles any schema. When the walk cannot settle an instance the way jsonschema
//! would (a bound compared with an integer beyond 2^53) it says so, and the caller asks jsonschema. A differential
//! test holds the two to the same answers and messages on generated schemas and instances.
//!
//! The subset, with the semantics every draft from 6 to 2020-12 gives it (a `$schema` naming another draft, such as
//! draft 4 whose `integer` and `exclusiveMinimum` differ, is outside it):
//! - assertions: `type` (a name or a non-empty list of distinct names), `properties`, `required` (distinct strings),
//!   `additionalProperties`, `items` (one schema), `enum` (non-empty, of strings, booleans and null), `const` (a
//!   string, boolean or null), `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers an `f64` holds
//!   exactly), `minLength`, `maxLength`, `minItems`, `maxItems`, `minProperties`, `maxProperties`;
//! - annotations, checked only for their meta-schema type: `title`, `description`, `$comment` (strings), `default`,
//!   `examples` (an array), `deprecated`, `readOnly`, `writeOnly` (booleans), `$schema` at the root, and `format` (a
//!   string) under 2020-12 only, where it is an annotation (schemars writes `"format": "uint32"`; drafts 6 and 7
//!   make jsonschema assert the formats it knows);
//! - boolean schemas (`true`, `false`).
//!
//! Anything else (`$ref`, `pattern`, `format`, `anyOf`, an unknown keyword, a value of the wrong type) makes
//! [`compile`] return `None`: jsonschema handles that schema as before, including reporting it as unusable.

use serde_json::{Map, Number, Value};

use crate::text::plural;

/// `$schema` values whose draft gives the subset the semantics above (absent means 2020-12, as MCP specifies).
const DRAFTS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2019-09/schema#",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-06/schema#",
];

/// Integers beyond 2^53 are not all `f64`s: such a number is left to jsonschema's exact arithmetic.
const EXACT_F64_INT: u64 = 1 << 53;

const NULL: u8 = 1;
const BOOLEAN: u8 = 1 << 1;
const INTEGER: u8 = 1 << 2;
const NUMBER: u8 = 1 << 3;
const STRING: u8 = 1 << 4;
const ARRAY: u8 = 1 << 5;
const OBJECT: u8 = 1 << 6;
/// Type names and bits, in the order jsonschema lists types in a message (`value is not of types "null", "string"`).
const TYPE_NAMES: [(&str, u8); 7] = [
    ("null", NULL),
    ("boolean", BOOLEAN),
    ("integer", INTEGER),
    ("number", NUMBER),
    ("string", STRING),
    ("array", ARRAY),
    ("object", OBJECT),
];

/// A compiled schema of the subset.
#[derive(Debug)]
pub(crate) enum Simple {
    /// `true`, or `{}` with nothing but annotations.
    Any,
    /// `false`.
    Never,
    Node(Box<Node>),
}

/// The assertions of one schema object.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// Allowed types as bits; 0 when `type` is absent.
    types: u8,
    /// Sorted by name.
    properties: Vec<(String, Simple)>,
    /// `properties` was written (even empty: jsonschema words `additionalProperties: false` differently without it).
    has_properties: bool,
    required: Vec<String>,
    additional: Option<Simple>,
    items: Option<Simple>,
    /// `enum`, in the schema's order (the message lists it).
    one_of_values: Option<Vec<Value>>,
    constant: Option<Value>,
    minimum: Option<Bound>,
    maximum: Option<Bound>,
    exclusive_minimum: Option<Bound>,
    exclusive_maximum: Option<Bound>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    min_properties: Option<usize>,
    max_properties: Option<usize>,
}

/// A numeric bound: its exact value, and its text as the schema wrote it (for the message).
#[derive(Debug)]
struct Bound {
    value: f64,
    written: Value,
}

impl Bound {
    fn new(written: &Value) -> Option<Bound> {
        Some(Bound {
            value: exact(written.as_number()?)?,
            written: written.clone(),
        })
    }
}

/// Compiles `schema` when it lies in the subset; `None` otherwise (jsonschema's case).
pub(crate) fn compile(schema: &Value) -> Option<Simple> {
    match schema {
        Value::Object(map) => compile_object(map),
        other => compile_value(other, Draft::default()),
    }
}

/// [`compile`] for a schema held as an object.
fn compile_object(schema: &Map<String, Value>) -> Option<Simple> {
    let draft = match schema.get("$schema") {
        None => Draft::default(),
        Some(uri) => {
            let uri = uri.as_str()?;
            if !DRAFTS.contains(&uri) {
                return None;
            }
            Draft {
                format_is_annotation: uri.starts_with("https://json-schema.org/draft/2020-12/"),
            }
        }
    };
    compile_map(schema, true, draft)
}

/// What the root's `$schema` changes in the subset.
#[derive(Debug, Clone, Copy)]
struct Draft {
    /// 2020-12 makes `format` an annotation (its format-annotation vocabulary); drafts 6 and 7 make jsonschema
    /// assert the formats it knows, and 2019-09's vocabularies are left to it: `format` is outside the subset there.
    format_is_annotation: bool,
}

impl Default for Draft {
    /// No `$schema`: 2020-12.
    fn default() -> Draft {
        Draft {
            format_is_annotation: true,
        }
    }
}

fn compile_value(schema: &Value, draft: Draft) -> Option<Simple> {
    match schema {
        Value::Bool(true) => Some(Simple::Any),
        Value::Bool(false) => Some(Simple::Never),
        Value::Object(map) => compile_map(map, false, draft),
        _ => None,
    }
}

fn compile_map(map: &Map<String, Value>, root: bool, draft: Draft) -> Option<Simple> {
    let mut node = Node::default();
    for (key, value) in map {
        match key.as_str() {
            // Checked against DRAFTS by `compile_object`.
            "$schema" if root => {}
            "title" | "description" | "$comment" => {
                value.as_str()?;
            }
            "format" if draft.format_is_annotation => {
                value.as_str()?;
            }
            "deprecated" | "readOnly" | "writeOnly" => {
                value.as_bool()?;
            }
            "examples" => {
                value.as_array()?;
            }
            "default" => {}
            "type" => {
                node.types = types(value)?;
            }
            "properties" => {
                node.has_properties = true;
                for (name, sub) in value.as_object()? {
                    node.properties.push((name.clone(), compile_value(sub, draft)?));
                }
            }
            "required" => {
                // Distinct strings, as every draft's meta-schema demands (a hash set: a server may list thousands).
                let mut seen = std::collections::HashSet::new();
                for name in value.as_array()? {
                    let name = name.as_str()?;
                    if !seen.insert(name) {
                        return None;
                    }
                    node.required.push(name.to_string());
                }
            }
            "additionalProperties" => {
                node.additional = Some(compile_value(value, draft)?);
            }
            "items" => {
                node.items = Some(compile_value(value, draft)?);
            }
            "enum" => {
                let values = value.as_array()?;
                if values.is_empty() || !values.iter().all(is_plain_scalar) {
                    return None;
                }
                node.one_of_values = Some(values.clone());
            }
            "const" => {
                if !is_plain_scalar(value) {
                    return None;
                }
                node.constant = Some(value.clone());
            }
            "minimum" => node.minimum = Some(Bound::new(value)?),
            "maximum" => node.maximum = Some(Bound::new(value)?),
            "exclusiveMinimum" => node.exclusive_minimum = Some(Bound::new(value)?),
            "exclusiveMaximum" => node.exclusive_maximum = Some(Bound::new(value)?),
            "minLength" => node.min_length = Some(count(value)?),
            "maxLength" => node.max_length = Some(count(value)?),
            "minItems" => node.min_items = Some(count(value)?),
            "maxItems" => node.max_items = Some(count(value)?),
            "minProperties" => node.min_properties = Some(count(value)?),
            "maxProperties" => node.max_properties = Some(count(value)?),
            _ => return None,
        }
    }
    if node.is_trivial() {
        return Some(Simple::Any);
    }
    node.properties.sort_by(|a, b| a.0.cmp(&b.0));
    Some(Simple::Node(Box::new(node)))
}

/// The bits of a `type` value: one name, or a non-empty list of distinct names.
fn types(value: &Value) -> Option<u8> {
    let bit = |name: &Value| {
        let name = name.as_str()?;
        TYPE_NAMES.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
    };
    match value {
        Value::Array(names) if !names.is_empty() => {
            let mut bits = 0;
            for name in names {
                let b = bit(name)?;
                if bits & b != 0 {
                    return None;
                }
                bits |= b;
            }
            Some(bits)
        }
        Value::Array(_) => None,
        name => bit(name),
    }
}

/// A length or count limit: a non-negative integer (as jsonschema compiles it).
fn count(value: &Value) -> Option<usize> {
    usize::try_from(value.as_u64()?).ok()
}

fn is_plain_scalar(value: &Value) -> bool {
    matches!(value, Value::String(_) | Value::Bool(_) | Value::Null)
}

/// `n` as an `f64` when that is exact: every float JSON parses to, and integers up to 2^53 in magnitude.
fn exact(n: &Number) -> Option<f64> {
    if let Some(u) = n.as_u64() {
        return (u <= EXACT_F64_INT).then_some(u as f64);
    }
    if let Some(i) = n.as_i64() {
        return (i.unsigned_abs() <= EXACT_F64_INT).then_some(i as f64);
    }
    n.as_f64()
}

/// Where a problem is, as a chain of steps from the instance's root (built on the stack; written out only for a
/// problem).
#[derive(Clone, Copy)]
struct At<'a> {
    parent: Option<&'a At<'a>>,
    step: Step<'a>,
}

#[derive(Clone, Copy)]
enum Step<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> At<'a> {
    const ROOT: At<'static> = At {
        parent: None,
        step: Step::Root,
    };

    fn key(&'a self, key: &'a str) -> At<'a> {
        At {
            parent: Some(self),
            step: Step::Key(key),
        }
    }

    fn index(&'a self, i: usize) -> At<'a> {
        At {
            parent: Some(self),
            step: Step::Index(i),
        }
    }

    /// The JSON pointer, as jsonschema writes an instance path (`/a/0`, `~0` and `~1` escaped; the root is empty).
    fn pointer(&self) -> String {
        let mut steps = Vec::new();
        let mut at = Some(self);
        while let Some(a) = at {
            steps.push(a.step);
            at = a.parent;
        }
        let mut out = String::new();
        for step in steps.iter().rev() {
            match step {
                Step::Root => {}
                Step::Key(k) => {
                    out.push('/');
                    out.push_str(&k.replace('~', "~0").replace('/', "~1"));
                }
                Step::Index(i) => {
                    out.push('/');
                    out.push_str(&i.to_string());
                }
            }
        }
        out
    }
}

/// What [`Simple::check`] found: `(instance path, message)` pairs as jsonschema's masked errors, or that the walk
/// cannot settle the instance.
pub(crate) type Problems = Option<Vec<(String, String)>>;

impl Simple {
    /// jsonschema's problems with `instance` (none: valid), or `None` when jsonschema must settle it. A valid instance
    /// allocates nothing.
    pub(crate) fn check(&self, instance: &Value) -> Problems {
        let mut out = Vec::new();
        self.check_at(instance, &At::ROOT, &mut out).then_some(out)
    }

    /// Whether `instance` is certainly valid.
    #[cfg(test)]
    pub(crate) fn accepts(&self, instance: &Value) -> bool {
        self.check(instance).is_some_and(|p| p.is_empty())
    }

    /// Adds the problems at `at` to `out`; `false` when one cannot be settled here.
    fn check_at(&self, instance: &Value, at: &At<'_>, out: &mut Vec<(String, String)>) -> bool {
        match self {
            Simple::Any => true,
            Simple::Never => {
                out.push((at.pointer(), "False schema does not allow value".to_string()));
                true
            }
            Simple::Node(node) => node.check_at(instance, at, out),
        }
    }
}

impl Node {
    /// Whether the node asserts nothing (an empty `properties` asserts nothing either). A keyword added to [`Node`]
    /// must be added here too (else a schema of only that keyword checks nothing; the differential test catches it).
    fn is_trivial(&self) -> bool {
        let bounds = [
            &self.minimum,
            &self.maximum,
            &self.exclusive_minimum,
            &self.exclusive_maximum,
        ];
        let counts = [
            self.min_length,
            self.max_length,
            self.min_items,
            self.max_items,
            self.min_properties,
            self.max_properties,
        ];
        self.types == 0
            && self.properties.is_empty()
            && self.required.is_empty()
            && self.additional.is_none()
            && self.items.is_none()
            && self.one_of_values.is_none()
            && self.constant.is_none()
            && bounds.iter().all(|b| b.is_none())
            && counts.iter().all(Option::is_none)
    }

    fn check_at(&self, instance: &Value, at: &At<'_>, out: &mut Vec<(String, String)>) -> bool {
        let mut problem = |message: String| out.push((at.pointer(), message));
        if self.types != 0 && self.types & type_bits(instance) == 0 {
            // A list of one name reads as that name; `types` rejects repeated names, so bits count names.
            let mut message = String::from(if self.types.count_ones() > 1 {
                "value is not of types "
            } else {
                "value is not of type "
            });
            let names = TYPE_NAMES.iter().filter(|(_, b)| self.types & b != 0);
            for (i, (name, _)) in names.enumerate() {
                if i > 0 {
                    message.push_str(", ");
                }
                message.push('"');
                message.push_str(name);
                message.push('"');
            }
            problem(message);
        }
        if let Some(values) = &self.one_of_values
            && !values.contains(instance)
        {
            problem(enum_message(values));
        }
        if let Some(value) = &self.constant
            && value != instance
        {
            problem(format!("{value} was expected"));
        }
        match instance {
            Value::Number(n) => {
                let bounds = [
                    (&self.minimum, "less than the minimum"),
                    (&self.maximum, "greater than the maximum"),
                    (&self.exclusive_minimum, "less than or equal to the minimum"),
                    (&self.exclusive_maximum, "greater than or equal to the maximum"),
                ];
                if bounds.iter().all(|(b, _)| b.is_none()) {
                    return true;
                }
                let Some(v) = exact(n) else {
                    return false;
                };
                let broken = [
                    self.minimum.as_ref().filter(|b| v < b.value),
                    self.maximum.as_ref().filter(|b| v > b.value),
                    self.exclusive_minimum.as_ref().filter(|b| v <= b.value),
                    self.exclusive_maximum.as_ref().filter(|b| v >= b.value),
                ];
                for (bound, (_, words)) in broken.iter().zip(bounds) {
                    if let Some(b) = bound {
                        problem(format!("value is {words} of {}", b.written));
                    }
                }
            }
            Value::String(s) => {
                if self.min_length.is_some() || self.max_length.is_some() {
                    let len = s.chars().count();
                    if let Some(min) = self.min_length.filter(|m| len < *m) {
                        problem(format!(
                            "value is shorter than {}",
                            plural(min, "character", "characters")
                        ));
                    }
                    if let Some(max) = self.max_length.filter(|m| len > *m) {
                        problem(format!(
                            "value is longer than {}",
                            plural(max, "character", "characters")
                        ));
                    }
                }
            }
            Value::Array(items) => {
                let len = items.len();
                if let Some(min) = self.min_items.filter(|m| len < *m) {
                    problem(format!("value has less than {}", plural(min, "item", "items")));
                }
                if let Some(max) = self.max_items.filter(|m| len > *m) {
                    problem(format!("value has more than {}", plural(max, "item", "items")));
                }
                if let Some(schema) = &self.items {
                    let mut settled = true;
                    for (i, item) in items.iter().enumerate() {
                        settled &= schema.check_at(item, &at.index(i), out);
                    }
                    return settled;
                }
            }
            Value::Object(map) => return self.check_object(map, at, out),
            Value::Null | Value::Bool(_) => {}
        }
        true
    }

    fn check_object(&self, map: &Map<String, Value>, at: &At<'_>, out: &mut Vec<(String, String)>) -> bool {
        let len = map.len();
        if let Some(min) = self.min_properties.filter(|m| len < *m) {
            let message = format!("value has less than {}", plural(min, "property", "properties"));
            out.push((at.pointer(), message));
        }
        if let Some(max) = self.max_properties.filter(|m| len > *m) {
            let message = format!("value has more than {}", plural(max, "property", "properties"));
            out.push((at.pointer(), message));
        }
        // In a closed object (`properties` with `additionalProperties: false`) with one required name, jsonschema
        // (its fused check of both) finds that name only among the declared ones: undeclared, it is reported missing
        // even when present (and unexpected too; no instance can satisfy that schema).
        let closed = self.has_properties && matches!(self.additional, Some(Simple::Never)) && self.required.len() == 1;
        for name in &self.required {
            let declared = || self.properties.binary_search_by(|(n, _)| n.cmp(name)).is_ok();
            if !map.contains_key(name) || (closed && !declared()) {
                out.push((
                    at.pointer(),
                    format!("{} is a required property", Value::String(name.clone())),
                ));
            }
        }
        let mut settled = true;
        let mut unexpected: Vec<&str> = Vec::new();
        for (key, value) in map {
            match self.properties.binary_search_by(|(name, _)| name.as_str().cmp(key)) {
                Ok(i) => settled &= self.properties[i].1.check_at(value, &at.key(key), out),
                Err(_) => match &self.additional {
                    None => {}
                    Some(Simple::Never) => unexpected.push(key),
                    Some(schema) => settled &= schema.check_at(value, &at.key(key), out),
                },
            }
        }
        if !unexpected.is_empty() && !self.has_properties {
            // jsonschema's check for `additionalProperties: false` alone reports the object once, as a false schema.
            out.push((at.pointer(), "False schema does not allow value".to_string()));
        } else if !unexpected.is_empty() {
            let listed: Vec<String> = unexpected.iter().map(|k| format!("'{k}'")).collect();
            let verb = if unexpected.len() == 1 { "was" } else { "were" };
            let message = format!(
                "Additional properties are not allowed ({} {verb} unexpected)",
                listed.join(", ")
            );
            out.push((at.pointer(), message));
        }
        settled
    }
}

/// The type bits `instance` has. A number with no fractional part is an integer from draft 6 on, as jsonschema
/// decides (`1.0`, `1e3`).
fn type_bits(instance: &Value) -> u8 {
    match instance {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Object(_) => OBJECT,
        Value::Array(_) => ARRAY,
        Value::String(_) => STRING,
        Value::Number(n) if n.is_i64() || n.is_u64() => NUMBER | INTEGER,
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => NUMBER | INTEGER,
        Value::Number(_) => NUMBER,
    }
}

/// jsonschema's `enum` message: up to three options as `a, b or c`, else the first two and how many others.
fn enum_message(options: &[Value]) -> String {
    let mut message = String::from("value is not one of ");
    if options.len() <= 3 {
        for (i, option) in options.iter().enumerate() {
            if i > 0 {
                message.push_str(if i == options.len() - 1 { " or " } else { ", " });
            }
            message.push_str(&option.to_string());
        }
    } else {
        message.push_str(&format!("{}, {}", options[0], options[1]));
        message.push_str(&format!(" or {} other candidates", options.len() - 2));
    }
    message
}

#[cfg(test)]
#[path = "simple_schema_tests.rs"]
mod tests;
