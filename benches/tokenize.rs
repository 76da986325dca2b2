//! Criterion benches of the Rust core: each model family on real tokenizer files, stage by stage
//! (load, full `Encoding`, ids only, batch of ids), SentencePiece `.model` files through
//! `SentencePiece::encode_ids`, and a worst-case group (1 MB of one repeated
//! character, 1 MB of random a–z, 1 MB of prose without its whitespace) against 1 MB of prose.
//!
//! Files come from `../shared/data` beside the checkout (or one level further up, for worktrees;
//! `PIECEWORK_DATA` overrides). A missing file skips its bench with a note, it does not fail.
//!
//!     cargo bench --bench tokenize                 # everything
//!     cargo bench --bench tokenize -- worst        # a filter, as usual with criterion

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use piecework::sentencepiece::SentencePiece;
use piecework::tokenizer::InputSequence;
use piecework::Tokenizer;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// (bench name, family, path under the data dir) of each tokenizer.json benched.
const MODELS: &[(&str, &str, &str)] = &[
    (
        "bert-base-uncased",
        "wordpiece",
        "bert-base-uncased/tokenizer.json",
    ),
    ("t5-small", "unigram", "t5-small/tokenizer.json"),
    ("gpt2", "bpe-bytelevel", "gpt2/tokenizer.json"),
    // The pristine Llama 2 tokenizer.json is not in the data set (llama2/ holds a broken one);
    // codellama's has the same SentencePiece-style BPE layout.
    (
        "llama2-codellama",
        "bpe-sentencepiece",
        "codellama/tokenizer.json",
    ),
];

/// (bench name, family, path under the data dir) of each SentencePiece `.model` benched.
const SP_MODELS: &[(&str, &str, &str)] = &[
    (
        "xlnet-base-cased",
        "sp-unigram",
        "xlnet-base-cased/spiece.model",
    ),
    ("llama2", "sp-bpe", "llama2/tokenizer.model"),
    (
        "mistral-7b-v0.3",
        "sp-bpe",
        "mistral-7b-v0.3/tokenizer.model.v3",
    ),
];

const MB: usize = 1 << 20;

fn data_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("PIECEWORK_DATA") {
        return Some(PathBuf::from(d));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [root.join("../shared/data"), root.join("../../shared/data")]
        .into_iter()
        .find(|p| p.is_dir())
}

fn read(rel: &str) -> Option<String> {
    let Some(dir) = data_dir() else {
        eprintln!("note: no shared/data directory; skipping benches that need {rel}");
        return None;
    };
    match std::fs::read_to_string(dir.join(rel)) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("note: {rel} not readable ({e}); skipping its benches");
            None
        }
    }
}

fn load_sp(rel: &str) -> Option<SentencePiece> {
    let dir = data_dir()?;
    let bytes = match std::fs::read(dir.join(rel)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("note: {rel} not readable ({e}); skipping its benches");
            return None;
        }
    };
    match SentencePiece::from_model_bytes(&bytes) {
        Ok(sp) => Some(sp),
        Err(e) => {
            eprintln!("note: {rel} does not load ({e}); skipping its benches");
            None
        }
    }
}

fn load(rel: &str) -> Option<Tokenizer> {
    let json = read(rel)?;
    match Tokenizer::from_json_str(&json) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("note: {rel} does not load yet ({e}); skipping its benches");
            None
        }
    }
}

/// The first `n` bytes of `s`, cut back to a char boundary.
fn prefix(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// 1 MB of English prose (big.txt, then sherlock.txt, repeated if short).
fn prose() -> Option<String> {
    let mut s = read("corpora/big.txt").or_else(|| read("corpora/sherlock.txt"))?;
    if s.is_empty() {
        return None;
    }
    while s.len() < MB {
        let again = s.clone();
        s.push_str(&again);
    }
    Some(prefix(&s, MB).to_string())
}

/// 1 MB of prose with its whitespace taken out: a text without spaces that is not random,
/// whose words (the runs between punctuation) are long and rarely repeat, so each is merged.
fn prose_without_whitespace() -> Option<String> {
    let s: String = read("corpora/big.txt")?.split_whitespace().collect();
    (s.len() >= MB).then(|| prefix(&s, MB).to_string())
}

/// 1 MB of a–z without spaces from a fixed xorshift stream: one endless "word" with no
/// vocabulary structure, the input that makes a quadratic model step show.
fn random_letters(n: usize) -> String {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

fn bench_models(c: &mut Criterion) {
    let Some(text) = prose() else { return };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let doc = prefix(&text, 100_000);
    for &(name, family, rel) in MODELS {
        let mut g = c.benchmark_group(format!("{family}/{name}"));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        let Some(tok) = load(rel) else {
            g.finish();
            continue;
        };
        if let Some(json) = read(rel) {
            g.throughput(Throughput::Bytes(json.len() as u64));
            g.bench_function("load", |b| {
                b.iter(|| Tokenizer::from_json_str(black_box(&json)).ok())
            });
        }
        // Stage 1: the full Encoding (tokens, offsets, masks) of a 100 KB document.
        g.throughput(Throughput::Bytes(doc.len() as u64));
        g.bench_function("encode/doc-100KB", |b| {
            b.iter(|| {
                tok.encode(InputSequence::Raw(black_box(doc)), None, false)
                    .ok()
            })
        });
        // Stage 2: ids only, the path without per-token strings.
        let mut out = Vec::with_capacity(doc.len());
        g.bench_function("encode_ids/doc-100KB", |b| {
            b.iter(|| {
                out.clear();
                tok.encode_ids(black_box(doc), false, &mut out).ok();
                out.len()
            })
        });
        // Stage 3: one line at a time (the per-text overhead shows here).
        let some: Vec<&str> = lines.iter().copied().take(2000).collect();
        let bytes: usize = some.iter().map(|l| l.len()).sum();
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function("encode_ids/lines", |b| {
            b.iter(|| {
                let mut n = 0;
                for l in &some {
                    out.clear();
                    tok.encode_ids(black_box(l), false, &mut out).ok();
                    n += out.len();
                }
                n
            })
        });
        // Stage 4: the same lines as one batch across the thread pool.
        g.bench_function("encode_batch_ids/lines", |b| {
            b.iter(|| tok.encode_batch_ids(black_box(&some), false).ok())
        });
        g.finish();
    }
}

fn bench_sentencepiece(c: &mut Criterion) {
    let Some(text) = prose() else { return };
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(2000)
        .collect();
    let doc = prefix(&text, 100_000);
    for &(name, family, rel) in SP_MODELS {
        let Some(sp) = load_sp(rel) else { continue };
        let mut g = c.benchmark_group(format!("{family}/{name}"));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        let mut out = Vec::with_capacity(doc.len());
        g.throughput(Throughput::Bytes(doc.len() as u64));
        g.bench_function("encode_ids/doc-100KB", |b| {
            b.iter(|| {
                out.clear();
                sp.encode_ids(black_box(doc), &mut out).ok();
                out.len()
            })
        });
        let bytes: usize = lines.iter().map(|l| l.len()).sum();
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function("encode_ids/lines", |b| {
            b.iter(|| {
                let mut n = 0;
                for l in &lines {
                    out.clear();
                    sp.encode_ids(black_box(l), &mut out).ok();
                    n += out.len();
                }
                n
            })
        });
        g.finish();
    }
}

/// Time one run first; criterion's 10 samples only when a run is short, so that a quadratic
/// case prints its one-shot time instead of stalling the whole bench.
fn worst_case_one(
    c: &mut Criterion,
    group: &str,
    name: &str,
    input: &str,
    f: &dyn Fn(&str) -> usize,
) {
    let t0 = Instant::now();
    let n = f(input);
    let once = t0.elapsed();
    eprintln!(
        "worst-case {group}/{name}: one run {:.3} s, {n} ids, {:.2} MB/s",
        once.as_secs_f64(),
        input.len() as f64 / once.as_secs_f64() / 1e6
    );
    if once > Duration::from_secs(2) {
        eprintln!("note: {group}/{name} takes over 2 s per run; criterion samples skipped");
        return;
    }
    let mut g = c.benchmark_group(format!("worst-case/{group}"));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(input.len() as u64));
    g.bench_with_input(BenchmarkId::from_parameter(name), input, |b, i| {
        b.iter(|| f(black_box(i)))
    });
    g.finish();
}

fn bench_worst_case(c: &mut Criterion) {
    let repeated = "a".repeat(MB);
    let random = random_letters(MB);
    let prose = prose();
    let mut inputs: Vec<(&str, &str)> =
        vec![("1MB-one-char", &repeated), ("1MB-random-a-z", &random)];
    let squeezed = prose_without_whitespace();
    if let Some(p) = prose.as_deref() {
        inputs.push(("1MB-prose", p));
    }
    if let Some(s) = squeezed.as_deref() {
        inputs.push(("1MB-prose-no-whitespace", s));
    }
    for &(name, _, rel) in MODELS {
        let Some(tok) = load(rel) else { continue };
        let f = |s: &str| {
            let mut out = Vec::new();
            tok.encode_ids(s, false, &mut out).ok();
            out.len()
        };
        for &(iname, input) in &inputs {
            worst_case_one(c, name, iname, input, &f);
        }
    }
    for &(name, _, rel) in SP_MODELS {
        let Some(sp) = load_sp(rel) else { continue };
        let f = |s: &str| {
            let mut out = Vec::new();
            sp.encode_ids(s, &mut out).ok();
            out.len()
        };
        for &(iname, input) in &inputs {
            worst_case_one(c, &format!("{name}.model"), iname, input, &f);
        }
    }
}

criterion_group!(benches, bench_models, bench_sentencepiece, bench_worst_case);
criterion_main!(benches);
