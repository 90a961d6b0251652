//! Small helpers for human output: paths shortened with `~`, error chains, and one-line JSON values.

use std::path::Path;

use serde_json::Value;

/// `path` with the home directory shown as `~`.
pub(crate) fn path(path: &Path, home: &Path) -> String {
    if !home.as_os_str().is_empty()
        && let Ok(rest) = path.strip_prefix(home)
    {
        return if rest.as_os_str().is_empty() {
            "~".into()
        } else {
            format!("~/{}", rest.display())
        };
    }
    path.display().to_string()
}

/// `err` and its causes, joined with `: ` (a cause already quoted by the message before it is not repeated).
pub(crate) fn error_chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// A JSON value on one line.
pub(crate) fn compact(value: &Value) -> String {
    value.to_string()
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
