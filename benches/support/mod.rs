//! Measurement helpers shared by the benches.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use rand::Rng;

pub const DIMS: usize = 384;

pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

/// Runs `make(i)` sequentially `iterations` times after a 10% warm-up; percentiles in ms.
pub async fn measure<F, Fut>(iterations: usize, make: F) -> Percentiles
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for i in 0..(iterations / 10).max(1) {
        make(i).await;
    }
    let mut samples: Vec<Duration> = Vec::with_capacity(iterations);
    for i in 0..iterations.max(1) {
        let started = Instant::now();
        make(i).await;
        samples.push(started.elapsed());
    }
    samples.sort();
    let at = |q: f64| {
        samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)].as_secs_f64() * 1000.0
    };
    Percentiles {
        p50: at(0.50),
        p99: at(0.99),
    }
}

pub fn random_unit(rng: &mut impl Rng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIMS).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
