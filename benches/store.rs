//! Store latency against its floor, measured in the same run on the same connection.
//!
//! Data: one persona with `BENCH_PREFS` (default 10 000) preferences among 100 personas (the
//! other 99 hold `BENCH_OTHER_PREFS`, default 100, each), 384-dim random unit vectors.
//! For each call it prints p50/p99 of the store method and of its floor: the identical
//! FT.SEARCH command(s) sent raw over the same connection, with the reply left unparsed.
//! Target: store call p50 within 1.3x of the floor.
//!
//! Run with `scripts/bench store` (starts the services) or `cargo bench --bench store` with
//! REDIS_URL set.

mod support;

use std::time::Instant;

use persona_prefs::config::Config;
use persona_prefs::store::query::{knn_command, knn_query, persona_filter, vector_to_bytes};
use persona_prefs::store::record::field;
use persona_prefs::store::{InjectionQuery, PreferenceStore};
use rand::SeedableRng;
use support::{env_or, load_personas, measure, random_unit, raw_injection_floor};

const TARGET_RATIO: f64 = 1.3;

#[tokio::main]
async fn main() {
    let prefs: usize = env_or("BENCH_PREFS", 10_000);
    let other: usize = env_or("BENCH_OTHER_PREFS", 100);
    let iterations: usize = env_or("BENCH_ITERATIONS", 2_000);
    let mut config = Config::defaults();
    config.redis.url =
        std::env::var("REDIS_URL").expect("set REDIS_URL, or run scripts/bench store");
    let name = format!("bench{}", std::process::id());
    config.redis.key_prefix = name.clone();
    config.redis.index_name = format!("idx:{name}");
    let store = PreferenceStore::connect(&config.redis, &config.store)
        .await
        .unwrap();
    store.ensure_index().await.unwrap();

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let loading = Instant::now();
    let total = load_personas(&store, prefs, other, &mut rng).await;
    println!(
        "loaded {total} preferences ({prefs} in the measured persona) in {:.1}s",
        loading.elapsed().as_secs_f64()
    );

    let queries: Vec<Vec<f32>> = (0..64).map(|_| random_unit(&mut rng)).collect();
    let users = vec!["user1".to_string(), "user2".to_string()];
    let mut connection = store.connection();
    let index = config.redis.index_name.clone();

    // find_conflicts vs the same KNN command raw.
    let conflicts = measure(iterations, |i| {
        let store = store.clone();
        let q = queries[i % queries.len()].clone();
        async move {
            store.find_conflicts("p0", &q, None).await.unwrap();
        }
    })
    .await;
    let conflicts_floor = measure(iterations, |i| {
        let q = vector_to_bytes(&queries[i % queries.len()]);
        let cmd = knn_command(
            &index,
            &knn_query(&persona_filter("p0", false), 5),
            &q,
            5,
            &field::ALL_BUT_EMBEDDING,
        );
        let mut connection = connection.clone();
        async move {
            let _: redis::Value = cmd.query_async(&mut connection).await.unwrap();
        }
    })
    .await;

    // get_preferences_for_injection vs the same two-command pipeline raw.
    let injection = measure(iterations, |i| {
        let store = store.clone();
        let q = queries[i % queries.len()].clone();
        let users = users.clone();
        async move {
            let query = InjectionQuery {
                persona_id: "p0",
                query_embedding: &q,
                max_count: 8,
                max_chars: 2000,
                active_user_ids: &users,
            };
            store.get_preferences_for_injection(&query).await.unwrap();
        }
    })
    .await;
    let injection_floor =
        raw_injection_floor(&connection, &index, &queries, &users, iterations).await;

    println!();
    println!(
        "{:<34} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "call", "p50 ms", "p99 ms", "floor p50", "floor p99", "ratio", "target"
    );
    let mut ok = true;
    for (label, measured, floor) in [
        ("find_conflicts", &conflicts, &conflicts_floor),
        (
            "get_preferences_for_injection",
            &injection,
            &injection_floor,
        ),
    ] {
        let ratio = measured.p50 / floor.p50;
        ok &= ratio <= TARGET_RATIO;
        println!(
            "{label:<34} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8.2} {:>8}",
            measured.p50,
            measured.p99,
            floor.p50,
            floor.p99,
            ratio,
            format!("<={TARGET_RATIO}")
        );
    }
    println!(
        "\nresult: {}",
        if ok { "within target" } else { "OVER TARGET" }
    );

    let _: redis::Value = redis::cmd("FT.DROPINDEX")
        .arg(&index)
        .arg("DD")
        .query_async(&mut connection)
        .await
        .unwrap();
}
