//! The rules extractor's time per KiB of text, on chat-like text and on the worst shapes found,
//! up to the size limit of a message (`ingest.max_message_chars`, 8 000): what a hostile or
//! merely odd message costs the worker. Each text is timed beside a floor measured in the same
//! run on the same text: one pass that lowercases it and splits it into sentences and words,
//! the least any reader of the text does.
//!
//! It prints, per family of text: KiB read, the extractor's median and worst µs per KiB, the
//! floor's, and their ratio; then the worst case over everything, with the text's shape. The
//! property tests (tests/properties.rs) hold that nothing panics; this says what it costs.
//! Target: the worst case stays linear (µs per KiB of the 8 000-char texts within 3× of the
//! 500-char ones of the same family), since a superlinear reader would let one message stall
//! a worker.
//!
//! `cargo bench --bench extractor` (no services needed). `BENCH_TEXTS` (default 300) random
//! texts per family.

use std::hint::black_box;
use std::time::{Duration, Instant};

use persona_prefs::extract::rules::RulesExtractor;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MAX_CHARS: usize = 8_000;

const PIECES: &[&str] = &[
    "I love ",
    "I hate ",
    "I can't stand ",
    "honestly, ",
    "not ",
    "but ",
    "and ",
    "is the best",
    "is overrated",
    "tea",
    "jazz",
    "crowds",
    "your ",
    "Sam, ",
    "?",
    "!",
    ". ",
    ", ",
    " than ",
    "right up my alley",
    "I'd rather ",
    "never ",
    "so ",
    "really ",
    "\n",
    "\u{202e}",
    "😀",
    "(",
    ")",
    "\"",
    "…",
    "green tea ",
    "rainy days ",
    "the ",
    "a ",
    "is ",
    "was ",
    "amazing ",
];

/// A text of about `chars` characters in the shape `family` names.
fn text(family: &str, chars: usize, rng: &mut StdRng) -> String {
    let mut out = String::new();
    while out.chars().count() < chars {
        match family {
            "chat" => out.push_str(PIECES[rng.random_range(0..PIECES.len())]),
            "unicode" => out.push(rng.random::<char>()),
            "one long sentence" => {
                out.push_str(["I love ", "tea ", "and ", "jazz ", "but "][rng.random_range(0..5)])
            }
            "nested negations" => out.push_str("not "),
            "clauses" => out.push_str("I love tea, but I hate crowds, and "),
            "comparisons" => out.push_str("tea is better than coffee than jazz than "),
            "one word" => out.push('a'),
            "punctuation" => out.push_str([".", "!", "?", ",", "…", ";"][rng.random_range(0..6)]),
            _ => unreachable!(),
        }
    }
    out.chars().take(chars).collect()
}

/// The floor: lowercase the text, split it into sentences and those into words.
fn floor(text: &str) -> usize {
    text.to_lowercase()
        .split(['.', '!', '?', '\n'])
        .map(|sentence| sentence.split_whitespace().count())
        .sum()
}

fn per_kib(elapsed: Duration, text: &str) -> f64 {
    elapsed.as_secs_f64() * 1e6 / (text.len().max(1) as f64 / 1024.0)
}

fn main() {
    let extractor = RulesExtractor::new(8);
    let texts: usize = std::env::var("BENCH_TEXTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut rng = StdRng::seed_from_u64(7);
    // The rules' patterns compile on first use: not what a message costs a running worker.
    for family in ["chat", "clauses", "unicode"] {
        black_box(extractor.extract_text(&text(family, 2_000, &mut rng)));
    }
    println!(
        "{:<18} {:>6} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "family", "KiB", "p50 µs/K", "max µs/K", "floor p50", "floor max", "max/flr"
    );
    let mut worst: Option<(f64, String, usize)> = None;
    let mut linear = Vec::new();
    for family in [
        "chat",
        "unicode",
        "one long sentence",
        "nested negations",
        "clauses",
        "comparisons",
        "one word",
        "punctuation",
    ] {
        let mut extractor_costs = Vec::new();
        let mut floor_costs = Vec::new();
        let mut by_size: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut kib = 0.0;
        for n in 0..texts {
            // Half short (500 chars), half at the limit, for the linearity check.
            let chars = if n % 2 == 0 { 500 } else { MAX_CHARS };
            let sample = text(family, chars, &mut rng);
            kib += sample.len() as f64 / 1024.0;
            let started = Instant::now();
            black_box(floor(black_box(&sample)));
            let floor_cost = per_kib(started.elapsed(), &sample);
            let started = Instant::now();
            black_box(extractor.extract_text(black_box(&sample)));
            let cost = per_kib(started.elapsed(), &sample);
            by_size[n % 2].push(cost);
            extractor_costs.push(cost);
            floor_costs.push(floor_cost);
            if worst.as_ref().is_none_or(|(w, _, _)| cost > *w) {
                worst = Some((cost, family.to_string(), sample.chars().count()));
            }
        }
        let median = |values: &mut Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let max = |values: &[f64]| values.iter().copied().fold(0.0, f64::max);
        let (p50, worst_here) = (median(&mut extractor_costs), max(&extractor_costs));
        let (floor_p50, floor_max) = (median(&mut floor_costs), max(&floor_costs));
        println!(
            "{family:<18} {kib:>6.0} {p50:>9.1} {worst_here:>9.1} {floor_p50:>9.2} {floor_max:>9.2} {:>7.0}",
            worst_here / floor_p50.max(1e-9)
        );
        let short = median(&mut by_size[0]);
        let long = median(&mut by_size[1]);
        linear.push((family, short, long));
    }
    if let Some((cost, family, chars)) = worst {
        println!(
            "worst case: {cost:.1} µs per KiB ({:.2} ms for the {chars}-char text), a {family:?} text",
            cost * (chars as f64 / 1024.0) / 1000.0
        );
    }
    println!("linearity (median µs per KiB, 8 000 chars against 500; target ≤ 3×):");
    let mut all_linear = true;
    for (family, short, long) in linear {
        let ratio = long / short.max(1e-9);
        all_linear &= ratio <= 3.0;
        println!(
            "  {family:<18} {short:>8.1} → {long:>8.1}  {ratio:>5.2}× {}",
            if ratio <= 3.0 { "ok" } else { "OVER" }
        );
    }
    println!(
        "target (linear in the text's length): {}",
        if all_linear { "met" } else { "NOT met" }
    );
}
