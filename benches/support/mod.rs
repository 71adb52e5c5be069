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

/// The data set the store and inject benches share: persona `p0` with `prefs` preferences
/// among 99 personas of `other` each, random unit topic vectors and strengths, every tenth
/// preference about a user. Returns how many were loaded once the index holds them all (the
/// HNSW graph is built in the background; timing before that measures indexing too).
pub async fn load_personas(
    store: &persona_prefs::store::PreferenceStore,
    prefs: usize,
    other: usize,
    rng: &mut impl Rng,
) -> usize {
    use futures::StreamExt;
    use persona_prefs::store::{NewPreference, Provenance, Stance};
    let mut jobs = Vec::new();
    for persona in 0..100 {
        for i in 0..(if persona == 0 { prefs } else { other }) {
            jobs.push(NewPreference {
                persona_id: format!("p{persona}"),
                name: "bench topic".into(),
                opinion: "I hold a benchmark opinion about something or other.".into(),
                category: "intellectual".into(),
                stance: Some(Stance::For),
                stance_at: None,
                strength: Some(rng.random_range(0.1..1.0)),
                provenance: Provenance::default(),
                related_user_ids: if i % 10 == 0 {
                    vec![format!("user{}", i % 50)]
                } else {
                    Vec::new()
                },
                related_kg_uuids: Vec::new(),
                embedding: random_unit(rng),
            });
        }
    }
    let total = jobs.len();
    let mut adds = futures::stream::iter(jobs.into_iter().map(|new| {
        let store = store.clone();
        async move { store.add_preference(new).await.unwrap() }
    }))
    .buffer_unordered(64);
    while adds.next().await.is_some() {}
    for _ in 0..600 {
        if store.index_info().await.unwrap().unwrap().num_docs as usize >= total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    total
}

/// The floor both benches compare injection with: its two KNN queries, built by the store's
/// own `injection_pipeline`, sent raw over the same connection.
pub async fn raw_injection_floor(
    connection: &redis::aio::ConnectionManager,
    index: &str,
    queries: &[Vec<f32>],
    users: &[String],
    iterations: usize,
) -> Percentiles {
    use persona_prefs::store::query::{injection_pipeline, vector_to_bytes};
    measure(iterations, |i| {
        let pipe = injection_pipeline(
            index,
            "p0",
            &vector_to_bytes(&queries[i % queries.len()]),
            16,
            users,
        );
        let mut connection = connection.clone();
        async move {
            let _: Vec<redis::Value> = pipe.query_async(&mut connection).await.unwrap();
        }
    })
    .await
}
