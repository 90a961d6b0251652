//! Tool arguments before a call (parsing `args`, catching mis-nested proxy parameters, JSON Schema validation with the
//! expected shape in the message) and `structuredContent` against a tool's output schema after it.
//!
//! Validation uses the `jsonschema` crate (draft 4 to 2020-12, picked from `$schema`, 2020-12 when absent as MCP
//! specifies), built with default features off: it never fetches remote `$ref`s (no network from a tool schema, and
//! no second `reqwest`/TLS stack in the build), and `pattern` keywords use the linear-time `regex` engine so a hostile
//! schema cannot stall a call. A schema that does not compile (invalid, or with a remote `$ref`) is reported and
//! skipped, as pi-mcp-adapter does: the server still validates.
//!
//! A validator is compiled once per tool schema and kept with the tool's entry, so a call costs one pass over its
//! arguments. jsonschema builds its draft's meta-schema validator once per process, on the first schema it compiles.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::shapes::shape;

/// Problems listed in one validation message; the rest are counted.
pub const MAX_LISTED_PROBLEMS: usize = 8;

/// Top-level parameters of the `mcp` tool that, found inside `args`, reveal a mis-nested proxy call.
const GATEWAY_KEYS: &[&str] = &[
    "tool",
    "args",
    "server",
    "search",
    "regex",
    "limit",
    "offset",
    "describe",
    "instructions",
    "connect",
    "action",
];

/// Turns the `args` parameter into a JSON object: absent, `null` or an empty string mean `{}`; a string must hold a
/// JSON object; anything else is an error naming what was given.
pub fn parse_args(args: Option<&Value>) -> Result<Map<String, Value>> {
    match args {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map.clone()),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(Error::InvalidArgs(format!(
                "`args` must be a JSON object, but the string holds {}",
                json_kind(&other)
            ))),
            Err(e) => Err(Error::InvalidArgs(format!(
                "`args` is a string but not valid JSON: {e}"
            ))),
        },
        Some(other) => Err(Error::InvalidArgs(format!(
            "`args` must be a JSON object, got {}",
            json_kind(other)
        ))),
    }
}

/// Rejects `args` that look like a whole proxy call nested one level too deep (`args: {tool, args}`), unless the
/// tool itself declares those parameters.
pub fn check_not_nested(args: &Map<String, Value>, input_schema: &Value) -> Result<()> {
    let declared = |key: &str| {
        input_schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(key))
    };
    let suspicious = ["tool", "args"].iter().any(|k| args.contains_key(*k) && !declared(k));
    let all_gateway = args.keys().all(|k| GATEWAY_KEYS.contains(&k.as_str()) && !declared(k));
    if suspicious && all_gateway {
        let keys: Vec<String> = args.keys().map(|k| format!("`{k}`")).collect();
        return Err(Error::InvalidArgs(format!(
            "`args` holds mcp parameters ({}); pass them at the top level: mcp({{tool: \"name\", args: {{…}}}})",
            keys.join(", ")
        )));
    }
    Ok(())
}

/// A tool's input schema compiled once, with its parameter shape; reuse it for every call of that tool.
#[derive(Debug)]
pub struct ArgsValidator {
    tool: String,
    checker: Checker,
    shape: String,
}

impl ArgsValidator {
    /// Compiles `input_schema` for tool `tool`. Never fails: an unusable schema is recorded and skipped.
    pub fn new(tool: &str, input_schema: &Value) -> ArgsValidator {
        ArgsValidator::from_owned(tool, input_schema.clone())
    }

    /// [`ArgsValidator::new`] for a schema the caller already owns.
    pub fn from_owned(tool: &str, input_schema: Value) -> ArgsValidator {
        ArgsValidator {
            tool: tool.to_string(),
            shape: shape(Some(&input_schema)),
            checker: Checker(compile(&input_schema)),
        }
    }

    /// Why the schema is not used, when it is not.
    pub fn schema_problem(&self) -> Option<&str> {
        self.checker.schema_problem()
    }

    /// The expected parameters, as a compact shape.
    pub fn shape(&self) -> &str {
        &self.shape
    }

    /// Checks `args`; the error lists the problems and the expected parameters.
    pub fn check(&self, args: &Map<String, Value>) -> Result<()> {
        self.outcome(self.checker.problems(&Value::Object(args.clone())))
    }

    /// [`ArgsValidator::check`] without copying `args`: they are validated in place (taken into a JSON value and
    /// given back), for the call path that owns them.
    pub fn check_in_place(&self, args: &mut Map<String, Value>) -> Result<()> {
        let instance = Value::Object(std::mem::take(args));
        let problems = self.checker.problems(&instance);
        if let Value::Object(map) = instance {
            *args = map;
        }
        self.outcome(problems)
    }

    fn outcome(&self, problems: Vec<String>) -> Result<()> {
        if problems.is_empty() {
            return Ok(());
        }
        let mut message = format!("arguments for `{}` do not match its input schema:\n", self.tool);
        for p in problems.iter().take(MAX_LISTED_PROBLEMS) {
            message.push_str(&format!("- {p}\n"));
        }
        if problems.len() > MAX_LISTED_PROBLEMS {
            message.push_str(&format!("- … and {} more\n", problems.len() - MAX_LISTED_PROBLEMS));
        }
        message.push_str(&format!("expected parameters: {}", self.shape));
        Err(Error::ArgsDoNotMatchSchema {
            tool: self.tool.clone(),
            problems,
            message,
        })
    }
}

/// The outcome of checking `structuredContent` against an output schema. Mismatches are reported, never hidden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputReport {
    /// The content matches (or the schema could not be used; see `schema_problem`).
    pub valid: bool,
    /// One line per mismatch.
    pub problems: Vec<String>,
    /// Why the schema could not be used, when it could not.
    pub schema_problem: Option<String>,
}

impl OutputReport {
    /// One line for logs and the model, e.g. `structuredContent does not match the output schema: /n: …`.
    pub fn summary(&self) -> String {
        if let Some(problem) = &self.schema_problem {
            return format!("output schema not checked: {problem}");
        }
        if self.valid {
            return "structuredContent matches the output schema".to_string();
        }
        format!(
            "structuredContent does not match the output schema: {}",
            self.problems.join("; ")
        )
    }
}

/// Checks a result's `structuredContent` against the tool's `outputSchema` (any draft the validator knows; draft-07
/// and 2020-12 are the common ones). A tool with an output schema must return structured content: absence is a
/// problem.
pub fn validate_output(structured: Option<&Value>, output_schema: &Value) -> OutputReport {
    OutputValidator::new(output_schema.clone()).report(structured)
}

/// A tool's output schema compiled once ([`validate_output`] without the compile on every call).
#[derive(Debug)]
pub struct OutputValidator {
    checker: Checker,
}

impl OutputValidator {
    /// Compiles `output_schema` once, for checking many results against it.
    pub fn new(output_schema: Value) -> OutputValidator {
        OutputValidator {
            checker: Checker(compile(&output_schema)),
        }
    }

    /// What [`validate_output`] reports for `structured` against this schema.
    pub fn report(&self, structured: Option<&Value>) -> OutputReport {
        let Some(structured) = structured else {
            return OutputReport {
                valid: false,
                problems: vec!["the tool declares an output schema but returned no structuredContent".to_string()],
                schema_problem: None,
            };
        };
        if let Some(problem) = self.checker.schema_problem() {
            return OutputReport {
                valid: true,
                problems: Vec::new(),
                schema_problem: Some(problem.to_string()),
            };
        }
        let problems = self.checker.problems(structured);
        OutputReport {
            valid: problems.is_empty(),
            problems,
            schema_problem: None,
        }
    }
}

/// One schema compiled, or why it cannot be used.
#[derive(Debug)]
struct Checker(std::result::Result<jsonschema::Validator, String>);

impl Checker {
    /// Why the schema is not used.
    fn schema_problem(&self) -> Option<&str> {
        self.0.as_ref().err().map(String::as_str)
    }

    /// jsonschema's problems with `instance` (none when the schema is unusable).
    fn problems(&self, instance: &Value) -> Vec<String> {
        match &self.0 {
            Ok(validator) => problems(validator, instance),
            Err(_) => Vec::new(),
        }
    }
}

fn compile(schema: &Value) -> std::result::Result<jsonschema::Validator, String> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err(format!("schema is {}, not an object", json_kind(schema)));
    }
    jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
        .map_err(|e| format!("schema does not compile: {}", e.masked()))
}

/// Problems in a stable order (the validator's order follows its internal maps): by instance path, root first.
fn problems(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    // The common case first: a valid instance costs one pass and no error values.
    if validator.is_valid(instance) {
        return Vec::new();
    }
    let found: Vec<(String, String)> = validator
        .iter_errors(instance)
        .map(|e| (e.instance_path().to_string(), e.masked().to_string()))
        .collect();
    listed(found)
}

/// `(instance path, message)` pairs as the lines of a message: sorted, without repeats, the path first.
fn listed(mut found: Vec<(String, String)>) -> Vec<String> {
    found.sort();
    found.dedup();
    found
        .into_iter()
        .map(|(path, message)| {
            if path.is_empty() {
                message
            } else {
                format!("at {path}: {message}")
            }
        })
        .collect()
}

/// What kind of JSON value `value` is, with its article, for messages (`a string`, `an object`, `null`).
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn parse_args_table() {
        let ok: Vec<(Option<Value>, Value)> = vec![
            (None, json!({})),
            (Some(json!(null)), json!({})),
            (Some(json!("")), json!({})),
            (Some(json!("  ")), json!({})),
            (Some(json!({"a": 1})), json!({"a": 1})),
            (Some(json!("{\"a\": [1, \"名\"]}")), json!({"a": [1, "名"]})),
        ];
        for (input, want) in ok {
            assert_eq!(Value::Object(parse_args(input.as_ref()).unwrap()), want, "{input:?}");
        }
        let bad: Vec<(Value, &str)> = vec![
            (json!([1, 2]), "`args` must be a JSON object, got an array"),
            (json!(3), "`args` must be a JSON object, got a number"),
            (json!(true), "`args` must be a JSON object, got a boolean"),
            (
                json!("[1]"),
                "`args` must be a JSON object, but the string holds an array",
            ),
            (
                json!("\"x\""),
                "`args` must be a JSON object, but the string holds a string",
            ),
            (
                json!("{a: 1}"),
                "`args` is a string but not valid JSON: key must be a string at line 1 column 2",
            ),
        ];
        for (input, want) in bad {
            assert_eq!(parse_args(Some(&input)).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn nested_gateway_keys_table() {
        let plain = json!({"type": "object", "properties": {"message": {"type": "string"}}});
        let declares_tool = json!({"type": "object", "properties": {"tool": {"type": "string"}, "args": {}}});
        let cases: Vec<(Value, &Value, bool)> = vec![
            (json!({"tool": "echo", "args": {"message": "hi"}}), &plain, false),
            (json!({"tool": "echo", "server": "everything"}), &plain, false),
            (json!({"args": {"message": "hi"}}), &plain, false),
            (json!({"tool": "echo", "args": {}}), &declares_tool, true),
            (json!({"message": "hi", "tool": "x"}), &plain, true),
            (json!({"server": "x"}), &plain, true),
            (json!({"message": "hi"}), &plain, true),
        ];
        for (args, schema, ok) in cases {
            let result = check_not_nested(args.as_object().unwrap(), schema);
            assert_eq!(result.is_ok(), ok, "{args}: {result:?}");
        }
        let err = check_not_nested(json!({"tool": "echo", "args": {}}).as_object().unwrap(), &plain).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`args` holds mcp parameters (`tool`, `args`); pass them at the top level: mcp({tool: \"name\", args: {…}})"
        );
    }

    #[test]
    fn validation_message_lists_problems_and_shape() {
        let schema = json!({
            "type": "object",
            "properties": {"message": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
            "required": ["message"],
            "additionalProperties": false
        });
        let v = ArgsValidator::new("everything_echo", &schema);
        assert_eq!(v.schema_problem(), None);
        assert_eq!(v.shape(), "{message: string, count?: number}");
        assert!(
            v.check(json!({"message": "hi", "count": 2}).as_object().unwrap())
                .is_ok()
        );
        let err = v
            .check(json!({"count": 0, "extra": true}).as_object().unwrap())
            .unwrap_err();
        let Error::ArgsDoNotMatchSchema { problems, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(problems.len(), 3, "{problems:?}");
        insta::assert_snapshot!(err.to_string(), @r#"
        arguments for `everything_echo` do not match its input schema:
        - "message" is a required property
        - Additional properties are not allowed ('extra' was unexpected)
        - at /count: value is less than the minimum of 1
        expected parameters: {message: string, count?: number}
        "#);
    }

    #[test]
    fn integers_beyond_two_to_the_53_are_compared_exactly() {
        let v = ArgsValidator::new(
            "t",
            &json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}),
        );
        assert!(v.check(json!({"n": 2.0}).as_object().unwrap()).is_ok());
        let err = v
            .check(json!({"n": 9_007_199_254_740_993_u64}).as_object().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("- at /n: value is greater than the maximum of 5\n"),
            "{err}"
        );
    }

    #[test]
    fn many_problems_are_counted() {
        let mut props = Map::new();
        let mut required = Vec::new();
        for i in 0..12 {
            props.insert(format!("p{i}"), json!({"type": "string"}));
            required.push(json!(format!("p{i}")));
        }
        let schema = json!({"type": "object", "properties": props, "required": required});
        let err = ArgsValidator::new("t", &schema)
            .check(&Map::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("- … and 4 more\n"), "{err}");
    }

    #[test]
    fn unusable_schemas_are_skipped_with_a_reason() {
        let cases = [
            json!({"$ref": "https://example.invalid/schema.json"}),
            json!({"type": "no-such-type"}),
            json!("text"),
        ];
        for schema in cases {
            let v = ArgsValidator::new("t", &schema);
            assert!(v.schema_problem().is_some(), "{schema}");
            assert!(v.check(json!({"anything": 1}).as_object().unwrap()).is_ok());
        }
    }

    #[test]
    fn hostile_pattern_is_linear() {
        let schema = json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}});
        let v = ArgsValidator::new("t", &schema);
        assert_eq!(v.schema_problem(), None);
        let s = format!("{}!", "a".repeat(100_000));
        assert!(v.check(json!({"s": s}).as_object().unwrap()).is_err());
    }

    #[test]
    fn output_validation_draft07_and_2020_12() {
        let draft07 = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "number"}},
            "type": "object",
            "properties": {"sum": {"$ref": "#/definitions/n"}, "pair": {"type": "array", "items": [{"type": "string"}]}},
            "required": ["sum"]
        });
        let draft2020 = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {"n": {"type": "number"}},
            "type": "object",
            "properties": {"sum": {"$ref": "#/$defs/n"}, "pair": {"prefixItems": [{"type": "string"}], "items": false}},
            "required": ["sum"]
        });
        let cases: Vec<(&Value, Option<Value>, bool, Vec<&str>)> = vec![
            (&draft07, Some(json!({"sum": 3})), true, vec![]),
            (
                &draft07,
                Some(json!({"sum": "3"})),
                false,
                vec!["at /sum: value is not of type \"number\""],
            ),
            (&draft07, Some(json!({"sum": 1, "pair": ["a", 2]})), true, vec![]),
            (&draft2020, Some(json!({"sum": 3, "pair": ["a"]})), true, vec![]),
            (
                &draft2020,
                Some(json!({"sum": 1, "pair": ["a", 2]})),
                false,
                vec!["at /pair/1: False schema does not allow value"],
            ),
            (
                &draft2020,
                Some(json!({})),
                false,
                vec!["\"sum\" is a required property"],
            ),
            (
                &draft2020,
                None,
                false,
                vec!["the tool declares an output schema but returned no structuredContent"],
            ),
        ];
        // One compiled validator per schema, reused across the cases, reports what a fresh compile does.
        let compiled07 = OutputValidator::new(draft07.clone());
        let compiled2020 = OutputValidator::new(draft2020.clone());
        for (schema, structured, valid, problems) in cases {
            let report = validate_output(structured.as_ref(), schema);
            let compiled = if std::ptr::eq(schema, &draft07) {
                &compiled07
            } else {
                &compiled2020
            };
            assert_eq!(compiled.report(structured.as_ref()), report);
            assert_eq!(
                (
                    report.valid,
                    report.problems.iter().map(String::as_str).collect::<Vec<_>>()
                ),
                (valid, problems)
            );
        }
        let report = validate_output(Some(&json!({"sum": "x"})), &draft2020);
        assert_eq!(
            report.summary(),
            "structuredContent does not match the output schema: at /sum: value is not of type \"number\""
        );
        let report = validate_output(Some(&json!(1)), &json!({"$ref": "https://example.invalid/s.json"}));
        assert!(
            report.valid
                && report
                    .summary()
                    .starts_with("output schema not checked: schema does not compile"),
            "{report:?}"
        );
    }
}
