//! Catalog search: an inverted index built once per catalog change, ranked lexical search, regex search, name lookup
//! (`find`) and typo suggestions (`suggest`).
//!
//! # Ranking
//! The ranked mode keeps the incumbent's formula (pi-mcp-adapter `search-ranking.ts`), computed from an index instead
//! of a linear rescan:
//! - Text is normalized: a space at camelCase boundaries (`getHTTPStatus` → `get http status`), every run of
//!   non-letters/digits (`_ - . / :` and the rest) becomes one space, lowercase. Words become tokens; a word holding
//!   CJK/Thai-like characters (scripts written without spaces) is split into character bigrams (a lone character stays
//!   whole), other letters stay whole words. Any UTF-8 input is safe.
//! - Fields and weights `w`: name (prefixed) 12, original name 10, server 8, description 5, keywords 5.
//! - Per field, per query token: exact token 4w; else a stem match (a field token starts with the query token, or the
//!   query token starts with a field token of at least 4 characters) 2w; else a substring of a field token 1w
//!   (query tokens of 3+ characters, or 1–2 characters outside ASCII). A single ASCII character only matches exactly
//!   (the incumbent let it stem-match every token starting with it).
//! - Per field, the whole normalized query as a phrase: equal to the field 14w, a prefix 9w, contained 6w
//!   (keywords: the best single keyword).
//! - Query tokens leave out English filler words (`a`, `the`, `to`, …; [`STOPWORDS`]) unless the query has nothing
//!   else.
//! - Gate: a tool is a hit when a phrase matched, or its one query token matched, or at least half of several did
//!   (`echo message` finds an `echo` tool whose text never says "message"; the incumbent asked for every token of
//!   one or two, and 60 % of more, so a model's natural two-word query often found nothing).
//! - Bonuses: all tokens matched +25 (else `round(10 · coverage)`), the first query token is a name token +8, a whole
//!   field equals the query +20. Example: `echo` against `everything_echo` (description "Echoes back the input
//!   string") scores 408, as in the incumbent.
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
//! keyword. Hits are ranked by the summed weights of the fields that match (the incumbent left them unranked). One
//! multi-line scan over all fields of all tools finds the candidates; each candidate's fields are then checked alone.
//! Patterns whose every piece can only match ASCII, or any one character (`.`), run ASCII-only over bytes, `.`
//! spelled out as one UTF-8-encoded character (same matches, cheaper to compile and to scan: a Unicode class such as
//! `.` makes the Unicode compiler allocate a 320 KB table for the compile), and the last few compiled patterns are
//! kept for repeated queries.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Mutex;

use pimcp_actors::ToolSchema;
use serde_json::Value;

use crate::error::{Error, Result};

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
pub struct ToolDoc {
    /// Exposed (prefixed) name, e.g. `github_create_issue`.
    pub name: String,
    /// The server's own name for the tool, e.g. `create_issue`.
    pub original_name: String,
    /// Configured server name.
    pub server: String,
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
    pub text: String,
    /// Restrict to one server.
    pub server: Option<String>,
    /// Treat `text` as a regular expression.
    pub regex: bool,
    pub limit: usize,
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

    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    pub fn with_regex(mut self, regex: bool) -> Self {
        self.regex = regex;
        self
    }

    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

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
    /// The regex matched a field.
    Regex,
    /// Empty query with `server`: the server's catalog in name order.
    Listed,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit<'a> {
    pub doc: &'a ToolDoc,
    pub score: u32,
    pub kind: MatchKind,
}

/// One page of results.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage<'a> {
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
    Found(&'a ToolDoc),
    /// The name matches tools on several servers at the same precedence; pass `server`.
    Ambiguous(Vec<&'a ToolDoc>),
    NotFound,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    /// Bit `f` set when the token occurs in field `f`.
    fields: u8,
}

/// 32 buckets of character counts; half the L1 distance of two fingerprints bounds their edit distance from below.
#[derive(Debug, Clone)]
struct Fingerprint([u8; 32]);

impl Fingerprint {
    fn of(chars: &[char]) -> Self {
        let mut buckets = [0u8; 32];
        for &c in chars {
            let slot = &mut buckets[(c as usize) % 32];
            *slot = slot.saturating_add(1);
        }
        Fingerprint(buckets)
    }

    fn lower_bound(&self, other: &Fingerprint) -> usize {
        let l1: usize = self
            .0
            .iter()
            .zip(other.0.iter())
            .map(|(a, b)| usize::from(a.abs_diff(*b)))
            .sum();
        l1.div_ceil(2)
    }
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
    /// Builds the index. Cost is linear in the catalog's text; do it once per catalog change.
    pub fn build(docs: Vec<ToolDoc>) -> SearchIndex {
        let mut order: Vec<usize> = (0..docs.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&docs[a], &docs[b]);
            x.name
                .to_lowercase()
                .cmp(&y.name.to_lowercase())
                .then_with(|| x.name.cmp(&y.name))
                .then(x.server.cmp(&y.server))
        });
        let mut ranks = vec![0u32; docs.len()];
        for (rank, &doc) in order.iter().enumerate() {
            ranks[doc] = to_u32(rank);
        }

        let mut token_docs: HashMap<String, Vec<Posting>> = HashMap::new();
        let mut prepared = Vec::with_capacity(docs.len());
        let mut index = SearchIndex::default();
        for (doc_idx, doc) in docs.iter().enumerate() {
            let doc_id = to_u32(doc_idx);
            let norm = [
                normalize(&doc.name),
                normalize(&doc.original_name),
                normalize(&doc.server),
                normalize(&doc.description),
            ];
            let keywords: Vec<String> = doc
                .keywords
                .iter()
                .map(|k| normalize(k))
                .filter(|k| !k.is_empty())
                .collect();
            for (field, text) in norm.iter().enumerate() {
                for token in tokenize(text) {
                    add_posting(&mut token_docs, token, doc_id, field);
                }
            }
            for keyword in &keywords {
                for token in tokenize(keyword) {
                    add_posting(&mut token_docs, token, doc_id, FIELD_KEYWORDS);
                }
            }
            let name_chars: Vec<char> = name_key(&doc.name).chars().collect();
            let original_chars: Vec<char> = name_key(&doc.original_name).chars().collect();
            index.doc_starts.push(index.haystack.len());
            for field in [&doc.name, &doc.original_name, &doc.server, &doc.description]
                .into_iter()
                .chain(&doc.keywords)
            {
                index.fold_traps |= field.contains(ASCII_FOLD_TRAPS);
                index.haystack.push_str(field);
                index.haystack.push('\n');
            }
            let server_key = self::name_key(&doc.server);
            if !server_key.is_empty() && !index.server_keys.contains(&server_key) {
                index.server_keys.push(server_key);
            }
            prepared.push(Prepared {
                norm,
                keywords,
                name_print: Fingerprint::of(&name_chars),
                original_print: Fingerprint::of(&original_chars),
                name_chars,
                original_chars,
                rank: ranks[doc_idx],
            });
        }
        index.server_keys.sort_by_key(|k| Reverse(k.len()));
        let ids: Vec<u32> = (0..to_u32(docs.len())).collect();
        // Stable sorts of ascending ids: ties stay in id order.
        index.by_name = ids.clone();
        index
            .by_name
            .sort_by(|&a, &b| docs[a as usize].name.cmp(&docs[b as usize].name));
        index.by_original = ids.clone();
        index
            .by_original
            .sort_by(|&a, &b| docs[a as usize].original_name.cmp(&docs[b as usize].original_name));
        index.by_name_key = ids.clone();
        index
            .by_name_key
            .sort_by(|&a, &b| prepared[a as usize].name_chars.cmp(&prepared[b as usize].name_chars));
        index.by_original_key = ids;
        index.by_original_key.sort_by(|&a, &b| {
            prepared[a as usize]
                .original_chars
                .cmp(&prepared[b as usize].original_chars)
        });

        let mut vocab: Vec<(String, Vec<Posting>)> = token_docs.into_iter().collect();
        vocab.sort_by(|a, b| a.0.cmp(&b.0));
        let mut gram_pairs: Vec<([char; 3], u32)> = Vec::new();
        let mut wide_pairs: Vec<(char, u32)> = Vec::new();
        index.vocab.reserve_exact(vocab.len());
        index.posting_starts.reserve_exact(vocab.len() + 1);
        index.postings.reserve_exact(vocab.iter().map(|(_, p)| p.len()).sum());
        for (token_id, (token, postings)) in vocab.into_iter().enumerate() {
            let token_id = to_u32(token_id);
            let chars: Vec<char> = token.chars().collect();
            gram_pairs.extend(chars.windows(3).map(|w| ([w[0], w[1], w[2]], token_id)));
            wide_pairs.extend(chars.iter().filter(|c| !c.is_ascii()).map(|&c| (c, token_id)));
            index.vocab.push(token.into_boxed_str());
            index.posting_starts.push(to_u32(index.postings.len()));
            index.postings.extend(postings);
        }
        index.posting_starts.push(to_u32(index.postings.len()));
        index.trigrams = IdLists::from_pairs(gram_pairs);
        index.wide_chars = IdLists::from_pairs(wide_pairs);
        index.docs = docs;
        index.prepared = prepared;
        index
    }

    /// All documents, in the order given to [`SearchIndex::build`].
    pub fn docs(&self) -> &[ToolDoc] {
        &self.docs
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

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

    /// Up to `k` tools for an unknown `name`: first names within a small edit distance (optimal string alignment,
    /// so transpositions count once; the allowance grows with length: 1 up to 4 characters, 2 up to 9, else 3),
    /// compared with and without a leading server prefix; then the token ranking of the name's words.
    pub fn suggest(&self, name: &str, k: usize) -> Vec<&ToolDoc> {
        if k == 0 || self.docs.is_empty() {
            return Vec::new();
        }
        let key = name_key(name);
        let stripped = self.strip_server_prefix(&key);
        let full: Vec<char> = key.chars().collect();
        let full_print = Fingerprint::of(&full);
        let part: Option<(Vec<char>, Fingerprint)> = stripped.map(|s| {
            let chars: Vec<char> = s.chars().collect();
            let print = Fingerprint::of(&chars);
            (chars, print)
        });
        let mut scratch = OsaScratch::default();
        let mut edits: Vec<(usize, u32, u32)> = Vec::new();
        for (doc_idx, prep) in self.prepared.iter().enumerate() {
            let mut best: Option<usize> = None;
            let budget = max_typos(full.len());
            for (target, print) in [
                (&prep.name_chars, &prep.name_print),
                (&prep.original_chars, &prep.original_print),
            ] {
                if full_print.lower_bound(print) <= budget
                    && let Some(d) = scratch.distance(&full, target, budget)
                {
                    best = Some(best.map_or(d, |b| b.min(d)));
                }
            }
            if let Some((chars, print)) = &part {
                let budget = max_typos(chars.len());
                if print.lower_bound(&prep.original_print) <= budget
                    && let Some(d) = scratch.distance(chars, &prep.original_chars, budget)
                {
                    best = Some(best.map_or(d, |b| b.min(d)));
                }
            }
            if let Some(d) = best {
                edits.push((d, prep.rank, to_u32(doc_idx)));
            }
        }
        edits.sort_unstable();
        let mut out: Vec<u32> = edits.iter().map(|e| e.2).take(k).collect();
        if out.len() < k {
            let words = stripped.unwrap_or(&key);
            if let Some(mut ranked) = self.ranked(words, None, true) {
                ranked.sort_unstable_by_key(|s| s.sort_key());
                for s in ranked {
                    if out.len() >= k {
                        break;
                    }
                    if !out.contains(&s.doc) {
                        out.push(s.doc);
                    }
                }
            }
        }
        out.into_iter().map(|id| &self.docs[id as usize]).collect()
    }

    /// The part of `key` after the longest server name followed by `_`, when there is one.
    fn strip_server_prefix<'k>(&self, key: &'k str) -> Option<&'k str> {
        self.server_keys.iter().find_map(|server| {
            key.strip_prefix(server.as_str())
                .and_then(|rest| rest.strip_prefix('_'))
                .filter(|rest| !rest.is_empty())
        })
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

    fn regex_scored(&self, pattern: &str, server: Option<&str>) -> Result<Vec<Scored>> {
        let len = pattern.chars().count();
        if len > MAX_REGEX_CHARS {
            return Err(Error::QueryTooLong {
                len,
                max: MAX_REGEX_CHARS,
            });
        }
        let ascii = !self.fold_traps && ascii_fast_path_is_exact(pattern);
        let build = |multi_line: bool| compiled(pattern, multi_line, ascii);
        // Candidates come from a multi-line scan; a field is then checked with the same multi-line regex unless it
        // holds a newline and the pattern has `^`/`$`, where only the strict (whole-field) regex is right. The
        // strict one is compiled only when needed: compiling a case-insensitive Unicode regex is the main cost on
        // small catalogs.
        let (lines, candidates): (Pattern, Vec<usize>) = if prescan_is_exact_superset(pattern) {
            let lines = build(true)?;
            let candidates = self.prescan(&lines);
            (lines, candidates)
        } else {
            (build(false)?, (0..self.docs.len()).collect())
        };
        let anchored = prescan_is_exact_superset(pattern) && (pattern.contains('^') || pattern.contains('$'));
        let strict: std::cell::OnceCell<Option<Pattern>> = std::cell::OnceCell::new();
        let is_match = |field: &str| {
            if anchored && field.contains('\n') {
                strict
                    .get_or_init(|| build(false).ok())
                    .as_ref()
                    .is_some_and(|r| r.is_match(field))
            } else {
                lines.is_match(field)
            }
        };
        let mut out = Vec::new();
        for i in candidates {
            let doc = &self.docs[i];
            if server.is_some_and(|s| doc.server != s) {
                continue;
            }
            let fields = [&doc.name, &doc.original_name, &doc.server, &doc.description];
            let mut score: u32 = fields
                .iter()
                .zip(WEIGHTS)
                .filter(|(f, _)| is_match(f))
                .map(|(_, w)| w)
                .sum();
            if doc.keywords.iter().any(|k| is_match(k)) {
                score += WEIGHTS[FIELD_KEYWORDS];
            }
            if score > 0 {
                out.push(Scored {
                    tier: 0,
                    score,
                    rank: self.prepared[i].rank,
                    doc: to_u32(i),
                    kind: MatchKind::Regex,
                });
            }
        }
        Ok(out)
    }

    /// Documents where the multi-line pattern matches somewhere in their lines: one scan of the whole catalog,
    /// jumping to the next document after each hit. Every per-field match is also a match here (fields are whole
    /// lines, and `^`/`$`/`\b` see the same boundaries), so this is a superset the per-field check narrows down.
    fn prescan(&self, multi_line: &Pattern) -> Vec<usize> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < self.haystack.len() {
            let Some(start) = multi_line.find_at(&self.haystack, pos) else {
                break;
            };
            let doc = self.doc_starts.partition_point(|&s| s <= start).saturating_sub(1);
            out.push(doc);
            pos = self.doc_starts.get(doc + 1).copied().unwrap_or(self.haystack.len());
        }
        out
    }

    /// Token ranking; `None` when the text has no tokens. `lenient` (suggestions) skips the name tiers.
    fn ranked(&self, text: &str, server: Option<&str>, lenient: bool) -> Option<Vec<Scored>> {
        let q = normalize(text);
        let mut tokens: Vec<String> = Vec::new();
        for t in tokenize(&q) {
            if !tokens.contains(&t) {
                tokens.push(t);
            }
        }
        // Filler words of a request ("echo a message", "read the file") do not count, unless they are all it has.
        if tokens.iter().any(|t| !STOPWORDS.contains(&t.as_str())) {
            tokens.retain(|t| !STOPWORDS.contains(&t.as_str()));
        }
        tokens.truncate(MAX_QUERY_TOKENS);
        if tokens.is_empty() {
            return None;
        }
        // A concurrent query (the slot is taken) gets arrays of its own; a poisoned slot is never reused.
        let mut held = self.scratch.0.try_lock().ok();
        let mut own = Scratch::default();
        let scratch = held.as_deref_mut().unwrap_or(&mut own);
        scratch.fit(self.docs.len());
        let Scratch { accs, levels } = scratch;
        let mut candidates: Vec<u32> = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        let mut matches: Vec<(u32, u8)> = Vec::new();
        for (ti, token) in tokens.iter().enumerate() {
            matches.clear();
            self.token_matches(token, &mut matches);
            for &(token_id, level) in &matches {
                let (start, end) = (
                    self.posting_starts[token_id as usize],
                    self.posting_starts[token_id as usize + 1],
                );
                for p in &self.postings[start as usize..end as usize] {
                    let lv = &mut levels[p.doc as usize];
                    if *lv == [0; N_FIELDS] {
                        touched.push(p.doc);
                    }
                    for (f, slot) in lv.iter_mut().enumerate() {
                        if p.fields & (1 << f) != 0 && *slot < level {
                            *slot = level;
                        }
                    }
                }
            }
            for doc in touched.drain(..) {
                let lv = std::mem::take(&mut levels[doc as usize]);
                let acc = &mut accs[doc as usize];
                if !acc.touched {
                    acc.touched = true;
                    candidates.push(doc);
                }
                for (f, &level) in lv.iter().enumerate() {
                    if level > 0 {
                        acc.score += WEIGHTS[f] * u32::from(level);
                        acc.field_tokens[f] |= 1 << ti;
                    }
                }
                acc.matched |= 1 << ti;
                if ti == 0 && lv[FIELD_NAME] == LEVEL_EXACT {
                    acc.first_in_name = true;
                }
            }
        }

        // Name tiers: exact and prefix matches of the prefixed or original name.
        let key: Vec<char> = name_key(text).chars().collect();
        let mut tiers: HashMap<u32, u8> = HashMap::new();
        if !lenient && !key.is_empty() {
            let sorted: [(&[u32], CharsOf); 2] = [
                (&self.by_name_key, Prepared::name_chars),
                (&self.by_original_key, Prepared::original_chars),
            ];
            for (ids, chars_of) in sorted {
                let chars_of = |id: u32| chars_of(&self.prepared[id as usize]);
                let start = ids.partition_point(|&id| chars_of(id) < key.as_slice());
                for &doc in ids[start..].iter().take_while(|&&id| chars_of(id).starts_with(&key)) {
                    let tier = if chars_of(doc) == key.as_slice() { 0 } else { 1 };
                    let slot = tiers.entry(doc).or_insert(tier);
                    *slot = (*slot).min(tier);
                    let acc = &mut accs[doc as usize];
                    if !acc.touched {
                        acc.touched = true;
                        candidates.push(doc);
                    }
                }
            }
        }

        let n = tokens.len();
        let all: u16 = if n >= 16 { u16::MAX } else { (1u16 << n) - 1 };
        let mut out = Vec::new();
        for &doc in &candidates {
            let d = doc as usize;
            if server.is_some_and(|s| self.docs[d].server != s) {
                continue;
            }
            let acc = &accs[d];
            let prep = &self.prepared[d];
            let mut score = acc.score;
            let mut phrase = false;
            let mut whole_field = false;
            for f in [FIELD_NAME, FIELD_ORIGINAL, FIELD_SERVER, FIELD_DESCRIPTION] {
                if acc.field_tokens[f] == all {
                    let p = phrase_points(&prep.norm[f], &q);
                    if p > 0 {
                        phrase = true;
                        whole_field |= p == 14;
                        score += p * WEIGHTS[f];
                    }
                }
            }
            if acc.field_tokens[FIELD_KEYWORDS] == all {
                let p = prep.keywords.iter().map(|k| phrase_points(k, &q)).max().unwrap_or(0);
                if p > 0 {
                    phrase = true;
                    whole_field |= p == 14;
                    score += p * WEIGHTS[FIELD_KEYWORDS];
                }
            }
            let covered = acc.matched.count_ones() as usize;
            let tier = tiers.get(&doc).copied();
            let passes = phrase || if n == 1 { covered == 1 } else { covered * 2 >= n };
            if !passes && tier.is_none() {
                continue;
            }
            score += if covered == n {
                25
            } else {
                to_u32((covered * 10 + n / 2) / n)
            };
            if acc.first_in_name {
                score += 8;
            }
            if whole_field {
                score += 20;
            }
            let (tier, kind) = match tier {
                Some(0) => (0, MatchKind::ExactName),
                Some(_) => (1, MatchKind::NamePrefix),
                None => (2, MatchKind::Ranked),
            };
            out.push(Scored {
                tier,
                score,
                rank: prep.rank,
                doc,
                kind,
            });
        }
        for doc in candidates {
            accs[doc as usize] = Acc::default();
        }
        Some(out)
    }

    /// Tokens of the vocabulary matching `token`, with their level.
    fn token_matches(&self, token: &str, out: &mut Vec<(u32, u8)>) {
        let start = self.vocab.partition_point(|v| &**v < token);
        // A single ASCII letter or digit would stem-match a large part of the vocabulary: exact only.
        let expand = token.len() > 1;
        for (offset, v) in self.vocab[start..].iter().enumerate() {
            let exact = v.len() == token.len();
            if !v.starts_with(token) || !(exact || expand) {
                break;
            }
            out.push((to_u32(start + offset), if exact { LEVEL_EXACT } else { LEVEL_STEM }));
        }
        // The query token starts with a field token of at least MIN_STEM_CHARS characters.
        let bounds: Vec<usize> = token.char_indices().map(|(i, _)| i).skip(MIN_STEM_CHARS).collect();
        for end in bounds {
            if let Ok(id) = self.vocab.binary_search_by(|v| (**v).cmp(&token[..end])) {
                out.push((to_u32(id), LEVEL_STEM));
            }
        }
        // Substrings of field tokens.
        let chars: Vec<char> = token.chars().collect();
        let pool: Option<&[u32]> = if chars.len() >= 3 {
            chars
                .windows(3)
                .map(|w| self.trigrams.get(&[w[0], w[1], w[2]]))
                .try_fold(None::<&[u32]>, |best, list| {
                    let list = list?;
                    Some(Some(match best {
                        Some(b) if b.len() <= list.len() => b,
                        _ => list,
                    }))
                })
                .flatten()
        } else {
            chars
                .iter()
                .find(|c| !c.is_ascii())
                .and_then(|c| self.wide_chars.get(c))
        };
        for &id in pool.into_iter().flatten() {
            let v = &self.vocab[id as usize];
            if !v.starts_with(token) && v.contains(token) {
                out.push((id, LEVEL_SUBSTRING));
            }
        }
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

/// A ranked query's per-document arrays. Between queries every slot is back at its default: `levels` are taken as
/// each token's matches are tallied, `accs` reset for the query's candidates at its end. Reusing them saves a query
/// allocating and clearing them (25 bytes a document: at 20,000 tools, most of a query's memory writes).
#[derive(Debug, Default)]
struct Scratch {
    accs: Vec<Acc>,
    levels: Vec<[u8; N_FIELDS]>,
}

impl Scratch {
    fn fit(&mut self, n_docs: usize) {
        self.accs.resize(n_docs, Acc::default());
        self.levels.resize(n_docs, [0; N_FIELDS]);
    }
}

/// The index's [`Scratch`], behind a lock so queries from several threads stay correct; a clone of the index
/// starts with its own empty scratch.
#[derive(Debug, Default)]
struct ScratchSlot(Mutex<Scratch>);

impl Clone for ScratchSlot {
    fn clone(&self) -> ScratchSlot {
        ScratchSlot::default()
    }
}

#[derive(Debug, Clone, Default)]
struct Acc {
    touched: bool,
    score: u32,
    /// Bit `i` set when query token `i` matched any field.
    matched: u16,
    /// Per field, the query tokens that matched it.
    field_tokens: [u16; N_FIELDS],
    first_in_name: bool,
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

/// Id lists keyed by `K` in three flat arrays (sorted keys, offsets, ids) instead of a map of vectors: three
/// allocations whatever the catalog's size, 4 bytes per id, binary search to find a key.
#[derive(Debug, Clone)]
struct IdLists<K> {
    keys: Vec<K>,
    /// Key `i`'s ids are `ids[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    ids: Vec<u32>,
}

impl<K> Default for IdLists<K> {
    fn default() -> Self {
        IdLists {
            keys: Vec::new(),
            starts: vec![0],
            ids: Vec::new(),
        }
    }
}

impl<K: Ord + Copy> IdLists<K> {
    /// From `(key, id)` pairs in any order; a key's ids come out ascending and distinct.
    fn from_pairs(mut pairs: Vec<(K, u32)>) -> Self {
        pairs.sort_unstable();
        pairs.dedup();
        let mut lists = IdLists {
            keys: Vec::new(),
            starts: Vec::new(),
            ids: Vec::with_capacity(pairs.len()),
        };
        for (key, id) in pairs {
            if lists.keys.last() != Some(&key) {
                lists.keys.push(key);
                lists.starts.push(to_u32(lists.ids.len()));
            }
            lists.ids.push(id);
        }
        lists.starts.push(to_u32(lists.ids.len()));
        lists.keys.shrink_to_fit();
        lists.starts.shrink_to_fit();
        lists
    }

    fn get(&self, key: &K) -> Option<&[u32]> {
        let i = self.keys.binary_search(key).ok()?;
        Some(&self.ids[self.starts[i] as usize..self.starts[i + 1] as usize])
    }
}

/// The ids in `sorted` (ordered by `key_of`) whose key equals `wanted`.
fn equal_range<'a, T: Ord + ?Sized + 'a>(sorted: &'a [u32], key_of: impl Fn(usize) -> &'a T, wanted: &T) -> &'a [u32] {
    let start = sorted.partition_point(|&id| key_of(id as usize) < wanted);
    let len = sorted[start..].partition_point(|&id| key_of(id as usize) <= wanted);
    &sorted[start..start + len]
}

fn add_posting(map: &mut HashMap<String, Vec<Posting>>, token: String, doc: u32, field: usize) {
    let list = map.entry(token).or_default();
    match list.last_mut() {
        Some(last) if last.doc == doc => last.fields |= 1 << field,
        _ => list.push(Posting {
            doc,
            fields: 1 << field,
        }),
    }
}

/// Characters outside ASCII that Unicode simple case folding maps onto ASCII letters (KELVIN SIGN → k, LATIN SMALL
/// LETTER LONG S → s). They are the only way a case-insensitive pattern made of ASCII matches non-ASCII text.
const ASCII_FOLD_TRAPS: [char; 2] = ['\u{212A}', '\u{017F}'];

/// Compiled regexes kept for repeated queries (a model pages through results or retries the same pattern).
const REGEX_CACHE_ENTRIES: usize = 32;

/// A compiled regex query: Unicode-aware (the meaning of the pattern), or ASCII-only over bytes when that gives
/// the same matches on this catalog (see [`ascii_fast_path_is_exact`]). The ASCII form compiles in a fraction of
/// the time and keeps literal prefilters that Unicode case folding defeats (`s` also matches `ſ`).
#[derive(Clone, Debug)]
enum Pattern {
    Unicode(regex::Regex),
    Ascii(regex::bytes::Regex),
}

impl Pattern {
    fn is_match(&self, text: &str) -> bool {
        match self {
            Pattern::Unicode(r) => r.is_match(text),
            Pattern::Ascii(r) => r.is_match(text.as_bytes()),
        }
    }

    /// Start of the first match at or after `pos`.
    fn find_at(&self, text: &str, pos: usize) -> Option<usize> {
        match self {
            Pattern::Unicode(r) => r.find_at(text, pos).map(|m| m.start()),
            Pattern::Ascii(r) => r.find_at(text.as_bytes(), pos).map(|m| m.start()),
        }
    }
}

/// `pattern` compiled case-insensitively (from a small process-wide cache).
fn compiled(pattern: &str, multi_line: bool, ascii: bool) -> Result<Pattern> {
    type Cache = std::sync::Mutex<Vec<(String, bool, bool, Pattern)>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    {
        let mut entries = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = entries
            .iter()
            .position(|(p, m, a, _)| p == pattern && *m == multi_line && *a == ascii)
        {
            let entry = entries.remove(i);
            let found = entry.3.clone();
            entries.push(entry);
            return Ok(found);
        }
    }
    let invalid = |e: regex::Error| Error::InvalidRegex {
        pattern: pattern.to_string(),
        reason: regex_reason(&e),
    };
    let ascii_form = if ascii { ascii_form(pattern) } else { None };
    let built = if let Some(ascii_form) = ascii_form {
        regex::bytes::RegexBuilder::new(&ascii_form)
            .unicode(false)
            .case_insensitive(true)
            .multi_line(multi_line)
            .size_limit(REGEX_SIZE_LIMIT_BYTES)
            .dfa_size_limit(REGEX_SIZE_LIMIT_BYTES)
            .build()
            .map(Pattern::Ascii)
            .map_err(invalid)?
    } else {
        regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .multi_line(multi_line)
            .size_limit(REGEX_SIZE_LIMIT_BYTES)
            .dfa_size_limit(REGEX_SIZE_LIMIT_BYTES)
            .build()
            .map(Pattern::Unicode)
            .map_err(invalid)?
    };
    let mut entries = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if entries.len() >= REGEX_CACHE_ENTRIES {
        entries.remove(0);
    }
    entries.push((pattern.to_owned(), multi_line, ascii, built.clone()));
    Ok(built)
}

/// What `.` matches (any character but `\n`) as UTF-8 bytes. Exact on valid UTF-8 (every `&str`): at a character
/// boundary the lead byte's range picks the one branch whose length is that character's, so a match starts and ends
/// on character boundaries as the Unicode `.` does.
const UTF8_DOT: &str =
    r"(?:[\x00-\x09\x0B-\x7F]|[\xC0-\xDF][\x80-\xBF]|[\xE0-\xEF][\x80-\xBF]{2}|[\xF0-\xF7][\x80-\xBF]{3})";

/// Whether matching `pattern` ASCII-only (bytes, ASCII case folding) finds exactly what the Unicode regex finds, on
/// text without [`ASCII_FOLD_TRAPS`]: see [`ascii_form`].
fn ascii_fast_path_is_exact(pattern: &str) -> bool {
    ascii_form(pattern).is_some()
}

/// `pattern` for the ASCII-only bytes regex, when that regex finds exactly what the Unicode regex finds on text
/// without [`ASCII_FOLD_TRAPS`]: every piece of the pattern can only match ASCII (ASCII literals, escaped
/// punctuation, non-negated classes, POSIX classes, groups, alternation, repetition and `^`/`$`), except `.`, which
/// is spelled out as one UTF-8-encoded character ([`UTF8_DOT`]). Perl classes (`\w`, `\d`, `\s`, `\b`), other
/// escapes, negated classes, nested classes, inline flags and non-ASCII text keep the Unicode regex (`None`).
fn ascii_form(pattern: &str) -> Option<String> {
    if !pattern.is_ascii() || pattern.contains("(?") || pattern.contains("[^") {
        return None;
    }
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len());
    let mut in_class = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\\' => match bytes.get(i + 1) {
                Some(&c) if c.is_ascii_punctuation() => {
                    out.push('\\');
                    out.push(char::from(c));
                    i += 1;
                }
                _ => return None,
            },
            // A POSIX class (`[:alpha:]`, ASCII in both modes) inside a class is copied whole; another nested
            // class is left to the Unicode regex.
            b'[' if in_class => {
                let rest = pattern.get(i..)?;
                let end = rest.strip_prefix("[:")?.find(":]")? + 4;
                out.push_str(rest.get(..end)?);
                i += end - 1;
            }
            b'[' => {
                in_class = true;
                out.push('[');
                // A `]` right after the opening bracket is a literal.
                if bytes.get(i + 1) == Some(&b']') {
                    out.push(']');
                    i += 1;
                }
            }
            b']' if in_class => {
                in_class = false;
                out.push(']');
            }
            b'.' if !in_class => out.push_str(UTF8_DOT),
            _ => out.push(char::from(b)),
        }
        i += 1;
    }
    (!in_class).then_some(out)
}

/// Whether the multi-line pre-scan finds every document the per-field match would: not when the pattern uses
/// whole-text anchors (`\A`, `\z`) or inline flags (`(?s)`, `(?-m)`, …) that could change line semantics.
fn prescan_is_exact_superset(pattern: &str) -> bool {
    !(pattern.contains("\\A") || pattern.contains("\\z") || pattern.contains("(?"))
}

fn phrase_points(value: &str, q: &str) -> u32 {
    if value == q {
        14
    } else if value.starts_with(q) {
        9
    } else if value.contains(q) {
        6
    } else {
        0
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn regex_reason(e: &regex::Error) -> String {
    match e {
        regex::Error::CompiledTooBig(limit) => format!("compiled pattern exceeds {limit} bytes"),
        other => other
            .to_string()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .trim_start_matches("error: ")
            .to_string(),
    }
}

/// Allowed edit distance for a name of `len` characters.
fn max_typos(len: usize) -> usize {
    match len {
        0..=4 => 1,
        5..=9 => 2,
        _ => 3,
    }
}

/// Comparison key of a tool name: trimmed, lowercase, `-` read as `_`.
pub(crate) fn name_key(name: &str) -> String {
    name.trim()
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == '-' { '_' } else { c })
        .collect()
}

/// Reusable rows for [`OsaScratch::distance`].
#[derive(Debug, Default)]
struct OsaScratch {
    prev2: Vec<usize>,
    prev: Vec<usize>,
    cur: Vec<usize>,
}

impl OsaScratch {
    /// Optimal-string-alignment distance of `a` and `b` when it is at most `max`, computed in a band of width
    /// `2·max + 1` with an early exit.
    fn distance(&mut self, a: &[char], b: &[char], max: usize) -> Option<usize> {
        let (n, m) = (a.len(), b.len());
        if n.abs_diff(m) > max {
            return None;
        }
        if n == 0 || m == 0 {
            return Some(n.max(m));
        }
        let inf = max + 1;
        for row in [&mut self.prev2, &mut self.prev, &mut self.cur] {
            row.clear();
            row.resize(m + 1, inf);
        }
        for (j, slot) in self.prev.iter_mut().enumerate().take(max.min(m) + 1) {
            *slot = j;
        }
        for i in 1..=n {
            self.cur.fill(inf);
            self.cur[0] = if i <= max { i } else { inf };
            let mut row_min = self.cur[0];
            let lo = i.saturating_sub(max).max(1);
            let hi = (i + max).min(m);
            for j in lo..=hi {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (self.prev[j] + 1).min(self.cur[j - 1] + 1).min(self.prev[j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(self.prev2[j - 2] + 1);
                }
                let v = v.min(inf);
                self.cur[j] = v;
                row_min = row_min.min(v);
            }
            if row_min > max {
                return None;
            }
            std::mem::swap(&mut self.prev2, &mut self.prev);
            std::mem::swap(&mut self.prev, &mut self.cur);
        }
        let d = self.prev[m];
        (d <= max).then_some(d)
    }
}

/// Combining marks that `char::is_alphanumeric` does not cover but belong inside a word.
fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F | 0x3099..=0x309A)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_mark(c)
}

/// Scripts written without spaces between words: split into character bigrams.
fn is_unspaced_script(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF      // Thai, Lao
        | 0x1000..=0x109F    // Myanmar
        | 0x1780..=0x17FF    // Khmer
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x2E80..=0x2FDF    // CJK radicals, Kangxi
        | 0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3100..=0x31FF    // Bopomofo, Hangul compatibility Jamo, Katakana extensions
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xA960..=0xA97F    // Hangul Jamo Extended-A
        | 0xAC00..=0xD7FF    // Hangul syllables, Jamo Extended-B
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0xFF66..=0xFF9F    // Halfwidth Katakana
        | 0x20000..=0x3FFFF) // CJK Extensions B and later
}

/// Normalizes text for ranking: camelCase boundaries become spaces, runs of other characters become one space,
/// letters are lowercased.
pub(crate) fn normalize(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for (i, &c) in chars.iter().enumerate() {
        if !is_word_char(c) {
            gap = true;
            continue;
        }
        if i > 0 && c.is_uppercase() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower) {
                gap = true;
            }
        }
        if gap && !out.is_empty() {
            out.push(' ');
        }
        gap = false;
        out.extend(c.to_lowercase());
    }
    out
}

/// Splits normalized text into tokens (see the module docs).
pub(crate) fn tokenize(normalized: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in normalized.split(' ').filter(|w| !w.is_empty()) {
        if !word.chars().any(is_unspaced_script) {
            out.push(cap_token(word));
            continue;
        }
        let chars: Vec<char> = word.chars().collect();
        let mut start = 0;
        while start < chars.len() {
            let unspaced = is_unspaced_script(chars[start]);
            let end = chars[start..]
                .iter()
                .position(|&c| is_unspaced_script(c) != unspaced)
                .map_or(chars.len(), |p| start + p);
            let run = &chars[start..end];
            if !unspaced || run.len() == 1 {
                out.push(cap_token(&run.iter().collect::<String>()));
            } else {
                out.extend(run.windows(2).map(|w| w.iter().collect::<String>()));
            }
            start = end;
        }
    }
    out
}

fn cap_token(word: &str) -> String {
    match word.char_indices().nth(MAX_TOKEN_CHARS) {
        Some((cut, _)) => word[..cut].to_string(),
        None => word.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    fn doc(server: &str, original: &str, description: &str) -> ToolDoc {
        ToolDoc {
            name: format!("{server}_{original}"),
            original_name: original.to_string(),
            server: server.to_string(),
            description: description.to_string(),
            keywords: Vec::new(),
            input_schema: doc_schema(json!({"type": "object"})),
            needs_approval: false,
        }
    }

    fn everything() -> SearchIndex {
        SearchIndex::build(vec![
            doc("everything", "echo", "Echoes back the input string"),
            doc("everything", "add", "Adds two numbers"),
            doc("everything", "get-sum", "Returns the sum of two numbers"),
            doc(
                "everything",
                "longRunningOperation",
                "Demonstrates a long running operation with progress updates",
            ),
            doc(
                "everything",
                "printEnv",
                "Prints all environment variables, helpful for debugging MCP server configuration",
            ),
            doc(
                "everything",
                "sampleLLM",
                "Samples from an LLM using MCP's sampling feature",
            ),
            doc("everything", "getTinyImage", "Returns the MCP_TINY_IMAGE"),
            doc("github", "create_issue", "Create a new issue in a GitHub repository"),
            doc(
                "github",
                "list_issues",
                "List issues in a GitHub repository with filtering options",
            ),
            doc("github", "search_code", "Search for code across GitHub repositories"),
            doc(
                "github",
                "get_file_contents",
                "Get the contents of a file or directory from a GitHub repository",
            ),
            doc(
                "files",
                "read_file",
                "Read the complete contents of a file from the file system",
            ),
            doc(
                "files",
                "write_file",
                "Create a new file or completely overwrite an existing file",
            ),
            doc(
                "files",
                "search_files",
                "Recursively search for files and directories matching a pattern",
            ),
            doc("wiki", "搜索文档", "在知识库中搜索文档和页面"),
            doc("wiki", "ページ作成", "新しいページを作成します"),
        ])
    }

    fn names(page: &SearchPage<'_>) -> Vec<String> {
        page.hits.iter().map(|h| h.doc.name.clone()).collect()
    }

    #[test]
    fn normalize_and_tokenize_table() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("getTinyImage", "get tiny image", &["get", "tiny", "image"]),
            (
                "get_file-contents.v2",
                "get file contents v2",
                &["get", "file", "contents", "v2"],
            ),
            ("HTTPServer", "http server", &["http", "server"]),
            ("sampleLLM", "sample llm", &["sample", "llm"]),
            ("a/b:c  d", "a b c d", &["a", "b", "c", "d"]),
            ("Café Ünïcode", "café ünïcode", &["café", "ünïcode"]),
            ("搜索文档", "搜索文档", &["搜索", "索文", "文档"]),
            ("文", "文", &["文"]),
            ("mcp搜索tool", "mcp搜索tool", &["mcp", "搜索", "tool"]),
            ("ページ作成", "ページ作成", &["ペー", "ージ", "ジ作", "作成"]),
            ("🚀 launch 🎉", "launch", &["launch"]),
            ("", "", &[]),
            ("___", "", &[]),
            ("e\u{301}cole", "e\u{301}cole", &["e\u{301}cole"]),
        ];
        for (input, norm, tokens) in cases {
            assert_eq!(normalize(input), *norm, "normalize({input:?})");
            assert_eq!(tokenize(&normalize(input)), *tokens, "tokenize({input:?})");
        }
    }

    #[test]
    fn tokenizer_never_panics_on_odd_utf8() {
        let long_cjk = "漢".repeat(500);
        let inputs = [
            "\u{0}\u{7f}\u{80}\u{10FFFF}",
            "👩‍👩‍👧‍👦🏳️‍🌈",
            "a\u{200d}b\u{fe0f}c",
            long_cjk.as_str(),
            "ǅungla İstanbul ß ﬁ",
            "\u{0301}\u{0301}x",
        ];
        for input in inputs {
            let tokens = tokenize(&normalize(input));
            assert!(tokens.iter().all(|t| t.chars().count() <= MAX_TOKEN_CHARS), "{input:?}");
        }
    }

    #[test]
    fn incumbent_worked_example_scores_408() {
        let index = everything();
        let page = index.search(&SearchQuery::new("echo")).unwrap();
        let first = &page.hits[0];
        assert_eq!(first.doc.name, "everything_echo");
        assert_eq!(first.kind, MatchKind::ExactName, "`echo` is the original name");
        assert_eq!(first.score, 408);
    }

    #[test]
    fn ranking_table() {
        let index = everything();
        // (query, expected first results in order)
        let cases: &[(&str, &[&str])] = &[
            ("everything_echo", &["everything_echo"]),
            ("EVERYTHING-ECHO", &["everything_echo"]),
            // All three are name-prefix matches; the description starting with "Get" adds to the third's score.
            (
                "get",
                &[
                    "github_get_file_contents",
                    "everything_get-sum",
                    "everything_getTinyImage",
                ],
            ),
            ("file contents", &["github_get_file_contents", "files_read_file"]),
            ("issue", &["github_create_issue", "github_list_issues"]),
            ("tiny image", &["everything_getTinyImage"]),
            ("llm sampling", &["everything_sampleLLM"]),
            ("repositories", &["github_search_code"]),
            ("搜索", &["wiki_搜索文档"]),
            ("知识库", &["wiki_搜索文档"]),
            ("作成", &["wiki_ページ作成"]),
            ("environment variables", &["everything_printEnv"]),
        ];
        for (query, expected) in cases {
            let page = index.search(&SearchQuery::new(*query)).unwrap();
            let got = names(&page);
            assert!(got.len() >= expected.len(), "{query}: got {got:?}");
            assert_eq!(&got[..expected.len()], *expected, "query {query:?}: {got:?}");
        }
    }

    #[test]
    fn exact_and_prefix_name_matches_rank_first() {
        // A tool whose description mentions "echo" many ways must not beat the one named echo.
        let mut docs = vec![
            doc("a", "echo_all_echoes", "echo echo echo: echo everything, echoes, echo"),
            doc("b", "echo", "x"),
        ];
        docs.push(doc("c", "echoes", "Echo echo echo echo"));
        let index = SearchIndex::build(docs);
        let page = index.search(&SearchQuery::new("echo")).unwrap();
        assert_eq!(names(&page), ["b_echo", "a_echo_all_echoes", "c_echoes"]);
        assert_eq!(page.hits[0].kind, MatchKind::ExactName);
        assert_eq!(page.hits[1].kind, MatchKind::NamePrefix);
    }

    #[test]
    fn half_of_the_words_is_enough_and_full_matches_rank_first() {
        let index = everything();
        // One of two words: a hit, below the tools that match both.
        let page = index.search(&SearchQuery::new("echo zebra")).unwrap();
        assert_eq!(names(&page).first().map(String::as_str), Some("everything_echo"));
        let page = index.search(&SearchQuery::new("zebra giraffe")).unwrap();
        assert_eq!(page.total, 0, "{:?}", names(&page));
        let page = index.search(&SearchQuery::new("read complete file zebra")).unwrap();
        assert_eq!(names(&page).first().map(String::as_str), Some("files_read_file"));
        // One of three is not.
        let page = index.search(&SearchQuery::new("echo zebra giraffe")).unwrap();
        assert_eq!(page.total, 0, "{:?}", names(&page));
    }

    #[test]
    fn filler_words_do_not_count() {
        let index = everything();
        let page = index.search(&SearchQuery::new("echo a message")).unwrap();
        assert_eq!(names(&page).first().map(String::as_str), Some("everything_echo"));
        // A query of filler words only still searches them.
        let page = index.search(&SearchQuery::new("the")).unwrap();
        assert!(page.total > 0);
    }

    #[test]
    fn keywords_are_searched() {
        let mut d = doc("s", "frobnicate", "Does a thing");
        d.keywords = vec!["kubernetes".into(), "k8s deploy".into()];
        let index = SearchIndex::build(vec![d, doc("s", "other", "Something else")]);
        assert_eq!(
            names(&index.search(&SearchQuery::new("kubernetes")).unwrap()),
            ["s_frobnicate"]
        );
        assert_eq!(
            names(&index.search(&SearchQuery::new("k8s deploy")).unwrap()),
            ["s_frobnicate"]
        );
    }

    #[test]
    fn server_filter_and_listing() {
        let index = everything();
        let page = index.search(&SearchQuery::new("file").with_server("files")).unwrap();
        assert!(page.hits.iter().all(|h| h.doc.server == "files"));
        assert_eq!(page.total, 3);
        let page = index.search(&SearchQuery::new("  ").with_server("github")).unwrap();
        assert_eq!(page.total, 4);
        assert!(page.hits.iter().all(|h| h.kind == MatchKind::Listed));
        assert_eq!(names(&page)[0], "github_create_issue");
        assert!(matches!(index.search(&SearchQuery::new(" ")), Err(Error::EmptyQuery)));
        assert!(matches!(
            index.search(&SearchQuery::new("!!! ???")),
            Err(Error::NoSearchableWords { .. })
        ));
    }

    #[test]
    fn pagination_table() {
        let index = everything();
        let q = |limit, offset| {
            SearchQuery::new("e")
                .with_server("everything")
                .with_regex(true)
                .with_limit(limit)
                .with_offset(offset)
        };
        let total = index.search(&q(100, 0)).unwrap().total;
        assert_eq!(total, 7);
        // (limit, offset) -> (hits, next_offset, limit used)
        let cases: &[(usize, usize, usize, Option<usize>, usize)] = &[
            (3, 0, 3, Some(3), 3),
            (3, 3, 3, Some(6), 3),
            (3, 6, 1, None, 3),
            (3, 7, 0, None, 3),
            (3, usize::MAX, 0, None, 3),
            (0, 0, 1, Some(1), 1),
            (usize::MAX, 0, 7, None, MAX_LIMIT),
        ];
        let all = names(&index.search(&q(100, 0)).unwrap());
        for &(limit, offset, n, next, used) in cases {
            let page = index.search(&q(limit, offset)).unwrap();
            assert_eq!(
                (page.hits.len(), page.next_offset, page.limit, page.total),
                (n, next, used, total),
                "{limit}/{offset}"
            );
            if n > 0 {
                assert_eq!(names(&page), all[offset..offset + n], "pages are slices of one order");
            }
        }
    }

    #[test]
    fn regex_mode() {
        let index = everything();
        let page = index
            .search(&SearchQuery::new("^github_(create|list)").with_regex(true))
            .unwrap();
        assert_eq!(names(&page), ["github_create_issue", "github_list_issues"]);
        let page = index
            .search(&SearchQuery::new("REPOSITOR(y|ies)").with_regex(true))
            .unwrap();
        assert_eq!(page.total, 4);
        let long = "a".repeat(257);
        assert!(matches!(
            index.search(&SearchQuery::new(long).with_regex(true)),
            Err(Error::QueryTooLong { len: 257, max: 256 })
        ));
        let ok = "é".repeat(256);
        assert!(
            index.search(&SearchQuery::new(ok).with_regex(true)).is_ok(),
            "256 characters (512 bytes) is allowed"
        );
        let err = index
            .search(&SearchQuery::new("(unclosed").with_regex(true))
            .unwrap_err();
        assert!(
            err.to_string().starts_with("regex query `(unclosed` is invalid: "),
            "{err}"
        );
        let err = index
            .search(&SearchQuery::new(r"\w{1000}{1000}").with_regex(true))
            .unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
    }

    /// Every match of `pattern` in `text`, as byte ranges.
    fn spans(pattern: &Pattern, text: &str) -> Vec<std::ops::Range<usize>> {
        match pattern {
            Pattern::Unicode(r) => r.find_iter(text).map(|m| m.range()).collect(),
            Pattern::Ascii(r) => r.find_iter(text.as_bytes()).map(|m| m.range()).collect(),
        }
    }

    #[test]
    fn ascii_fast_path_matches_what_the_unicode_regex_matches() {
        let texts = [
            "GitHub create_issue",
            "Créer un ticket",
            "pull-request über",
            "日本語のテキスト x",
            "cursor CURSOR",
            "line\nnext_list",
            "naïve café résumé",
            "x_list",
            "a.b and a+b",
            "aéb a中b a😀b a\nb ec\u{1F600}o",
            "].x [a]",
            "",
        ];
        let patterns = [
            "cursor",
            "^github_.*issue",
            "delete|remove",
            "^[a-z]+_list",
            "(a+)+$",
            "caf.*",
            "r.+sum",
            "ti[c-k]ket",
            "a\\.b",
            "a\\+b$",
            "CREATE|ticket",
            // `.` alone: one character of any UTF-8 length, never `\n`.
            "a.b",
            "caf.",
            "ec.o",
            "pull.?request",
            ".",
            "^.{3}$",
            "a.{1,2}b",
            "^(.)$",
            "[.]x",
            "[]a]",
            "[a.]",
            "[[:alpha:]]+_list",
            r"\.x",
        ];
        for p in patterns {
            assert!(ascii_fast_path_is_exact(p), "{p}");
            for multi_line in [true, false] {
                let fast = compiled(p, multi_line, true).unwrap();
                let unicode = compiled(p, multi_line, false).unwrap();
                assert!(matches!(fast, Pattern::Ascii(_)) && matches!(unicode, Pattern::Unicode(_)));
                for t in texts {
                    assert_eq!(fast.is_match(t), unicode.is_match(t), "{p:?} on {t:?}");
                    assert_eq!(fast.find_at(t, 0), unicode.find_at(t, 0), "{p:?} on {t:?}");
                    assert_eq!(spans(&fast, t), spans(&unicode, t), "{p:?} on {t:?}");
                }
            }
        }
        for p in ["\\bcaf", "\\w+", "[^a]", "über", "(?-i)x", "\\x41", "[a[bc]]", "[ab"] {
            assert!(!ascii_fast_path_is_exact(p), "{p}");
        }
        // A catalog holding a character that folds onto an ASCII letter keeps the Unicode regex, which finds it.
        let index = SearchIndex::build(vec![doc("s", "temp", "200 \u{212A} max"), doc("t", "other", "nothing")]);
        assert!(index.fold_traps);
        let page = index.search(&SearchQuery::new("200 k").with_regex(true)).unwrap();
        assert_eq!(names(&page), ["s_temp"]);
        let plain = SearchIndex::build(vec![doc("s", "temp", "200 K max")]);
        assert!(!plain.fold_traps);
        let page = plain.search(&SearchQuery::new("200 k").with_regex(true)).unwrap();
        assert_eq!(names(&page), ["s_temp"]);
    }

    #[test]
    fn regex_prescan_finds_what_a_per_field_scan_finds() {
        let mut docs = vec![
            doc("a", "first_line", "Line one\nline two ends here"),
            doc("b", "x", "ab\ncd"),
            doc("c", "issue", "no newline"),
            doc("d", "empty", ""),
            doc("e", "Ünïcode_名前", "ß and ſ and K"),
        ];
        docs[1].keywords = vec!["kw one".into(), "".into(), "kw\ttwo".into()];
        let index = SearchIndex::build(docs.clone());
        let patterns = [
            "^line",
            "two$",
            "^l",
            "e$",
            "^$",
            "",
            "a*",
            "[^x]+",
            r"\bone\b",
            r"\Bne",
            "b\\ncd",
            r"\s",
            ".",
            "(?s)ab.cd",
            r"\Aline",
            r"two\z",
            "(?-m)^x$",
            "^ß",
            "名前$",
            "kw.two",
            "^kw one$",
            "e\nl",
            r"[\n]",
        ];
        for pattern in patterns {
            let regex = regex::RegexBuilder::new(pattern)
                .case_insensitive(true)
                .build()
                .unwrap();
            let want: Vec<&str> = docs
                .iter()
                .filter(|d| {
                    [&d.name, &d.original_name, &d.server, &d.description]
                        .into_iter()
                        .chain(&d.keywords)
                        .any(|f| regex.is_match(f))
                })
                .map(|d| d.name.as_str())
                .collect();
            let page = index.search(&SearchQuery::new(pattern).with_regex(true).with_limit(100));
            let mut got: Vec<&str> = match page {
                Ok(page) => page.hits.iter().map(|h| h.doc.name.as_str()).collect(),
                Err(Error::EmptyQuery) => docs.iter().map(|d| d.name.as_str()).collect(),
                Err(e) => panic!("{pattern}: {e}"),
            };
            got.sort_unstable();
            let mut want = want;
            want.sort_unstable();
            if pattern.trim().is_empty() {
                continue; // an empty query is not a regex search
            }
            assert_eq!(got, want, "pattern {pattern:?}");
        }
    }

    #[test]
    fn catastrophic_looking_regex_is_linear() {
        let mut d = doc("evil", "aaaa", &format!("{}!", "a".repeat(50_000)));
        d.keywords = vec!["a".repeat(10_000)];
        let index = SearchIndex::build(vec![d]);
        for pattern in ["(a+)+$", "(a|aa)+$", "(a*)*b", "^(([a-z])+.)+[A-Z]([a-z])+$"] {
            let page = index.search(&SearchQuery::new(pattern).with_regex(true)).unwrap();
            assert!(page.total <= 1, "{pattern}");
        }
    }

    /// Names, scores and kinds of every hit, for comparing results of two indexes.
    fn outcome(index: &SearchIndex, query: &SearchQuery) -> (usize, Vec<(String, u32, MatchKind)>) {
        let page = index.search(query).unwrap();
        let hits = page
            .hits
            .iter()
            .map(|h| (h.doc.name.clone(), h.score, h.kind))
            .collect();
        (page.total, hits)
    }

    #[test]
    fn reused_query_arrays_leave_no_trace_between_queries() {
        let queries: Vec<SearchQuery> = [
            "issue",
            "create issue",
            "file contents",
            "echo",
            "github",
            "get",
            "zzz nothing",
            "sum numbers",
        ]
        .into_iter()
        .map(SearchQuery::new)
        .chain([
            SearchQuery::new("issue").with_server("github"),
            SearchQuery::new("get").with_limit(2),
        ])
        .collect();
        let index = everything();
        // A clone starts with empty arrays: each answer from a fresh index is the reference.
        let want: Vec<_> = queries.iter().map(|q| outcome(&index.clone(), q)).collect();
        assert!(
            want.iter().any(|(total, _)| *total > 1),
            "the queries must find something"
        );
        for round in 0..3 {
            for (i, q) in queries.iter().enumerate().rev() {
                assert_eq!(outcome(&index, q), want[i], "round {round}, {q:?}");
            }
        }
        // Queries racing on one index: one holds the arrays, the others use their own; all answers are right.
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        for (i, q) in queries.iter().enumerate() {
                            assert_eq!(outcome(&index, q), want[i], "{q:?}");
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn id_lists_hold_each_keys_ids_ascending_and_distinct() {
        let lists = IdLists::from_pairs(vec![('b', 3), ('a', 2), ('b', 1), ('a', 2), ('c', 0)]);
        assert_eq!(lists.get(&'a'), Some(&[2][..]));
        assert_eq!(lists.get(&'b'), Some(&[1, 3][..]));
        assert_eq!(lists.get(&'c'), Some(&[0][..]));
        assert_eq!(lists.get(&'0'), None);
        assert_eq!(lists.get(&'d'), None);
        assert_eq!(IdLists::<char>::default().get(&'a'), None);
        assert_eq!(IdLists::<char>::from_pairs(Vec::new()).get(&'a'), None);
    }

    #[test]
    fn find_precedence_table() {
        let index = SearchIndex::build(vec![
            doc("everything", "get-sum", "s"),
            doc("everything", "echo", "e"),
            doc("other", "echo", "e2"),
            doc("x", "Mixed_Case", "m"),
        ]);
        let found = |name: &str, server: Option<&str>| match index.find(name, server) {
            Lookup::Found(d) => format!("found {}", d.name),
            Lookup::Ambiguous(ds) => format!(
                "ambiguous {}",
                ds.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(",")
            ),
            Lookup::NotFound => "not found".to_string(),
        };
        let cases: &[(&str, Option<&str>, &str)] = &[
            ("everything_get-sum", None, "found everything_get-sum"),
            ("everything_get_sum", None, "found everything_get-sum"),
            ("get_sum", None, "found everything_get-sum"),
            ("echo", None, "ambiguous everything_echo,other_echo"),
            ("echo", Some("other"), "found other_echo"),
            ("other_echo", None, "found other_echo"),
            ("mixed-case", None, "found x_Mixed_Case"),
            ("echo", Some("nope"), "not found"),
            ("nothing", None, "not found"),
        ];
        for (name, server, want) in cases {
            assert_eq!(found(name, *server), *want, "{name} {server:?}");
        }
    }

    #[test]
    fn suggestions_table() {
        let index = everything();
        let cases: &[(&str, &str)] = &[
            ("everything_ecoh", "everything_echo"),
            ("everything_eho", "everything_echo"),
            ("ecoh", "everything_echo"),
            ("github_creat_isue", "github_create_issue"),
            ("github_lsit_issues", "github_list_issues"),
            ("everything_get_summ", "everything_get-sum"),
            ("printenv", "everything_printEnv"),
            ("read_files", "files_read_file"),
            ("github_issues", "github_list_issues"),
        ];
        for (typo, want) in cases {
            let got: Vec<&str> = index.suggest(typo, 5).iter().map(|d| d.name.as_str()).collect();
            assert_eq!(got.first().copied(), Some(*want), "suggest({typo}) = {got:?}");
            assert!(got.len() <= 5);
        }
        assert!(index.suggest("zzzzzzzzzzzz", 5).is_empty());
        assert!(index.suggest("echo", 0).is_empty());
    }

    #[test]
    fn osa_distance_table() {
        let cases: &[(&str, &str, usize, Option<usize>)] = &[
            ("echo", "echo", 1, Some(0)),
            ("ecoh", "echo", 1, Some(1)),
            ("eho", "echo", 1, Some(1)),
            ("abc", "xyz", 2, None),
            ("kitten", "sitting", 3, Some(3)),
            ("", "ab", 2, Some(2)),
            ("abcdef", "ab", 3, None),
            ("漢字", "字漢", 1, Some(1)),
        ];
        let mut scratch = OsaScratch::default();
        for (a, b, max, want) in cases {
            let a: Vec<char> = a.chars().collect();
            let b: Vec<char> = b.chars().collect();
            assert_eq!(scratch.distance(&a, &b, *max), *want, "{a:?} {b:?}");
        }
    }

    #[test]
    fn empty_index() {
        let index = SearchIndex::build(Vec::new());
        assert_eq!(index.search(&SearchQuery::new("x")).unwrap().total, 0);
        assert!(index.suggest("x", 5).is_empty());
        assert_eq!(index.find("x", None), Lookup::NotFound);
    }
}
