//! Host string dialects translated to pimcp's interpolation syntax, so an imported string means what it
//! meant to the host: host placeholders become pimcp ones, and text the host took literally is escaped.

use super::ImportEnv;

/// How a host treats `$`, `${…}` and `{…}` in its config strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    /// No interpolation at all (Claude Desktop, Codex): every `$` is literal.
    Literal,
    /// `${VAR}` and `${VAR:-default}` expand, a bare `$` is literal (Claude Code).
    DollarBrace,
    /// VS Code-style variables (Cursor, VS Code, Windsurf): `${env:VAR}`, `${userHome}`, `${workspaceFolder}`,
    /// `${workspaceFolderBasename}`, `${pathSeparator}`, `${/}`; `${input:ID}`, `${file:…}`, `${command:…}` … have no
    /// pimcp equivalent.
    Editor,
    /// OpenCode: `{env:VAR}` expands (pimcp understands it too), `{file:…}` has no equivalent, `$` is literal.
    OpenCode,
}

/// A placeholder pimcp cannot expand: the caller leaves the entry out and notes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unresolved {
    /// How the placeholder is shown in the note: the VS Code input id, otherwise only its kind (`${file:…}`).
    pub shown: String,
}

impl Unresolved {
    pub(super) fn message(&self, what: &str) -> String {
        if self.shown.starts_with("`${input:") {
            format!(
                "uses the input {}, which pimcp cannot prompt for; {what} not imported",
                self.shown
            )
        } else {
            format!(
                "uses the placeholder {}, which pimcp cannot expand; {what} not imported",
                self.shown
            )
        }
    }
}

/// Translates a string of `dialect` to pimcp syntax.
pub(super) fn convert(dialect: Dialect, s: &str, env: &ImportEnv) -> Result<String, Unresolved> {
    match dialect {
        Dialect::Literal => Ok(escape_dollars(s)),
        Dialect::DollarBrace => Ok(dollar_brace(s)),
        Dialect::Editor => editor(s, env),
        Dialect::OpenCode => opencode(s),
    }
}

/// [`convert`] for values pimcp may treat as `!command` secrets (env, header, bearer token, client secret): a leading
/// `!` the host took literally becomes `!!`.
pub(super) fn convert_secretable(dialect: Dialect, s: &str, env: &ImportEnv) -> Result<String, Unresolved> {
    let mut out = convert(dialect, s, env)?;
    if out.starts_with('!') {
        out.insert(0, '!');
    }
    Ok(out)
}

/// Escapes literal text (a value read from a dotenv file, a substituted path) for pimcp.
pub(super) fn escape_literal_secretable(s: &str) -> String {
    let mut out = escape_dollars(s);
    if out.starts_with('!') {
        out.insert(0, '!');
    }
    out
}

pub(super) fn escape_dollars(s: &str) -> String {
    s.replace('$', "$$")
}

fn dollar_brace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if after.starts_with('{')
            && let Some(end) = after.find('}')
        {
            out.push('$');
            out.push_str(&after[..=end]);
            rest = &after[end + 1..];
            continue;
        }
        out.push_str("$$");
        rest = after;
    }
    out.push_str(rest);
    out
}

fn editor(s: &str, env: &ImportEnv) -> Result<String, Unresolved> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if after.starts_with('{')
            && let Some(end) = after.find('}')
        {
            out.push_str(&editor_variable(&after[1..end], env)?);
            rest = &after[end + 1..];
            continue;
        }
        out.push_str("$$");
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// The pimcp text for the inside of one `${…}` of the editor dialect.
fn editor_variable(inner: &str, env: &ImportEnv) -> Result<String, Unresolved> {
    match inner {
        "userHome" => return Ok(escape_dollars(&env.home.to_string_lossy())),
        "workspaceFolder" => return Ok(escape_dollars(&env.project_dir.to_string_lossy())),
        "workspaceFolderBasename" => {
            let base = env
                .project_dir
                .file_name()
                .map(|b| b.to_string_lossy().into_owned())
                .unwrap_or_default();
            return Ok(escape_dollars(&base));
        }
        "pathSeparator" | "/" => return Ok(env.os.path_separator().to_string()),
        _ => {}
    }
    if let Some(name) = inner.strip_prefix("env:") {
        if is_var_name(name) {
            return Ok(format!("${{{name}}}"));
        }
        return Err(Unresolved {
            shown: "`${env:…}`".to_string(),
        });
    }
    if let Some(id) = inner.strip_prefix("input:") {
        return Err(Unresolved {
            shown: format!("`${{input:{id}}}`"),
        });
    }
    let name = inner.split_once(":-").map_or(inner, |(name, _)| name);
    if is_var_name(name) {
        // A plain `${VAR}` / `${VAR:-default}`: pimcp expands it from the environment.
        return Ok(format!("${{{inner}}}"));
    }
    match inner.split_once(':') {
        Some((kind, _)) => Err(Unresolved {
            shown: format!("`${{{kind}:…}}`"),
        }),
        None => Err(Unresolved {
            shown: "`${…}`".to_string(),
        }),
    }
}

fn opencode(s: &str) -> Result<String, Unresolved> {
    if let Some(i) = s.find("{file:")
        && s[i..].contains('}')
    {
        return Err(Unresolved {
            shown: "`{file:…}`".to_string(),
        });
    }
    Ok(escape_dollars(s))
}

/// Resolves a path of the editor dialect (Cursor's and VS Code's `envFile`) to a real path: `${userHome}`,
/// `${workspaceFolder}`, `${workspaceFolderBasename}`, `${pathSeparator}` and `${/}` are substituted, a relative path
/// is taken relative to the project directory. `None` when any other placeholder is used.
pub(super) fn resolve_editor_path(s: &str, env: &ImportEnv) -> Option<std::path::PathBuf> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let end = after.find('}')?;
        match &after[..end] {
            "userHome" => out.push_str(&env.home.to_string_lossy()),
            "workspaceFolder" => out.push_str(&env.project_dir.to_string_lossy()),
            "workspaceFolderBasename" => out.push_str(
                &env.project_dir
                    .file_name()
                    .map(|b| b.to_string_lossy())
                    .unwrap_or_default(),
            ),
            "pathSeparator" | "/" => out.push_str(env.os.path_separator()),
            _ => return None,
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    let path = std::path::PathBuf::from(out);
    Some(if path.is_absolute() {
        path
    } else {
        env.project_dir.join(path)
    })
}

pub(super) fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::PathBuf;

    use super::*;
    use crate::imports::Os;

    fn env(os: Os) -> ImportEnv {
        ImportEnv {
            home: PathBuf::from("/home/ada"),
            project_dir: PathBuf::from("/src/app$1"),
            os,
            appdata: None,
            xdg_config_home: None,
            codex_home: None,
        }
    }

    #[test]
    fn literal_escapes_every_dollar() {
        assert_eq!(
            convert(Dialect::Literal, "a$b ${C} $$", &env(Os::Linux)).unwrap(),
            "a$$b $${C} $$$$"
        );
    }

    #[test]
    fn dollar_brace_keeps_braced_variables_and_escapes_bare_dollars() {
        let out = convert(
            Dialect::DollarBrace,
            "${API_URL:-https://x}/v1?k=$KEY&p=${P}$",
            &env(Os::Linux),
        )
        .unwrap();
        assert_eq!(out, "${API_URL:-https://x}/v1?k=$$KEY&p=${P}$$");
    }

    #[test]
    fn editor_variables_become_pimcp_text() {
        let e = env(Os::Linux);
        let out = convert(
            Dialect::Editor,
            "${userHome}${/}x ${workspaceFolder}/${workspaceFolderBasename} ${env:TOKEN} ${PLAIN} ${D:-d} $5",
            &e,
        )
        .unwrap();
        assert_eq!(out, "/home/ada/x /src/app$$1/app$$1 ${TOKEN} ${PLAIN} ${D:-d} $$5");
        assert_eq!(
            convert(Dialect::Editor, "a${pathSeparator}b", &env(Os::Windows)).unwrap(),
            "a\\b"
        );
    }

    #[test]
    fn editor_placeholders_without_equivalent_are_reported_without_values() {
        let e = env(Os::Linux);
        let input = convert(Dialect::Editor, "Bearer ${input:api-key}", &e).unwrap_err();
        assert_eq!(input.shown, "`${input:api-key}`");
        assert!(input.message("the header was").contains("cannot prompt"));
        let file = convert(Dialect::Editor, "${file:/home/ada/.secret}", &e).unwrap_err();
        assert_eq!(file.shown, "`${file:…}`");
        assert!(!file.message("x").contains(".secret"));
        assert_eq!(
            convert(Dialect::Editor, "${command:pick}", &e).unwrap_err().shown,
            "`${command:…}`"
        );
        assert_eq!(
            convert(Dialect::Editor, "${env:1BAD}", &e).unwrap_err().shown,
            "`${env:…}`"
        );
    }

    #[test]
    fn opencode_keeps_env_escapes_dollars_and_rejects_file() {
        let e = env(Os::Linux);
        assert_eq!(
            convert(Dialect::OpenCode, "Bearer {env:TOKEN} $X", &e).unwrap(),
            "Bearer {env:TOKEN} $$X"
        );
        assert_eq!(
            convert(Dialect::OpenCode, "{file:~/.key}", &e).unwrap_err().shown,
            "`{file:…}`"
        );
    }

    #[test]
    fn secretable_values_escape_a_leading_bang() {
        let e = env(Os::Linux);
        assert_eq!(
            convert_secretable(Dialect::Literal, "!notacommand", &e).unwrap(),
            "!!notacommand"
        );
        assert_eq!(convert_secretable(Dialect::Literal, "a!b", &e).unwrap(), "a!b");
        assert_eq!(escape_literal_secretable("!x$y"), "!!x$$y");
    }
}
