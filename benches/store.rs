//! Store hot paths against the original system's plan and against the new floor, measured in
//! the same run on the same Redis.
//!
//! Data: persona `p0` with `BENCH_PREFS` (default 10 000) preferences among `BENCH_PERSONAS`
//! (default 100) personas (the others hold `BENCH_OTHER_PREFS`, default 1 000, each: 109 000
//! in all), 384-dim random unit vectors, every tenth preference about one of 50 users (the
//! injection asks for two of them, so its user pass scores theirs). The 1 M scale
//! point: `BENCH_PERSONAS=1000 BENCH_PREFS=1000 BENCH_ORIGINAL=0 BENCH_MEMORY=1`. The same data is loaded twice: through the
//! store (this layout: per-persona vector sets) and in the original system's layout (one
//! shared RediSearch HNSW index filtered by a persona TAG).
//!
//! For each path it prints p50/p99 of:
//! - the store call (`nearest_topics`, ingest's find_conflicts; injection with two users);
//! - the original system's plan on its own layout, on a Redis server of its own (as it would
//!   run; `PERSONA_PREFS_REDIS_SERVER` and `PERSONA_PREFS_REDISEARCH_MODULE`, which
//!   `scripts/bench` sets, name the binaries), sent by the same client (injection: one KNN,
//!   then one query per user, each awaited);
//! - the new floor: one raw VSIM over the persona's vector set, reply unparsed; for injection
//!   also the floor pricing the user pass (that VSIM and one over each present user's own
//!   vector set, pipelined: `raw_vsim_with_users_call`), as the inject bench prints it;
//! - for injection, the store's own pipeline (`query::plain_injection_pipeline`, the searches
//!   and plain commands; or `injection_pipeline`, with the script, where the store needs it)
//!   sent as it is, its replies not decoded: what lies between it and the users' floor is
//!   Redis's share of the gap, what lies between the store call and it is the service's
//!   (building the pipeline, decoding the records it may choose, choosing);
//! - for injection again, the store call and the floor pricing the user pass with queries near
//!   the persona's views (each the mean of eight of them): the random queries' nearest views
//!   lie below `store.min_semantic_relevance`, and are left undecoded; these queries' are not.
//!
//! They run call by call in turn, each call with its own query (`measure_interleaved`).
//!
//! Then injection with three residents (the strongest by decayed strength, which the script
//! walks down the strongest set for), alternated with the same injection without them: once
//! with the data as loaded (voiced just now: the walk reads little more than it keeps) and once
//! with a half-life so short that every view has faded (the walk's worst case: it reads
//! `RESIDENT_WALK_LIMIT` entries). No target: the figures say what exact residents cost.
//!
//! Targets: store calls p50 ≤ 1.3 × the new floor and p99 ≤ 2 × their own p50. The ratio to
//! the original plan is reported, not targeted (it lies beneath the floor on this machine). `BENCH_MEMORY=1` also prints used memory per preference of this layout
//! beside the raw bytes of a vector plus its fields (run it on an otherwise empty Redis).
//!
//! `scripts/bench store` (starts the services) or `cargo bench --bench store` with REDIS_URL
//! (or REDIS_CLUSTER_NODES) set.

mod support;

use std::time::Instant;

use persona_prefs::config::Config;
use persona_prefs::store::{InjectionQuery, PreferenceStore};
use rand::{Rng, SeedableRng};
use support::{
    Call, OriginalServer, Percentiles, bench_data, env_or, load_original_layout, load_personas,
    measure_interleaved, measure_pair, original_find_conflicts, original_injection_plan,
    query_pool_size, random_unit, raw_vsim_call, raw_vsim_with_users_call,
};

const TARGET_FLOOR_RATIO: f64 = 1.3;
/// The views each measured injection asks for.
const INJECTION_MAX_COUNT: usize = 8;
/// How many of the persona's views a query "near its views" is the mean of.
const NEAR_VIEWS: usize = 8;
/// p99 at most this many times p50.
const TARGET_TAIL: f64 = 2.0;

#[tokio::main]
async fn main() {
    let personas: usize = env_or("BENCH_PERSONAS", 100);
    let prefs: usize = env_or("BENCH_PREFS", 10_000);
    let other: usize = env_or("BENCH_OTHER_PREFS", 1_000);
    let iterations: usize = env_or("BENCH_ITERATIONS", 2_000);
    let config = Config::load(None).expect("config (set REDIS_URL, or run scripts/bench store)");
    let mut config = config;
    let name = format!("bench{}", std::process::id());
    config.redis.key_prefix = name.clone();
    config.redis.index_name = format!("idx:{name}");
    // Loading pipelines thousands of writes while the indexes build: a busy server can take
    // longer than the service's 5 s to answer one, which is not what is measured here.
    config.redis.response_timeout_ms = 60_000;
    let store = PreferenceStore::connect(&config.redis, &config.store)
        .await
        .unwrap();
    store.ensure_index().await.unwrap();
    let cluster = !config.redis.cluster_nodes.is_empty();
    // The original layout has one shared index: only on a single node, and optional (its
    // HNSW graph over everything takes a while to build at scale).
    let original = !cluster && env_or("BENCH_ORIGINAL", 1) == 1;

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let data = bench_data(personas, prefs, other, &mut rng);
    let memory_before = used_memory(&store).await;
    support::reset_command_times(&store).await;
    let redis_cpu_before = support::redis_cpu_seconds(&store).await;
    let loading = Instant::now();
    let total = load_personas(&store, &data).await;
    println!(
        "loaded {total} preferences ({prefs} in the measured persona) in {:.1}s{}",
        loading.elapsed().as_secs_f64(),
        if cluster { " on the cluster" } else { "" }
    );
    // What a new preference costs Redis, as ingest writes one (the same script): the
    // capacity of a shard's one main thread for new topics (docs/CAPACITY.md).
    let redis_cpu = support::redis_cpu_seconds(&store).await - redis_cpu_before;
    let load_times = support::command_times(&store).await;
    let per_preference = |usec: u64| usec as f64 / total.max(1) as f64;
    println!(
        "  Redis per new preference: {:.1} µs of CPU; inside commands (INFO commandstats, a \
         script's time including what it calls): {}; VADD's build EF {}",
        redis_cpu * 1e6 / total.max(1) as f64,
        load_times
            .iter()
            .take(5)
            .map(|(name, calls, usec)| format!(
                "{name} {:.1} µs ({:.2} calls)",
                per_preference(*usec),
                *calls as f64 / total.max(1) as f64
            ))
            .collect::<Vec<_>>()
            .join(", "),
        config.store.vector_build_ef
    );
    let memory_after = used_memory(&store).await;
    let connection = store.connection();
    let original_index = format!("idx:{name}_original");
    let original_prefix = format!("{name}_original");
    // The original layout gets a Redis server of its own, as the original system would run:
    // sharing ours, its HNSW index's background work and module lock stalled both layouts'
    // paths (its plan measured 4.0 ms p50 beside ours, 1.2 ms on its own server).
    let original_server = if original {
        OriginalServer::start(&config).await
    } else {
        None
    };
    let mut original_connection = match &original_server {
        Some(server) => server.connection.clone(),
        None => connection.clone(),
    };
    if original {
        if original_server.is_none() {
            println!(
                "(the original layout shares our Redis: PERSONA_PREFS_REDIS_SERVER and \
                 PERSONA_PREFS_REDISEARCH_MODULE name a server to give it its own)"
            );
        }
        let loading = Instant::now();
        load_original_layout(
            &mut original_connection,
            &original_prefix,
            &original_index,
            &data,
        )
        .await;
        println!(
            "loaded the same data in the original layout in {:.1}s",
            loading.elapsed().as_secs_f64()
        );
    }

    // Up to 5 paths run call by call: a pool every one of them meets whole.
    let queries: Vec<Vec<f32>> = (0..query_pool_size(64, 7))
        .map(|_| random_unit(&mut rng))
        .collect();
    // Queries about what the persona holds views on: each the mean of NEAR_VIEWS of `p0`'s own
    // views (a cosine of about 0.35 with each), so the semantic pass finds that many views
    // above `min_semantic_relevance` to decode and rank. A random query's nearest views lie
    // under a cosine of 0.2 among random vectors, all refused undecoded.
    let own_views: Vec<&Vec<f32>> = data
        .iter()
        .filter(|preference| preference.persona == "p0")
        .map(|preference| &preference.embedding)
        .collect();
    let near_queries: Vec<Vec<f32>> = (0..queries.len())
        .map(|_| {
            let mut sum = vec![0.0f32; own_views[0].len()];
            for _ in 0..NEAR_VIEWS {
                let view = own_views[rng.random_range(0..own_views.len())];
                sum.iter_mut().zip(view).for_each(|(s, v)| *s += v);
            }
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
            sum.into_iter().map(|x| x / norm).collect()
        })
        .collect();
    let users = vec!["user1".to_string(), "user2".to_string()];
    let keys = store.keys().clone();
    let search_ef = config.store.vector_search_ef;
    // Injection's floors send its own semantic search, which leaves out the hits too far to
    // inject (`query::semantic_vsim_command_for_bytes`); find_conflicts' floor asks for all.
    let min_relevance = config.store.min_semantic_relevance;
    // The neighbours the store call asks for (`inject`'s views, twice over, as the store
    // reads them), which the floors search for too.
    let injection_top_k = (INJECTION_MAX_COUNT * 2).min(config.store.max_top_k);
    // The same pipeline the store call sends (no residents), undecoded.
    let raw_pipeline_sizes = persona_prefs::store::query::PassSizes {
        top_k: injection_top_k,
        strongest: 0,
        search_ef,
        half_life_days: config.store.strength_half_life_days,
        now_days: 0.0,
        min_semantic_relevance: config.store.min_semantic_relevance,
    };

    // Each store call alternates with its floor and the original plan, call by call (see
    // `measure_interleaved`), so a stall on this shared machine hits all three alike.
    let nearest_call: Call<'_> = Box::new(|i| {
        let store = store.clone();
        let q = queries[i % queries.len()].clone();
        Box::pin(async move {
            store.nearest_topics("p0", &q).await.unwrap();
        })
    });
    let conflicts_floor_call = raw_vsim_call(&connection, &keys, &queries, 5, search_ef, 0.0);
    let inject_call: Call<'_> = Box::new(|i| {
        Box::pin(inject(
            store.clone(),
            queries[i % queries.len()].clone(),
            users.clone(),
            0,
        ))
    });
    let inject_near_call: Call<'_> = Box::new(|i| {
        Box::pin(inject(
            store.clone(),
            near_queries[i % near_queries.len()].clone(),
            users.clone(),
            0,
        ))
    });
    let inject_near_users_floor_call = raw_vsim_with_users_call(
        &connection,
        &keys,
        &near_queries,
        &users,
        injection_top_k,
        search_ef,
        min_relevance,
    );
    let inject_floor_call = raw_vsim_call(
        &connection,
        &keys,
        &queries,
        injection_top_k,
        search_ef,
        min_relevance,
    );
    let inject_users_floor_call = raw_vsim_with_users_call(
        &connection,
        &keys,
        &queries,
        &users,
        injection_top_k,
        search_ef,
        min_relevance,
    );
    let inject_raw_pipeline_call: Call<'_> = Box::new(|i| {
        let mut connection = connection.clone();
        // The script-free pipeline where the store sends it (every present user's set
        // whole), else the one with the script.
        let query = &queries[i % queries.len()];
        let pipe = persona_prefs::store::query::plain_injection_pipeline(
            &keys,
            "p0",
            query,
            raw_pipeline_sizes,
            &users,
            false,
        )
        .unwrap_or_else(|| {
            persona_prefs::store::query::injection_pipeline(
                &keys,
                "p0",
                query,
                raw_pipeline_sizes,
                &users,
                false,
            )
        });
        let route = keys.vectors("p0");
        Box::pin(async move {
            let replies: Vec<redis::Value> =
                connection.pipeline_for_key(&route, &pipe).await.unwrap();
            // The store call ran first in the warm-up and loaded the script.
            assert!(
                !replies
                    .iter()
                    .any(|reply| matches!(reply, redis::Value::ServerError(_))),
                "{replies:?}"
            );
        })
    });
    let mut conflict_calls = vec![nearest_call, conflicts_floor_call];
    let mut inject_calls = vec![
        inject_call,
        inject_floor_call,
        inject_users_floor_call,
        inject_raw_pipeline_call,
        inject_near_call,
        inject_near_users_floor_call,
    ];
    if original {
        conflict_calls.push(Box::new(|i| {
            let mut connection = original_connection.clone();
            let index = original_index.clone();
            let q = queries[i % queries.len()].clone();
            Box::pin(async move { original_find_conflicts(&mut connection, &index, &q).await })
        }));
        inject_calls.push(Box::new(|i| {
            let mut connection = original_connection.clone();
            let index = original_index.clone();
            let users = users.clone();
            let q = queries[i % queries.len()].clone();
            Box::pin(
                async move { original_injection_plan(&mut connection, &index, &q, &users).await },
            )
        }));
    }
    // Each list holds ours, the floor and (when measured) the original plan, in that order.
    let ours_floor_original = |measured: Vec<Percentiles>| {
        let mut measured = measured.into_iter();
        let ours = measured.next().expect("ours is always measured");
        let floor = measured.next().expect("the floor is always measured");
        (ours, floor, measured.next())
    };
    let (conflicts, conflicts_floor, conflicts_original) =
        ours_floor_original(measure_interleaved(iterations, &conflict_calls).await);
    // Redis's own time per command over the injection phase (the original plan runs on a
    // server of its own, when measured): what the script costs beside the searches.
    support::reset_command_times(&store).await;
    let mut measured = measure_interleaved(iterations, &inject_calls).await;
    // Sixth and fifth in the injection's list: the floor pricing the user pass and the store
    // call, with queries near the persona's views; fourth: the store's pipeline undecoded;
    // third: the floor pricing the user pass.
    let injection_near_users_floor = measured.remove(5);
    let injection_near = measured.remove(4);
    let injection_raw_pipeline = measured.remove(3);
    let injection_users_floor = measured.remove(2);
    let (injection, injection_floor, injection_original) = ours_floor_original(measured);
    let injection_phase_times = support::command_times(&store).await;
    drop((conflict_calls, inject_calls));

    println!();
    println!(
        "{:<26} {:>8} {:>8} | {:>11} {:>11} {:>7} | {:>13} {:>13} {:>11} {:>11}",
        "path (ms)",
        "p50",
        "p99",
        "floor p50",
        "floor p99",
        "ratio",
        "original p50",
        "original p99",
        "p50 ratio",
        "p99 ratio"
    );
    let mut ok = true;
    for (label, measured, floor, original) in [
        (
            "find_conflicts (ingest)",
            &conflicts,
            &conflicts_floor,
            conflicts_original.as_ref(),
        ),
        (
            "injection, 2 users",
            &injection,
            &injection_floor,
            injection_original.as_ref(),
        ),
    ] {
        let ratio = measured.p50 / floor.p50;
        ok &= ratio <= TARGET_FLOOR_RATIO && measured.p99 <= TARGET_TAIL * measured.p50;
        let (original_text, p50_ratio, p99_ratio) = match original {
            Some(Percentiles { p50, p99 }) => {
                let (r50, r99) = (measured.p50 / p50, measured.p99 / p99);
                (
                    format!("{p50:>13.3} {p99:>13.3}"),
                    format!("{r50:.2}"),
                    format!("{r99:.2}"),
                )
            }
            None => (
                format!("{:>13} {:>13}", "n/a", "n/a"),
                "-".into(),
                "-".into(),
            ),
        };
        println!(
            "{label:<26} {:>8.3} {:>8.3} | {:>11.3} {:>11.3} {:>7.2} | {original_text} {p50_ratio:>11} {p99_ratio:>11}",
            measured.p50, measured.p99, floor.p50, floor.p99, ratio,
        );
    }
    println!(
        "{:<26} {:>8} {:>8} | {:>11.3} {:>11.3} {:>7.2} | the floor pricing the user pass: \
         the raw VSIM and one of each present user's own set, pipelined",
        "  against the users' floor",
        "",
        "",
        injection_users_floor.p50,
        injection_users_floor.p99,
        injection.p50 / injection_users_floor.p50,
    );
    println!(
        "{:<26} {:>8.3} {:>8.3} | the store's own pipeline, undecoded: Redis's share of the gap to the users' floor \
         {:.3} ms, the service's (building, decoding, choosing) {:.3} ms",
        "  its pipeline alone",
        injection_raw_pipeline.p50,
        injection_raw_pipeline.p99,
        injection_raw_pipeline.p50 - injection_users_floor.p50,
        injection.p50 - injection_raw_pipeline.p50,
    );
    println!(
        "{:<26} {:>8.3} {:>8.3} | {:>11.3} {:>11.3} {:>7.2} | a query near {NEAR_VIEWS} of the persona's views (the mean of \
         theirs), against its users' floor: {NEAR_VIEWS} semantic hits to decode and rank",
        "  a query near its views",
        injection_near.p50,
        injection_near.p99,
        injection_near_users_floor.p50,
        injection_near_users_floor.p99,
        injection_near.p50 / injection_near_users_floor.p50,
    );
    println!(
        "Redis's own time over the injection phase (mean per call; a script's includes the commands it calls, \
         also listed under their names; VSIM mixes the persona's searches, the floors' and the injection's, \
         with the users' smaller ones):"
    );
    for (command, calls, usec) in injection_phase_times.iter().take(8) {
        if *calls > 0 {
            println!(
                "  {command:<14} {calls:>8} calls {:>8.1} us a call",
                *usec as f64 / *calls as f64
            );
        }
    }
    println!(
        "targets: store call p50 <= {TARGET_FLOOR_RATIO} x floor p50, p99 <= {TARGET_TAIL} x its p50; \
         the original plan's ratios are reported, not targeted"
    );

    // Residents, each case alternated with the same injection without them.
    let mut faded_settings = config.store.clone();
    faded_settings.strength_half_life_days = 1e-9;
    let faded_store = PreferenceStore::connect(&config.redis, &faded_settings)
        .await
        .unwrap();
    println!();
    println!(
        "{:<44} {:>8} {:>8} | {:>15} {:>15} {:>7}",
        "injection + 3 residents (ms)", "p50", "p99", "without p50", "without p99", "ratio"
    );
    for (label, with_residents) in [
        ("voiced lately (walk stops early)", &store),
        ("all faded (walk reads its limit)", &faded_store),
    ] {
        let (measured, without) = measure_pair(
            iterations,
            |i| {
                let q = queries[i % queries.len()].clone();
                inject(with_residents.clone(), q, users.clone(), 3)
            },
            |i| {
                inject(
                    store.clone(),
                    queries[i % queries.len()].clone(),
                    users.clone(),
                    0,
                )
            },
        )
        .await;
        println!(
            "{label:<44} {:>8.3} {:>8.3} | {:>15.3} {:>15.3} {:>7.2}",
            measured.p50,
            measured.p99,
            without.p50,
            without.p99,
            measured.p50 / without.p50
        );
    }
    if std::env::var("BENCH_MEMORY").is_ok() {
        let per = (memory_after.saturating_sub(memory_before)) as f64 / total as f64;
        let breakdown = memory_breakdown(&store, "p0").await;
        let raw = breakdown.raw_bytes;
        println!(
            "\nmemory: {per:.0} bytes per preference in this layout (used_memory delta over {total}), \
             raw vector + fields {raw:.0} bytes (FP32 vector {} + field values {:.0}), ratio {:.2}",
            breakdown.vector_bytes,
            raw - breakdown.vector_bytes as f64,
            per / raw
        );
        let mut connection = store.connection();
        // The server's compact-encoding limits, which decide what a hash, a sorted set and a
        // set cost (docs/CAPACITY.md).
        let listpack: Vec<String> = connection
            .query_for_key(
                &store.keys().vectors("p0"),
                redis::cmd("CONFIG").arg("GET").arg("*-max-listpack-*"),
            )
            .await
            .ok()
            .and_then(|reply| redis::from_redis_value(reply).ok())
            .unwrap_or_default();
        let settings: Vec<String> = listpack
            .chunks(2)
            .filter(|pair| {
                pair.len() == 2
                    && [
                        "hash-max-listpack-value",
                        "zset-max-listpack-entries",
                        "set-max-listpack-entries",
                    ]
                    .contains(&pair[0].as_str())
            })
            .map(|pair| format!("{} {}", pair[0], pair[1]))
            .collect();
        println!(
            "  per structure (MEMORY USAGE in persona p0, bytes per preference; the server's {}):",
            if settings.is_empty() {
                "limits unknown".to_string()
            } else {
                settings.join(", ")
            }
        );
        for (name, bytes) in &breakdown.structures {
            println!("    {name:<34} {bytes:>8.0}");
        }
    }
    println!(
        "\nresult: {}",
        if ok { "within targets" } else { "OVER TARGET" }
    );

    for id in 0..personas {
        let _ = store.delete_persona(&format!("p{id}")).await;
    }
    let _ = store.drop_index().await;
    if original {
        let _: redis::RedisResult<redis::Value> = redis::cmd("FT.DROPINDEX")
            .arg(&original_index)
            .arg("DD")
            .query_async(&mut original_connection)
            .await;
    }
    drop(original_server);
}

/// One measured injection: persona `p0`, eight preferences at most, the users present, and
/// `residents` of its strongest (0: none, as `get_preferences_for_injection`).
async fn inject(store: PreferenceStore, q: Vec<f32>, users: Vec<String>, residents: usize) {
    let query = InjectionQuery {
        persona_id: "p0",
        query_embedding: &q,
        max_count: INJECTION_MAX_COUNT,
        max_chars: 2000,
        active_user_ids: &users,
    };
    store
        .get_preferences_for_injection_with_resident(&query, residents)
        .await
        .unwrap();
}

/// `used_memory` summed over the masters.
async fn used_memory(store: &PreferenceStore) -> u64 {
    support::info_sum(store, "memory", &["used_memory"]).await as u64
}

/// What one preference costs in each of a persona's structures, and its raw size.
struct MemoryBreakdown {
    /// FP32 vector bytes plus the byte length of every other field value of the record.
    raw_bytes: f64,
    vector_bytes: usize,
    structures: Vec<(String, f64)>,
}

/// `MEMORY USAGE` of the persona's structures divided by its preferences (hashes sampled:
/// 200 of them), the RediSearch index's own count per document, and the raw size measured on
/// the same sampled records.
async fn memory_breakdown(store: &PreferenceStore, persona: &str) -> MemoryBreakdown {
    use redis::Value;
    let keys = store.keys().clone();
    let mut connection = store.connection();
    let route = keys.vectors(persona);
    let ids: Vec<String> = redis::from_redis_value(
        connection
            .query_for_key(
                &route,
                redis::cmd("SRANDMEMBER").arg(keys.ids(persona)).arg(200),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let count: f64 = redis::from_redis_value::<u64>(
        connection
            .query_for_key(&route, redis::cmd("SCARD").arg(keys.ids(persona)))
            .await
            .unwrap(),
    )
    .unwrap() as f64;
    // MEMORY USAGE of one key, every element counted (SAMPLES 0).
    let measuring = store.connection();
    let usage = |key: String| {
        let mut connection = measuring.clone();
        let route = route.clone();
        async move {
            let reply = connection
                .query_for_key(
                    &route,
                    redis::cmd("MEMORY")
                        .arg("USAGE")
                        .arg(key)
                        .arg("SAMPLES")
                        .arg(0),
                )
                .await
                .unwrap();
            redis::from_redis_value::<Option<u64>>(reply)
                .unwrap()
                .unwrap_or(0) as f64
        }
    };
    let mut hash_bytes = 0.0;
    let mut field_bytes = 0.0;
    let mut vector_bytes = 0;
    // The record wherever it lives (an active preference's in its vector-set element, a
    // retracted one's in its hash): the raw size counts its field values, the vector aside.
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let records = store.record_fields(persona, &id_refs).await.unwrap();
    for (id, record) in ids.iter().zip(records) {
        hash_bytes += usage(keys.preference(persona, id)).await;
        for value in record.unwrap_or_default().values() {
            field_bytes += value.len() as f64;
        }
        vector_bytes = 384 * 4;
    }
    let sampled = ids.len().max(1) as f64;
    let mut structures = vec![("preference hash".to_string(), hash_bytes / sampled)];
    for (name, key) in [
        (
            "vector set (Q8 + links + attributes)",
            keys.vectors(persona),
        ),
        ("id set", keys.ids(persona)),
        ("strongest sorted set", keys.strongest(persona)),
        ("about sorted set", keys.about(persona)),
    ] {
        let bytes = usage(key).await;
        structures.push((name.to_string(), bytes / count));
    }
    let mut user_sets = 0.0;
    for key in store.about_vector_sets(persona).await.unwrap() {
        user_sets += usage(key).await;
    }
    structures.push((
        "users' vector sets (Q8, links, attributes)".to_string(),
        user_sets / count,
    ));
    if let Ok(Some(info)) = store.index_info().await
        && info.num_docs > 0
    {
        let reply = connection
            .query_for_key(&route, redis::cmd("FT.INFO").arg(&info.name))
            .await
            .unwrap();
        let mut total_mb = 0.0;
        if let Value::Array(items) = reply {
            let mut items = items.into_iter();
            while let (Some(k), Some(v)) = (items.next(), items.next()) {
                let k = persona_prefs::store::query::value_to_string(&k);
                if k.ends_with("_sz_mb") || k.ends_with("_size_mb") {
                    if k == "total_index_memory_sz_mb" {
                        continue;
                    }
                    total_mb += persona_prefs::store::query::value_to_string(&v)
                        .parse::<f64>()
                        .unwrap_or(0.0);
                }
            }
        }
        structures.push((
            "text index (FT.INFO, every persona)".to_string(),
            total_mb * 1024.0 * 1024.0 / info.num_docs as f64,
        ));
    }
    MemoryBreakdown {
        raw_bytes: vector_bytes as f64 + field_bytes / sampled,
        vector_bytes,
        structures,
    }
}
