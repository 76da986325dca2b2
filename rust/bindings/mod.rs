//! The only PyO3 code: Python classes over the Rust core, and the one error conversion.
//! Every call that touches text releases the GIL (`py.detach`).

use crate::error::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub(crate) mod batch;
mod sentencepiece;
mod tokenizer;

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
