//! The only PyO3 code: Python classes over the Rust core, and the one error conversion.
//! Every call that touches text releases the GIL (`py.detach`).

use crate::error::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub(crate) mod batch;
mod fastcall;
mod sentencepiece;
mod tokenizer;

use pyo3::ffi;
use pyo3::types::PyList;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The first table of shared ints covers the ids below this; ids beyond it grow the table.
const FIRST_SHARED_INTS: usize = 4096;

/// Ids at or above this get a new int each: the table stops at the largest vocabularies in use
/// (o200k, Gemma), about 10 MB of ints and pointers when it is reached.
const MAX_SHARED_INTS: usize = 1 << 18;

/// The ints `0..len` as one Python object each, shared by every id list the process builds:
/// a list then holds new references to them instead of a new int per id (an allocation, and a
/// free when the list goes). Ints are immutable, so sharing them changes nothing visible.
struct SharedInts(Box<[Py<PyAny>]>);

/// The current table, null until first used. A table is never freed: a bigger one replaces it
/// when an id beyond it is seen (its ints carried over), and a caller on another thread may
/// still be reading the old one, so that one is left allocated (its pointers only; a few
/// replacements in a process's life, each at least doubling the size).
static SHARED_INTS: AtomicPtr<SharedInts> = AtomicPtr::new(std::ptr::null_mut());

/// The current table, made on first use.
fn shared_ints(py: Python<'_>) -> PyResult<&'static [Py<PyAny>]> {
    let p = SHARED_INTS.load(Ordering::Acquire);
    // SAFETY: a non-null pointer is a leaked table (see `SHARED_INTS`), never freed.
    match unsafe { p.as_ref() } {
        Some(t) => Ok(&t.0),
        None => grow_shared_ints(py, FIRST_SHARED_INTS - 1),
    }
}

/// A table that holds `id` (if below `MAX_SHARED_INTS`): at least twice the current one, so
/// that growing stays rare. Swapped in only if the table is still the one it grew from (else
/// the other thread's one is taken).
#[cold]
fn grow_shared_ints(py: Python<'_>, id: usize) -> PyResult<&'static [Py<PyAny>]> {
    let cur = SHARED_INTS.load(Ordering::Acquire);
    // SAFETY: as in `shared_ints`.
    let old: &[Py<PyAny>] = unsafe { cur.as_ref() }.map_or(&[], |t| &t.0);
    let len = (id + 1)
        .next_power_of_two()
        .max(old.len() * 2)
        .min(MAX_SHARED_INTS);
    if len <= old.len() {
        return Ok(old);
    }
    let mut ints: Vec<Py<PyAny>> = Vec::with_capacity(len);
    ints.extend(old.iter().map(|o| o.clone_ref(py)));
    for i in old.len()..len {
        // SAFETY: returns a new reference, or NULL with an exception set.
        let int = unsafe { ffi::PyLong_FromSize_t(i) };
        // SAFETY: `int` is a new reference (NULL turned into the pending error).
        ints.push(unsafe { Bound::from_owned_ptr_or_err(py, int)? }.unbind());
    }
    let new = Box::into_raw(Box::new(SharedInts(ints.into_boxed_slice())));
    match SHARED_INTS.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: `new` was just leaked into the static and is never freed.
        Ok(_) => Ok(&unsafe { &*new }.0),
        Err(theirs) => {
            // SAFETY: `new` was not published, so this is its only owner; `theirs` is a
            // published table (non-null: `cur` was replaced by one).
            drop(unsafe { Box::from_raw(new) });
            Ok(unsafe { theirs.as_ref() }.map_or(&[], |t| &t.0))
        }
    }
}

/// Grow the shared ints now to cover a vocabulary of `n` ids, so that a tokenizer's first
/// encodings do not pay for it (a failure only leaves the growing to `ids_list`).
pub(crate) fn reserve_shared_ints(py: Python<'_>, n: usize) {
    // SAFETY: as in `shared_ints` (null: no table yet).
    let have = unsafe { SHARED_INTS.load(Ordering::Acquire).as_ref() }.map_or(0, |t| t.0.len());
    if n > have {
        // An error (out of memory) was fetched into the result, not left pending.
        let _ = grow_shared_ints(py, n.min(MAX_SHARED_INTS).saturating_sub(1));
    }
}

/// The head of a `PyListObject` (CPython's `listobject.h`, unchanged from 3.0 to 3.14 in the
/// builds that load abi3 modules): the object header, then the item array.
#[repr(C)]
struct ListHead {
    head: ffi::PyVarObject,
    ob_item: *mut *mut ffi::PyObject,
}

/// How `ids_list` may fill a list: `Some(immortals)` when the list's item array is where
/// `ListHead` says (checked once on a real list) and slots may be written in place, with a
/// reference count raised by hand, `immortals` telling whether counts may be immortal (3.12
/// on); `None`: through `PyList_SetItem` and `Py_IncRef`. The two calls and their checks
/// cost ~35 instructions per id against ~6 in place, as large as the whole encoding of a
/// cached word.
static LIST_FILL: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();

/// Whether a new list of two slots, filled by `PyList_SetItem`, has them where `ListHead`
/// puts them (size and items), and whether this interpreter has immortal objects.
#[cold]
fn probe_list_fill(py: Python<'_>) -> Option<bool> {
    // SAFETY: the GIL is held. PyList_New gives a new list (or NULL: no direct fill); its
    // two slots are set by PyList_SetItem, each stealing a new reference to None, before
    // anything is read; the list is dropped through `Bound` at the end.
    unsafe {
        let Some(list) = Bound::from_owned_ptr_or_opt(py, ffi::PyList_New(2)) else {
            PyErr::fetch(py);
            return None;
        };
        let none = ffi::Py_None();
        for i in 0..2 {
            ffi::Py_IncRef(none);
            if ffi::PyList_SetItem(list.as_ptr(), i, none) != 0 {
                PyErr::fetch(py);
                return None;
            }
        }
        let head = list.as_ptr().cast::<ListHead>();
        let items = (*head).ob_item;
        let ok = (*head).head.ob_size == 2
            && !items.is_null()
            && *items == none
            && *items.add(1) == none
            && ffi::PyList_GetItem(list.as_ptr(), 1) == none;
        ok.then(|| py.version_info() >= (3, 12))
    }
}

/// Raise the reference count of `obj`, as `Py_INCREF` in CPython's headers for a stable-ABI
/// module built for 3.10 does it: in place, and not for an immortal object (3.12 on, whose
/// count's low 32 bits read negative; PEP 683 keeps that test valid for such modules).
///
/// # Safety
/// `obj` is a live object and the GIL is held; `immortals` as `LIST_FILL` found it.
#[inline(always)]
unsafe fn incref_in_place(obj: *mut ffi::PyObject, immortals: bool) {
    // SAFETY: the count is the first word of every object of the builds that load abi3
    // modules; the GIL serializes every change to it.
    unsafe {
        let count = obj.cast::<isize>();
        let c = *count;
        if !immortals || (c as i32) >= 0 {
            *count = c + 1;
        }
    }
}

/// `ids` as a Python list of ints. Written against the C API: the list is filled slot by
/// slot from the shared table (looked up once per list, not once per id), in place where
/// `LIST_FILL` allows.
pub(crate) fn ids_list<'py>(py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
    let shared = shared_ints(py)?;
    let n = ffi::Py_ssize_t::try_from(ids.len())
        .map_err(|_| PyValueError::new_err("too many ids for a list"))?;
    // SAFETY: PyList_New gives a new reference (or NULL with an exception set, turned into
    // an error). Its slots start NULL, which the list's deallocator accepts, so an early
    // error return is safe; every slot is filled below before the list is returned.
    let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n))? };
    let Some(immortals) = *LIST_FILL.get_or_init(|| probe_list_fill(py)) else {
        fill_by_calls(py, &list, shared, ids)?;
        // SAFETY: made by PyList_New above.
        return Ok(unsafe { list.cast_into_unchecked::<PyList>() });
    };
    // SAFETY: `list` is a new list of `n` slots laid out as `ListHead` (checked by the
    // probe), not yet seen by any other code; `ob_item` holds `n` NULL slots.
    let items = unsafe { (*list.as_ptr().cast::<ListHead>()).ob_item };
    for (i, &id) in ids.iter().enumerate() {
        let int = match shared.get(id as usize) {
            Some(obj) => {
                let p = obj.as_ptr();
                // SAFETY: a live int of the table; the GIL is held.
                unsafe { incref_in_place(p, immortals) };
                p
            }
            None => new_int(py, id)?,
        };
        // SAFETY: `i < n` slots; the slot was NULL and now owns the new reference.
        unsafe { *items.add(i) = int };
    }
    // SAFETY: made by PyList_New above.
    Ok(unsafe { list.cast_into_unchecked::<PyList>() })
}

/// A new reference to the int `id`, for an id past the shared table: from a grown table when
/// `id` is below `MAX_SHARED_INTS`, else a new int.
#[cold]
#[inline(never)]
fn new_int(py: Python<'_>, id: u32) -> PyResult<*mut ffi::PyObject> {
    let id = id as usize;
    let table = if id < MAX_SHARED_INTS {
        grow_shared_ints(py, id)?
    } else {
        &[]
    };
    let int = match table.get(id) {
        Some(obj) => obj.clone_ref(py).into_ptr(),
        // SAFETY: returns a new reference, or NULL with an exception set.
        None => unsafe { ffi::PyLong_FromSize_t(id) },
    };
    if int.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(int)
}

/// `ids_list`'s fill through the C API's calls, where the list's layout is not the one
/// `ListHead` describes.
#[cold]
fn fill_by_calls(
    py: Python<'_>,
    list: &Bound<'_, PyAny>,
    shared: &[Py<PyAny>],
    ids: &[u32],
) -> PyResult<()> {
    for (i, &id) in ids.iter().enumerate() {
        let int = match shared.get(id as usize) {
            Some(obj) => obj.clone_ref(py).into_ptr(),
            None => new_int(py, id)?,
        };
        // SAFETY: `list` is a list of `ids.len()` slots and `i` is below that;
        // PyList_SetItem steals `int`.
        if unsafe { ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, int) } != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(())
}

/// Capacity (in ids) up to which a thread keeps its id buffer between calls; a bigger one,
/// left by a long text, is freed rather than held for the thread's life.
const KEPT_IDS_CAPACITY: usize = 1 << 16;

thread_local! {
    /// The ids of the text being encoded by a single-text call on this thread, kept between
    /// calls so that a call allocates no vector (the list is built from it).
    static IDS_BUFFER: std::cell::Cell<Vec<u32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `f` on this thread's empty id buffer. A call nested in `f` (none is expected) gets a new
/// buffer of its own.
pub(crate) fn with_ids_buffer<R>(f: impl FnOnce(&mut Vec<u32>) -> R) -> R {
    // (No buffer once the thread's storage is gone, in a thread-exit destructor: a new one.)
    let mut buf = IDS_BUFFER
        .try_with(std::cell::Cell::take)
        .unwrap_or_default();
    buf.clear();
    let r = f(&mut buf);
    if buf.capacity() <= KEPT_IDS_CAPACITY {
        let _ = IDS_BUFFER.try_with(|c| c.set(buf));
    }
    r
}

/// `f` with the GIL released, as `py.detach(f)` does, without PyO3's bookkeeping around it
/// (its attach count saved and zeroed in thread-local storage, then restored, and its
/// deferred reference counts applied on return): only `PyEval_SaveThread` and
/// `PyEval_RestoreThread`, which every per-text call pays for. For closures that call
/// nothing of Python or PyO3 (the Rust core only), so the attach count, which stays as it
/// was, is never read while the thread is detached; deferred counts are applied at the
/// next attach as before. The GIL is taken back when `f` panics too (the guard's drop),
/// before the panic reaches PyO3's trampoline.
///
/// # Safety
/// `f` must not touch Python or PyO3 in any way (no `Py` dropped or cloned, no attach): PyO3
/// still counts this thread as attached while it runs. Closures over the Rust core only.
pub(crate) unsafe fn released<T: Send>(_py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    struct Reattach(*mut ffi::PyThreadState);
    impl Drop for Reattach {
        fn drop(&mut self) {
            // SAFETY: the thread state this thread saved below, restored once.
            unsafe { ffi::PyEval_RestoreThread(self.0) };
        }
    }
    // SAFETY: the GIL is held (`_py`); it is released here and taken back by the guard,
    // on this thread, whatever `f` does; `f` touches no Python object (see above).
    let _attached_again = Reattach(unsafe { ffi::PyEval_SaveThread() });
    f()
}

/// Python's cyclic garbage collector held off while this lives (on a thread holding the
/// GIL, which it must keep until the guard drops). Building thousands of id lists would
/// otherwise set off young-generation collections (from 3.12 on they wait for the
/// interpreter anyway) that walk every list built so far, again at each older generation;
/// lists of ints make no cycles, and one collection after the batch finds them all.
/// The collector is switched back on only if it was on.
struct GcPause {
    was_enabled: bool,
}

impl GcPause {
    fn new(_py: Python<'_>) -> GcPause {
        // SAFETY: the GIL is held (`_py`); PyGC_Disable only flips the collector's flag and
        // returns its previous state.
        GcPause {
            was_enabled: unsafe { pyo3::ffi::PyGC_Disable() } != 0,
        }
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.was_enabled {
            // SAFETY: dropped on the thread that made it, which still holds the GIL.
            unsafe {
                pyo3::ffi::PyGC_Enable();
            }
        }
    }
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
            let _gc = GcPause::new(py);
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

/// The ids of a plan's texts (`crate::cuts`) as a Python list of lists. The pieces run
/// across the pool longest first (the chunks go out in order); each text's list is built on
/// this thread as soon as its last piece is back, from `finish` over its pieces' rows in
/// order, so building lists overlaps the encoding of the rest.
pub(crate) fn plan_lists_streamed<'py>(
    py: Python<'py>,
    plan: &crate::cuts::Plan<'_>,
    piece: impl Fn(&crate::cuts::Piece<'_>) -> Result<Vec<u32>, Error> + Sync,
    mut finish: impl FnMut(&mut dyn Iterator<Item = Vec<u32>>) -> Result<Vec<u32>, Error>,
) -> PyResult<Bound<'py, PyList>> {
    let texts = plan.bounds.len().saturating_sub(1);
    let n =
        ffi::Py_ssize_t::try_from(texts).map_err(|_| PyValueError::new_err("batch too large"))?;
    // SAFETY: as in `ids_lists_streamed`: a new list whose NULL slots are all filled below
    // before it is returned (an early error return drops it, which NULL slots allow).
    let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n))? };
    let order = plan.longest_first();
    // Per piece: its text, and its row once done; per text: pieces still out.
    let mut owner = vec![0usize; plan.pieces.len()];
    let mut left = vec![0usize; texts];
    for (t, w) in plan.bounds.windows(2).enumerate() {
        if let [a, b] = *w {
            owner
                .get_mut(a..b)
                .into_iter()
                .flatten()
                .for_each(|o| *o = t);
            if let Some(l) = left.get_mut(t) {
                *l = b.saturating_sub(a);
            }
        }
    }
    let mut rows: Vec<Option<Vec<u32>>> = vec![None; plan.pieces.len()];
    let mut filled = 0usize;
    crate::parallel::map_batch_streamed(
        &order,
        |&i| plan.piece_len(i),
        |&i| match plan.pieces.get(i) {
            Some(p) => piece(p).map_err(to_py_err),
            None => Ok(Vec::new()),
        },
        |next| py.detach(next),
        |start, done| {
            let _gc = GcPause::new(py);
            for (k, row) in done.into_iter().enumerate() {
                let Some(&i) = order.get(start + k) else {
                    continue;
                };
                let (Some(slot), Some(&t)) = (rows.get_mut(i), owner.get(i)) else {
                    continue;
                };
                *slot = Some(row);
                let Some(l) = left.get_mut(t) else { continue };
                *l -= 1;
                if *l > 0 {
                    continue;
                }
                let (a, b) = match plan.bounds.get(t..t + 2) {
                    Some(&[a, b]) => (a, b),
                    _ => continue,
                };
                let mut parts = rows
                    .get_mut(a..b)
                    .into_iter()
                    .flatten()
                    .map(|r| r.take().unwrap_or_default());
                let ids = finish(&mut parts).map_err(to_py_err)?;
                let row = ids_list(py, &ids)?;
                // SAFETY: `list` is a list of `texts` slots, `t < texts`; PyList_SetItem
                // steals the row's reference. Each text is finished exactly once (its count
                // of pieces left reaches 0 once).
                let rc = unsafe {
                    ffi::PyList_SetItem(list.as_ptr(), t as ffi::Py_ssize_t, row.into_ptr())
                };
                if rc != 0 {
                    return Err(PyErr::fetch(py));
                }
                filled += 1;
            }
            Ok(())
        },
    )?;
    if filled != texts {
        return Err(PyValueError::new_err(
            "a batch text was left without its ids",
        ));
    }
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
