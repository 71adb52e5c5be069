//! How hard `VSIM` searches a persona's vector set (`EF`, `store.vector_search_ef`), chosen by
//! measurement: recall@5 (ingest's find_conflicts) and recall@16 (injection's semantic pass)
//! against exact brute-force cosine search, beside each EF's p50/p99, all in one run.
//!
//! Data: up to `BENCH_VECTORS` (10 000; the shipped texts gave 9 272 when the default was
//! chosen) real all-MiniLM-L6-v2 embeddings of short texts, as a persona's topics are: every
//! text and topic of the shipped labelled sets and topic pairs, the plain words of the
//! vendored VADER lexicon, and the labelled topics in a few phrasings; one Q8
//! vector set (the service's default), every `BENCH_QUERIES`-th (10th) text a query, itself
//! excluded from its neighbours. The floor is Redis's own default (EF 100, or COUNT when
//! larger), measured alternately with the others; the chosen EF is the smallest of at least
//! 32 (twice injection's COUNT) whose recall stays within 0.005 of the default's at both
//! depths.
//!
//! `BENCH_M=8` builds the set with 8 HNSW links a node instead of Redis's 16, and the run
//! prints what that saves in bytes an element beside what it costs in recall.
//!
//! Then the effort of building (`VADD … EF`, `store.vector_build_ef`): the same vectors put
//! into a set at each build EF in turn, Redis's own time a `VADD` (`INFO commandstats`) beside
//! what each set's searches find at the service's search EF, against a set built at Redis's
//! default (200). An `ADD` of a new topic is mostly its `VADD` on ingest's path; the chosen
//! build EF is the smallest whose recall stays within 0.005 of the default-built set's at both
//! depths.
//!
//! `scripts/bench search_effort` (starts the services), or `cargo bench --bench
//! search_effort` with REDIS_URL and PERSONA_PREFS_MODEL_DIR set.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use persona_prefs::calibrate::{TOPIC_PAIRS, parse_pairs};
use persona_prefs::config::Config;
use persona_prefs::embed::Embedder;
use persona_prefs::embed::local::LocalEmbedder;
use persona_prefs::extract::evaluate::{SHIPPED_SETS, parse_labelled};
use persona_prefs::store::query::vector_to_bytes;
use support::{Call, env_or, every_call_meets_every_query, measure_interleaved};

/// Redis's default exploration factor for `VSIM` without `EF` (`VSET_DEFAULT_SEARCH_EF`).
const REDIS_DEFAULT_EF: usize = 100;
const CANDIDATE_EFS: [usize; 7] = [16, 24, 32, 48, 64, REDIS_DEFAULT_EF, 200];
/// Recall an EF may lose against the default, at each depth, and still be chosen.
const RECALL_TOLERANCE: f64 = 0.005;
/// Never below twice the most the hot paths ask for (injection's 16): a persona larger than
/// the measured set loses recall at a given EF sooner, and 2k is the usual HNSW headroom.
const MIN_EF: usize = 32;
/// Redis's default exploration factor for `VADD` without `EF` (`VSET_DEFAULT_C_EF`).
const REDIS_DEFAULT_BUILD_EF: usize = 200;
const CANDIDATE_BUILD_EFS: [usize; 5] = [REDIS_DEFAULT_BUILD_EF, 128, 100, 64, 40];

/// Short texts like a persona's topics and the messages that query them.
fn corpus(limit: usize) -> Vec<String> {
    let mut texts = BTreeSet::new();
    let mut topics = BTreeSet::new();
    for (_, set) in SHIPPED_SETS {
        for row in parse_labelled(set).unwrap() {
            texts.insert(row.text);
            topics.extend(row.opinions.into_iter().map(|opinion| opinion.topic));
        }
    }
    for pair in parse_pairs(TOPIC_PAIRS).unwrap() {
        topics.insert(pair.a);
        topics.insert(pair.b);
    }
    texts.extend(topics.iter().cloned());
    let lexicon = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/extract/rules/vader_lexicon.tsv"),
    )
    .unwrap();
    texts.extend(
        lexicon
            .lines()
            .filter_map(|line| line.split('\t').next())
            .filter(|word| word.len() >= 3 && word.chars().all(|c| c.is_ascii_lowercase()))
            .map(str::to_string),
    );
    // Near neighbours on purpose: a persona holds several views on related topics, and those
    // are the neighbours a weak search misses.
    for phrasing in [
        "what do you think about {}?",
        "{}, honestly",
        "my take on {}",
        "is {} any good?",
        "{} again",
    ] {
        if texts.len() >= limit {
            break;
        }
        texts.extend(topics.iter().map(|topic| phrasing.replace("{}", topic)));
    }
    texts
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .take(limit)
        .collect()
}

/// Unit vectors: the dot product is the cosine.
fn exact_top(vectors: &[Vec<f32>], query: usize, k: usize) -> Vec<usize> {
    let mut scored: Vec<(usize, f32)> = vectors
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != query)
        .map(|(i, v)| (i, vectors[query].iter().zip(v).map(|(a, b)| a * b).sum()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.into_iter().take(k).map(|(i, _)| i).collect()
}

async fn vsim_ids(
    connection: &mut persona_prefs::store::RedisConnection,
    key: &str,
    query: &[f32],
    count: usize,
    ef: usize,
) -> Vec<usize> {
    let ids: Vec<String> = redis::cmd("VSIM")
        .arg(key)
        .arg("FP32")
        .arg(vector_to_bytes(query))
        .arg("COUNT")
        .arg(count)
        .arg("EF")
        .arg(ef)
        // In the main thread, as the service's searches run.
        .arg("NOTHREAD")
        .query_async(connection)
        .await
        .unwrap();
    ids.iter().map(|id| id.parse().unwrap()).collect()
}

/// Puts `vectors` into a new Q8 set at `key`, element `i` named `i`, one `VADD` at a time as
/// ingest adds them, linking each at `build_ef`; `links` 0 leaves Redis's default (16).
async fn load(
    connection: &mut persona_prefs::store::RedisConnection,
    key: &str,
    vectors: &[Vec<f32>],
    links: usize,
    build_ef: usize,
) {
    let _: () = redis::cmd("DEL")
        .arg(key)
        .query_async(connection)
        .await
        .unwrap();
    for (i, vector) in vectors.iter().enumerate() {
        let mut add = redis::cmd("VADD");
        add.arg(key)
            .arg("FP32")
            .arg(vector_to_bytes(vector))
            .arg(i.to_string())
            .arg("Q8");
        if links > 0 {
            add.arg("M").arg(links);
        }
        add.arg("EF").arg(build_ef);
        let _: bool = add.query_async(connection).await.unwrap();
    }
}

/// recall@5 and recall@16 of `VSIM` at `ef` over `key`, against `exact` (each query's 16
/// nearest by exact cosine, itself excluded).
async fn recall_at_5_and_16(
    connection: &mut persona_prefs::store::RedisConnection,
    key: &str,
    vectors: &[Vec<f32>],
    queries: &[usize],
    exact: &[Vec<usize>],
    ef: usize,
) -> [f64; 2] {
    let mut recall = [0.0f64; 2];
    for (slot, k) in [5usize, 16].into_iter().enumerate() {
        let mut found = 0usize;
        for (query, exact) in queries.iter().zip(exact) {
            // One more than k: the query's own element comes back first.
            let approximate: BTreeSet<usize> =
                vsim_ids(connection, key, &vectors[*query], k + 1, ef)
                    .await
                    .into_iter()
                    .filter(|id| id != query)
                    .take(k)
                    .collect();
            let exact: BTreeSet<usize> = exact.iter().copied().take(k).collect();
            found += exact.intersection(&approximate).count();
        }
        recall[slot] = found as f64 / (k * queries.len()) as f64;
    }
    recall
}

#[tokio::main]
async fn main() {
    let size: usize = env_or("BENCH_VECTORS", 10_000);
    let every: usize = env_or("BENCH_QUERIES", 10).max(1);
    let iterations: usize = env_or("BENCH_ITERATIONS", 1_000);
    // HNSW links per node (`VADD … M`): 0 is Redis's default (16), the service's. Fewer links
    // cost less memory per element; what they cost in recall is what this prints.
    let links: usize = env_or("BENCH_M", 0);
    let config = Config::load(None).expect("config");
    let texts = corpus(size);
    let model = LocalEmbedder::load(
        Path::new(&config.embed.model_dir),
        config.embed.max_input_chars,
    )
    .expect("local model (scripts/services fetch)");
    let embedding = Instant::now();
    let mut vectors = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(32) {
        vectors.extend(model.embed(chunk).await.unwrap());
    }
    println!(
        "{} texts embedded in {:.1}s (all-MiniLM-L6-v2, batches of 32)",
        vectors.len(),
        embedding.elapsed().as_secs_f64()
    );

    let store = persona_prefs::store::PreferenceStore::connect(&config.redis, &config.store)
        .await
        .expect("Redis (run scripts/bench search_effort)");
    let mut connection = store.connection();
    let key = format!("{}:bench:search_effort:{{p}}", config.redis.key_prefix);
    let loading = Instant::now();
    load(
        &mut connection,
        &key,
        &vectors,
        links,
        REDIS_DEFAULT_BUILD_EF,
    )
    .await;
    let bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(&mut connection)
        .await
        .unwrap_or(0);
    println!(
        "loaded into one Q8 vector set (M {}) in {:.1}s: {} bytes an element (MEMORY USAGE)",
        if links > 0 {
            links.to_string()
        } else {
            "16, Redis's default".to_string()
        },
        loading.elapsed().as_secs_f64(),
        bytes / vectors.len().max(1) as u64
    );

    let mut queries: Vec<usize> = (0..vectors.len()).step_by(every).collect();
    // Every EF is timed call by call in turn: a pool size each of them meets whole.
    let whole = (1..=queries.len())
        .rev()
        .find(|&len| every_call_meets_every_query(len, CANDIDATE_EFS.len()))
        .unwrap_or(queries.len());
    queries.truncate(whole);
    let exact: Vec<Vec<usize>> = queries
        .iter()
        .map(|&query| exact_top(&vectors, query, 16))
        .collect();
    println!(
        "{} queries, each a text of the set (itself excluded); recall against exact cosine",
        queries.len()
    );
    let mut recalls = Vec::new();
    for &ef in &CANDIDATE_EFS {
        recalls
            .push(recall_at_5_and_16(&mut connection, &key, &vectors, &queries, &exact, ef).await);
    }

    // Times: every EF call by call in turn (injection's COUNT 16), so a stall on this shared
    // machine hits all of them alike.
    let calls: Vec<Call<'_>> = CANDIDATE_EFS
        .iter()
        .map(|&ef| {
            let connection = connection.clone();
            let (key, vectors, queries) = (&key, &vectors, &queries);
            let call: Call<'_> = Box::new(move |i| {
                let mut connection = connection.clone();
                let query = &vectors[queries[i % queries.len()]];
                Box::pin(async move {
                    vsim_ids(&mut connection, key, query, 16, ef).await;
                })
            });
            call
        })
        .collect();
    let times = measure_interleaved(iterations, &calls).await;

    let default_at = CANDIDATE_EFS
        .iter()
        .position(|&ef| ef == REDIS_DEFAULT_EF)
        .unwrap();
    let (default_recall, default_time) = (recalls[default_at], times[default_at]);
    println!();
    println!(
        "{:<14} {:>9} {:>10} {:>9} {:>9} {:>12}",
        "EF", "recall@5", "recall@16", "p50 ms", "p99 ms", "p50/default"
    );
    for ((ef, recall), time) in CANDIDATE_EFS.iter().zip(&recalls).zip(&times) {
        let label = if *ef == REDIS_DEFAULT_EF {
            format!("{ef} (default)")
        } else {
            ef.to_string()
        };
        println!(
            "{label:<14} {:>9.4} {:>10.4} {:>9.3} {:>9.3} {:>12.2}",
            recall[0],
            recall[1],
            time.p50,
            time.p99,
            time.p50 / default_time.p50
        );
    }
    let chosen = CANDIDATE_EFS
        .iter()
        .zip(&recalls)
        .find(|(ef, recall)| {
            **ef >= MIN_EF
                && recall[0] >= default_recall[0] - RECALL_TOLERANCE
                && recall[1] >= default_recall[1] - RECALL_TOLERANCE
        })
        .map(|(ef, _)| *ef)
        .unwrap_or(REDIS_DEFAULT_EF);
    println!();
    println!(
        "smallest EF of at least {MIN_EF} within {RECALL_TOLERANCE} of the default's recall at \
         both depths: {chosen} (configured store.vector_search_ef: {})",
        config.store.vector_search_ef
    );

    // The effort of building: each build EF's set of the same vectors, searched at the
    // service's search EF. Redis's own time a VADD, not the round trip, is what an ADD pays
    // inside its script.
    let search_ef = config.store.vector_search_ef;
    println!();
    println!(
        "building: each set of the same {} vectors (M {}), searched at the configured EF {search_ef}",
        vectors.len(),
        if links > 0 { links } else { 16 }
    );
    println!(
        "{:<14} {:>12} {:>12} {:>9} {:>10} {:>9} {:>10}",
        "build EF", "VADD us", "/default", "recall@5", "recall@16", "vs dflt@5", "vs dflt@16"
    );
    let mut built = Vec::new();
    for &build_ef in &CANDIDATE_BUILD_EFS {
        support::reset_command_times(&store).await;
        load(&mut connection, &key, &vectors, links, build_ef).await;
        let (calls, usec) = support::command_times(&store)
            .await
            .into_iter()
            .find(|(name, _, _)| name.eq_ignore_ascii_case("vadd"))
            .map(|(_, calls, usec)| (calls, usec))
            .unwrap_or((0, 0));
        let per_call = usec as f64 / calls.max(1) as f64;
        let recall =
            recall_at_5_and_16(&mut connection, &key, &vectors, &queries, &exact, search_ef).await;
        built.push((build_ef, per_call, recall));
        let (_, default_time, default_recall) = built[0];
        let label = if build_ef == REDIS_DEFAULT_BUILD_EF {
            format!("{build_ef} (default)")
        } else {
            build_ef.to_string()
        };
        println!(
            "{label:<14} {per_call:>12.1} {:>12.2} {:>9.4} {:>10.4} {:>+9.4} {:>+10.4}",
            per_call / default_time.max(f64::MIN_POSITIVE),
            recall[0],
            recall[1],
            recall[0] - default_recall[0],
            recall[1] - default_recall[1]
        );
    }
    let default_recall = built[0].2;
    let chosen_build = built
        .iter()
        .filter(|(_, _, recall)| {
            recall[0] >= default_recall[0] - RECALL_TOLERANCE
                && recall[1] >= default_recall[1] - RECALL_TOLERANCE
        })
        .map(|(ef, _, _)| *ef)
        .min()
        .unwrap_or(REDIS_DEFAULT_BUILD_EF);
    println!();
    println!(
        "smallest build EF within {RECALL_TOLERANCE} of the default-built set's recall at both \
         depths (searched at EF {search_ef}): {chosen_build} (configured store.vector_build_ef: {})",
        config.store.vector_build_ef
    );
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
}
