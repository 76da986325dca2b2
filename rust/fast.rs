//! Fast paths for common pipelines, exact by construction.
//!
//! The general pipeline builds a `NormalizedString` (text plus a per-byte alignment) for every
//! word. The BERT fast path cuts the text at ASCII whitespace into chunks, which is exact
//! because the pipeline is *chunk-separable* there (no stage looks across a whitespace
//! character). A printable-ASCII chunk is normalized and split in place (its offsets are the
//! input's); any other chunk runs the normalizer's stages in order on a scratch buffer, with a
//! per-byte alignment kept only when offsets are asked for. `FastPath::detect` checks the
//! configuration.

use crate::byte_level::o200k;
use crate::error::Result as PwResult;
use crate::models::wordpiece::{WordCache, WordKey, WordPiece};
use serde_json::Value;

/// What the fast path knows about the pipeline's normalizer and pre-tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FastPath {
    /// BertNormalizer (any flags) + BertPreTokenizer: every word is normalized and split right
    /// here, printable ASCII in place, anything else through a per-chunk scratch buffer.
    Bert(BertFlags),
    /// No normalizer + the ByteLevel pre-tokenizer (GPT-2, RoBERTa, Phi-2, Whisper): for ids,
    /// each regex word is mapped to byte-level characters in a scratch buffer and handed to the
    /// model, with no alignment kept.
    ByteLevel {
        add_prefix_space: bool,
        split: WordSplit,
    },
    /// Spaces become `▁` and a `▁` is prepended, then the model sees each piece between added
    /// tokens whole: the Llama normalizer `Sequence[Prepend("▁"), Replace(" ", "▁")]` with no
    /// pre-tokenizer, or no normalizer and `Metaspace(split: false)` (Mistral). For ids, the
    /// escaped piece is built in a scratch buffer with no alignment kept.
    Meta { prepend: MetaPrepend },
    /// The T5 / sentencepiece-converted Unigram pipeline: `Precompiled` normalizer, then
    /// `Sequence[WhitespaceSplit, Metaspace(always, split)]`. For ids, a piece the normalizer
    /// leaves unchanged (checked per piece) is split at whitespace and each word goes to the
    /// model as `▁word`; other pieces take the general pipeline.
    WhitespaceMeta,
}

/// How the ByteLevel path cuts a piece into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WordSplit {
    /// `use_regex: false`: the piece is one word.
    Whole,
    /// The GPT-2 regex of the ByteLevel pre-tokenizer.
    Gpt2,
    /// A `Split` with tiktoken's cl100k_base regex before a ByteLevel without regex.
    Cl100k,
    /// The same with Llama 3's regex (cl100k's split but at the end of the text).
    Llama3,
    /// The same with tiktoken's o200k_base regex (also Llama 4's).
    O200k,
    /// The same with the regex of Mistral's tekken files.
    Tekken,
}

impl WordSplit {
    /// The end of the word starting at a byte of a piece; `None` when the piece is one word.
    pub(crate) fn match_end(self) -> Option<fn(&str, usize) -> usize> {
        match self {
            WordSplit::Whole => None,
            WordSplit::Gpt2 => Some(crate::byte_level::gpt2_match_end_fast),
            WordSplit::Cl100k => Some(crate::byte_level::cl100k_match_end_fast),
            WordSplit::Llama3 => Some(crate::byte_level::llama3_match_end_fast),
            WordSplit::O200k => Some(o200k::match_end_fast::<true, 3>),
            WordSplit::Tekken => Some(o200k::match_end_fast::<false, 1>),
        }
    }

    /// Which `\n`s a piece may be cut after with its words unchanged (`crate::cuts`): the
    /// words of the whole piece are those of the parts, one after the other. `None` for
    /// `Whole` (the piece is one word).
    ///
    /// No pattern looks behind, and none puts `\n` in a match with what follows but white
    /// space, `\r`/`\n` or (o200k, tekken: `[\r\n/]*` after punctuation) `/`. So with a
    /// visible character other than `/` after the `\n`, the match that holds the `\n` ends
    /// at the cut: punctuation's newline run stops there, and `\s*[\r\n]` (`+`) takes the
    /// white space up to its last newline, as a part's `\s++\z` (cl100k) does at its end.
    /// GPT-2's `\s+(?!\S)` sees the end of a part as not `\S` and would take white space
    /// before the `\n` whole with it: there the character before must be visible too.
    pub(crate) fn newline_cut(self) -> Option<crate::cuts::Rule> {
        use crate::cuts::Rule;
        match self {
            WordSplit::Whole => None,
            WordSplit::Gpt2 => Some(Rule::visible(Vec::new())),
            WordSplit::Cl100k | WordSplit::Llama3 => Some(Rule::visible_after(Vec::new())),
            WordSplit::O200k | WordSplit::Tekken => Some(Rule::visible_after(vec!['/'])),
        }
    }
}

/// When the `Meta` path prepends `▁` to a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetaPrepend {
    /// The Prepend normalizer: to every non-empty piece.
    Always,
    /// Metaspace "always": unless the piece already starts with `▁` (or a space).
    Unless,
    /// Metaspace "first": as `Unless`, and only for the piece at the start of the input.
    FirstUnless,
    /// Metaspace "never".
    Never,
}

impl MetaPrepend {
    /// Whether the piece starting at byte `start` of the input gets a `▁` in front.
    pub(crate) fn applies(self, piece: &str, start: usize) -> bool {
        let escaped = piece.starts_with([' ', '\u{2581}']);
        match self {
            MetaPrepend::Always => !piece.is_empty(),
            MetaPrepend::Unless => !escaped,
            MetaPrepend::FirstUnless => start == 0 && !escaped,
            MetaPrepend::Never => false,
        }
    }
}

/// The `Meta` path's configuration, if the document has one of its two shapes.
fn detect_meta(norm: &Value, pre: &Value) -> Option<FastPath> {
    let is_prepend = |v: &Value| {
        v.get("type").and_then(Value::as_str) == Some("Prepend")
            && v.get("prepend").and_then(Value::as_str) == Some("\u{2581}")
    };
    let is_replace = |v: &Value| {
        v.get("type").and_then(Value::as_str) == Some("Replace")
            && v.get("pattern")
                .and_then(|p| p.get("String"))
                .and_then(Value::as_str)
                == Some(" ")
            && v.get("content").and_then(Value::as_str) == Some("\u{2581}")
    };
    if pre.is_null() && norm.get("type").and_then(Value::as_str) == Some("Sequence") {
        let list = norm.get("normalizers")?.as_array()?;
        return match list.as_slice() {
            [a, b] if (is_prepend(a) && is_replace(b)) || (is_replace(a) && is_prepend(b)) => {
                Some(FastPath::Meta {
                    prepend: MetaPrepend::Always,
                })
            }
            _ => None,
        };
    }
    if !norm.is_null()
        || pre.get("type").and_then(Value::as_str) != Some("Metaspace")
        || pre.get("replacement").and_then(Value::as_str) != Some("\u{2581}")
        || pre.get("split").and_then(Value::as_bool) != Some(false)
        || pre.get("add_prefix_space").is_some()
    {
        return None;
    }
    let prepend = match pre.get("prepend_scheme").map(Value::as_str) {
        None | Some(Some("always")) => MetaPrepend::Unless,
        Some(Some("first")) => MetaPrepend::FirstUnless,
        Some(Some("never")) => MetaPrepend::Never,
        _ => return None,
    };
    Some(FastPath::Meta { prepend })
}

/// `Sequence[Split(regex, Isolated), ByteLevel(add_prefix_space: false, use_regex: false)]`,
/// what `from_tiktoken` and the tekken reader build (and HF's converted files hold), with
/// the tiktoken regex of a hand-written split: cl100k_base's, Llama 3's, o200k_base's or tekken's,
/// exactly as `formats::tiktoken::onig_pattern` translates it.
fn tiktoken_split(pre: &Value) -> Option<WordSplit> {
    let parts = match pre.get("pretokenizers").and_then(Value::as_array) {
        Some(p) if pre.get("type").and_then(Value::as_str) == Some("Sequence") => p,
        _ => return None,
    };
    let [split, bl] = parts.as_slice() else {
        return None;
    };
    let field = |v: &Value, k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let shape = split.get("type").and_then(Value::as_str) == Some("Split")
        && field(split, "behavior").as_str() == Some("Isolated")
        && field(split, "invert").as_bool() == Some(false)
        && bl.get("type").and_then(Value::as_str) == Some("ByteLevel")
        && field(bl, "add_prefix_space").as_bool() == Some(false)
        && field(bl, "use_regex").as_bool() == Some(false);
    if !shape {
        return None;
    }
    match field(split, "pattern")
        .get("Regex")
        .and_then(Value::as_str)?
    {
        p if p == crate::byte_level::cl100k::ONIG_PATTERN => Some(WordSplit::Cl100k),
        p if p == crate::byte_level::cl100k::LLAMA3_PATTERN => Some(WordSplit::Llama3),
        p if p == o200k::O200K_PATTERN => Some(WordSplit::O200k),
        p if p == o200k::TEKKEN_PATTERN => Some(WordSplit::Tekken),
        _ => None,
    }
}

/// `Precompiled` + `Sequence[WhitespaceSplit, Metaspace]` with `▁`, prepending always and
/// splitting (T5-style documents, old `add_prefix_space: true` or `prepend_scheme: "always"`).
fn detect_whitespace_meta(norm: &Value, pre: &Value) -> bool {
    let ty = |v: &Value| v.get("type").and_then(Value::as_str).map(str::to_owned);
    if ty(norm).as_deref() != Some("Precompiled") || ty(pre).as_deref() != Some("Sequence") {
        return false;
    }
    let Some([ws, meta]) = pre
        .get("pretokenizers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    else {
        return false;
    };
    let always = match (meta.get("prepend_scheme"), meta.get("add_prefix_space")) {
        (None, None | Some(Value::Bool(true))) => true,
        (Some(Value::String(s)), None | Some(Value::Bool(true))) => s == "always",
        _ => false,
    };
    ty(ws).as_deref() == Some("WhitespaceSplit")
        && ty(meta).as_deref() == Some("Metaspace")
        && meta.get("replacement").and_then(Value::as_str) == Some("\u{2581}")
        && meta.get("split").is_none_or(|v| v.as_bool() == Some(true))
        && always
}

/// Bytes of the whitespace character (`char::is_whitespace`, what `WhitespaceSplit` cuts at)
/// starting at byte `i` of `b`, 0 when none starts there. `i` is a character boundary.
#[inline]
fn whitespace_len(b: &[u8], i: usize) -> usize {
    match b.get(i..).unwrap_or_default() {
        [9..=13 | b' ', ..] => 1,
        // U+0085, U+00A0
        [0xC2, 0x85 | 0xA0, ..] => 2,
        // U+1680
        [0xE1, 0x9A, 0x80, ..] => 3,
        // U+2000..=U+200A, U+2028, U+2029, U+202F, U+205F
        [0xE2, 0x80, 0x80..=0x8A | 0xA8 | 0xA9 | 0xAF, ..] | [0xE2, 0x81, 0x9F, ..] => 3,
        // U+3000
        [0xE3, 0x80, 0x80, ..] => 3,
        _ => 0,
    }
}

/// The bytes that may start a whitespace character or `▁` (U+2581 is E2 96 81).
const META_REST_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = matches!(b, 9..=13 | 0x20 | 0xC2 | 0xE1..=0xE3);
        b += 1;
    }
    t
};

/// The pieces `WhitespaceSplit` then `Metaspace(▁, always, split)` make of a normalized
/// text, to `f`, each without its leading `▁` (every piece has one: a whitespace-free word
/// gets `▁` prepended unless it starts with one, then is cut before every `▁`, as
/// `MergedWithNext`). So `""` stands for the piece `▁`. One byte scan finds both the
/// whitespace and the `▁`s.
pub(crate) fn for_each_meta_rest(
    text: &str,
    mut f: impl FnMut(&str) -> PwResult<()>,
) -> PwResult<()> {
    let b = text.as_bytes();
    let piece = |s: usize, e: usize| {
        text.get(s..e)
            .ok_or_else(|| crate::error::Error::other("Metaspace: cut inside a character"))
    };
    let mut i = 0;
    // Start of the current piece (after its `▁`), if inside one.
    let mut start: Option<usize> = None;
    while let Some(&c) = b.get(i) {
        if !META_REST_SPECIAL[usize::from(c)] {
            // Inside a piece up to the next byte that may start whitespace or `▁` (none of
            // them is a continuation byte, so the scan stops at a character boundary). A
            // piece starts at a character boundary: the text start, or after whitespace or
            // a `▁`.
            start.get_or_insert(i);
            i += 1;
            while b
                .get(i)
                .is_some_and(|&x| !META_REST_SPECIAL[usize::from(x)])
            {
                i += 1;
            }
            continue;
        }
        // Only these bytes start whitespace (see `whitespace_len`): most bytes skip the match.
        let ws = match c {
            9..=13 | b' ' => 1,
            0xC2 | 0xE1..=0xE3 => whitespace_len(b, i),
            _ => 0,
        };
        if ws > 0 {
            if let Some(s) = start.take() {
                f(piece(s, i)?)?;
            }
            i += ws;
            continue;
        }
        if c == 0xE2 && b.get(i + 1..i + 3) == Some(&[0x96, 0x81]) {
            if let Some(s) = start {
                f(piece(s, i)?)?;
            }
            start = Some(i + 3);
            i += 3;
            continue;
        }
        start.get_or_insert(i);
        i += match c {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
    }
    if let Some(s) = start {
        f(piece(s, b.len())?)?;
    }
    Ok(())
}

/// The words of an ASCII `piece`, cut at whitespace, to `f`, when the normalizer keeps them
/// (`classes` from `Normalizer::ascii_word_classes`); false as soon as some byte (or CR LF)
/// is one it may change, when `f` may have been given some of the words already.
#[inline]
pub(crate) fn ascii_meta_words(
    piece: &str,
    classes: &[u8; 128],
    mut f: impl FnMut(&str) -> PwResult<()>,
) -> PwResult<bool> {
    use crate::normalizers::{ASCII_SPACE, ASCII_WORD};
    let b = piece.as_bytes();
    let mut i = 0;
    let mut start: Option<usize> = None;
    while let Some(&c) = b.get(i) {
        match classes.get(usize::from(c)).copied() {
            Some(ASCII_WORD) => {
                start.get_or_insert(i);
            }
            Some(ASCII_SPACE) if !(c == b'\r' && b.get(i + 1) == Some(&b'\n')) => {
                if let Some(s) = start.take() {
                    f(piece.get(s..i).unwrap_or_default())?;
                }
            }
            _ => return Ok(false),
        }
        i += 1;
    }
    if let Some(s) = start {
        f(piece.get(s..).unwrap_or_default())?;
    }
    Ok(true)
}

/// The `▁`-escaped form of `piece` (spaces replaced, `▁` prepended when asked), into `buf`.
pub(crate) fn meta_escape(piece: &str, prepend: bool, buf: &mut String) {
    buf.clear();
    let bytes = piece.as_bytes();
    let spaces = bytes.iter().filter(|&&b| b == b' ').count();
    // One allocation at most: each space grows by two bytes, the prepended `▁` is three.
    buf.reserve(piece.len() + 2 * spaces + 3);
    if prepend {
        buf.push('\u{2581}');
    }
    // A byte loop: code is full of space runs, where a substring search per space costs
    // more than the copy. A space is a char boundary, so every slice here is one.
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' {
            buf.push_str(piece.get(start..i).unwrap_or_default());
            buf.push('\u{2581}');
            start = i + 1;
        }
    }
    buf.push_str(piece.get(start..).unwrap_or_default());
}

thread_local! {
    static TEXT_BUF: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// Run `f` with this thread's text buffer, so that an escaped text costs no allocation once
/// the buffer has grown. The buffer is taken out for the call (a re-entrant call gets an
/// empty one) and put back unless it grew very large.
pub(crate) fn with_text_buf<R>(f: impl FnOnce(&mut String) -> R) -> R {
    let mut buf = TEXT_BUF.try_with(std::cell::Cell::take).unwrap_or_default();
    let r = f(&mut buf);
    if buf.capacity() <= 1 << 20 {
        let _ = TEXT_BUF.try_with(|c| c.set(buf));
    }
    r
}

impl FastPath {
    /// The fast path a tokenizer.json document allows, if any.
    pub(crate) fn detect(json: &Value) -> Option<FastPath> {
        let norm = json.get("normalizer")?;
        let pre = json.get("pre_tokenizer")?;
        if let Some(meta) = detect_meta(norm, pre) {
            return Some(meta);
        }
        if detect_whitespace_meta(norm, pre) {
            return Some(FastPath::WhitespaceMeta);
        }
        if norm.is_null() && pre.get("type")?.as_str()? == "ByteLevel" {
            // The reader already refused a ByteLevel without its fields.
            let use_regex = pre
                .get("use_regex")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            return Some(FastPath::ByteLevel {
                add_prefix_space: pre.get("add_prefix_space")?.as_bool()?,
                split: if use_regex {
                    WordSplit::Gpt2
                } else {
                    WordSplit::Whole
                },
            });
        }
        if let Some(split) = tiktoken_split(pre).filter(|_| norm.is_null()) {
            return Some(FastPath::ByteLevel {
                add_prefix_space: false,
                split,
            });
        }
        if norm.get("type")?.as_str()? != "BertNormalizer"
            || pre.get("type")?.as_str()? != "BertPreTokenizer"
        {
            return None;
        }
        // The reader has already required these fields; anything unexpected keeps the general
        // pipeline.
        let flag = |name: &str| norm.get(name).and_then(Value::as_bool);
        let lowercase = flag("lowercase")?;
        let strip_accents = match norm.get("strip_accents") {
            None | Some(Value::Null) => lowercase,
            Some(v) => v.as_bool()?,
        };
        Some(FastPath::Bert(BertFlags {
            clean_text: flag("clean_text")?,
            handle_chinese_chars: flag("handle_chinese_chars")?,
            strip_accents,
            lowercase,
        }))
    }
}

/// The BertNormalizer flags, with `strip_accents` already resolved (unset follows `lowercase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BertFlags {
    pub(crate) clean_text: bool,
    pub(crate) handle_chinese_chars: bool,
    pub(crate) strip_accents: bool,
    pub(crate) lowercase: bool,
}

/// Reusable buffers for `for_each_piece`, so a word costs no allocation.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The normalized word handed to the callback (when it is not a slice of the input).
    word: String,
    /// Per byte of `word`, the original byte range (in the segment) of the character it came
    /// from; filled only when offsets are asked for.
    align: Vec<(usize, usize)>,
    /// A chunk after clean_text and the CJK spacing, before NFD.
    chars: Vec<char>,
    /// Per char of `chars`, its original byte range (only when offsets are asked for).
    char_align: Vec<(usize, usize)>,
    /// The ids path's character maps of the BMP, one per flag combination (indexed by
    /// `BertFlags::index()`), filled a 256-character block at a time on first use. Per thread
    /// (in the scratch space), so no lock is taken and nothing is shared across `fork`.
    maps: Vec<Option<Box<CharMap>>>,
    /// The ids path's word caches, one per WordPiece model (see `WordPiece::cache_in`).
    caches: Vec<(u64, WordCache)>,
}

/// One word of a segment, in the order the general pipeline produces words.
pub(crate) struct Piece<'a> {
    /// Original byte offset (in the segment) of an identity-aligned word.
    start: usize,
    /// Per normalized byte, its original byte range in the segment; empty when the word's
    /// bytes are the original bytes from `start` on.
    align: &'a [(usize, usize)],
}

impl Piece<'_> {
    /// The original byte range, in the segment, of the normalized bytes `a..b` of the word:
    /// what the general pipeline's `convert_normalized_range` on the word's slice gives (start
    /// of the first byte's range, end of the last one's; an empty range kept as it is,
    /// relative to the word's original start).
    #[inline]
    pub(crate) fn original(&self, (a, b): (usize, usize)) -> (usize, usize) {
        let Some(first) = self.align.first() else {
            return (self.start + a, self.start + b);
        };
        if a == b {
            return (first.0 + a, first.0 + b);
        }
        match (
            self.align.get(a),
            b.checked_sub(1).and_then(|e| self.align.get(e)),
        ) {
            (Some(x), Some(y)) if a < b => (x.0, y.1),
            // Not reached: model tokens are non-empty ranges inside their word.
            _ => (first.0 + a, first.0 + b),
        }
    }
}

/// The ASCII characters that are whitespace for BertNormalizer and BertPreTokenizer alike,
/// with or without clean_text. VT and FF are whitespace but also controls, which clean_text
/// drops first, so they are left to the chunk walk.
#[inline]
fn is_ascii_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl FastPath {
    /// Walk `segment`, calling `f` with each word the general pipeline would give the model,
    /// normalized, and its alignment (kept only when `offsets` is set).
    ///
    /// Exact because every stage is *chunk-separable* at ASCII whitespace: clean_text, the CJK
    /// spacing and lowercasing look at one character at a time; NFD reorders combining marks
    /// only between starters (the whitespace is one); the pre-tokenizer drops that whitespace.
    /// Inside a chunk the stages run in the normalizer's order, on the same tables.
    pub(crate) fn for_each_piece<E>(
        &self,
        segment: &str,
        s: &mut Scratch,
        offsets: bool,
        mut f: impl FnMut(Piece<'_>, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        let FastPath::Bert(flags) = *self else {
            // Only the BERT path walks pieces; callers check `has_offsets`.
            return Ok(());
        };
        let bytes = segment.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if is_ascii_ws(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            let mut simple = true;
            while let Some(&b) = bytes.get(i) {
                if is_ascii_ws(b) {
                    break;
                }
                // Non-ASCII, and ASCII controls (which clean_text drops), take the chunk walk.
                simple &= (0x21..0x7f).contains(&b);
                i += 1;
            }
            // `start` and `i` are at ASCII bytes or the ends: char boundaries.
            let Some(chunk) = segment.get(start..i) else {
                continue;
            };
            if simple {
                ascii_chunk(chunk, start, flags.lowercase, &mut s.word, &mut f)?;
            } else {
                flags.chunk(chunk, start, s, offsets, &mut f)?;
            }
        }
        Ok(())
    }
}

/// A chunk of printable ASCII: every stage is the identity or a byte-for-byte map, so words
/// are runs between punctuation and offsets are the input's.
#[inline]
fn ascii_chunk<E>(
    chunk: &str,
    base: usize,
    lowercase: bool,
    word: &mut String,
    f: &mut impl FnMut(Piece<'_>, &str) -> Result<(), E>,
) -> Result<(), E> {
    let mut emit = |a: usize, b: usize| -> Result<(), E> {
        let Some(w) = chunk.get(a..b) else {
            return Ok(());
        };
        let piece = Piece {
            start: base + a,
            align: &[],
        };
        if lowercase && w.bytes().any(|c| c.is_ascii_uppercase()) {
            word.clear();
            word.push_str(w);
            word.make_ascii_lowercase();
            f(piece, word)
        } else {
            f(piece, w)
        }
    };
    let mut w = 0;
    for (j, b) in chunk.bytes().enumerate() {
        if b.is_ascii_punctuation() {
            if w < j {
                emit(w, j)?;
            }
            emit(j, j + 1)?;
            w = j + 1;
        }
    }
    if w < chunk.len() {
        emit(w, chunk.len())?;
    }
    Ok(())
}

/// How the BERT ids path treats an input byte.
const WORD: u8 = 0;
/// ASCII whitespace that is whitespace for every flag combination (see `is_ascii_ws`).
const SPACE: u8 = 1;
/// ASCII punctuation: a word of its own, and a boundary no stage looks across.
const PUNCT: u8 = 2;
/// Non-ASCII bytes and ASCII controls (VT, FF, DEL, ...): the word they are in takes the
/// general chunk walk.
const OTHER: u8 = 3;

const BYTE_CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut b = 0x21;
    while b < 0x7f {
        t[b] = if (b as u8).is_ascii_punctuation() {
            PUNCT
        } else {
            WORD
        };
        b += 1;
    }
    t[b' ' as usize] = SPACE;
    t[b'\t' as usize] = SPACE;
    t[b'\n' as usize] = SPACE;
    t[b'\r' as usize] = SPACE;
    t
};

/// Per byte of `x`, the high bit set when the byte is not an ASCII letter or digit (the
/// `WORD` class). Each byte's low seven bits plus a constant stay below 256, so no carry
/// crosses into the next byte; bytes with the high bit set are never letters or digits.
#[inline]
fn non_word_bytes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x80 * ONES;
    let low7 = x & (0x7f * ONES);
    let in_range = |v: u64, lo: u8, hi: u8| {
        let ge = v + (0x80 - u64::from(lo)) * ONES;
        let gt = v + (0x80 - u64::from(hi) - 1) * ONES;
        ge & !gt & HIGH
    };
    let digit = in_range(low7, b'0', b'9');
    // Setting bit 5 maps `A..=Z` onto `a..=z` and no other byte into that range.
    let alpha = in_range(low7 | (0x20 * ONES), b'a', b'z');
    !((digit | alpha) & !x) & HIGH
}

/// The end of the run of `WORD` bytes starting at `i`: eight bytes at a time, then one by one.
#[inline]
fn ascii_word_end(bytes: &[u8], mut i: usize) -> usize {
    while let Some(block) = bytes.get(i..i + 8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(block);
        let m = non_word_bytes(u64::from_le_bytes(b));
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while bytes
        .get(i)
        .is_some_and(|&b| BYTE_CLASS[usize::from(b)] == WORD)
    {
        i += 1;
    }
    i
}

/// Longest ASCII word lowercased on the stack; longer ones go through the scratch string.
const STACK_WORD: usize = 64;

/// The ids of one ASCII word (printable, no punctuation), lowercased when asked.
#[inline]
fn ascii_word_ids(
    word: &[u8],
    lowercase: bool,
    wp: &WordPiece,
    long: &mut String,
    out: &mut Vec<u32>,
) -> PwResult<()> {
    if !lowercase || !word.iter().any(u8::is_ascii_uppercase) {
        return wp.word_ids(word, out);
    }
    let mut buf = [0u8; STACK_WORD];
    if let Some(dst) = buf.get_mut(..word.len()) {
        for (d, &b) in dst.iter_mut().zip(word) {
            *d = b.to_ascii_lowercase();
        }
        return wp.word_ids(dst, out);
    }
    long.clear();
    long.extend(word.iter().map(|&b| char::from(b.to_ascii_lowercase())));
    wp.word_ids(long.as_bytes(), out)
}

impl BertFlags {
    /// BERT normalization and pre-tokenization followed by WordPiece, ids only: the ids
    /// `for_each_piece` and `WordPiece::tokenize` give, appended to `out`.
    ///
    /// Printable ASCII is classified one byte at a time and each word goes to the model as
    /// soon as it ends. A word holding any other byte is handed, up to the next ASCII
    /// whitespace, to the general chunk walk. That is exact because the word starts at a chunk
    /// start or right after ASCII punctuation, and no stage looks across ASCII punctuation
    /// either: it is one character with no decomposition and combining class 0 (NFD reorders
    /// only between such starters), the per-character stages leave it alone, and the
    /// pre-tokenizer isolates it, so no word spans it.
    pub(crate) fn wordpiece_ids(
        &self,
        wp: &WordPiece,
        segment: &str,
        s: &mut Scratch,
        out: &mut Vec<u32>,
    ) -> PwResult<()> {
        let mut caches = std::mem::take(&mut s.caches);
        let r = self.wordpiece_ids_cached(wp, segment, s, wp.cache_in(&mut caches), out);
        s.caches = caches;
        r
    }

    fn wordpiece_ids_cached(
        &self,
        wp: &WordPiece,
        segment: &str,
        s: &mut Scratch,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> PwResult<()> {
        let bytes = segment.as_bytes();
        let lowercase = self.lowercase;
        // An ASCII word `bytes[a..b]` (lowercased when asked) through the cache.
        let word =
            |a: usize, b: usize, s: &mut Scratch, cache: &mut WordCache, out: &mut Vec<u32>| {
                if b == a + 1 {
                    let c =
                        bytes
                            .get(a)
                            .map_or(0, |&c| if lowercase { c.to_ascii_lowercase() } else { c });
                    if let Some(id) = wp.ascii_byte_id(c) {
                        out.push(id);
                        return Ok(());
                    }
                }
                match WordKey::in_text(bytes, a, b, lowercase) {
                    Some(key) => wp.key_ids(cache, &key, out),
                    None => ascii_word_ids(&bytes[a..b], lowercase, wp, &mut s.word, out),
                }
            };
        // The current word starts at `w`; `i` is the byte being classified.
        let (mut w, mut i) = (0, 0);
        while let Some(&b) = bytes.get(i) {
            match BYTE_CLASS[usize::from(b)] {
                WORD => {
                    i = ascii_word_end(bytes, i + 1);
                    // A word mostly ends at a space: handled here as the `SPACE` arm would,
                    // without another turn of the loop (`w < i`: the run is not empty).
                    if bytes.get(i) == Some(&b' ') {
                        word(w, i, s, cache, out)?;
                        i += 1;
                        w = i;
                    }
                }
                SPACE => {
                    if w < i {
                        word(w, i, s, cache, out)?;
                    }
                    i += 1;
                    w = i;
                }
                PUNCT => {
                    if w < i {
                        word(w, i, s, cache, out)?;
                    }
                    word(i, i + 1, s, cache, out)?;
                    i += 1;
                    w = i;
                }
                _ => {
                    // The chunk runs from `w` to the next ASCII whitespace; `chunk_ids` finds
                    // its end as it goes, and only a chunk it declines is scanned for it.
                    // `w` and `end` are at ASCII bytes or the ends: char boundaries.
                    let end = match self.chunk_ids(segment, w, s, wp, cache, out)? {
                        Some(end) => end,
                        None => {
                            let end = bytes[i..]
                                .iter()
                                .position(|&b| is_ascii_ws(b))
                                .map_or(bytes.len(), |p| i + p);
                            if let Some(chunk) = segment.get(w..end) {
                                self.chunk(chunk, w, s, false, &mut |_, word: &str| {
                                    wp.cached_word_ids(cache, word.as_bytes(), out)
                                })?;
                            }
                            end
                        }
                    };
                    i = end;
                    w = end;
                }
            }
        }
        if w < bytes.len() {
            word(w, bytes.len(), s, cache, out)?;
        }
        Ok(())
    }
}

/// One step of a character's mapping on the ids path, packed as `kind | char`: a word
/// character, a punctuation character (a word of its own), or a word boundary.
const OP_CHAR: u32 = 0;
const OP_PUNCT: u32 = 1 << 24;
const OP_BREAK: u32 = 2 << 24;
/// Block entries other than a single op: several ops (`E_MULTI | index << 3 | count`, the
/// ops in the block's `multi` list), none (a character clean_text drops), or "take the
/// general chunk walk".
const E_MULTI: u32 = 3 << 24;
const E_REMOVED: u32 = 0xFF00_0000;
const E_COMPLEX: u32 = 0xFE00_0000;
/// A `CharMap` entry whose block is not built yet.
const E_UNBUILT: u32 = 0xFD00_0000;
const MAX_OPS: usize = 4;

/// The mapping of every BMP character in one flat table (one load per character, where a
/// table of blocks would chase a pointer first), built block by block from `char_block`.
pub(crate) struct CharMap {
    map: Vec<u32>,
    /// The `E_MULTI` entries' ops, all blocks' lists one after the other.
    multi: Vec<[u32; MAX_OPS]>,
}

impl CharMap {
    fn new() -> CharMap {
        CharMap {
            map: vec![E_UNBUILT; 1 << 16],
            multi: Vec::new(),
        }
    }

    /// The entry of the BMP character `cp`, building its block first when needed.
    #[inline]
    fn entry(&mut self, flags: &BertFlags, cp: u32) -> u32 {
        let e = self.map.get(cp as usize).copied().unwrap_or(E_COMPLEX);
        if e != E_UNBUILT {
            return e;
        }
        self.build(flags, cp >> 8);
        self.map.get(cp as usize).copied().unwrap_or(E_COMPLEX)
    }

    /// Copy `char_block(block)` in, its `multi` indices moved past the lists already here.
    #[cold]
    #[inline(never)]
    fn build(&mut self, flags: &BertFlags, block: u32) {
        let b = flags.char_block(block);
        let off = self.multi.len() as u32;
        let start = (block as usize) << 8;
        let Some(dst) = self.map.get_mut(start..start + 256) else {
            return;
        };
        for (d, &e) in dst.iter_mut().zip(&b.map) {
            *d = if e >> 24 == E_MULTI >> 24 {
                E_MULTI | (((e & 0xFF_FFFF) >> 3) + off) << 3 | (e & 7)
            } else {
                e
            };
        }
        self.multi.extend_from_slice(&b.multi);
    }
}

/// The mapping of the BMP characters `block * 256 ..` (see `BertFlags::char_ops`).
pub(crate) struct CharBlock {
    map: [u32; 256],
    multi: Vec<[u32; MAX_OPS]>,
}

impl BertFlags {
    /// Which of the 16 flag combinations this is.
    fn index(&self) -> usize {
        usize::from(self.clean_text)
            | usize::from(self.handle_chinese_chars) << 1
            | usize::from(self.strip_accents) << 2
            | usize::from(self.lowercase) << 3
    }

    /// What the normalizer's stages make of `c` on its own, as ops: clean_text (dropped, or
    /// whitespace to a space), the CJK spacing, NFD with the nonspacing marks dropped,
    /// lowercasing, then each resulting character classified as the pre-tokenizer does
    /// (`WordSink::push`). `None` when a character NFD keeps has a nonzero combining class:
    /// NFD could reorder it against its neighbours' marks, so the chunk is not the
    /// concatenation of its characters' mappings and takes the general walk. Otherwise it is:
    /// NFD decomposes each character on its own and moves only nonzero-class characters, the
    /// other stages look at one character at a time, and a dropped mark leaves no trace.
    /// Also `None` past `MAX_OPS` ops.
    fn char_ops(&self, c: char) -> Option<([u32; MAX_OPS], usize)> {
        use crate::normalizers::bert::{is_bert_whitespace, is_chinese_char, is_removed};
        use unicode_categories::UnicodeCategories;
        use unicode_normalization_alignments::char::canonical_combining_class;
        use unicode_normalization_alignments::UnicodeNormalization;
        let mut ops = [0u32; MAX_OPS];
        let mut n = 0;
        let mut push = |op: u32| -> Option<()> {
            *ops.get_mut(n)? = op;
            n += 1;
            Some(())
        };
        let c = if self.clean_text {
            if is_removed(c) {
                return Some((ops, 0));
            }
            if is_bert_whitespace(c) {
                ' '
            } else {
                c
            }
        } else {
            c
        };
        let chinese = self.handle_chinese_chars && is_chinese_char(c);
        if chinese {
            push(OP_BREAK)?;
        }
        let mut kept = [' '; MAX_OPS];
        let mut k = 0;
        if self.strip_accents {
            for (d, _) in std::iter::once(c).nfd() {
                if !d.is_ascii() && d.is_mark_nonspacing() {
                    continue;
                }
                if canonical_combining_class(d) != 0 {
                    return None;
                }
                *kept.get_mut(k)? = d;
                k += 1;
            }
        } else {
            kept[0] = c;
            k = 1;
        }
        for &d in kept.get(..k)? {
            let mut classify = |l: char| {
                push(if crate::text::unicode::is_whitespace(l) {
                    OP_BREAK
                } else if crate::pre_tokenizers::bert::is_bert_punctuation(l) {
                    OP_PUNCT | l as u32
                } else {
                    OP_CHAR | l as u32
                })
            };
            if self.lowercase && !d.is_ascii() {
                for l in crate::text::unicode::to_lowercase(d) {
                    classify(l)?;
                }
            } else {
                classify(if self.lowercase {
                    d.to_ascii_lowercase()
                } else {
                    d
                })?;
            }
        }
        if chinese {
            push(OP_BREAK)?;
        }
        Some((ops, n))
    }

    fn char_block(&self, block: u32) -> CharBlock {
        let mut b = CharBlock {
            map: [E_REMOVED; 256],
            multi: Vec::new(),
        };
        for (lo, e) in (0u32..).zip(b.map.iter_mut()) {
            let Some(c) = char::from_u32(block << 8 | lo) else {
                // Surrogates never occur in a `str`.
                *e = E_COMPLEX;
                continue;
            };
            *e = match self.char_ops(c) {
                None => E_COMPLEX,
                Some((_, 0)) => E_REMOVED,
                Some((ops, 1)) => ops[0],
                // A character that is a word of its own (a CJK ideograph with its two
                // spaces): `apply_op` does the same for `PUNCT x` (end the word, then `x`
                // alone) as for `BREAK, CHAR x, BREAK` or `BREAK, PUNCT x, BREAK`.
                Some(([OP_BREAK, x, OP_BREAK, _], 3)) if x & 0xFF00_0000 <= OP_PUNCT => {
                    OP_PUNCT | (x & 0xFF_FFFF)
                }
                Some((ops, n)) => {
                    b.multi.push(ops);
                    E_MULTI | ((b.multi.len() - 1) as u32) << 3 | n as u32
                }
            };
        }
        b
    }

    /// The ids of the chunk of `text` from `from` to the next ASCII whitespace (or the end),
    /// through the per-character maps, and where it ends; `None` (with nothing appended) when
    /// the chunk must take the general walk instead.
    fn chunk_ids(
        &self,
        text: &str,
        from: usize,
        s: &mut Scratch,
        wp: &WordPiece,
        cache: &mut WordCache,
        out: &mut Vec<u32>,
    ) -> PwResult<Option<usize>> {
        let rest = text.get(from..).unwrap_or_default();
        let mut end = text.len();
        let base = out.len();
        if s.maps.len() < 16 {
            s.maps.resize_with(16, || None);
        }
        let Some(slot) = s.maps.get_mut(self.index()) else {
            return Ok(None);
        };
        let cm = slot.get_or_insert_with(|| Box::new(CharMap::new()));
        let word = &mut s.word;
        word.clear();
        for (k, c) in rest.char_indices() {
            if c.is_ascii() && is_ascii_ws(c as u8) {
                end = from + k;
                break;
            }
            let cp = c as u32;
            let e = if cp < 0x1_0000 {
                cm.entry(self, cp)
            } else {
                match self.char_ops(c) {
                    None => E_COMPLEX,
                    Some((ops, n)) => {
                        for &op in ops.get(..n).unwrap_or_default() {
                            apply_op(op, word, wp, cache, out)?;
                        }
                        continue;
                    }
                }
            };
            match e {
                E_REMOVED => {}
                E_COMPLEX => {
                    out.truncate(base);
                    return Ok(None);
                }
                e if e >= E_MULTI => {
                    let (i, n) = (((e & 0xFF_FFFF) >> 3) as usize, (e & 7) as usize);
                    let ops = cm.multi.get(i).and_then(|o| o.get(..n));
                    for &op in ops.unwrap_or_default() {
                        apply_op(op, word, wp, cache, out)?;
                    }
                }
                op => apply_op(op, word, wp, cache, out)?,
            }
        }
        flush_word(word, wp, cache, out)?;
        Ok(Some(end))
    }
}

/// Hand the word collected so far to the model.
#[inline]
fn flush_word(
    word: &mut String,
    wp: &WordPiece,
    cache: &mut WordCache,
    out: &mut Vec<u32>,
) -> PwResult<()> {
    if word.is_empty() {
        return Ok(());
    }
    let r = wp.cached_word_ids(cache, word.as_bytes(), out);
    word.clear();
    r
}

#[inline]
fn apply_op(
    op: u32,
    word: &mut String,
    wp: &WordPiece,
    cache: &mut WordCache,
    out: &mut Vec<u32>,
) -> PwResult<()> {
    let ch = char::from_u32(op & 0xFF_FFFF).unwrap_or(' ');
    match op & 0xFF00_0000 {
        OP_CHAR => {
            word.push(ch);
            Ok(())
        }
        OP_PUNCT => {
            flush_word(word, wp, cache, out)?;
            if let Some(id) = u8::try_from(ch).ok().and_then(|b| wp.ascii_byte_id(b)) {
                out.push(id);
                return Ok(());
            }
            let mut buf = [0u8; 4];
            wp.cached_word_ids(cache, ch.encode_utf8(&mut buf).as_bytes(), out)
        }
        _ => flush_word(word, wp, cache, out),
    }
}

thread_local! {
    /// Scratch buffers kept per thread, so a call allocates nothing once they have grown.
    /// Boxed so taking them out and putting them back moves one pointer.
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

/// Run `f` with this thread's scratch buffers: taken out for the call (a nested call finds
/// none and uses fresh ones) and put back after.
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut s = SCRATCH
        .try_with(std::cell::Cell::take)
        .ok()
        .flatten()
        .unwrap_or_default();
    let r = f(&mut s);
    let _ = SCRATCH.try_with(|c| c.set(Some(s)));
    r
}

/// Collects the characters of one word and hands it over at each boundary.
struct WordSink<'a> {
    word: &'a mut String,
    align: &'a mut Vec<(usize, usize)>,
    offsets: bool,
}

impl WordSink<'_> {
    /// One normalized character, with the original range it aligns to: the pre-tokenizer
    /// drops whitespace and isolates punctuation, as BertPreTokenizer does.
    #[inline]
    fn push<E>(
        &mut self,
        c: char,
        a: (usize, usize),
        f: &mut impl FnMut(Piece<'_>, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        if crate::text::unicode::is_whitespace(c) {
            return self.flush(f);
        }
        if crate::pre_tokenizers::bert::is_bert_punctuation(c) {
            self.flush(f)?;
            self.add(c, a);
            return self.flush(f);
        }
        self.add(c, a);
        Ok(())
    }

    #[inline]
    fn add(&mut self, c: char, a: (usize, usize)) {
        self.word.push(c);
        if self.offsets {
            self.align.extend(std::iter::repeat_n(a, c.len_utf8()));
        }
    }

    fn flush<E>(&mut self, f: &mut impl FnMut(Piece<'_>, &str) -> Result<(), E>) -> Result<(), E> {
        if self.word.is_empty() {
            return Ok(());
        }
        let r = f(
            Piece {
                start: 0,
                align: self.align,
            },
            self.word,
        );
        self.word.clear();
        self.align.clear();
        r
    }
}

impl BertFlags {
    /// A chunk with non-ASCII or control characters, through the normalizer's stages in order.
    fn chunk<E>(
        &self,
        chunk: &str,
        base: usize,
        s: &mut Scratch,
        offsets: bool,
        f: &mut impl FnMut(Piece<'_>, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        use crate::normalizers::bert::{is_bert_whitespace, is_chinese_char, is_removed};
        let Scratch {
            word,
            align,
            chars,
            char_align,
            ..
        } = s;
        chars.clear();
        char_align.clear();
        word.clear();
        align.clear();
        // Stage 1, one character at a time: clean_text (drop NUL, U+FFFD and controls first,
        // then whitespace to a space), then the CJK spacing (both spaces align to the
        // ideograph, as the general rewrite makes them).
        let mut plain = true;
        for (b, c) in chunk.char_indices() {
            let r = (base + b, base + b + c.len_utf8());
            let c = if self.clean_text {
                if is_removed(c) {
                    continue;
                }
                if is_bert_whitespace(c) {
                    ' '
                } else {
                    c
                }
            } else {
                c
            };
            // Below U+00C0 nothing decomposes and every combining class is 0.
            plain &= (c as u32) < 0xC0;
            if self.handle_chinese_chars && is_chinese_char(c) {
                chars.extend([' ', c, ' ']);
                if offsets {
                    char_align.extend([r, r, r]);
                }
            } else {
                chars.push(c);
                if offsets {
                    char_align.push(r);
                }
            }
        }
        let mut sink = WordSink {
            word,
            align,
            offsets,
        };
        let lowercase = self.lowercase;
        let mut out = |c: char, a: (usize, usize), sink: &mut WordSink<'_>| -> Result<(), E> {
            if lowercase && !c.is_ascii() {
                for l in crate::text::unicode::to_lowercase(c) {
                    sink.push(l, a, f)?;
                }
                Ok(())
            } else {
                sink.push(if lowercase { c.to_ascii_lowercase() } else { c }, a, f)
            }
        };
        use unicode_categories::UnicodeCategories;
        use unicode_normalization_alignments::{is_nfd_quick, IsNormalized, UnicodeNormalization};
        let strip = self.strip_accents && !plain;
        // Text the quick check finds in NFD comes back from NFD char for char with change 0
        // (nothing decomposes, the marks are already in order): the identity, so only the
        // mark removal remains.
        if strip && is_nfd_quick(chars.iter().copied()) != IsNormalized::Yes {
            // NFD as the general `transform` aligns it: a char with change 0 takes the range
            // of the next source char (positionally, so reordered marks swap ranges), one with
            // change 1 the range of the source char consumed last.
            let mut k = 0usize;
            for (c, change) in chars.iter().copied().nfd() {
                let a = if !offsets {
                    (0, 0)
                } else if change <= 0 {
                    k += 1;
                    char_align.get(k - 1).copied().unwrap_or((0, 0))
                } else {
                    k.checked_sub(1)
                        .and_then(|p| char_align.get(p))
                        .copied()
                        .unwrap_or((0, 0))
                };
                // strip_accents drops the nonspacing marks NFD leaves.
                if !c.is_ascii() && c.is_mark_nonspacing() {
                    continue;
                }
                out(c, a, &mut sink)?;
            }
        } else {
            for (j, &c) in chars.iter().enumerate() {
                if strip && !c.is_ascii() && c.is_mark_nonspacing() {
                    continue;
                }
                let a = char_align.get(j).copied().unwrap_or((0, 0));
                out(c, a, &mut sink)?;
            }
        }
        sink.flush(f)
    }
}

impl FastPath {
    /// Whether `for_each_piece` applies (the offset-keeping fast path).
    pub(crate) fn has_offsets(&self) -> bool {
        matches!(self, FastPath::Bert { .. })
    }

    /// ByteLevel: call `f` with the raw bytes of each word of `segment` (the regex matches,
    /// after the optional prefix space).
    pub(crate) fn for_each_byte_level_word<E>(
        add_prefix_space: bool,
        split: WordSplit,
        segment: &str,
        mut f: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let s = with_prefix_space(add_prefix_space, segment);
        let s = s.as_ref();
        // One loop per splitter, so that the splitter inlines into it.
        match split {
            WordSplit::Whole if s.is_empty() => Ok(()),
            WordSplit::Whole => f(s.as_bytes()),
            WordSplit::Gpt2 => each_match(s, crate::byte_level::gpt2_match_end_fast, f),
            WordSplit::Cl100k => each_match(s, crate::byte_level::cl100k_match_end_fast, f),
            WordSplit::Llama3 => each_match(s, crate::byte_level::llama3_match_end_fast, f),
            WordSplit::O200k => each_match(s, o200k::match_end_fast::<true, 3>, f),
            WordSplit::Tekken => each_match(s, o200k::match_end_fast::<false, 1>, f),
        }
    }
}

/// The segment with ByteLevel's prefix space, when it asks for one and there is none yet.
fn with_prefix_space(add_prefix_space: bool, segment: &str) -> std::borrow::Cow<'_, str> {
    if add_prefix_space && !segment.starts_with(' ') {
        std::borrow::Cow::Owned(format!(" {segment}"))
    } else {
        std::borrow::Cow::Borrowed(segment)
    }
}

impl FastPath {
    /// `for_each_byte_level_word` with each word's ids appended by `words` (and in one loop
    /// with the split, so that a cache hit is inline in the scanner's loop: no call per word).
    // The closures below are not redundant: see the comment on them.
    #[allow(clippy::redundant_closure)]
    pub(crate) fn byte_level_text_ids(
        add_prefix_space: bool,
        split: WordSplit,
        segment: &str,
        words: &mut crate::models::bpe::ByteLevelWords<'_>,
        out: &mut Vec<u32>,
    ) -> PwResult<()> {
        let s = with_prefix_space(add_prefix_space, segment);
        let s = s.as_ref();
        match split {
            WordSplit::Whole if s.is_empty() => Ok(()),
            WordSplit::Whole => words.ids(s.as_bytes(), out),
            // Closures, not the functions themselves: the call through a function item's
            // `Fn` shim is not inlined once the scanner is large.
            WordSplit::Gpt2 => each_word_ids(
                s,
                |w, lo, hi| crate::byte_level::gpt2_window_word(w, lo, hi),
                |s, p| crate::byte_level::gpt2_match_end_fast(s, p),
                words,
                out,
            ),
            WordSplit::Cl100k => each_word_ids(
                s,
                |w, lo, hi| crate::byte_level::cl100k_window_word(w, lo, hi),
                |s, p| crate::byte_level::cl100k_match_end_fast(s, p),
                words,
                out,
            ),
            WordSplit::Llama3 => each_word_ids(
                s,
                |w, lo, hi| crate::byte_level::cl100k_window_word(w, lo, hi),
                |s, p| crate::byte_level::llama3_match_end_fast(s, p),
                words,
                out,
            ),
            WordSplit::O200k => each_word_ids(
                s,
                |w, lo, hi| o200k::window_word::<true, 3>(w, lo, hi),
                |s, p| o200k::match_end_fast::<true, 3>(s, p),
                words,
                out,
            ),
            WordSplit::Tekken => each_word_ids(
                s,
                |w, lo, hi| o200k::window_word::<false, 1>(w, lo, hi),
                |s, p| o200k::match_end_fast::<false, 1>(s, p),
                words,
                out,
            ),
        }
    }
}

/// `each_match` calling `words.ids` on every match. Where sixteen bytes of `s` follow a
/// match start, `window` first tries to end the match inside them (see `gpt2_window_word`):
/// then the word's cache key comes from the same sixteen bytes, and a hit is one tight step.
#[inline(always)]
fn each_word_ids(
    s: &str,
    window: impl Fn(&[u8; 16], u64, u64) -> Option<usize>,
    match_end: impl Fn(&str, usize) -> usize,
    words: &mut crate::models::bpe::ByteLevelWords<'_>,
    out: &mut Vec<u32>,
) -> PwResult<()> {
    let bytes = s.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        if let Some(w) = bytes.get(pos..).and_then(<[u8]>::first_chunk::<16>) {
            let [lo, hi] = crate::models::bpe::ids_cache::window_words(w);
            if let Some(len) = window(w, lo, hi).filter(|&n| n > 0) {
                words.ids_window(bytes, pos, [lo, hi], len, out)?;
                pos += len;
                continue;
            }
        }
        let end = match_end(s, pos);
        // Matches end past `pos` and within `s`; the clamp (as `each_match`'s) is only the
        // fallback, so that the common case costs one slice check.
        let end = if pos < end && end <= bytes.len() {
            end
        } else {
            end.clamp(pos + 1, bytes.len())
        };
        words.ids_at(bytes, pos, end, out)?;
        pos = end;
    }
    Ok(())
}

/// Calls `f` on the consecutive matches of `s` (`match_end(s, pos)` ends the one at `pos`).
#[inline(always)]
fn each_match<E>(
    s: &str,
    match_end: impl Fn(&str, usize) -> usize,
    mut f: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let bytes = s.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        // Matches end on character boundaries past `pos` (at least one byte, at most the rest).
        let end = match_end(s, pos).clamp(pos + 1, bytes.len());
        f(bytes.get(pos..end).unwrap_or_default())?;
        pos = end;
    }
    Ok(())
}

/// The byte-level string of raw bytes (each byte one character), into `word`.
pub(crate) fn byte_level_string(raw: &[u8], word: &mut String) {
    word.clear();
    word.extend(raw.iter().map(|&b| crate::byte_level::byte_to_char(b)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_len_equals_char_is_whitespace() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let s = format!("{c}x");
            let want = if c.is_whitespace() { c.len_utf8() } else { 0 };
            assert_eq!(whitespace_len(s.as_bytes(), 0), want, "{c:?}");
        }
        assert_eq!(whitespace_len(b"", 0), 0);
        assert_eq!(whitespace_len(b"\xe2\x80", 0), 0);
    }

    /// The pieces the old way (split at `char::is_whitespace`, `▁` prepended, cut before
    /// every `▁`), against `for_each_meta_rest` with the `▁` put back.
    #[test]
    fn meta_rest_equals_split_then_metaspace() {
        fn reference(text: &str) -> Vec<String> {
            let mut out = Vec::new();
            for w in text.split(char::is_whitespace).filter(|w| !w.is_empty()) {
                let w = if w.starts_with('\u{2581}') {
                    w.to_string()
                } else {
                    format!("\u{2581}{w}")
                };
                let mut cur = String::new();
                for (i, c) in w.char_indices() {
                    if c == '\u{2581}' && i > 0 {
                        out.push(std::mem::take(&mut cur));
                    }
                    cur.push(c);
                }
                out.push(cur);
            }
            out
        }
        let alphabet: Vec<char> =
            "ab \t\n▁é中\u{3000}\u{2009}\u{85}\u{a0}\u{2581}\u{2582}\u{1680}\u{200b}ᚁあ©\u{3001}"
                .chars()
                .collect();
        let mut next = crate::test_rng(0xabcd_ef01);
        for _ in 0..20_000 {
            let len = (next() % 14) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let mut got = Vec::new();
            for_each_meta_rest(&text, |r| {
                got.push(format!("\u{2581}{r}"));
                Ok(())
            })
            .unwrap();
            assert_eq!(got, reference(&text), "{text:?}");
        }
    }

    /// `ascii_meta_words` against `keeps_words` + splitting at whitespace, with the T5
    /// charsmap's classes (control characters are removed, tab and newlines become spaces).
    #[test]
    fn ascii_meta_words_equal_keeps_words_then_split() {
        use crate::normalizers::{Normalizer, ASCII_OTHER, ASCII_SPACE, ASCII_WORD};
        let mut classes = [ASCII_WORD; 128];
        for b in 0..128u8 {
            if (b as char).is_whitespace() && b != 0x0b {
                classes[usize::from(b)] = ASCII_SPACE;
            } else if b < 0x20 && b != 0 || b == 0x7f {
                classes[usize::from(b)] = ASCII_OTHER;
            }
        }
        let dir = crate::test_data_dir();
        let t5 = std::fs::read_to_string(format!("{dir}/t5-small/tokenizer.json"))
            .ok()
            .and_then(|j| serde_json::from_str::<Value>(&j).ok())
            .and_then(|v| {
                crate::normalizers::Precompiled::from_bytes(
                    &base64::Engine::decode(
                        &base64::engine::general_purpose::STANDARD,
                        v["normalizer"]["precompiled_charsmap"].as_str()?,
                    )
                    .ok()?,
                )
                .ok()
            });
        if let Some(t5) = &t5 {
            assert_eq!(t5.ascii_word_classes(), Some(&classes));
        }
        let alphabet = b"ab \t\n\r\x0b\x0c\x01\x00\x7f\x1c";
        let mut next = crate::test_rng(0x1234_5678);
        for _ in 0..20_000 {
            let len = (next() % 10) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize] as char)
                .collect();
            let mut got = Vec::new();
            let kept = ascii_meta_words(&text, &classes, |w| {
                got.push(w.to_string());
                Ok(())
            })
            .unwrap();
            let keeps = text.bytes().all(|b| classes[usize::from(b)] != ASCII_OTHER)
                && !text.contains("\r\n");
            assert_eq!(kept, keeps, "{text:?}");
            if let Some(t5) = &t5 {
                assert_eq!(kept, t5.keeps_words(&text), "{text:?}");
            }
            if kept {
                let want: Vec<&str> = text
                    .split(char::is_whitespace)
                    .filter(|w| !w.is_empty())
                    .collect();
                assert_eq!(got, want, "{text:?}");
            }
        }
    }
    use crate::normalizers::bert::BertNormalizer;
    use crate::normalizers::Normalizer;
    use crate::pre_tokenizers::bert::BertPreTokenizer;
    use crate::pre_tokenizers::PreTokenizer;
    use crate::text::{NormalizedString, PreTokenizedString, Split};
    use crate::tokenizer::InputSequence;
    use crate::Tokenizer;

    const LOWER: BertFlags = BertFlags {
        clean_text: true,
        handle_chinese_chars: true,
        strip_accents: true,
        lowercase: true,
    };

    fn pieces(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut s = Scratch::default();
        FastPath::Bert(LOWER)
            .for_each_piece::<()>(text, &mut s, true, |p, w| {
                let (a, b) = p.original((0, w.len()));
                out.push(format!("{w}@{a}..{b}"));
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn word_scan_equals_byte_classes() {
        for x in 0..=255u8 {
            for y in [0u8, b'a', b'Z', b'0', b'@', b'[', 0x80, 0xff] {
                let block = [y, x, y, x, x, y, 0x7f, x];
                let m = non_word_bytes(u64::from_le_bytes(block)).to_le_bytes();
                for (j, &c) in block.iter().enumerate() {
                    assert_eq!(
                        m[j] == 0x80,
                        BYTE_CLASS[usize::from(c)] != WORD,
                        "{block:?}"
                    );
                    assert_eq!(m[j] & 0x7f, 0);
                }
                let text = [
                    b'a', b'b', x, b'c', b'd', b'e', b'f', b'g', b'h', b'i', x, y,
                ];
                for i in 0..text.len() {
                    let plain = (i..text.len())
                        .find(|&k| BYTE_CLASS[usize::from(text[k])] != WORD)
                        .unwrap_or(text.len());
                    assert_eq!(ascii_word_end(&text, i), plain.max(i), "{text:?} {i}");
                }
            }
        }
    }

    #[test]
    fn splits_ascii_words_and_punctuation() {
        assert_eq!(
            pieces("Hey friend!  How?"),
            vec![
                "hey@0..3",
                "friend@4..10",
                "!@10..11",
                "how@13..16",
                "?@16..17"
            ]
        );
    }

    #[test]
    fn non_ascii_words_keep_their_original_span() {
        // "Café" is 5 bytes; the NUL is dropped and joins its neighbours; 中 stands alone.
        assert_eq!(
            pieces("a Café\u{0}x 中b"),
            vec!["a@0..1", "cafex@2..9", "中@10..13", "b@13..14"]
        );
    }

    /// Characters chosen to break a wrong fast path: accents precomposed and combining (with
    /// marks of different classes, so NFD reorders them), CJK (unified, compatibility, astral),
    /// Greek/Cyrillic/Turkish casing, controls and format characters, astral letters and
    /// symbols, every Unicode whitespace, ASCII and Unicode punctuation.
    const ALPHABET: &str = concat!(
        "abcABCxX09é中!.,[]#$'",
        "\u{301}\u{316}\u{323}\u{344}\u{345}\u{e31}\u{f73}\u{1ebf}\u{1e9e}ÅÉèñü\u{212b}\u{2126}\u{212a}",
        "\u{f900}\u{2f800}\u{20000}\u{4e00}\u{3400}한가ぁア",
        "İıIißΣσςΩЖжЁё\u{1c5}ﬁ",
        "\u{0}\u{1}\u{1f}\u{7f}\u{85}\u{ad}\u{200b}\u{200d}\u{feff}\u{e000}\u{fffd}\u{e0001}",
        "𝔸😀𐐀𐐨",
        "\t\n\u{b}\u{c}\r \u{a0}\u{1680}\u{2000}\u{2001}\u{2002}\u{2003}\u{2004}\u{2005}",
        "\u{2006}\u{2007}\u{2008}\u{2009}\u{200a}\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}",
        "¿¡«»\u{2014}\u{3002}\u{ff01}§¶\u{55a}",
        // Marks NFD keeps with a nonzero combining class (spacing, or inside a decomposition):
        // the ids path hands their chunks to the general walk.
        "\u{302e}\u{1d165}\u{1d15e}"
    );

    /// Deterministic texts over `ALPHABET` (xorshift, so the test needs no dependency).
    fn texts(n: usize, seed: u64) -> Vec<String> {
        let alphabet: Vec<char> = ALPHABET.chars().collect();
        let mut next = crate::test_rng(seed | 1);
        (0..n)
            .map(|_| {
                let len = (next() % 40) as usize;
                (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect()
    }

    fn all_flags() -> Vec<BertFlags> {
        (0..16u8)
            .map(|m| BertFlags {
                clean_text: m & 1 != 0,
                handle_chinese_chars: m & 2 != 0,
                strip_accents: m & 4 != 0,
                lowercase: m & 8 != 0,
            })
            .collect()
    }

    /// Words and their per-byte original ranges from the general normalizer and pre-tokenizer.
    fn general(f: BertFlags, text: &str) -> Vec<(String, Vec<(usize, usize)>)> {
        let norm = BertNormalizer {
            clean_text: f.clean_text,
            handle_chinese_chars: f.handle_chinese_chars,
            strip_accents: Some(f.strip_accents),
            lowercase: f.lowercase,
        };
        let mut n = NormalizedString::from(text);
        norm.normalize(&mut n).unwrap();
        let mut pts = PreTokenizedString::from_splits(vec![Split::from(n)]);
        BertPreTokenizer.pre_tokenize(&mut pts).unwrap();
        pts.splits
            .iter()
            .map(|s| {
                let n = &s.normalized;
                let shift = n.offsets_original().0;
                let al = n
                    .alignments()
                    .iter()
                    .map(|&(a, b)| (shift.wrapping_add(a), shift.wrapping_add(b)))
                    .collect();
                (n.get().to_string(), al)
            })
            .collect()
    }

    fn fast(f: BertFlags, text: &str, offsets: bool) -> Vec<(String, Vec<(usize, usize)>)> {
        let mut out = Vec::new();
        let mut s = Scratch::default();
        FastPath::Bert(f)
            .for_each_piece::<()>(text, &mut s, offsets, |p, w| {
                let al = if !offsets {
                    Vec::new()
                } else if p.align.is_empty() {
                    (0..w.len())
                        .map(|i| (p.start + i, p.start + i + 1))
                        .collect()
                } else {
                    p.align.to_vec()
                };
                out.push((w.to_string(), al));
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn words_and_alignments_equal_general_pipeline() {
        for f in all_flags() {
            for t in texts(3000, 0x2545_f491_4f6c_dd1d) {
                let g = general(f, &t);
                assert_eq!(fast(f, &t, true), g, "{f:?} {t:?}");
                let words: Vec<_> = g.into_iter().map(|(w, _)| (w, Vec::new())).collect();
                assert_eq!(fast(f, &t, false), words, "{f:?} {t:?}");
            }
        }
    }

    /// A WordPiece tokenizer.json whose vocabulary holds single characters of the alphabet and
    /// their normalized forms (each also as a continuation), so words split inside and tokens'
    /// offsets go through the alignment; `wrap` puts the normalizer and pre-tokenizer in a
    /// one-element Sequence, which keeps the same pipeline but no fast path.
    fn tokenizer(f: BertFlags, wrap: bool) -> Tokenizer {
        tokenizer_with(f, wrap, &[])
    }

    fn tokenizer_with(f: BertFlags, wrap: bool, extra: &[&str]) -> Tokenizer {
        let mut vocab = serde_json::Map::new();
        for &t in [
            "[UNK]", "[CLS]", "ab", "##bc", "ca", "caf", "##e", "ж", "##ё",
        ]
        .iter()
        .chain(extra)
        {
            let n = vocab.len();
            vocab.insert(t.to_string(), Value::from(n));
        }
        let mut chars: Vec<char> = ALPHABET.chars().collect();
        for c in ALPHABET.chars() {
            chars.extend(c.to_lowercase());
        }
        for c in chars.into_iter().step_by(2) {
            for t in [c.to_string(), format!("##{c}")] {
                let n = vocab.len();
                vocab.entry(t).or_insert(Value::from(n));
            }
        }
        let mut norm = serde_json::json!({"type": "BertNormalizer", "clean_text": f.clean_text,
            "handle_chinese_chars": f.handle_chinese_chars, "strip_accents": f.strip_accents,
            "lowercase": f.lowercase});
        let mut pre = serde_json::json!({"type": "BertPreTokenizer"});
        if wrap {
            norm = serde_json::json!({"type": "Sequence", "normalizers": [norm]});
            pre = serde_json::json!({"type": "Sequence", "pretokenizers": [pre]});
        }
        let json = serde_json::json!({
            "version": "1.0",
            "added_tokens": [
                {"id": 1, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
            ],
            "normalizer": norm,
            "pre_tokenizer": pre,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 12, "vocab": vocab}
        });
        assert_eq!(
            FastPath::detect(&json),
            (!wrap).then_some(FastPath::Bert(f))
        );
        Tokenizer::from_json_str(&json.to_string()).unwrap()
    }

    /// Texts for the ids path: ASCII words around the word cache's and the stack buffer's
    /// length limits, in mixed case, with punctuation, controls, whitespace and the
    /// alphabet's characters between them.
    fn ids_texts(n: usize, seed: u64) -> Vec<String> {
        let alphabet: Vec<char> = ALPHABET.chars().collect();
        let words = [
            "the".to_string(),
            "The".into(),
            "THE".into(),
            "abc".into(),
            "ABCab".into(),
            "Café".into(),
            "caf".into(),
            "bcbcbcbcbcbcbcb".into(),
            "Abcabcabcabcabca".into(),
            "abcabcabcabcabcab".into(),
            "ab".repeat(33),
            "Q9".repeat(40),
            "ЖЁж".into(),
        ];
        let seps = [
            " ", " ", ".", ",", "\t", "", "\u{b}", "\u{0}", "\u{a0}", "'", "\r\n",
        ];
        let mut rng = crate::test_rng(seed | 1);
        let mut next = move || rng() as usize;
        (0..n)
            .map(|_| {
                let mut t = String::new();
                for _ in 0..next() % 12 {
                    match next() % 4 {
                        0 => t.push(alphabet[next() % alphabet.len()]),
                        _ => t.push_str(&words[next() % words.len()]),
                    }
                    t.push_str(seps[next() % seps.len()]);
                }
                t
            })
            .collect()
    }

    /// The ids path (byte classes, word cache, per-character maps) against the general
    /// pipeline, each text twice so that the second pass is served from the word cache, with
    /// two models of different vocabularies interleaved on the same thread (their caches must
    /// stay apart).
    #[test]
    fn wordpiece_ids_equal_general_pipeline() {
        let extra = [
            "the",
            "##he",
            "abc",
            "##abc",
            "bcbcbcbcbcbcbcb",
            "##ab",
            "q9",
            "##q9",
        ];
        for f in all_flags() {
            let models = [
                (tokenizer(f, false), tokenizer(f, true)),
                (
                    tokenizer_with(f, false, &extra),
                    tokenizer_with(f, true, &extra),
                ),
            ];
            let texts = ids_texts(400, 0x51_7cc1_b727_220a);
            for t in texts.iter().chain(&texts) {
                for (fast, slow) in &models {
                    let (mut x, mut y) = (Vec::new(), Vec::new());
                    fast.encode_ids(t, false, &mut x).unwrap();
                    slow.encode_ids(t, false, &mut y).unwrap();
                    assert_eq!(x, y, "{f:?} {t:?}");
                }
            }
        }
    }

    #[test]
    fn char_maps_cover_every_bmp_char_as_char_ops_does() {
        for f in all_flags() {
            for block in 0..256u32 {
                let b = f.char_block(block);
                for lo in 0..256u32 {
                    let Some(c) = char::from_u32(block << 8 | lo) else {
                        continue;
                    };
                    let e = b.map[lo as usize];
                    let got = match e {
                        E_COMPLEX => None,
                        E_REMOVED => Some(Vec::new()),
                        e if e >= E_MULTI => {
                            let (i, n) = (((e & 0xFF_FFFF) >> 3) as usize, (e & 7) as usize);
                            Some(b.multi[i][..n].to_vec())
                        }
                        op => Some(vec![op]),
                    };
                    let want = f.char_ops(c).map(|(ops, n)| ops[..n].to_vec());
                    // Compared by what `apply_op` does with them: `None` ends the word, `Some`
                    // adds a character; ending an already ended word does nothing.
                    let effect = |ops: Vec<u32>| {
                        let mut ev: Vec<Option<u32>> = Vec::new();
                        for op in ops {
                            let c = op & 0xFF_FFFF;
                            match op & 0xFF00_0000 {
                                OP_CHAR => ev.push(Some(c)),
                                OP_PUNCT => ev.extend([None, Some(c), None]),
                                _ => ev.push(None),
                            }
                        }
                        ev.dedup_by(|a, b| a.is_none() && b.is_none());
                        ev
                    };
                    assert_eq!(got.map(effect), want.map(effect), "{f:?} {c:?}");
                }
            }
        }
    }

    /// The flat map, its blocks built in a scrambled order, resolves every BMP character to
    /// the ops of `char_block`.
    #[test]
    fn flat_char_map_equals_char_blocks() {
        let ops_of = |e: u32, multi: &[[u32; MAX_OPS]]| -> Option<Vec<u32>> {
            match e {
                E_COMPLEX => None,
                E_REMOVED => Some(Vec::new()),
                e if e >> 24 == E_MULTI >> 24 => {
                    let (i, n) = (((e & 0xFF_FFFF) >> 3) as usize, (e & 7) as usize);
                    Some(multi[i][..n].to_vec())
                }
                op => Some(vec![op]),
            }
        };
        for f in all_flags() {
            let mut m = CharMap::new();
            for k in 0..256u32 {
                let block = (k * 97 + 13) % 256;
                let b = f.char_block(block);
                for lo in 0..256u32 {
                    let cp = block << 8 | lo;
                    let got = ops_of(m.entry(&f, cp), &m.multi);
                    assert_eq!(got, ops_of(b.map[lo as usize], &b.multi), "{f:?} {cp:x}");
                }
            }
        }
    }

    #[test]
    fn encodings_equal_general_pipeline() {
        for f in all_flags() {
            let (fast, slow) = (tokenizer(f, false), tokenizer(f, true));
            for mut t in texts(1500, 0x9e37_79b9_7f4a_7c15) {
                let mid = t
                    .char_indices()
                    .nth(t.chars().count() / 2)
                    .map_or(0, |x| x.0);
                t.insert_str(mid, "[CLS]");
                let a = fast.encode(InputSequence::Raw(&t), None, false).unwrap();
                let b = slow.encode(InputSequence::Raw(&t), None, false).unwrap();
                assert_eq!(a, b, "{f:?} {t:?}");
                let (mut x, mut y) = (Vec::new(), Vec::new());
                fast.encode_ids(&t, false, &mut x).unwrap();
                slow.encode_ids(&t, false, &mut y).unwrap();
                assert_eq!(x, y, "{f:?} {t:?}");
            }
        }
    }
}
