//! A small dotenv reader for Cursor's and VS Code's `envFile`: `KEY=value` lines, `export` prefixes, `#` comments,
//! single-quoted (literal) and double-quoted (`\n`, `\t`, `\"`, `\\` escapes) values. No variable expansion, no
//! multi-line values (such lines are skipped and counted).

use std::path::Path;

/// Files above this size are refused.
const MAX_ENV_FILE_BYTES: u64 = 1024 * 1024;

/// Variables of a dotenv file in file order (a repeated key keeps its first position and its last value), and the
/// number of lines that were not `KEY=value`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct DotEnv {
    pub vars: Vec<(String, String)>,
    pub skipped_lines: usize,
}

pub(super) fn read(path: &Path) -> std::io::Result<DotEnv> {
    Ok(parse(&crate::read::read_text_bounded(path, MAX_ENV_FILE_BYTES)?))
}

pub(super) fn parse(text: &str) -> DotEnv {
    let mut out = DotEnv::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map_or(line, str::trim_start);
        let Some((key, raw)) = line.split_once('=') else {
            out.skipped_lines += 1;
            continue;
        };
        let key = key.trim();
        let Some(value) = parse_value(raw.trim_start()) else {
            out.skipped_lines += 1;
            continue;
        };
        if !super::text::is_var_name(key) {
            out.skipped_lines += 1;
            continue;
        }
        match out.vars.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => out.vars.push((key.to_string(), value)),
        }
    }
    out
}

fn parse_value(raw: &str) -> Option<String> {
    if let Some(rest) = raw.strip_prefix('\'') {
        let end = rest.find('\'')?;
        return Some(rest[..end].to_string());
    }
    if let Some(rest) = raw.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Some(value),
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    'r' => value.push('\r'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        }
        return None; // unterminated (a multi-line value)
    }
    // Unquoted: an inline comment starts at a `#` preceded by whitespace.
    let end = raw
        .char_indices()
        .find(|&(i, c)| c == '#' && i > 0 && raw[..i].ends_with(char::is_whitespace));
    Some(end.map_or(raw, |(i, _)| &raw[..i]).trim_end().to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn parses_common_forms() {
        let text = "# comment\n\nA=1\nexport B = two words # trailing\nC='lit $X # kept'\nD=\"line\\nnext \\\"q\\\"\"\n\
                    E=\nF=a#b\nA=3\nnot a pair\n1BAD=x\nG=\"unterminated\n";
        let env = parse(text);
        let vars: Vec<(&str, &str)> = env.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            vars,
            [
                ("A", "3"),
                ("B", "two words"),
                ("C", "lit $X # kept"),
                ("D", "line\nnext \"q\""),
                ("E", ""),
                ("F", "a#b"),
            ]
        );
        assert_eq!(env.skipped_lines, 3);
    }

    #[test]
    fn read_refuses_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(&dir.path().join("nope.env")).is_err());
    }
}
