//! Variable interpolation: `${VAR}`, `${VAR:-default}`, `${env:VAR}`, `$env:VAR`, `{env:VAR}`, and in
//! `headers`/`env` values also bare `$VAR`; `$$` is a literal `$` and `$!` a literal `!`. A missing variable without a
//! default is collected (by name) for the caller to report; the text is never part of a message.

use crate::paths::EnvMap;

/// Which syntax a field accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// `${VAR}`, `${VAR:-default}`, `$env:VAR`, `{env:VAR}`.
    Braced,
    /// [`Syntax::Braced`] plus bare `$VAR` (values of `headers` and `env`).
    WithBare,
}

/// Expands variables in `text` from `env`. Names of missing variables (without a default) are appended to `missing`;
/// they expand to nothing.
pub(crate) fn expand(text: &str, syntax: Syntax, env: &EnvMap, missing: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut lookup = |name: &str, out: &mut String| match env.get(name) {
        Some(value) => out.push_str(value),
        None => {
            if !missing.iter().any(|m| m == name) {
                missing.push(name.to_string());
            }
        }
    };
    while let Some(pos) = rest.find(['$', '{']) {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
            continue;
        }
        if let Some(after) = tail.strip_prefix("$!") {
            out.push('!');
            rest = after;
            continue;
        }
        if let Some(body) = tail.strip_prefix("${") {
            if let Some(end) = body.find('}') {
                let inner = &body[..end];
                let inner = inner.strip_prefix("env:").unwrap_or(inner);
                let (name, default) = match inner.find(":-") {
                    Some(i) => (&inner[..i], Some(&inner[i + 2..])),
                    None => (inner, None),
                };
                if is_name(name) {
                    match (env.get(name), default) {
                        (Some(""), Some(default)) => out.push_str(default),
                        (None, Some(default)) => out.push_str(default),
                        _ => lookup(name, &mut out),
                    }
                    rest = &body[end + 1..];
                    continue;
                }
            }
        } else if let Some(body) = tail.strip_prefix("$env:") {
            let len = name_len(body);
            if len > 0 {
                lookup(&body[..len], &mut out);
                rest = &body[len..];
                continue;
            }
        } else if let Some(body) = tail.strip_prefix("{env:") {
            if let Some(end) = body.find('}')
                && is_name(&body[..end])
            {
                lookup(&body[..end], &mut out);
                rest = &body[end + 1..];
                continue;
            }
        } else if syntax == Syntax::WithBare
            && let Some(body) = tail.strip_prefix('$')
        {
            let len = name_len(body);
            if len > 0 {
                lookup(&body[..len], &mut out);
                rest = &body[len..];
                continue;
            }
        }
        // Not a reference: keep the character literally.
        let ch_len = tail.chars().next().map_or(1, char::len_utf8);
        out.push_str(&tail[..ch_len]);
        rest = &tail[ch_len..];
    }
    out.push_str(rest);
    out
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_name(s: &str) -> bool {
    !s.is_empty() && name_len(s) == s.len()
}

/// Length of the variable name at the start of `s` (0 if none).
fn name_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    match bytes.first() {
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {}
        _ => return 0,
    }
    bytes
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count()
}

/// Formats a list of missing variables for a message: "${A}" or "${A} and ${B}".
pub(crate) fn describe_missing(field: &str, missing: &[String]) -> String {
    let names: Vec<String> = missing.iter().map(|m| format!("${{{m}}}")).collect();
    match names.as_slice() {
        [one] => format!("`{field}` uses {one}, which is not set"),
        _ => {
            let (last, first) = names
                .split_last()
                .map_or((String::new(), &[][..]), |(l, f)| (l.clone(), f));
            format!("`{field}` uses {} and {last}, which are not set", first.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> EnvMap {
        [("HOME_DIR", "/h"), ("TOKEN", "t0k"), ("EMPTY", "")]
            .into_iter()
            .collect()
    }

    fn run(text: &str, syntax: Syntax) -> (String, Vec<String>) {
        let mut missing = Vec::new();
        let out = expand(text, syntax, &env(), &mut missing);
        (out, missing)
    }

    #[test]
    fn table() {
        let cases: &[(&str, Syntax, &str, &[&str])] = &[
            ("${TOKEN}", Syntax::Braced, "t0k", &[]),
            ("a-${TOKEN}-b", Syntax::Braced, "a-t0k-b", &[]),
            ("${env:TOKEN}", Syntax::Braced, "t0k", &[]),
            ("$env:TOKEN/x", Syntax::Braced, "t0k/x", &[]),
            ("{env:TOKEN}", Syntax::Braced, "t0k", &[]),
            ("${NOPE:-dflt}", Syntax::Braced, "dflt", &[]),
            ("${EMPTY:-dflt}", Syntax::Braced, "dflt", &[]),
            ("${NOPE:-}", Syntax::Braced, "", &[]),
            ("${EMPTY}", Syntax::Braced, "", &[]),
            ("${NOPE}", Syntax::Braced, "", &["NOPE"]),
            ("${NOPE}${NOPE}$env:OTHER", Syntax::Braced, "", &["NOPE", "OTHER"]),
            ("$TOKEN", Syntax::Braced, "$TOKEN", &[]),
            ("Bearer $TOKEN", Syntax::WithBare, "Bearer t0k", &[]),
            ("$NOPE", Syntax::WithBare, "", &["NOPE"]),
            ("$$TOKEN", Syntax::WithBare, "$TOKEN", &[]),
            ("$${TOKEN}", Syntax::Braced, "${TOKEN}", &[]),
            ("$!x", Syntax::Braced, "!x", &[]),
            ("price $5", Syntax::WithBare, "price $5", &[]),
            ("${not a var}", Syntax::Braced, "${not a var}", &[]),
            ("{json}", Syntax::Braced, "{json}", &[]),
            ("${unclosed", Syntax::Braced, "${unclosed", &[]),
            ("ünï ${TOKEN} ✓", Syntax::Braced, "ünï t0k ✓", &[]),
            ("trailing $", Syntax::WithBare, "trailing $", &[]),
        ];
        for (input, syntax, want, want_missing) in cases {
            let (out, missing) = run(input, *syntax);
            assert_eq!(&out, want, "input {input:?}");
            assert_eq!(
                missing,
                want_missing.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn missing_message_names_field_and_variables() {
        assert_eq!(
            describe_missing("env.API_KEY", &["GITHUB_TOKEN".into()]),
            "`env.API_KEY` uses ${GITHUB_TOKEN}, which is not set"
        );
        assert_eq!(
            describe_missing("url", &["A".into(), "B".into(), "C".into()]),
            "`url` uses ${A}, ${B} and ${C}, which are not set"
        );
    }
}
