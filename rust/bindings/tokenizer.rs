//! `piecework._core.Tokenizer` and `piecework._core.Encoding`.
//!
//! The Python object holds an `Arc` snapshot of the immutable Rust [`Tokenizer`]. Reconfiguring
//! (padding, truncation) builds a new snapshot and swaps it in; the lock is held only to clone
//! or replace the `Arc`, never while encoding, so any number of threads can encode (with the GIL
//! released) while another reconfigures, and each call sees one whole configuration.

use super::fastcall::{fast_method, Args, MethodDef};
use super::{
    ids_list, ids_lists_streamed, plan_lists_streamed, released, to_py_err, with_ids_buffer,
};
use crate::encoding::{
    Direction, Encoding, PaddingParams, PaddingStrategy, TruncationParams, TruncationStrategy,
};
use crate::tokenizer::{InputSequence, Tokenizer};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTokenizer>()?;
    m.add_class::<PyEncoding>()?;
    // The per-text calls as method descriptors of the class (see `fastcall`), in place of
    // the general methods, which stay as `_encode_ids` and `_encode`.
    let ty = m.py().get_type::<PyTokenizer>();
    ty.setattr(intern!(m.py(), "encode_ids"), ENCODE_IDS.descriptor(&ty)?)?;
    ty.setattr(intern!(m.py(), "encode"), ENCODE.descriptor(&ty)?)?;
    Ok(())
}

/// One input sequence, owned so that it can cross into the GIL-free section.
enum OwnedSeq {
    Raw(String),
    Pre(Vec<String>),
}

impl OwnedSeq {
    fn as_input(&self) -> InputSequence<'_> {
        match self {
            OwnedSeq::Raw(s) => InputSequence::Raw(s),
            OwnedSeq::Pre(words) => {
                InputSequence::PreTokenized(words.iter().map(|w| &**w).collect())
            }
        }
    }

    fn extract(obj: &Bound<'_, PyAny>, is_pretokenized: bool) -> PyResult<OwnedSeq> {
        if is_pretokenized {
            Self::extract_pre(obj).ok_or_else(|| {
                PyTypeError::new_err(
                    "PreTokenizedInputSequence must be Union[List[str], Tuple[str]]",
                )
            })
        } else {
            Self::extract_raw(obj)
                .ok_or_else(|| PyTypeError::new_err("TextInputSequence must be str"))
        }
    }

    fn extract_raw(obj: &Bound<'_, PyAny>) -> Option<OwnedSeq> {
        let s = obj.cast::<PyString>().ok()?;
        s.to_cow().ok().map(|c| OwnedSeq::Raw(c.into_owned()))
    }

    /// A list or tuple (or any non-str sequence, e.g. a numpy array) of str.
    fn extract_pre(obj: &Bound<'_, PyAny>) -> Option<OwnedSeq> {
        if obj.is_instance_of::<PyString>() {
            return None;
        }
        obj.extract::<Vec<String>>().ok().map(OwnedSeq::Pre)
    }
}

type OwnedInput = (OwnedSeq, Option<OwnedSeq>);

/// One item of `encode_batch`: a sequence, or a pair given as a 2-tuple or 2-list.
fn extract_batch_item(obj: &Bound<'_, PyAny>, is_pretokenized: bool) -> PyResult<OwnedInput> {
    let single = if is_pretokenized {
        OwnedSeq::extract_pre(obj)
    } else {
        OwnedSeq::extract_raw(obj)
    };
    if let Some(s) = single {
        return Ok((s, None));
    }
    let pair: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = if let Ok(t) = obj.cast::<PyTuple>() {
        if t.len() == 2 {
            Some((t.get_item(0)?, t.get_item(1)?))
        } else {
            None
        }
    } else if let Ok(l) = obj.cast::<PyList>() {
        if l.len() == 2 {
            Some((l.get_item(0)?, l.get_item(1)?))
        } else {
            None
        }
    } else {
        None
    };
    let bad = || {
        PyTypeError::new_err(if is_pretokenized {
            "PreTokenizedEncodeInput must be Union[PreTokenizedInputSequence, Tuple[PreTokenizedInputSequence, PreTokenizedInputSequence]]"
        } else {
            "TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]"
        })
    };
    let (a, b) = pair.ok_or_else(bad)?;
    let a = OwnedSeq::extract(&a, is_pretokenized).map_err(|_| bad())?;
    let b = OwnedSeq::extract(&b, is_pretokenized).map_err(|_| bad())?;
    Ok((a, Some(b)))
}

fn parse_direction(value: &str) -> PyResult<Direction> {
    match value {
        "left" => Ok(Direction::Left),
        "right" => Ok(Direction::Right),
        other => Err(super::TokenizerError::new_err(format!(
            "Unknown `direction`: `{other}`. Use one of `left` or `right`"
        ))),
    }
}

fn direction_str(d: Direction) -> &'static str {
    match d {
        Direction::Left => "left",
        Direction::Right => "right",
    }
}

fn strategy_str(s: TruncationStrategy) -> &'static str {
    match s {
        TruncationStrategy::LongestFirst => "longest_first",
        TruncationStrategy::OnlyFirst => "only_first",
        TruncationStrategy::OnlySecond => "only_second",
    }
}

/// A tokenizer (tokenizer.json pipeline). Immutable core; padding and truncation swap snapshots.
/// `piecework.Tokenizer` is a subclass: its objects are these, with no Python attribute in
/// the way of the per-text calls. An object made by `__new__` alone holds no tokenizer until
/// `_assign` gives it one.
#[pyclass(frozen, subclass, module = "piecework._core", name = "Tokenizer")]
pub struct PyTokenizer {
    current: RwLock<Option<Arc<Tokenizer>>>,
}

fn not_loaded() -> PyErr {
    super::TokenizerError::new_err("this Tokenizer holds no tokenizer (made by __new__ alone)")
}

impl PyTokenizer {
    fn new(py: Python<'_>, tok: Tokenizer) -> Self {
        super::reserve_shared_ints(py, tok.id_bound());
        PyTokenizer {
            current: RwLock::new(Some(Arc::new(tok))),
        }
    }

    /// The current snapshot; the lock is held only for the `Arc` clone.
    fn snapshot(&self) -> PyResult<Arc<Tokenizer>> {
        let g = match self.current.read() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.as_ref().map(Arc::clone).ok_or_else(not_loaded)
    }

    /// `encode_batch` of texts only: their ids now (in parallel), the other fields of each
    /// when asked for; padded as `Tokenizer::encode_batch` pads (each encoding alone, then
    /// the batch).
    fn encode_texts(
        &self,
        py: Python<'_>,
        texts: Vec<&Bound<'_, PyString>>,
        add_special_tokens: bool,
    ) -> PyResult<Vec<PyEncoding>> {
        let utf8 = texts
            .iter()
            .map(|t| t.encode_utf8())
            .collect::<PyResult<Vec<_>>>()?;
        let strs = utf8
            .iter()
            .map(|b| std::str::from_utf8(b.as_bytes()))
            .collect::<Result<Vec<&str>, _>>()
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        let tok = self.snapshot()?;
        let ids = py
            .detach(|| {
                crate::parallel::map_batch(
                    &strs,
                    |t| t.len(),
                    |t| tok.encode_ids_lazy(t, add_special_tokens),
                )
            })
            .map_err(to_py_err)?;
        let mut out: Vec<PyEncoding> = texts
            .into_iter()
            .zip(ids)
            .map(|(t, ids)| {
                PyEncoding::lazy(
                    Arc::clone(&tok),
                    t.clone().unbind(),
                    add_special_tokens,
                    ids,
                )
            })
            .collect();
        if let Some(p) = tok.padding() {
            let longest = out.iter().map(|e| e.ids_slice().len()).max();
            if let Some(target) = longest.map(|n| p.target(n)) {
                for e in &mut out {
                    e.batch_pad(target, p);
                }
            }
        }
        Ok(out)
    }

    /// `encode_ids` of one text.
    fn text_ids<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'_, PyString>,
        add_special_tokens: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        // Python's own UTF-8 view of the str, read in place (no copy for ASCII text). The str
        // is immutable and `text` holds a reference, so the GIL can be released around it.
        let text = text.to_str()?;
        // The snapshot is borrowed under the read lock only for the `Arc` clone: encoding
        // must not hold the lock (a reconfiguration would wait for it with the GIL held).
        let tok = self.snapshot()?;
        with_ids_buffer(|out| {
            let encode = || {
                // Room for about one id per 3 bytes up front saves the first regrowths.
                out.reserve(text.len().min(1 << 20) / 3 + 4);
                tok.encode_ids(text, add_special_tokens, out)
            };
            // SAFETY: the closure runs the Rust core on a snapshot, a `&str` and a buffer.
            unsafe { released(py, encode) }.map_err(to_py_err)?;
            ids_list(py, out)
        })
    }

    /// `encode` of one text: its ids now, the other fields when asked for.
    fn encode_text(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        add_special_tokens: bool,
    ) -> PyResult<PyEncoding> {
        // Python's own UTF-8 view, as in `text_ids` (the Encoding keeps the str).
        let s = text.to_str()?;
        let tok = self.snapshot()?;
        // SAFETY: as in `text_ids`: the Rust core on a snapshot and a `&str`.
        let ids = unsafe { released(py, || tok.encode_ids_lazy(s, add_special_tokens)) }
            .map_err(to_py_err)?;
        Ok(PyEncoding::lazy(
            tok,
            text.clone().unbind(),
            add_special_tokens,
            ids,
        ))
    }

    /// Build a new configuration from the current one and swap it in. The write lock is held
    /// across the (cheap) rebuild so that two concurrent reconfigurations never lose an update.
    fn update(&self, f: impl FnOnce(&Tokenizer) -> crate::Result<Tokenizer>) -> PyResult<()> {
        let mut guard = match self.current.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let next = f(guard.as_ref().ok_or_else(not_loaded)?).map_err(to_py_err)?;
        *guard = Some(Arc::new(next));
        Ok(())
    }
}

#[pymethods]
impl PyTokenizer {
    /// Load a tokenizer.json document given as a string.
    #[staticmethod]
    fn from_str(py: Python<'_>, json: &Bound<'_, PyString>) -> PyResult<Self> {
        let json = json.to_cow()?.into_owned();
        let tok = py
            .detach(|| Tokenizer::from_json_str(&json))
            .map_err(to_py_err)?;
        Ok(Self::new(py, tok))
    }

    /// Load a tokenizer.json document given as UTF-8 bytes.
    #[staticmethod]
    fn from_buffer(py: Python<'_>, buffer: &[u8]) -> PyResult<Self> {
        let tok = py
            .detach(|| {
                let json = std::str::from_utf8(buffer).map_err(|e| {
                    crate::Error::invalid(format!("tokenizer.json is not UTF-8: {e}"))
                })?;
                Tokenizer::from_json_str(json)
            })
            .map_err(to_py_err)?;
        Ok(Self::new(py, tok))
    }

    /// The BERT tokenizer of a vocab.txt (what `tokenizers.BertWordPieceTokenizer` builds).
    /// `lowercase=None` guesses the casing from the entries; `strip_accents=None` follows it.
    #[staticmethod]
    #[pyo3(signature = (data, lowercase = None, strip_accents = None))]
    fn from_vocab_txt(
        py: Python<'_>,
        data: &[u8],
        lowercase: Option<bool>,
        strip_accents: Option<bool>,
    ) -> PyResult<Self> {
        let tok = py
            .detach(|| Tokenizer::from_vocab_txt(data, lowercase, strip_accents))
            .map_err(to_py_err)?;
        Ok(Self::new(py, tok))
    }

    /// A tokenizer over a `.tiktoken` vocabulary (its bytes), its split pattern (tiktoken's
    /// regex syntax) and special tokens, encoding as tiktoken does.
    #[staticmethod]
    fn from_tiktoken(
        py: Python<'_>,
        data: &[u8],
        pattern: &str,
        special_tokens: Vec<(String, u32)>,
    ) -> PyResult<Self> {
        let tok = py
            .detach(|| Tokenizer::from_tiktoken(data, pattern, &special_tokens))
            .map_err(to_py_err)?;
        Ok(Self::new(py, tok))
    }

    /// A tokenizer over Mistral's `tekken.json` (its bytes), encoding as mistral-common does.
    #[staticmethod]
    fn from_tekken(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let tok = py
            .detach(|| Tokenizer::from_tekken(data))
            .map_err(to_py_err)?;
        Ok(Self::new(py, tok))
    }

    /// A tokenizer over a SentencePiece `.model` (its bytes), run as sentencepiece runs it.
    #[staticmethod]
    fn from_sentencepiece(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let tok = py
            .detach(|| Tokenizer::from_sentencepiece(data))
            .map_err(to_py_err)?;
        Ok(Self::new(py, tok))
    }

    /// A tokenizer over a `.spm` text vocabulary; the file holds no settings, so they are given.
    #[staticmethod]
    #[pyo3(signature = (text, model_type = "bpe", add_dummy_prefix = false, remove_extra_whitespaces = false, byte_fallback = true))]
    fn from_spm_text(
        py: Python<'_>,
        text: &str,
        model_type: &str,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        byte_fallback: bool,
    ) -> PyResult<Self> {
        use crate::sentencepiece::{ModelType, SpmOptions};
        let model_type = match model_type {
            "bpe" => ModelType::Bpe,
            "unigram" => ModelType::Unigram,
            "word" => ModelType::Word,
            "char" => ModelType::Char,
            other => {
                return Err(to_py_err(crate::Error::other(format!(
                    "Unknown `model_type`: `{other}`. Use one of `bpe`, `unigram`, `word` or `char`"
                ))))
            }
        };
        let opts = SpmOptions {
            model_type,
            add_dummy_prefix,
            remove_extra_whitespaces,
            byte_fallback,
            ..SpmOptions::default()
        };
        let tok = py
            .detach(|| Tokenizer::from_spm_text(text, &opts))
            .map_err(to_py_err)?;
        Ok(Self::new(py, tok))
    }

    /// Serialize to tokenizer.json (with the current padding and truncation).
    #[pyo3(signature = (pretty = false))]
    fn to_str(&self, py: Python<'_>, pretty: bool) -> PyResult<String> {
        let tok = self.snapshot()?;
        py.detach(|| tok.to_json_string(pretty)).map_err(to_py_err)
    }

    /// The general `encode` (every argument shape), which the fast `encode` hands calls on to.
    #[pyo3(name = "_encode", signature = (sequence, pair = None, is_pretokenized = false, add_special_tokens = true))]
    fn encode(
        &self,
        py: Python<'_>,
        sequence: &Bound<'_, PyAny>,
        pair: Option<&Bound<'_, PyAny>>,
        is_pretokenized: bool,
        add_special_tokens: bool,
    ) -> PyResult<PyEncoding> {
        if let (Ok(text), None, false) = (sequence.cast::<PyString>(), pair, is_pretokenized) {
            return self.encode_text(py, text, add_special_tokens);
        }
        let first = OwnedSeq::extract(sequence, is_pretokenized)?;
        let pair = pair
            .map(|p| OwnedSeq::extract(p, is_pretokenized))
            .transpose()?;
        let tok = self.snapshot()?;
        let enc = py
            .detach(|| {
                tok.encode(
                    first.as_input(),
                    pair.as_ref().map(|p| p.as_input()),
                    add_special_tokens,
                )
            })
            .map_err(to_py_err)?;
        Ok(PyEncoding::full(enc))
    }

    /// Many inputs at once, in parallel; each item is a sequence or a (first, pair) 2-tuple.
    #[pyo3(signature = (input, is_pretokenized = false, add_special_tokens = true))]
    fn encode_batch(
        &self,
        py: Python<'_>,
        input: &Bound<'_, PyAny>,
        is_pretokenized: bool,
        add_special_tokens: bool,
    ) -> PyResult<Vec<PyEncoding>> {
        if input.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "encode_batch expects a list of inputs, not a str",
            ));
        }
        let items = input
            .try_iter()?
            .collect::<PyResult<Vec<Bound<'_, PyAny>>>>()?;
        if !is_pretokenized {
            let texts = items
                .iter()
                .map(|item| item.cast::<PyString>().ok())
                .collect::<Option<Vec<_>>>();
            if let Some(texts) = texts {
                return self.encode_texts(py, texts, add_special_tokens);
            }
        }
        let mut owned: Vec<OwnedInput> = Vec::with_capacity(items.len());
        for item in &items {
            owned.push(extract_batch_item(item, is_pretokenized)?);
        }
        let tok = self.snapshot()?;
        let encodings = py
            .detach(|| {
                let inputs: Vec<(InputSequence<'_>, Option<InputSequence<'_>>)> = owned
                    .iter()
                    .map(|(a, b)| (a.as_input(), b.as_ref().map(|b| b.as_input())))
                    .collect();
                tok.encode_batch(&inputs, add_special_tokens)
            })
            .map_err(to_py_err)?;
        Ok(encodings.into_iter().map(PyEncoding::full).collect())
    }

    /// The general `encode_ids`, which the fast `encode_ids` hands calls on to.
    #[pyo3(name = "_encode_ids", signature = (text, add_special_tokens = true))]
    fn encode_ids<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'_, PyString>,
        add_special_tokens: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        self.text_ids(py, text, add_special_tokens)
    }

    /// The ids of many texts (no padding), encoded in parallel.
    #[pyo3(signature = (texts, add_special_tokens = true))]
    fn encode_batch_ids<'py>(
        &self,
        py: Python<'py>,
        texts: super::batch::BatchTexts<'py>,
        add_special_tokens: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let tok = self.snapshot()?;
        let refs = texts.strs();
        if let Some(plan) = tok.batch_plan(&refs) {
            // A few long texts: their pieces spread over the threads.
            return plan_lists_streamed(
                py,
                &plan,
                |p| tok.encode_piece_ids(p, add_special_tokens),
                |rows| tok.finish_plan_row(rows, add_special_tokens),
            );
        }
        ids_lists_streamed(
            py,
            &refs,
            |t| t.len(),
            |t| {
                // Sized as in `encode_ids`: a row then rarely regrows.
                let mut out = Vec::with_capacity(t.len().min(1 << 20) / 3 + 4);
                tok.encode_ids(t, add_special_tokens, &mut out)
                    .map(|()| out)
            },
        )
    }

    /// How many pieces the batch calls cut each text into (`crate::cuts`; 1: whole) with the
    /// current number of threads: for tests and measurements.
    fn _batch_pieces(&self, texts: super::batch::BatchTexts<'_>) -> PyResult<Vec<usize>> {
        let tok = self.snapshot()?;
        let refs = texts.strs();
        Ok(match tok.batch_plan(&refs) {
            Some(plan) => plan.piece_counts().collect(),
            None => vec![1; refs.len()],
        })
    }

    /// The ids of many texts as one flat buffer plus row splits (zero-copy to numpy / Arrow).
    #[pyo3(signature = (texts, add_special_tokens = true))]
    fn encode_batch_flat(
        &self,
        py: Python<'_>,
        texts: super::batch::BatchTexts<'_>,
        add_special_tokens: bool,
    ) -> PyResult<super::batch::TokenBatch> {
        let tok = self.snapshot()?;
        let (ids, ends) = flat_ids(py, &tok, &texts.strs(), add_special_tokens)?;
        Ok(super::batch::TokenBatch::from_flat(ids, &ends))
    }

    /// How many tokens each text encodes to (no padding).
    #[pyo3(signature = (texts, add_special_tokens = true))]
    fn count_tokens_batch(
        &self,
        py: Python<'_>,
        texts: super::batch::BatchTexts<'_>,
        add_special_tokens: bool,
    ) -> PyResult<Vec<usize>> {
        let tok = self.snapshot()?;
        let (_, ends) = flat_ids(py, &tok, &texts.strs(), add_special_tokens)?;
        let mut from = 0;
        Ok(ends
            .iter()
            .map(|&e| {
                let n = e.saturating_sub(from);
                from = e;
                n
            })
            .collect())
    }

    #[pyo3(signature = (ids, skip_special_tokens = true))]
    fn decode(&self, py: Python<'_>, ids: Vec<u32>, skip_special_tokens: bool) -> PyResult<String> {
        let tok = self.snapshot()?;
        py.detach(|| tok.decode(&ids, skip_special_tokens))
            .map_err(to_py_err)
    }

    #[pyo3(signature = (sequences, skip_special_tokens = true))]
    fn decode_batch(
        &self,
        py: Python<'_>,
        sequences: Vec<Vec<u32>>,
        skip_special_tokens: bool,
    ) -> PyResult<Vec<String>> {
        let tok = self.snapshot()?;
        py.detach(|| tok.decode_batch(&sequences, skip_special_tokens))
            .map_err(to_py_err)
    }

    fn token_to_id(&self, token: &str) -> PyResult<Option<u32>> {
        Ok(self.snapshot()?.token_to_id(token))
    }

    fn id_to_token(&self, id: u32) -> PyResult<Option<String>> {
        Ok(self.snapshot()?.id_to_token(id))
    }

    #[pyo3(signature = (with_added_tokens = true))]
    fn get_vocab(&self, with_added_tokens: bool) -> PyResult<HashMap<String, u32>> {
        Ok(self.snapshot()?.get_vocab(with_added_tokens))
    }

    #[pyo3(signature = (with_added_tokens = true))]
    fn get_vocab_size(&self, with_added_tokens: bool) -> PyResult<usize> {
        Ok(self.snapshot()?.get_vocab_size(with_added_tokens))
    }

    #[pyo3(signature = (direction = "right", pad_id = 0, pad_type_id = 0, pad_token = "[PAD]", length = None, pad_to_multiple_of = None))]
    fn enable_padding(
        &self,
        direction: &str,
        pad_id: u32,
        pad_type_id: u32,
        pad_token: &str,
        length: Option<usize>,
        pad_to_multiple_of: Option<usize>,
    ) -> PyResult<()> {
        let params = PaddingParams {
            strategy: match length {
                Some(n) => PaddingStrategy::Fixed(n),
                None => PaddingStrategy::BatchLongest,
            },
            direction: parse_direction(direction)?,
            // Kept as given, 0 included (the reference reports it back and pads as if absent).
            pad_to_multiple_of,
            pad_id,
            pad_type_id,
            pad_token: pad_token.to_owned(),
        };
        self.update(|t| Ok(t.with_padding(Some(params))))
    }

    fn no_padding(&self) -> PyResult<()> {
        self.update(|t| Ok(t.with_padding(None)))
    }

    /// The padding settings as `tokenizers` reports them, or None.
    #[getter]
    fn padding<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let tok = self.snapshot()?;
        let Some(p) = tok.padding() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item(
            "length",
            match p.strategy {
                PaddingStrategy::BatchLongest => None,
                PaddingStrategy::Fixed(n) => Some(n),
            },
        )?;
        d.set_item("pad_to_multiple_of", p.pad_to_multiple_of)?;
        d.set_item("pad_id", p.pad_id)?;
        d.set_item("pad_token", &p.pad_token)?;
        d.set_item("pad_type_id", p.pad_type_id)?;
        d.set_item("direction", direction_str(p.direction))?;
        Ok(Some(d))
    }

    #[pyo3(signature = (max_length, stride = 0, strategy = "longest_first", direction = "right"))]
    fn enable_truncation(
        &self,
        max_length: usize,
        stride: usize,
        strategy: &str,
        direction: &str,
    ) -> PyResult<()> {
        let strategy = match strategy {
            "longest_first" => TruncationStrategy::LongestFirst,
            "only_first" => TruncationStrategy::OnlyFirst,
            "only_second" => TruncationStrategy::OnlySecond,
            other => {
                return Err(super::TokenizerError::new_err(format!(
                    "Unknown `strategy`: `{other}`. Use one of `longest_first`, `only_first`, or `only_second`"
                )))
            }
        };
        let direction = match direction {
            "left" => Direction::Left,
            "right" => Direction::Right,
            other => {
                return Err(super::TokenizerError::new_err(format!(
                    "Unknown `direction`: `{other}`. Use one of `left` or `right`."
                )))
            }
        };
        let params = TruncationParams {
            direction,
            max_length,
            strategy,
            stride,
        };
        self.update(|t| t.with_truncation(Some(params)))
    }

    fn no_truncation(&self) -> PyResult<()> {
        self.update(|t| t.with_truncation(None))
    }

    /// The truncation settings as `tokenizers` reports them, or None.
    #[getter]
    fn truncation<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let tok = self.snapshot()?;
        let Some(t) = tok.truncation() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("max_length", t.max_length)?;
        d.set_item("stride", t.stride)?;
        d.set_item("strategy", strategy_str(t.strategy))?;
        d.set_item("direction", direction_str(t.direction))?;
        Ok(Some(d))
    }

    /// A new, independent object with the same configuration (the core is shared: it is
    /// immutable).
    fn copy(&self) -> PyResult<Self> {
        Ok(Self {
            current: RwLock::new(Some(self.snapshot()?)),
        })
    }

    /// An object that holds no tokenizer yet (`_assign` gives it one); the arguments are
    /// those of the subclass's `__init__`, which makes it.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Self {
            current: RwLock::new(None),
        }
    }

    /// Take `other`'s current tokenizer and configuration (later changes to either are the
    /// object's own).
    fn _assign(&self, other: &Bound<'_, PyTokenizer>) -> PyResult<()> {
        let next = other.get().snapshot()?;
        let mut guard = match self.current.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        *guard = Some(next);
        Ok(())
    }
}

/// The result of encoding one input. Mutable like the reference's (`pad`, `truncate`,
/// `set_sequence_id` change it in place).
///
/// A single text is encoded for its ids only (the fast path `encode_ids` takes); the other
/// fields are built when first asked for and kept: the id-level ones (type ids, masks,
/// sequence ids, from the model's ids through truncation, post-processor and padding, no
/// text involved), and the rest (tokens, offsets, words, overflowing parts) by encoding the
/// text again on the full pipeline, with the GIL released. Both give the same values as the
/// full encoding: the ids are the ones `encode_ids` gives (the same as `encode().ids`, which
/// the conformance tests check), and the id-level fields depend only on the ids and their
/// number (see `Encoding::placeholders`).
#[pyclass(module = "piecework._core", name = "Encoding")]
pub struct PyEncoding {
    state: State,
}

enum State {
    /// Every field built: pairs, pre-tokenized input, merged or changed encodings.
    Full(Box<Encoding>),
    Lazy(LazyEncoding),
}

/// What `encode` of a single text keeps to build the fields on demand.
struct LazyEncoding {
    tok: Arc<Tokenizer>,
    text: Py<PyString>,
    add_special_tokens: bool,
    /// The batch's padding length, applied after the tokenizer's own padding of this one
    /// encoding (as `encode_batch` pads), `None` outside a padded batch.
    pad_to: Option<usize>,
    /// The ids, padded, when they are not the model's ids as they are (most texts, without a
    /// post-processor or padding, keep one vector).
    ids: Option<Vec<u32>>,
    /// The model's ids, before truncation and post-processing.
    model_ids: Vec<u32>,
    /// Everything but tokens, offsets and words (see `Tokenizer::encode_from_model_ids`).
    id_fields: OnceLock<Box<crate::Result<Encoding>>>,
    /// The whole encoding, from the full pipeline.
    full: OnceLock<Box<crate::Result<Encoding>>>,
}

impl LazyEncoding {
    /// Pad as `encode_batch` pads the batch, after the tokenizer has padded this one.
    fn batch_pad(&self, e: &mut Encoding) {
        if let (Some(target), Some(p)) = (self.pad_to, self.tok.padding()) {
            e.pad(target, p.pad_id, p.pad_type_id, &p.pad_token, p.direction);
        }
    }

    fn id_fields(&self) -> PyResult<&Encoding> {
        if let Some(Ok(e)) = self.full.get().map(|b| &**b) {
            return Ok(e);
        }
        // Id shuffling only, linear in the tokens like the Python lists made from them: kept
        // under the GIL.
        let r = self.id_fields.get_or_init(|| {
            let r = self
                .tok
                .encode_from_model_ids(self.model_ids.clone(), self.add_special_tokens);
            Box::new(r.map(|mut e| {
                self.batch_pad(&mut e);
                e
            }))
        });
        (**r).as_ref().map_err(|e| to_py_err(e.clone()))
    }

    fn full(&self, py: Python<'_>) -> PyResult<&Encoding> {
        let r = match self.full.get() {
            Some(r) => r,
            None => {
                let utf8 = self.text.bind(py).encode_utf8()?;
                let text = std::str::from_utf8(utf8.as_bytes())
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
                // Another thread that asks meanwhile waits inside `get_or_init`, GIL released.
                py.detach(|| {
                    self.full.get_or_init(|| {
                        let r = self.tok.encode(
                            InputSequence::Raw(text),
                            None,
                            self.add_special_tokens,
                        );
                        Box::new(r.map(|mut e| {
                            self.batch_pad(&mut e);
                            e
                        }))
                    })
                })
            }
        };
        (**r).as_ref().map_err(|e| to_py_err(e.clone()))
    }

    /// Whether no padding applies, so that every token is attended.
    fn unpadded(&self) -> bool {
        self.tok.padding().is_none()
    }
}

impl PyEncoding {
    fn full(inner: Encoding) -> Self {
        PyEncoding {
            state: State::Full(Box::new(inner)),
        }
    }

    /// A lazy encoding of `text` from `Tokenizer::encode_ids_lazy`'s result, padded as the
    /// tokenizer pads it alone.
    fn lazy(
        tok: Arc<Tokenizer>,
        text: Py<PyString>,
        add_special_tokens: bool,
        (model_ids, ids): (Vec<u32>, Option<Vec<u32>>),
    ) -> Self {
        let mut ids = ids;
        if let Some(p) = tok.padding() {
            // As `pad_encodings` pads a batch of this one encoding.
            let ids = ids.get_or_insert_with(|| model_ids.clone());
            let target = p.target(ids.len());
            crate::encoding::pad_ids(ids, target, p.pad_id, p.direction);
        }
        PyEncoding {
            state: State::Lazy(LazyEncoding {
                tok,
                text,
                add_special_tokens,
                pad_to: None,
                ids,
                model_ids,
                id_fields: OnceLock::new(),
                full: OnceLock::new(),
            }),
        }
    }

    /// Pad to the batch's `target` length, as `pad_encodings` pads a batch.
    fn batch_pad(&mut self, target: usize, p: &crate::encoding::PaddingParams) {
        match &mut self.state {
            State::Full(e) => e.pad(target, p.pad_id, p.pad_type_id, &p.pad_token, p.direction),
            State::Lazy(l) => {
                let ids = l.ids.get_or_insert_with(|| l.model_ids.clone());
                crate::encoding::pad_ids(ids, target, p.pad_id, p.direction);
                l.pad_to = Some(target);
            }
        }
    }

    fn ids_slice(&self) -> &[u32] {
        match &self.state {
            State::Full(e) => &e.ids,
            State::Lazy(l) => l.ids.as_deref().unwrap_or(&l.model_ids),
        }
    }

    /// Every field but tokens, offsets, words and overflowing parts are right here.
    fn id_fields(&self) -> PyResult<&Encoding> {
        match &self.state {
            State::Full(e) => Ok(e),
            State::Lazy(l) => l.id_fields(),
        }
    }

    fn get(&self, py: Python<'_>) -> PyResult<&Encoding> {
        match &self.state {
            State::Full(e) => Ok(e),
            State::Lazy(l) => l.full(py),
        }
    }

    /// The whole encoding, to be changed in place: built now if it was not.
    fn get_mut(&mut self, py: Python<'_>) -> PyResult<&mut Encoding> {
        if let State::Lazy(l) = &mut self.state {
            l.full(py)?;
            let e = match l.full.take().map(|b| *b) {
                Some(Ok(e)) => Box::new(e),
                _ => return Err(to_py_err(crate::Error::other("encoding not built"))),
            };
            self.state = State::Full(e);
        }
        match &mut self.state {
            State::Full(e) => Ok(e),
            State::Lazy(_) => Err(to_py_err(crate::Error::other("encoding not built"))),
        }
    }
}

/// An encoding as plain Python values, for pickling: its fields, the states of its overflowing
/// parts and its sequence ranges as `(sequence, start, end)`.
fn encoding_state<'py>(py: Python<'py>, e: &Encoding) -> PyResult<Bound<'py, PyTuple>> {
    let overflowing = e
        .overflowing
        .iter()
        .map(|o| encoding_state(py, o))
        .collect::<PyResult<Vec<_>>>()?;
    let mut ranges: Vec<(usize, usize, usize)> = e
        .sequence_ranges
        .iter()
        .map(|(k, r)| (*k, r.start, r.end))
        .collect();
    ranges.sort_unstable();
    (
        &e.ids,
        &e.type_ids,
        &e.tokens,
        &e.words,
        &e.offsets,
        &e.special_tokens_mask,
        &e.attention_mask,
        overflowing,
        ranges,
    )
        .into_pyobject(py)
}

type StateFields<'py> = (
    Vec<u32>,
    Vec<u32>,
    Vec<String>,
    Vec<Option<u32>>,
    Vec<(usize, usize)>,
    Vec<u32>,
    Vec<u32>,
    Vec<Bound<'py, PyAny>>,
    Vec<(usize, usize, usize)>,
);

/// The encoding `encoding_state` described; fields of different lengths are refused.
fn encoding_from_state(state: &Bound<'_, PyAny>) -> PyResult<Encoding> {
    let (ids, type_ids, tokens, words, offsets, special, attention, over, ranges): StateFields<'_> =
        state.extract()?;
    let n = ids.len();
    if [type_ids.len(), tokens.len(), words.len(), offsets.len()]
        .into_iter()
        .chain([special.len(), attention.len()])
        .any(|len| len != n)
    {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "Encoding state: fields of different lengths",
        ));
    }
    Ok(Encoding {
        ids,
        type_ids,
        tokens,
        words,
        offsets,
        special_tokens_mask: special,
        attention_mask: attention,
        overflowing: over
            .iter()
            .map(encoding_from_state)
            .collect::<PyResult<Vec<_>>>()?,
        sequence_ranges: ranges.into_iter().map(|(k, a, b)| (k, a..b)).collect(),
    })
}

#[pymethods]
impl PyEncoding {
    /// An empty encoding (as the reference's `Encoding()`).
    #[new]
    fn py_new() -> Self {
        PyEncoding::full(Encoding::default())
    }

    fn __getstate__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        encoding_state(py, self.get(py)?)
    }

    fn __setstate__(&mut self, state: &Bound<'_, PyAny>) -> PyResult<()> {
        self.state = State::Full(Box::new(encoding_from_state(state)?));
        Ok(())
    }

    /// Pickled as `Encoding()` followed by `__setstate__` (every protocol).
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, pyo3::types::PyType>, (), Bound<'py, PyTuple>)> {
        let state = slf.borrow().__getstate__(slf.py())?;
        Ok((slf.get_type(), (), state))
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<PyEncoding> {
        Ok(PyEncoding::full(self.get(py)?.clone()))
    }

    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<PyEncoding> {
        self.__copy__(py)
    }

    #[getter]
    fn ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        ids_list(py, self.ids_slice())
    }
    #[getter]
    fn type_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        ids_list(py, &self.id_fields()?.type_ids)
    }
    #[getter]
    fn tokens(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.get(py)?.tokens.clone())
    }
    #[getter]
    fn offsets(&self, py: Python<'_>) -> PyResult<Vec<(usize, usize)>> {
        Ok(self.get(py)?.offsets.clone())
    }
    #[getter]
    fn attention_mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.state {
            // Only padding makes a token unattended.
            State::Lazy(l) if l.unpadded() => {
                PyList::new(py, std::iter::repeat_n(1u32, self.ids_slice().len()))
            }
            _ => ids_list(py, &self.id_fields()?.attention_mask),
        }
    }
    #[getter]
    fn special_tokens_mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        ids_list(py, &self.id_fields()?.special_tokens_mask)
    }
    #[getter]
    fn word_ids(&self, py: Python<'_>) -> PyResult<Vec<Option<u32>>> {
        Ok(self.get(py)?.words.clone())
    }
    /// Deprecated alias of `word_ids`, as in the reference.
    #[getter]
    fn words(&self, py: Python<'_>) -> PyResult<Vec<Option<u32>>> {
        self.word_ids(py)
    }
    #[getter]
    fn sequence_ids(&self) -> PyResult<Vec<Option<usize>>> {
        Ok(self.id_fields()?.sequence_ids())
    }
    #[getter]
    fn n_sequences(&self) -> PyResult<usize> {
        Ok(self.id_fields()?.n_sequences())
    }
    #[getter]
    fn overflowing(&self, py: Python<'_>) -> PyResult<Vec<PyEncoding>> {
        Ok(self
            .get(py)?
            .overflowing
            .iter()
            .map(|e| PyEncoding::full(e.clone()))
            .collect())
    }

    /// Merge encodings left to right into a new one.
    #[staticmethod]
    #[pyo3(signature = (encodings, growing_offsets = true))]
    fn merge(
        py: Python<'_>,
        encodings: Vec<PyRef<'_, PyEncoding>>,
        growing_offsets: bool,
    ) -> PyResult<PyEncoding> {
        let parts = encodings
            .iter()
            .map(|e| e.get(py).cloned())
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyEncoding::full(Encoding::merge(parts, growing_offsets)))
    }

    fn set_sequence_id(&mut self, py: Python<'_>, sequence_id: usize) -> PyResult<()> {
        self.get_mut(py)?.set_sequence_id(sequence_id);
        Ok(())
    }

    /// The tokens `(start, end)` of a word of one sequence.
    #[pyo3(signature = (word_index, sequence_index = 0))]
    fn word_to_tokens(
        &self,
        py: Python<'_>,
        word_index: u32,
        sequence_index: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        Ok(self.get(py)?.word_to_tokens(word_index, sequence_index))
    }

    /// The character span of a word of one sequence.
    #[pyo3(signature = (word_index, sequence_index = 0))]
    fn word_to_chars(
        &self,
        py: Python<'_>,
        word_index: u32,
        sequence_index: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        Ok(self.get(py)?.word_to_chars(word_index, sequence_index))
    }

    fn token_to_sequence(&self, token_index: usize) -> PyResult<Option<usize>> {
        Ok(self.id_fields()?.token_to_sequence(token_index))
    }

    fn token_to_chars(
        &self,
        py: Python<'_>,
        token_index: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        Ok(self.get(py)?.token_to_chars(token_index).map(|(_, o)| o))
    }

    fn token_to_word(&self, py: Python<'_>, token_index: usize) -> PyResult<Option<u32>> {
        Ok(self.get(py)?.token_to_word(token_index).map(|(_, w)| w))
    }

    #[pyo3(signature = (char_pos, sequence_index = 0))]
    fn char_to_token(
        &self,
        py: Python<'_>,
        char_pos: usize,
        sequence_index: usize,
    ) -> PyResult<Option<usize>> {
        Ok(self.get(py)?.char_to_token(char_pos, sequence_index))
    }

    #[pyo3(signature = (char_pos, sequence_index = 0))]
    fn char_to_word(
        &self,
        py: Python<'_>,
        char_pos: usize,
        sequence_index: usize,
    ) -> PyResult<Option<u32>> {
        Ok(self.get(py)?.char_to_word(char_pos, sequence_index))
    }

    /// Pad in place to `length` tokens (overflowing parts too).
    #[pyo3(signature = (length, direction = "right", pad_id = 0, pad_type_id = 0, pad_token = "[PAD]"))]
    fn pad(
        &mut self,
        py: Python<'_>,
        length: usize,
        direction: &str,
        pad_id: u32,
        pad_type_id: u32,
        pad_token: &str,
    ) -> PyResult<()> {
        let direction = parse_direction(direction)?;
        self.get_mut(py)?
            .pad(length, pad_id, pad_type_id, pad_token, direction);
        Ok(())
    }

    /// Truncate in place to `max_length` tokens; the rest goes to `overflowing`.
    #[pyo3(signature = (max_length, stride = 0, direction = "right"))]
    fn truncate(
        &mut self,
        py: Python<'_>,
        max_length: usize,
        stride: usize,
        direction: &str,
    ) -> PyResult<()> {
        let direction = match direction {
            "left" => Direction::Left,
            "right" => Direction::Right,
            other => {
                return Err(super::TokenizerError::new_err(format!(
                    "Invalid truncation direction value : {other}"
                )))
            }
        };
        self.get_mut(py)?
            .truncate(max_length, stride, direction)
            .map_err(to_py_err)
    }

    fn __len__(&self) -> usize {
        self.ids_slice().len()
    }
    fn __repr__(&self) -> String {
        format!(
            "Encoding(num_tokens={}, attributes=[ids, type_ids, tokens, offsets, \
             attention_mask, special_tokens_mask, overflowing])",
            self.ids_slice().len()
        )
    }
}

/// The ids of `texts` in the crate's pool, flat, with the end of each text's row in them.
fn flat_ids(
    py: Python<'_>,
    tok: &Tokenizer,
    texts: &[&str],
    add_special_tokens: bool,
) -> PyResult<(Vec<u32>, Vec<usize>)> {
    py.detach(|| tok.encode_batch_flat(texts, add_special_tokens))
        .map_err(to_py_err)
}

fast_method!(
    ENCODE_IDS,
    c"encode_ids",
    c"encode_ids($self, text, add_special_tokens=True)\n--\n\nOnly the ids of one text, without padding: the fastest path.",
    PyTokenizer,
    encode_ids_impl
);
fast_method!(
    ENCODE,
    c"encode",
    c"encode($self, sequence, pair=None, is_pretokenized=False, add_special_tokens=True)\n--\n\nEncode one sequence (a str, or a list of words with `is_pretokenized=True`), or a pair.\n\nFor a single str only the ids are computed here (as fast as `encode_ids`); the other\nfields of the `Encoding` are built the first time they are read, with the same values.",
    PyTokenizer,
    encode_impl
);

/// `Tokenizer.encode_ids(text)` and `(text, add_special_tokens)`, positional or keyword.
fn encode_ids_impl<'py>(
    py: Python<'py>,
    tok: Bound<'py, PyTokenizer>,
    a: Args<'_, 'py>,
) -> PyResult<*mut ffi::PyObject> {
    let ast = intern!(py, "add_special_tokens");
    if let (Some(text), Some(flag)) = (a.first_str(), a.only_flag(1, ast, true, true)) {
        return Ok(tok.get().text_ids(py, &text, flag)?.into_ptr());
    }
    a.forward(&tok.getattr(intern!(py, "_encode_ids"))?)
}

/// `Tokenizer.encode(text)` and `(text, add_special_tokens=...)`.
fn encode_impl<'py>(
    py: Python<'py>,
    tok: Bound<'py, PyTokenizer>,
    a: Args<'_, 'py>,
) -> PyResult<*mut ffi::PyObject> {
    // The second positional parameter is `pair`: only the keyword form of the flag is taken.
    let ast = intern!(py, "add_special_tokens");
    if let (Some(text), Some(flag)) = (a.first_str(), a.only_flag(1, ast, true, false)) {
        let enc = tok.get().encode_text(py, &text, flag)?;
        return Ok(Bound::new(py, enc)?.into_ptr());
    }
    a.forward(&tok.getattr(intern!(py, "_encode"))?)
}
