//! The generated JSON Schema accepts every fixture config file and rejects what the loader rejects.

use serde_json::{Value, json};

use crate::support::fixtures;

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&pimcp_config::json_schema()).unwrap()
}

#[test]
fn fixture_files_validate() {
    let validator = validator();
    let base = fixtures().join("six-sources");
    for rel in [
        "home/.config/mcp/mcp.json",
        "home/.agents/mcp.json",
        "home/.agents/mcp/mcp.json",
        "home/.pi/agent/mcp.json",
        "project/.mcp.json",
        "project/.pi/mcp.json",
    ] {
        let text = std::fs::read_to_string(base.join(rel)).unwrap();
        let value: Value = pimcp_config::parse_jsonc(&text).unwrap().unwrap();
        let errors: Vec<String> = validator.iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{rel}: {errors:#?}");
    }
}

#[test]
fn schema_rejects_bad_values() {
    let validator = validator();
    for bad in [
        json!({"mcpServers": {"a": {"lifecycle": "sometimes"}}}),
        json!({"mcpServers": {"a": {"type": "websocket"}}}),
        json!({"mcpServers": {"a": {"args": "x"}}}),
        json!({"imports": ["emacs"]}),
        json!({"settings": {"toolPrefix": "long"}}),
    ] {
        assert!(!validator.is_valid(&bad), "accepted {bad}");
    }
    assert!(
        validator
            .is_valid(&json!({"mcpServers": {"a": {"lifecycle": {"mode": "eager"}, "auth": false, "oauth": false}}}))
    );
}
