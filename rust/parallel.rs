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

/// `(a(), b())`, the two side by side in the pool when it has two threads or more (for the
/// independent halves of a load).
pub fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    let pool = if num_threads() > 1 { pool() } else { None };
    match pool {
        Some(p) => p.join(a, b),
        None => (a(), b()),
    }
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

/// `f` over every item, across the pool, the items handed out one at a time in their order
/// to whichever thread is free (for a few uneven items given longest first: no long item is
/// left for last, as a split into fixed halves could leave it). Results come back in item
/// order; after an error the items not started yet are skipped and the first error (by item
/// order) is returned.
pub fn map_in_turn<T, R, E>(items: &[T], f: impl Fn(&T) -> Result<R, E> + Sync) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    use std::sync::atomic::AtomicBool;
    let threads = num_threads().min(items.len());
    let pool = if threads > 1 { pool() } else { None };
    let Some(pool) = pool else {
        return items.iter().map(f).collect();
    };
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let done: Mutex<Vec<(usize, Result<R, E>)>> = Mutex::new(Vec::with_capacity(items.len()));
    pool.scope(|s| {
        for _ in 0..threads {
            s.spawn(|_| {
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    mine.push((i, r));
                }
                done.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Finished chunks of `map_batch_streamed`: (index of the chunk's first item, its results);
/// `Err(None)` marks a chunk whose task panicked (the scope re-raises that panic).
pub type Chunks<R, E> = Vec<(usize, Result<Vec<R>, Option<E>>)>;

/// `f` over every item like `map_batch`, but the results reach `take(first_index, results)` on
/// the calling thread chunk by chunk, as the pool finishes them, in any order. The caller's
/// serial work on results (building Python objects) then overlaps the parallel encoding
/// instead of following it. `wait(next)` must call `next()`, which blocks until chunks are
/// ready; it is the caller's hook to release a lock (the GIL) while blocked. After an error,
/// the chunks not started yet are skipped and the first error is returned.
pub fn map_batch_streamed<T, R, E>(
    items: &[T],
    bytes: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> Result<R, E> + Sync,
    mut wait: impl FnMut(&(dyn Fn() -> Chunks<R, E> + Sync)) -> Chunks<R, E>,
    mut take: impl FnMut(usize, Vec<R>) -> Result<(), E>,
) -> Result<(), E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    use std::sync::atomic::AtomicBool;
    use std::sync::Condvar;
    let threads = num_threads();
    let big = items.len() >= MIN_ITEMS
        || (items.len() >= 2 && items.iter().map(&bytes).sum::<usize>() >= MIN_BYTES);
    let pool = if big && threads > 1 { pool() } else { None };
    let Some(pool) = pool else {
        let all = wait(&|| {
            vec![(
                0,
                items
                    .iter()
                    .map(&f)
                    .collect::<Result<Vec<R>, E>>()
                    .map_err(Some),
            )]
        });
        for (start, res) in all {
            match res {
                Ok(rows) => take(start, rows)?,
                Err(Some(e)) => return Err(e),
                Err(None) => {}
            }
        }
        return Ok(());
    };
    // Small chunks keep the caller busy early and the threads balanced; many chunks per
    // thread cost one lock and one wake-up each.
    let len = (items.len() / (threads * 16)).clamp(1, 256);
    let nchunks = items.len().div_ceil(len);
    let ready: (Mutex<Chunks<R, E>>, Condvar) = (Mutex::new(Vec::new()), Condvar::new());
    let stop = AtomicBool::new(false);

    /// Hands a task's result over even when the task panics, so the caller never waits for
    /// a chunk that will not come.
    struct Hand<'a, R, E> {
        ready: &'a (Mutex<Chunks<R, E>>, Condvar),
        start: usize,
        res: Result<Vec<R>, Option<E>>,
    }
    impl<R, E> Drop for Hand<'_, R, E> {
        fn drop(&mut self) {
            let res = std::mem::replace(&mut self.res, Err(None));
            let mut q = self.ready.0.lock().unwrap_or_else(|e| e.into_inner());
            q.push((self.start, res));
            self.ready.1.notify_one();
        }
    }

    let mut first_err = None;
    pool.in_place_scope(|s| {
        for (k, chunk) in items.chunks(len).enumerate() {
            let (ready, stop, f) = (&ready, &stop, &f);
            s.spawn(move |_| {
                let mut hand = Hand {
                    ready,
                    start: k * len,
                    res: Err(None),
                };
                hand.res = if stop.load(Ordering::Relaxed) {
                    Ok(Vec::new())
                } else {
                    chunk
                        .iter()
                        .map(f)
                        .collect::<Result<Vec<R>, E>>()
                        .map_err(Some)
                };
            });
        }
        let next = || {
            let mut q = ready.0.lock().unwrap_or_else(|e| e.into_inner());
            while q.is_empty() {
                q = ready.1.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::take(&mut *q)
        };
        let mut got = 0;
        while got < nchunks {
            for (start, res) in wait(&next) {
                got += 1;
                let failed = match res {
                    Ok(rows) if first_err.is_none() => take(start, rows).err(),
                    Ok(_) | Err(None) => None,
                    Err(Some(e)) => Some(e),
                };
                if let Some(e) = failed {
                    stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(e);
                }
            }
        }
    });
    first_err.map_or(Ok(()), Err)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `map_batch_streamed` with a plain wait, its results put back in item order.
    fn streamed(items: &[u32], fail_at: Option<u32>) -> Result<Vec<u64>, String> {
        let mut out = vec![None; items.len()];
        map_batch_streamed(
            items,
            |_| 4096,
            |&x| match fail_at {
                Some(f) if x == f => Err(format!("item {x}")),
                _ => Ok(u64::from(x) * 3 + 1),
            },
            |next| next(),
            |start, rows| {
                for (i, r) in rows.into_iter().enumerate() {
                    if out[start + i].replace(r).is_some() {
                        return Err(format!("slot {} twice", start + i));
                    }
                }
                Ok(())
            },
        )?;
        out.into_iter()
            .enumerate()
            .map(|(i, r)| r.ok_or(format!("slot {i} never filled")))
            .collect()
    }

    #[test]
    fn streamed_matches_serial_map_for_every_size_and_thread_count() {
        for threads in [1, 2, 3] {
            set_num_threads(threads);
            for n in [0, 1, 2, 7, 8, 63, 64, 65, 1000, 5003] {
                let items: Vec<u32> = (0..n).map(|i| i * 7 % 1009).collect();
                let want: Vec<u64> = items.iter().map(|&x| u64::from(x) * 3 + 1).collect();
                assert_eq!(streamed(&items, None), Ok(want), "n={n} threads={threads}");
            }
        }
        set_num_threads(0);
    }

    #[test]
    fn streamed_returns_an_error_of_a_failing_item() {
        set_num_threads(2);
        let items: Vec<u32> = (0..3000).collect();
        let err = streamed(&items, Some(1234));
        assert_eq!(err, Err("item 1234".to_string()));
        set_num_threads(0);
    }

    #[test]
    fn streamed_re_raises_a_task_panic_instead_of_waiting_forever() {
        set_num_threads(2);
        let items: Vec<u32> = (0..500).collect();
        let r = std::panic::catch_unwind(|| {
            map_batch_streamed(
                &items,
                |_| 4096,
                |&x| {
                    if x == 300 {
                        panic!("boom")
                    } else {
                        Ok::<_, ()>(x)
                    }
                },
                |next| next(),
                |_, _| Ok(()),
            )
        });
        assert!(r.is_err());
        set_num_threads(0);
    }
}
