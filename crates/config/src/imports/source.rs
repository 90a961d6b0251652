//! Reading host files and parsing them (JSONC through the crate's parser, TOML through `toml`) into JSON values whose
//! objects keep the file's key order, with syntax errors positioned by 1-based line and column.

use std::io::ErrorKind;
use std::path::Path;

use serde_json::{Map, Value};

use super::ImportError;

/// Host files above this size are refused (no host writes MCP configs anywhere near it).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The file's text; `None` when it does not exist.
pub(super) fn read(path: &Path) -> Result<Option<String>, ImportError> {
    let read_err = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };
    match crate::read::read_text_bounded(path, MAX_FILE_BYTES) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(None),
        Err(err) => Err(read_err(err)),
    }
}

/// JSON with comments and trailing commas; `None` for an empty or comment-only file.
pub(super) fn parse_json(path: &Path, text: &str) -> Result<Option<Value>, ImportError> {
    crate::parse_jsonc(text).map_err(|err| ImportError::Syntax {
        path: path.to_path_buf(),
        line: err.line,
        column: err.column,
        message: err.message,
    })
}

/// TOML as a JSON value, tables in file order; `None` for a file without any key.
pub(super) fn parse_toml(path: &Path, text: &str) -> Result<Option<Value>, ImportError> {
    let syntax = |err: toml::de::Error| {
        let (line, column) = err.span().map_or((1, 1), |span| line_column(text, span.start));
        ImportError::Syntax {
            path: path.to_path_buf(),
            line,
            column,
            message: err.message().trim_end().to_string(),
        }
    };
    // The spanned parse gives positions and the file's key order (the table map itself is sorted).
    let spanned = toml::de::DeTable::parse(text).map_err(syntax)?;
    let mut value: Value = toml::from_str(text).map_err(syntax)?;
    reorder(&mut value, spanned.get_ref());
    Ok(match &value {
        Value::Object(map) if map.is_empty() => None,
        _ => Some(value),
    })
}

/// Rewrites every object of `value` in the order its keys first appear in the TOML text.
fn reorder(value: &mut Value, table: &toml::de::DeTable<'_>) {
    let Value::Object(map) = value else {
        return;
    };
    let mut keys: Vec<(usize, &str, &toml::de::DeValue<'_>)> = table
        .iter()
        .map(|(key, val)| (key.span().start, key.get_ref().as_ref(), val.get_ref()))
        .collect();
    keys.sort_by_key(|(start, _, _)| *start);
    let mut ordered = Map::with_capacity(map.len());
    for (_, key, de_value) in keys {
        if let Some(mut val) = map.remove(key) {
            reorder_value(&mut val, de_value);
            ordered.insert(key.to_string(), val);
        }
    }
    ordered.append(map); // anything the spans did not cover keeps its place at the end
    *map = ordered;
}

fn reorder_value(value: &mut Value, de_value: &toml::de::DeValue<'_>) {
    match (value, de_value) {
        (value @ Value::Object(_), toml::de::DeValue::Table(table)) => reorder(value, table),
        (Value::Array(items), toml::de::DeValue::Array(de_items)) => {
            for (item, de_item) in items.iter_mut().zip(de_items.iter()) {
                reorder_value(item, de_item.get_ref());
            }
        }
        _ => {}
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn toml_tables_keep_file_order() {
        let text = "[mcp_servers.zeta]\ncommand = \"z\"\n[mcp_servers.alpha]\nurl = \"u\"\n[mcp_servers.mid]\ncommand = \"m\"\n\
                    [mcp_servers.mid.env]\nZ = \"1\"\nA = \"2\"\n";
        let value = parse_toml(Path::new("c.toml"), text).unwrap().unwrap();
        let servers = value["mcp_servers"].as_object().unwrap();
        assert_eq!(servers.keys().collect::<Vec<_>>(), ["zeta", "alpha", "mid"]);
        let env = servers["mid"]["env"].as_object().unwrap();
        assert_eq!(env.keys().collect::<Vec<_>>(), ["Z", "A"]);
    }

    #[test]
    fn toml_syntax_error_has_line_and_column() {
        let err = parse_toml(
            Path::new("c.toml"),
            "[mcp_servers.a]\ncommand = \"x\"\nargs = [\"a\",\n",
        )
        .unwrap_err();
        let ImportError::Syntax { line, column, .. } = err else {
            panic!("not a syntax error: {err}")
        };
        assert!(line >= 3, "line {line}");
        assert!(column >= 1);
    }

    #[test]
    fn empty_toml_is_none() {
        assert!(parse_toml(Path::new("c.toml"), "# nothing\n").unwrap().is_none());
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("ab\ncé\nx", 7), (3, 1));
        assert_eq!(line_column("ab\ncéd", 6), (2, 3));
    }
}
