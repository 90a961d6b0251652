//! Catalog search: an inverted index built once per catalog change, ranked lexical search, regex search, name lookup
//! (`find`) and typo suggestions (`suggest`).
//!
//! # Ranking
//! The ranked mode keeps pi-mcp-adapter's scoring (fields, weights and bonuses), computed from an index instead of a
//! linear rescan:
//! - Text is normalized: a space at camelCase boundaries (`getHTTPStatus` → `get http status`), every run of
//!   non-letters/digits (`_ - . / :` and the rest) becomes one space, lowercase. Words become tokens; a word holding
//!   CJK/Thai-like characters (scripts written without spaces) is split into character bigrams (a lone character stays
//!   whole), other letters stay whole words. Any UTF-8 input is safe.
//! - Fields and weights `w`: name (prefixed) 12, original name 10, server 8, description 5, keywords 5.
//! - Per field, per query token: exact token 4w; else a stem match (a field token starts with the query token, or the
//!   query token starts with a field token of at least 4 characters) 2w; else, for words of scripts written without
//!   spaces (tokens of character pairs), a substring of a field token 1w. A word of a spaced script never matches
//!   inside another word (`bmi` is not in `submissions`). A single ASCII character only matches exactly (pi-mcp-adapter
//!   let it stem-match every token starting with it).
//! - Each query token's points are scaled by how rare the token is among the tools: BM25's inverse document
//!   frequency relative to the query's mean, kept within ¼–4× (a token no tool has as a word, matched only through
//!   another form, a synonym or a typo, at most 1×). In "read the pdf file" `pdf` outweighs `file`; a one-word query
//!   scores as without it. Term frequency and field length are not counted: tool texts are short, and a word said
//!   twice in a description is rarely more relevant.
//! - Per field, the whole normalized query as a phrase: equal to the field 14w, a prefix 9w, contained 6w
//!   (keywords: the best single keyword).
//! - Query tokens leave out English filler words (`a`, `the`, `to`, …; [`STOPWORDS`]) unless the query has nothing
//!   else.
//! - A query token also matches, at the stem level, the other forms of its word (`entity`/`entities`), its action
//!   synonyms ([`SYNONYMS`]: `add` finds `create` and `sum`, `remove` finds `delete`, …), and, when the vocabulary has
//!   no token it equals or starts, the tokens one typo away (two from 8 characters on; optimal string alignment, the
//!   first letter kept): exact matches always outscore them.
//! - Gate: a tool is a hit when a phrase matched, or its one query token matched, or at least half of several did
//!   (`echo message` finds an `echo` tool whose text never says "message"; pi-mcp-adapter asked for every token of
//!   one or two, and 60 % of more, so a model's natural two-word query often found nothing). When no tool passes,
//!   the tools that matched any token are returned as [`MatchKind::Weak`], and the text says so: a whole request
//!   ("Can you add 17 and 25 for me?") still gets its best candidates.
//! - Bonuses: all tokens matched +25 (else `round(10 · coverage)`), the first query token is a name token +8, a whole
//!   field equals the query +20. Example: `echo` against `everything_echo` (description "Echoes back the input
//!   string") scores 408, as in pi-mcp-adapter.
//!
//! Before any score, **exact name matches rank first, then name-prefix matches** (of the prefixed or the original name,
//! case-insensitive, `-` and `_` alike); ties break on the name.
//!
//! # Pagination
//! `limit` is clamped to `1..=MAX_LIMIT`; an `offset` at or past the total gives an empty page that still reports the
//! total (the texts say so). Negative values are rejected earlier, when the `mcp` parameters are parsed.
//!
//! # Regex
//! `regex: true` compiles the query with the `regex` crate (finite automata, linear time: no catastrophic patterns),
//! case-insensitive, at most [`MAX_REGEX_CHARS`] characters, over name, original name, server, description and each
//! keyword. Hits are ranked by the summed weights of the fields that match (pi-mcp-adapter left them unranked). One
//! multi-line scan over all fields of all tools finds the candidates; each candidate's fields are then checked alone.
//! Patterns whose every piece can only match ASCII, or any one character (`.`), run ASCII-only over bytes, `.`
//! spelled out as one UTF-8-encoded character (same matches, cheaper to compile and to scan: a Unicode class such as
//! `.` makes the Unicode compiler allocate a 320 KB table for the compile), and the last few compiled patterns are
//! kept for repeated queries.

// Hosts read these types through `pimcp`: each public item says what it is.

mod index;
mod rank;
mod regex_search;
mod suggest;
mod tokens;

use std::cmp::Reverse;

use crate::schema::ToolSchema;
use serde_json::Value;

use crate::error::{Error, Result};

use index::IdLists;
use rank::ScratchSlot;
use suggest::Fingerprint;
use tokens::name_key;

/// English filler words a model puts in a search ("a", "the", "to", …): left out of a query's tokens (unless the
/// query has nothing else), so they neither match every description nor count against the words that matter.
const STOPWORDS: [&str; 24] = [
    "a", "an", "and", "any", "as", "at", "by", "for", "from", "i", "in", "into", "is", "it", "me", "my", "of", "on",
    "or", "please", "some", "the", "to", "with",
];

/// Default page size of a search.
pub const DEFAULT_LIMIT: usize = 12;
/// Largest page size; larger requests are clamped.
pub const MAX_LIMIT: usize = 100;
/// Longest regex query, in characters.
pub const MAX_REGEX_CHARS: usize = 256;
/// Query tokens beyond this many are ignored.
pub const MAX_QUERY_TOKENS: usize = 16;
/// Default number of suggestions for an unknown name.
pub const DEFAULT_SUGGESTIONS: usize = 5;
/// Compiled-program size limit for regex queries.
const REGEX_SIZE_LIMIT_BYTES: usize = 1 << 20;
/// Longest token kept by the tokenizer (longer words are cut on a character boundary).
const MAX_TOKEN_CHARS: usize = 64;
/// Field tokens at least this long may be a stem of a longer query token.
const MIN_STEM_CHARS: usize = 4;

/// Action synonyms: a query word matches the other words of its groups at the stem level.
const SYNONYMS: [&[&str]; 14] = [
    &["create", "add", "new", "make", "insert"],
    &["delete", "remove", "erase", "drop", "forget"],
    &["find", "search", "lookup", "query", "locate"],
    &["get", "fetch", "read", "retrieve", "load", "open", "view"],
    &["list", "show", "enumerate"],
    &["send", "post", "publish"],
    &["update", "edit", "modify", "change", "replace", "fix"],
    &["sum", "add", "total", "compute", "calculate"],
    &["move", "rename"],
    &["directory", "folder", "dir"],
    &["image", "picture", "photo"],
    &["compress", "zip", "gzip"],
    &["write", "save", "store"],
    &["link", "relate", "relation", "connect"],
];

const FIELD_NAME: usize = 0;
const FIELD_ORIGINAL: usize = 1;
const FIELD_SERVER: usize = 2;
const FIELD_DESCRIPTION: usize = 3;
const FIELD_KEYWORDS: usize = 4;
const N_FIELDS: usize = 5;
const WEIGHTS: [u32; N_FIELDS] = [12, 10, 8, 5, 5];

const LEVEL_EXACT: u8 = 4;
const LEVEL_STEM: u8 = 2;
const LEVEL_SUBSTRING: u8 = 1;

/// One searchable tool, as the catalog knows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolDoc {
    /// Exposed (prefixed) name, e.g. `github_create_issue`.
    pub name: String,
    /// The server's own name for the tool, e.g. `create_issue`.
    pub original_name: String,
    /// Configured server name.
    pub server: String,
    /// The tool's description as the server gave it.
    pub description: String,
    /// The server's `searchKeywords` for this tool.
    pub keywords: Vec<String>,
    /// The catalog's schema handle: a schema from the metadata cache is parsed only when a hit or a describe shows
    /// it, never when the index is built.
    pub input_schema: ToolSchema,
    /// `approveTools` gates calls of this tool: the host is asked first. Not searched; shown in results.
    pub needs_approval: bool,
}

impl ToolDoc {
    /// A tool without `searchKeywords` or approval; set those fields after when needed.
    pub fn new(
        name: impl Into<String>,
        original_name: impl Into<String>,
        server: impl Into<String>,
        description: impl Into<String>,
        input_schema: ToolSchema,
    ) -> ToolDoc {
        ToolDoc {
            name: name.into(),
            original_name: original_name.into(),
            server: server.into(),
            description: description.into(),
            keywords: Vec::new(),
            input_schema,
            needs_approval: false,
        }
    }

    /// The input schema as a JSON value; `{}` ("no parameters") when a cached schema is unusable, which `describe`
    /// reports on its own.
    pub fn input_schema_value(&self) -> Value {
        Value::Object(self.input_schema.get().map(|s| (**s).clone()).unwrap_or_default())
    }

    /// The input schema's [`shape_within`](crate::shape_within) `max_chars`, read from the shared schema (no
    /// copy); `{}` when a cached schema is unusable.
    pub fn input_shape_within(&self, max_chars: usize) -> String {
        self.input_schema.get().map_or_else(
            |_| "{}".to_string(),
            |s| crate::shapes::object_shape_within(s, max_chars),
        )
    }
}

/// A [`ToolDoc`] schema from a JSON value: an object as it is, anything else as "no parameters".
pub fn doc_schema(schema: Value) -> ToolSchema {
    match schema {
        Value::Object(map) => ToolSchema::from(map),
        _ => ToolSchema::from(serde_json::Map::new()),
    }
}

/// A search request; build with [`SearchQuery::new`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    /// Words (ranked), a pattern (`regex`), or empty with `server` (that server's tools).
    pub text: String,
    /// Restrict to one server.
    pub server: Option<String>,
    /// Treat `text` as a regular expression.
    pub regex: bool,
    /// Page size (clamped to `1..=MAX_LIMIT`).
    pub limit: usize,
    /// Where the page starts among all matches.
    pub offset: usize,
}

impl SearchQuery {
    /// A ranked query with the default limit and offset 0.
    pub fn new(text: impl Into<String>) -> Self {
        SearchQuery {
            text: text.into(),
            server: None,
            regex: false,
            limit: DEFAULT_LIMIT,
            offset: 0,
        }
    }

    /// Only tools of `server`.
    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// `text` as a regular expression (`true`) or words.
    pub fn with_regex(mut self, regex: bool) -> Self {
        self.regex = regex;
        self
    }

    /// Another page size.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Another page start.
    pub fn with_offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
}

/// Why a tool is in the results; ordered from strongest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum MatchKind {
    /// The query is the tool's name (prefixed or original).
    ExactName,
    /// The query starts the tool's name.
    NamePrefix,
    /// Token ranking.
    Ranked,
    /// Token ranking that passed no gate: only a few of the query's words matched (shown when nothing better did,
    /// so a model still gets candidates and knows to rephrase).
    Weak,
    /// The regex matched a field.
    Regex,
    /// Empty query with `server`: the server's catalog in name order.
    Listed,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit<'a> {
    /// The tool.
    pub doc: &'a ToolDoc,
    /// Its ranking score (higher first; comparable within one query only).
    pub score: u32,
    /// Why it matched.
    pub kind: MatchKind,
}

/// One page of results.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage<'a> {
    /// This page's hits, best first.
    pub hits: Vec<SearchHit<'a>>,
    /// All matches, on every page.
    pub total: usize,
    /// The offset this page starts at (as requested).
    pub offset: usize,
    /// The page size used after clamping.
    pub limit: usize,
    /// Where the next page starts, when there is one.
    pub next_offset: Option<usize>,
}

/// The outcome of looking a name up with [`SearchIndex::find`].
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<'a> {
    /// The one tool the name means.
    Found(&'a ToolDoc),
    /// The name matches tools on several servers at the same precedence; pass `server`.
    Ambiguous(Vec<&'a ToolDoc>),
    /// No tool has that name.
    NotFound,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    /// Bit `f` set when the token occurs in field `f`.
    fields: u8,
}

/// Per-document data prepared at build time.
#[derive(Debug, Clone)]
struct Prepared {
    /// Normalized name, original name, server and description.
    norm: [String; 4],
    keywords: Vec<String>,
    name_chars: Vec<char>,
    original_chars: Vec<char>,
    name_print: Fingerprint,
    original_print: Fingerprint,
    /// Position in name order (the tie-break).
    rank: u32,
}

/// One of [`Prepared`]'s name keys, as characters.
type CharsOf = fn(&Prepared) -> &[char];

impl Prepared {
    fn name_chars(&self) -> &[char] {
        &self.name_chars
    }

    fn original_chars(&self) -> &[char] {
        &self.original_chars
    }
}

/// The search index over one catalog snapshot. Immutable; rebuild it when the catalog changes.
#[derive(Debug, Clone, Default)]
pub struct SearchIndex {
    docs: Vec<ToolDoc>,
    prepared: Vec<Prepared>,
    /// Sorted, distinct tokens.
    vocab: Vec<Box<str>>,
    /// Token `t`'s documents (in document order) are `postings[posting_starts[t]..posting_starts[t + 1]]`.
    posting_starts: Vec<u32>,
    postings: Vec<Posting>,
    /// Character trigram → ids of tokens containing it.
    trigrams: IdLists<[char; 3]>,
    /// Non-ASCII character → ids of tokens containing it.
    wide_chars: IdLists<char>,
    /// Document ids sorted by prefixed name, by original name, by name key and by original name key (ties by id):
    /// exact lookups and the name-prefix tiers are binary searches, with no copy of the names.
    by_name: Vec<u32>,
    by_original: Vec<u32>,
    by_name_key: Vec<u32>,
    by_original_key: Vec<u32>,
    /// Server name keys, longest first, for stripping a prefix off an unknown name.
    server_keys: Vec<String>,
    /// Every document's raw fields, one per line, documents one after another: the regex pre-scan haystack.
    haystack: String,
    /// Where each document starts in `haystack`.
    doc_starts: Vec<usize>,
    /// The haystack holds a character that Unicode case folding maps onto an ASCII letter (`K` Kelvin sign, `ſ`):
    /// the ASCII fast path of regex search would miss it, so it is off for this index.
    fold_traps: bool,
    /// One slot per document for a ranked query's tallies, kept between queries and cleared slot by slot.
    scratch: ScratchSlot,
}

impl SearchIndex {
    /// All documents, in the order given to [`SearchIndex::build`].
    pub fn docs(&self) -> &[ToolDoc] {
        &self.docs
    }

    /// The number of tools indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Distinct tokens in the index (a size figure for benchmarks and logs).
    pub fn n_tokens(&self) -> usize {
        self.vocab.len()
    }

    /// Runs a query. Errors: empty query without a server, a query without letters or digits, a regex that is too
    /// long or invalid.
    pub fn search(&self, query: &SearchQuery) -> Result<SearchPage<'_>> {
        let limit = query.limit.clamp(1, MAX_LIMIT);
        let text = query.text.trim();
        let server = query.server.as_deref();
        let scored = if text.is_empty() {
            let Some(server) = server else {
                return Err(Error::EmptyQuery);
            };
            self.list_server(server)
        } else if query.regex {
            self.regex_scored(text, server)?
        } else {
            let scored = self.ranked(text, server, false);
            if scored.is_none() {
                return Err(Error::NoSearchableWords {
                    query: text.to_string(),
                });
            }
            scored.unwrap_or_default()
        };
        Ok(self.page(scored, limit, query.offset))
    }

    /// Looks a name up for `describe` and calls: exact prefixed name, then exact original name, then the same two
    /// case-insensitively with `-` and `_` alike. The first level with any match decides; several matches there are
    /// ambiguous. `server` restricts the candidates.
    pub fn find(&self, name: &str, server: Option<&str>) -> Lookup<'_> {
        let key: Vec<char> = name_key(name).chars().collect();
        let levels: [&[u32]; 4] = [
            equal_range(&self.by_name, |id| self.docs[id].name.as_str(), name),
            equal_range(&self.by_original, |id| self.docs[id].original_name.as_str(), name),
            equal_range(
                &self.by_name_key,
                |id| self.prepared[id].name_chars.as_slice(),
                key.as_slice(),
            ),
            equal_range(
                &self.by_original_key,
                |id| self.prepared[id].original_chars.as_slice(),
                key.as_slice(),
            ),
        ];
        for ids in levels {
            let mut found: Vec<&ToolDoc> = ids
                .iter()
                .map(|&id| &self.docs[id as usize])
                .filter(|d| server.is_none_or(|s| d.server == s))
                .collect();
            match found.len() {
                0 => continue,
                1 => return found.pop().map_or(Lookup::NotFound, Lookup::Found),
                _ => {
                    found.sort_by(|a, b| a.server.cmp(&b.server));
                    return Lookup::Ambiguous(found);
                }
            }
        }
        Lookup::NotFound
    }

    fn list_server(&self, server: &str) -> Vec<Scored> {
        self.docs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.server == server)
            .map(|(i, _)| Scored {
                tier: 0,
                score: 0,
                rank: self.prepared[i].rank,
                doc: to_u32(i),
                kind: MatchKind::Listed,
            })
            .collect()
    }

    fn page(&self, mut scored: Vec<Scored>, limit: usize, offset: usize) -> SearchPage<'_> {
        let total = scored.len();
        let end = offset.saturating_add(limit).min(total);
        let hits: Vec<SearchHit<'_>> = if offset >= total {
            Vec::new()
        } else {
            if end < total {
                scored.select_nth_unstable_by_key(end, |s| s.sort_key());
                scored.truncate(end);
            }
            scored.sort_unstable_by_key(|s| s.sort_key());
            scored[offset..]
                .iter()
                .map(|s| SearchHit {
                    doc: &self.docs[s.doc as usize],
                    score: s.score,
                    kind: s.kind,
                })
                .collect()
        };
        let next_offset = (end < total && offset < total).then_some(end);
        SearchPage {
            hits,
            total,
            offset,
            limit,
            next_offset,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Scored {
    tier: u8,
    score: u32,
    rank: u32,
    doc: u32,
    kind: MatchKind,
}

impl Scored {
    fn sort_key(&self) -> (u8, Reverse<u32>, u32) {
        (self.tier, Reverse(self.score), self.rank)
    }
}

/// The ids in `sorted` (ordered by `key_of`) whose key equals `wanted`.
fn equal_range<'a, T: Ord + ?Sized + 'a>(sorted: &'a [u32], key_of: impl Fn(usize) -> &'a T, wanted: &T) -> &'a [u32] {
    let start = sorted.partition_point(|&id| key_of(id as usize) < wanted);
    let len = sorted[start..].partition_point(|&id| key_of(id as usize) <= wanted);
    &sorted[start..start + len]
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
