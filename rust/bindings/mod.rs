//! The only PyO3 code: Python classes over the Rust core, and the one error conversion.
//! Every call that touches text releases the GIL (`py.detach`).

use crate::error::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub(crate) mod batch;
mod sentencepiece;
mod tokenizer;

use pyo3::types::PyList;

/// Ids per chunk of shared Python ints, and the chunks kept: ids below 4096, where
/// vocabularies put their characters, punctuation and most frequent words. Sharing ints
/// spread over a whole large vocabulary measured slower (each reference count touched is a
/// cache miss, where a fresh int reuses memory just freed).
const INT_CHUNK: usize = 1024;
const INT_CHUNKS: usize = 4;

/// Python ints for the small ids, made once per process a chunk at a time on first use and
/// shared: a list of ids then holds new references to them instead of a new int per id (an
/// allocation and a free each). Ints are immutable, so sharing them changes nothing visible.
static INTS: [pyo3::sync::PyOnceLock<Box<[Py<PyAny>]>>; INT_CHUNKS] =
    [const { pyo3::sync::PyOnceLock::new() }; INT_CHUNKS];

/// `ids` as a Python list of ints.
pub(crate) fn ids_list<'py>(py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
    let int = |id: u32| -> Bound<'py, PyAny> {
        let (c, i) = (id as usize / INT_CHUNK, id as usize % INT_CHUNK);
        let shared = INTS.get(c).map(|cell| {
            cell.get_or_init(py, || {
                (0..INT_CHUNK)
                    .map(|j| {
                        pyo3::types::PyInt::new(py, c * INT_CHUNK + j)
                            .into_any()
                            .unbind()
                    })
                    .collect()
            })
        });
        match shared.and_then(|chunk| chunk.get(i)) {
            Some(obj) => obj.bind(py).clone(),
            None => pyo3::types::PyInt::new(py, id).into_any(),
        }
    };
    PyList::new(py, ids.iter().map(|&id| int(id)))
}

/// Rows of ids as a Python list of lists of ints.
pub(crate) fn ids_lists<'py>(py: Python<'py>, rows: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
    let lists = rows
        .iter()
        .map(|r| ids_list(py, r))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, lists)
}

create_exception!(
    piecework,
    TokenizerError,
    PyValueError,
    "Base class of every piecework error."
);
create_exception!(
    piecework,
    InvalidDataError,
    TokenizerError,
    "The file, value or text is not valid for this tokenizer."
);
create_exception!(
    piecework,
    UnsupportedModelError,
    TokenizerError,
    "A model or component piecework does not support (yet)."
);

/// The one conversion from the Rust error to Python.
pub(crate) fn to_py_err(e: Error) -> PyErr {
    match e.kind {
        ErrorKind::InvalidData => InvalidDataError::new_err(e.message),
        ErrorKind::Unsupported => UnsupportedModelError::new_err(e.message),
        ErrorKind::Other => TokenizerError::new_err(e.message),
    }
}

/// Threads used by batch calls (0 restores the default: `PIECEWORK_NUM_THREADS`, else all cores).
#[pyfunction]
fn set_num_threads(n: usize) {
    crate::parallel::set_num_threads(n);
}

/// Threads batch calls use.
#[pyfunction]
fn get_num_threads() -> usize {
    crate::parallel::num_threads()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TokenizerError", py.get_type::<TokenizerError>())?;
    m.add("InvalidDataError", py.get_type::<InvalidDataError>())?;
    m.add(
        "UnsupportedModelError",
        py.get_type::<UnsupportedModelError>(),
    )?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    batch::register(m)?;
    tokenizer::register(m)?;
    sentencepiece::register(m)?;
    Ok(())
}
