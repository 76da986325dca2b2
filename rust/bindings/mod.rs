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

/// Ids below this share one Python int each: vocabularies put their characters,
/// punctuation and most frequent words there. Sharing ints spread over a whole large
/// vocabulary measured slower (each reference count touched is a cache miss, where a fresh int
/// reuses memory just freed).
const SHARED_INTS: usize = 4096;

/// The shared ints, made once per process on first use: a list of ids then holds new
/// references to them instead of a new int per id (an allocation and a free each). Ints are
/// immutable, so sharing them changes nothing visible.
static INTS: pyo3::sync::PyOnceLock<Box<[Py<PyAny>]>> = pyo3::sync::PyOnceLock::new();

/// `ids` as a Python list of ints. Written against the C API: the list is filled slot by
/// slot with the shared table looked up once per list, not once per id.
pub(crate) fn ids_list<'py>(py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
    use pyo3::ffi;
    let shared = INTS.get_or_init(py, || {
        (0..SHARED_INTS)
            .map(|i| pyo3::types::PyInt::new(py, i).into_any().unbind())
            .collect()
    });
    let n = ffi::Py_ssize_t::try_from(ids.len())
        .map_err(|_| PyValueError::new_err("too many ids for a list"))?;
    // SAFETY: PyList_New gives a new reference (or NULL with an exception set, turned into
    // an error). Its slots start NULL, which the list's deallocator accepts, so an early
    // error return is safe; every slot is filled below before the list is returned.
    let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n))? };
    for (i, &id) in ids.iter().enumerate() {
        let int = match shared.get(id as usize) {
            Some(obj) => obj.clone_ref(py).into_ptr(),
            // SAFETY: returns a new reference, or NULL with an exception set.
            None => unsafe { ffi::PyLong_FromUnsignedLong(std::ffi::c_ulong::from(id)) },
        };
        if int.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `list` is a list of `n` slots and `i < n`; PyList_SetItem steals `int`.
        if unsafe { ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, int) } != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    // SAFETY: made by PyList_New above.
    Ok(unsafe { list.cast_into_unchecked::<PyList>() })
}

/// The ids of every item (by `f`, across the pool) as a Python list of lists. The lists are
/// built chunk by chunk while the pool still encodes the rest, so building Python objects,
/// which needs the GIL and so one thread, overlaps the parallel part; the GIL is released
/// whenever this thread waits for the pool.
pub(crate) fn ids_lists_streamed<'py, T: Sync>(
    py: Python<'py>,
    items: &[T],
    bytes: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> Result<Vec<u32>, Error> + Sync,
) -> PyResult<Bound<'py, PyList>> {
    use pyo3::ffi;
    let n = ffi::Py_ssize_t::try_from(items.len())
        .map_err(|_| PyValueError::new_err("batch too large"))?;
    // SAFETY: PyList_New gives a new reference (or NULL with an exception set, turned into
    // an error). Its slots start NULL, which the list's deallocator accepts, so an early
    // error return is safe; every slot is filled below before the list is returned.
    let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n))? };
    crate::parallel::map_batch_streamed(
        items,
        bytes,
        |t| f(t).map_err(to_py_err),
        |next| py.detach(next),
        |start, rows| {
            for (i, r) in rows.iter().enumerate() {
                let row = ids_list(py, r)?;
                // SAFETY: `list` is a list; PyList_SetItem steals the row's reference and
                // checks the index (chunks partition the items, one row per item).
                let rc = unsafe {
                    ffi::PyList_SetItem(
                        list.as_ptr(),
                        (start + i) as ffi::Py_ssize_t,
                        row.into_ptr(),
                    )
                };
                if rc != 0 {
                    return Err(PyErr::fetch(py));
                }
            }
            Ok(())
        },
    )?;
    // SAFETY: made by PyList_New above.
    Ok(unsafe { list.cast_into_unchecked::<PyList>() })
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
