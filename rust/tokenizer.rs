//! The tokenizer.json pipeline and the public Rust facade over every kind of tokenizer.
//!
//! Per sequence: added tokens are cut out of the raw text, the rest is normalized (and cut at
//! normalized added tokens), pre-tokenized into words, and each word goes through the model.
//! Offsets are mapped back through the alignments and converted to code points. Then the pair
//! is truncated, post-processed and padded, in the reference's order.

use crate::added_vocabulary::{AddedToken, AddedVocabulary};
use crate::decoders::Decoder;
use crate::encoding::{Encoding, PaddingParams, TruncationParams};
use crate::error::{Error, Result, ResultExt};
use crate::fast::{FastPath, Piece};
use crate::models::{Model, ModelWrapper, Token};
use crate::normalizers::Normalizer;
use crate::pre_tokenizers::PreTokenizer;
use crate::processors::PostProcessor;
use crate::text::{ByteToCharOffsets, PreTokenizedString};
use rayon::prelude::*;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// One input sequence: raw text, or words already split by the caller.
#[derive(Debug, Clone)]
pub enum InputSequence<'a> {
    Raw(&'a str),
    PreTokenized(Vec<&'a str>),
}

/// An immutable tokenizer. Cloning is cheap (the vocabulary is shared); changing padding or
/// truncation makes a new value with the same core.
#[derive(Clone)]
pub struct Tokenizer {
    core: Arc<Core>,
    padding: Option<PaddingParams>,
    truncation: Option<TruncationParams>,
}

/// The parts of a tokenizer.json pipeline.
pub(crate) struct Core {
    normalizer: Option<Box<dyn Normalizer>>,
    pre_tokenizer: Option<Box<dyn PreTokenizer>>,
    model: ModelWrapper,
    post_processor: Option<Box<dyn PostProcessor>>,
    decoder: Option<Box<dyn Decoder>>,
    added: AddedVocabulary,
    fast: Option<FastPath>,
    /// The document it was read from, written back by `to_json_string`.
    json: Value,
}

/// Below this many inputs a batch is encoded on the calling thread.
const PARALLEL_MIN_BATCH: usize = 8;

impl Tokenizer {
    /// Load a tokenizer.json document.
    pub fn from_json_str(json: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(json)?;
        Self::from_json_value(v)
    }

    /// Build from a parsed tokenizer.json document.
    pub fn from_json_value(v: Value) -> Result<Self> {
        let (core, padding, truncation) = crate::formats::tokenizer_json::build(v)?;
        Ok(Tokenizer {
            core: Arc::new(core),
            padding,
            truncation,
        })
    }

    /// A BERT tokenizer from a `vocab.txt`, composed as `BertWordPieceTokenizer` composes it.
    /// `lowercase: None` guesses the casing from the vocabulary; `strip_accents: None` follows
    /// `lowercase`.
    pub fn from_vocab_txt(
        bytes: &[u8],
        lowercase: Option<bool>,
        strip_accents: Option<bool>,
    ) -> Result<Self> {
        let v = crate::formats::vocab_txt::bert_tokenizer_json(bytes, lowercase, strip_accents)?;
        Self::from_json_value(v)
    }

    pub(crate) fn new_core(
        normalizer: Option<Box<dyn Normalizer>>,
        pre_tokenizer: Option<Box<dyn PreTokenizer>>,
        model: ModelWrapper,
        post_processor: Option<Box<dyn PostProcessor>>,
        decoder: Option<Box<dyn Decoder>>,
        added_tokens: Vec<AddedToken>,
        json: Value,
    ) -> Result<Core> {
        let added = AddedVocabulary::new(added_tokens, model.as_model(), normalizer.as_deref())
            .context("added_tokens")?;
        let fast = FastPath::detect(&json);
        Ok(Core {
            normalizer,
            pre_tokenizer,
            model,
            post_processor,
            decoder,
            added,
            fast,
            json,
        })
    }

    /// Serialize back to tokenizer.json (with the current padding and truncation).
    pub fn to_json_string(&self, pretty: bool) -> Result<String> {
        let mut v = self.core.json.clone();
        if let Some(obj) = v.as_object_mut() {
            obj.insert(
                "truncation".into(),
                self.truncation
                    .as_ref()
                    .map_or(Value::Null, |t| t.to_json()),
            );
            obj.insert(
                "padding".into(),
                self.padding.as_ref().map_or(Value::Null, |p| p.to_json()),
            );
        }
        let s = if pretty {
            serde_json::to_string_pretty(&v)
        } else {
            serde_json::to_string(&v)
        };
        s.map_err(|e| Error::other(e.to_string()))
    }

    pub fn encode(
        &self,
        first: InputSequence<'_>,
        pair: Option<InputSequence<'_>>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        let enc = self.core.encode_sequence(&first, 0)?;
        let pair = match &pair {
            Some(p) => Some(self.core.encode_sequence(p, 1)?),
            None => None,
        };
        self.post_process(enc, pair, add_special_tokens)
    }

    /// Many inputs at once, across threads; padding (batch longest) applies to the batch.
    pub fn encode_batch(
        &self,
        inputs: &[(InputSequence<'_>, Option<InputSequence<'_>>)],
        add_special_tokens: bool,
    ) -> Result<Vec<Encoding>> {
        let one = |(a, b): &(InputSequence<'_>, Option<InputSequence<'_>>)| {
            self.encode(a.clone(), b.clone(), add_special_tokens)
        };
        let mut encodings: Vec<Encoding> = if inputs.len() >= PARALLEL_MIN_BATCH {
            crate::parallel::install(|| inputs.par_iter().map(one).collect::<Result<Vec<_>>>())?
        } else {
            inputs.iter().map(one).collect::<Result<Vec<_>>>()?
        };
        if let Some(p) = &self.padding {
            crate::encoding::pad_encodings(&mut encodings, p)?;
        }
        Ok(encodings)
    }

    /// Only the ids of one text, as `encode(text).ids` would give them without padding.
    pub fn encode_ids(
        &self,
        text: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let needs_full =
            self.truncation.is_some() || (add_special_tokens && self.core.post_processor.is_some());
        if needs_full {
            let unpadded = Tokenizer {
                padding: None,
                ..self.clone()
            };
            let enc = unpadded.encode(InputSequence::Raw(text), None, add_special_tokens)?;
            out.extend_from_slice(&enc.ids);
            return Ok(());
        }
        self.core.ids_of_text(text, out)
    }

    /// Ids of many texts across threads (no padding), for the fast batch outputs.
    pub fn encode_batch_ids(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>> {
        let one = |t: &&str| {
            let mut v = Vec::new();
            self.encode_ids(t, add_special_tokens, &mut v).map(|_| v)
        };
        if texts.len() >= PARALLEL_MIN_BATCH {
            crate::parallel::install(|| texts.par_iter().map(one).collect())
        } else {
            texts.iter().map(one).collect()
        }
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        let core = &self.core;
        let tokens: Vec<String> = ids
            .iter()
            .filter_map(|&id| {
                let t = core
                    .added
                    .id_to_token(id)
                    .or_else(|| core.model.as_model().id_to_token(id))?;
                if skip_special_tokens && core.added.is_special(t) {
                    None
                } else {
                    Some(t.to_owned())
                }
            })
            .collect();
        match &core.decoder {
            Some(d) => Ok(d.decode_chain(tokens)?.concat()),
            None => Ok(tokens.join(" ")),
        }
    }

    pub fn decode_batch(
        &self,
        batch: &[Vec<u32>],
        skip_special_tokens: bool,
    ) -> Result<Vec<String>> {
        let one = |ids: &Vec<u32>| self.decode(ids, skip_special_tokens);
        if batch.len() >= PARALLEL_MIN_BATCH {
            crate::parallel::install(|| batch.par_iter().map(one).collect())
        } else {
            batch.iter().map(one).collect()
        }
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.core
            .added
            .token_to_id(token)
            .or_else(|| self.core.model.as_model().token_to_id(token))
    }
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.core
            .added
            .id_to_token(id)
            .or_else(|| self.core.model.as_model().id_to_token(id))
            .map(str::to_owned)
    }
    pub fn get_vocab(&self, with_added_tokens: bool) -> HashMap<String, u32> {
        let mut v = self.core.model.as_model().vocab();
        if with_added_tokens {
            for (t, id) in self.core.added.vocab() {
                v.insert(t.clone(), *id);
            }
        }
        v
    }
    pub fn get_vocab_size(&self, with_added_tokens: bool) -> usize {
        if with_added_tokens {
            self.get_vocab(true).len()
        } else {
            self.core.model.as_model().vocab_size()
        }
    }
    /// The added tokens with their ids, sorted by id.
    pub fn added_tokens(&self) -> Vec<(u32, AddedToken)> {
        self.core
            .added
            .tokens_by_id()
            .into_iter()
            .map(|(i, t)| (i, t.clone()))
            .collect()
    }
    pub fn padding(&self) -> Option<&PaddingParams> {
        self.padding.as_ref()
    }
    pub fn truncation(&self) -> Option<&TruncationParams> {
        self.truncation.as_ref()
    }
    /// A copy with other padding.
    pub fn with_padding(&self, padding: Option<PaddingParams>) -> Tokenizer {
        Tokenizer {
            padding,
            ..self.clone()
        }
    }
    /// A copy with other truncation. Fails, as the reference does, when the stride does not fit
    /// in the length left after the special tokens.
    pub fn with_truncation(&self, truncation: Option<TruncationParams>) -> Result<Tokenizer> {
        if let Some(t) = &truncation {
            let n_added = self.n_added_tokens(false);
            let effective = t.max_length.wrapping_sub(n_added);
            if effective < t.stride {
                return Err(Error::other(format!(
                    "tokenizer stride set to {}, which is greater than or equal to its effective max length of {} (= {} original max length - {} added special tokens), ",
                    t.stride, effective, t.max_length, n_added
                )));
            }
        }
        Ok(Tokenizer {
            truncation,
            ..self.clone()
        })
    }

    fn n_added_tokens(&self, is_pair: bool) -> usize {
        self.core
            .post_processor
            .as_ref()
            .map_or(0, |p| p.added_tokens(is_pair))
    }

    fn post_process(
        &self,
        enc: Encoding,
        pair: Option<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        let (enc, pair) = match &self.truncation {
            Some(t) => {
                let n_added = self.n_added_tokens(pair.is_some());
                if add_special_tokens && n_added > 0 {
                    let t2 = TruncationParams {
                        max_length: t.max_length.wrapping_sub(n_added),
                        ..t.clone()
                    };
                    crate::encoding::truncate_encodings(enc, pair, &t2)?
                } else {
                    crate::encoding::truncate_encodings(enc, pair, t)?
                }
            }
            None => (enc, pair),
        };
        let enc = match &self.core.post_processor {
            Some(p) => p.process(enc, pair, add_special_tokens)?,
            None => crate::processors::default_process(enc, pair, add_special_tokens)?,
        };
        match &self.padding {
            Some(p) => {
                let mut arr = [enc];
                crate::encoding::pad_encodings(&mut arr, p)?;
                let [e] = arr;
                Ok(e)
            }
            None => Ok(enc),
        }
    }
}

impl Core {
    fn encode_sequence(&self, seq: &InputSequence<'_>, type_id: u32) -> Result<Encoding> {
        match seq {
            InputSequence::Raw(s) => self.encode_text(s, type_id, None),
            InputSequence::PreTokenized(words) => {
                let mut enc = Encoding::default();
                for (i, w) in words.iter().enumerate() {
                    let sub = self.encode_text(w, type_id, Some(i as u32))?;
                    enc.merge_with(sub, false);
                }
                Ok(enc)
            }
        }
    }

    /// Everything up to the model: added tokens, normalization, pre-tokenization, model.
    fn tokenize(&self, text: &str) -> Result<PreTokenizedString> {
        let mut pts = self
            .added
            .extract_and_normalize(self.normalizer.as_deref(), text)?;
        if let Some(p) = &self.pre_tokenizer {
            p.pre_tokenize(&mut pts)?;
        }
        let model = self.model.as_model();
        for split in pts.splits.iter_mut().filter(|s| s.tokens.is_none()) {
            let mut toks: Vec<Token> = Vec::new();
            model.tokenize(split.normalized.get(), &mut toks)?;
            split.tokens = Some(toks);
        }
        Ok(pts)
    }

    /// The general pipeline without added tokens, on a piece of text that has none.
    fn tokenize_plain(&self, text: &str) -> Result<PreTokenizedString> {
        let mut n = crate::text::NormalizedString::from(text);
        if let Some(nz) = &self.normalizer {
            nz.normalize(&mut n)?;
        }
        let mut pts = PreTokenizedString::from_splits(vec![crate::text::Split::from(n)]);
        if let Some(p) = &self.pre_tokenizer {
            p.pre_tokenize(&mut pts)?;
        }
        let model = self.model.as_model();
        for split in pts.splits.iter_mut().filter(|s| s.tokens.is_none()) {
            let mut toks: Vec<Token> = Vec::new();
            model.tokenize(split.normalized.get(), &mut toks)?;
            split.tokens = Some(toks);
        }
        Ok(pts)
    }

    /// The fast path applies when no added token is matched after normalization.
    fn fast(&self) -> Option<FastPath> {
        self.fast.filter(|_| !self.added.has_normalized_tokens())
    }

    fn ids_of_text(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        if let Some(fp) = self.fast() {
            let model = self.model.as_model();
            let mut word = String::new();
            let mut toks: Vec<Token> = Vec::new();
            for (id, (s, e)) in self.added.raw_segments(text) {
                if let Some(id) = id {
                    out.push(id);
                    continue;
                }
                let seg = &text[s..e];
                fp.for_each_piece(seg, &mut word, |piece, w| {
                    match piece {
                        Piece::Word { .. } => {
                            toks.clear();
                            model.tokenize(w, &mut toks)?;
                        }
                        Piece::Slow { start, end } => {
                            toks.clear();
                            for split in self.tokenize_plain(&seg[start..end])?.splits {
                                toks.extend(split.tokens.unwrap_or_default());
                            }
                        }
                    }
                    out.extend(toks.iter().map(|t| t.id));
                    Ok::<(), Error>(())
                })?;
            }
            return Ok(());
        }
        let pts = self.tokenize(text)?;
        for s in &pts.splits {
            if let Some(toks) = &s.tokens {
                out.extend(toks.iter().map(|t| t.id));
            }
        }
        Ok(())
    }

    fn encode_text(&self, text: &str, type_id: u32, word_idx: Option<u32>) -> Result<Encoding> {
        let mut out = EncodingBuilder {
            enc: Encoding::default(),
            conv: if text.is_ascii() {
                None
            } else {
                Some(ByteToCharOffsets::new(text))
            },
            type_id,
            word_idx,
            word: 0,
        };
        let model = self.model.as_model();
        if let Some(fp) = self.fast() {
            let mut word = String::new();
            let mut toks: Vec<Token> = Vec::new();
            for (id, (s, e)) in self.added.raw_segments(text) {
                if let Some(id) = id {
                    out.push_token(model, &Token::with_value(id, &text[s..e], 0, e - s), s);
                    out.word += 1;
                    continue;
                }
                let seg = &text[s..e];
                fp.for_each_piece(seg, &mut word, |piece, w| {
                    match piece {
                        Piece::Word { start } => {
                            toks.clear();
                            model.tokenize(w, &mut toks)?;
                            for t in &toks {
                                out.push_token(model, t, s + start);
                            }
                            out.word += 1;
                        }
                        Piece::Slow { start, end } => {
                            let pts = self.tokenize_plain(&seg[start..end])?;
                            out.push_splits(model, &pts, s + start);
                        }
                    }
                    Ok::<(), Error>(())
                })?;
            }
            return Ok(out.enc);
        }
        let pts = self.tokenize(text)?;
        out.push_splits(model, &pts, 0);
        Ok(out.enc)
    }
}

/// Appends tokens to an `Encoding`, mapping their offsets to code points of the input.
struct EncodingBuilder {
    enc: Encoding,
    /// `None` for ASCII input, where bytes are code points.
    conv: Option<ByteToCharOffsets>,
    type_id: u32,
    word_idx: Option<u32>,
    /// Index of the current word (pre-token) in the sequence.
    word: u32,
}

impl EncodingBuilder {
    /// `t.offsets` are original bytes relative to `base` (no normalization in between).
    fn push_token(&mut self, model: &dyn Model, t: &Token, base: usize) {
        let off = (base + t.offsets.0, base + t.offsets.1);
        self.push(model, t, off);
    }

    fn push(&mut self, model: &dyn Model, t: &Token, mut off: (usize, usize)) {
        if let Some(c) = self.conv.as_ref().and_then(|c| c.convert(off)) {
            off = c;
        }
        let value = match &t.value {
            Some(v) => v.to_string(),
            None => model.id_to_token(t.id).unwrap_or_default().to_owned(),
        };
        self.enc.ids.push(t.id);
        self.enc.tokens.push(value);
        self.enc.offsets.push(off);
        self.enc
            .words
            .push(Some(self.word_idx.unwrap_or(self.word)));
        self.enc.type_ids.push(self.type_id);
        self.enc.special_tokens_mask.push(0);
        self.enc.attention_mask.push(1);
    }

    /// Every split of `pts`, whose original offsets are relative to `base`.
    fn push_splits(&mut self, model: &dyn Model, pts: &PreTokenizedString, base: usize) {
        for split in &pts.splits {
            let n = &split.normalized;
            let shift = base + n.offsets_original().0;
            if let Some(tokens) = &split.tokens {
                for t in tokens {
                    let off = n
                        .convert_normalized_range(t.offsets.0..t.offsets.1)
                        .map_or((base + t.offsets.0, base + t.offsets.1), |r| {
                            (shift + r.start, shift + r.end)
                        });
                    self.push(model, t, off);
                }
            }
            self.word += 1;
        }
    }
}
