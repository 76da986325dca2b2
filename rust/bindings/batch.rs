//! `TokenBatch`: the ids of many texts as one flat buffer plus row splits, handed to numpy
//! (DLPack) and Arrow (C data interface) without copying and without requiring either library.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

/// The texts of a batch call, read on the calling thread (which holds the GIL) into strong
/// references to the strings; `strs` gives their UTF-8 (each string's own buffer, no copy),
/// which those references keep valid while the GIL is released for the encoding.
///
/// A list or a tuple (not a subclass, which may iterate its own way) is read item by item
/// through the C API, without iterator objects or per-item wrappers: this read is serial,
/// before the pool starts, and on a batch of short lines it was about 7 % of the work. Any
/// other object goes through pyo3's `Vec` extraction, so what is accepted and every error
/// stay as they were: a `str` is refused, a non-`str` item is a `TypeError`, and a string
/// without UTF-8 (a lone surrogate) is a `UnicodeEncodeError`, the first bad item deciding.
pub(crate) struct BatchTexts<'py> {
    /// Strong references to the strings: they keep each UTF-8 buffer of `utf8` alive.
    objs: Vec<Bound<'py, PyString>>,
    /// Each string's UTF-8 buffer (pointer and length), inside the string object.
    utf8: Vec<(*const u8, usize)>,
}

impl<'py> BatchTexts<'py> {
    /// Keep `item` (a new strong reference), which must be a `str`, and its UTF-8.
    #[inline]
    fn push(&mut self, item: Bound<'py, PyAny>) -> PyResult<()> {
        let s = item.downcast_into::<PyString>()?;
        let mut len: ffi::Py_ssize_t = 0;
        // SAFETY: `s` is a live `str`; the call makes (once) and caches its UTF-8 in the
        // object, valid as long as the object lives, or sets an exception and gives NULL.
        let p = unsafe { ffi::PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut len) };
        if p.is_null() {
            return Err(PyErr::fetch(s.py()));
        }
        self.utf8
            .push((p.cast::<u8>(), usize::try_from(len).unwrap_or(0)));
        self.objs.push(s);
        Ok(())
    }

    /// Each text's UTF-8, in order, borrowed for as long as `self` holds the strings.
    pub(crate) fn strs(&self) -> Vec<&str> {
        self.utf8
            .iter()
            // SAFETY: each buffer is the valid UTF-8 CPython made for a string `objs` holds
            // a strong reference to (so it is neither freed nor changed while `self` lives).
            .map(|&(p, n)| unsafe {
                std::str::from_utf8_unchecked(std::slice::from_raw_parts(p, n))
            })
            .collect()
    }
}

impl<'py> FromPyObject<'py> for BatchTexts<'py> {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        let py = ob.py();
        let with = |n: usize| BatchTexts {
            objs: Vec::with_capacity(n),
            utf8: Vec::with_capacity(n),
        };
        if let Ok(list) = ob.downcast_exact::<PyList>() {
            let n = list.len();
            let mut t = with(n);
            for i in 0..n {
                // SAFETY: `list` is a live list and `i` an index (a NULL result, with an
                // exception set, is turned into an error); the borrowed item gets its own
                // strong reference before anything else runs.
                let item = unsafe {
                    let p = ffi::PyList_GetItem(list.as_ptr(), i as ffi::Py_ssize_t);
                    Bound::from_borrowed_ptr_or_err(py, p)?
                };
                t.push(item)?;
            }
            return Ok(t);
        }
        if let Ok(tuple) = ob.downcast_exact::<PyTuple>() {
            let mut t = with(tuple.len());
            for item in tuple.iter() {
                t.push(item)?;
            }
            return Ok(t);
        }
        let v: Vec<Bound<'py, PyAny>> = ob.extract()?;
        let mut t = with(v.len());
        for item in v {
            t.push(item)?;
        }
        Ok(t)
    }
}

/// The flat result of a batch: row `i` is `ids[row_splits[i]..row_splits[i + 1]]`.
#[pyclass(frozen, module = "piecework._core")]
pub struct TokenBatch {
    ids: Arc<Vec<u32>>,
    row_splits: Arc<Vec<i64>>,
}

impl TokenBatch {
    /// From flat ids and the end of each row in them (non-decreasing, at most `ids.len()`).
    pub(crate) fn from_flat(ids: Vec<u32>, ends: &[usize]) -> TokenBatch {
        let mut splits = Vec::with_capacity(ends.len() + 1);
        splits.push(0i64);
        splits.extend(ends.iter().map(|&e| e.min(ids.len()) as i64));
        TokenBatch {
            ids: Arc::new(ids),
            row_splits: Arc::new(splits),
        }
    }

    pub(crate) fn from_rows(rows: Vec<Vec<u32>>) -> TokenBatch {
        let total = rows.iter().map(Vec::len).sum();
        let mut ids = Vec::with_capacity(total);
        let mut splits = Vec::with_capacity(rows.len() + 1);
        splits.push(0i64);
        for r in rows {
            ids.extend_from_slice(&r);
            splits.push(ids.len() as i64);
        }
        TokenBatch {
            ids: Arc::new(ids),
            row_splits: Arc::new(splits),
        }
    }
}

#[pymethods]
impl TokenBatch {
    fn __len__(&self) -> usize {
        self.row_splits.len().saturating_sub(1)
    }

    /// Number of ids in all rows.
    #[getter]
    fn num_tokens(&self) -> usize {
        self.ids.len()
    }

    /// The flat ids as a DLPack-capable buffer (`numpy.from_dlpack` gives a uint32 view).
    #[getter]
    fn ids_buffer(&self) -> DlpackBuffer {
        DlpackBuffer {
            data: DlData::U32(self.ids.clone()),
        }
    }

    /// The row splits as a DLPack-capable buffer (`numpy.from_dlpack` gives an int64 view).
    #[getter]
    fn row_splits_buffer(&self) -> DlpackBuffer {
        DlpackBuffer {
            data: DlData::I64(self.row_splits.clone()),
        }
    }

    fn row(&self, i: isize) -> PyResult<Vec<u32>> {
        let n = self.__len__() as isize;
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(pyo3::exceptions::PyIndexError::new_err(
                "row index out of range",
            ));
        }
        let (s, e) = (
            self.row_splits[j as usize] as usize,
            self.row_splits[j as usize + 1] as usize,
        );
        Ok(self.ids[s..e].to_vec())
    }

    fn to_list(&self) -> Vec<Vec<u32>> {
        self.row_splits
            .windows(2)
            .map(|w| self.ids[w[0] as usize..w[1] as usize].to_vec())
            .collect()
    }

    /// Arrow C data interface: a `large_list<uint32>` array, zero-copy.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let schema = arrow::list_schema();
        let array = arrow::list_array(self.ids.clone(), self.row_splits.clone());
        // SAFETY: the pointers are fresh boxes whose ownership passes to the capsules, which
        // release them unless a consumer moved them out (and set `release` to null).
        unsafe {
            let s = ffi::PyCapsule_New(
                schema.cast(),
                c"arrow_schema".as_ptr(),
                Some(arrow::drop_schema_capsule),
            );
            let s = Bound::from_owned_ptr_or_err(py, s)?;
            let a = ffi::PyCapsule_New(
                array.cast(),
                c"arrow_array".as_ptr(),
                Some(arrow::drop_array_capsule),
            );
            let a = Bound::from_owned_ptr_or_err(py, a)?;
            PyTuple::new(py, [s, a])
        }
    }
}

enum DlData {
    U32(Arc<Vec<u32>>),
    I64(Arc<Vec<i64>>),
}

/// A one-dimensional CPU array that numpy (or torch, jax...) can import with `from_dlpack`.
#[pyclass(frozen, module = "piecework._core")]
pub struct DlpackBuffer {
    data: DlData,
}

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}
#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// What a DLManagedTensor keeps alive: the data and its shape.
struct DlContext {
    _data: DlData,
    shape: [i64; 1],
}

unsafe extern "C" fn dl_deleter(t: *mut DLManagedTensor) {
    if t.is_null() {
        return;
    }
    // SAFETY: both boxes were made by `__dlpack__` below and are freed exactly once here.
    unsafe {
        drop(Box::from_raw((*t).manager_ctx as *mut DlContext));
        drop(Box::from_raw(t));
    }
}

unsafe extern "C" fn dl_capsule_destructor(capsule: *mut ffi::PyObject) {
    // A consumer renames the capsule to "used_dltensor" once it owns the tensor.
    // SAFETY: the capsule is alive while its destructor runs.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, c"dltensor".as_ptr()) == 1 {
            let t =
                ffi::PyCapsule_GetPointer(capsule, c"dltensor".as_ptr()) as *mut DLManagedTensor;
            dl_deleter(t);
        }
    }
}

#[pymethods]
impl DlpackBuffer {
    fn __len__(&self) -> usize {
        match &self.data {
            DlData::U32(v) => v.len(),
            DlData::I64(v) => v.len(),
        }
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<Bound<'py, PyAny>>,
        dl_device: Option<Bound<'py, PyAny>>,
        copy: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (stream, max_version, dl_device, copy);
        let (ptr, len, code, bits, data) = match &self.data {
            DlData::U32(v) => (
                v.as_ptr() as *mut c_void,
                v.len(),
                1u8,
                32u8,
                DlData::U32(v.clone()),
            ),
            DlData::I64(v) => (
                v.as_ptr() as *mut c_void,
                v.len(),
                0u8,
                64u8,
                DlData::I64(v.clone()),
            ),
        };
        let ctx = Box::into_raw(Box::new(DlContext {
            _data: data,
            shape: [len as i64],
        }));
        // SAFETY: `ctx` lives until the deleter runs; the shape pointer points into it.
        let shape = unsafe { (*ctx).shape.as_mut_ptr() };
        let t = Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: DLTensor {
                data: ptr,
                device: DLDevice {
                    device_type: 1,
                    device_id: 0,
                },
                ndim: 1,
                dtype: DLDataType {
                    code,
                    bits,
                    lanes: 1,
                },
                shape,
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: ctx.cast(),
            deleter: Some(dl_deleter),
        }));
        // SAFETY: ownership of `t` passes to the capsule (or to the consumer that renames it).
        unsafe {
            let cap =
                ffi::PyCapsule_New(t.cast(), c"dltensor".as_ptr(), Some(dl_capsule_destructor));
            if cap.is_null() {
                dl_deleter(t);
            }
            Bound::from_owned_ptr_or_err(py, cap)
        }
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }
}

/// The Arrow C data interface structures and their release callbacks.
mod arrow {
    use super::*;

    #[repr(C)]
    pub struct ArrowSchema {
        format: *const c_char,
        name: *const c_char,
        metadata: *const c_char,
        flags: i64,
        n_children: i64,
        children: *mut *mut ArrowSchema,
        dictionary: *mut ArrowSchema,
        release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
        private_data: *mut c_void,
    }

    #[repr(C)]
    pub struct ArrowArray {
        length: i64,
        null_count: i64,
        offset: i64,
        n_buffers: i64,
        n_children: i64,
        buffers: *mut *const c_void,
        children: *mut *mut ArrowArray,
        dictionary: *mut ArrowArray,
        release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
        private_data: *mut c_void,
    }

    const NULLABLE: i64 = 2;
    static LIST_FORMAT: &CStr = c"+L";
    static ITEM_FORMAT: &CStr = c"I";
    static ITEM_NAME: &CStr = c"item";

    struct SchemaPrivate {
        children: Box<[*mut ArrowSchema; 1]>,
    }

    unsafe extern "C" fn release_schema(s: *mut ArrowSchema) {
        if s.is_null() {
            return;
        }
        // SAFETY: `s` was made by `list_schema`/`item_schema`; children are released first.
        unsafe {
            let p = (*s).private_data as *mut SchemaPrivate;
            if !p.is_null() {
                let p = Box::from_raw(p);
                for &c in p.children.iter() {
                    if let Some(r) = (*c).release {
                        r(c);
                    }
                    drop(Box::from_raw(c));
                }
            }
            (*s).release = None;
        }
    }

    fn item_schema() -> *mut ArrowSchema {
        Box::into_raw(Box::new(ArrowSchema {
            format: ITEM_FORMAT.as_ptr(),
            name: ITEM_NAME.as_ptr(),
            metadata: std::ptr::null(),
            flags: NULLABLE,
            n_children: 0,
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: Some(release_schema),
            private_data: std::ptr::null_mut(),
        }))
    }

    pub fn list_schema() -> *mut ArrowSchema {
        let mut p = Box::new(SchemaPrivate {
            children: Box::new([item_schema()]),
        });
        let children = p.children.as_mut_ptr();
        Box::into_raw(Box::new(ArrowSchema {
            format: LIST_FORMAT.as_ptr(),
            name: c"".as_ptr(),
            metadata: std::ptr::null(),
            flags: 0,
            n_children: 1,
            children,
            dictionary: std::ptr::null_mut(),
            release: Some(release_schema),
            private_data: Box::into_raw(p).cast(),
        }))
    }

    struct ArrayPrivate {
        _ids: Arc<Vec<u32>>,
        _splits: Arc<Vec<i64>>,
        buffers: Box<[*const c_void; 2]>,
        children: Box<[*mut ArrowArray; 1]>,
    }

    unsafe extern "C" fn release_array(a: *mut ArrowArray) {
        if a.is_null() {
            return;
        }
        // SAFETY: `a` was made by `list_array`/`item_array`; children are released first.
        unsafe {
            let p = (*a).private_data as *mut ArrayPrivate;
            if !p.is_null() {
                let p = Box::from_raw(p);
                for &c in p.children.iter() {
                    if c.is_null() {
                        continue;
                    }
                    if let Some(r) = (*c).release {
                        r(c);
                    }
                    drop(Box::from_raw(c));
                }
            }
            (*a).release = None;
        }
    }

    fn item_array(ids: Arc<Vec<u32>>, splits: Arc<Vec<i64>>) -> *mut ArrowArray {
        let len = ids.len() as i64;
        let mut p = Box::new(ArrayPrivate {
            buffers: Box::new([std::ptr::null(), ids.as_ptr().cast()]),
            _ids: ids,
            _splits: splits,
            children: Box::new([std::ptr::null_mut()]),
        });
        let buffers = p.buffers.as_mut_ptr();
        Box::into_raw(Box::new(ArrowArray {
            length: len,
            null_count: 0,
            offset: 0,
            n_buffers: 2,
            n_children: 0,
            buffers,
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: Some(release_array),
            private_data: Box::into_raw(p).cast(),
        }))
    }

    pub fn list_array(ids: Arc<Vec<u32>>, splits: Arc<Vec<i64>>) -> *mut ArrowArray {
        let rows = splits.len().saturating_sub(1) as i64;
        let child = item_array(ids.clone(), splits.clone());
        let mut p = Box::new(ArrayPrivate {
            buffers: Box::new([std::ptr::null(), splits.as_ptr().cast()]),
            _ids: ids,
            _splits: splits,
            children: Box::new([child]),
        });
        let buffers = p.buffers.as_mut_ptr();
        let children = p.children.as_mut_ptr();
        Box::into_raw(Box::new(ArrowArray {
            length: rows,
            null_count: 0,
            offset: 0,
            n_buffers: 2,
            n_children: 1,
            buffers,
            children,
            dictionary: std::ptr::null_mut(),
            release: Some(release_array),
            private_data: Box::into_raw(p).cast(),
        }))
    }

    pub unsafe extern "C" fn drop_schema_capsule(capsule: *mut ffi::PyObject) {
        // SAFETY: the capsule holds a boxed ArrowSchema; a consumer that moved it out set
        // `release` to null, in which case only the box is freed.
        unsafe {
            let s =
                ffi::PyCapsule_GetPointer(capsule, c"arrow_schema".as_ptr()) as *mut ArrowSchema;
            if s.is_null() {
                ffi::PyErr_Clear();
                return;
            }
            if let Some(r) = (*s).release {
                r(s);
            }
            drop(Box::from_raw(s));
        }
    }

    pub unsafe extern "C" fn drop_array_capsule(capsule: *mut ffi::PyObject) {
        // SAFETY: as for the schema capsule.
        unsafe {
            let a = ffi::PyCapsule_GetPointer(capsule, c"arrow_array".as_ptr()) as *mut ArrowArray;
            if a.is_null() {
                ffi::PyErr_Clear();
                return;
            }
            if let Some(r) = (*a).release {
                r(a);
            }
            drop(Box::from_raw(a));
        }
    }
}

/// Build a `TokenBatch` from rows (for tests and for callers holding ids already).
#[pyfunction]
fn _batch_from_rows(rows: Vec<Vec<u32>>) -> TokenBatch {
    TokenBatch::from_rows(rows)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_batch_from_rows, m)?)?;
    m.add_class::<TokenBatch>()?;
    m.add_class::<DlpackBuffer>()?;
    Ok(())
}
