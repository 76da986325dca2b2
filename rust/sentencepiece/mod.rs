//! The sentencepiece processor: a `.model` or `.spm` vocabulary run exactly as the
//! sentencepiece library runs it (its normalizer, Unigram / BPE / WORD / CHAR segmentation,
//! byte fallback, offsets, decoding).
//!
//! Pipeline (as `SentencePieceProcessor::Encode`): normalize (with a byte map back to the
//! original text) → segment the whole normalized string → turn the segmentation into tokens:
//! each piece's span is mapped back through the byte map; consecutive unknown pieces fuse into
//! one; with byte fallback an unknown piece becomes one `<0xXX>` piece per UTF-8 byte, all but
//! the last zero-width at the character's start.

pub mod bpe;
mod bpe_tables;
pub mod normalizer;
pub mod simple;
pub mod trie;
pub mod unigram;
pub mod vocab;

use crate::charsmap::CharsMap;
use crate::error::{Error, Result};
pub use crate::formats::sentencepiece::ModelType;
use crate::formats::sentencepiece::{self as proto, ModelData, NormalizerSettings};
use normalizer::{valid_char_len, SpNormalizer, SPACE_SYMBOL};
use simple::{PieceLookup, SpChar, SpWord};
use std::borrow::Cow;
use std::sync::Arc;
use trie::ByteTrie;
use vocab::{PieceEntry, PieceType, Segmenter, SpPiece};

/// One token: its id and the BYTE span of the original text it covers, exactly as
/// sentencepiece's serialized `SentencePieceText` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpToken {
    pub id: u32,
    pub begin: usize,
    pub end: usize,
}

/// How to run a `.spm` vocabulary (which carries no settings of its own). The default is
/// Gemma 3's: BPE, no dummy prefix, whitespace kept, byte fallback.
#[derive(Debug, Clone, PartialEq)]
pub struct SpmOptions {
    pub model_type: ModelType,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    pub byte_fallback: bool,
    /// Extra (piecework): `escape_whitespaces` (default true).
    pub escape_whitespaces: bool,
    /// Extra (piecework): `treat_whitespace_as_suffix` (default false).
    pub treat_whitespace_as_suffix: bool,
    /// Extra (piecework): a compiled `precompiled_charsmap` (default empty: identity).
    pub precompiled_charsmap: Vec<u8>,
}

impl Default for SpmOptions {
    fn default() -> Self {
        SpmOptions {
            model_type: ModelType::Bpe,
            add_dummy_prefix: false,
            remove_extra_whitespaces: false,
            byte_fallback: true,
            escape_whitespaces: true,
            treat_whitespace_as_suffix: false,
            precompiled_charsmap: Vec::new(),
        }
    }
}

pub struct SentencePiece {
    data: ModelData,
    lookup: Arc<PieceLookup>,
    normalizer: SpNormalizer,
    denormalizer: Option<SpNormalizer>,
    segmenter: Box<dyn Segmenter>,
    /// The BPE segmenter again (shared with `segmenter`), for the ids-only path.
    bpe: Option<Arc<bpe::SpBpe>>,
    /// The Unigram segmenter again, for its ids-only shortcut.
    unigram: Option<Arc<unigram::SpUnigram>>,
    /// Each piece's type, packed (read once per token on the hot path).
    kinds: Vec<PieceType>,
    unk_id: u32,
    /// The id of `<0xXX>` for every byte, when byte fallback is on.
    byte_ids: Option<Box<[u32; 256]>>,
    /// The bytes this was loaded from, returned as they are by `to_model_bytes`.
    original: Option<Vec<u8>>,
    /// Whether a batch may cut a text after any `\n` (`crate::cuts`, where the argument is).
    newline_cuts: bool,
}

impl std::fmt::Debug for SentencePiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentencePiece")
            .field("model_type", &self.data.model_type)
            .field("pieces", &self.data.pieces.len())
            .finish()
    }
}

/// The byte a `<0xXX>` piece stands for (uppercase hex, exactly two digits).
fn piece_to_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
    {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn make_normalizer(
    s: &NormalizerSettings,
    treat_ws_as_suffix: bool,
    user_defined: Option<ByteTrie>,
) -> Result<SpNormalizer> {
    let mut n = SpNormalizer {
        charsmap: CharsMap::parse(&s.precompiled_charsmap)
            .map_err(|e| e.context("normalizer_spec"))?,
        user_defined,
        add_dummy_prefix: s.add_dummy_prefix,
        remove_extra_whitespaces: s.remove_extra_whitespaces,
        escape_whitespaces: s.escape_whitespaces,
        treat_whitespace_as_suffix: treat_ws_as_suffix,
        ascii_plain: 0,
        ascii_plain_before_ascii: 0,
        ud_free_lead: [0; 4],
        bmp_plain: Default::default(),
        word_class: Default::default(),
        word_weak_next: 0,
    };
    n.prepare();
    Ok(n)
}

/// Whether every `\n` of a text may be a cut (`crate::cuts::Rule::any`; the argument is
/// there): BPE, an identity normalizer that adds its dummy prefix (if any) at the start, no
/// piece but `\n` itself with a `\n` in it, and the `\n` a piece or a byte.
fn newline_cuts_exact(data: &ModelData) -> bool {
    let n = &data.normalizer;
    let identity = n.precompiled_charsmap.is_empty()
        && !n.remove_extra_whitespaces
        && !data.treat_whitespace_as_suffix;
    let mut newline_piece = false;
    for p in &data.pieces {
        if p.piece == "\n" {
            newline_piece = matches!(p.kind, PieceType::Normal | PieceType::UserDefined);
        } else if p.piece.contains('\n') {
            return false;
        }
    }
    data.model_type == ModelType::Bpe && identity && (data.byte_fallback || newline_piece)
}

impl Segmenter for Arc<bpe::SpBpe> {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        self.as_ref().segment(normalized, out)
    }
}

impl Segmenter for Arc<unigram::SpUnigram> {
    fn segment(&self, normalized: &str, out: &mut Vec<SpPiece>) -> Result<()> {
        self.as_ref().segment(normalized, out)
    }
}

impl SentencePiece {
    /// Load a serialized `ModelProto` (a `.model` file's bytes).
    pub fn from_model_bytes(bytes: &[u8]) -> Result<Self> {
        let data = proto::parse_model(bytes)?;
        let mut sp = Self::from_data(data)?;
        sp.original = Some(bytes.to_vec());
        sp.self_test()?;
        Ok(sp)
    }

    /// Load a `.spm` text vocabulary, run with `opts`.
    pub fn from_spm_text(text: &str, opts: &SpmOptions) -> Result<Self> {
        let pieces = crate::formats::spm_text::parse_spm(text)?;
        let data = ModelData {
            pieces,
            model_type: opts.model_type,
            byte_fallback: opts.byte_fallback,
            treat_whitespace_as_suffix: opts.treat_whitespace_as_suffix,
            unk_surface: None,
            unk_piece: "<unk>".into(),
            bos_piece: "<s>".into(),
            eos_piece: "</s>".into(),
            pad_piece: "<pad>".into(),
            normalizer: NormalizerSettings {
                name: if opts.precompiled_charsmap.is_empty() {
                    "identity".into()
                } else {
                    String::new()
                },
                precompiled_charsmap: opts.precompiled_charsmap.clone(),
                add_dummy_prefix: opts.add_dummy_prefix,
                remove_extra_whitespaces: opts.remove_extra_whitespaces,
                escape_whitespaces: opts.escape_whitespaces,
            },
            denormalizer: None,
            self_test: Vec::new(),
        };
        Self::from_data(data)
    }

    /// Build from validated model data, with the reference's load-time checks
    /// (`ModelInterface::InitializePieces`).
    pub fn from_data(data: ModelData) -> Result<Self> {
        let mut lookup = PieceLookup::default();
        let mut unk: Option<u32> = None;
        let mut ud_keys: Vec<(&[u8], u32)> = Vec::new();
        let mut byte_ids = [u32::MAX; 256];
        // BPE keeps every piece in one map (a string may not repeat across types); the other
        // models keep CONTROL / UNKNOWN / BYTE apart.
        let one_map = data.model_type == ModelType::Bpe;
        for (i, p) in data.pieces.iter().enumerate() {
            let id = i as u32;
            if p.piece.is_empty() {
                return Err(Error::invalid(format!("piece {i}: empty piece")));
            }
            if p.kind == PieceType::Unused && p.piece == "\0" {
                continue; // a placeholder the reference skips
            }
            if p.piece.contains('\0') {
                return Err(Error::invalid(format!(
                    "piece {i}: piece must not include a NUL character"
                )));
            }
            let normal = matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            );
            let map = if normal || one_map {
                &mut lookup.normal
            } else {
                &mut lookup.reserved
            };
            if map.insert(p.piece.clone(), id).is_some() {
                return Err(Error::invalid(format!(
                    "piece {i}: `{}` is already defined",
                    p.piece
                )));
            }
            match p.kind {
                PieceType::UserDefined => ud_keys.push((p.piece.as_bytes(), id)),
                PieceType::Unused => {
                    lookup.unused.insert(id);
                }
                PieceType::Unknown => {
                    if unk.is_some() {
                        return Err(Error::invalid(format!(
                            "piece {i}: a second UNKNOWN piece (unk is already defined)"
                        )));
                    }
                    unk = Some(id);
                }
                PieceType::Byte => {
                    if !data.byte_fallback {
                        return Err(Error::invalid(format!(
                            "piece {i}: byte piece `{}` is found although `byte_fallback` is false",
                            p.piece
                        )));
                    }
                    let b = piece_to_byte(&p.piece).ok_or_else(|| {
                        Error::invalid(format!("piece {i}: byte piece `{}` is invalid", p.piece))
                    })?;
                    byte_ids[b as usize] = id;
                }
                _ => {}
            }
        }
        // Without byte fallback an UNKNOWN piece is required; with it, unknown characters
        // always become bytes, and the model may have none.
        let unk_id = match unk {
            Some(u) => u,
            None if data.byte_fallback => unigram::NO_UNK,
            None => {
                return Err(Error::invalid(
                    "the model has no UNKNOWN piece (unk is not defined)",
                ))
            }
        };
        lookup.unk_id = unk_id;
        let byte_ids = if data.byte_fallback {
            if byte_ids.contains(&u32::MAX) {
                return Err(Error::invalid(
                    "there are not 256 byte pieces although `byte_fallback` is true",
                ));
            }
            Some(Box::new(byte_ids))
        } else {
            None
        };
        let user_defined = if ud_keys.is_empty() {
            None
        } else {
            Some(ByteTrie::build(ud_keys))
        };
        let normalizer = make_normalizer(
            &data.normalizer,
            data.treat_whitespace_as_suffix,
            user_defined.clone(),
        )?;
        let denormalizer = match &data.denormalizer {
            Some(d) => {
                Some(make_normalizer(d, false, None).map_err(|e| e.context("denormalizer_spec"))?)
            }
            None => None,
        };
        let lookup = Arc::new(lookup);
        let bpe = match data.model_type {
            // The one map of a BPE model (no string twice) serves the segmenter too.
            ModelType::Bpe => Some(Arc::new(bpe::SpBpe::with_lookup(
                &data.pieces,
                unk_id,
                data.byte_fallback,
                &lookup,
            )?)),
            _ => None,
        };
        let unigram = match data.model_type {
            ModelType::Unigram => Some(Arc::new(unigram::SpUnigram::new(&data.pieces, unk_id)?)),
            _ => None,
        };
        let segmenter: Box<dyn Segmenter> = match data.model_type {
            ModelType::Unigram => match &unigram {
                Some(u) => Box::new(u.clone()),
                None => return Err(Error::other("sentencepiece Unigram: segmenter missing")),
            },
            ModelType::Bpe => match &bpe {
                Some(b) => Box::new(b.clone()),
                None => return Err(Error::other("sentencepiece BPE: segmenter missing")),
            },
            ModelType::Word => Box::new(SpWord {
                lookup: lookup.clone(),
            }),
            ModelType::Char => Box::new(SpChar {
                lookup: lookup.clone(),
                user_defined,
            }),
        };
        let kinds = data.pieces.iter().map(|p| p.kind).collect();
        let newline_cuts = newline_cuts_exact(&data);
        Ok(SentencePiece {
            data,
            lookup,
            normalizer,
            denormalizer,
            segmenter,
            bpe,
            unigram,
            kinds,
            unk_id,
            byte_ids,
            original: None,
            newline_cuts,
        })
    }

    /// Whether `crate::cuts::Rule::any` cuts are exact for this model (see `crate::cuts`).
    #[cfg(test)]
    pub(crate) fn newline_cuts_exact(&self) -> bool {
        self.newline_cuts
    }

    /// The batch with its long texts cut after newlines (`crate::cuts`), when the model
    /// allows it and some text is long enough to be worth it.
    pub(crate) fn batch_plan<'a>(&self, texts: &[&'a str]) -> Option<crate::cuts::Plan<'a>> {
        if !self.newline_cuts {
            return None;
        }
        let threads = crate::parallel::num_threads();
        crate::cuts::plan(texts, threads, &crate::cuts::Rule::any())
    }

    /// The ids of `text`, a piece of a longer text that does not start it (cut after a
    /// `\n`, for a model where `newline_cuts_exact`): its normalization without the dummy
    /// prefix, which the whole text has only at its start.
    pub(crate) fn encode_ids_continued(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let Some(bpe) = self.bpe.as_ref().filter(|_| self.newline_cuts) else {
            return Err(Error::other("newline cuts are not exact for this model"));
        };
        let n = &self.normalizer;
        let prefix = match (n.add_dummy_prefix, n.escape_whitespaces) {
            (false, _) => "",
            (true, true) => SPACE_SYMBOL,
            (true, false) => " ",
        };
        self.encode_ids_bpe(bpe, text, prefix, out)
    }

    /// The reference refuses a model whose stored self-test samples do not encode as stored.
    fn self_test(&self) -> Result<()> {
        let mut toks = Vec::new();
        let mut pieces = Vec::new();
        for (input, expected) in &self.data.self_test {
            self.encode_with_pieces(input, &mut toks, &mut pieces)?;
            if pieces.join(" ") != *expected {
                return Err(Error::invalid(format!(
                    "self_test_data: `{input}` does not encode as the model says (`{expected}`)"
                )));
            }
        }
        Ok(())
    }

    /// Normalize, segment and build tokens. `unk_ranges`, when given, receives for each fused
    /// unknown token (not byte-fallback) its index and its normalized byte range.
    fn encode_core(
        &self,
        text: &str,
        out: &mut Vec<SpToken>,
        normalized: &mut String,
        unk_ranges: Option<&mut Vec<(usize, usize, usize)>>,
    ) -> Result<()> {
        // Reuse per-thread buffers: no allocation per call once they have grown.
        SCRATCH.with(|cell| {
            let mut sc = cell.take();
            let r = self.encode_with_scratch(text, out, normalized, unk_ranges, &mut sc);
            cell.set(sc);
            r
        })
    }

    fn encode_with_scratch(
        &self,
        text: &str,
        out: &mut Vec<SpToken>,
        normalized: &mut String,
        mut unk_ranges: Option<&mut Vec<(usize, usize, usize)>>,
        sc: &mut Scratch,
    ) -> Result<()> {
        let n2o = &mut sc.n2o;
        self.normalizer.normalize(text, normalized, n2o)?;
        if normalized.is_empty() {
            return Ok(());
        }
        let pieces = &mut sc.pieces;
        pieces.clear();
        self.segmenter.segment(normalized, pieces)?;
        let nlen = normalized.len();
        let mut prev_unk = false;
        let mut covered = 0usize;
        for p in pieces.iter() {
            let kind = self.piece_kind(p, nlen)?;
            let (ob, oe) = (n2o[p.start], n2o[p.end]);
            if ob > oe {
                return Err(Error::invalid("offsets run backwards"));
            }
            let is_unk = kind == PieceType::Unknown;
            if is_unk && self.byte_ids.is_some() {
                let ids = self.byte_ids.as_deref().map(|a| &a[..]).unwrap_or(&[]);
                let bytes = &normalized.as_bytes()[p.start..p.end];
                for (k, &b) in bytes.iter().enumerate() {
                    let last = k + 1 == bytes.len();
                    out.push(SpToken {
                        id: ids.get(b as usize).copied().unwrap_or(self.unk_id),
                        begin: ob,
                        end: if last { oe } else { ob },
                    });
                }
            } else if is_unk && prev_unk {
                if let Some(t) = out.last_mut() {
                    t.end = oe;
                }
                if let Some(r) = unk_ranges.as_deref_mut().and_then(|v| v.last_mut()) {
                    r.2 = p.end;
                }
            } else {
                if is_unk {
                    if let Some(r) = unk_ranges.as_deref_mut() {
                        r.push((out.len(), p.start, p.end));
                    }
                }
                out.push(SpToken {
                    id: p.id,
                    begin: ob,
                    end: oe,
                });
            }
            covered = covered.max(p.end);
            prev_unk = is_unk;
        }
        if covered != nlen {
            return Err(Error::invalid("all normalized characters are not consumed"));
        }
        Ok(())
    }

    /// Encode `text`, appending tokens with byte offsets into `text`.
    pub fn encode(&self, text: &str, out: &mut Vec<SpToken>) -> Result<()> {
        NORMALIZED.with(|cell| {
            let mut normalized = cell.take();
            let r = self.encode_core(text, out, &mut normalized, None);
            cell.set(normalized);
            r
        })
    }

    /// Encode `text`, appending only the ids.
    pub fn encode_ids(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        if let Some(bpe) = &self.bpe {
            return self.encode_ids_bpe(bpe, text, "", out);
        }
        if self.data.model_type == ModelType::Unigram {
            return self.encode_ids_pieces(text, out);
        }
        self.encode_ids_general(text, out)
    }

    /// `encode_ids` without offsets: normalize without the byte map, segment, and run the
    /// token loop of `encode_with_scratch` keeping only what decides ids (unknown runs fused,
    /// byte fallback, the CONTROL and coverage errors). Its one other check, "offsets run
    /// backwards", cannot fire: the byte map is non-decreasing (every entry is the running
    /// count of consumed input bytes, which only grows; the trailing-space trim re-reads an
    /// entry already there), and a span with `start <= end` therefore maps forwards.
    fn encode_ids_pieces(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        if let Some(r) = self.unigram.as_ref().and_then(|u| {
            u.encode_plain_words(&self.normalizer, self.byte_ids.is_some(), text, out)
        }) {
            // The ids below, from the words of the text's normalization (no CONTROL piece
            // can be matched, every byte is covered, unknown runs are fused alike).
            return r;
        }
        NORMALIZED.with(|cell| {
            let mut normalized = cell.take();
            let r = SCRATCH.with(|sc_cell| {
                let mut sc = sc_cell.take();
                let before = out.len();
                let r = self.ids_from_pieces(text, &mut normalized, &mut sc.pieces, out);
                if r.is_err() {
                    // As the token path: nothing is appended on an error.
                    out.truncate(before);
                }
                sc_cell.set(sc);
                r
            });
            cell.set(normalized);
            r
        })
    }

    /// The type of a segmented piece, after the checks both encode paths make: an id in
    /// range, a span inside the normalized text (`nlen` bytes), and no CONTROL piece (the
    /// reference gives it no width and then fails its "all normalized characters consumed"
    /// check).
    fn piece_kind(&self, p: &SpPiece, nlen: usize) -> Result<PieceType> {
        let kind = if p.id == unigram::NO_UNK {
            PieceType::Unknown
        } else {
            self.kinds.get(p.id as usize).copied().ok_or_else(|| {
                Error::invalid(format!("segmenter returned id {} out of range", p.id))
            })?
        };
        if p.start > p.end || p.end > nlen {
            return Err(Error::invalid("segmenter returned a span outside the text"));
        }
        if kind == PieceType::Control {
            let piece = self
                .data
                .pieces
                .get(p.id as usize)
                .map_or("", |x| x.piece.as_str());
            return Err(Error::invalid(format!(
                "the text contains `{piece}`, a CONTROL piece, as a whole segment (sentencepiece fails on it too)"
            )));
        }
        Ok(kind)
    }

    fn ids_from_pieces(
        &self,
        text: &str,
        normalized: &mut String,
        pieces: &mut Vec<SpPiece>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        self.normalizer.normalize_text(text, normalized)?;
        if normalized.is_empty() {
            return Ok(());
        }
        if let Some(r) = self
            .unigram
            .as_ref()
            .and_then(|u| u.encode_normalized_ids(normalized, self.byte_ids.is_some(), out))
        {
            // The ids of the loop below, without the spans (see `encode_normalized_ids`).
            return r;
        }
        pieces.clear();
        self.segmenter.segment(normalized, pieces)?;
        let nlen = normalized.len();
        let mut prev_unk = false;
        let mut covered = 0usize;
        for p in pieces.iter() {
            // The common case inline: an id in range, a span inside the text, not CONTROL
            // (exactly the checks `piece_kind` makes; anything else goes there for its error).
            let kind = match self.kinds.get(p.id as usize) {
                Some(&k) if p.start <= p.end && p.end <= nlen && k != PieceType::Control => k,
                _ => self.piece_kind(p, nlen)?,
            };
            let is_unk = kind == PieceType::Unknown;
            if is_unk && self.byte_ids.is_some() {
                let ids = self.byte_ids.as_deref().map(|a| &a[..]).unwrap_or(&[]);
                let bytes = normalized
                    .as_bytes()
                    .get(p.start..p.end)
                    .unwrap_or_default();
                out.extend(
                    bytes
                        .iter()
                        .map(|&b| ids.get(b as usize).copied().unwrap_or(self.unk_id)),
                );
            } else if !(is_unk && prev_unk) {
                out.push(p.id);
            }
            covered = covered.max(p.end);
            prev_unk = is_unk;
        }
        if covered != nlen {
            return Err(Error::invalid("all normalized characters are not consumed"));
        }
        Ok(())
    }

    /// `encode_ids` through the token path (offsets and all), the reference of the fast path.
    fn encode_ids_general(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        TOKENS.with(|cell| {
            let mut toks = cell.take();
            toks.clear();
            let r = self.encode(text, &mut toks);
            if r.is_ok() {
                out.extend(toks.iter().map(|t| t.id));
            }
            cell.set(toks);
            r
        })
    }

    /// `encode_ids` for BPE: normalize, drop the leading `strip` (the dummy prefix of a piece
    /// cut from a longer text; `""` for a whole text), then the segmenter's ids directly,
    /// by the identity normalizer's byte path when it applies. The tokens of `encode_core`
    /// are those ids in order: BPE's `emit` already maps CONTROL symbols to unk, fuses
    /// unknown runs and applies byte fallback, every piece covers its span, so the token
    /// loop only copies ids (`segment_ids` repeats `emit`'s id logic exactly).
    fn encode_ids_bpe(
        &self,
        bpe: &bpe::SpBpe,
        text: &str,
        strip: &str,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let missing = || Error::other("sentencepiece: the dummy prefix is missing");
        if let Some(r) = NORMALIZED_BYTES.with(|cell| {
            let mut normalized = cell.take();
            let r = self
                .normalizer
                .normalize_bytes(text, &mut normalized)
                .then(|| {
                    let rest = normalized
                        .strip_prefix(strip.as_bytes())
                        .ok_or_else(missing)?;
                    bpe.segment_ids(rest, out)
                });
            cell.set(normalized);
            r
        }) {
            return r;
        }
        NORMALIZED.with(|cell| {
            let mut normalized = cell.take();
            let r = self
                .normalizer
                .normalize_text(text, &mut normalized)
                .and_then(|()| {
                    let rest = normalized.strip_prefix(strip).ok_or_else(missing)?;
                    bpe.segment_ids(rest.as_bytes(), out)
                });
            cell.set(normalized);
            r
        })
    }

    /// Encode `text`; `pieces` receives the piece strings sentencepiece reports (for a fused
    /// unknown run: its normalized text).
    pub fn encode_with_pieces(
        &self,
        text: &str,
        out: &mut Vec<SpToken>,
        pieces: &mut Vec<String>,
    ) -> Result<()> {
        out.clear();
        pieces.clear();
        let mut normalized = String::new();
        let mut unk_ranges = Vec::new();
        self.encode_core(text, out, &mut normalized, Some(&mut unk_ranges))?;
        let mut next = unk_ranges.iter().peekable();
        for (i, t) in out.iter().enumerate() {
            match next.peek() {
                Some(&&(k, s, e)) if k == i => {
                    pieces.push(normalized.get(s..e).unwrap_or_default().to_string());
                    next.next();
                }
                _ => pieces.push(self.id_to_piece(t.id).unwrap_or_default().to_string()),
            }
        }
        Ok(())
    }

    /// The piece string sentencepiece reports for `tok` (from `encode` on `text`). For an
    /// unknown run it is the run's text normalized chunk by chunk (what sentencepiece reports
    /// whenever the run does not include the dummy prefix); use `encode_with_pieces` for the
    /// exact strings.
    pub fn piece_text<'a>(&'a self, tok: &SpToken, text: &str) -> Cow<'a, str> {
        let kind = self.piece_type(tok.id);
        if kind != Some(PieceType::Unknown) || self.byte_ids.is_some() {
            return Cow::Borrowed(self.id_to_piece(tok.id).unwrap_or_default());
        }
        let surface = text.get(tok.begin..tok.end).unwrap_or_default();
        let frag = SpNormalizer {
            add_dummy_prefix: false,
            remove_extra_whitespaces: false,
            treat_whitespace_as_suffix: false,
            ..self.normalizer.clone()
        };
        let mut s = String::new();
        let mut m = Vec::new();
        match frag.normalize(surface, &mut s, &mut m) {
            Ok(()) => Cow::Owned(s),
            Err(_) => Cow::Owned(surface.to_string()),
        }
    }

    // ---- vocabulary ----

    pub fn piece_size(&self) -> usize {
        self.data.pieces.len()
    }

    pub fn id_to_piece(&self, id: u32) -> Option<&str> {
        self.data.pieces.get(id as usize).map(|p| p.piece.as_str())
    }

    /// The id of `piece`, or `None` (sentencepiece itself answers the unknown id).
    pub fn piece_to_id(&self, piece: &str) -> Option<u32> {
        self.lookup.get(piece)
    }

    /// sentencepiece's `PieceToId`: unknown strings give the unknown id.
    pub fn piece_to_id_or_unk(&self, piece: &str) -> u32 {
        self.lookup.piece_to_id(piece)
    }

    pub fn score(&self, id: u32) -> Option<f32> {
        self.data.pieces.get(id as usize).map(|p| p.score)
    }

    pub fn piece_type(&self, id: u32) -> Option<PieceType> {
        self.data.pieces.get(id as usize).map(|p| p.kind)
    }

    pub fn pieces(&self) -> &[PieceEntry] {
        &self.data.pieces
    }

    pub fn model_type(&self) -> ModelType {
        self.data.model_type
    }

    pub fn byte_fallback(&self) -> bool {
        self.data.byte_fallback
    }

    /// The normalizer this processor runs (for tools and benchmarks).
    pub fn normalizer(&self) -> &SpNormalizer {
        &self.normalizer
    }

    pub fn normalizer_settings(&self) -> &NormalizerSettings {
        &self.data.normalizer
    }

    fn special_id(&self, piece: &str, want: PieceType) -> Option<u32> {
        let id = self.lookup.piece_to_id(piece);
        (self.piece_type(id) == Some(want)).then_some(id)
    }

    pub fn unk_id(&self) -> Option<u32> {
        self.special_id(&self.data.unk_piece, PieceType::Unknown)
    }
    pub fn bos_id(&self) -> Option<u32> {
        self.special_id(&self.data.bos_piece, PieceType::Control)
    }
    pub fn eos_id(&self) -> Option<u32> {
        self.special_id(&self.data.eos_piece, PieceType::Control)
    }
    pub fn pad_id(&self) -> Option<u32> {
        self.special_id(&self.data.pad_piece, PieceType::Control)
    }

    /// The id `encode(add_bos=True)` inserts: the bos piece's id, which must not be unknown.
    pub fn bos_id_for_encode(&self) -> Result<u32> {
        self.extra_id(&self.data.bos_piece)
    }
    /// The id `encode(add_eos=True)` appends.
    pub fn eos_id_for_encode(&self) -> Result<u32> {
        self.extra_id(&self.data.eos_piece)
    }
    pub fn bos_piece(&self) -> &str {
        &self.data.bos_piece
    }
    pub fn eos_piece(&self) -> &str {
        &self.data.eos_piece
    }

    fn extra_id(&self, piece: &str) -> Result<u32> {
        let id = self.lookup.piece_to_id(piece);
        if self.piece_type(id) == Some(PieceType::Unknown) {
            return Err(Error::invalid(format!("id for `{piece}` is not defined.")));
        }
        Ok(id)
    }

    // ---- decoding ----

    /// Decode ids (each must be `< piece_size()`). Each piece's kind is its id's: a model may
    /// hold one string twice (a NORMAL `<0x41>` beside the BYTE one), and sentencepiece
    /// decodes ids without looking their strings up again.
    pub fn decode_ids(&self, ids: &[u32]) -> Result<String> {
        let mut items = Vec::with_capacity(ids.len());
        for &id in ids {
            let piece = self
                .id_to_piece(id)
                .ok_or_else(|| Error::other(format!("piece id is out of range: {id}")))?;
            items.push((piece, id));
        }
        self.decode_items(&items)
    }

    /// Decode piece strings as `SentencePieceProcessor::Decode` does: control pieces vanish,
    /// `<unk>` becomes the unknown surface (" ⁇ "), other unknown strings are copied as they
    /// are, runs of byte pieces are reassembled as UTF-8 (each invalid byte becomes U+FFFD),
    /// ▁ becomes a space, and the first ▁ of the text is dropped when the model adds a dummy
    /// prefix or removes extra whitespace.
    pub fn decode_pieces(&self, pieces: &[&str]) -> Result<String> {
        let items: Vec<(&str, u32)> = pieces
            .iter()
            .map(|&p| (p, self.lookup.piece_to_id(p)))
            .collect();
        self.decode_items(&items)
    }

    /// `decode_pieces` over (piece, id) pairs, the id deciding the piece's kind.
    fn decode_items(&self, items: &[(&str, u32)]) -> Result<String> {
        let mut text = String::new();
        let mut byte_run: Vec<u8> = Vec::new();
        let mut is_bos_ws = true;
        let mut bos_ws_seen = false;
        let strip_first =
            self.data.normalizer.add_dummy_prefix || self.data.normalizer.remove_extra_whitespaces;
        let unk_surface = self.data.unk_surface.as_deref().unwrap_or(" \u{2047} ");
        for &(piece, id) in items {
            let kind = self.piece_type(id);
            if kind == Some(PieceType::Byte) {
                byte_run.push(
                    piece_to_byte(piece)
                        .ok_or_else(|| Error::invalid(format!("`{piece}` is not a byte piece")))?,
                );
                continue;
            }
            flush_bytes(&mut byte_run, &mut text);
            if bos_ws_seen || !text.is_empty() {
                is_bos_ws = false;
            }
            bos_ws_seen = false;
            match kind {
                Some(PieceType::Control) => {}
                Some(PieceType::Unknown) => {
                    if self.id_to_piece(id) == Some(piece) {
                        text.push_str(unk_surface);
                    } else {
                        text.push_str(piece);
                    }
                }
                _ => {
                    let mut p = piece;
                    if is_bos_ws && strip_first {
                        if let Some(rest) = p.strip_prefix(SPACE_SYMBOL) {
                            p = rest;
                            bos_ws_seen = !self.data.normalizer.remove_extra_whitespaces;
                        }
                    }
                    push_unescaped(&mut text, p);
                }
            }
        }
        flush_bytes(&mut byte_run, &mut text);
        if let Some(d) = &self.denormalizer {
            let mut out = String::new();
            let mut m = Vec::new();
            // The reference ignores a denormalizer failure and keeps what it produced.
            if d.normalize(&text, &mut out, &mut m).is_ok() {
                return Ok(out);
            }
            return Ok(String::new());
        }
        Ok(text)
    }

    // ---- serialization ----

    /// The `.model` bytes: the original ones when loaded from a `.model`.
    pub fn to_model_bytes(&self) -> Vec<u8> {
        match &self.original {
            Some(b) => b.clone(),
            None => proto::write_model(&self.data),
        }
    }

    /// The `.spm` text vocabulary (id order, base64 piece, shortest round-trip score, type).
    pub fn to_spm_text(&self) -> String {
        crate::formats::spm_text::write_spm(&self.data.pieces)
    }
}

/// Per-thread buffers of the encoder.
#[derive(Default)]
struct Scratch {
    n2o: Vec<usize>,
    pieces: Vec<SpPiece>,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
    static NORMALIZED: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
    static NORMALIZED_BYTES: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    static TOKENS: std::cell::Cell<Vec<SpToken>> = const { std::cell::Cell::new(Vec::new()) };
}

fn push_unescaped(text: &mut String, piece: &str) {
    let mut rest = piece;
    while let Some(i) = rest.find(SPACE_SYMBOL) {
        text.push_str(&rest[..i]);
        text.push(' ');
        rest = &rest[i + SPACE_SYMBOL.len()..];
    }
    text.push_str(rest);
}

/// Append a run of byte-piece bytes: each valid character as itself, each byte that does not
/// start a valid character as U+FFFD.
fn flush_bytes(run: &mut Vec<u8>, text: &mut String) {
    let mut s = &run[..];
    while !s.is_empty() {
        match valid_char_len(s).and_then(|n| std::str::from_utf8(&s[..n]).ok()) {
            Some(c) => {
                text.push_str(c);
                s = &s[c.len()..];
            }
            None => {
                text.push('\u{FFFD}');
                s = &s[1..];
            }
        }
    }
    run.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(p: &str, score: f32, kind: PieceType) -> PieceEntry {
        PieceEntry {
            piece: p.into(),
            score,
            kind,
        }
    }

    fn data(pieces: Vec<PieceEntry>, byte_fallback: bool) -> ModelData {
        ModelData {
            pieces,
            model_type: ModelType::Unigram,
            byte_fallback,
            treat_whitespace_as_suffix: false,
            unk_surface: None,
            unk_piece: "<unk>".into(),
            bos_piece: "<s>".into(),
            eos_piece: "</s>".into(),
            pad_piece: "<pad>".into(),
            normalizer: NormalizerSettings::default(),
            denormalizer: None,
            self_test: vec![],
        }
    }

    fn small() -> SentencePiece {
        use PieceType::*;
        SentencePiece::from_data(data(
            vec![
                entry("<unk>", 0.0, Unknown),
                entry("<s>", 0.0, Control),
                entry("</s>", 0.0, Control),
                entry("▁", -2.0, Normal),
                entry("a", -1.0, Normal),
                entry("b", -1.0, Normal),
                entry("▁a", -1.0, Normal),
                entry("XY", 0.0, UserDefined),
            ],
            false,
        ))
        .unwrap()
    }

    fn enc(sp: &SentencePiece, s: &str) -> Vec<(u32, usize, usize)> {
        let mut out = vec![];
        sp.encode(s, &mut out).unwrap();
        out.iter().map(|t| (t.id, t.begin, t.end)).collect()
    }

    #[test]
    fn unknown_runs_fuse_and_map_back_to_bytes() {
        let sp = small();
        // "a éé b": ▁a | ▁ (the space) | é é unknown, fused | ▁ | b
        assert_eq!(
            enc(&sp, "a éé b"),
            vec![(6, 0, 1), (3, 1, 2), (0, 2, 6), (3, 6, 7), (5, 7, 8)]
        );
        let mut toks = vec![];
        let mut pieces = vec![];
        sp.encode_with_pieces("a éé b", &mut toks, &mut pieces)
            .unwrap();
        assert_eq!(pieces, vec!["▁a", "▁", "éé", "▁", "b"]);
        // piece_text gives the same strings from the tokens and the text.
        let from_toks: Vec<String> = toks
            .iter()
            .map(|t| sp.piece_text(t, "a éé b").into_owned())
            .collect();
        assert_eq!(from_toks, pieces);
    }

    #[test]
    fn user_defined_pieces_keep_the_space_before_them_separate() {
        // ORACLE-NOTES: `aXYb` → `▁a XY b`; the dummy prefix stays its own piece before XY.
        let sp = small();
        assert_eq!(enc(&sp, "aXYb"), vec![(6, 0, 1), (7, 1, 3), (5, 3, 4)]);
        assert_eq!(enc(&sp, "XY"), vec![(3, 0, 0), (7, 0, 2)]);
    }

    #[test]
    fn byte_fallback_offsets() {
        use PieceType::*;
        let mut v = vec![
            entry("<unk>", 0.0, Unknown),
            entry("a", -1.0, Normal),
            entry("▁", -1.0, Normal),
        ];
        for b in 0..=255u8 {
            v.push(entry(&format!("<0x{b:02X}>"), 0.0, Byte));
        }
        let sp = SentencePiece::from_data(data(v, true)).unwrap();
        // é is C3 A9: the first byte is zero-width at the character's start.
        let byte = |b: u32| 3 + b;
        assert_eq!(
            enc(&sp, "aé"),
            vec![(2, 0, 0), (1, 0, 1), (byte(0xC3), 1, 1), (byte(0xA9), 1, 3)]
        );
        assert_eq!(
            sp.decode_ids(&[2, 1, byte(0xC3), byte(0xA9), byte(0xC3)])
                .unwrap(),
            "aé\u{FFFD}"
        );
    }

    #[test]
    fn decoding_rules() {
        let sp = small();
        // The first ▁ is dropped (dummy prefix), control pieces vanish, <unk> is " ⁇ ".
        assert_eq!(sp.decode_ids(&[1, 6, 3, 0, 5, 2]).unwrap(), "a  ⁇ b");
        // An unknown string is copied raw, ▁ and all.
        assert_eq!(sp.decode_pieces(&["▁a", "zz", "▁b"]).unwrap(), "azz▁b");
        assert_eq!(sp.decode_pieces(&["▁a", "zz", "▁", "b"]).unwrap(), "azz b");
        assert!(sp.decode_ids(&[99]).is_err());
    }

    #[test]
    fn load_checks_follow_the_reference() {
        use PieceType::*;
        let no_unk = data(vec![entry("a", 0.0, Normal)], false);
        assert!(SentencePiece::from_data(no_unk).is_err());
        let dup = data(
            vec![
                entry("<unk>", 0.0, Unknown),
                entry("a", 0.0, Normal),
                entry("a", 0.0, UserDefined),
            ],
            false,
        );
        assert!(SentencePiece::from_data(dup).is_err());
        let byte_without_fallback = data(
            vec![
                entry("<unk>", 0.0, Unknown),
                entry("<0x41>", 0.0, Byte),
                entry("a", 0.0, Normal),
            ],
            false,
        );
        assert!(SentencePiece::from_data(byte_without_fallback).is_err());
        let missing_bytes = data(
            vec![
                entry("<unk>", 0.0, Unknown),
                entry("<0x41>", 0.0, Byte),
                entry("a", 0.0, Normal),
            ],
            true,
        );
        assert!(SentencePiece::from_data(missing_bytes).is_err());
    }

    /// The BPE ids-only path against the token path, on models with byte fallback or
    /// unknown fusion, a character typed CONTROL, a user-defined piece and a piece that is
    /// also reserved.
    #[test]
    fn bpe_ids_path_matches_the_token_path() {
        use PieceType::*;
        for (byte_fallback, plain) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut v = vec![
                entry("<unk>", 0.0, Unknown),
                entry("<s>", 0.0, Control),
                entry("c", 0.0, Control),
                entry("▁", -1.0, Normal),
                entry("a", -1.0, Normal),
                entry("b", -1.0, Normal),
                entry("▁a", -2.0, Normal),
                entry("ab", -3.0, Normal),
                entry("ba", -3.0, Normal),
                entry("bc", -4.0, Normal),
                entry("▁ab", -5.0, Normal),
                entry("XY", 0.0, UserDefined),
            ];
            if plain {
                // No user-defined or single-character reserved piece: dead symbols are unk.
                v.retain(|p| p.piece != "c" && p.piece != "XY");
            }
            if byte_fallback {
                for b in 0..=255u8 {
                    v.push(entry(&format!("<0x{b:02X}>"), 0.0, Byte));
                }
            }
            let mut d = data(v, byte_fallback);
            d.model_type = ModelType::Bpe;
            d.normalizer.add_dummy_prefix = true;
            d.normalizer.escape_whitespaces = true;
            let sp = SentencePiece::from_data(d).unwrap();
            let mut next = crate::test_rng(0x7777_0001);
            let alphabet = ['a', 'b', 'c', ' ', 'é', 'X', 'Y', '😀', 'a', 'b'];
            for _ in 0..3000 {
                let len = (next() % 50) as usize;
                let t: String = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                sp.encode_ids(&t, &mut fast).unwrap();
                sp.encode_ids_general(&t, &mut slow).unwrap();
                assert_eq!(fast, slow, "{t:?}");
            }
        }
    }

    #[test]
    fn unigram_ids_path_matches_the_token_path() {
        // `encode_ids_pieces` (no byte map, ids-only token loop) against the token path, on
        // every normalizer setting, with unknown runs, byte fallback, user-defined pieces and
        // runs of spaces; errors must agree too.
        use PieceType::*;
        for case in 0..32u32 {
            let byte_fallback = case & 1 != 0;
            let mut v = vec![
                entry("<unk>", 0.0, Unknown),
                entry("<s>", 0.0, Control),
                entry("c", 0.0, Control),
                entry("▁", -1.0, Normal),
                entry("a", -1.5, Normal),
                entry("b", -1.0, Normal),
                entry("▁a", -2.0, Normal),
                entry("ab", -2.5, Normal),
                entry("ba", -3.0, Normal),
                entry("▁ab", -3.0, Normal),
                entry("XY", 0.0, UserDefined),
            ];
            if byte_fallback {
                for b in 0..=255u8 {
                    v.push(entry(&format!("<0x{b:02X}>"), 0.0, Byte));
                }
            }
            let mut d = data(v, byte_fallback);
            d.normalizer.add_dummy_prefix = case & 2 != 0;
            d.normalizer.remove_extra_whitespaces = case & 4 != 0;
            d.normalizer.escape_whitespaces = case & 8 != 0;
            d.treat_whitespace_as_suffix = case & 16 != 0;
            let sp = SentencePiece::from_data(d).unwrap();
            let mut next = crate::test_rng(0x7777_0002 + u64::from(case));
            let alphabet = ['a', 'b', 'c', ' ', ' ', 'é', 'X', 'Y', '😀', 'a', 'b', 'z'];
            for _ in 0..1500 {
                let len = (next() % 40) as usize;
                let t: String = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                let (mut fast, mut slow) = (vec![7u32], vec![7u32]);
                let rf = sp.encode_ids(&t, &mut fast);
                let rs = sp.encode_ids_general(&t, &mut slow);
                assert_eq!(rf.is_ok(), rs.is_ok(), "{t:?} {case}");
                assert_eq!(fast, slow, "{t:?} {case}");
            }
        }
    }

    #[test]
    fn piece_to_byte_is_strict() {
        assert_eq!(piece_to_byte("<0x0A>"), Some(10));
        assert_eq!(piece_to_byte("<0x0a>"), None);
        assert_eq!(piece_to_byte("<0x1>"), None);
    }
}
