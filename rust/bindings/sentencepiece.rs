//! `_core._SentencePiece`: the Rust sentencepiece processor for `piecework.SentencePieceProcessor`.
//! Every per-text and per-token step runs here (batches in parallel, without the GIL); the
//! Python class only dispatches on argument shapes.

use super::batch::{BatchTexts, TokenBatch};
use super::fastcall::{fast_method, Args, MethodDef};
use super::{
    ids_list, ids_lists_streamed, plan_lists_streamed, released, to_py_err, with_ids_buffer,
};
use crate::cuts::FlatEncode;
use crate::error::Error;
use crate::parallel::map_batch;
use crate::sentencepiece::vocab::PieceType;
use crate::sentencepiece::{ModelType, SentencePiece, SpToken, SpmOptions};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

#[pyclass(module = "piecework._core", name = "_SentencePiece", frozen)]
pub struct PySentencePiece {
    inner: SentencePiece,
}

fn out_of_range() -> PyErr {
    PyIndexError::new_err("OUT_OF_RANGE: piece id is out of range.")
}

/// Encode options shared by the single and batch entry points (as sentencepiece's Python
/// binding applies them: unknown pieces renamed, then reversed, then `<s>` / `</s>` added).
#[derive(Clone, Copy)]
struct Extra {
    bos: Option<u32>,
    eos: Option<u32>,
    reverse: bool,
    emit_unk_piece: bool,
}

impl Extra {
    /// The options on a text's ids: reversed, then `<s>` / `</s>` around them.
    fn apply(self, ids: &mut Vec<u32>) {
        if self.reverse {
            ids.reverse();
        }
        if let Some(b) = self.bos {
            ids.insert(0, b);
        }
        ids.extend(self.eos);
    }

    /// Whether `apply` leaves ids as they are.
    fn none(self) -> bool {
        !self.reverse && self.bos.is_none() && self.eos.is_none()
    }
}

/// `encode_ids_flat` through `crate::cuts::flat_ids`.
impl crate::cuts::FlatEncode for (&PySentencePiece, Extra) {
    type Error = Error;
    fn append(&self, text: &str, out: &mut Vec<u32>) -> Result<(), Error> {
        let (sp, ex) = *self;
        if ex.none() {
            // The model appends; on an error the batch fails, so a partial row is moot.
            return sp.inner.encode_ids(text, out);
        }
        out.extend_from_slice(&sp.ids_one(text, ex)?);
        Ok(())
    }
    fn piece(&self, p: &crate::cuts::Piece<'_>) -> Result<Vec<u32>, Error> {
        self.0.piece_ids(p, self.1)
    }
    fn plain(&self) -> bool {
        self.1.none()
    }
    fn finish(&self, rows: &mut dyn Iterator<Item = Vec<u32>>) -> Result<Vec<u32>, Error> {
        let (mut ids, cut) = crate::cuts::join_rows(rows);
        if cut {
            self.1.apply(&mut ids);
        }
        Ok(ids)
    }
}

impl PySentencePiece {
    fn check_id(&self, id: i64) -> PyResult<u32> {
        if id < 0 || id >= self.inner.piece_size() as i64 {
            return Err(out_of_range());
        }
        Ok(id as u32)
    }

    fn extra(
        &self,
        add_bos: bool,
        add_eos: bool,
        reverse: bool,
        emit_unk_piece: bool,
    ) -> PyResult<Extra> {
        // The ids are looked up only when asked for (a string lookup each, per call).
        let bos = if add_bos {
            Some(self.inner.bos_id().ok_or_else(|| {
                PyValueError::new_err(
                    "INVALID_ARGUMENT: BOS token is not defined as a control symbol in this model.",
                )
            })?)
        } else {
            None
        };
        let eos = if add_eos {
            Some(self.inner.eos_id().ok_or_else(|| {
                PyValueError::new_err(
                    "INVALID_ARGUMENT: EOS token is not defined as a control symbol in this model.",
                )
            })?)
        } else {
            None
        };
        if emit_unk_piece && self.inner.unk_id().is_none() {
            return Err(PyValueError::new_err(
                "INVALID_ARGUMENT: UNK token is not defined in this model.",
            ));
        }
        Ok(Extra {
            bos,
            eos,
            reverse,
            emit_unk_piece,
        })
    }

    fn ids_one(&self, text: &str, ex: Extra) -> Result<Vec<u32>, Error> {
        // Room for a typical line's ids up front (a few bytes per id), so the vector rarely
        // grows; capped so a huge text does not reserve for nothing.
        let mut out = Vec::with_capacity((text.len() / 3 + 4).min(1 << 16));
        self.inner.encode_ids(text, &mut out)?;
        ex.apply(&mut out);
        Ok(out)
    }

    /// The ids of a piece of a batch plan (`crate::cuts`): a whole text's with the options
    /// applied, a cut text's piece's bare (the options apply to the joined text).
    fn piece_ids(&self, p: &crate::cuts::Piece<'_>, ex: Extra) -> Result<Vec<u32>, Error> {
        if p.whole {
            return self.ids_one(p.text, ex);
        }
        let mut out = Vec::with_capacity((p.text.len() / 3 + 4).min(1 << 16));
        if p.first {
            self.inner.encode_ids(p.text, &mut out)?;
        } else {
            self.inner.encode_ids_continued(p.text, &mut out)?;
        }
        Ok(out)
    }

    fn pieces_one(&self, text: &str, ex: Extra) -> Result<Vec<String>, Error> {
        let mut toks: Vec<SpToken> = Vec::new();
        let mut pieces = Vec::new();
        self.inner
            .encode_with_pieces(text, &mut toks, &mut pieces)?;
        if ex.emit_unk_piece {
            if let Some(unk) = self.inner.unk_id() {
                let unk_piece = self.inner.id_to_piece(unk).unwrap_or_default();
                for p in pieces.iter_mut() {
                    if self.inner.piece_to_id_or_unk(p) == unk {
                        *p = unk_piece.to_string();
                    }
                }
            }
        }
        if ex.reverse {
            pieces.reverse();
        }
        let piece = |id: u32| self.inner.id_to_piece(id).unwrap_or_default().to_string();
        if let Some(b) = ex.bos {
            pieces.insert(0, piece(b));
        }
        if let Some(e) = ex.eos {
            pieces.push(piece(e));
        }
        Ok(pieces)
    }

    fn ids_from(&self, ids: Vec<i64>) -> PyResult<Vec<u32>> {
        ids.into_iter().map(|i| self.check_id(i)).collect()
    }

    /// Apply `f` to one id or to each id of a sequence (as sentencepiece's accessors do).
    fn map_ids<'py, T: IntoPyObject<'py>>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
        f: impl Fn(u32) -> T,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(i) = id.extract::<i64>() {
            let v = f(self.check_id(i)?);
            return v.into_bound_py_any(py);
        }
        let ids: Vec<i64> = id
            .extract()
            .map_err(|_| PyTypeError::new_err("expected an int or a sequence of ints"))?;
        let mut out = Vec::with_capacity(ids.len());
        for i in ids {
            out.push(f(self.check_id(i)?));
        }
        Ok(PyList::new(py, out)?.into_any())
    }
}

fn parse_model_type(s: &str) -> PyResult<ModelType> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "unigram" => ModelType::Unigram,
        "bpe" => ModelType::Bpe,
        "word" => ModelType::Word,
        "char" => ModelType::Char,
        _ => {
            return Err(PyValueError::new_err(format!(
                "model_type must be unigram, bpe, word or char, not {s:?}"
            )))
        }
    })
}

#[pymethods]
impl PySentencePiece {
    #[staticmethod]
    fn from_model_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = py
            .detach(|| SentencePiece::from_model_bytes(data))
            .map_err(to_py_err)?;
        super::reserve_shared_ints(py, inner.piece_size());
        Ok(PySentencePiece { inner })
    }

    #[staticmethod]
    #[pyo3(signature = (text, model_type = "bpe", add_dummy_prefix = false,
        remove_extra_whitespaces = false, byte_fallback = true, escape_whitespaces = true,
        treat_whitespace_as_suffix = false, precompiled_charsmap = None))]
    #[allow(clippy::too_many_arguments)]
    fn from_spm_text(
        py: Python<'_>,
        text: &str,
        model_type: &str,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        byte_fallback: bool,
        escape_whitespaces: bool,
        treat_whitespace_as_suffix: bool,
        precompiled_charsmap: Option<Vec<u8>>,
    ) -> PyResult<Self> {
        let opts = SpmOptions {
            model_type: parse_model_type(model_type)?,
            add_dummy_prefix,
            remove_extra_whitespaces,
            byte_fallback,
            escape_whitespaces,
            treat_whitespace_as_suffix,
            precompiled_charsmap: precompiled_charsmap.unwrap_or_default(),
        };
        let inner = py
            .detach(|| SentencePiece::from_spm_text(text, &opts))
            .map_err(to_py_err)?;
        super::reserve_shared_ints(py, inner.piece_size());
        Ok(PySentencePiece { inner })
    }

    #[pyo3(signature = (text, add_bos = false, add_eos = false, reverse = false))]
    fn encode_ids<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        add_bos: bool,
        add_eos: bool,
        reverse: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let ex = self.extra(add_bos, add_eos, reverse, false)?;
        let ids = py.detach(|| self.ids_one(text, ex)).map_err(to_py_err)?;
        ids_list(py, &ids)
    }

    #[pyo3(signature = (texts, add_bos = false, add_eos = false, reverse = false))]
    fn encode_ids_batch<'py>(
        &self,
        py: Python<'py>,
        texts: BatchTexts<'py>,
        add_bos: bool,
        add_eos: bool,
        reverse: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let ex = self.extra(add_bos, add_eos, reverse, false)?;
        let refs = texts.strs();
        if let Some(plan) = self.inner.batch_plan(&refs) {
            // A few long texts: their pieces spread over the threads, the options applied
            // once to each whole text.
            let enc = (self, ex);
            return plan_lists_streamed(py, &plan, |p| enc.piece(p), |rows| enc.finish(rows));
        }
        ids_lists_streamed(py, &refs, |t| t.len(), |t| self.ids_one(t, ex))
    }

    /// The ids of many texts as one flat buffer plus row splits (`TokenBatch`), encoded in
    /// parallel; the options apply to each text as in `encode_ids_batch`.
    #[pyo3(signature = (texts, add_bos = false, add_eos = false, reverse = false))]
    fn encode_ids_flat(
        &self,
        py: Python<'_>,
        texts: BatchTexts<'_>,
        add_bos: bool,
        add_eos: bool,
        reverse: bool,
    ) -> PyResult<TokenBatch> {
        let ex = self.extra(add_bos, add_eos, reverse, false)?;
        let refs = texts.strs();
        let (ids, ends) = py
            .detach(|| {
                crate::cuts::flat_ids(&(self, ex), &refs, self.inner.batch_plan(&refs).as_ref())
            })
            .map_err(to_py_err)?;
        Ok(TokenBatch::from_flat(ids, &ends))
    }

    #[pyo3(signature = (text, add_bos = false, add_eos = false, reverse = false, emit_unk_piece = false))]
    fn encode_pieces(
        &self,
        py: Python<'_>,
        text: &str,
        add_bos: bool,
        add_eos: bool,
        reverse: bool,
        emit_unk_piece: bool,
    ) -> PyResult<Vec<String>> {
        let ex = self.extra(add_bos, add_eos, reverse, emit_unk_piece)?;
        py.detach(|| self.pieces_one(text, ex)).map_err(to_py_err)
    }

    #[pyo3(signature = (texts, add_bos = false, add_eos = false, reverse = false, emit_unk_piece = false))]
    fn encode_pieces_batch(
        &self,
        py: Python<'_>,
        texts: Vec<PyBackedStr>,
        add_bos: bool,
        add_eos: bool,
        reverse: bool,
        emit_unk_piece: bool,
    ) -> PyResult<Vec<Vec<String>>> {
        let ex = self.extra(add_bos, add_eos, reverse, emit_unk_piece)?;
        py.detach(|| map_batch(&texts, |t| t.len(), |t| self.pieces_one(t, ex)))
            .map_err(to_py_err)
    }

    /// `(ids, pieces, byte offsets)` as in sentencepiece's serialized `SentencePieceText`.
    #[allow(clippy::type_complexity)]
    fn encode_with_offsets(
        &self,
        py: Python<'_>,
        text: &str,
    ) -> PyResult<(Vec<u32>, Vec<String>, Vec<(usize, usize)>)> {
        py.detach(|| {
            let mut toks = Vec::new();
            let mut pieces = Vec::new();
            self.inner
                .encode_with_pieces(text, &mut toks, &mut pieces)?;
            Ok((
                toks.iter().map(|t| t.id).collect(),
                pieces,
                toks.iter().map(|t| (t.begin, t.end)).collect(),
            ))
        })
        .map_err(to_py_err)
    }

    fn decode_ids(&self, py: Python<'_>, ids: Vec<i64>) -> PyResult<String> {
        let ids = self.ids_from(ids)?;
        py.detach(|| self.inner.decode_ids(&ids)).map_err(to_py_err)
    }

    fn decode_ids_batch(&self, py: Python<'_>, batch: Vec<Vec<i64>>) -> PyResult<Vec<String>> {
        let batch: Vec<Vec<u32>> = batch
            .into_iter()
            .map(|ids| self.ids_from(ids))
            .collect::<PyResult<_>>()?;
        py.detach(|| {
            map_batch(
                &batch,
                |ids| ids.len() * 4,
                |ids| self.inner.decode_ids(ids),
            )
        })
        .map_err(to_py_err)
    }

    fn decode_pieces(&self, py: Python<'_>, pieces: Vec<String>) -> PyResult<String> {
        py.detach(|| {
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            self.inner.decode_pieces(&refs)
        })
        .map_err(to_py_err)
    }

    fn decode_pieces_batch(
        &self,
        py: Python<'_>,
        batch: Vec<Vec<String>>,
    ) -> PyResult<Vec<String>> {
        py.detach(|| {
            map_batch(
                &batch,
                |p| p.iter().map(String::len).sum(),
                |pieces| {
                    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
                    self.inner.decode_pieces(&refs)
                },
            )
        })
        .map_err(to_py_err)
    }

    fn get_piece_size(&self) -> usize {
        self.inner.piece_size()
    }

    fn id_to_piece<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.map_ids(py, id, |i| {
            self.inner.id_to_piece(i).unwrap_or_default().to_string()
        })
    }

    /// sentencepiece's `PieceToId`: unknown strings give the unknown id.
    fn piece_to_id<'py>(
        &self,
        py: Python<'py>,
        piece: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // A model without an UNKNOWN piece answers -1, as sentencepiece does.
        let id = |s: &str| -> i64 {
            let i = self.inner.piece_to_id_or_unk(s);
            if i == u32::MAX {
                -1
            } else {
                i64::from(i)
            }
        };
        if let Ok(s) = piece.extract::<String>() {
            return id(&s).into_bound_py_any(py);
        }
        let v: Vec<String> = piece
            .extract()
            .map_err(|_| PyTypeError::new_err("expected a str or a sequence of str"))?;
        let ids: Vec<i64> = v.iter().map(|s| id(s)).collect();
        Ok(PyList::new(py, ids)?.into_any())
    }

    /// `None` when the piece is not in the vocabulary.
    fn piece_to_id_opt(&self, piece: &str) -> Option<u32> {
        self.inner.piece_to_id(piece)
    }

    fn get_score<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // sentencepiece returns the f32 score widened to a Python float.
        self.map_ids(py, id, |i| f64::from(self.inner.score(i).unwrap_or(0.0)))
    }

    fn is_unknown<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.map_ids(py, id, |i| {
            self.inner.piece_type(i) == Some(PieceType::Unknown)
        })
    }

    fn is_control<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.map_ids(py, id, |i| {
            self.inner.piece_type(i) == Some(PieceType::Control)
        })
    }

    fn is_unused<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.map_ids(py, id, |i| {
            self.inner.piece_type(i) == Some(PieceType::Unused)
        })
    }

    fn is_byte<'py>(&self, py: Python<'py>, id: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.map_ids(py, id, |i| {
            self.inner.piece_type(i) == Some(PieceType::Byte)
        })
    }

    fn piece_type_of(&self, id: i64) -> PyResult<i32> {
        let i = self.check_id(id)?;
        Ok(self.inner.piece_type(i).map(|k| k as i32).unwrap_or(1))
    }

    fn unk_id(&self) -> i64 {
        self.inner.unk_id().map_or(-1, i64::from)
    }
    fn bos_id(&self) -> i64 {
        self.inner.bos_id().map_or(-1, i64::from)
    }
    fn eos_id(&self) -> i64 {
        self.inner.eos_id().map_or(-1, i64::from)
    }
    fn pad_id(&self) -> i64 {
        self.inner.pad_id().map_or(-1, i64::from)
    }

    fn serialized_model_proto<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_model_bytes())
    }

    fn to_spm_text(&self) -> String {
        self.inner.to_spm_text()
    }
}

/// `SentencePieceProcessor.encode` (and `encode_as_ids`) of a processor with default
/// options. The common call, one `str` and nothing else, goes straight to the ids with no
/// Python frame (which costs about as much as encoding a short line); any other call goes to
/// the general `fallback(*args, **kwargs)`, which holds the core and the options but not the
/// processor (the processor holds this object: a reference back would be a cycle). The
/// processor keeps `function()`, a builtin function bound to this object, which the
/// interpreter calls without building an argument tuple (see `fastcall`).
#[pyclass(module = "piecework._core", name = "_FastEncode", frozen)]
pub struct PyFastEncode {
    sp: Py<PySentencePiece>,
    fallback: Py<PyAny>,
}

impl PyFastEncode {
    fn ids<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyList>> {
        let text = text.to_str()?;
        let sp = self.sp.get();
        with_ids_buffer(|out| {
            // Default options: the ids are the model's, nothing to apply.
            // SAFETY: the closure runs the Rust core only (`released`'s contract).
            unsafe { released(py, || sp.inner.encode_ids(text, out)) }.map_err(to_py_err)?;
            ids_list(py, out)
        })
    }
}

#[pymethods]
impl PyFastEncode {
    #[new]
    fn new(sp: Py<PySentencePiece>, fallback: Py<PyAny>) -> Self {
        PyFastEncode { sp, fallback }
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if args.len() == 1 && kwargs.is_none_or(|k| k.is_empty()) {
            let input = args.get_item(0)?;
            if input.is_exact_instance_of::<PyString>() {
                return Ok(self.ids(py, input.cast::<PyString>()?)?.into_any());
            }
        }
        self.fallback.bind(py).call(args, kwargs)
    }

    /// This object's call as a builtin function (the same results, a cheaper call).
    fn function<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        FAST_ENCODE.bind(slf.as_any())
    }
}

fast_method!(
    FAST_ENCODE,
    c"encode",
    c"encode(input, *args, **kwargs)\n--\n\nSentencePieceProcessor.encode with the processor's options.",
    PyFastEncode,
    fast_encode_impl
);

fn fast_encode_impl<'py>(
    py: Python<'py>,
    me: Bound<'py, PyFastEncode>,
    a: Args<'_, 'py>,
) -> PyResult<*mut ffi::PyObject> {
    let me = me.get();
    if let Some(text) = a.only_exact_str() {
        return Ok(me.ids(py, &text)?.into_ptr());
    }
    a.forward(me.fallback.bind(py))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySentencePiece>()?;
    m.add_class::<PyFastEncode>()?;
    Ok(())
}
