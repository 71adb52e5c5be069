//! Shared test support: real Redis + RediSearch and NATS from `scripts/services`, one key
//! prefix / index / stream name per test so tests run in parallel and leave nothing behind.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use persona_prefs::config::Config;
use persona_prefs::store::{NewPreference, PreferenceStore, Provenance, Stance};
use rand::{Rng, SeedableRng};

pub const DIMS: usize = 384;

pub fn redis_url() -> String {
    std::env::var("REDIS_URL")
        .expect("REDIS_URL is not set: run the tests with scripts/test, which starts the services")
}

pub fn nats_url() -> String {
    std::env::var("NATS_URL")
        .expect("NATS_URL is not set: run the tests with scripts/test, which starts the services")
}

/// A name unique to this test process and call, safe as key prefix, index and stream name.
pub fn unique(label: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "t{}_{}_{}_{}",
        std::process::id(),
        label,
        n,
        rand::rng().random::<u32>()
    )
}

/// Configuration pointing at the test services, with a fresh key prefix and index.
pub fn test_config(label: &str) -> Config {
    let mut config = Config::defaults();
    let name = unique(label);
    config.redis.url = redis_url();
    // `scripts/test` runs the suites a second time against a local Redis Cluster.
    if let Ok(nodes) = std::env::var("REDIS_CLUSTER_NODES") {
        config.redis.cluster_nodes = nodes.split(',').map(str::to_string).collect();
    }
    if let Ok(url) = std::env::var("NATS_URL") {
        config.nats.url = url;
    }
    config.redis.key_prefix = name.clone();
    config.redis.index_name = format!("idx:{name}");
    config.ingest.stream = format!("{name}_events");
    config.ingest.consumer = format!("{name}_worker");
    config.ingest.subject_prefix = format!("{name}.messages");
    config.ingest.dlq_subject_prefix = format!("{name}.dlq");
    config.ingest.dlq_stream = format!("{name}_dlq");
    config.serve.subject_prefix = format!("{name}.prefs");
    config.serve.service_name = format!("pp-{name}");
    config.serve.queue_group = format!("{name}_q");
    config.metrics.listen = String::new();
    if let Ok(dir) = std::env::var("PERSONA_PREFS_MODEL_DIR") {
        config.embed.model_dir = dir;
    }
    config
}

/// A store on its own prefix and index; drops both (and every key under the prefix) on drop.
pub struct TestStore {
    pub store: PreferenceStore,
    pub config: Config,
}

impl TestStore {
    pub async fn new(label: &str) -> TestStore {
        TestStore::with_config(test_config(label)).await
    }

    pub async fn with_config(config: Config) -> TestStore {
        let store = PreferenceStore::connect(&config.redis, &config.store)
            .await
            .expect("connect to redis");
        store.ensure_index().await.expect("ensure index");
        TestStore { store, config }
    }
}

impl std::ops::Deref for TestStore {
    type Target = PreferenceStore;
    fn deref(&self) -> &PreferenceStore {
        &self.store
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        cleanup_redis(&self.config);
    }
}

/// Deletes a test's streams (events and dead letters). Runs on its own thread and runtime so it
/// can be called from `Drop`.
pub fn cleanup_nats(config: &Config) {
    let url = config.nats.url.clone();
    let streams = [
        config.ingest.stream.clone(),
        config.ingest.dlq_stream.clone(),
    ];
    let _ = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let Ok(client) = async_nats::connect(url.as_str()).await else {
                return;
            };
            let js = async_nats::jetstream::new(client);
            for stream in streams {
                let _ = js.delete_stream(&stream).await;
            }
        });
    })
    .join();
}

/// Drops a test's Redis data and NATS streams when it goes out of scope, pass or fail.
pub struct Cleanup(pub Config);

impl Drop for Cleanup {
    fn drop(&mut self) {
        cleanup_redis(&self.0);
        cleanup_nats(&self.0);
    }
}

pub fn cleanup_redis(config: &Config) {
    // On a cluster, every master holds its share of the keys and its own copy of the index.
    let urls = if config.redis.cluster_nodes.is_empty() {
        vec![config.redis.url.clone()]
    } else {
        config.redis.cluster_nodes.clone()
    };
    for url in urls {
        cleanup_node(&url, config);
    }
}

fn cleanup_node(url: &str, config: &Config) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut connection) = client.get_connection() else {
        return;
    };
    let _: redis::RedisResult<redis::Value> = redis::cmd("FT.DROPINDEX")
        .arg(&config.redis.index_name)
        .query(&mut connection);
    let pattern = format!("{}:*", config.redis.key_prefix);
    let cluster = !config.redis.cluster_nodes.is_empty();
    let mut cursor: u64 = 0;
    loop {
        let result: redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query(&mut connection);
        let Ok((next, keys)) = result else { return };
        if cluster {
            // Keys of one node can still be in different slots: one DEL each.
            for key in &keys {
                let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(key).query(&mut connection);
            }
        } else if !keys.is_empty() {
            let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(&keys).query(&mut connection);
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}

/// Waits until every persona `p0`…`p{personas - 1}` holds active preferences whose
/// reinforcement counts, sorted, are `expected`; returns the personas that still differ when
/// `patience` runs out (empty: all as expected). A read that fails or hangs (a server going
/// away) counts as not yet.
pub async fn wait_for_reinforcement_counts(
    store: &PreferenceStore,
    personas: usize,
    expected: &[u64],
    patience: std::time::Duration,
) -> Vec<(String, Vec<u64>)> {
    let deadline = std::time::Instant::now() + patience;
    let mut wrong = Vec::new();
    while std::time::Instant::now() < deadline {
        wrong.clear();
        for persona in 0..personas {
            let persona = format!("p{persona}");
            let options = persona_prefs::store::ListOptions {
                limit: 100,
                ..Default::default()
            };
            let listed = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                store.list_preferences(&persona, &options),
            )
            .await;
            let mut counts: Vec<u64> = match listed {
                Ok(Ok(listed)) => listed.iter().map(|p| p.reinforcement_count).collect(),
                _ => Vec::new(),
            };
            counts.sort();
            if counts != expected {
                wrong.push((persona, counts));
            }
        }
        if wrong.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    wrong
}

/// A persona's active preferences, strongest first (at most 100: tests keep personas small).
pub async fn active_preferences(
    store: &PreferenceStore,
    persona: &str,
) -> Vec<persona_prefs::store::Preference> {
    listed(store, persona, false, 100).await
}

/// All of a persona's preferences, retracted ones too (at most 500).
pub async fn all_preferences(
    store: &PreferenceStore,
    persona: &str,
) -> Vec<persona_prefs::store::Preference> {
    listed(store, persona, true, 500).await
}

async fn listed(
    store: &PreferenceStore,
    persona: &str,
    include_retracted: bool,
    limit: usize,
) -> Vec<persona_prefs::store::Preference> {
    store
        .list_preferences(
            persona,
            &persona_prefs::store::ListOptions {
                include_retracted,
                limit,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .into_iter()
        // Decay depends on when a record is read: comparisons of records ignore it.
        .map(|preference| persona_prefs::store::Preference {
            decayed_strength: None,
            ..preference
        })
        .collect()
}

/// A deterministic random unit vector.
pub fn unit_vector(seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let vector: Vec<f32> = (0..DIMS).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    normalise(vector)
}

/// A unit vector at roughly `similarity` cosine similarity to `base`.
pub fn vector_near(base: &[f32], similarity: f32, seed: u64) -> Vec<f32> {
    let noise = unit_vector(seed ^ 0x9e37_79b9_7f4a_7c15);
    // Remove the component along base so noise is orthogonal, then mix.
    let dot: f32 = noise.iter().zip(base).map(|(n, b)| n * b).sum();
    let orthogonal = normalise(noise.iter().zip(base).map(|(n, b)| n - dot * b).collect());
    let rest = (1.0 - similarity * similarity).max(0.0).sqrt();
    normalise(
        base.iter()
            .zip(&orthogonal)
            .map(|(b, o)| similarity * b + rest * o)
            .collect(),
    )
}

pub fn normalise(vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    vector.into_iter().map(|v| v / norm).collect()
}

pub fn new_preference(
    persona_id: &str,
    name: &str,
    opinion: &str,
    embedding: Vec<f32>,
) -> NewPreference {
    NewPreference {
        persona_id: persona_id.into(),
        name: name.into(),
        opinion: opinion.into(),
        category: "aesthetic".into(),
        stance: Some(Stance::For),
        stance_at: None,
        strength: None,
        provenance: Provenance {
            triggering_user_id: "user-1".into(),
            triggering_message_id: "msg-1".into(),
            persona_message_id: "msg-2".into(),
            source_platform: "discord".into(),
            source_channel_id: "chan-1".into(),
        },
        related_user_ids: Vec::new(),
        related_kg_uuids: Vec::new(),
        embedding,
        inherited_from: None,
    }
}

pub mod cli;
pub mod fake_openai;

/// The status a service's error reply carries in its `Nats-Service-Error-Code` header; `None`
/// for a reply that is not an error.
pub fn service_error_code(reply: &async_nats::Message) -> Option<u16> {
    let code = reply.headers.as_ref()?.get("Nats-Service-Error-Code")?;
    Some(code.as_str().parse().expect("a numeric error code"))
}

/// A worker (and, if asked, the service) running in this process against `config`, as
/// `persona-prefs serve` runs them.
pub struct Running {
    pub app: persona_prefs::app::App,
    pub consumer: async_nats::jetstream::consumer::PullConsumer,
    stop: tokio::sync::watch::Sender<bool>,
    worker: tokio::task::JoinHandle<
        Result<
            persona_prefs::ingest::worker::WorkerReport,
            persona_prefs::ingest::worker::WorkerError,
        >,
    >,
    services: Option<persona_prefs::serve::Services>,
}

impl Running {
    pub async fn worker(config: Config) -> Running {
        let app = persona_prefs::app::App::start(config).await.unwrap();
        let consumer = app.consumer().await.unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped));
        Running {
            app,
            consumer,
            stop,
            worker,
            services: None,
        }
    }

    pub async fn worker_and_service(config: Config) -> Running {
        let mut running = Running::worker(config).await;
        let services = running.app.serve(running.stop.subscribe()).await.unwrap();
        running.services = Some(services);
        running
    }

    /// Publishes an event to its persona's subject and waits for JetStream to store it.
    pub async fn publish_event(&self, event: &serde_json::Value) {
        let persona = event["persona_id"].as_str().expect("persona_id");
        persona_prefs::client::publish_event(
            &self.app.js,
            &self.app.config.ingest.subject_prefix,
            persona,
            serde_json::to_vec(event).unwrap(),
            None,
        )
        .await
        .unwrap();
    }

    /// The consumer's backlog in words, for a failure message: events not yet delivered,
    /// delivered and not yet acked, and redelivered so far. It tells an event still waiting
    /// (slow) from one that is gone (lost).
    pub async fn backlog(&self) -> String {
        let mut consumer = self.consumer.clone();
        match consumer.info().await {
            Ok(info) => format!(
                "consumer backlog: {} pending, {} awaiting ack, {} redelivered",
                info.num_pending, info.num_ack_pending, info.num_redelivered
            ),
            Err(error) => format!("consumer backlog unknown: {error}"),
        }
    }

    /// Waits until every published event is acked.
    pub async fn drain(&self) {
        persona_prefs::app::wait_until_drained(
            &self.app.js,
            self.consumer.clone(),
            std::time::Duration::from_secs(30),
        )
        .await
        .unwrap();
    }

    /// Stops the service and the worker, and waits for them; what the worker did at the end.
    pub async fn stop(self) -> persona_prefs::ingest::worker::WorkerReport {
        let _ = self.stop.send(true);
        if let Some(services) = self.services {
            services.stop().await;
        }
        self.worker.await.unwrap().unwrap()
    }
}

/// A loopback port nothing listens on right now, for a server a test starts itself.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fresh directory under the system temp dir, named after the test.
pub fn scratch_dir(label: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique(label));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Child processes a test started (workers, servers): killed and reaped when it ends, however
/// it ends.
pub struct Children(pub Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Rewrites one persona's memory as layout 1 (`persona-slots-1`) kept it: each active
/// preference's record in its hash as well, its vector-set element holding only what
/// injection reads; then records that layout. For migration tests.
pub async fn as_previous_layout(store: &PreferenceStore, persona_id: &str) {
    let mut connection = store.connection();
    let ids = store.preference_ids(persona_id).await.unwrap();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let records = store.record_fields(persona_id, &id_refs).await.unwrap();
    let vectors = store.keys().vectors(persona_id);
    for (id, record) in ids.iter().zip(records) {
        let record = record.expect("a listed preference has a record");
        let key = store.preference_key(persona_id, id);
        let mut hset = redis::cmd("HSET");
        hset.arg(&key);
        for (name, value) in &record {
            hset.arg(name).arg(value);
        }
        let _: i64 = hset.query_async(&mut connection).await.unwrap();
        let attributes: Option<String> = redis::cmd("VGETATTR")
            .arg(&vectors)
            .arg(id)
            .query_async(&mut connection)
            .await
            .unwrap();
        if let Some(attributes) = attributes {
            let _: redis::Value = redis::cmd("VSETATTR")
                .arg(&vectors)
                .arg(id)
                .arg(injection_view(&attributes).to_string())
                .query_async(&mut connection)
                .await
                .unwrap();
        }
    }
    let _: () = redis::cmd("SET")
        .arg(store.keys().layout())
        .arg(persona_prefs::store::keys::PREVIOUS_LAYOUT)
        .query_async(&mut connection)
        .await
        .unwrap();
}

/// What injection reads of a vector-set element's attributes (`VectorAttributes`): the element
/// of an active preference holds its whole record besides.
pub fn injection_view(attributes: &str) -> serde_json::Value {
    let whole: serde_json::Value = serde_json::from_str(attributes).unwrap();
    whole
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| {
            ["n", "o", "c", "s", "st", "sa", "lr", "u", "rc", "cu"].contains(&name.as_str())
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}
