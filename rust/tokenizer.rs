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
use crate::fast::{FastPath, Scratch};
use crate::models::{Model, ModelWrapper, Token};
use crate::normalizers::Normalizer;
use crate::pre_tokenizers::PreTokenizer;
use crate::processors::PostProcessor;
use crate::sentencepiece::{SentencePiece, SpmOptions};
use crate::text::{ByteToCharOffsets, PreTokenizedString};
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
    core: Arc<Backend>,
    padding: Option<PaddingParams>,
    truncation: Option<TruncationParams>,
    /// Per `add_special_tokens` (false, true): whether the post-processor (if any) keeps a
    /// single sequence's ids as they are. A property of the core, asked once rather than on
    /// every `encode_ids`.
    keeps_single_ids: [bool; 2],
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
    /// Where a batch may cut a long text (`crate::cuts`), if anywhere: the ids of the pieces
    /// are then the ids of the text.
    cuts_at_newlines: Option<crate::cuts::Rule>,
    /// The document it was read from, written back by `to_json_string`.
    json: Value,
}

/// The newline cuts (`crate::cuts`) that are exact for this pipeline, if any (the argument
/// is there): BERT, T5-style Unigram and ByteLevel without a prefix space (each split's own
/// rule, `WordSplit::newline_cut`), through their fast paths.
fn newline_cuts_exact(
    fast: Option<FastPath>,
    normalizer: Option<&dyn Normalizer>,
    added: &AddedVocabulary,
) -> Option<crate::cuts::Rule> {
    use crate::cuts::Rule;
    // As `Core::fast`: normalized added tokens after a normalizer leave the fast paths.
    if normalizer.is_some() && added.has_normalized_tokens() {
        return None;
    }
    let rule = match fast {
        Some(FastPath::Bert(_)) => Rule::visible(Vec::new()),
        Some(FastPath::ByteLevel {
            add_prefix_space: false,
            split,
        }) => split.newline_cut()?,
        // The charsmap decides what `\n` becomes: whitespace keeps the split at it.
        Some(FastPath::WhitespaceMeta) => {
            let mut nl = crate::text::NormalizedString::from("\n");
            let white = normalizer.is_some_and(|n| {
                n.normalize(&mut nl).is_ok()
                    && !nl.get().is_empty()
                    && nl.get().chars().all(char::is_whitespace)
            });
            if !white {
                return None;
            }
            Rule::visible(Vec::new())
        }
        _ => return None,
    };
    Some(rule.and_not_after(&added.newline_cut_exclusions()?))
}

/// Bytes of text in one batch input, to decide whether the batch is worth the pool.
fn input_bytes((a, b): &(InputSequence<'_>, Option<InputSequence<'_>>)) -> usize {
    let len = |s: &InputSequence<'_>| match s {
        InputSequence::Raw(t) => t.len(),
        InputSequence::PreTokenized(w) => w.iter().map(|x| x.len()).sum(),
    };
    len(a) + b.as_ref().map_or(0, len)
}

impl Tokenizer {
    /// Load a tokenizer.json document.
    pub fn from_json_str(json: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(json)?;
        Self::from_json_value(v)
    }

    /// Build from a parsed tokenizer.json document.
    pub fn from_json_value(v: Value) -> Result<Self> {
        let (core, padding, truncation) = crate::formats::tokenizer_json::build(v)?;
        Ok(Self::with_core(
            Backend::Json(Box::new(core)),
            padding,
            truncation,
        ))
    }

    /// A tokenizer over a SentencePiece `.model` (serialized ModelProto), run exactly as the
    /// sentencepiece library runs it.
    pub fn from_sentencepiece(bytes: &[u8]) -> Result<Self> {
        Ok(Self::from_backend(Backend::Sp(Box::new(
            SentencePiece::from_model_bytes(bytes)?,
        ))))
    }

    /// A tokenizer over a `.spm` text vocabulary.
    pub fn from_spm_text(text: &str, opts: &SpmOptions) -> Result<Self> {
        Ok(Self::from_backend(Backend::Sp(Box::new(
            SentencePiece::from_spm_text(text, opts)?,
        ))))
    }

    fn from_backend(b: Backend) -> Self {
        Self::with_core(b, None, None)
    }

    fn with_core(
        b: Backend,
        padding: Option<PaddingParams>,
        truncation: Option<TruncationParams>,
    ) -> Self {
        let keeps = |ast| {
            b.post_processor()
                .is_none_or(|p| p.single_ids_unchanged(ast))
        };
        let keeps_single_ids = [keeps(false), keeps(true)];
        Tokenizer {
            core: Arc::new(b),
            padding,
            truncation,
            keeps_single_ids,
        }
    }

    /// A tokenizer from a `.tiktoken` vocabulary, its split pattern (tiktoken's syntax) and its
    /// special tokens, encoding as tiktoken does (`crate::formats::tiktoken`).
    pub fn from_tiktoken(bytes: &[u8], pattern: &str, specials: &[(String, u32)]) -> Result<Self> {
        let (v, bpe) = crate::formats::tiktoken::pipeline(bytes, pattern, specials)?;
        let (core, padding, truncation) = crate::formats::tokenizer_json::build_with_model(
            v,
            Some(ModelWrapper::Bpe(Box::new(bpe))),
        )?;
        Ok(Self::with_core(
            Backend::Json(Box::new(core)),
            padding,
            truncation,
        ))
    }

    /// A tokenizer from Mistral's `tekken.json`, encoding as mistral-common's `Tekkenizer`
    /// (`crate::formats::tekken`); adding special tokens puts its `<s>` first, and a special
    /// token's string in a text is text.
    pub fn from_tekken(bytes: &[u8]) -> Result<Self> {
        let (v, bpe) = crate::formats::tekken::pipeline(bytes)?;
        let (mut core, padding, truncation) = crate::formats::tokenizer_json::build_with_model(
            v,
            Some(ModelWrapper::Bpe(Box::new(bpe))),
        )?;
        // Control tokens are never read from the text: they are given by id.
        core.added.match_nothing();
        Ok(Self::with_core(
            Backend::Json(Box::new(core)),
            padding,
            truncation,
        ))
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
        let cuts_at_newlines = newline_cuts_exact(fast, normalizer.as_deref(), &added);
        Ok(Core {
            normalizer,
            pre_tokenizer,
            model,
            post_processor,
            decoder,
            added,
            fast,
            cuts_at_newlines,
            json,
        })
    }

    /// Serialize back to tokenizer.json (with the current padding and truncation).
    pub fn to_json_string(&self, pretty: bool) -> Result<String> {
        let Backend::Json(core) = &*self.core else {
            return Err(Error::unsupported(
                "a SentencePiece tokenizer has no tokenizer.json form (save it as .model or .spm)",
            ));
        };
        let mut v = core.json.clone();
        if let Some(obj) = v.as_object_mut() {
            // A model built without a document (`from_tiktoken`) is written out now.
            if obj.get("model").is_none_or(Value::is_null) {
                if let ModelWrapper::Bpe(b) = &core.model {
                    obj.insert("model".into(), b.to_json());
                }
            }
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
        let mut encodings = crate::parallel::map_batch(inputs, input_bytes, one)?;
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
        if self.ids_unprocessed(add_special_tokens) {
            return self.core.ids_of_text(text, out);
        }
        // The ids go straight into `out` (no growing of a second vector), then are replaced.
        // Room for about one id per 4 bytes up front saves the first few regrowths.
        out.reserve(text.len().min(1 << 20) / 4 + 4);
        let start = out.len();
        self.core.ids_of_text(text, out)?;
        self.process_ids(start, add_special_tokens, out)
    }

    /// Whether `encode_ids` gives the model's ids as they are: no truncation, and a processor
    /// that keeps them (BERT's template without its special tokens) or none. Even without
    /// special tokens a template may repeat a sequence, so it still runs.
    fn ids_unprocessed(&self, add_special_tokens: bool) -> bool {
        self.truncation.is_none() && self.keeps_single_ids[usize::from(add_special_tokens)]
    }

    /// Truncation and the post-processor on the model's ids in `out[start..]`, in place; for
    /// a tokenizer where `ids_unprocessed` is false (the caller has checked).
    fn process_ids(
        &self,
        start: usize,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let processor = self.core.post_processor();
        if let (None, Some(p)) = (&self.truncation, processor) {
            if let Some(done) =
                p.single_ids(out.get(start..).unwrap_or_default(), add_special_tokens)
            {
                out.truncate(start);
                out.extend(done);
                return Ok(());
            }
        }
        // Truncation and the post-processor only move ids around (see `placeholders`).
        let light = Encoding::placeholders(out.split_off(start));
        let unpadded = Tokenizer {
            padding: None,
            ..self.clone()
        };
        let enc = unpadded.post_process(light, None, add_special_tokens)?;
        out.extend_from_slice(&enc.ids);
        Ok(())
    }

    /// What an `Encoding` built on demand keeps of `encode(text)`: the model's ids of `text`
    /// (before truncation and post-processing) and the ids `encode_ids` gives (without
    /// padding), `None` when they are the model's ids unchanged. The ids are made the way
    /// `encode_ids` makes them; `encode_from_model_ids` rebuilds the other id-level fields.
    pub fn encode_ids_lazy(
        &self,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<(Vec<u32>, Option<Vec<u32>>)> {
        // Room for about one id per 3 bytes up front saves the first regrowths.
        let mut model_ids = Vec::with_capacity(text.len().min(1 << 20) / 3 + 4);
        self.core.ids_of_text(text, &mut model_ids)?;
        if self.ids_unprocessed(add_special_tokens) {
            return Ok((model_ids, None));
        }
        if let (None, Some(p)) = (&self.truncation, self.core.post_processor()) {
            if let Some(done) = p.single_ids(&model_ids, add_special_tokens) {
                return Ok((model_ids, Some(done)));
            }
        }
        let enc = self.truncate_and_process(
            Encoding::placeholders(model_ids.clone()),
            None,
            add_special_tokens,
        )?;
        Ok((model_ids, Some(enc.ids)))
    }

    /// `encode(text)` (padding included) for a text whose model ids are `model_ids`, with
    /// every field that depends only on the ids and their number: ids, type ids, attention
    /// and special tokens masks, sequence ranges, overflowing parts likewise. Token strings,
    /// offsets and words are placeholders (see `Encoding::placeholders`).
    pub fn encode_from_model_ids(
        &self,
        model_ids: Vec<u32>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        self.post_process(Encoding::placeholders(model_ids), None, add_special_tokens)
    }

    /// Ids of many texts across threads (no padding), for the fast batch outputs.
    pub fn encode_batch_ids(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>> {
        if let Some(plan) = self.batch_plan(texts) {
            return self.encode_plan_ids(&plan, add_special_tokens);
        }
        let one = |t: &&str| {
            // Room for about one id per 3 bytes: a row rarely regrows.
            let mut v = Vec::with_capacity(t.len().min(1 << 20) / 3 + 4);
            self.encode_ids(t, add_special_tokens, &mut v).map(|_| v)
        };
        crate::parallel::map_batch(texts, |t| t.len(), one)
    }

    /// Ids of many texts across threads (no padding) as one flat buffer and the end of each
    /// text's ids in it. Texts go to the pool in chunks, each chunk's ids written into one
    /// buffer (no vector per text, no copy per row but the final join).
    pub fn encode_batch_flat(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
    ) -> Result<(Vec<u32>, Vec<usize>)> {
        let plan = self.batch_plan(texts);
        crate::cuts::flat_ids(&(self, add_special_tokens), texts, plan.as_ref())
    }

    /// The batch with its long texts cut into pieces (`crate::cuts`), when the pipeline allows
    /// it and some text is long enough to be worth it.
    pub(crate) fn batch_plan<'a>(&self, texts: &[&'a str]) -> Option<crate::cuts::Plan<'a>> {
        let threads = crate::parallel::num_threads();
        match &*self.core {
            Backend::Json(c) => crate::cuts::plan(texts, threads, c.cuts_at_newlines.as_ref()?),
            Backend::Sp(sp) => sp.batch_plan(texts),
        }
    }

    /// The ids of one piece of a plan: a whole text's as `encode_ids` gives them, a cut
    /// text's piece's as the model gives them (joined and processed by `finish_plan_row`).
    pub(crate) fn encode_piece_ids(
        &self,
        p: &crate::cuts::Piece<'_>,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>> {
        // Room for one id per 2 bytes, as for the chunks of `encode_batch_flat`.
        let mut v = Vec::with_capacity(p.text.len().min(1 << 20) / 2 + 16);
        if p.whole {
            self.encode_ids(p.text, add_special_tokens, &mut v)?;
        } else {
            match &*self.core {
                Backend::Sp(sp) if !p.first => sp.encode_ids_continued(p.text, &mut v)?,
                core => core.ids_of_text(p.text, &mut v)?,
            }
        }
        Ok(v)
    }

    /// One text's row from its pieces' rows (in order): joined, then truncated and
    /// post-processed once when it was cut.
    pub(crate) fn finish_plan_row(
        &self,
        rows: impl Iterator<Item = Vec<u32>>,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>> {
        let (mut ids, cut) = crate::cuts::join_rows(rows);
        if cut && !self.ids_unprocessed(add_special_tokens) {
            self.process_ids(0, add_special_tokens, &mut ids)?;
        }
        Ok(ids)
    }

    /// `encode_batch_ids` over a plan: the pieces across threads (longest first), then each
    /// cut text's pieces joined and post-processed as one.
    pub(crate) fn encode_plan_ids(
        &self,
        plan: &crate::cuts::Plan<'_>,
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>> {
        let mut rows =
            crate::cuts::plan_rows(plan, |p| self.encode_piece_ids(p, add_special_tokens))?
                .into_iter();
        let mut out = Vec::with_capacity(plan.bounds.len().saturating_sub(1));
        for n in plan.piece_counts() {
            out.push(self.finish_plan_row(rows.by_ref().take(n), add_special_tokens)?);
        }
        Ok(out)
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.core.decode(ids, skip_special_tokens)
    }

    pub fn decode_batch(
        &self,
        batch: &[Vec<u32>],
        skip_special_tokens: bool,
    ) -> Result<Vec<String>> {
        let one = |ids: &Vec<u32>| self.decode(ids, skip_special_tokens);
        crate::parallel::map_batch(batch, |ids| ids.len() * 4, one)
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.core.token_to_id(token)
    }
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.core.id_to_token(id).map(str::to_owned)
    }
    pub fn get_vocab(&self, with_added_tokens: bool) -> HashMap<String, u32> {
        self.core.vocab(with_added_tokens)
    }
    /// About one past the largest id this tokenizer gives (added tokens included), told
    /// without building the vocabulary map: a sizing hint only (a model whose ids have gaps
    /// may give larger ones).
    pub fn id_bound(&self) -> usize {
        match &*self.core {
            Backend::Json(c) => c
                .added
                .vocab()
                .values()
                .map(|&id| id as usize + 1)
                .fold(c.model.as_model().vocab_size(), usize::max),
            Backend::Sp(sp) => sp.piece_size(),
        }
    }

    pub fn get_vocab_size(&self, with_added_tokens: bool) -> usize {
        if with_added_tokens {
            self.get_vocab(true).len()
        } else {
            self.core.model_vocab_size()
        }
    }
    /// The added tokens with their ids, sorted by id (none for a SentencePiece tokenizer).
    pub fn added_tokens(&self) -> Vec<(u32, AddedToken)> {
        match &*self.core {
            Backend::Json(c) => c
                .added
                .tokens_by_id()
                .into_iter()
                .map(|(i, t)| (i, t.clone()))
                .collect(),
            Backend::Sp(_) => Vec::new(),
        }
    }
    /// The SentencePiece processor behind this tokenizer, if it was read from a `.model` or
    /// `.spm` file.
    pub fn sentencepiece(&self) -> Option<&SentencePiece> {
        match &*self.core {
            Backend::Sp(sp) => Some(sp),
            Backend::Json(_) => None,
        }
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
            .post_processor()
            .map_or(0, |p| p.added_tokens(is_pair))
    }

    fn post_process(
        &self,
        enc: Encoding,
        pair: Option<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        let enc = self.truncate_and_process(enc, pair, add_special_tokens)?;
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

    /// `post_process` without the padding.
    fn truncate_and_process(
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
        match self.core.post_processor() {
            Some(p) => p.process(enc, pair, add_special_tokens),
            None => crate::processors::default_process(enc, pair, add_special_tokens),
        }
    }
}

/// What runs the text: a tokenizer.json pipeline, or a SentencePiece processor.
pub(crate) enum Backend {
    Json(Box<Core>),
    Sp(Box<SentencePiece>),
}

/// `encode_batch_flat` through `crate::cuts::flat_ids`: the tokenizer and whether special
/// tokens are added.
impl crate::cuts::FlatEncode for (&Tokenizer, bool) {
    type Error = Error;
    fn append(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        self.0.encode_ids(text, self.1, out)
    }
    fn piece(&self, p: &crate::cuts::Piece<'_>) -> Result<Vec<u32>> {
        self.0.encode_piece_ids(p, self.1)
    }
    fn plain(&self) -> bool {
        self.0.ids_unprocessed(self.1)
    }
    fn finish(&self, rows: &mut dyn Iterator<Item = Vec<u32>>) -> Result<Vec<u32>> {
        self.0.finish_plan_row(rows, self.1)
    }
}

impl Backend {
    fn post_processor(&self) -> Option<&dyn PostProcessor> {
        match self {
            Backend::Json(c) => c.post_processor.as_deref(),
            Backend::Sp(_) => None,
        }
    }

    fn encode_sequence(&self, seq: &InputSequence<'_>, type_id: u32) -> Result<Encoding> {
        match self {
            Backend::Json(c) => c.encode_sequence(seq, type_id),
            Backend::Sp(sp) => match seq {
                InputSequence::Raw(s) => sp_encode_text(sp, s, type_id, None),
                InputSequence::PreTokenized(words) => {
                    let mut enc = Encoding::default();
                    for (i, w) in words.iter().enumerate() {
                        enc.merge_with(sp_encode_text(sp, w, type_id, Some(i as u32))?, false);
                    }
                    Ok(enc)
                }
            },
        }
    }

    fn ids_of_text(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        match self {
            Backend::Json(c) => c.ids_of_text(text, out),
            Backend::Sp(sp) => sp.encode_ids(text, out),
        }
    }

    fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        let core = match self {
            Backend::Json(c) => c,
            // sentencepiece drops control pieces whatever is asked.
            Backend::Sp(sp) => return sp.decode_ids(ids),
        };
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

    fn token_to_id(&self, token: &str) -> Option<u32> {
        match self {
            Backend::Json(c) => c
                .added
                .token_to_id(token)
                .or_else(|| c.model.as_model().token_to_id(token)),
            Backend::Sp(sp) => sp.piece_to_id(token),
        }
    }

    fn id_to_token(&self, id: u32) -> Option<&str> {
        match self {
            Backend::Json(c) => c
                .added
                .id_to_token(id)
                .or_else(|| c.model.as_model().id_to_token(id)),
            Backend::Sp(sp) => sp.id_to_piece(id),
        }
    }

    fn vocab(&self, with_added_tokens: bool) -> HashMap<String, u32> {
        match self {
            Backend::Json(c) => {
                let mut v = c.model.as_model().vocab();
                if with_added_tokens {
                    for (t, id) in c.added.vocab() {
                        v.insert(t.clone(), *id);
                    }
                }
                v
            }
            // A repeated piece keeps its last id, as sentencepiece's own map does.
            Backend::Sp(sp) => sp
                .pieces()
                .iter()
                .enumerate()
                .map(|(i, p)| (p.piece.clone(), i as u32))
                .collect(),
        }
    }

    fn model_vocab_size(&self) -> usize {
        match self {
            Backend::Json(c) => c.model.as_model().vocab_size(),
            Backend::Sp(sp) => sp.piece_size(),
        }
    }
}

/// A SentencePiece encoding: ids, pieces, and sentencepiece's byte offsets as code points.
fn sp_encode_text(
    sp: &SentencePiece,
    text: &str,
    type_id: u32,
    word_idx: Option<u32>,
) -> Result<Encoding> {
    let (mut toks, mut pieces) = (Vec::new(), Vec::new());
    sp.encode_with_pieces(text, &mut toks, &mut pieces)?;
    // Code point index of every byte boundary (offsets may sit at the very end).
    let mut chars = Vec::with_capacity(text.len() + 1);
    for (i, c) in text.chars().enumerate() {
        chars.extend(std::iter::repeat_n(i, c.len_utf8()));
    }
    chars.push(text.chars().count());
    let at = |b: usize| chars.get(b).copied().unwrap_or(chars.len() - 1);
    let mut enc = Encoding::default();
    for (t, piece) in toks.iter().zip(pieces) {
        enc.ids.push(t.id);
        enc.tokens.push(piece);
        enc.offsets.push((at(t.begin), at(t.end)));
        enc.words.push(word_idx);
        enc.type_ids.push(type_id);
        enc.special_tokens_mask.push(0);
        enc.attention_mask.push(1);
    }
    Ok(enc)
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
        let pts = self
            .added
            .extract_and_normalize(self.normalizer.as_deref(), text)?;
        self.pre_tokenize_and_model(pts)
    }

    /// The general pipeline without added tokens, on a piece of text that has none.
    fn tokenize_plain(&self, text: &str) -> Result<PreTokenizedString> {
        let mut n = crate::text::NormalizedString::from(text);
        if let Some(nz) = &self.normalizer {
            nz.normalize(&mut n)?;
        }
        self.pre_tokenize_and_model(PreTokenizedString::from_splits(vec![
            crate::text::Split::from(n),
        ]))
    }

    /// The stages after normalization: split into words, then run the model on each word that
    /// is not an added token yet.
    fn pre_tokenize_and_model(&self, mut pts: PreTokenizedString) -> Result<PreTokenizedString> {
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
        self.fast
            .filter(|_| self.normalizer.is_none() || !self.added.has_normalized_tokens())
    }

    /// The input cut at added tokens, for the fast paths (which run only when normalization
    /// is the identity or no added token is matched after it).
    fn segments(&self, text: &str) -> Result<Vec<crate::added_vocabulary::Segment>> {
        if self.normalizer.is_none() {
            self.added.identity_segments(text)
        } else {
            self.added.raw_segments(text)
        }
    }

    /// Ids of `text` on a fast path: added tokens are cut out first and the text between
    /// them goes to `piece(start, piece, out)`.
    fn ids_by_segment(
        &self,
        text: &str,
        out: &mut Vec<u32>,
        mut piece: impl FnMut(usize, &str, &mut Vec<u32>) -> Result<()>,
    ) -> Result<()> {
        // Most texts hold no added token: then the text is one segment, with no list built.
        let one = if self.normalizer.is_some() {
            self.added.raw_matches_none(text)
        } else {
            self.added.identity_matches_none(text)
        };
        if one {
            return piece(0, text, out);
        }
        for (id, (s, e)) in self.segments(text)? {
            match id {
                Some(id) => out.push(id),
                None => piece(s, &text[s..e], out)?,
            }
        }
        Ok(())
    }

    fn ids_of_text(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let model = self.model.as_model();
        let mut toks: Vec<Token> = Vec::new();
        // The model's ids of one word.
        let mut word_ids = |w: &str, out: &mut Vec<u32>| -> Result<()> {
            toks.clear();
            model.tokenize(w, &mut toks)?;
            out.extend(toks.iter().map(|t| t.id));
            Ok(())
        };
        let mut word = String::new();
        match (self.fast(), &self.model, &self.normalizer) {
            (
                Some(FastPath::ByteLevel {
                    add_prefix_space,
                    split,
                }),
                m,
                _,
            ) => {
                let bpe = match m {
                    ModelWrapper::Bpe(b) if b.has_byte_level_ids() => Some(b.as_ref()),
                    _ => None,
                };
                self.ids_by_segment(text, out, |_, piece, out| {
                    if let Some(bpe) = bpe {
                        return bpe.with_byte_level_words(|words| {
                            FastPath::byte_level_text_ids(
                                add_prefix_space,
                                split,
                                piece,
                                words,
                                out,
                            )
                        });
                    }
                    FastPath::for_each_byte_level_word(add_prefix_space, split, piece, |raw| {
                        crate::fast::byte_level_string(raw, &mut word);
                        word_ids(&word, out)
                    })
                })
            }
            (Some(FastPath::WhitespaceMeta), ModelWrapper::Unigram(u), Some(norm)) => {
                // Every piece is `▁` + the text after it: the cache is keyed by that text, so
                // a hit spells out no `▁word`.
                let classes = norm.ascii_word_classes();
                let mut normed = String::new();
                u.with_cache(|mut cache| {
                    self.ids_by_segment(text, out, |_, piece, out| {
                        if let Some(classes) = classes.filter(|_| piece.is_ascii()) {
                            let base = out.len();
                            let kept = crate::fast::ascii_meta_words(piece, classes, |w| {
                                u.meta_word_ids(cache.as_deref_mut(), w, &mut word, out)
                            })?;
                            if kept {
                                return Ok(());
                            }
                            out.truncate(base);
                        }
                        match norm.normalize_text(piece, &mut normed) {
                            Some(r) => r?,
                            None => {
                                for split in &self.tokenize_plain(piece)?.splits {
                                    out.extend(split.tokens.iter().flatten().map(|t| t.id));
                                }
                                return Ok(());
                            }
                        }
                        crate::fast::for_each_meta_rest(&normed, |rest| {
                            u.meta_word_ids(cache.as_deref_mut(), rest, &mut word, out)
                        })
                    })
                })
            }
            (Some(FastPath::WhitespaceMeta), _, Some(norm)) => {
                let mut normed = String::new();
                let mut meta = String::new();
                self.ids_by_segment(text, out, |_, piece, out| {
                    if let Some(r) = norm.normalize_text(piece, &mut normed) {
                        r?;
                        return crate::fast::for_each_meta_rest(&normed, |rest| {
                            meta.clear();
                            meta.push('\u{2581}');
                            meta.push_str(rest);
                            word_ids(&meta, out)
                        });
                    }
                    for split in &self.tokenize_plain(piece)?.splits {
                        out.extend(split.tokens.iter().flatten().map(|t| t.id));
                    }
                    Ok(())
                })
            }
            (Some(FastPath::Meta { prepend }), ModelWrapper::Bpe(bpe), _)
                if bpe.has_meta_words() =>
            {
                crate::fast::with_text_buf(|word| {
                    self.ids_by_segment(text, out, |start, piece, out| {
                        crate::fast::meta_escape(piece, prepend.applies(piece, start), word);
                        bpe.meta_text_ids(word, out)
                    })
                })
            }
            (Some(FastPath::Bert(flags)), ModelWrapper::WordPiece(wp), _) => {
                crate::fast::with_scratch(|scratch| {
                    self.ids_by_segment(text, out, |_, piece, out| {
                        flags.wordpiece_ids(wp, piece, scratch, out)
                    })
                })
            }
            (Some(fp @ FastPath::Bert { .. }), _, _) => {
                let mut scratch = Scratch::default();
                self.ids_by_segment(text, out, |_, piece, out| {
                    fp.for_each_piece(piece, &mut scratch, false, |_, w| word_ids(w, out))
                })
            }
            _ => {
                for s in &self.tokenize(text)?.splits {
                    out.extend(s.tokens.iter().flatten().map(|t| t.id));
                }
                Ok(())
            }
        }
    }

    fn encode_text(&self, text: &str, type_id: u32, word_idx: Option<u32>) -> Result<Encoding> {
        let mut out = EncodingBuilder {
            enc: Encoding::default(),
            conv: ByteToCharOffsets::new(text),
            type_id,
            word_idx,
            word: 0,
        };
        let model = self.model.as_model();
        if let (
            Some(FastPath::ByteLevel {
                add_prefix_space,
                split,
            }),
            ModelWrapper::Bpe(bpe),
        ) = (self.fast(), &self.model)
        {
            if bpe.has_byte_level_ids()
                && self.byte_level_encoding(text, add_prefix_space, split, bpe, &mut out)?
            {
                return Ok(out.enc);
            }
            // A vocabulary whose token strings do not spell their bytes: the general pipeline.
            out.enc = Encoding::default();
            out.word = 0;
        }
        if let (Some(FastPath::Meta { prepend }), ModelWrapper::Bpe(bpe)) =
            (self.fast(), &self.model)
        {
            if bpe.has_meta_words() {
                self.meta_encoding(text, prepend, &mut out)?;
                return Ok(out.enc);
            }
        }
        if let Some(fp) = self.fast().filter(FastPath::has_offsets) {
            let mut scratch = Scratch::default();
            let mut toks: Vec<Token> = Vec::new();
            self.encoding_by_segment(text, &mut out, |out, s, seg| {
                fp.for_each_piece(seg, &mut scratch, true, |piece, w| {
                    toks.clear();
                    model.tokenize(w, &mut toks)?;
                    for t in &toks {
                        let (a, b) = piece.original(t.offsets);
                        out.push(model, t, (s + a, s + b));
                    }
                    out.word += 1;
                    Ok::<(), Error>(())
                })?;
                Ok(true)
            })?;
            return Ok(out.enc);
        }
        let pts = self.tokenize(text)?;
        out.push_splits(model, &pts);
        Ok(out.enc)
    }
}

impl Core {
    /// An encoding on a fast path: added tokens are pushed as they are, and each non-empty
    /// piece between them goes to `piece(out, start, piece)`; `false` from `piece` stops (the
    /// caller then takes the general pipeline).
    fn encoding_by_segment(
        &self,
        text: &str,
        out: &mut EncodingBuilder,
        mut piece: impl FnMut(&mut EncodingBuilder, usize, &str) -> Result<bool>,
    ) -> Result<bool> {
        let model = self.model.as_model();
        for (id, (s, e)) in self.segments(text)? {
            if let Some(id) = id {
                out.push_token(model, &Token::with_value(id, &text[s..e], 0, e - s), s);
                out.word += 1;
            } else if s < e && !piece(out, s, &text[s..e])? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `encode_text` on the ByteLevel path: each word's ids come from the raw-byte merge (and
    /// its cache), and each token's byte length from its byte-level string (one character per
    /// byte). As in the general pipeline, every byte of a character is aligned to the whole
    /// character, and a prefix space to the segment's first character. False (nothing usable
    /// pushed) when a token's string does not have one character per byte of the word.
    fn byte_level_encoding(
        &self,
        text: &str,
        add_prefix_space: bool,
        split: crate::fast::WordSplit,
        bpe: &crate::models::bpe::Bpe,
        out: &mut EncodingBuilder,
    ) -> Result<bool> {
        let model = self.model.as_model();
        let mut ids = Vec::new();
        let mut prefixed = String::new();
        self.encoding_by_segment(text, out, |out, s, seg| {
            let Some(first) = seg.chars().next() else {
                return Ok(true);
            };
            // Positions below `shift` are the prefix space, aligned to the first character.
            let shift = usize::from(add_prefix_space && first != ' ');
            let w = if shift == 1 {
                prefixed.clear();
                prefixed.push(' ');
                prefixed.push_str(seg);
                prefixed.as_str()
            } else {
                seg
            };
            let floor = |x: usize| {
                (0..=x)
                    .rev()
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(0)
            };
            let ceil = |x: usize| (x..=text.len()).find(|&i| text.is_char_boundary(i));
            let mut word_start = 0;
            while word_start < w.len() {
                let word_end = split.match_end().map_or(w.len(), |end| end(w, word_start));
                ids.clear();
                bpe.byte_level_ids(&w.as_bytes()[word_start..word_end], &mut ids)?;
                let mut a = word_start;
                for &id in &ids {
                    let Some(len) = bpe.token_byte_len(id) else {
                        return Ok(false);
                    };
                    let b = a + len;
                    let start = if a < shift { s } else { floor(s + a - shift) };
                    let end = if b <= shift {
                        ceil(s + 1)
                    } else {
                        ceil(s + b - shift)
                    };
                    let Some(end) = end else {
                        return Ok(false);
                    };
                    out.push(model, &Token::new(id, 0, 0), (start, end));
                    a = b;
                }
                if a != word_end {
                    return Ok(false);
                }
                out.word += 1;
                word_start = word_end;
            }
            Ok(true)
        })
    }
}

impl Core {
    /// `encode_text` on the Meta path: each segment is escaped with, per byte, the original
    /// range it is aligned to (a replaced space to the space, a prepended `▁` to the first
    /// character, as the general pipeline aligns them), cut where `has_meta_words` allows,
    /// and each piece tokenized by the model.
    fn meta_encoding(
        &self,
        text: &str,
        prepend: crate::fast::MetaPrepend,
        out: &mut EncodingBuilder,
    ) -> Result<()> {
        const META: char = '\u{2581}';
        let model = self.model.as_model();
        let mut esc = String::new();
        let mut align: Vec<(usize, usize)> = Vec::new();
        let mut toks: Vec<Token> = Vec::new();
        self.encoding_by_segment(text, out, |out, s, piece| {
            let Some(first) = piece.chars().next() else {
                return Ok(true);
            };
            esc.clear();
            align.clear();
            if prepend.applies(piece, s) {
                esc.push(META);
                align.extend([(s, s + first.len_utf8()); 3]);
            }
            for (i, c) in piece.char_indices() {
                let r = (s + i, s + i + c.len_utf8());
                let c = if c == ' ' { META } else { c };
                esc.push(c);
                align.extend(std::iter::repeat_n(r, c.len_utf8()));
            }
            crate::models::bpe::for_each_meta_word(&esc, |a, b| {
                toks.clear();
                model.tokenize(&esc[a..b], &mut toks)?;
                for t in &toks {
                    let first = align.get(a + t.offsets.0);
                    let last = (a + t.offsets.1).checked_sub(1).and_then(|i| align.get(i));
                    let (Some(first), Some(last)) = (first, last) else {
                        return Err(Error::other("Meta path: token outside its piece"));
                    };
                    out.push(model, t, (first.0, last.1));
                }
                Ok(())
            })?;
            out.word += 1;
            Ok(true)
        })?;
        Ok(())
    }
}

/// Appends tokens to an `Encoding`, mapping their offsets to code points of the input.
struct EncodingBuilder {
    enc: Encoding,
    conv: ByteToCharOffsets,
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
        off = self.conv.convert(off).unwrap_or(off);
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

    /// Every split of `pts` (of the whole input).
    fn push_splits(&mut self, model: &dyn Model, pts: &PreTokenizedString) {
        for split in &pts.splits {
            let n = &split.normalized;
            let shift = n.offsets_original().0;
            if let Some(tokens) = &split.tokens {
                for t in tokens {
                    // A token past its piece's end (byte fallback also spells the
                    // continuing prefix and the suffix) keeps its offsets within the piece,
                    // unshifted, as the reference does.
                    let off = n
                        .convert_normalized_range(t.offsets.0..t.offsets.1)
                        .map_or(t.offsets, |r| (shift + r.start, shift + r.end));
                    self.push(model, t, off);
                }
            }
            self.word += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tiktoken's `pat_str` of cl100k_base (as `from_tiktoken` takes it, before translation).
    const CL100K_PAT_STR: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

    fn bert_json() -> String {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "ab", "##b", "##c", "##a",
            "!", ".", "e", "##e", "é", "中", "x", "##x", "ca", "##fe", "caf", "[", "]",
        ];
        let v: serde_json::Map<String, Value> = vocab
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), Value::from(i as u32)))
            .collect();
        serde_json::json!({
            "version": "1.0",
            "added_tokens": [
                {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 4, "content": "[MASK]", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": true}
            ],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": v}
        })
        .to_string()
    }

    /// A small deterministic generator, so the test needs no extra dependency.
    fn texts(n: usize) -> Vec<String> {
        let alphabet: Vec<char> =
            "abcABCxX é中!.[]\t\n\r\u{b}\u{c}\u{1c}\u{85}\u{0}\u{1}\u{7f}\u{a0}\u{3000}\u{301}\u{2028}\u{fffd}ﬁ𝔸CAFÉ"
                .chars()
                .collect();
        let words = ["[CLS]", "[MASK]", " [MASK]", "café", "abc"];
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        (0..n)
            .map(|_| {
                let len = (next() % 24) as usize;
                let mut s = String::new();
                for _ in 0..len {
                    if next() % 8 == 0 {
                        s.push_str(words[(next() % words.len() as u64) as usize]);
                    } else {
                        s.push(alphabet[(next() % alphabet.len() as u64) as usize]);
                    }
                }
                s
            })
            .collect()
    }

    /// `encode_ids_lazy` and `encode_from_model_ids` (what a lazily built `Encoding` serves
    /// before the full pipeline runs) give the same ids, type ids, masks, sequence ranges and
    /// overflowing layout as `encode`, under every kind of processor, truncation and padding.
    #[test]
    fn lazy_encoding_parts_equal_full_encode() {
        use crate::encoding::{Direction, PaddingStrategy, TruncationStrategy};
        let bert =
            serde_json::json!({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]});
        let template = serde_json::json!({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 1}}, {"Sequence": {"id": "A", "type_id": 2}},
                       {"SpecialToken": {"id": "x", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                               "x": {"id": "x", "ids": [18, 19], "tokens": ["x", "##x"]}}
        });
        let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true});
        let truncations = [
            None,
            Some(TruncationParams {
                max_length: 6,
                stride: 2,
                ..Default::default()
            }),
            Some(TruncationParams {
                max_length: 5,
                stride: 1,
                direction: Direction::Left,
                strategy: TruncationStrategy::OnlyFirst,
            }),
        ];
        let paddings = [
            None,
            Some(PaddingParams {
                pad_to_multiple_of: Some(4),
                pad_id: 1,
                ..Default::default()
            }),
            Some(PaddingParams {
                strategy: PaddingStrategy::Fixed(20),
                direction: Direction::Left,
                pad_type_id: 3,
                ..Default::default()
            }),
        ];
        let docs = [
            (bert_json(), Value::Null),
            (bert_json(), bert),
            (bert_json(), template),
            (byte_level_json(true), byte_level),
        ];
        for (doc, processor) in docs {
            let mut v: Value = serde_json::from_str(&doc).unwrap();
            v["post_processor"] = processor;
            let base = Tokenizer::from_json_value(v).unwrap();
            for truncation in &truncations {
                let Ok(tok) = base.with_truncation(truncation.clone()) else {
                    continue;
                };
                for padding in &paddings {
                    let tok = tok.with_padding(padding.clone());
                    for t in texts(150) {
                        for add in [true, false] {
                            let full = tok.encode(InputSequence::Raw(&t), None, add);
                            let lazy = tok.encode_ids_lazy(&t, add);
                            let (Ok(full), Ok((model_ids, ids))) = (full, lazy) else {
                                panic!("one path failed on {t:?}");
                            };
                            let mut ids = ids.unwrap_or_else(|| model_ids.clone());
                            if let Some(p) = tok.padding() {
                                let target = p.target(ids.len());
                                crate::encoding::pad_ids(&mut ids, target, p.pad_id, p.direction);
                            }
                            assert_eq!(ids, full.ids, "ids of {t:?}");
                            let part = tok.encode_from_model_ids(model_ids, add).unwrap();
                            let same = |a: &Encoding, b: &Encoding| {
                                a.ids == b.ids
                                    && a.type_ids == b.type_ids
                                    && a.attention_mask == b.attention_mask
                                    && a.special_tokens_mask == b.special_tokens_mask
                                    && a.sequence_ranges == b.sequence_ranges
                                    && a.overflowing.len() == b.overflowing.len()
                            };
                            assert!(same(&part, &full), "fields of {t:?}");
                            for (a, b) in part.overflowing.iter().zip(&full.overflowing) {
                                assert!(same(a, b), "overflowing of {t:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bert_fast_path_equals_general_pipeline() {
        let fast = Tokenizer::from_json_str(&bert_json()).unwrap();
        let mut slow = Tokenizer::from_json_str(&bert_json()).unwrap();
        match Arc::get_mut(&mut slow.core) {
            Some(Backend::Json(c)) => {
                assert!(
                    c.fast.is_some(),
                    "the BERT pipeline should take the fast path"
                );
                c.fast = None;
            }
            _ => panic!("expected a tokenizer.json backend"),
        }
        for t in texts(1500) {
            let a = fast.encode(InputSequence::Raw(&t), None, false).unwrap();
            let b = slow.encode(InputSequence::Raw(&t), None, false).unwrap();
            assert_eq!(a, b, "text {t:?}");
            let (mut x, mut y) = (Vec::new(), Vec::new());
            fast.encode_ids(&t, false, &mut x).unwrap();
            slow.encode_ids(&t, false, &mut y).unwrap();
            assert_eq!(x, y, "text {t:?}");
        }
    }

    fn byte_level_json(add_prefix_space: bool) -> String {
        let mut vocab = serde_json::Map::new();
        for b in 0..=255u8 {
            let n = vocab.len();
            vocab.insert(
                crate::byte_level::byte_to_char(b).to_string(),
                Value::from(n),
            );
        }
        let merges = [("Ġ", "a"), ("a", "b"), ("Ġa", "b"), ("c", "c"), ("Ã", "©")];
        for (a, b) in merges {
            let n = vocab.len();
            vocab.insert(format!("{a}{b}"), Value::from(n));
        }
        let n = vocab.len();
        serde_json::json!({
            "version": "1.0",
            "added_tokens": [
                {"id": n, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                // Normalized tokens, matched after the raw ones (one overlaps "[CLS]").
                {"id": n + 1, "content": "[MASK]", "single_word": false, "lstrip": true, "rstrip": false, "normalized": true, "special": true},
                {"id": n + 2, "content": "S]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false},
                {"id": n + 3, "content": "é", "single_word": true, "lstrip": false, "rstrip": true, "normalized": true, "special": false}
            ],
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "vocab": vocab, "merges": merges.iter().map(|(a, b)| format!("{a} {b}")).collect::<Vec<_>>()}
        })
        .to_string()
    }

    #[test]
    fn byte_level_fast_ids_equal_general_pipeline() {
        for prefix in [false, true] {
            let json = byte_level_json(prefix).replace("<|end|>", "[CLS]");
            let fast = Tokenizer::from_json_str(&json).unwrap();
            let mut slow = Tokenizer::from_json_str(&json).unwrap();
            match Arc::get_mut(&mut slow.core) {
                Some(Backend::Json(c)) => {
                    assert!(matches!(c.fast, Some(FastPath::ByteLevel { .. })));
                    c.fast = None;
                }
                _ => panic!("expected a tokenizer.json backend"),
            }
            // Also longer texts (several joined), where the word loop scans sixteen-byte
            // windows.
            let short = texts(1500);
            let long = short.chunks(6).map(|c| c.concat()).collect::<Vec<_>>();
            for t in short.into_iter().chain(long) {
                let (mut x, mut y) = (Vec::new(), Vec::new());
                fast.encode_ids(&t, false, &mut x).unwrap();
                slow.encode_ids(&t, false, &mut y).unwrap();
                assert_eq!(x, y, "text {t:?}");
                assert_same_encoding(&fast, &slow, &t);
            }
        }
    }

    /// `encode` on the fast path and on the general pipeline agree field by field.
    fn assert_same_encoding(fast: &Tokenizer, slow: &Tokenizer, t: &str) {
        let x = fast.encode(InputSequence::Raw(t), None, true).unwrap();
        let y = slow.encode(InputSequence::Raw(t), None, true).unwrap();
        assert_eq!(x.ids, y.ids, "ids of {t:?}");
        assert_eq!(x.tokens, y.tokens, "tokens of {t:?}");
        assert_eq!(x.offsets, y.offsets, "offsets of {t:?}");
        assert_eq!(x.words, y.words, "words of {t:?}");
        assert_eq!(
            x.special_tokens_mask, y.special_tokens_mask,
            "mask of {t:?}"
        );
    }

    /// A `.tiktoken` tokenizer with the cl100k split takes the ByteLevel path (hand-written
    /// split, whole-word lookup for `ignore_merges`, tiktoken's shared ranks) and gives the ids
    /// of the general pipeline. "xyz" and "a b" are tokens no merge makes (their halves are not
    /// tokens), so only the whole-word lookup finds them.
    #[test]
    fn cl100k_fast_ids_equal_general_pipeline() {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for t in [
            "ab", "abc", "bc", "aba", "ba", "bab", " a", " ab", "'s", "ll", "'ll", "xyz", "a b",
            "\r\n", "  ", "12", "123", "caf", "é", "café", "中中", "AB", "ABC",
        ] {
            tokens.push(t.as_bytes().to_vec());
        }
        let file: String = tokens
            .iter()
            .enumerate()
            .map(|(r, t)| format!("{} {r}\n", b64.encode(t)))
            .collect();
        let specials = [("<|end|>".to_string(), 1000u32)];
        let pattern = CL100K_PAT_STR;
        let fast = Tokenizer::from_tiktoken(file.as_bytes(), pattern, &specials).unwrap();
        let mut slow = Tokenizer::from_tiktoken(file.as_bytes(), pattern, &specials).unwrap();
        match Arc::get_mut(&mut slow.core) {
            Some(Backend::Json(c)) => {
                assert!(matches!(
                    c.fast,
                    Some(FastPath::ByteLevel {
                        split: crate::fast::WordSplit::Cl100k,
                        ..
                    })
                ));
                c.fast = None;
            }
            _ => panic!("expected a tokenizer.json backend"),
        }
        let mut all = texts(1500);
        all.extend(
            [
                "xyz",
                "a xyz b",
                "ababab",
                "I'LL 123456 <|end|>ab",
                "abcab\r\n\r\n  x  ",
            ]
            .map(String::from),
        );
        for t in all {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            fast.encode_ids(&t, true, &mut x).unwrap();
            slow.encode_ids(&t, true, &mut y).unwrap();
            assert_eq!(x, y, "text {t:?}");
            assert_same_encoding(&fast, &slow, &t);
        }
        let mut ids = Vec::new();
        fast.encode_ids("xyz", false, &mut ids).unwrap();
        assert_eq!(ids, [256 + 11]);
    }

    /// A Llama-like BPE document: characters, a few merges around `▁`, byte fallback for some
    /// bytes, fused unknowns, added tokens; `shape` picks the normalizer / pre-tokenizer.
    fn meta_json(shape: &str, extra_merge: Option<(&str, &str)>) -> String {
        let mut vocab = serde_json::Map::new();
        for t in ["<unk>", "<s>", "▁", "a", "b", "c", "é", "!", "\t"] {
            let n = vocab.len();
            vocab.insert(t.to_string(), Value::from(n));
        }
        for b in [0xC3u8, 0xA9, 0xE4, 0xB8, 0xAD, 0x0A] {
            let n = vocab.len();
            vocab.insert(format!("<0x{b:02X}>"), Value::from(n));
        }
        let mut merges = vec![
            ("▁", "a"),
            ("a", "b"),
            ("▁a", "b"),
            ("▁", "▁"),
            ("▁▁", "▁"),
            ("b", "!"),
        ];
        merges.extend(extra_merge);
        for (a, b) in &merges {
            let n = vocab.len();
            vocab.entry(format!("{a}{b}")).or_insert(Value::from(n));
        }
        let (norm, pre) = match shape {
            "llama" => (
                serde_json::json!({"type": "Sequence", "normalizers": [
                    {"type": "Prepend", "prepend": "▁"},
                    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}),
                Value::Null,
            ),
            scheme => (
                Value::Null,
                serde_json::json!({"type": "Metaspace", "replacement": "▁",
                    "prepend_scheme": scheme, "split": false}),
            ),
        };
        let n = vocab.len();
        serde_json::json!({
            "version": "1.0",
            "added_tokens": [
                {"id": n, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": n + 1, "content": "[MASK]", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": true}
            ],
            "normalizer": norm,
            "pre_tokenizer": pre,
            "model": {"type": "BPE", "vocab": vocab, "unk_token": "<unk>", "fuse_unk": true,
                      "byte_fallback": true,
                      "merges": merges.iter().map(|(a, b)| format!("{a} {b}")).collect::<Vec<_>>()}
        })
        .to_string()
    }

    #[test]
    fn meta_fast_ids_equal_general_pipeline() {
        for shape in ["llama", "always", "first", "never"] {
            let json = meta_json(shape, None);
            let fast = Tokenizer::from_json_str(&json).unwrap();
            let mut slow = Tokenizer::from_json_str(&json).unwrap();
            match (Arc::get_mut(&mut slow.core), &fast.core.as_ref()) {
                (Some(Backend::Json(c)), Backend::Json(f)) => {
                    assert!(matches!(c.fast, Some(FastPath::Meta { .. })), "{shape}");
                    assert!(
                        matches!(&f.model, ModelWrapper::Bpe(b) if b.has_meta_words()),
                        "{shape}"
                    );
                    c.fast = None;
                }
                _ => panic!("expected a tokenizer.json backend"),
            }
            for t in texts(3000) {
                let t = t.replace('x', "ab").replace('X', "▁");
                let (mut x, mut y) = (Vec::new(), Vec::new());
                fast.encode_ids(&t, false, &mut x).unwrap();
                slow.encode_ids(&t, false, &mut y).unwrap();
                assert_eq!(x, y, "{shape}: text {t:?}");
                assert_same_encoding(&fast, &slow, &t);
            }
        }
    }

    #[test]
    fn meta_words_refused_when_a_merge_crosses_a_word_start() {
        let json = meta_json("llama", Some(("b!", "▁")));
        let tok = Tokenizer::from_json_str(&json).unwrap();
        match tok.core.as_ref() {
            Backend::Json(c) => {
                assert!(matches!(&c.model, ModelWrapper::Bpe(b) if !b.has_meta_words()))
            }
            _ => panic!("expected a tokenizer.json backend"),
        }
        // Still exact through the general path: "b!▁" merges across the word start.
        let mut ids = Vec::new();
        tok.encode_ids("b! c", false, &mut ids).unwrap();
        let Some(id) = tok.token_to_id("b!▁") else {
            panic!("merged token missing");
        };
        assert!(ids.contains(&id), "{ids:?}");
    }

    /// The T5 document (real Precompiled charsmap) through the WhitespaceMeta ids path and
    /// through the general pipeline. Needs ../shared/data (or PIECEWORK_DATA); skipped without.
    #[test]
    fn whitespace_meta_fast_ids_equal_general_pipeline() {
        let dir = crate::test_data_dir();
        let Ok(json) = std::fs::read_to_string(format!("{dir}/t5-small/tokenizer.json")) else {
            eprintln!("skipped: t5-small/tokenizer.json not found under {dir}");
            return;
        };
        let fast = Tokenizer::from_json_str(&json).unwrap();
        let mut slow = Tokenizer::from_json_str(&json).unwrap();
        match Arc::get_mut(&mut slow.core) {
            Some(Backend::Json(c)) => {
                assert_eq!(c.fast, Some(FastPath::WhitespaceMeta));
                c.fast = None;
            }
            _ => panic!("expected a tokenizer.json backend"),
        }
        let extra = [
            "</s>",
            "<extra_id_1>",
            "Hello  world\n",
            "a\r\nb",
            "\u{b}x\u{c}y\u{1c}",
            "▁a",
            "a▁▁b▁ ▁",
            "ｶﾞ ＡＢ①\u{301}e\u{301}",
            "中文。　日本語",
            "supercalifragilisticexpialidocious antidisestablishmentarianism",
            "ＡＢＣＤＥＦＧＨＩＪＫＬ x\u{1680}y\u{2009}z\u{205f}w\u{2028}v\u{a0}u\u{85}t",
            "tab\tsep\x0bvt \x01ctl",
        ];
        let mut all = texts(3000);
        all.extend(extra.iter().map(|s| s.to_string()));
        // Real multilingual lines (the non-ASCII fast path): every script of the UDHR.
        if let Ok(udhr) = std::fs::read_to_string(format!("{dir}/corpora/udhr2_all.txt")) {
            all.extend(udhr.lines().step_by(7).take(4000).map(str::to_owned));
        }
        // Twice: the second pass replays the word cache.
        for _ in 0..2 {
            for (k, t) in all.iter().enumerate() {
                let t = format!("{t} {}", extra[k % extra.len()]);
                let (mut x, mut y) = (Vec::new(), Vec::new());
                fast.encode_ids(&t, false, &mut x).unwrap();
                slow.encode_ids(&t, false, &mut y).unwrap();
                assert_eq!(x, y, "text {t:?}");
            }
        }
    }

    /// Long documents cut at newlines (`crate::cuts`) give the ids of the whole documents,
    /// special tokens added once, on every pipeline the cuts are allowed on; the pipelines
    /// where they are not exact keep them off. Needs ../shared/data; skipped without.
    #[test]
    fn newline_cuts_of_long_documents_give_the_whole_documents_ids() {
        let dir = crate::test_data_dir();
        let Ok(prose) = std::fs::read_to_string(format!("{dir}/corpora/big.txt")) else {
            eprintln!("skipped: corpora/big.txt not found under {dir}");
            return;
        };
        let prose = prose.get(..400_000).unwrap_or(&prose);
        let mut lines: Vec<String> = texts(4000);
        lines.extend(prose.lines().map(str::to_owned));
        // Lines led by added tokens, digits, CRLF ends and runs of newlines around cuts.
        let leads = [
            "[MASK]x", "<mask>y", "</s>", "42 is", "\r", "\n\n", " ", "é",
        ];
        let docs: Vec<String> = (0..4)
            .map(|d| {
                let mut doc = String::new();
                for (k, l) in lines.iter().enumerate().skip(d * 997).take(6000) {
                    doc.push_str(leads[(k * 7 + d) % leads.len()]);
                    doc.push_str(l);
                    doc.push_str(if k % 5 == 0 { "\r\n" } else { "\n" });
                }
                doc
            })
            .collect();
        let mut refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        refs.push("short\ntext");
        for (name, allowed) in [
            ("bert-base-uncased", true),
            ("gpt2", true),
            ("t5-small", true),
            ("roberta-base", true),
            ("codellama", false),
        ] {
            let Ok(json) = std::fs::read_to_string(format!("{dir}/{name}/tokenizer.json")) else {
                eprintln!("skipped {name}: not found under {dir}");
                continue;
            };
            let tok = Tokenizer::from_json_str(&json).unwrap();
            let Backend::Json(c) = &*tok.core else {
                panic!("expected a tokenizer.json backend");
            };
            assert_eq!(c.cuts_at_newlines.is_some(), allowed, "{name}");
            if !allowed {
                continue;
            }
            // The batch's own plan, and one with cuts every few hundred bytes: every kind of
            // line end and line start then meets a cut.
            let rule = c.cuts_at_newlines.clone().unwrap_or_default();
            assert_plans_exact(name, &tok, &refs, &rule);
        }
    }

    /// Documents of real lines (prose, every script of the UDHR, random corners), each line
    /// led by one of `leads` and ended by one of several line ends, so that every kind of
    /// character meets a cut on both sides.
    fn cut_test_docs(dir: &str, leads: &[&str]) -> Option<Vec<String>> {
        let prose = std::fs::read_to_string(format!("{dir}/corpora/big.txt")).ok()?;
        let prose = prose.get(..300_000).unwrap_or(&prose);
        let mut lines: Vec<String> = texts(3000);
        lines.extend(prose.lines().map(str::to_owned));
        if let Ok(udhr) = std::fs::read_to_string(format!("{dir}/corpora/udhr2_all.txt")) {
            lines.extend(udhr.lines().step_by(5).take(3000).map(str::to_owned));
        }
        let ends = ["\n", "\n", "\r\n", "\n\n", " \n", "\t\n", "\n "];
        let mut docs: Vec<String> = (0..4)
            .map(|d| {
                let mut doc = String::new();
                for (k, l) in lines.iter().enumerate().skip(d * 997).take(5000) {
                    doc.push_str(leads[(k * 7 + d) % leads.len()]);
                    doc.push_str(l);
                    doc.push_str(ends[(k * 3 + d) % ends.len()]);
                }
                doc
            })
            .collect();
        docs.push("short\ntext".to_owned());
        docs.push(String::new());
        Some(docs)
    }

    /// Every plan of `refs` (the batch's own, one cut every ~300 bytes) gives each text the
    /// ids `encode_ids` gives the whole text.
    fn assert_plans_exact(name: &str, tok: &Tokenizer, refs: &[&str], rule: &crate::cuts::Rule) {
        let plan = crate::cuts::plan(refs, 2, rule).expect("long documents are cut");
        assert!(
            plan.pieces.len() > refs.len() + 8,
            "{name}: {}",
            plan.pieces.len()
        );
        let dense = crate::cuts::plan_with(refs, 300, rule);
        assert!(dense.pieces.len() > 20 * plan.pieces.len(), "{name}");
        for (plan, add) in [
            (&plan, true),
            (&plan, false),
            (&dense, true),
            (&dense, false),
        ] {
            let got = tok.encode_plan_ids(plan, add).unwrap();
            for (k, (t, g)) in refs.iter().zip(&got).enumerate() {
                let mut want = Vec::new();
                tok.encode_ids(t, add, &mut want).unwrap();
                if want != *g {
                    let at = want.iter().zip(g).take_while(|(a, b)| a == b).count();
                    panic!("{name} add={add}: ids of text {k} differ from id {at} on");
                }
            }
        }
    }

    /// SentencePiece BPE models with an identity normalizer are cut after any `\n`, the
    /// later pieces without the dummy prefix; other models are not cut. Needs
    /// ../shared/data; skipped without.
    #[test]
    fn newline_cuts_of_sentencepiece_bpe_documents_give_the_whole_documents_ids() {
        let dir = crate::test_data_dir();
        let leads = [
            "",
            "",
            " ",
            "  ",
            "\n",
            "\t",
            "▁",
            "▁▁x",
            "é",
            "中",
            "\u{301}",
            "<s>",
            "<0x0A>",
            "\r",
            "42 ",
            "\u{1F600}",
            "\u{3000}",
            "\u{0}",
        ];
        let Some(docs) = cut_test_docs(&dir, &leads) else {
            eprintln!("skipped: corpora/big.txt not found under {dir}");
            return;
        };
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        for (file, allowed) in [
            ("llama2/tokenizer.model", true),
            ("mistral-7b-v0.3/tokenizer.model.v3", true),
            ("xlnet-base-cased/spiece.model", false),
            ("bpemb-en/en.wiki.bpe.vs100000.model", false),
        ] {
            let Ok(bytes) = std::fs::read(format!("{dir}/{file}")) else {
                eprintln!("skipped {file}: not found under {dir}");
                continue;
            };
            let tok = Tokenizer::from_sentencepiece(&bytes).unwrap();
            let Backend::Sp(sp) = &*tok.core else {
                panic!("expected a sentencepiece backend");
            };
            assert_eq!(sp.newline_cuts_exact(), allowed, "{file}");
            if allowed {
                assert_plans_exact(file, &tok, &refs, &crate::cuts::Rule::any());
                // The dummy prefix kept on later pieces would change the ids: the test
                // sees a wrong continuation.
                let dense = crate::cuts::plan_with(&refs, 300, &crate::cuts::Rule::any());
                let mut joined = Vec::new();
                for p in dense.pieces.get(..dense.bounds[1]).unwrap_or_default() {
                    sp.encode_ids(p.text, &mut joined).unwrap();
                }
                let mut whole = Vec::new();
                sp.encode_ids(refs[0], &mut whole).unwrap();
                assert_ne!(joined, whole, "{file}");
            }
        }
    }

    /// The tokenizer.json pipelines' cuts, between any two visible characters (letters of
    /// every script, digits, punctuation, combining marks, astral characters) but before an
    /// `lstrip` token's first character. Needs ../shared/data; skipped without.
    #[test]
    fn newline_cuts_between_visible_characters_give_the_whole_documents_ids() {
        let dir = crate::test_data_dir();
        let leads = [
            "",
            "",
            "[MASK]x",
            "<mask>y",
            "</s>",
            "42 is",
            "\r",
            "\n\n",
            " ",
            "é",
            "中",
            "\u{301}a",
            "\u{1F600}",
            "(",
            "«",
            "'s",
            "\u{200b}",
            "\u{ad}",
            "\u{1}",
            "ﬁ",
            "İ",
            "Σ",
            "\u{e01}\u{e31}",
            "\u{915}\u{94d}",
        ];
        let Some(docs) = cut_test_docs(&dir, &leads) else {
            eprintln!("skipped: corpora/big.txt not found under {dir}");
            return;
        };
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        for name in ["bert-base-uncased", "gpt2", "t5-small", "roberta-base"] {
            let Ok(json) = std::fs::read_to_string(format!("{dir}/{name}/tokenizer.json")) else {
                eprintln!("skipped {name}: not found under {dir}");
                continue;
            };
            let tok = Tokenizer::from_json_str(&json).unwrap();
            let Backend::Json(c) = &*tok.core else {
                panic!("expected a tokenizer.json backend");
            };
            let rule = c.cuts_at_newlines.clone().expect("cuts allowed");
            assert!(rule.visible_before && rule.visible_after, "{name}");
            assert_eq!(
                rule.not_after.contains(&'<'),
                name == "roberta-base",
                "{name}"
            );
            assert_plans_exact(name, &tok, &refs, &rule);
            // A looser rule is wrong here: GPT-2's lookahead sees the whitespace before a
            // `\n`, RoBERTa's `<mask>` takes the `\n` before it.
            let loose = match name {
                "gpt2" => Some(crate::cuts::Rule::any()),
                "roberta-base" => Some(crate::cuts::Rule::visible(Vec::new())),
                _ => None,
            };
            if let Some(loose) = loose {
                let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    assert_plans_exact(name, &tok, &refs, &loose);
                }));
                assert!(wrong.is_err(), "{name}: a looser rule went unnoticed");
            }
        }
    }

    /// The byte-level tiktoken splits (cl100k's, Llama 3's, o200k's, tekken's patterns over
    /// cl100k_base's ranks, special tokens in the text) are cut after a `\n` before a visible
    /// character (o200k, tekken: but `/`), and their ids stay the whole documents'; a looser
    /// rule changes them. Needs ../shared/data; skipped without.
    #[test]
    fn newline_cuts_of_tiktoken_splits_give_the_whole_documents_ids() {
        use crate::fast::WordSplit;
        let dir = crate::test_data_dir();
        let Ok(ranks) = std::fs::read(format!("{dir}/cl100k-tiktoken/cl100k_base.tiktoken")) else {
            eprintln!("skipped: cl100k-tiktoken not found under {dir}");
            return;
        };
        // Line starts and ends the splits treat apart around a `\n`: `/` (o200k and tekken
        // take it after punctuation and newlines), punctuation (its match takes the newlines
        // after it), white space, `\r`, digits, contractions, marks, special tokens.
        let leads = [
            "",
            "",
            "/",
            "//x",
            "/\n",
            " /",
            ".",
            "./",
            "-\n",
            "\r",
            "\t",
            " ",
            "  ",
            "\n\n",
            "42",
            "'s",
            "'LL",
            "é",
            "中",
            "\u{301}a",
            "\u{1F600}",
            "\u{3000}",
            "\u{a0}x",
            "<|endoftext|>",
            "x<|endoftext|>\n",
        ];
        let Some(mut docs) = cut_test_docs(&dir, &leads) else {
            eprintln!("skipped: corpora/big.txt not found under {dir}");
            return;
        };
        // Lines ended by punctuation before the next line's lead.
        for d in docs.iter_mut().take(2) {
            *d = d.replace(" \n", ".\n").replace("\t\n", "!)\n");
        }
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        let specials = [("<|endoftext|>".to_string(), 100_257u32)];
        for (split, pattern, looser) in [
            (WordSplit::Cl100k, CL100K_PAT_STR, crate::cuts::Rule::any()),
            (
                WordSplit::Llama3,
                crate::byte_level::cl100k::LLAMA3_PATTERN,
                crate::cuts::Rule::any(),
            ),
            (
                WordSplit::O200k,
                crate::byte_level::o200k::O200K_PATTERN,
                crate::cuts::Rule::visible_after(Vec::new()),
            ),
            (
                WordSplit::Tekken,
                crate::byte_level::o200k::TEKKEN_PATTERN,
                crate::cuts::Rule::visible_after(Vec::new()),
            ),
        ] {
            let name = format!("{split:?}");
            let tok = Tokenizer::from_tiktoken(&ranks, pattern, &specials).unwrap();
            let Backend::Json(c) = &*tok.core else {
                panic!("expected a tokenizer.json backend");
            };
            assert_eq!(
                c.fast,
                Some(FastPath::ByteLevel {
                    add_prefix_space: false,
                    split
                }),
                "{name}"
            );
            let rule = c.cuts_at_newlines.clone().expect("cuts allowed");
            assert_eq!(Some(&rule), split.newline_cut().as_ref(), "{name}");
            assert_plans_exact(&name, &tok, &refs, &rule);
            let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                assert_plans_exact(&name, &tok, &refs, &looser);
            }));
            assert!(
                wrong.is_err(),
                "{name}: the looser {looser:?} went unnoticed"
            );
        }
    }

    /// `encode_batch_flat` is `encode_batch_ids` joined, for batches of every size (chunked,
    /// on the calling thread, cut into pieces), with and without special tokens.
    #[test]
    fn flat_batches_are_the_rows_joined() {
        let dir = crate::test_data_dir();
        let Ok(json) = std::fs::read_to_string(format!("{dir}/bert-base-uncased/tokenizer.json"))
        else {
            eprintln!("skipped: bert-base-uncased not found under {dir}");
            return;
        };
        let tok = Tokenizer::from_json_str(&json).unwrap();
        let lines = texts(5000);
        let doc = lines.join("\n");
        let mut batches: Vec<Vec<&str>> = [0, 1, 7, 8, 100, 5000]
            .iter()
            .map(|&n| lines.iter().take(n).map(String::as_str).collect())
            .collect();
        batches.push(vec![doc.as_str(), "x", "", doc.as_str()]);
        for b in &batches {
            for add in [true, false] {
                let rows = tok.encode_batch_ids(b, add).unwrap();
                let (ids, ends) = tok.encode_batch_flat(b, add).unwrap();
                assert_eq!(ends.len(), rows.len());
                let mut from = 0;
                for (r, &e) in rows.iter().zip(&ends) {
                    assert_eq!(ids.get(from..e), Some(r.as_slice()));
                    from = e;
                }
                assert_eq!(from, ids.len());
            }
        }
    }

    /// Added tokens that a cut could split or change keep the cuts off.
    #[test]
    fn added_tokens_that_span_or_strip_across_a_cut_keep_cuts_off() {
        let json = |added: &str| {
            format!(
                r###"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{added}],
                "normalizer":{{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,
                "strip_accents":null,"lowercase":true}},"pre_tokenizer":{{"type":"BertPreTokenizer"}},
                "post_processor":null,"decoder":null,"model":{{"type":"WordPiece","unk_token":"[UNK]",
                "continuing_subword_prefix":"##","max_input_chars_per_word":100,
                "vocab":{{"[UNK]":0,"a":1,"b":2}}}}}}"###
            )
        };
        let token = |content: &str, lstrip: bool| {
            format!(
                r#"{{"id":3,"content":"{content}","single_word":false,"lstrip":{lstrip},
                "rstrip":true,"normalized":false,"special":true}}"#
            )
        };
        let cuts = |added: String| match &*Tokenizer::from_json_str(&json(&added)).unwrap().core {
            Backend::Json(c) => c.cuts_at_newlines.clone().map(|r| r.not_after),
            Backend::Sp(_) => panic!("expected a tokenizer.json backend"),
        };
        assert_eq!(cuts(String::new()), Some(vec![]));
        assert_eq!(cuts(token("[MASK]", true)), Some(vec!['[']));
        assert_eq!(cuts(token("mask", false)), Some(vec![]));
        assert_eq!(cuts(token("mask", true)), Some(vec!['m']));
        assert_eq!(cuts(token("new york", false)), None);
        assert_eq!(cuts(token("a\\nb", false)), None);
    }
}
