//! Fast paths for common pipelines, exact by construction.
//!
//! The general pipeline builds a `NormalizedString` (text plus a per-byte alignment) for every
//! word. For the pipelines most users run, almost all text is ASCII words between ASCII
//! whitespace, where every stage is the identity or a byte-for-byte map. A fast path cuts the
//! text at ASCII whitespace into chunks; an ASCII chunk is normalized and split right here,
//! without alignments; any other chunk goes through the general pipeline on its own. This is
//! exact only when the general pipeline is *chunk-separable* at ASCII whitespace (no stage looks
//! across a whitespace character), which `FastPath::detect` checks from the configuration.

use serde_json::Value;

/// What the fast path knows about the pipeline's normalizer and pre-tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FastPath {
    /// BertNormalizer (any flags) + BertPreTokenizer: ASCII words are lowercased (if asked)
    /// and split at ASCII punctuation, each punctuation character a word of its own.
    Bert { lowercase: bool },
    /// No normalizer + the ByteLevel pre-tokenizer (GPT-2, RoBERTa, Phi-2, Whisper): for ids,
    /// each regex word is mapped to byte-level characters in a scratch buffer and handed to the
    /// model, with no alignment kept.
    ByteLevel {
        add_prefix_space: bool,
        use_regex: bool,
    },
    /// Spaces become `▁` and a `▁` is prepended, then the model sees each piece between added
    /// tokens whole: the Llama normalizer `Sequence[Prepend("▁"), Replace(" ", "▁")]` with no
    /// pre-tokenizer, or no normalizer and `Metaspace(split: false)` (Mistral). For ids, the
    /// escaped piece is built in a scratch buffer with no alignment kept.
    Meta { prepend: MetaPrepend },
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

/// The `▁`-escaped form of `piece` (spaces replaced, `▁` prepended when asked), into `buf`.
pub(crate) fn meta_escape(piece: &str, prepend: bool, buf: &mut String) {
    buf.clear();
    if prepend {
        buf.push('\u{2581}');
    }
    let mut rest = piece;
    while let Some(i) = rest.find(' ') {
        buf.push_str(&rest[..i]);
        buf.push('\u{2581}');
        rest = &rest[i + 1..];
    }
    buf.push_str(rest);
}

impl FastPath {
    /// The fast path a tokenizer.json document allows, if any.
    pub(crate) fn detect(json: &Value) -> Option<FastPath> {
        let norm = json.get("normalizer")?;
        let pre = json.get("pre_tokenizer")?;
        if let Some(meta) = detect_meta(norm, pre) {
            return Some(meta);
        }
        if norm.is_null() && pre.get("type")?.as_str()? == "ByteLevel" {
            // The reader already refused a ByteLevel without its fields.
            return Some(FastPath::ByteLevel {
                add_prefix_space: pre.get("add_prefix_space")?.as_bool()?,
                use_regex: pre
                    .get("use_regex")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            });
        }
        if norm.get("type")?.as_str()? != "BertNormalizer"
            || pre.get("type")?.as_str()? != "BertPreTokenizer"
        {
            return None;
        }
        let lowercase = norm
            .get("lowercase")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        Some(FastPath::Bert { lowercase })
    }
}

/// A piece of one input segment, in the order the general pipeline would produce words.
pub(crate) enum Piece {
    /// An ASCII word, already normalized into the scratch buffer; `start` is its byte offset
    /// in the segment (normalized and original bytes correspond one to one).
    Word { start: usize },
    /// A chunk the general pipeline must handle: bytes `start..end` of the segment.
    Slow { start: usize, end: usize },
}

/// The ASCII characters BertNormalizer turns into a space. VT and FF are whitespace but also
/// controls, and clean_text drops controls first, so they join their neighbours instead.
#[inline]
fn is_ascii_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl FastPath {
    /// Walk `segment`, calling `f` for each piece; for `Piece::Word` the normalized word is in
    /// `word`.
    pub(crate) fn for_each_piece<E>(
        &self,
        segment: &str,
        word: &mut String,
        mut f: impl FnMut(Piece, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        let FastPath::Bert { lowercase } = *self else {
            // Only the BERT path walks pieces with offsets; callers check `has_offsets`.
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
            while i < bytes.len() && !is_ascii_ws(bytes[i]) {
                let b = bytes[i];
                // Non-ASCII, and ASCII controls (which clean_text drops), take the slow road.
                if !(0x21..0x7f).contains(&b) {
                    simple = false;
                }
                i += 1;
            }
            if !simple {
                f(Piece::Slow { start, end: i }, word)?;
                continue;
            }
            let mut w = start;
            for j in start..i {
                if bytes[j].is_ascii_punctuation() {
                    if w < j {
                        fill(word, &bytes[w..j], lowercase);
                        f(Piece::Word { start: w }, word)?;
                    }
                    fill(word, &bytes[j..j + 1], false);
                    f(Piece::Word { start: j }, word)?;
                    w = j + 1;
                }
            }
            if w < i {
                fill(word, &bytes[w..i], lowercase);
                f(Piece::Word { start: w }, word)?;
            }
        }
        Ok(())
    }
}

impl FastPath {
    /// Whether `for_each_piece` applies (the offset-keeping fast path).
    pub(crate) fn has_offsets(&self) -> bool {
        matches!(self, FastPath::Bert { .. })
    }

    /// ByteLevel: call `f` with the raw bytes of each word of `segment` (the GPT-2 regex
    /// matches, after the optional prefix space).
    pub(crate) fn for_each_byte_level_word<E>(
        add_prefix_space: bool,
        use_regex: bool,
        segment: &str,
        mut f: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let prefixed;
        let s = if add_prefix_space && !segment.starts_with(' ') {
            prefixed = format!(" {segment}");
            prefixed.as_str()
        } else {
            segment
        };
        if !use_regex {
            return if s.is_empty() {
                Ok(())
            } else {
                f(s.as_bytes())
            };
        }
        let mut pos = 0;
        while pos < s.len() {
            let end = crate::byte_level::gpt2_match_end(s, pos);
            f(&s.as_bytes()[pos..end])?;
            pos = end;
        }
        Ok(())
    }
}

/// The byte-level string of raw bytes (each byte one character), into `word`.
pub(crate) fn byte_level_string(raw: &[u8], word: &mut String) {
    word.clear();
    word.extend(raw.iter().map(|&b| crate::byte_level::byte_to_char(b)));
}

#[inline]
fn fill(word: &mut String, src: &[u8], lowercase: bool) {
    word.clear();
    // `src` is printable ASCII, so each byte is a char.
    for &b in src {
        word.push(if lowercase { b.to_ascii_lowercase() } else { b } as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        FastPath::Bert { lowercase: true }
            .for_each_piece::<()>(text, &mut word, |p, w| {
                out.push(match p {
                    Piece::Word { start } => format!("{w}@{start}"),
                    Piece::Slow { start, end } => format!("slow:{}", &text[start..end]),
                });
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn splits_ascii_words_and_punctuation() {
        assert_eq!(
            pieces("Hey friend!  How?"),
            vec!["hey@0", "friend@4", "!@10", "how@13", "?@16"]
        );
    }

    #[test]
    fn non_ascii_and_controls_go_slow() {
        assert_eq!(
            pieces("a café\u{1}x b"),
            vec!["a@0", "slow:café\u{1}x", "b@10"]
        );
        assert_eq!(pieces("a\u{1}b"), vec!["slow:a\u{1}b"]);
    }
}
