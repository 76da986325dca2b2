//! Load time of a SentencePiece `.model`: read the file, build, and encode one short text
//! (lazy builds included), `repeats` times in one process, through the Tokenizer front end
//! (`encode`, whose ids are made at once) or the processor's ids path.
//! Usage: load_probe <file.model> [tok|ids] [repeats] [text]

use piecework::sentencepiece::SentencePiece;
use piecework::Tokenizer;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: load_probe <file.model> [tok|ids] [repeats] [text]");
        std::process::exit(2);
    };
    let mode = args.get(2).map_or("tok", String::as_str);
    let repeats: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(1);
    let text = args.get(4).map_or("Hello world", String::as_str);
    let mut times = Vec::new();
    for _ in 0..repeats {
        let t0 = Instant::now();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        };
        let n = if mode == "ids" {
            let sp = SentencePiece::from_model_bytes(&bytes);
            let mut ids = Vec::new();
            sp.and_then(|sp| sp.encode_ids(text, &mut ids))
                .map(|()| ids.len())
        } else {
            Tokenizer::from_sentencepiece(&bytes)
                .and_then(|t| t.encode_ids_lazy(text, false))
                .map(|(ids, _)| ids.len())
        };
        match n {
            Ok(n) => std::hint::black_box(n),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "{mode}: median {:.2} ms, first {:.2} ms, min {:.2} ms ({} loads)",
        sorted[sorted.len() / 2],
        times[0],
        sorted[0],
        times.len()
    );
}
