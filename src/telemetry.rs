//! Telemetry as typed events: each function here is one event, recording its metric (and,
//! where useful, a log line) in one place. Metric names are `persona_prefs_<noun>_<unit>`;
//! labels are bounded sets (operation, action, outcome, reason), never persona or user ids.
//!
//! **Invariant:** this module imports nothing of the crate: every stage records through it, so
//! an import the other way would tie every stage to every other (`tests/architecture.rs`).

use std::time::Duration;

use metrics::{counter, gauge, histogram};

pub const NAMESPACE: &str = "persona_prefs";

/// What kind of metric a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    /// A histogram with explicit buckets (`_bucket{le}`, `_sum`, `_count`), so quantiles can be
    /// computed across replicas with `histogram_quantile`.
    Histogram,
    /// A histogram of durations, in seconds ([`SECONDS_BUCKETS`]).
    Seconds,
}

/// Buckets of every latency histogram, in seconds: sub-millisecond store calls up to LLM calls
/// that take tens of seconds.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Buckets of the best-match similarity: fine around the match thresholds (0.7–0.9).
pub const SIMILARITY_BUCKETS: &[f64] = &[
    0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0,
];
/// Buckets of the embedding batch size (texts).
pub const BATCH_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Installs the Prometheus recorder with every histogram's buckets, registers the metrics'
/// descriptions and their zero values (the requests of each of `endpoints`, the service's
/// endpoint names, too), and returns the handle `/metrics` renders.
pub fn install_recorder(
    endpoints: &[&'static str],
) -> Result<metrics_exporter_prometheus::PrometheusHandle, metrics_exporter_prometheus::BuildError>
{
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full("persona_prefs_best_match_similarity".into()),
            SIMILARITY_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full("persona_prefs_embed_batch_size".into()),
            BATCH_SIZE_BUCKETS,
        )?
        .install_recorder()?;
    describe(endpoints);
    Ok(handle)
}

/// Every metric this process exports: the one list `describe` registers, and what the
/// alerting rules in `deploy/prometheus/` may name (a test holds both to it).
pub const METRICS: &[(&str, MetricKind, &str)] = &[
    (
        "persona_prefs_build_info",
        MetricKind::Gauge,
        "Always 1; the labels say which build runs (version, git_sha).",
    ),
    (
        "persona_prefs_store_op_seconds",
        MetricKind::Seconds,
        "Latency of one store operation, by op.",
    ),
    (
        "persona_prefs_events_consumed_total",
        MetricKind::Counter,
        "JetStream events received by the ingest worker.",
    ),
    (
        "persona_prefs_events_processed_total",
        MetricKind::Counter,
        "Events whose effects were stored and acked.",
    ),
    (
        "persona_prefs_event_seconds",
        MetricKind::Seconds,
        "Time from receiving an event to its effects being stored and acked.",
    ),
    (
        "persona_prefs_events_duplicate_total",
        MetricKind::Counter,
        "Opinion effects skipped because they were applied before (redelivery or re-publish).",
    ),
    (
        "persona_prefs_events_dead_lettered_total",
        MetricKind::Counter,
        "Events sent to the dead-letter subject, by reason.",
    ),
    (
        "persona_prefs_events_retried_total",
        MetricKind::Counter,
        "Events nak'ed for redelivery after a transient error, by stage.",
    ),
    (
        "persona_prefs_opinions_extracted_total",
        MetricKind::Counter,
        "Opinions found in persona messages.",
    ),
    (
        "persona_prefs_decisions_total",
        MetricKind::Counter,
        "Ingest decisions by action: reinforce, evolve, add, stale, echo, erased.",
    ),
    (
        "persona_prefs_adjudications_total",
        MetricKind::Counter,
        "Grey-zone matches put to the LLM, by outcome (same_stance, opposite_stance, different_topic, failed) and whether the verdict came from the cache.",
    ),
    (
        "persona_prefs_best_match_similarity",
        MetricKind::Histogram,
        "Similarity of the best existing match for each extracted opinion.",
    ),
    (
        "persona_prefs_llm_requests_total",
        MetricKind::Counter,
        "LLM requests by outcome: ok, timeout, connection_error, rate_limited, server_error, rejected, malformed, cut_off (the reply hit max_tokens).",
    ),
    (
        "persona_prefs_llm_request_seconds",
        MetricKind::Seconds,
        "LLM request latency.",
    ),
    (
        "persona_prefs_llm_tokens_total",
        MetricKind::Counter,
        "LLM tokens used, by kind (prompt, completion).",
    ),
    (
        "persona_prefs_embed_batch_seconds",
        MetricKind::Seconds,
        "Latency of one embedding batch.",
    ),
    (
        "persona_prefs_embed_batch_size",
        MetricKind::Histogram,
        "Texts per embedding batch.",
    ),
    (
        "persona_prefs_extraction_gate_total",
        MetricKind::Counter,
        "Persona messages the LLM extractor's gate looked at, by whether it passed them to the model (passed: true) or saved the call (false).",
    ),
    (
        "persona_prefs_rules_check_total",
        MetricKind::Counter,
        "Findings of the rules the check judged (extract.rules_min_sentence_score), by what decided: the word score, sure enough to keep them without the model (by: words), or the model's sentence score (by: model).",
    ),
    (
        "persona_prefs_llm_concurrency_limit",
        MetricKind::Gauge,
        "Requests the LLM server is given at once: its reported slots, then adapted to its answers (halved on timeouts and 429/503, raised while answers come in good time).",
    ),
    (
        "persona_prefs_in_flight_events",
        MetricKind::Gauge,
        "Events being processed right now.",
    ),
    (
        "persona_prefs_consumer_pending",
        MetricKind::Gauge,
        "Messages pending for the durable consumer.",
    ),
    (
        "persona_prefs_dead_letters_stored",
        MetricKind::Gauge,
        "Dead letters waiting in the dead-letter stream (`persona-prefs dlq list` shows them).",
    ),
    (
        "persona_prefs_requests_total",
        MetricKind::Counter,
        "Service requests by endpoint and status.",
    ),
    (
        "persona_prefs_request_seconds",
        MetricKind::Seconds,
        "Service request latency by endpoint.",
    ),
    (
        "persona_prefs_injection_seconds",
        MetricKind::Seconds,
        "Latency of a successful injection, by query kind: text (embedded by the service) or embedding (precomputed).",
    ),
];

/// The label values each labelled counter can take, so every series exists at zero from
/// start-up: a rate or an alert over a series that appears only on its first increment misses
/// that first event (the first dead letter of a process would never fire its alert).
pub const COUNTER_LABELS: &[(&str, &str, &[&str])] = &[
    (
        "persona_prefs_events_dead_lettered_total",
        "reason",
        &[
            "oversize",
            "invalid_utf8",
            "invalid_json",
            "schema",
            "limit",
            "max_deliver",
            "permanent",
        ],
    ),
    (
        "persona_prefs_events_retried_total",
        "stage",
        &["extract", "embed", "store", "lock"],
    ),
    (
        "persona_prefs_decisions_total",
        "action",
        &["reinforce", "evolve", "add", "stale", "echo", "erased"],
    ),
    (
        "persona_prefs_llm_requests_total",
        "outcome",
        &[
            "ok",
            "timeout",
            "connection_error",
            "rate_limited",
            "server_error",
            "rejected",
            "malformed",
            "cut_off",
        ],
    ),
    (
        "persona_prefs_llm_tokens_total",
        "kind",
        &["prompt", "completion"],
    ),
];

/// Registers descriptions so `/metrics` documents itself, the build's identity, and every
/// counter at zero ([`COUNTER_LABELS`]; unlabelled counters and each endpoint's requests too).
pub fn describe(endpoints: &[&'static str]) {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    for &(name, kind, help) in METRICS {
        match kind {
            MetricKind::Counter => describe_counter!(name, help),
            MetricKind::Gauge => describe_gauge!(name, help),
            MetricKind::Histogram => describe_histogram!(name, help),
            MetricKind::Seconds => describe_histogram!(name, Unit::Seconds, help),
        }
    }
    gauge!(
        "persona_prefs_build_info",
        "version" => env!("CARGO_PKG_VERSION"),
        "git_sha" => env!("PERSONA_PREFS_GIT_SHA")
    )
    .set(1.0);
    for &(name, kind, _) in METRICS {
        let labelled = COUNTER_LABELS
            .iter()
            .any(|(labelled, _, _)| *labelled == name);
        let two_labels = [
            "persona_prefs_requests_total",
            "persona_prefs_adjudications_total",
        ];
        if kind == MetricKind::Counter && !labelled && !two_labels.contains(&name) {
            counter!(name).absolute(0);
        }
    }
    for &(name, label, values) in COUNTER_LABELS {
        for &value in values {
            counter!(name, label => value).absolute(0);
        }
    }
    for outcome in [
        "same_stance",
        "opposite_stance",
        "different_topic",
        "failed",
    ] {
        for cached in ["true", "false"] {
            if outcome == "failed" && cached == "true" {
                continue;
            }
            counter!("persona_prefs_adjudications_total", "outcome" => outcome, "cached" => cached)
                .absolute(0);
        }
    }
    for &endpoint in endpoints {
        for status in ["200", "400", "404", "500", "503"] {
            counter!("persona_prefs_requests_total", "endpoint" => endpoint, "status" => status)
                .absolute(0);
        }
    }
}

pub fn store_op(op: &'static str, took: Duration) {
    histogram!("persona_prefs_store_op_seconds", "op" => op).record(took.as_secs_f64());
}

pub fn event_consumed() {
    counter!("persona_prefs_events_consumed_total").increment(1);
}

pub fn event_processed(took: Duration) {
    counter!("persona_prefs_events_processed_total").increment(1);
    histogram!("persona_prefs_event_seconds").record(took.as_secs_f64());
}

pub fn effect_duplicate() {
    counter!("persona_prefs_events_duplicate_total").increment(1);
}

pub fn event_dead_lettered(reason: &'static str) {
    counter!("persona_prefs_events_dead_lettered_total", "reason" => reason).increment(1);
}

pub fn event_retried(stage: &'static str) {
    counter!("persona_prefs_events_retried_total", "stage" => stage).increment(1);
}

pub fn opinions_extracted(count: usize) {
    counter!("persona_prefs_opinions_extracted_total").increment(count as u64);
}

pub fn decision(action: &'static str) {
    counter!("persona_prefs_decisions_total", "action" => action).increment(1);
}

pub fn adjudication(outcome: &'static str, cached: bool) {
    counter!("persona_prefs_adjudications_total", "outcome" => outcome, "cached" => if cached { "true" } else { "false" })
        .increment(1);
}

pub fn best_match_similarity(similarity: f64) {
    histogram!("persona_prefs_best_match_similarity").record(similarity);
}

pub fn llm_request(outcome: &'static str, took: Duration) {
    counter!("persona_prefs_llm_requests_total", "outcome" => outcome).increment(1);
    histogram!("persona_prefs_llm_request_seconds").record(took.as_secs_f64());
}

pub fn llm_tokens(prompt: u64, completion: u64) {
    counter!("persona_prefs_llm_tokens_total", "kind" => "prompt").increment(prompt);
    counter!("persona_prefs_llm_tokens_total", "kind" => "completion").increment(completion);
}

pub fn embed_batch(size: usize, took: Duration) {
    histogram!("persona_prefs_embed_batch_size").record(size as f64);
    histogram!("persona_prefs_embed_batch_seconds").record(took.as_secs_f64());
}

pub fn extraction_gated(passed: bool) {
    counter!("persona_prefs_extraction_gate_total", "passed" => if passed { "true" } else { "false" })
        .increment(1);
}

/// Findings the check on the rules kept on the word score alone, and those the model read.
pub fn rules_checked(by_words: usize, by_model: usize) {
    counter!("persona_prefs_rules_check_total", "by" => "words").increment(by_words as u64);
    counter!("persona_prefs_rules_check_total", "by" => "model").increment(by_model as u64);
}

pub fn llm_concurrency_limit(limit: usize) {
    gauge!("persona_prefs_llm_concurrency_limit").set(limit as f64);
}

pub fn in_flight(count: usize) {
    gauge!("persona_prefs_in_flight_events").set(count as f64);
}

pub fn consumer_pending(count: u64) {
    gauge!("persona_prefs_consumer_pending").set(count as f64);
}

pub fn dead_letters_stored(count: u64) {
    gauge!("persona_prefs_dead_letters_stored").set(count as f64);
}

/// A successful injection; `query` is `text` or `embedding`. Apart from the request histogram
/// because a text query pays for an embedding and the other does not: one latency target
/// cannot fit both.
pub fn injection(query: &'static str, took: Duration) {
    histogram!("persona_prefs_injection_seconds", "query" => query).record(took.as_secs_f64());
}

pub fn request(endpoint: &'static str, status: u16, took: Duration) {
    counter!("persona_prefs_requests_total", "endpoint" => endpoint, "status" => status.to_string()).increment(1);
    histogram!("persona_prefs_request_seconds", "endpoint" => endpoint).record(took.as_secs_f64());
}

/// Serves `/metrics` (Prometheus text), `/healthz` (process is up) and `/readyz` (connected to
/// Redis and NATS, index and streams in place) until `shutdown` turns true, with axum (the
/// same server the inspector page will use) rather than a hand-written responder.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    handle: metrics_exporter_prometheus::PrometheusHandle,
    ready: tokio::sync::watch::Receiver<bool>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    use axum::http::{StatusCode, header};
    use axum::routing::get;
    let routes = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let body = handle.render();
                async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body) }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = *ready.borrow();
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                    }
                }
            }),
        );
    let served = axum::serve(listener, routes)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await;
    if let Err(error) = served {
        tracing::warn!(%error, "metrics listener stopped");
    }
}
