//! The query-side 8-bit products (`crates/int8`): one query's dense layers, MiniLM-L6's six
//! (each: 384 → 1 152 query/key/value, 384 → 384, 384 → 1 536, 1 536 → 384), on one thread,
//! with every kernel this CPU has, alternated call by call. Beside them the floor: reading the
//! same weight bytes once (a plain sum over them), which no kernel can beat, since every
//! product reads every weight.
//!
//! Rows are tokens: 6 is one thread's half of a 12-token query (the pass splits a query's
//! tokens between two threads), 12 a whole one, 24 a long one.
//!
//! Then quantising the products' inputs, which the pass does before every product (the rest
//! of its time outside the products is attention, layer norms and activations).
//!
//! Then the whole 8-bit query pass (the local model, both threads, as injection embeds a new
//! text) with each kernel, a new short text every call, alternated, beside the products
//! alone: what a prompt builder sending text waits for the model; then the process's CPU a new
//! text per kernel, what capacity is planned from.
//!
//! `cargo bench --bench int8_products` (no services; the model from `PERSONA_PREFS_MODEL_DIR`
//! or `embed.model_dir`). `BENCH_ROUNDS` (default 200) calls of each kernel per row count and
//! rounds over the texts.

mod support;

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use persona_prefs::config::Config;
use persona_prefs::embed::Embedder;
use persona_prefs::embed::local::{LocalEmbedder, LocalOptions};
use persona_prefs_int8::{Kernel, QuantisedInputs, QuantisedWeights, product_with};

/// (inputs, outputs) of one layer's products, MiniLM-L6's shapes.
const LAYER: [(usize, usize); 4] = [(384, 1152), (384, 384), (384, 1536), (1536, 384)];
const LAYERS: usize = 6;

fn pseudo_random(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

struct Product {
    weights: QuantisedWeights,
    bias: Vec<f32>,
    inputs: usize,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    // Distinct weights for every layer, as the model's: 10.5 MB in all, more than a core's
    // caches, so each call reads them from the shared cache or memory as a query does.
    let products: Vec<Product> = (0..LAYERS)
        .flat_map(|layer| {
            LAYER
                .iter()
                .enumerate()
                .map(move |(p, &shape)| (layer, p, shape))
        })
        .map(|(layer, p, (inputs, outputs))| Product {
            weights: QuantisedWeights::quantise(
                &pseudo_random(inputs * outputs, (layer * 8 + p) as u64 + 1),
                outputs,
                inputs,
            ),
            bias: vec![0.0; outputs],
            inputs,
        })
        .collect();
    let weight_bytes: usize = products.iter().map(|p| p.weights.rows() * p.inputs).sum();
    // The portable kernel, ten times slower, is what the tests hold the others to, not a
    // contender.
    let kernels: Vec<Kernel> = Kernel::available()
        .into_iter()
        .filter(|&kernel| kernel != Kernel::Portable)
        .collect();
    println!(
        "one query's six layers of 8-bit products ({:.1} MB of weights), one thread, p50 of {rounds} calls each, alternated; kernels here: {kernels:?}",
        weight_bytes as f64 / 1e6
    );
    println!(
        "{:>5} {:>12} {:>10} {:>12} {:>10}",
        "rows", "kernel", "p50 (ms)", "floor (ms)", "x floor"
    );
    for rows in [6, 12, 24] {
        let inputs: Vec<QuantisedInputs> = products
            .iter()
            .enumerate()
            .map(|(p, product)| {
                QuantisedInputs::quantise(
                    &pseudo_random(rows * product.inputs, 1000 + p as u64),
                    rows,
                    product.inputs,
                )
            })
            .collect();
        let mut outputs: Vec<Vec<f32>> = products
            .iter()
            .map(|p| vec![0f32; rows * p.weights.rows()])
            .collect();
        let mut times = vec![Vec::with_capacity(rounds); kernels.len()];
        let mut floor = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            for (k, &kernel) in kernels.iter().enumerate() {
                let started = Instant::now();
                for ((product, input), output) in products.iter().zip(&inputs).zip(&mut outputs) {
                    product_with(kernel, input, &product.weights, &product.bias, output);
                }
                black_box(&outputs);
                times[k].push(started.elapsed().as_secs_f64() * 1e3);
            }
            let started = Instant::now();
            // XOR of the bytes 64 at a time: one load and one instruction a register, so this
            // reads at the cores' bandwidth.
            let mut folded = [0u8; 64];
            for product in &products {
                for j in 0..product.weights.rows() {
                    for chunk in product.weights.row(j).chunks_exact(64) {
                        for (f, &q) in folded.iter_mut().zip(chunk) {
                            *f ^= q as u8;
                        }
                    }
                }
            }
            black_box(folded);
            floor.push(started.elapsed().as_secs_f64() * 1e3);
        }
        let floor = median(floor);
        for (kernel, times) in kernels.iter().zip(times) {
            let p50 = median(times);
            println!(
                "{rows:>5} {:>12} {p50:>10.3} {floor:>12.3} {:>10.2}",
                format!("{kernel:?}"),
                p50 / floor
            );
        }
    }
    quantising_inputs(&products, rounds);
    whole_pass(&kernels, rounds / 4).await;
}

/// Quantising each product's inputs, as the pass does before every product (a query's rows
/// at 6, 12 and 24 rows), per value: what the pass spends outside the products on this step,
/// to read beside the products' times above.
fn quantising_inputs(products: &[Product], rounds: usize) {
    println!(
        "quantising one query's inputs for its six layers' products, one thread, p50 of {rounds}:"
    );
    for rows in [6, 12, 24] {
        let floats: Vec<Vec<f32>> = products
            .iter()
            .enumerate()
            .map(|(p, product)| pseudo_random(rows * product.inputs, 3000 + p as u64))
            .collect();
        let mut buffers: Vec<QuantisedInputs> = products
            .iter()
            .map(|product| QuantisedInputs::empty(product.inputs))
            .collect();
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let started = Instant::now();
            for (buffer, floats) in buffers.iter_mut().zip(&floats) {
                buffer.requantise(floats, rows);
            }
            black_box(&buffers);
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        let values: usize = floats.iter().map(Vec::len).sum();
        let p50 = median(times);
        println!(
            "  {rows:>3} rows: {p50:.3} ms ({:.2} ns a value, {values} values)",
            p50 * 1e6 / values as f64
        );
    }
}

/// The local model's 8-bit pass on one new short text a call, with each kernel, alternated.
async fn whole_pass(kernels: &[Kernel], rounds: usize) {
    let model_dir = std::env::var("PERSONA_PREFS_MODEL_DIR")
        .unwrap_or_else(|_| Config::defaults().embed.model_dir);
    let models: Vec<LocalEmbedder> = kernels
        .iter()
        .map(|&kernel| {
            LocalEmbedder::load_with(
                Path::new(&model_dir),
                2000,
                LocalOptions {
                    int8_kernel: Some(kernel),
                    ..LocalOptions::default()
                },
            )
            .expect("the local model (run scripts/services fetch)")
            .for_queries()
        })
        .collect();
    let texts: Vec<String> = std::fs::read_to_string("tests/data/opinion_pairs.jsonl")
        .expect("tests/data/opinion_pairs.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|pair| pair["b"].as_str().map(str::to_string))
        .take(50)
        .collect();
    for model in &models {
        model.embed(&texts[..1]).await.unwrap();
    }
    let mut times = vec![Vec::new(); models.len()];
    for round in 0..rounds.max(1) {
        for text in &texts {
            for (model, times) in models.iter().zip(&mut times) {
                // A new text every call, as a prompt builder's message is (a repeated one
                // would be the service's cache's, not the model's).
                let text = format!("{text} ({round})");
                let started = Instant::now();
                black_box(model.embed(&[text]).await.unwrap());
                times.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    println!(
        "the whole 8-bit query pass, one new short text a call ({} texts × {} rounds, 4-14 words), both threads, alternated:",
        texts.len(),
        rounds.max(1)
    );
    let baseline = median(times.last().unwrap().clone());
    for (kernel, times) in kernels.iter().zip(times) {
        let p50 = median(times);
        println!(
            "  {:>6}: p50 {p50:.3} ms ({:.2} x {:?}'s)",
            format!("{kernel:?}"),
            p50 / baseline,
            kernels.last().unwrap()
        );
    }
    // What capacity is planned from: the process's CPU a new text, the pool's second thread
    // (and its waiting) included, over a block of texts in a row per kernel, blocks alternated.
    let mut cpu = vec![(0.0f64, 0usize); models.len()];
    for block in 0..4 {
        for (model, cpu) in models.iter().zip(&mut cpu) {
            let before = support::cpu_seconds(std::process::id());
            for (n, text) in texts.iter().cycle().take(500).enumerate() {
                // A suffix as short as the latency rounds' above: tokens are the cost.
                let text = format!("{text} ({})", block * 500 + n);
                black_box(model.embed(&[text]).await.unwrap());
            }
            cpu.0 += support::cpu_seconds(std::process::id()) - before;
            cpu.1 += 500;
        }
    }
    println!("the process's CPU a new text (4 blocks of 500 per kernel, alternated):");
    let baseline = cpu
        .last()
        .map_or(1.0, |(seconds, texts)| seconds / *texts as f64);
    for (kernel, (seconds, texts)) in kernels.iter().zip(cpu) {
        let per_text = seconds / texts as f64;
        println!(
            "  {:>6}: {:.2} ms CPU a text ({:.2} x {:?}'s)",
            format!("{kernel:?}"),
            per_text * 1e3,
            per_text / baseline,
            kernels.last().unwrap()
        );
    }
}
