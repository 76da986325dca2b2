//! The batch thread pool. One pool per process: after `fork` the child finds the parent's pool
//! (whose threads did not survive) belongs to another pid and builds its own, so batch calls
//! never hang in a forked worker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

static NUM_THREADS: AtomicUsize = AtomicUsize::new(0);
static POOL: Mutex<Option<(u32, usize, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

/// Threads used by batch calls: `set_num_threads`, else `PIECEWORK_NUM_THREADS`, else the
/// available cores.
pub fn num_threads() -> usize {
    let n = NUM_THREADS.load(Ordering::Relaxed);
    if n > 0 {
        return n;
    }
    std::env::var("PIECEWORK_NUM_THREADS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Set the thread count (0 restores the default).
pub fn set_num_threads(n: usize) {
    NUM_THREADS.store(n, Ordering::Relaxed);
}

fn pool() -> Option<Arc<rayon::ThreadPool>> {
    let pid = std::process::id();
    let want = num_threads();
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, n, pool)) = guard.as_ref() {
        if *p == pid && *n == want {
            return Some(pool.clone());
        }
    }
    let new = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(want)
            .build()
            .ok()?,
    );
    if let Some((p, _, old)) = guard.replace((pid, want, new.clone())) {
        if p != pid {
            // The parent's workers do not exist in this process; dropping their pool would
            // wait on them, so it is leaked on purpose.
            std::mem::forget(old);
        }
    }
    Some(new)
}

/// Run `f` inside this process's pool (a one-thread pool when one thread is asked for, so
/// rayon's global pool, which does not survive `fork`, is never used).
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// Below this many items *and* this many bytes a batch stays on the calling thread, where
/// handing work to the pool would cost more than it saves.
const MIN_ITEMS: usize = 8;
const MIN_BYTES: usize = 16 * 1024;

/// `f` over every item, across the pool when the batch is big enough (by count, or by
/// `bytes` in all, so a few long documents still use every thread), in order.
pub fn map_batch<T, R, E>(
    items: &[T],
    bytes: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> Result<R, E> + Sync + Send,
) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    use rayon::prelude::*;
    let big = items.len() >= MIN_ITEMS
        || (items.len() >= 2 && items.iter().map(&bytes).sum::<usize>() >= MIN_BYTES);
    if big && num_threads() > 1 {
        // Few items: one task each, so uneven documents balance across threads.
        let max_len = if items.len() < 64 { 1 } else { usize::MAX };
        install(|| items.par_iter().with_max_len(max_len).map(&f).collect())
    } else {
        items.iter().map(f).collect()
    }
}

/// The entry of model `uid` in a thread's list of per-model caches, made by `make` when
/// missing; the oldest entry goes first when `max` models are already held. Caches are per
/// thread so that lookups take no lock and threads never wait on each other.
pub(crate) fn model_cache<T>(
    caches: &mut Vec<(u64, T)>,
    uid: u64,
    max: usize,
    make: impl FnOnce() -> T,
) -> &mut T {
    let pos = match caches.iter().position(|c| c.0 == uid) {
        Some(p) => p,
        None => {
            if caches.len() >= max.max(1) {
                caches.remove(0);
            }
            caches.push((uid, make()));
            caches.len() - 1
        }
    };
    &mut caches[pos].1
}
