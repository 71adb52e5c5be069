//! Telemetry as typed events: each function here is one event, recording its metric (and,
//! where useful, a log line) in one place. Metric names are `persona_prefs_<noun>_<unit>`;
//! labels are bounded sets (operation, action, outcome, reason), never persona or user ids.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

pub const NAMESPACE: &str = "persona_prefs";

/// Registers descriptions so `/metrics` documents itself.
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_histogram!(
        "persona_prefs_store_op_seconds",
        Unit::Seconds,
        "Latency of one store operation, by op."
    );
    describe_counter!(
        "persona_prefs_events_consumed_total",
        "JetStream events received by the ingest worker."
    );
    describe_counter!(
        "persona_prefs_events_processed_total",
        "Events whose effects were stored and acked."
    );
    describe_counter!(
        "persona_prefs_events_duplicate_total",
        "Opinion effects skipped because they were applied before (redelivery or re-publish)."
    );
    describe_counter!(
        "persona_prefs_events_dead_lettered_total",
        "Events sent to the dead-letter subject, by reason."
    );
    describe_counter!(
        "persona_prefs_events_retried_total",
        "Events nak'ed for redelivery after a transient error, by stage."
    );
    describe_counter!(
        "persona_prefs_opinions_extracted_total",
        "Opinions found in persona messages."
    );
    describe_counter!(
        "persona_prefs_decisions_total",
        "Ingest decisions by action: reinforce, evolve, add, skip."
    );
    describe_histogram!(
        "persona_prefs_best_match_similarity",
        "Similarity of the best existing match for each extracted opinion."
    );
    describe_counter!(
        "persona_prefs_llm_requests_total",
        "LLM extraction requests by outcome."
    );
    describe_histogram!(
        "persona_prefs_llm_request_seconds",
        Unit::Seconds,
        "LLM request latency."
    );
    describe_counter!(
        "persona_prefs_llm_tokens_total",
        "LLM tokens used, by kind (prompt, completion)."
    );
    describe_histogram!(
        "persona_prefs_embed_batch_seconds",
        Unit::Seconds,
        "Latency of one embedding batch."
    );
    describe_histogram!(
        "persona_prefs_embed_batch_size",
        "Texts per embedding batch."
    );
    describe_gauge!(
        "persona_prefs_in_flight_events",
        "Events being processed right now."
    );
    describe_gauge!(
        "persona_prefs_consumer_pending",
        "Messages pending for the durable consumer."
    );
    describe_gauge!(
        "persona_prefs_dead_letters_stored",
        "Dead letters waiting in the dead-letter stream (`persona-prefs dlq list` shows them)."
    );
    describe_counter!(
        "persona_prefs_requests_total",
        "Service requests by endpoint and status."
    );
    describe_histogram!(
        "persona_prefs_request_seconds",
        Unit::Seconds,
        "Service request latency by endpoint."
    );
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
/// Redis and NATS, index and streams in place) until `shutdown` turns true. A deliberately tiny
/// HTTP/1.1 responder: three GET routes do not justify a web framework.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    handle: metrics_exporter_prometheus::PrometheusHandle,
    ready: tokio::sync::watch::Receiver<bool>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = crate::ingest::worker::stopped(&mut shutdown) => return,
        };
        let Ok((mut socket, _)) = accepted else {
            continue;
        };
        let handle = handle.clone();
        let ready = *ready.borrow();
        tokio::spawn(async move {
            let mut buffer = [0u8; 2048];
            let Ok(Ok(read)) =
                tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buffer)).await
            else {
                return;
            };
            let request = String::from_utf8_lossy(&buffer[..read]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (status, content_type, body) = match path {
                "/metrics" => ("200 OK", "text/plain; version=0.0.4", handle.render()),
                "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/readyz" if ready => ("200 OK", "text/plain", "ready\n".to_string()),
                "/readyz" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "not ready\n".to_string(),
                ),
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        });
    }
}
