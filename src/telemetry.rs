//! Telemetry as typed events: each function here is one event, recording its metric (and,
//! where useful, a log line) in one place. Metric names are `persona_prefs_<noun>_<unit>`;
//! labels are bounded sets (operation, action, outcome, reason), never persona or user ids.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

pub const NAMESPACE: &str = "persona_prefs";

/// What kind of metric a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    /// Exported as a per-process summary (quantiles, `_sum`, `_count`).
    Histogram,
    /// A histogram of durations, in seconds.
    Seconds,
}

/// Every metric this process exports: the one list `describe` registers, and what the
/// alerting rules in `deploy/prometheus/` may name (a test holds both to it).
pub const METRICS: &[(&str, MetricKind, &str)] = &[
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
        "persona_prefs_best_match_similarity",
        MetricKind::Histogram,
        "Similarity of the best existing match for each extracted opinion.",
    ),
    (
        "persona_prefs_llm_requests_total",
        MetricKind::Counter,
        "LLM requests by outcome: ok, timeout, rate_limited, server_error, rejected, malformed.",
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
];

/// Registers descriptions so `/metrics` documents itself.
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    for &(name, kind, help) in METRICS {
        match kind {
            MetricKind::Counter => describe_counter!(name, help),
            MetricKind::Gauge => describe_gauge!(name, help),
            MetricKind::Histogram => describe_histogram!(name, help),
            MetricKind::Seconds => describe_histogram!(name, Unit::Seconds, help),
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

pub fn in_flight(count: usize) {
    gauge!("persona_prefs_in_flight_events").set(count as f64);
}

pub fn consumer_pending(count: u64) {
    gauge!("persona_prefs_consumer_pending").set(count as f64);
}

pub fn dead_letters_stored(count: u64) {
    gauge!("persona_prefs_dead_letters_stored").set(count as f64);
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
        .with_graceful_shutdown(async move { crate::ingest::worker::stopped(&mut shutdown).await })
        .await;
    if let Err(error) = served {
        tracing::warn!(%error, "metrics listener stopped");
    }
}
