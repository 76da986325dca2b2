//! Single-thread throughput of `Tokenizer::encode_ids` over a text file, line by line or whole.
//! Usage: speed_probe <tokenizer.json|.model|.tiktoken> <text file> [lines|doc|whole|nul] [repeats]
//! (`nul`: the file holds texts separated by NUL bytes, e.g. a benchmark's exact texts)
//! (a `.tiktoken` file is run with cl100k_base's split pattern, or `PROBE_PATTERN`'s, and no
//! special tokens; a `.json` file whose name has `tekken` in it is read as a tekken file).

use piecework::Tokenizer;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: speed_probe <tokenizer> <text> [lines|doc|whole|nul] [repeats]");
        std::process::exit(2);
    }
    let bytes = std::fs::read(&args[1]).unwrap_or_default();
    let load = Instant::now();
    let tok = if args[1].ends_with(".json") && args[1].contains("tekken") {
        Tokenizer::from_tekken(&bytes)
    } else if args[1].ends_with(".json") {
        Tokenizer::from_json_str(&String::from_utf8_lossy(&bytes))
    } else if args[1].ends_with(".tiktoken") {
        let cl100k = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
        let pattern = std::env::var("PROBE_PATTERN").unwrap_or_else(|_| cl100k.to_string());
        Tokenizer::from_tiktoken(&bytes, &pattern, &[])
    } else {
        Tokenizer::from_sentencepiece(&bytes)
    };
    let tok = match tok {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    eprintln!("loaded in {:.3}s", load.elapsed().as_secs_f64());
    let text = std::fs::read_to_string(&args[2]).unwrap_or_default();
    let texts: Vec<&str> = match args.get(3).map(String::as_str) {
        Some("whole") => vec![text.as_str()],
        Some("nul") => text.split('\0').collect(),
        Some("doc") => text
            .as_bytes()
            .chunks(100_000)
            .map(|c| std::str::from_utf8(c).unwrap_or(""))
            .filter(|s| !s.is_empty())
            .collect(),
        _ => text.lines().collect(),
    };
    // With PROBE_WARM=<file>, that file's lines are encoded first (untimed): the word caches
    // then hold what earlier texts left, as in a benchmark where no text is seen twice.
    if let Some(warm) = std::env::var_os("PROBE_WARM") {
        let warm = std::fs::read_to_string(warm).unwrap_or_default();
        let mut ids = Vec::new();
        for t in warm.split(['\n', '\0']) {
            ids.clear();
            let _ = tok.encode_ids(t, false, &mut ids);
        }
    }
    let repeats: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(3);
    let total: usize = texts.iter().map(|t| t.len()).sum::<usize>() * repeats;
    let mut out = Vec::new();
    let mut n = 0usize;
    // With PROBE_IDS set, a hash of every id (to compare builds).
    let hash_ids = std::env::var_os("PROBE_IDS").is_some();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let start = Instant::now();
    for _ in 0..repeats {
        for t in &texts {
            out.clear();
            if tok.encode_ids(t, false, &mut out).is_ok() {
                n += out.len();
            }
            if hash_ids {
                for &id in out.iter().chain([&u32::MAX]) {
                    h = (h ^ u64::from(id)).wrapping_mul(0x100_0000_01b3);
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if hash_ids {
        println!("ids hash {h:016x}");
    }
    println!(
        "{:.1} MB/s ({total} bytes, {n} ids, {:.3}s)",
        total as f64 / secs / 1e6,
        secs
    );
}
