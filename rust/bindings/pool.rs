//! The thread pool every batch call of the bindings runs in.
//!
//! Why not rayon's global pool: after `os.fork()` the child process inherits the pool's
//! bookkeeping but none of its threads, so the first parallel call would wait forever. The pool
//! here remembers the process id that built it; a call from another process (a forked child)
//! builds a fresh pool there. The parent's pool is leaked in the child on purpose: its threads
//! do not exist there, so it must not be joined or dropped.

use pyo3::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, Mutex};

struct PoolState {
    pid: u32,
    /// Requested size; 0 means rayon's default (RAYON_NUM_THREADS or the number of CPUs).
    threads: usize,
    pool: Option<Arc<ThreadPool>>,
}

static STATE: Mutex<PoolState> = Mutex::new(PoolState {
    pid: 0,
    threads: 0,
    pool: None,
});

fn lock() -> std::sync::MutexGuard<'static, PoolState> {
    match STATE.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The pool of this process, built on first use (or first use after a fork).
fn current_pool() -> Option<Arc<ThreadPool>> {
    let pid = std::process::id();
    let mut st = lock();
    if st.pid != pid {
        // Built by the parent before a fork (or never built): forget, never drop.
        if let Some(old) = st.pool.take() {
            std::mem::forget(old);
        }
        st.pid = pid;
    }
    if st.pool.is_none() {
        let pool = ThreadPoolBuilder::new()
            .num_threads(st.threads)
            .thread_name(|i| format!("piecework-{i}"))
            .build()
            .ok()?;
        st.pool = Some(Arc::new(pool));
    }
    st.pool.clone()
}

/// Run `f` (which may use rayon's parallel iterators) inside this process's pool.
pub(crate) fn run_in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match current_pool() {
        Some(pool) => pool.install(f),
        // The pool could not be built (no threads available): run on the calling thread.
        None => f(),
    }
}

/// Set how many threads batch calls use (0 restores the default: RAYON_NUM_THREADS or the
/// number of CPUs).
#[pyfunction]
pub(crate) fn set_num_threads(n: usize) {
    let mut st = lock();
    st.threads = n;
    let old = st.pool.take();
    if st.pid != std::process::id() {
        std::mem::forget(old);
    }
    // Otherwise calls already running keep their `Arc` to the old pool; it ends after them.
}

/// How many threads batch calls use.
#[pyfunction]
pub(crate) fn get_num_threads() -> usize {
    current_pool().map_or(1, |p| p.current_num_threads())
}
