//! Compact TypeScript-like parameter shapes from JSON Schemas, e.g. `{text: string, count?: number, mode?: "a"|"b"}`.
//!
//! Shapes are hints for the model, not a faithful schema translation: they cover `type` (and type lists), `enum`,
//! `const`, `properties`/`required`, `items`/`prefixItems`, `additionalProperties`, `anyOf`/`oneOf` (unions),
//! `allOf` (merged objects, else `&`), local `$ref` (resolved up to [`MAX_REF_DEPTH`] levels, then shown by name).
//! Objects nest up to three levels, then show as `{…}`; enums list up to [`MAX_ENUM_VALUES`] values. A shape longer
//! than its budget drops detail (shallower nesting, then trailing properties, shown as `…`). A missing schema, or
//! one without properties, has the shape `{}`.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// Default character budget of a shape.
pub const DEFAULT_SHAPE_CHARS: usize = 400;
/// Enum values shown before `|…`.
pub const MAX_ENUM_VALUES: usize = 8;
/// `$ref` hops followed before showing the referenced name.
pub const MAX_REF_DEPTH: usize = 2;
/// Object nesting rendered in full at the top budget.
const MAX_OBJECT_DEPTH: usize = 3;

/// The shape of a tool's input schema within [`DEFAULT_SHAPE_CHARS`].
pub fn shape(schema: Option<&Value>) -> String {
    shape_within(schema, DEFAULT_SHAPE_CHARS)
}

/// The shape of `schema` in at most `max_chars` characters (at least a few characters are always returned).
pub fn shape_within(schema: Option<&Value>, max_chars: usize) -> String {
    match schema {
        Some(Value::Object(obj)) => object_shape_within(obj, max_chars),
        Some(Value::Bool(false)) => "never".to_string(),
        _ => "{}".to_string(),
    }
}

/// [`shape_within`] of a schema object, read where it is: a catalog's shared schema is shaped without a copy.
pub(crate) fn object_shape_within(schema: &Map<String, Value>, max_chars: usize) -> String {
    for depth in (1..=MAX_OBJECT_DEPTH).rev() {
        let r = Renderer {
            root: schema,
            max_depth: depth,
            budget: None,
        };
        let s = r.top();
        if s.chars().count() <= max_chars {
            return s;
        }
    }
    let r = Renderer {
        root: schema,
        max_depth: 1,
        budget: Some(max_chars),
    };
    let s = r.top();
    if s.chars().count() <= max_chars {
        return s;
    }
    let keep = max_chars.saturating_sub(1).max(1);
    let mut cut: String = s.chars().take(keep).collect();
    cut.push('…');
    cut
}

struct Renderer<'a> {
    /// The schema being shaped, which local `$ref`s point into.
    root: &'a Map<String, Value>,
    max_depth: usize,
    /// When set, the top-level object stops adding properties at this many characters.
    budget: Option<usize>,
}

/// What a local `$ref` points at: the root schema object itself (`#`), or a value inside it.
#[derive(Clone, Copy)]
enum Target<'a> {
    Root(&'a Map<String, Value>),
    Inner(&'a Value),
}

impl<'a> Target<'a> {
    fn as_object(self) -> Option<&'a Map<String, Value>> {
        match self {
            Target::Root(obj) => Some(obj),
            Target::Inner(value) => value.as_object(),
        }
    }
}

impl Renderer<'_> {
    fn top(&self) -> String {
        let s = self.render_object(self.root, 0, 0);
        if s == "any" || s == "object" {
            "{}".to_string()
        } else {
            s
        }
    }

    fn render(&self, schema: &Value, depth: usize, refs: usize) -> String {
        match schema {
            Value::Bool(false) => "never".to_string(),
            Value::Object(obj) => self.render_object(obj, depth, refs),
            _ => "any".to_string(),
        }
    }

    fn render_target(&self, target: Target<'_>, depth: usize, refs: usize) -> String {
        match target {
            Target::Root(obj) => self.render_object(obj, depth, refs),
            Target::Inner(value) => self.render(value, depth, refs),
        }
    }

    fn render_object(&self, obj: &Map<String, Value>, depth: usize, refs: usize) -> String {
        if let Some(Value::String(reference)) = obj.get("$ref") {
            return self.reference(reference, depth, refs);
        }
        if let Some(value) = obj.get("const") {
            return literal(value);
        }
        if let Some(Value::Array(values)) = obj.get("enum") {
            return enum_union(values);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = obj.get(key) {
                let parts: Vec<String> = options.iter().map(|o| self.render(o, depth, refs)).collect();
                return union(parts);
            }
        }
        if let Some(Value::Array(all)) = obj.get("allOf") {
            return self.all_of(obj, all, depth, refs);
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.typed(t, obj, depth, refs),
            Some(Value::Array(types)) => union(
                types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.typed(t, obj, depth, refs))
                    .collect(),
            ),
            _ if obj.contains_key("properties") || obj.contains_key("additionalProperties") => {
                self.object(obj, depth, refs)
            }
            _ if obj.contains_key("items") || obj.contains_key("prefixItems") => self.array(obj, depth, refs),
            _ => "any".to_string(),
        }
    }

    fn typed(&self, t: &str, obj: &Map<String, Value>, depth: usize, refs: usize) -> String {
        match t {
            "string" => "string".to_string(),
            "integer" | "number" => "number".to_string(),
            "boolean" => "boolean".to_string(),
            "null" => "null".to_string(),
            "array" => self.array(obj, depth, refs),
            "object" => self.object(obj, depth, refs),
            _ => "any".to_string(),
        }
    }

    fn array(&self, obj: &Map<String, Value>, depth: usize, refs: usize) -> String {
        let tuple = obj
            .get("prefixItems")
            .or_else(|| obj.get("items").filter(|i| i.is_array()));
        if let Some(Value::Array(items)) = tuple {
            let parts: Vec<String> = items.iter().map(|i| self.render(i, depth + 1, refs)).collect();
            return format!("[{}]", parts.join(", "));
        }
        let item = obj
            .get("items")
            .map_or_else(|| "any".to_string(), |i| self.render(i, depth + 1, refs));
        if item.contains('|') || item.contains(" & ") {
            format!("({item})[]")
        } else {
            format!("{item}[]")
        }
    }

    fn object(&self, obj: &Map<String, Value>, depth: usize, refs: usize) -> String {
        let props = obj
            .get("properties")
            .and_then(Value::as_object)
            .filter(|p| !p.is_empty());
        let Some(props) = props else {
            return match obj.get("additionalProperties") {
                Some(extra @ Value::Object(_)) => format!("Record<string, {}>", self.render(extra, depth + 1, refs)),
                _ => "object".to_string(),
            };
        };
        if depth >= self.max_depth {
            return "{…}".to_string();
        }
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let budget = if depth == 0 { self.budget } else { None };
        let mut out = String::from("{");
        let mut used = 1;
        for (i, (key, value)) in props.iter().enumerate() {
            let optional = if required.contains(&key.as_str()) { "" } else { "?" };
            let entry = format!(
                "{}{optional}: {}",
                property_key(key),
                self.render(value, depth + 1, refs)
            );
            let sep = if i == 0 { "" } else { ", " };
            let entry_len = sep.len() + entry.chars().count();
            if let Some(max) = budget
                && used + entry_len + 4 > max
            {
                out.push_str(if i == 0 { "…" } else { ", …" });
                break;
            }
            out.push_str(sep);
            out.push_str(&entry);
            used += entry_len;
        }
        out.push('}');
        out
    }

    fn all_of(&self, obj: &Map<String, Value>, all: &[Value], depth: usize, refs: usize) -> String {
        let resolved: Option<Vec<&Map<String, Value>>> = all
            .iter()
            .map(|s| {
                self.resolve_shallow(s)
                    .filter(|o| o.get("properties").is_some_and(Value::is_object))
            })
            .collect();
        if let Some(mut parts) = resolved {
            if obj.contains_key("properties") {
                parts.push(obj);
            }
            let mut properties = Map::new();
            let mut required = Vec::new();
            for part in parts {
                if let Some(p) = part.get("properties").and_then(Value::as_object) {
                    properties.extend(p.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                if let Some(r) = part.get("required").and_then(Value::as_array) {
                    required.extend(r.iter().cloned());
                }
            }
            let mut merged = Map::new();
            merged.insert("properties".into(), Value::Object(properties));
            merged.insert("required".into(), Value::Array(required));
            return self.object(&merged, depth, refs);
        }
        let parts: Vec<String> = all
            .iter()
            .map(|s| self.render(s, depth, refs))
            .filter(|s| s != "any")
            .collect();
        match parts.len() {
            0 => "any".to_string(),
            1 => parts.into_iter().next().unwrap_or_default(),
            _ => parts.join(" & "),
        }
    }

    fn resolve_shallow<'v>(&'v self, schema: &'v Value) -> Option<&'v Map<String, Value>> {
        match schema.get("$ref").and_then(Value::as_str).and_then(|r| self.lookup(r)) {
            Some(target) => target.as_object(),
            None => schema.as_object(),
        }
    }

    /// The target of a local `$ref` (`#`, `#/$defs/x`), a JSON pointer into the root schema.
    fn lookup(&self, reference: &str) -> Option<Target<'_>> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(Target::Root(self.root));
        }
        let rest = pointer.strip_prefix('/')?;
        let (first, rest) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        let first = if first.contains('~') {
            Cow::Owned(first.replace("~1", "/").replace("~0", "~"))
        } else {
            Cow::Borrowed(first)
        };
        self.root.get(first.as_ref())?.pointer(rest).map(Target::Inner)
    }

    fn reference(&self, reference: &str, depth: usize, refs: usize) -> String {
        if refs < MAX_REF_DEPTH
            && let Some(target) = self.lookup(reference)
        {
            return self.render_target(target, depth, refs + 1);
        }
        let name = reference.rsplit(['/', '#']).find(|s| !s.is_empty()).unwrap_or("any");
        if name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            name.to_string()
        } else {
            "any".to_string()
        }
    }
}

fn literal(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "any".to_string())
}

fn enum_union(values: &[Value]) -> String {
    let mut parts: Vec<String> = values.iter().take(MAX_ENUM_VALUES).map(literal).collect();
    if values.len() > MAX_ENUM_VALUES {
        parts.push("…".to_string());
    }
    if parts.is_empty() {
        "never".to_string()
    } else {
        parts.join("|")
    }
}

fn union(parts: Vec<String>) -> String {
    let mut out: Vec<String> = Vec::new();
    for p in parts {
        if p == "any" {
            return "any".to_string();
        }
        if !out.contains(&p) {
            out.push(p);
        }
    }
    if out.is_empty() {
        "any".to_string()
    } else {
        out.join("|")
    }
}

fn property_key(key: &str) -> String {
    let mut chars = key.chars();
    let ident = chars.next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$');
    if ident {
        key.to_string()
    } else {
        literal(&Value::String(key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn shape_table() {
        let cases: Vec<(Option<Value>, &str)> = vec![
            (None, "{}"),
            (Some(json!({})), "{}"),
            (Some(json!({"type": "object"})), "{}"),
            (Some(json!({"type": "object", "properties": {}})), "{}"),
            (
                Some(json!({"type": "object", "properties": {
                    "text": {"type": "string"}, "count": {"type": "integer"},
                    "mode": {"enum": ["a", "b"]}, "tags": {"type": "array", "items": {"type": "string"}}
                }, "required": ["text"]})),
                r#"{text: string, count?: number, mode?: "a"|"b", tags?: string[]}"#,
            ),
            (
                Some(
                    json!({"type": "object", "properties": {"user": {"type": "object", "properties": {
                    "name": {"type": "string"}, "age": {"type": ["integer", "null"]}}, "required": ["name"]}}}),
                ),
                "{user?: {name: string, age?: number|null}}",
            ),
            (
                Some(
                    json!({"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "string"}]}}}),
                ),
                "{v?: string|number}",
            ),
            (
                Some(json!({"type": "object", "properties": {"v": {"oneOf": [{"const": 1}, {"const": "x"}]}}})),
                r#"{v?: 1|"x"}"#,
            ),
            (
                Some(json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"enum": ["a", "b"]}}}})),
                r#"{xs?: ("a"|"b")[]}"#,
            ),
            (
                Some(
                    json!({"type": "object", "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}}}),
                ),
                "{pair?: [string, number]}",
            ),
            (
                Some(
                    json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "number"}}}}),
                ),
                "{m?: Record<string, number>}",
            ),
            (
                Some(json!({"type": "object", "properties": {"my-key": {"type": "boolean"}, "ok_1": {}}})),
                r#"{"my-key"?: boolean, ok_1?: any}"#,
            ),
            (
                Some(
                    json!({"$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
                    "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}),
                ),
                "{p?: {x: number}}",
            ),
            (
                Some(
                    json!({"definitions": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}},
                    "type": "object", "properties": {"n": {"$ref": "#/definitions/Node"}}}),
                ),
                "{n?: {next?: {next?: Node}}}",
            ),
            (
                Some(json!({"type": "object", "properties": {"r": {"$ref": "https://example.com/s.json#/Remote"}}})),
                "{r?: Remote}",
            ),
            (
                Some(json!({"allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"type": "object", "properties": {"b": {"type": "number"}}}]})),
                "{a: string, b?: number}",
            ),
            (
                Some(json!({"type": "object", "properties": {"e": {"enum": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}}})),
                "{e?: 1|2|3|4|5|6|7|8|…}",
            ),
            (
                Some(
                    json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object",
                    "properties": {"c": {"type": "object", "properties": {"d": {"type": "string"}}}}}}}}}),
                ),
                "{a?: {b?: {c?: {…}}}}",
            ),
            (
                Some(json!({"type": "object", "properties": {"s": {"type": "string", "description": "名前 🙂"}}})),
                "{s?: string}",
            ),
            (
                Some(json!({"type": "object", "properties": {"f": false, "t": true}})),
                "{f?: never, t?: any}",
            ),
            (
                Some(json!({"type": "object", "properties": {"child": {"$ref": "#"}, "id": {"type": "string"}}})),
                "{child?: {child?: {child?: any, id?: string}, id?: string}, id?: string}",
            ),
            (
                Some(json!({"$defs": {"a/b": {"type": "string"}, "m~n": {"type": "number"}},
                    "type": "object", "properties": {"s": {"$ref": "#/$defs/a~1b"}, "n": {"$ref": "#/$defs/m~0n"}}})),
                "{s?: string, n?: number}",
            ),
            (
                Some(json!({"type": "object", "properties": {"x": {"$ref": "#/nowhere/X"}}})),
                "{x?: X}",
            ),
            (Some(json!("not a schema")), "{}"),
            (Some(json!(true)), "{}"),
            (Some(json!(false)), "never"),
        ];
        for (schema, want) in cases {
            assert_eq!(shape(schema.as_ref()), want, "{schema:?}");
            if let Some(Value::Object(obj)) = &schema {
                assert_eq!(object_shape_within(obj, DEFAULT_SHAPE_CHARS), want, "{schema:?}");
            }
        }
    }

    #[test]
    fn long_shapes_stay_within_budget() {
        let mut props = Map::new();
        for i in 0..200 {
            props.insert(
                format!("parameter_number_{i}"),
                json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            );
        }
        let schema = json!({"type": "object", "properties": props, "required": ["parameter_number_0"]});
        for budget in [1, 10, 40, 120, DEFAULT_SHAPE_CHARS] {
            let s = shape_within(Some(&schema), budget);
            assert!(s.chars().count() <= budget.max(2), "{budget}: {s}");
        }
        let s = shape(Some(&schema));
        assert!(
            s.starts_with("{parameter_number_0: {…}, parameter_number_1?: {…}"),
            "{s}"
        );
        assert!(s.ends_with(", …}"), "{s}");
    }

    #[test]
    fn unicode_property_names_are_cut_on_char_boundaries() {
        let mut props = Map::new();
        for i in 0..50 {
            props.insert(format!("名前{i}"), json!({"type": "string"}));
        }
        let schema = json!({"type": "object", "properties": props});
        let s = shape_within(Some(&schema), 37);
        assert!(s.chars().count() <= 37, "{s}");
        assert!(s.starts_with("{名前0?: string"), "{s}");
    }
}
