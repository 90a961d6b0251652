//! The common subset of JSON Schema checked without the `jsonschema` crate: the fast path of argument and output
//! validation (`validate.rs`).
//!
//! Most MCP tool schemas are flat objects of typed properties (zod, schemars and pydantic all emit them). For a schema
//! made only of the keywords below, [`compile`] builds a [`Simple`] checker whose [`Simple::accepts`] answers
//! "certainly valid" in a walk over the instance, with no meta-schema to build (jsonschema builds and keeps one per
//! draft: ~4.7 M instructions and ~0.5 MB of heap for 2020-12). It never answers "invalid": `false` means "not settled
//! here", and the caller asks `jsonschema` (compiled on demand), which also writes the error messages. So the outcome
//! of a call is exactly jsonschema's; only its cost changes. A differential test compares the two on generated
//! schemas and instances.
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
const OBJECT: u8 = 1 << 2;
const ARRAY: u8 = 1 << 3;
const NUMBER: u8 = 1 << 4;
const STRING: u8 = 1 << 5;
const INTEGER: u8 = 1 << 6;

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
    required: Vec<String>,
    additional: Option<Simple>,
    items: Option<Simple>,
    one_of_values: Option<Vec<Value>>,
    constant: Option<Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
}

/// Compiles `schema` when it lies in the subset; `None` otherwise (jsonschema's case).
pub(crate) fn compile(schema: &Value) -> Option<Simple> {
    match schema {
        Value::Object(map) => compile_object(map),
        other => compile_value(other, Draft::default()),
    }
}

/// [`compile`] for a schema held as an object (a catalog's tool schemas).
pub(crate) fn compile_object(schema: &Map<String, Value>) -> Option<Simple> {
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
                for (name, sub) in value.as_object()? {
                    node.properties.push((name.clone(), compile_value(sub, draft)?));
                }
            }
            "required" => {
                let names = value.as_array()?;
                for (i, name) in names.iter().enumerate() {
                    let name = name.as_str()?;
                    if names[..i].iter().any(|n| n.as_str() == Some(name)) {
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
            "minimum" => node.minimum = Some(exact(value.as_number()?)?),
            "maximum" => node.maximum = Some(exact(value.as_number()?)?),
            "exclusiveMinimum" => node.exclusive_minimum = Some(exact(value.as_number()?)?),
            "exclusiveMaximum" => node.exclusive_maximum = Some(exact(value.as_number()?)?),
            "minLength" => node.min_length = Some(value.as_u64()?),
            "maxLength" => node.max_length = Some(value.as_u64()?),
            "minItems" => node.min_items = Some(value.as_u64()?),
            "maxItems" => node.max_items = Some(value.as_u64()?),
            "minProperties" => node.min_properties = Some(value.as_u64()?),
            "maxProperties" => node.max_properties = Some(value.as_u64()?),
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
    let bit = |name: &Value| match name.as_str()? {
        "null" => Some(NULL),
        "boolean" => Some(BOOLEAN),
        "object" => Some(OBJECT),
        "array" => Some(ARRAY),
        "number" => Some(NUMBER),
        "string" => Some(STRING),
        "integer" => Some(INTEGER),
        _ => None,
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

impl Simple {
    /// Whether `instance` is certainly valid. `false` leaves the answer to jsonschema.
    pub(crate) fn accepts(&self, instance: &Value) -> bool {
        match self {
            Simple::Any => true,
            Simple::Never => false,
            Simple::Node(node) => node.accepts(instance),
        }
    }
}

impl Node {
    /// Whether the node asserts nothing (an empty `properties` asserts nothing either).
    fn is_trivial(&self) -> bool {
        let Node {
            types,
            properties,
            required,
            additional,
            items,
            one_of_values,
            constant,
            minimum,
            maximum,
            exclusive_minimum,
            exclusive_maximum,
            min_length,
            max_length,
            min_items,
            max_items,
            min_properties,
            max_properties,
        } = self;
        *types == 0
            && properties.is_empty()
            && required.is_empty()
            && additional.is_none()
            && items.is_none()
            && one_of_values.is_none()
            && constant.is_none()
            && [minimum, maximum, exclusive_minimum, exclusive_maximum]
                .iter()
                .all(|b| b.is_none())
            && [
                min_length,
                max_length,
                min_items,
                max_items,
                min_properties,
                max_properties,
            ]
            .iter()
            .all(|b| b.is_none())
    }

    fn accepts(&self, instance: &Value) -> bool {
        if self.types != 0 && !self.type_matches(instance) {
            return false;
        }
        if let Some(values) = &self.one_of_values
            && !values.contains(instance)
        {
            return false;
        }
        if let Some(value) = &self.constant
            && value != instance
        {
            return false;
        }
        match instance {
            Value::Number(n) => self.number_accepts(n),
            Value::String(s) => {
                if self.min_length.is_none() && self.max_length.is_none() {
                    return true;
                }
                let len = s.chars().count() as u64;
                self.min_length.is_none_or(|min| len >= min) && self.max_length.is_none_or(|max| len <= max)
            }
            Value::Array(items) => {
                let len = items.len() as u64;
                self.min_items.is_none_or(|min| len >= min)
                    && self.max_items.is_none_or(|max| len <= max)
                    && self.items.as_ref().is_none_or(|s| items.iter().all(|i| s.accepts(i)))
            }
            Value::Object(map) => self.object_accepts(map),
            Value::Null | Value::Bool(_) => true,
        }
    }

    fn type_matches(&self, instance: &Value) -> bool {
        let bit = match instance {
            Value::Null => NULL,
            Value::Bool(_) => BOOLEAN,
            Value::Object(_) => OBJECT,
            Value::Array(_) => ARRAY,
            Value::String(_) => STRING,
            // An integer written as `1.0` is one from draft 6 on, but whether a float is integral is left to
            // jsonschema: only numbers parsed as integers count here.
            Value::Number(n) if n.is_i64() || n.is_u64() => NUMBER | INTEGER,
            Value::Number(_) => NUMBER,
        };
        self.types & bit != 0
    }

    fn number_accepts(&self, n: &Number) -> bool {
        let bounded = self.minimum.is_some()
            || self.maximum.is_some()
            || self.exclusive_minimum.is_some()
            || self.exclusive_maximum.is_some();
        if !bounded {
            return true;
        }
        let Some(v) = exact(n) else {
            return false;
        };
        self.minimum.is_none_or(|min| v >= min)
            && self.maximum.is_none_or(|max| v <= max)
            && self.exclusive_minimum.is_none_or(|min| v > min)
            && self.exclusive_maximum.is_none_or(|max| v < max)
    }

    fn object_accepts(&self, map: &Map<String, Value>) -> bool {
        let len = map.len() as u64;
        if !(self.min_properties.is_none_or(|min| len >= min) && self.max_properties.is_none_or(|max| len <= max)) {
            return false;
        }
        if !self.required.iter().all(|name| map.contains_key(name)) {
            return false;
        }
        map.iter().all(
            |(key, value)| match self.properties.binary_search_by(|(name, _)| name.as_str().cmp(key)) {
                Ok(i) => self.properties[i].1.accepts(value),
                Err(_) => self.additional.as_ref().is_none_or(|s| s.accepts(value)),
            },
        )
    }
}

#[cfg(test)]
#[path = "simple_schema_tests.rs"]
mod tests;
