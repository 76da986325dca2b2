//! `speed_probe` with a warm-up: encodes the first half of the texts untimed (one-time builds,
//! per-thread caches), then times the second half, which shares no text with it (as
//! `benches/compare.py` does). Instruction counts of the timed part alone:
//! `valgrind --tool=callgrind --toggle-collect='*warm_probe::timed*' …`.
//! Usage: warm_probe <tokenizer.json> <text file>

use piecework::Tokenizer;
use std::time::Instant;

#[inline(never)]
fn timed(tok: &Tokenizer, texts: &[&str], out: &mut Vec<u32>) -> usize {
    let mut n = 0;
    for t in texts {
        out.clear();
        if tok.encode_ids(t, false, out).is_ok() {
            n += out.len();
        }
    }
    n
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: warm_probe <tokenizer.json> <text>");
        std::process::exit(2);
    }
    let json = std::fs::read_to_string(&args[1]).unwrap_or_default();
    let tok = match Tokenizer::from_json_str(&json) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let text = std::fs::read_to_string(&args[2]).unwrap_or_default();
    // Texts are separated by U+001E when the file has one (documents), else one per line.
    let texts: Vec<&str> = if text.contains('\u{1e}') {
        text.split('\u{1e}').filter(|t| !t.is_empty()).collect()
    } else {
        text.lines().filter(|l| !l.is_empty()).collect()
    };
    let (warm, timed_texts) = texts.split_at(texts.len() / 2);
    let mut out = Vec::new();
    // A long word too, so that what is built on first use for those exists before the timing.
    let long = "ab".repeat(300);
    for t in warm.iter().copied().chain([long.as_str()]) {
        out.clear();
        let _ = tok.encode_ids(t, false, &mut out);
    }
    let bytes: usize = timed_texts.iter().map(|t| t.len()).sum();
    let start = Instant::now();
    let n = timed(&tok, timed_texts, &mut out);
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:.1} MB/s ({bytes} bytes, {n} ids, {secs:.3}s)",
        bytes as f64 / secs / 1e6
    );
}
