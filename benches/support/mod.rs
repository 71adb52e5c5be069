//! Measurement helpers shared by the benches.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

pub const DIMS: usize = 384;

#[derive(Debug, Clone, Copy)]
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
    percentiles(samples)
}

/// Like [`measure`] for two calls at once, alternating them call by call, so both meet the
/// same disturbances (a fork for a background save or an index's garbage collection stalls
/// whatever runs at that moment): a fair ratio on a shared machine.
pub async fn measure_pair<A, FutA, B, FutB>(
    iterations: usize,
    make_a: A,
    make_b: B,
) -> (Percentiles, Percentiles)
where
    A: Fn(usize) -> FutA,
    FutA: std::future::Future<Output = ()>,
    B: Fn(usize) -> FutB,
    FutB: std::future::Future<Output = ()>,
{
    let calls: [Call<'_>; 2] = [
        Box::new(|i| Box::pin(make_a(i))),
        Box::new(|i| Box::pin(make_b(i))),
    ];
    let [a, b] = measure_interleaved(iterations, &calls)
        .await
        .try_into()
        .expect("two calls, two results");
    (a, b)
}

/// One measured call: the iteration number in, a future to time out.
pub type Call<'a> = Box<dyn Fn(usize) -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a>;

/// [`measure_pair`] for any number of calls: each round runs every call once.
///
/// Call `k` of round `r` is handed the number `r·n + k` (n calls), so calls that pick their
/// query by it never search a vector another call searched just before: a repeated query walks
/// an HNSW path already in the CPU's caches, and was measured here at about half the time of a
/// fresh one (the first call of each round paid for the others' warm caches).
///
/// Each round runs the calls in an order of its own, drawn from a fixed seed, so every call
/// follows every other about equally often: what runs just before a call changes its time (the
/// original plan's search on another server evicts our server's caches for whatever runs next,
/// about 50 µs here). Rounds used to start one call further on, in a fixed cycle, so each call
/// followed the same neighbour in all but one round in n: the first call of the list (the
/// injection) always came after the original plan, and the floor's search after the injection.
///
/// A call picking from a pool of `len` queries by `number % len` meets only the queries of its
/// own residue class when `len` and `n` share a factor: with 64 queries and 8 calls, each call
/// searched its own 8 vectors, none of the others', and the paths compared were not given the
/// same work (an HNSW search's cost varies from vector to vector). Pools are sized by
/// [`query_pool_size`] so every call meets every query.
pub async fn measure_interleaved(iterations: usize, calls: &[Call<'_>]) -> Vec<Percentiles> {
    let n = calls.len();
    for round in 0..(iterations / 10).max(1) {
        for (k, call) in calls.iter().enumerate() {
            call(round * n + k).await;
        }
    }
    let mut samples: Vec<Vec<Duration>> = calls
        .iter()
        .map(|_| Vec::with_capacity(iterations))
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1e_a7ed);
    for round in 0..iterations.max(1) {
        order.shuffle(&mut rng);
        for &k in &order {
            let started = Instant::now();
            calls[k](round * n + k).await;
            samples[k].push(started.elapsed());
        }
    }
    samples.into_iter().map(percentiles).collect()
}

fn percentiles(mut samples: Vec<Duration>) -> Percentiles {
    samples.sort();
    let at = |q: f64| {
        samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)].as_secs_f64() * 1000.0
    };
    Percentiles {
        p50: at(0.50),
        p99: at(0.99),
    }
}

/// Whether each of up to `calls` interleaved calls, picking from a pool of `len` queries by
/// `number % len` ([`measure_interleaved`]), meets every query: `len` shares no factor with
/// any call count up to `calls`.
pub fn every_call_meets_every_query(len: usize, calls: usize) -> bool {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    (2..=calls).all(|n| gcd(len, n) == 1)
}

/// The first pool size from `wanted` up that [`every_call_meets_every_query`] (a prime above
/// `calls` always does).
pub fn query_pool_size(wanted: usize, calls: usize) -> usize {
    (wanted.max(calls + 1)..)
        .find(|&len| every_call_meets_every_query(len, calls))
        .expect("a prime above `calls` always qualifies")
}

pub fn random_unit(rng: &mut impl Rng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIMS).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

/// Topics conversations keep coming back to (the ingest and replicas benches).
pub const TOPICS: [&str; 24] = [
    "green tea",
    "jazz",
    "rainy days",
    "autumn",
    "cilantro",
    "science fiction",
    "chess",
    "owls",
    "opera",
    "small talk",
    "spicy food",
    "board games",
    "poetry",
    "the ocean",
    "thunderstorms",
    "handwritten letters",
    "baking bread",
    "mathematics",
    "minimalism",
    "reality tv",
    "crowded parties",
    "old maps",
    "birdwatching",
    "vinyl records",
];

/// Topic of event `n` when conversations repeat themselves: 24 topics, each voiced by the
/// `personas` personas in turn.
pub fn repeated_topic(n: usize, personas: usize) -> String {
    TOPICS[(n / personas.max(1)) % TOPICS.len()].to_string()
}

/// A topic no other event has (3000 combinations, then numbered).
pub fn distinct_topic(n: usize) -> String {
    const COLOURS: [&str; 10] = [
        "red", "blue", "green", "yellow", "purple", "orange", "white", "black", "grey", "golden",
    ];
    const MATERIALS: [&str; 10] = [
        "wooden", "glass", "paper", "silk", "stone", "copper", "woollen", "leather", "clay",
        "silver",
    ];
    const THINGS: [&str; 30] = [
        "chairs", "lamps", "kites", "boats", "bowls", "clocks", "maps", "masks", "bells", "boxes",
        "cups", "doors", "fans", "gloves", "hats", "jars", "keys", "knives", "mirrors", "pens",
        "plates", "rings", "ropes", "scarves", "shoes", "spoons", "tables", "vases", "windows",
        "bottles",
    ];
    let i = n % 3000;
    let topic = format!(
        "{} {} {}",
        COLOURS[i % 10],
        MATERIALS[(i / 10) % 10],
        THINGS[i / 100]
    );
    if n < 3000 {
        topic
    } else {
        format!("{topic} number {}", n / 3000)
    }
}

/// CPU seconds (user + system) a process has used so far, from /proc (0 where unreadable).
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at its closing parenthesis.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    (ticks(11) + ticks(12)) / 100.0
}

/// Processes whose command name (`/proc/<pid>/comm`) is `name`, e.g. the NATS servers the
/// services run.
pub fn pids_named(name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == name)
        })
        .collect()
}

/// `INFO <section>` of every master, the named numeric fields summed over fields and masters.
pub async fn info_sum(
    store: &persona_prefs::store::PreferenceStore,
    section: &str,
    fields: &[&str],
) -> f64 {
    let mut connection = store.connection();
    let replies = connection
        .query_every_master(redis::cmd("INFO").arg(section))
        .await
        .unwrap();
    replies
        .into_iter()
        .map(|(_, reply)| {
            let text = persona_prefs::store::query::value_to_string(&reply);
            text.lines()
                .filter_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    fields
                        .contains(&name)
                        .then(|| value.trim().parse::<f64>().ok())?
                })
                .sum::<f64>()
        })
        .sum()
}

/// CPU seconds Redis has used, summed over the masters (`INFO cpu`).
pub async fn redis_cpu_seconds(store: &persona_prefs::store::PreferenceStore) -> f64 {
    info_sum(store, "cpu", &["used_cpu_user", "used_cpu_sys"]).await
}

/// Redis's own time per command since the last `CONFIG RESETSTAT` (`INFO commandstats`,
/// summed over the masters): (command, calls, microseconds), the most time first. A script's
/// time includes the commands it calls, which are also counted under their own names.
pub async fn command_times(
    store: &persona_prefs::store::PreferenceStore,
) -> Vec<(String, u64, u64)> {
    let mut connection = store.connection();
    let replies = connection
        .query_every_master(redis::cmd("INFO").arg("commandstats"))
        .await
        .unwrap();
    let mut totals: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for (_, reply) in replies {
        let text = persona_prefs::store::query::value_to_string(&reply);
        for line in text.lines() {
            let Some((name, fields)) = line
                .strip_prefix("cmdstat_")
                .and_then(|rest| rest.split_once(':'))
            else {
                continue;
            };
            let field = |key: &str| -> u64 {
                fields
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
                    .and_then(|value| value.parse().ok())
                    .unwrap_or(0)
            };
            let total = totals.entry(name.to_string()).or_default();
            total.0 += field("calls");
            total.1 += field("usec");
        }
    }
    let mut times: Vec<(String, u64, u64)> = totals
        .into_iter()
        .map(|(name, (calls, usec))| (name, calls, usec))
        .collect();
    times.sort_by_key(|time| std::cmp::Reverse(time.2));
    times
}

/// `CONFIG RESETSTAT` on every master: [`command_times`] counts from here.
pub async fn reset_command_times(store: &persona_prefs::store::PreferenceStore) {
    let mut connection = store.connection();
    connection
        .query_every_master(redis::cmd("CONFIG").arg("RESETSTAT"))
        .await
        .unwrap();
}

/// Publishes `events` events, each one persona message voicing one opinion ("I love
/// <topic>."), over personas `p0` … `p{personas - 1}` in turn, and waits until JetStream has
/// stored them all. Published without waiting for each ack (unlike `client::publish_event`),
/// so the load is not paced by round trips.
pub async fn publish_opinion_events(
    app: &persona_prefs::app::App,
    name: &str,
    events: usize,
    personas: usize,
    topic_of: fn(usize) -> String,
) {
    publish_messages(app, name, events, personas, |n| {
        format!("I love {}.", topic_of(n))
    })
    .await
}

/// [`publish_opinion_events`] with the persona message `message_of(n)`, whatever it holds.
pub async fn publish_messages(
    app: &persona_prefs::app::App,
    name: &str,
    events: usize,
    personas: usize,
    message_of: impl Fn(usize) -> String,
) {
    let mut acks = Vec::with_capacity(events);
    for n in 0..events {
        let persona = format!("p{}", n % personas);
        let event = serde_json::json!({
            "event_id": format!("{name}-{n}"), "persona_id": persona, "platform": "bench", "channel_id": "c",
            "messages": [{"message_id": format!("{name}-{n}-p"), "role": "persona",
                          "content": message_of(n),
                          "timestamp": format!("2026-11-20T10:{:02}:{:02}Z", (n / 60) % 60, n % 60)}]
        });
        let subject =
            persona_prefs::subjects::event_subject(&app.config.ingest.subject_prefix, &persona);
        acks.push(
            app.js
                .publish(subject, serde_json::to_vec(&event).unwrap().into())
                .await
                .unwrap(),
        );
        // The client holds a bounded number of acks in flight and a publish waits for room:
        // left unawaited past that bound, the publishing stalls for good (8 000 at once did).
        if acks.len() == 1000 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }
}

/// A chat line no other event has that voices no view, in no phrasing the rules read: what
/// most of a persona's messages are ("the train left at 412 so I walked the rest of the way").
pub fn plain_chat(n: usize) -> String {
    const LINES: [&str; 6] = [
        "we got back from the market around {} and my brother cooked dinner",
        "the train left at {} so I walked the rest of the way",
        "my sister moved to a flat on street number {} last week",
        "I spent the afternoon sorting {} old photos from the attic",
        "we drove {} miles yesterday to see my grandparents",
        "the meeting got moved to room {} on the third floor",
    ];
    LINES[n % LINES.len()].replace("{}", &(n / LINES.len() + 2).to_string())
}

/// Line `n` (cycling) of the development set's messages (`tests/data/extraction_development.jsonl`:
/// 8 000 lines of people's chat, labelled, a tuning set), as a persona would send them: real
/// chat, where most lines voice no view and some voice one or two, in every phrasing. What an
/// extractor costs there, not on lines made for the rules, is what a deployment pays.
pub fn real_chat(n: usize) -> String {
    let lines = real_chat_lines();
    lines[n % lines.len()].text.clone()
}

/// The development set's lines that hold a labelled view, in turn: what a perfect gate in
/// front of a reader would pass it.
pub fn real_chat_holding_a_view(n: usize) -> String {
    let holding = &real_chat_parts().0;
    holding[n % holding.len()].clone()
}

/// The development set's other lines (no labelled view), in turn.
pub fn real_chat_without_a_view(n: usize) -> String {
    let without = &real_chat_parts().1;
    without[n % without.len()].clone()
}

/// The share of the development set's lines that hold a labelled view.
pub fn real_chat_holding_share() -> f64 {
    let (holding, without) = real_chat_parts();
    holding.len() as f64 / (holding.len() + without.len()) as f64
}

fn real_chat_parts() -> &'static (Vec<String>, Vec<String>) {
    static PARTS: std::sync::OnceLock<(Vec<String>, Vec<String>)> = std::sync::OnceLock::new();
    PARTS.get_or_init(|| {
        let (holding, without): (Vec<_>, Vec<_>) = real_chat_lines()
            .iter()
            .partition(|labelled| !labelled.opinions.is_empty());
        let texts = |lines: Vec<&persona_prefs::extract::evaluate::Labelled>| {
            lines
                .into_iter()
                .map(|labelled| labelled.text.clone())
                .collect()
        };
        (texts(holding), texts(without))
    })
}

fn real_chat_lines() -> &'static [persona_prefs::extract::evaluate::Labelled] {
    static LINES: std::sync::OnceLock<Vec<persona_prefs::extract::evaluate::Labelled>> =
        std::sync::OnceLock::new();
    LINES.get_or_init(|| {
        persona_prefs::extract::evaluate::parse_labelled(
            persona_prefs::extract::evaluate::DEVELOPMENT_SET.1,
        )
        .expect("the development set parses")
    })
}

/// Adds and reinforcements stored for personas `p0` … `p{personas - 1}`: each bench event
/// voices one opinion, so this must equal the events sent, or a rate counted lost work.
pub async fn effects_stored(store: &persona_prefs::store::PreferenceStore, personas: usize) -> u64 {
    let options = persona_prefs::store::ListOptions {
        limit: 10_000,
        ..Default::default()
    };
    let mut effects = 0;
    for persona in 0..personas {
        for preference in store
            .list_preferences(&format!("p{persona}"), &options)
            .await
            .unwrap()
        {
            effects += 1 + preference.reinforcement_count;
        }
    }
    effects
}

pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One preference of the bench data set.
pub struct BenchPreference {
    pub persona: String,
    pub strength: f64,
    pub related_user: Option<String>,
    pub embedding: Vec<f32>,
}

/// The data set the store and inject benches share: persona `p0` with `prefs` preferences
/// among `personas - 1` personas of `other` each, random unit topic vectors and strengths,
/// every tenth preference about a user.
pub fn bench_data(
    personas: usize,
    prefs: usize,
    other: usize,
    rng: &mut impl Rng,
) -> Vec<BenchPreference> {
    let mut data = Vec::new();
    for persona in 0..personas {
        for i in 0..(if persona == 0 { prefs } else { other }) {
            data.push(BenchPreference {
                persona: format!("p{persona}"),
                strength: rng.random_range(0.1..1.0),
                // One in ten about a user, spread over 50 users (user0..user49), so
                // that the users the benches name (user1, user2) have some: before
                // 2026-11-26 only user0, user10, .. did, and the user pass ran empty.
                related_user: (i % 10 == 0).then(|| format!("user{}", (i / 10) % 50)),
                embedding: random_unit(rng),
            });
        }
    }
    data
}

/// Loads the data set through the store (this layout: hashes, per-persona vector sets and
/// sorted sets), each preference as ingest writes it: from a first voicing, with its
/// provenance (who and which messages), a topic of a few words, an opinion of 60 to 110
/// characters and its timeline. Returns how many were loaded.
pub async fn load_personas(
    store: &persona_prefs::store::PreferenceStore,
    data: &[BenchPreference],
) -> usize {
    use futures::StreamExt;
    use persona_prefs::model::timeline::Voicing;
    use persona_prefs::store::{Provenance, Stance, WriteGuard};
    use persona_prefs::timestamp::Timestamp;
    const TOPICS: [&str; 8] = [
        "late-night jazz",
        "green tea",
        "rainy days",
        "science fiction novels",
        "open-plan offices",
        "long walks by the sea",
        "board games",
        "country music",
    ];
    const OPINIONS: [&str; 4] = [
        "I find it oddly comforting, especially on a quiet evening.",
        "Honestly, I can't stand it; it wears me out after a few minutes every single time.",
        "It is one of the few things I would defend to anyone, even when they laugh at me for it.",
        "I used to dismiss it, but these days I think it is genuinely underrated by most people.",
    ];
    // Voiced when loaded (to the second, so a record is as long in every run), as a persona's
    // strongest views are voiced lately. A fixed date decayed every view alike by the days
    // since (5 % a week at the default 90-day half-life), and the residents' walk, which must
    // read every entry whose stored strength could still beat what it keeps, read every entry
    // within 5 % of the strongest: at 100 000 a persona, its whole limit, so "voiced lately"
    // measured the worst case.
    let at = Timestamp::from(
        time::OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .expect("0 is a valid nanosecond"),
    );
    let mut adds = futures::stream::iter(data.iter().enumerate().map(|(i, preference)| {
        if i > 0 && i % 100_000 == 0 {
            println!("  {i} preferences loaded");
        }
        let store = store.clone();
        let voicing = Voicing {
            at,
            stance: Some(if i % 3 == 0 {
                Stance::Against
            } else {
                Stance::For
            }),
            strength: preference.strength,
            topic: format!("{} {}", TOPICS[i % TOPICS.len()], i % 97),
            opinion: OPINIONS[i % OPINIONS.len()].to_string(),
            category: "aesthetic".into(),
            provenance: Provenance {
                triggering_user_id: format!("user{}", i % 50),
                triggering_message_id: format!("msg-{i:08}"),
                persona_message_id: format!("msg-{:08}", i + 1),
                source_platform: "discord".into(),
                source_channel_id: format!("channel-{}", i % 20),
            },
            related_user_ids: preference.related_user.iter().cloned().collect(),
            related_kg_uuids: Vec::new(),
        };
        let persona = preference.persona.clone();
        let embedding = preference.embedding.clone();
        async move {
            store
                .add_voiced(&persona, voicing, None, &embedding, WriteGuard::default())
                .await
                .unwrap()
        }
    }))
    .buffer_unordered(64);
    while adds.next().await.is_some() {}
    data.len()
}

/// The original system's layout for the same data (seed 000): hashes `<prefix>:persona_pref:
/// <persona>:<id>` under one shared RediSearch index with a persona TAG filter and an HNSW
/// field. Waits until the index has read every hash.
pub async fn load_original_layout(
    connection: &mut persona_prefs::store::RedisConnection,
    prefix: &str,
    index: &str,
    data: &[BenchPreference],
) {
    let _: redis::Value = redis::cmd("FT.CREATE")
        .arg(index)
        .arg(&["ON", "HASH", "PREFIX", "1"][..])
        .arg(format!("{prefix}:persona_pref:"))
        .arg(
            &[
                "SCHEMA",
                "persona_id",
                "TAG",
                "category",
                "TAG",
                "active",
                "TAG",
            ][..],
        )
        .arg(&["related_user_ids_index", "TAG", "strength", "NUMERIC"][..])
        .arg(&["embedding", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM"][..])
        .arg(DIMS)
        .arg(&["DISTANCE_METRIC", "COSINE"][..])
        .query_async(connection)
        .await
        .unwrap();
    for (chunk_number, chunk) in data.chunks(1000).enumerate() {
        let mut pipe = redis::pipe();
        for (i, preference) in chunk.iter().enumerate() {
            let id = format!("o{}", chunk_number * 1000 + i);
            pipe.cmd("HSET")
                .arg(format!("{prefix}:persona_pref:{}:{id}", preference.persona))
                .arg(&["id", id.as_str(), "persona_id", preference.persona.as_str()][..])
                .arg(
                    &[
                        "name",
                        "bench topic",
                        "category",
                        "intellectual",
                        "active",
                        "1",
                    ][..],
                )
                .arg("opinion")
                .arg("I hold a benchmark opinion about something or other.")
                .arg("strength")
                .arg(preference.strength)
                .arg("related_user_ids_index")
                .arg(preference.related_user.clone().unwrap_or_default())
                .arg("embedding")
                .arg(persona_prefs::store::query::vector_to_bytes(
                    &preference.embedding,
                ))
                .ignore();
        }
        let _: () = pipe.query_async(connection).await.unwrap();
    }
    for _ in 0..3000 {
        let info: Vec<redis::Value> = redis::cmd("FT.INFO")
            .arg(index)
            .query_async(connection)
            .await
            .unwrap();
        let words: Vec<String> = info
            .iter()
            .map(persona_prefs::store::query::value_to_string)
            .collect();
        let at = words.iter().position(|w| w == "percent_indexed").unwrap();
        if words[at + 1].parse::<f64>().unwrap_or(0.0) >= 1.0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The original system's injection plan (seed 000): one KNN over the shared index filtered to
/// the persona, then one hard-filter query per present user, each awaited before the next.
pub async fn original_injection_plan(
    connection: &mut persona_prefs::store::RedisConnection,
    index: &str,
    query: &[f32],
    users: &[String],
) {
    let bytes = persona_prefs::store::query::vector_to_bytes(query);
    let _: redis::Value = redis::cmd("FT.SEARCH")
        .arg(index)
        .arg("(@persona_id:{p0} @active:{1})=>[KNN 16 @embedding $vec AS score]")
        .arg(&["PARAMS", "2", "vec"][..])
        .arg(bytes)
        .arg(&["SORTBY", "score", "LIMIT", "0", "16", "DIALECT", "2"][..])
        .query_async(connection)
        .await
        .unwrap();
    for user in users {
        let _: redis::Value = redis::cmd("FT.SEARCH")
            .arg(index)
            .arg(format!(
                "@persona_id:{{p0}} @active:{{1}} @related_user_ids_index:{{{user}}}"
            ))
            .arg(&["LIMIT", "0", "16", "DIALECT", "2"][..])
            .query_async(connection)
            .await
            .unwrap();
    }
}

/// The original system's find_conflicts: a top-5 KNN over the shared index, persona-filtered.
pub async fn original_find_conflicts(
    connection: &mut persona_prefs::store::RedisConnection,
    index: &str,
    query: &[f32],
) {
    let _: redis::Value = redis::cmd("FT.SEARCH")
        .arg(index)
        .arg("(@persona_id:{p0} @active:{1})=>[KNN 5 @embedding $vec AS score]")
        .arg(&["PARAMS", "2", "vec"][..])
        .arg(persona_prefs::store::query::vector_to_bytes(query))
        .arg(&["SORTBY", "score", "LIMIT", "0", "5", "DIALECT", "2"][..])
        .query_async(connection)
        .await
        .unwrap();
}

/// The new floor: one raw VSIM of `count` over persona p0's vector set per call, the query
/// picked by the call's number, reply unparsed. It is the service's own command
/// (`query::semantic_vsim_command_for_bytes`: the same exploration, `store.vector_search_ef`, in
/// Redis's main thread, and with a `min_relevance` above 0, as injection sends it, without the
/// hits too far to inject), so the floor differs from the service's path only by what the
/// service adds. find_conflicts' floor passes 0: it asks for every hit, as ingest does.
pub fn raw_vsim_call<'a>(
    connection: &'a persona_prefs::store::RedisConnection,
    keys: &'a persona_prefs::store::Keys,
    queries: &'a [Vec<f32>],
    count: usize,
    ef: usize,
    min_relevance: f64,
) -> Call<'a> {
    Box::new(move |i| {
        let mut connection = connection.clone();
        let command = persona_prefs::store::query::semantic_vsim_command_for_bytes(
            keys.vectors("p0"),
            &persona_prefs::store::query::vector_to_bytes(&queries[i % queries.len()]),
            count,
            ef,
            min_relevance,
        );
        Box::pin(async move {
            let _: redis::Value = command.query_async(&mut connection).await.unwrap();
        })
    })
}

/// The raw searches an injection with present users cannot do without, in one round trip as
/// the store makes them: [`raw_vsim_call`]'s search of the persona's set and a `VSIM` of each
/// user's own vector set (`Keys::about_vectors`), pipelined. A floor that prices the user pass,
/// printed beside the one that does not.
pub fn raw_vsim_with_users_call<'a>(
    connection: &'a persona_prefs::store::RedisConnection,
    keys: &'a persona_prefs::store::Keys,
    queries: &'a [Vec<f32>],
    users: &'a [String],
    count: usize,
    ef: usize,
    min_relevance: f64,
) -> Call<'a> {
    Box::new(move |i| {
        let mut connection = connection.clone();
        let query = &queries[i % queries.len()];
        let mut pipe = redis::pipe();
        pipe.add_command(
            persona_prefs::store::query::semantic_vsim_command_for_bytes(
                keys.vectors("p0"),
                &persona_prefs::store::query::vector_to_bytes(query),
                count,
                ef,
                min_relevance,
            ),
        );
        for user in users {
            pipe.add_command(persona_prefs::store::query::vsim_command(
                keys.about_vectors("p0", user),
                query,
                count,
                ef,
                false,
            ));
        }
        let route = keys.vectors("p0");
        Box::pin(async move {
            let _: Vec<redis::Value> = connection.pipeline_for_key(&route, &pipe).await.unwrap();
        })
    })
}

/// A Redis server (with RediSearch) of the bench's own, for the original layout; killed on
/// drop. `None` when the binaries are not named (then the original layout shares our server).
pub struct OriginalServer {
    process: std::process::Child,
    pub connection: persona_prefs::store::RedisConnection,
}

impl OriginalServer {
    pub async fn start(config: &persona_prefs::config::Config) -> Option<OriginalServer> {
        let server = std::env::var("PERSONA_PREFS_REDIS_SERVER").ok()?;
        let module = std::env::var("PERSONA_PREFS_REDISEARCH_MODULE").ok()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let process = std::process::Command::new(server)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--loadmodule", &module])
            .stdout(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let mut original = config.clone();
        original.redis.url = format!("redis://127.0.0.1:{port}");
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        loop {
            match persona_prefs::store::PreferenceStore::connect(&original.redis, &original.store)
                .await
            {
                Ok(store) => {
                    println!("the original layout runs on its own Redis server (port {port})");
                    return Some(OriginalServer {
                        process,
                        connection: store.connection(),
                    });
                }
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(error) => panic!("the original layout's Redis did not start: {error}"),
            }
        }
    }
}

impl Drop for OriginalServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
