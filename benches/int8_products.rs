//! The query-side 8-bit products (`crates/int8`): one query's dense layers, MiniLM-L6's six
//! (each: 384 → 1 152 query/key/value, 384 → 384, 384 → 1 536, 1 536 → 384), on one thread,
//! with every kernel this CPU has, alternated call by call. Beside them the floor: reading the
//! same weight bytes once (a plain sum over them), which no kernel can beat, since every
//! product reads every weight.
//!
//! Rows are tokens: 6 is one thread's half of a 12-token query (the pass splits a query's
//! tokens between two threads), 12 a whole one, 24 a long one.
//!
//! `cargo bench --bench int8_products` (no services needed). `BENCH_ROUNDS` (default 200)
//! calls of each kernel per row count.

use std::hint::black_box;
use std::time::Instant;

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

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    // Distinct weights for every layer, as the model's: 10.5 MB in all, more than a core's
    // caches, so each call reads them from the shared cache or memory as a query does.
    let products: Vec<Product> = (0..LAYERS)
        .flat_map(|layer| LAYER.iter().enumerate().map(move |(p, &shape)| (layer, p, shape)))
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
    let weight_bytes: usize = products
        .iter()
        .map(|p| p.weights.rows() * p.inputs)
        .sum();
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
}
