//! Injection latency over NATS against its floor, in the same run.
//!
//! Data: one persona with `BENCH_PREFS` (10 000) preferences among 100 personas (99 × 100
//! more), 384-dim random unit vectors, some related to users. The service runs in-process
//! (the same code `persona-prefs serve` runs), the client is a separate NATS connection.
//!
//! Measured (p50/p99): `persona.prefs.inject` with a precomputed embedding, with text (cache
//! hit), and with new text every time (local embedder on the request path), the last
//! alternated with the model embedding a like text alone and a precomputed injection; target
//! for new text: p50 <= 4 ms. In the same rounds, `check` with a new draft every time (the
//! rules extractor, its topic embedded on the request path), beside new-text injection.
//! Floor: one raw VSIM over the persona's vector set (same Redis) plus a bare NATS
//! request-reply echo of the same payload size. Beside it, reported: the same plus a `VSIM` of
//! each present user's own vector set in the same round trip, a floor that prices the user
//! pass (the target's floor does not). Compared too: the original system's query plan
//! (one KNN over a shared index, then one query per user, each awaited) on its own layout of
//! the same data, on a Redis server of its own (as it would run), sent by the same client, plus
//! the same echo. Targets: precomputed p50 ≤ 1.3 × the floor, and p99 ≤ 2 × its own p50.
//! The gap to the floor that prices the user pass is split in the same run: a request the
//! store refuses before any command (the service around its work, beside the echo), the store
//! call alone (beside the searches), and the rest (the reply).
//! The ratio to the original plan is reported, not targeted: its figure lies beneath the
//! floor on this machine, so the old 0.2× / 0.3× targets could not be met by any layout.
//!
//! `scripts/bench inject` (starts the services), or `cargo bench --bench inject` with REDIS_URL,
//! NATS_URL and PERSONA_PREFS_MODEL_DIR set.

mod support;

use std::time::Instant;

use futures::StreamExt;
use persona_prefs::app::App;
use persona_prefs::config::Config;
use rand::SeedableRng;
use serde_json::json;
use support::{
    Call, OriginalServer, Percentiles, bench_data, env_or, load_original_layout, load_personas,
    measure, measure_interleaved, original_injection_plan, query_pool_size, random_unit,
    raw_vsim_call, raw_vsim_with_users_call,
};

const TARGET_RATIO: f64 = 1.3;
/// p99 at most this many times p50: a tail the prompt builder can plan for.
const TARGET_TAIL: f64 = 2.0;
/// Text injection with a query never seen before (embedded on the request path), p50: issue
/// 32's target on this 2-core machine (issue 11's earlier goal was 20 ms).
const TEXT_GOAL_P50_MS: f64 = 4.0;

#[tokio::main]
async fn main() {
    let prefs: usize = env_or("BENCH_PREFS", 10_000);
    let other: usize = env_or("BENCH_OTHER_PREFS", 1_000);
    let iterations: usize = env_or("BENCH_ITERATIONS", 2_000);
    let mut config = Config::load(None).expect("config");
    let name = format!("benchinject{}", std::process::id());
    config.redis.key_prefix = name.clone();
    config.redis.index_name = format!("idx:{name}");
    config.serve.subject_prefix = format!("{name}.prefs");
    config.serve.service_name = name.clone();
    config.serve.queue_group = name.clone();
    config.metrics.listen = String::new();
    // Loading pipelines thousands of writes while the indexes build: a busy server can take
    // longer than the service's 5 s to answer one, which is not what is measured here.
    config.redis.response_timeout_ms = 60_000;
    let app = App::start(config.clone())
        .await
        .expect("services (run scripts/bench inject)");
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let services = app.serve(stopped).await.unwrap();

    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    // RediSearch's fork GC forks the server every 30 s and then takes the module lock to apply
    // what it found: measured here at 6 forks and GIL waits of up to 626 ms in two minutes,
    // with the original layout's vector index loaded beside ours. Those stalls block every
    // command of the server, so they set the p99 of every path alike and hide the paths
    // themselves. Paused while measuring (BENCH_KEEP_GC=1 keeps it running), and said so.
    let keep_gc = std::env::var("BENCH_KEEP_GC").is_ok();
    if !keep_gc && config.redis.cluster_nodes.is_empty() {
        let mut connection = app.store.connection();
        let paused: redis::RedisResult<redis::Value> = redis::cmd("FT.CONFIG")
            .arg(&["SET", "FORK_GC_RUN_INTERVAL", "86400"][..])
            .query_async(&mut connection)
            .await;
        println!("RediSearch fork GC paused for the run: {paused:?}");
    }
    let loading = Instant::now();
    let data = bench_data(100, prefs, other, &mut rng);
    let total = load_personas(&app.store, &data).await;
    let original_index = format!("idx:{name}_original");
    let connection = app.store.connection();
    // The original layout's shared index exists on a single node only. It gets a Redis server
    // of its own (as the original system would run): in one server, its HNSW index's module
    // lock and garbage collection stalled our paths too, and ours stalled it.
    let cluster = !config.redis.cluster_nodes.is_empty();
    let original_server = if cluster {
        None
    } else {
        OriginalServer::start(&config).await
    };
    let mut original_connection = match &original_server {
        Some(server) => server.connection.clone(),
        None => connection.clone(),
    };
    if !cluster {
        if original_server.is_none() {
            println!(
                "(the original layout shares our Redis: PERSONA_PREFS_REDIS_SERVER and \
                 PERSONA_PREFS_REDISEARCH_MODULE name a server to give it its own)"
            );
        }
        if !keep_gc {
            let _: redis::RedisResult<redis::Value> = redis::cmd("FT.CONFIG")
                .arg(&["SET", "FORK_GC_RUN_INTERVAL", "86400"][..])
                .query_async(&mut original_connection)
                .await;
        }
        load_original_layout(
            &mut original_connection,
            &format!("{name}_original"),
            &original_index,
            &data,
        )
        .await;
    }
    println!(
        "loaded {total} preferences ({prefs} in the measured persona) in {:.1}s",
        loading.elapsed().as_secs_f64()
    );

    let client = async_nats::connect(config.nats.url.as_str()).await.unwrap();
    let subject = persona_prefs::serve::Endpoint::Inject.subject(
        &config.serve.subject_prefix,
        &config.serve.tenant,
        "p0",
    );
    let check_subject = persona_prefs::serve::Endpoint::Check.subject(
        &config.serve.subject_prefix,
        &config.serve.tenant,
        "p0",
    );
    let users = vec!["user1".to_string(), "user2".to_string()];
    // Up to 9 paths run call by call: a pool every one of them meets whole.
    let queries: Vec<Vec<f32>> = (0..query_pool_size(64, 9))
        .map(|_| random_unit(&mut rng))
        .collect();
    let payloads: Vec<Vec<u8>> = queries
        .iter()
        .map(|q| {
            serde_json::to_vec(
                &json!({"persona_id": "p0", "query_embedding": q, "active_user_ids": users}),
            )
            .unwrap()
        })
        .collect();
    // The same requests refused by the store's first check (`max_count` 0), before any Redis
    // command: what the service costs around its work (the subscription, the task, parsing
    // the request, an error reply), beside the bare echo of the same payload.
    let refused_payloads: Vec<Vec<u8>> = queries
        .iter()
        .map(|q| {
            serde_json::to_vec(&json!({"persona_id": "p0", "query_embedding": q, "active_user_ids": users, "max_count": 0}))
                .unwrap()
        })
        .collect();
    // The same embeddings as base64 of their little-endian bytes (no JSON numbers to parse).
    let packed_payloads: Vec<Vec<u8>> = queries
        .iter()
        .map(|q| {
            use base64::Engine;
            let bytes: Vec<u8> = q.iter().flat_map(|f| f.to_le_bytes()).collect();
            let packed = base64::engine::general_purpose::STANDARD.encode(bytes);
            serde_json::to_vec(
                &json!({"persona_id": "p0", "query_embedding": packed, "active_user_ids": users}),
            )
            .unwrap()
        })
        .collect();

    // Loading leaves the server busy for a while (the original layout's index finishes its
    // background work, and its garbage collection forks the process): let it settle first, so
    // no path measured below pays for the loading.
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    // Where a stall comes from, should the p99s show one: Redis's latency monitor records
    // every event over 20 ms (forks, slow commands, expiry cycles), printed after the run.
    let mut diagnostics = app.store.connection();
    let _: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg(&["SET", "latency-monitor-threshold", "20"][..])
        .query_async(&mut diagnostics)
        .await;
    let _: redis::RedisResult<()> = redis::cmd("LATENCY")
        .arg("RESET")
        .query_async(&mut diagnostics)
        .await;
    let forks_before = info_field(&mut diagnostics, "total_forks").await;

    let echo_subject = format!("{name}.echo");
    let mut echo = client.subscribe(echo_subject.clone()).await.unwrap();
    let responder = async_nats::connect(config.nats.url.as_str()).await.unwrap();
    let echo_task = tokio::spawn(async move {
        while let Some(message) = echo.next().await {
            if let Some(reply) = message.reply {
                let _ = responder.publish(reply, message.payload).await;
            }
        }
    });

    // The paths compared by the targets run call by call in turn (inject, raw VSIM, bare echo,
    // the original plan), so a stall on this shared machine (a fork, an index's garbage
    // collection, another process) hits all of them alike and the ratios stay fair.
    // The service's own time per request (its `took_ms`) splits the gap to the floor into work
    // inside the handler and transport around it.
    let took = std::sync::Mutex::new(Vec::with_capacity(iterations));
    let keys = app.store.keys().clone();
    let search_ef = config.store.vector_search_ef;
    let inject_call: Call<'_> = Box::new(|i| {
        let client = client.clone();
        let subject = subject.clone();
        let payload = payloads[i % payloads.len()].clone();
        let took = &took;
        Box::pin(async move {
            let reply = client.request(subject, payload.into()).await.unwrap();
            assert!(reply.headers.is_none(), "error reply");
            // Only the field the bench needs is decoded, as a typed client reads a reply: a
            // whole `serde_json::Value` of the 4 KB reply took 40-70 us of this client's
            // time (measured beside the undecoded call), which no floor pays.
            #[derive(serde::Deserialize)]
            struct Took {
                took_ms: f64,
            }
            let body: Took = serde_json::from_slice(&reply.payload).unwrap();
            took.lock().unwrap().push(body.took_ms);
        })
    });
    // The service's own semantic search (it leaves out the hits too far to inject).
    let min_relevance = config.store.min_semantic_relevance;
    let vsim_call = raw_vsim_call(&connection, &keys, &queries, 16, search_ef, min_relevance);
    let vsim_users_call = raw_vsim_with_users_call(
        &connection,
        &keys,
        &queries,
        &users,
        16,
        search_ef,
        min_relevance,
    );
    let echo_call = echo_of(&client, &echo_subject, &payloads);
    let original_call: Call<'_> = Box::new(|i| {
        let mut connection = original_connection.clone();
        let index = original_index.clone();
        let users = users.clone();
        let q = queries[i % queries.len()].clone();
        Box::pin(async move { original_injection_plan(&mut connection, &index, &q, &users).await })
    });
    // The same injection as a direct store call (no NATS, no JSON): splits the handler's time
    // into the store's and the rest.
    let store_call: Call<'_> = Box::new(|i| {
        let store = app.store.clone();
        let q = queries[i % queries.len()].clone();
        let users = users.clone();
        Box::pin(async move {
            let query = persona_prefs::store::InjectionQuery {
                persona_id: "p0",
                query_embedding: &q,
                max_count: 8,
                max_chars: 2000,
                active_user_ids: &users,
            };
            store.get_preferences_for_injection(&query).await.unwrap();
        })
    });
    let packed_call = request_of(
        &client,
        &subject,
        &packed_payloads,
        Some(Answer::Preferences),
    );
    let refused_call = request_of(&client, &subject, &refused_payloads, Some(Answer::Refusal));
    // The base64 request's own floor: the same echo of its (smaller) payload.
    let packed_echo_call = echo_of(&client, &echo_subject, &packed_payloads);
    let mut calls = vec![
        inject_call,
        vsim_call,
        echo_call,
        store_call,
        packed_call,
        vsim_users_call,
        packed_echo_call,
        refused_call,
    ];
    // The original layout's shared index exists on a single node only.
    if cluster {
        drop(original_call);
    } else {
        calls.push(original_call);
    }
    let mut measured = measure_interleaved(iterations, &calls).await.into_iter();
    drop(calls);
    let precomputed = measured.next().unwrap();
    let search_floor = measured.next().unwrap();
    let echo_floor = measured.next().unwrap();
    let store_alone = measured.next().unwrap();
    let packed = measured.next().unwrap();
    let users_search_floor = measured.next().unwrap();
    let packed_echo_floor = measured.next().unwrap();
    let refused = measured.next().unwrap();
    let original = measured
        .next()
        .unwrap_or(Percentiles { p50: 0.0, p99: 0.0 });
    echo_task.abort();
    let mut took = took.into_inner().unwrap();
    took.sort_by(f64::total_cmp);
    let took_at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];

    // Text queries, apart: they add embedding, which no floor has.
    let cached_text = measure(iterations, |_| {
        let client = client.clone();
        let subject = subject.clone();
        async move {
            let body = json!({"persona_id": "p0", "query": "what do you think about tea?", "active_user_ids": ["user1", "user2"]});
            client.request(subject, serde_json::to_vec(&body).unwrap().into()).await.unwrap();
        }
    })
    .await;
    // New text every time, alternated call by call with its floor: the same model embedding
    // a text of the same shape directly (batch 1, no batcher, no cache), and the precomputed
    // injection beside it. What the service adds is the gap between them. The model is the
    // one queries use (`embed.query_precision`: the 8-bit pass by default).
    let model = persona_prefs::embed::local::LocalEmbedder::load_with(
        std::path::Path::new(&config.embed.model_dir),
        config.embed.max_input_chars,
        persona_prefs::embed::local::LocalOptions {
            max_tokens: config.embed.local_max_tokens,
            int8_queries: config.embed.query_precision
                == persona_prefs::embed::QueryPrecision::Int8,
            ..Default::default()
        },
    )
    .expect("local model (scripts/services fetch)")
    .for_queries();
    let new_text_call: Call<'_> = Box::new(|i| {
        let client = client.clone();
        let subject = subject.clone();
        Box::pin(async move {
            let body = json!({"persona_id": "p0", "query": format!("what do you think about topic number {i}?"), "active_user_ids": ["user1"]});
            client
                .request(subject, serde_json::to_vec(&body).unwrap().into())
                .await
                .unwrap();
        })
    });
    let raw_embed_call: Call<'_> = Box::new(|i| {
        let model = &model;
        Box::pin(async move {
            let text = vec![format!("what do you think about subject number {i}?")];
            persona_prefs::embed::Embedder::embed(model, &text)
                .await
                .unwrap();
        })
    });
    let precomputed_call: Call<'_> = Box::new(|i| {
        let client = client.clone();
        let subject = subject.clone();
        let payload = payloads[i % payloads.len()].clone();
        Box::pin(async move {
            client.request(subject, payload.into()).await.unwrap();
        })
    });
    // A draft checked before it goes out (`check`, the rules extractor): its topic new every
    // time, so it is embedded on the request path as new-text injection's query is.
    let check_call: Call<'_> = Box::new(|i| {
        let client = client.clone();
        let subject = check_subject.clone();
        Box::pin(async move {
            let body = json!({"persona_id": "p0", "draft": format!("Honestly, I think topic number {i} is wonderful.")});
            let reply = client
                .request(subject, serde_json::to_vec(&body).unwrap().into())
                .await
                .unwrap();
            assert!(reply.headers.is_none(), "check failed: {:?}", reply.payload);
        })
    });
    let mut text_paths = measure_interleaved(
        iterations / 4,
        &[new_text_call, raw_embed_call, precomputed_call, check_call],
    )
    .await
    .into_iter();
    let (new_text, raw_embed, precomputed_beside_text, checked) = (
        text_paths.next().unwrap(),
        text_paths.next().unwrap(),
        text_paths.next().unwrap(),
        text_paths.next().unwrap(),
    );

    let forks = info_field(&mut diagnostics, "total_forks").await - forks_before;
    let latest: redis::RedisResult<redis::Value> = redis::cmd("LATENCY")
        .arg("LATEST")
        .query_async(&mut diagnostics)
        .await;
    println!(
        "redis during the measured paths: {forks} forks; latency events over 20 ms (event, time, latest ms, max ms): {latest:?}"
    );
    let floor_p50 = search_floor.p50 + echo_floor.p50;
    println!();
    println!("{:<40} {:>9} {:>9}", "measured (ms)", "p50", "p99");
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "inject, precomputed embedding", precomputed.p50, precomputed.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "  of which inside the handler (took_ms)",
        took_at(0.50),
        took_at(0.99)
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "  beside it: the store call alone", store_alone.p50, store_alone.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "  beside it: refused before the store", refused.p50, refused.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "inject, precomputed, as base64", packed.p50, packed.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "inject, text (cached embedding)", cached_text.p50, cached_text.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "inject, new text (embedded per request)", new_text.p50, new_text.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        format!(
            "  beside it: the model alone ({:?} queries)",
            config.embed.query_precision
        ),
        raw_embed.p50,
        raw_embed.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "  beside it: inject, precomputed",
        precomputed_beside_text.p50,
        precomputed_beside_text.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "check, a new draft (rules extractor)", checked.p50, checked.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        format!("floor: raw VSIM (EF {search_ef})"),
        search_floor.p50,
        search_floor.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "floor: NATS request-reply echo", echo_floor.p50, echo_floor.p99
    );
    println!("{:<40} {:>9.3}", "floor: search + echo", floor_p50);
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "beside it: echo of the base64 request", packed_echo_floor.p50, packed_echo_floor.p99
    );
    println!(
        "{:<40} {:>9.3} {:>9.3}",
        "beside it: VSIM + users' set VSIMs (1 trip)",
        users_search_floor.p50,
        users_search_floor.p99
    );
    let users_floor_p50 = users_search_floor.p50 + echo_floor.p50;
    println!(
        "{:<40} {:>9.3}",
        "  + echo (a floor pricing the user pass)", users_floor_p50
    );
    let (original_p50, original_p99) =
        (original.p50 + echo_floor.p50, original.p99 + echo_floor.p99);
    if !cluster {
        println!(
            "{:<40} {:>9.3} {:>9.3}",
            "original plan (KNN + 1 query/user) + echo", original_p50, original_p99
        );
    }
    let ratio = precomputed.p50 / floor_p50;
    let (r50, r99) = (
        precomputed.p50 / original_p50,
        precomputed.p99 / original_p99,
    );
    println!();
    let tail = precomputed.p99 / precomputed.p50;
    println!("precomputed p50 / floor = {ratio:.2} (target <= {TARGET_RATIO})");
    println!("precomputed p99 / p50 = {tail:.2} (target <= {TARGET_TAIL})");
    println!(
        "precomputed p50 / the floor with the users' searches = {:.2} (reported, not a target)",
        precomputed.p50 / users_floor_p50
    );
    // The gap to the floor in three parts, each from its own p50s: the service around its
    // work (a refused request beside the echo), the store beyond the searches it cannot do
    // without (decoding, choosing, its other commands), and the rest (the reply: rendered,
    // encoded and sent, and the handler's wake-ups after the store's round trip).
    let around = refused.p50 - echo_floor.p50;
    let in_store = store_alone.p50 - users_search_floor.p50;
    println!(
        "the gap to the floor with the users' searches, {:.3} ms: around the work {around:.3} \
         (refused - echo), in the store {in_store:.3} (store call - searches), the rest {:.3} \
         (reported, not a target)",
        precomputed.p50 - users_floor_p50,
        precomputed.p50 - users_floor_p50 - around - in_store
    );
    println!(
        "base64 p50 / (search + echo of the base64 request) = {:.2} (reported, not a target)",
        packed.p50 / (search_floor.p50 + packed_echo_floor.p50)
    );
    if !cluster {
        println!("precomputed p50 / original plan = {r50:.2} (reported, not a target)");
        println!("precomputed p99 / original plan = {r99:.2} (reported, not a target)");
    }
    if cluster {
        println!(
            "(on a cluster: no original plan to compare with; its shared index needs one node)"
        );
    }
    let ok = ratio <= TARGET_RATIO && tail <= TARGET_TAIL;
    println!(
        "result: {}",
        if ok { "within target" } else { "OVER TARGET" }
    );
    // The text path's target is absolute (issue 32: a prompt builder that sends text, the
    // usual case, waits single-digit milliseconds); beside it, how much the service adds to
    // the model and the store.
    let text_floor = raw_embed.p50 + precomputed_beside_text.p50;
    println!(
        "new text p50 = {:.1} ms (target <= {TEXT_GOAL_P50_MS} ms): {}; \
         / (model alone + precomputed inject, {text_floor:.1} ms) = {:.2}",
        new_text.p50,
        if new_text.p50 <= TEXT_GOAL_P50_MS {
            "within"
        } else {
            "OVER"
        },
        new_text.p50 / text_floor
    );

    services.stop().await;
    for id in 0..100 {
        let _ = app.store.delete_persona(&format!("p{id}")).await;
    }
    if cluster {
        return;
    }
    let _ = app.store.drop_index().await;
    let _: redis::RedisResult<redis::Value> = redis::cmd("FT.DROPINDEX")
        .arg(&original_index)
        .arg("DD")
        .query_async(&mut original_connection)
        .await;
    drop(original_server);
}

/// A numeric field of `INFO` (0 when absent).
async fn info_field(connection: &mut persona_prefs::store::RedisConnection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO")
        .query_async(connection)
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// What a request sent by [`request_of`] is answered with.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Answer {
    Preferences,
    /// An error reply (its headers say so).
    Refusal,
}

/// A request of each payload in turn, its answer checked when `expected` says what it must be.
fn request_of<'a>(
    client: &'a async_nats::Client,
    subject: &'a str,
    payloads: &'a [Vec<u8>],
    expected: Option<Answer>,
) -> Call<'a> {
    Box::new(move |i| {
        let client = client.clone();
        let subject = subject.to_string();
        let payload = payloads[i % payloads.len()].clone();
        Box::pin(async move {
            let reply = client.request(subject, payload.into()).await.unwrap();
            if let Some(expected) = expected {
                let answer = if reply.headers.is_some() {
                    Answer::Refusal
                } else {
                    Answer::Preferences
                };
                assert_eq!(answer, expected, "{:?}", reply.payload);
            }
        })
    })
}

/// A bare NATS request-reply through the bench's echo responder, of each payload in turn.
fn echo_of<'a>(
    client: &'a async_nats::Client,
    subject: &'a str,
    payloads: &'a [Vec<u8>],
) -> Call<'a> {
    request_of(client, subject, payloads, None)
}
