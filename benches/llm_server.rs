//! The LLM path against a real one-slot llama.cpp server (`scripts/services llm-start`): 150
//! one-opinion events through JetStream, the worker with the `llm` extractor, and Redis, with
//! today's defaults. What it must show: every event settles (processed, or dead-lettered with a
//! reason) and no request times out. Printed beside the floor: the same server answering the
//! same questions one after another, with nothing else in flight (a one-slot server cannot do
//! better than that, one request at a time).
//!
//! `scripts/bench llm_server` (it starts the server), or `cargo bench --bench llm_server` with
//! REDIS_URL, NATS_URL, PERSONA_PREFS_MODEL_DIR and PERSONA_PREFS_LLM_URL set.
//! PERSONA_PREFS_BENCH_EVENTS sets how many events (150).

use std::time::{Duration, Instant};

use persona_prefs::app::{App, wait_until_drained};
use persona_prefs::config::Config;
use persona_prefs::extract::chat::ChatModel;
use persona_prefs::extract::llm::LlmExtractor;
use persona_prefs::extract::{ExtractionInput, Extractor, ExtractorKind};
use serde_json::json;

const SAYINGS: [&str; 6] = [
    "I love green tea.",
    "Honestly, thunderstorms are wonderful.",
    "I can't stand crowds.",
    "Jazz is the best music there is.",
    "I hate cold coffee.",
    "Poetry matters a great deal to me.",
];

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run `scripts/bench llm_server`, which starts the services")
    })
}

fn config() -> Config {
    let mut config = Config::defaults();
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    config.redis.url = env("REDIS_URL");
    config.nats.url = env("NATS_URL");
    config.embed.model_dir = env("PERSONA_PREFS_MODEL_DIR");
    config.redis.key_prefix = format!("bench_llm_{run}");
    config.redis.index_name = format!("idx:bench_llm_{run}");
    config.ingest.stream = format!("BENCH_LLM_{run}");
    config.ingest.dlq_stream = format!("BENCH_LLM_DLQ_{run}");
    config.ingest.consumer = format!("bench_llm_{run}");
    config.ingest.subject_prefix = format!("bench.llm.{run}.messages");
    config.ingest.dlq_subject_prefix = format!("bench.llm.{run}.dlq");
    config.metrics.listen = String::new();
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm.base_url = env("PERSONA_PREFS_LLM_URL");
    config.extract.llm.model = std::env::var("PERSONA_PREFS_LLM_MODEL_NAME").unwrap_or_default();
    config
}

/// The value of a counter in the rendered Prometheus text (0 when absent).
fn counter(rendered: &str, name_and_labels: &str) -> f64 {
    rendered
        .lines()
        .find(|line| line.starts_with(name_and_labels))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::main]
async fn main() {
    let metrics = persona_prefs::telemetry::install_recorder(&[]).unwrap();
    let events: usize = std::env::var("PERSONA_PREFS_BENCH_EVENTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(150);
    let config = config();

    // The floor: one question at a time, nothing else in flight.
    let floor_model = ChatModel::new(&config.extract.llm).unwrap();
    let extractor = LlmExtractor::with_model(
        std::sync::Arc::new(floor_model),
        config.extract.max_opinions_per_message,
        &config.store.categories,
    );
    let floor_questions = SAYINGS.len() * 2;
    let started = Instant::now();
    for n in 0..floor_questions {
        let input = ExtractionInput {
            persona_message: SAYINGS[n % SAYINGS.len()],
            context: Vec::new(),
            participants: &[],
        };
        let _ = extractor.extract(&input).await;
    }
    let floor_each = started.elapsed() / floor_questions as u32;

    let app = App::start(config.clone()).await.unwrap();
    let consumer = app.consumer().await.unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped));
    let started = Instant::now();
    for n in 0..events {
        let event = json!({"event_id": format!("bench-{n}"), "persona_id": format!("p{}", n % 4),
            "platform": "bench", "channel_id": "c", "messages": [
                {"message_id": format!("bench-{n}-0"), "role": "user", "user_id": "u1",
                 "content": "What do you think?", "timestamp": "2026-11-20T09:00:00Z"},
                {"message_id": format!("bench-{n}-1"), "role": "persona",
                 "content": SAYINGS[n % SAYINGS.len()], "timestamp": format!("2026-11-20T09:{:02}:{:02}Z", (n / 60) % 60, n % 60)}]});
        persona_prefs::client::publish_event(
            &app.js,
            &config.ingest.subject_prefix,
            event["persona_id"].as_str().unwrap(),
            serde_json::to_vec(&event).unwrap(),
            None,
        )
        .await
        .unwrap();
    }
    let drained = wait_until_drained(&app.js, consumer.clone(), Duration::from_secs(3600)).await;
    let took = started.elapsed();
    let _ = stop.send(true);
    let _ = worker.await;

    let rendered = metrics.render();
    let requests = |outcome: &str| {
        counter(
            &rendered,
            &format!("persona_prefs_llm_requests_total{{outcome=\"{outcome}\"}}"),
        )
    };
    let dead_letters = app
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages;
    let mut info = consumer.clone();
    let redelivered = info.info().await.map(|i| i.num_redelivered).unwrap_or(0);
    println!(
        "llm_server: {events} one-opinion events through a real one-slot llama.cpp server ({})",
        config.extract.llm.model
    );
    println!(
        "  settled: {} in {:.1} s, {:.2} s an event; dead-lettered {dead_letters}, redelivered {redelivered}",
        if drained.is_ok() { "all" } else { "NOT all" },
        took.as_secs_f64(),
        took.as_secs_f64() / events as f64
    );
    println!(
        "  LLM requests: ok {}, timeout {}, cut off {}, malformed {}, server error {}, connection error {}",
        requests("ok"),
        requests("timeout"),
        requests("cut_off"),
        requests("malformed"),
        requests("server_error"),
        requests("connection_error"),
    );
    println!(
        "  floor: the same server, one question at a time and nothing else in flight: {:.2} s a question; the run took {:.2}x that an event",
        floor_each.as_secs_f64(),
        (took.as_secs_f64() / events as f64) / floor_each.as_secs_f64().max(1e-9)
    );
    let _ = app.js.delete_stream(&config.ingest.stream).await;
    let _ = app.js.delete_stream(&config.ingest.dlq_stream).await;
    for persona in 0..4 {
        let _ = app.store.delete_persona(&format!("p{persona}")).await;
    }
}
