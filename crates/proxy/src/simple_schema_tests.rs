//! Tests of the subset checker: what it compiles, and a differential test holding it to jsonschema's answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;

/// A small deterministic generator (xorshift64*), so that a failing case can be replayed from its seed.
struct Rng(u64);

impl Rng {
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
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

const NAMES: &[&str] = &["a", "b", "c", "名"];
const TYPES: &[&str] = &["null", "boolean", "object", "array", "number", "string", "integer"];

fn scalars() -> Vec<Value> {
    vec![
        json!("x"),
        json!("y"),
        json!(""),
        json!("名前"),
        json!(true),
        json!(false),
        json!(null),
    ]
}

fn bounds() -> Vec<Value> {
    vec![
        json!(-1),
        json!(0),
        json!(1),
        json!(2.5),
        json!(1000),
        json!(-0.5),
        json!(9007199254740992_u64),
    ]
}

/// A schema of the subset; `format_ok`: its root declares 2020-12 (or nothing), where `format` is an annotation.
fn gen_schema(rng: &mut Rng, depth: usize, format_ok: bool) -> Value {
    if depth > 0 && rng.chance(10) {
        return json!(rng.chance(70));
    }
    let mut m = Map::new();
    if format_ok && rng.chance(15) {
        m.insert(
            "format".into(),
            json!(rng.pick(&["uint32", "email", "date-time", "uri", "regex"])),
        );
    }
    if rng.chance(70) {
        let ty = if rng.chance(75) {
            json!(rng.pick(TYPES))
        } else {
            let mut names: Vec<&str> = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let t = rng.pick(TYPES);
                if !names.contains(&t) {
                    names.push(t);
                }
            }
            json!(names)
        };
        m.insert("type".into(), ty);
    }
    if depth < 3 && rng.chance(50) {
        let mut props = Map::new();
        for _ in 0..rng.below(4) {
            props.insert(rng.pick(NAMES).to_string(), gen_schema(rng, depth + 1, format_ok));
        }
        m.insert("properties".into(), Value::Object(props));
    }
    if rng.chance(35) {
        let mut req: Vec<&str> = Vec::new();
        for _ in 0..rng.below(3) {
            let n = rng.pick(NAMES);
            if !req.contains(&n) {
                req.push(n);
            }
        }
        m.insert("required".into(), json!(req));
    }
    if rng.chance(30) {
        let additional = if depth < 3 && rng.chance(40) {
            gen_schema(rng, depth + 1, format_ok)
        } else {
            json!(rng.chance(40))
        };
        m.insert("additionalProperties".into(), additional);
    }
    if depth < 3 && rng.chance(25) {
        m.insert("items".into(), gen_schema(rng, depth + 1, format_ok));
    }
    if rng.chance(15) {
        let values: Vec<Value> = (0..1 + rng.below(3)).map(|_| rng.pick(&scalars())).collect();
        let mut unique: Vec<Value> = Vec::new();
        for v in values {
            if !unique.contains(&v) {
                unique.push(v);
            }
        }
        m.insert("enum".into(), Value::Array(unique));
    }
    if rng.chance(5) {
        m.insert("const".into(), rng.pick(&scalars()));
    }
    for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
        if rng.chance(12) {
            m.insert(key.into(), rng.pick(&bounds()));
        }
    }
    for key in [
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    ] {
        if rng.chance(12) {
            m.insert(key.into(), json!(rng.below(4)));
        }
    }
    if rng.chance(30) {
        m.insert("description".into(), json!("a parameter"));
    }
    if rng.chance(10) {
        m.insert("title".into(), json!("T"));
    }
    if rng.chance(10) {
        m.insert("default".into(), rng.pick(&scalars()));
    }
    if rng.chance(5) {
        m.insert("examples".into(), json!(["x", 1]));
    }
    Value::Object(m)
}

fn gen_instance(rng: &mut Rng, depth: usize) -> Value {
    let numbers = [
        json!(-2),
        json!(-1),
        json!(0),
        json!(1),
        json!(2),
        json!(3),
        json!(1000),
        json!(1.0),
        json!(2.5),
        json!(-0.5),
        json!(1e3),
        json!(1_152_921_504_606_846_976_u64),
        json!(u64::MAX),
        json!(9007199254740993_u64),
    ];
    let strings = [
        json!(""),
        json!("x"),
        json!("y"),
        json!("ab"),
        json!("名前"),
        json!("😀😀😀"),
        json!("abcd"),
    ];
    match rng.below(if depth >= 3 { 4 } else { 6 }) {
        0 => rng.pick(&[json!(null), json!(true), json!(false)]),
        1 => rng.pick(&numbers),
        2 | 3 => rng.pick(&strings),
        4 => Value::Array((0..rng.below(4)).map(|_| gen_instance(rng, depth + 1)).collect()),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.below(5) {
                let key = rng.pick(&["a", "b", "c", "名", "z"]);
                m.insert(key.to_string(), gen_instance(rng, depth + 1));
            }
            Value::Object(m)
        }
    }
}

/// Whether `v` holds an integer the subset leaves to jsonschema (beyond 2^53, when compared with a bound).
fn holds_unsettled_number(v: &Value) -> bool {
    match v {
        Value::Number(n) => exact(n).is_none(),
        Value::Array(items) => items.iter().any(holds_unsettled_number),
        Value::Object(m) => m.values().any(holds_unsettled_number),
        _ => false,
    }
}

fn full(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
        .unwrap_or_else(|e| panic!("jsonschema refuses a schema of the subset: {schema}: {e}"))
}

/// jsonschema's problems as `validate.rs` collects them: masked messages by instance path, sorted, without repeats.
fn full_problems(validator: &jsonschema::Validator, instance: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = validator
        .iter_errors(instance)
        .map(|e| (e.instance_path().to_string(), e.masked().to_string()))
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn agrees_with_jsonschema_on_generated_schemas_and_instances() {
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15);
    let mut rng = Rng(seed);
    let (mut valid, mut invalid, mut deferred) = (0usize, 0usize, 0usize);
    for case in 0..std::env::var("CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000)
    {
        let draft = if rng.chance(40) { Some(rng.pick(DRAFTS)) } else { None };
        let format_ok = draft.is_none_or(|d| d.contains("2020-12"));
        let mut schema = gen_schema(&mut rng, 0, format_ok);
        if let (Some(d), Value::Object(m)) = (draft, &mut schema) {
            m.insert("$schema".into(), json!(d));
        }
        let simple = compile(&schema).unwrap_or_else(|| panic!("case {case}: not in the subset: {schema}"));
        let validator = full(&schema);
        for _ in 0..25 {
            let instance = gen_instance(&mut rng, 0);
            let want = full_problems(&validator, &instance);
            let Some(mut got) = simple.check(&instance) else {
                assert!(
                    holds_unsettled_number(&instance),
                    "case {case}: the subset leaves a plain instance to jsonschema\nschema: {schema}\ninstance: {instance}"
                );
                deferred += 1;
                continue;
            };
            got.sort();
            got.dedup();
            assert_eq!(got, want, "case {case}\nschema: {schema}\ninstance: {instance}");
            if want.is_empty() {
                valid += 1;
            } else {
                invalid += 1;
            }
        }
    }
    // The generator must reach both answers often, or the test proves little.
    assert!(
        valid > 5_000 && invalid > 5_000 && deferred > 0,
        "valid {valid}, invalid {invalid}, deferred {deferred}"
    );
}

#[test]
fn tool_schemas_of_common_generators_are_in_the_subset() {
    let schemas = [
        // zod-to-json-schema (server-everything's `echo`).
        json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "Message to echo"}},
            "required": ["message"],
            "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#"
        }),
        // schemars (rmcp servers), with a nullable field and an integer bound.
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "type": "object",
            "properties": {
                "ms": {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 3_600_000},
                "tag": {"type": ["string", "null"], "default": null}
            },
            "required": ["ms"]
        }),
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        json!({"type": "object"}),
        json!({}),
        json!(true),
        json!({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 5}}}),
        json!({"type": "object", "properties": {"mode": {"enum": ["fast", "slow"], "description": "How"}}}),
    ];
    for schema in schemas {
        assert!(compile(&schema).is_some(), "{schema}");
    }
}

#[test]
fn schemas_outside_the_subset_are_left_to_jsonschema() {
    let outside = [
        json!({"$ref": "#/definitions/x", "definitions": {"x": {}}}),
        json!({"type": "string", "pattern": "^a"}),
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "string", "format": "uri"}),
        json!({"$schema": "https://json-schema.org/draft/2019-09/schema", "format": "email"}),
        json!({"format": 3}),
        json!({"anyOf": [{"type": "string"}, {"type": "number"}]}),
        json!({"type": "object", "nullable": true}),
        json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}),
        json!({"$schema": "http://example.com/custom", "type": "object"}),
        json!({"type": "object", "properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#"}}}),
        json!({"type": "no-such-type"}),
        json!({"type": []}),
        json!({"type": ["string", "string"]}),
        json!({"required": ["a", "a"]}),
        json!({"required": "a"}),
        json!({"enum": []}),
        json!({"enum": [1, 2]}),
        json!({"const": {"a": 1}}),
        json!({"minimum": 9_007_199_254_740_993_u64}),
        json!({"exclusiveMinimum": true, "minimum": 0}),
        json!({"minLength": -1}),
        json!({"minLength": 1.5}),
        json!({"items": [{"type": "string"}]}),
        json!({"description": 3}),
        json!({"deprecated": "yes"}),
        json!({"examples": "x"}),
        json!("text"),
        json!(3),
    ];
    for schema in outside {
        assert!(compile(&schema).is_none(), "{schema}");
    }
}

#[test]
fn accepts_table() {
    let schema = json!({
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 3},
            "n": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
            "flag": {"type": ["boolean", "null"]}
        },
        "required": ["text"],
        "additionalProperties": false
    });
    let simple = compile(&schema).unwrap();
    let cases = [
        (json!({"text": "名前"}), true),
        (json!({"text": "😀😀😀"}), true),
        (json!({"text": "abcd"}), false),
        (json!({"text": ""}), false),
        (json!({"text": "a", "n": 9}), true),
        (json!({"text": "a", "n": 10}), false),
        (json!({"text": "a", "n": 0}), false),
        (json!({"text": "a", "n": 2.0}), true),
        (json!({"text": "a", "n": 2.5}), false),
        (json!({"text": "a", "tags": ["a", "b", "a"]}), true),
        (json!({"text": "a", "tags": ["c"]}), false),
        (json!({"text": "a", "flag": null}), true),
        (json!({"text": "a", "flag": 1}), false),
        (json!({"text": "a", "extra": 1}), false),
        (json!({"n": 2}), false),
        (json!([]), false),
    ];
    for (instance, want) in cases {
        assert_eq!(simple.accepts(&instance), want, "{instance}");
    }
    assert!(!compile(&json!(false)).unwrap().accepts(&json!(null)));
}
