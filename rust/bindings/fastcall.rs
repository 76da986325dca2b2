//! Builtin functions written straight against CPython's vectorcall convention
//! (`METH_FASTCALL | METH_KEYWORDS`) for the single-text calls a Python loop makes most:
//! `Tokenizer.encode_ids`, `Tokenizer.encode` and `SentencePieceProcessor.encode`.
//!
//! The interpreter calls such a function with the arguments in place (no tuple, no dict), and
//! the function checks only the argument shapes of the common call before encoding; every
//! other call is handed on whole to the general method, which parses and reports errors as it
//! always did. PyO3's generic argument parsing costs about as much as the rest of the per-call
//! glue together, and a callable object (`__call__`) costs a tuple per call on top.
//! Panics and the attach count are handled by PyO3's own trampoline.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

/// A `PyMethodDef` in static memory (CPython keeps a pointer to it in every function object
/// made from it, and never writes to it).
pub(crate) struct MethodDef(pub(crate) ffi::PyMethodDef);

// SAFETY: the definition is immutable and only read, under the GIL, by CPython.
unsafe impl Sync for MethodDef {}

/// The C signature of a `METH_FASTCALL | METH_KEYWORDS` function.
pub(crate) type FastFn = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

impl MethodDef {
    /// `doc` as CPython reads it: a first line `name($self, ...)` then `--` gives the
    /// signature `inspect` reports.
    pub(crate) const fn new(
        name: &'static std::ffi::CStr,
        doc: &'static std::ffi::CStr,
        f: FastFn,
    ) -> MethodDef {
        MethodDef(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunctionFastWithKeywords: f,
            },
            ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: doc.as_ptr(),
        })
    }

    /// A method descriptor of the class `ty` for this definition: `obj.name(...)` then calls
    /// the function with `obj` as its first argument and no bound method made (the
    /// interpreter's method-call path). CPython checks that `obj` is an instance of `ty`
    /// (or a subclass) before the call, which is what lets the function cast it unchecked.
    pub(crate) fn descriptor<'py>(
        &'static self,
        ty: &Bound<'py, pyo3::types::PyType>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: the definition lives for the whole process; PyDescr_NewMethod returns a new
        // reference (or NULL with an exception set) and keeps its own reference to `ty`.
        unsafe {
            let def = std::ptr::from_ref(&self.0).cast_mut();
            Bound::from_owned_ptr_or_err(ty.py(), ffi::PyDescr_NewMethod(ty.as_type_ptr(), def))
        }
    }

    /// A builtin function object that calls this definition's function with `owner` as its
    /// first argument (what a bound method of `owner` would get).
    pub(crate) fn bind<'py>(
        &'static self,
        owner: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = owner.py();
        // SAFETY: the definition lives for the whole process; PyCFunction_NewEx takes a new
        // reference to `owner` and returns a new reference (or NULL with an exception set).
        unsafe {
            let def = std::ptr::from_ref(&self.0).cast_mut();
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyCFunction_NewEx(def, owner.as_ptr(), std::ptr::null_mut()),
            )
        }
    }
}

/// `static $def: MethodDef` (`MethodDef` and `Args` in scope where it is used) named
/// `$name` with the docstring `$doc`, whose C function runs `$imp(py, receiver, args)` inside
/// PyO3's trampoline (panics become exceptions, the attach count is kept). The definition
/// must be bound (`bind`) only to objects of the pyclass `$ty`, or be a descriptor of that
/// class (`descriptor`): the receiver is cast to it unchecked.
macro_rules! fast_method {
    ($def:ident, $name:literal, $doc:literal, $ty:ty, $imp:path) => {
        static $def: MethodDef = {
            unsafe fn body(
                py: pyo3::Python<'_>,
                slf: *mut pyo3::ffi::PyObject,
                args: *const *mut pyo3::ffi::PyObject,
                nargs: pyo3::ffi::Py_ssize_t,
                kwnames: *mut pyo3::ffi::PyObject,
            ) -> pyo3::PyResult<*mut pyo3::ffi::PyObject> {
                // SAFETY: the definition is bound only to a `$ty` (see above), and the
                // arguments are CPython's for this call.
                let (me, a) = unsafe {
                    (
                        pyo3::Bound::from_borrowed_ptr(py, slf).cast_into_unchecked::<$ty>(),
                        Args::new(py, args, nargs, kwnames),
                    )
                };
                $imp(py, me, a)
            }
            unsafe extern "C" fn call(
                slf: *mut pyo3::ffi::PyObject,
                args: *const *mut pyo3::ffi::PyObject,
                nargs: pyo3::ffi::Py_ssize_t,
                kwnames: *mut pyo3::ffi::PyObject,
            ) -> *mut pyo3::ffi::PyObject {
                // SAFETY: called by CPython with the arguments of a METH_FASTCALL |
                // METH_KEYWORDS call.
                unsafe {
                    pyo3::impl_::trampoline::fastcall_with_keywords(slf, args, nargs, kwnames, body)
                }
            }
            MethodDef::new($name, $doc, call)
        };
    };
}
pub(crate) use fast_method;

/// The arguments of one vectorcall: `nargs` positional ones, then one per name in `kwnames`.
pub(crate) struct Args<'a, 'py> {
    py: Python<'py>,
    all: &'a [*mut ffi::PyObject],
    nargs: usize,
    kwnames: Option<Bound<'py, PyTuple>>,
}

impl<'a, 'py> Args<'a, 'py> {
    /// # Safety
    /// `args`, `nargs` and `kwnames` as CPython passes them to a `METH_FASTCALL |
    /// METH_KEYWORDS` function (`kwnames` NULL or a tuple of str, one value per name after
    /// the positional arguments), valid for `'a`.
    pub(crate) unsafe fn new(
        py: Python<'py>,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> Args<'a, 'py> {
        let nargs = usize::try_from(nargs).unwrap_or(0);
        let kwnames = if kwnames.is_null() {
            None
        } else {
            // SAFETY: a tuple, borrowed for the call (see above).
            Some(unsafe { Bound::from_borrowed_ptr(py, kwnames).cast_into_unchecked::<PyTuple>() })
        };
        let nkw = kwnames.as_ref().map_or(0, |k| k.len());
        let all = if args.is_null() {
            &[][..]
        } else {
            // SAFETY: CPython passes `nargs + len(kwnames)` valid object pointers.
            unsafe { std::slice::from_raw_parts(args, nargs + nkw) }
        };
        Args {
            py,
            all,
            nargs,
            kwnames,
        }
    }

    fn item(&self, i: usize) -> Option<Bound<'py, PyAny>> {
        // SAFETY: every pointer in `all` is a live object borrowed for the call.
        self.all
            .get(i)
            .map(|&p| unsafe { Bound::from_borrowed_ptr(self.py, p) })
    }

    /// The first positional argument, as a `str` (subclasses too, as PyO3 accepts them).
    pub(crate) fn first_str(&self) -> Option<Bound<'py, PyString>> {
        if self.nargs == 0 {
            return None;
        }
        self.item(0)?.cast_into::<PyString>().ok()
    }

    /// The only argument when the call is `f(s)` with `s` exactly a `str`.
    pub(crate) fn only_exact_str(&self) -> Option<Bound<'py, PyString>> {
        if self.nargs != 1 || self.kwnames.as_ref().is_some_and(|k| !k.is_empty()) {
            return None;
        }
        let s = self.item(0)?;
        if !s.is_exact_instance_of::<PyString>() {
            return None;
        }
        // SAFETY: checked just above.
        Some(unsafe { s.cast_into_unchecked::<PyString>() })
    }

    /// The value of a flag that is the call's only argument after the first `pos` positional
    /// ones: the `pos`-th positional argument (if `positional`) or the keyword `name`;
    /// `Some(default)` when it is not given; `None` when the call has any other shape (more
    /// arguments, other keywords, a value that is not exactly `True` or `False`), so that it
    /// goes to the general method.
    pub(crate) fn only_flag(
        &self,
        pos: usize,
        name: &Bound<'py, PyString>,
        default: bool,
        positional: bool,
    ) -> Option<bool> {
        let nkw = self.kwnames.as_ref().map_or(0, |k| k.len());
        let value = match (self.nargs.checked_sub(pos), nkw) {
            (Some(0), 0) => return Some(default),
            (Some(1), 0) if positional => self.item(pos)?,
            (Some(0), 1) => {
                let k = self.kwnames.as_ref()?.get_borrowed_item(0).ok()?;
                // Keyword names at a call site are interned, so this is mostly one compare.
                if !(k.is(name) || k.eq(name).unwrap_or(false)) {
                    return None;
                }
                self.item(pos)?
            }
            _ => return None,
        };
        // SAFETY: the addresses of the two bool singletons.
        let (t, f) = unsafe { (ffi::Py_True(), ffi::Py_False()) };
        match value.as_ptr() {
            p if p == t => Some(true),
            p if p == f => Some(false),
            _ => None,
        }
    }

    /// This call handed on whole to `callee` (the general method).
    pub(crate) fn forward(&self, callee: &Bound<'py, PyAny>) -> PyResult<*mut ffi::PyObject> {
        let (t, kw) = self.to_tuple_dict()?;
        Ok(callee.call(t, kw.as_ref())?.into_ptr())
    }

    /// The positional arguments as a tuple and the keyword ones as a dict, for a call to the
    /// general method.
    fn to_tuple_dict(&self) -> PyResult<(Bound<'py, PyTuple>, Option<Bound<'py, PyDict>>)> {
        let pos: Vec<Bound<'py, PyAny>> = (0..self.nargs).filter_map(|i| self.item(i)).collect();
        let tuple = PyTuple::new(self.py, pos)?;
        let kwargs = match &self.kwnames {
            Some(names) if !names.is_empty() => {
                let d = PyDict::new(self.py);
                for (k, name) in names.iter().enumerate() {
                    if let Some(v) = self.item(self.nargs + k) {
                        d.set_item(name, v)?;
                    }
                }
                Some(d)
            }
            _ => None,
        };
        Ok((tuple, kwargs))
    }
}
