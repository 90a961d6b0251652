//! The JSON Schema of a pimcp config file, generated from the serde types in `raw.rs` (doc comments become
//! descriptions), and the field lists the loader checks keys against, taken from the same types' serde derives (a
//! test holds them equal to the schema's), so the schema and the loader cannot disagree.

use serde_json::Value;

use crate::raw::{RawFile, RawOAuth, RawServer, RawSettings};

/// The JSON Schema (draft 2020-12) of a whole config file; printed by `pimcp-run config schema`.
pub fn json_schema() -> Value {
    let mut schema = schemars::schema_for!(RawFile).to_value();
    if let Value::Object(map) = &mut schema {
        map.insert(
            "$id".into(),
            Value::String("https://pimcp.invalid/schemas/mcp.schema.json".into()),
        );
    }
    schema
}

/// The JSON names of a struct's fields, as its serde `Deserialize` derive lists them (the list serde itself matches
/// keys against, so it cannot disagree with the loader; `schemars` derives the schema's `properties` from the same
/// attributes, which `fields_agree_with_the_schema` checks). Asking serde costs a few hundred instructions; generating
/// the schema took ~930,000 on every start.
fn serde_fields<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    struct Capture;
    #[derive(Debug)]
    struct Fields(&'static [&'static str]);
    impl std::fmt::Display for Fields {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("field list captured")
        }
    }
    impl std::error::Error for Fields {}
    impl serde::de::Error for Fields {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Fields(&[])
        }
    }
    impl<'de> serde::Deserializer<'de> for Capture {
        type Error = Fields;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
            Err(Fields(&[]))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Fields> {
            Err(Fields(fields))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    match T::deserialize(Capture) {
        Err(Fields(fields)) => fields,
        Ok(_) => &[],
    }
}

/// Field names of a server entry (as written in JSON).
pub(crate) fn server_fields() -> &'static [&'static str] {
    serde_fields::<RawServer>()
}

/// Keys of `settings`.
pub(crate) fn settings_fields() -> &'static [&'static str] {
    serde_fields::<RawSettings>()
}

/// Keys of a server's `oauth` object.
pub(crate) fn oauth_fields() -> &'static [&'static str] {
    serde_fields::<RawOAuth>()
}

/// What a field must look like, for "expected …" messages (never derived from the value).
pub(crate) fn expected(field: &str) -> &'static str {
    match field {
        "type" => "one of `stdio`, `http`, `streamable-http`, `sse`",
        "command" | "cwd" | "url" | "socket" | "bearerToken" | "bearerTokenEnv" | "description" | "exposure"
        | "oauthDir" => "a string",
        "args" | "includeTools" | "excludeTools" | "allowedTools" | "agentPluginPaths" => "an array of strings",
        "env" | "headers" | "authorizationParams" => "an object whose values are strings",
        "inheritEnv"
        | "enabled"
        | "disabled"
        | "exposeResources"
        | "debug"
        | "freezeDirectTools"
        | "disableProxyTool"
        | "autoAuth"
        | "sampling"
        | "samplingAutoApprove"
        | "elicitation"
        | "warmCache" => "`true` or `false`",
        "trace" => "`true`, `false` or (in settings) `{ \"enabled\", \"file\", \"maxBytes\" }`",
        "auth" => "`\"oauth\"`, `\"bearer\"` or `false`",
        "oauth" => "`false` or an object of OAuth settings",
        "lifecycle" => "one of `lazy`, `eager`, `keep-alive`, `lazy-keep-alive` (or `{ \"mode\": … }`)",
        "idleTimeout" | "requestTimeoutMs" | "timeout" | "startupTimeout" | "toolTimeout" | "healthInterval"
        | "discoveryTimeout" | "maxMessageBytes" => "a number",
        "protocolVersion" | "protocol" => "one of `auto`, `legacy`, `2026-07-28`",
        "directTools" => "`true`, `false` or an array of tool names",
        "toolPrefix" => "one of `server`, `short`, `none`, `mcp`",
        "toolExposure" => "a string or an object whose values are strings",
        "searchKeywords" => "an object whose values are arrays of strings",
        "approveTools" => "`true`, `false` or an array of globs",
        "outputGuard" => "`true`, `false` or `{ \"maxBytes\", \"maxLines\" }` with non-negative integers",
        "scriptMode" => "`true`, `false` or `{ \"timeoutMs\", \"memoryMb\", \"maxCalls\" }` with numbers",
        "hostConfigDiscovery" => "one of `off`, `prompt`, `on`",
        "tokenStore" => "one of `keyring`, `file`",
        "grantType" => "one of `authorization_code`, `client_credentials`, `identity_assertion`",
        "callbackPort" => "a port number (1-65535)",
        "clientId"
        | "clientSecret"
        | "clientMetadataUrl"
        | "scope"
        | "redirectUri"
        | "clientName"
        | "clientUri"
        | "logoUri"
        | "authServerMetadataUrl"
        | "clientPrivateKey" => "a string",
        "identityAssertion" => {
            "an object with `idpIssuer`, `idpTokenEndpoint`, `idpClientId`, `idpClientSecret`, `idToken` (strings)"
        }
        "skipIssuerMetadataValidation" | "dpop" => "`true` or `false`",
        _ => "a different type (see `pimcp-run config schema`)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_has_an_expectation() {
        for field in server_fields().iter().chain(settings_fields()).chain(oauth_fields()) {
            assert!(
                !expected(field).starts_with("a different type"),
                "no expectation text for `{field}`"
            );
        }
    }

    #[test]
    fn schema_lists_all_spec_server_fields() {
        let spec = [
            "type",
            "command",
            "args",
            "env",
            "cwd",
            "inheritEnv",
            "url",
            "headers",
            "socket",
            "auth",
            "bearerToken",
            "bearerTokenEnv",
            "oauth",
            "lifecycle",
            "idleTimeout",
            "requestTimeoutMs",
            "timeout",
            "startupTimeout",
            "toolTimeout",
            "protocolVersion",
            "protocol",
            "enabled",
            "disabled",
            "description",
            "exposeResources",
            "directTools",
            "toolPrefix",
            "includeTools",
            "excludeTools",
            "allowedTools",
            "toolExposure",
            "exposure",
            "searchKeywords",
            "approveTools",
            "debug",
            "trace",
        ];
        let fields = server_fields();
        for name in spec {
            assert!(fields.contains(&name), "schema misses `{name}`");
        }
        assert_eq!(
            fields.len(),
            spec.len(),
            "schema has fields the SPEC list does not: {fields:?}"
        );
        let settings = [
            "toolPrefix",
            "idleTimeout",
            "requestTimeoutMs",
            "directTools",
            "freezeDirectTools",
            "disableProxyTool",
            "approveTools",
            "outputGuard",
            "trace",
            "hostConfigDiscovery",
            "agentPluginPaths",
            "tokenStore",
            "oauthDir",
            "autoAuth",
            "sampling",
            "samplingAutoApprove",
            "elicitation",
            "warmCache",
            "healthInterval",
            "discoveryTimeout",
            "maxMessageBytes",
            "scriptMode",
        ];
        for name in settings {
            assert!(settings_fields().contains(&name), "schema misses setting `{name}`");
        }
        let oauth = [
            "grantType",
            "clientId",
            "clientSecret",
            "clientMetadataUrl",
            "scope",
            "redirectUri",
            "callbackPort",
            "authorizationParams",
            "clientName",
            "clientUri",
            "logoUri",
            "authServerMetadataUrl",
            "skipIssuerMetadataValidation",
            "dpop",
            "clientPrivateKey",
            "identityAssertion",
        ];
        assert_eq!(oauth_fields().len(), oauth.len());
    }

    fn property_names(schema: Value) -> Vec<String> {
        schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn fields_agree_with_the_schema() {
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        let names = |f: &[&str]| sorted(f.iter().map(|s| s.to_string()).collect());
        let server = sorted(property_names(schemars::schema_for!(RawServer).to_value()));
        let settings = sorted(property_names(schemars::schema_for!(RawSettings).to_value()));
        let oauth = sorted(property_names(schemars::schema_for!(RawOAuth).to_value()));
        assert!(!server.is_empty() && !settings.is_empty() && !oauth.is_empty());
        assert_eq!(names(server_fields()), server);
        assert_eq!(names(settings_fields()), settings);
        assert_eq!(names(oauth_fields()), oauth);
    }

    #[test]
    fn schema_is_a_whole_file_schema() {
        let schema = json_schema();
        let props = schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        for key in ["mcpServers", "mcp-servers", "settings", "imports"] {
            assert!(props.iter().any(|p| p == key), "{props:?}");
        }
        let text = schema.to_string();
        assert!(text.contains("keep-alive") && text.contains("2026-07-28") && text.contains("claude-desktop"));
    }
}
