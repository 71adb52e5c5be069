//! The metrics, health and readiness listener, fed by a real event through the worker.

mod common;

use std::time::Duration;

use common::{Cleanup, test_config};
use persona_prefs::app::{App, start_metrics, wait_until_drained};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

async fn get(address: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    socket
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        socket.read_to_string(&mut response),
    )
    .await
    .expect("the server closes the connection it was asked to close")
    .unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_health_and_readiness_report_the_pipeline() {
    // This test process owns the global recorder (nextest runs each test in its own process).
    let handle =
        persona_prefs::telemetry::install_recorder(&persona_prefs::serve::Endpoint::names())
            .unwrap();
    let mut config = test_config("metrics");
    config.metrics.listen = "127.0.0.1:0".into();
    let _cleanup = Cleanup(config.clone());
    let (ready_tx, ready) = watch::channel(false);
    let (stop, stopped) = watch::channel(false);
    let address = start_metrics(&config, Some(handle), ready, stopped.clone())
        .await
        .unwrap()
        .unwrap();

    assert_eq!(get(address, "/healthz").await.0, "HTTP/1.1 200 OK");
    assert_eq!(
        get(address, "/readyz").await.0,
        "HTTP/1.1 503 Service Unavailable",
        "not ready before start-up finished"
    );
    let app = App::start(config.clone()).await.unwrap();
    let consumer = app.consumer().await.unwrap();
    ready_tx.send(true).unwrap();
    assert_eq!(get(address, "/readyz").await.0, "HTTP/1.1 200 OK");
    assert_eq!(get(address, "/nope").await.0, "HTTP/1.1 404 Not Found");

    let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped));
    let event = json!({"event_id": "e1", "persona_id": "ada", "platform": "p", "channel_id": "c",
        "messages": [{"message_id": "m1", "role": "persona", "content": "I love owls. I hate noise.", "timestamp": "2026-11-20T08:00:00Z"}]});
    let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada");
    app.js
        .publish(subject.clone(), serde_json::to_vec(&event).unwrap().into())
        .await
        .unwrap()
        .await
        .unwrap();
    app.js
        .publish(subject, b"not json".to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
    wait_until_drained(&app.js, consumer, Duration::from_secs(30))
        .await
        .unwrap();

    let (status, body) = get(address, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    for expected in [
        "persona_prefs_events_consumed_total 2",
        "persona_prefs_events_processed_total 1",
        "persona_prefs_opinions_extracted_total 2",
        "persona_prefs_decisions_total{action=\"add\"} 2",
        "persona_prefs_events_dead_lettered_total{reason=\"invalid_json\"} 1",
        "persona_prefs_embed_batch_size",
        "persona_prefs_store_op_seconds",
        "persona_prefs_best_match_similarity",
        // Every labelled counter exists from start-up, at zero until it happens.
        "persona_prefs_events_dead_lettered_total{reason=\"max_deliver\"} 0",
        "persona_prefs_decisions_total{action=\"evolve\"} 0",
        "persona_prefs_requests_total{endpoint=\"purge_user\",status=\"503\"} 0",
        // Latencies have buckets, for fleet-wide quantiles.
        "persona_prefs_event_seconds_bucket{le=\"0.005\"}",
        "persona_prefs_best_match_similarity_bucket{le=\"0.8\"}",
        "persona_prefs_build_info{version=",
    ] {
        assert!(body.contains(expected), "missing {expected:?} in\n{body}");
    }
    assert!(!body.contains("quantile="), "no per-process summaries");
    assert!(!body.contains("ada"), "no persona ids as labels");
    let declared: Vec<&str> = persona_prefs::telemetry::METRICS
        .iter()
        .map(|(name, _, _)| *name)
        .collect();
    for family in metric_names(&body) {
        assert!(
            declared.contains(&family.as_str()),
            "{family} is exported but not in telemetry::METRICS"
        );
    }

    // The backlog gauges are sampled every few seconds: wait for the letter to show.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = get(address, "/metrics").await;
        if body.contains("persona_prefs_dead_letters_stored 1") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "dead_letters_stored never reached 1:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _ = stop.send(true);
    worker.await.unwrap().unwrap();
}

/// The metric families named in a text: `persona_prefs_…` words, less the suffixes Prometheus
/// adds to summaries and histograms.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("persona_prefs_") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        names.insert(family.to_string());
        rest = &tail[end..];
    }
    names
}

/// The shipped alerting rules name only metrics the worker exports: a renamed metric would
/// otherwise leave an alert that can never fire.
#[test]
fn the_alerting_rules_name_only_exported_metrics() {
    let rules = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/alerts.yml"),
    )
    .unwrap();
    let declared: Vec<&str> = persona_prefs::telemetry::METRICS
        .iter()
        .map(|(name, _, _)| *name)
        .collect();
    let named = metric_names(&rules);
    assert!(named.len() >= 6, "{named:?}");
    for name in named {
        assert!(
            declared.contains(&name.as_str()),
            "alerts.yml names {name}, which is not exported"
        );
    }
    // Latencies are histograms with buckets (fleet-wide quantiles): there are no per-process
    // quantile series for a rule to read.
    assert!(
        !rules.contains("quantile=\""),
        "there are no quantile series"
    );
}

/// The Grafana dashboard queries only metrics the worker exports, and covers what an operator
/// watches: a renamed metric would otherwise leave a panel that shows nothing.
#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/grafana/dashboards/persona-prefs.json"),
    )
    .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let queries: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap().clone())
        .map(|target| target["expr"].as_str().unwrap().to_string())
        .collect();
    let declared: Vec<&str> = persona_prefs::telemetry::METRICS
        .iter()
        .map(|(name, _, _)| *name)
        .collect();
    let named = metric_names(&queries.join("\n"));
    for name in &named {
        assert!(
            declared.contains(&name.as_str()),
            "the dashboard queries {name}, which is not exported"
        );
    }
    for watched in [
        "persona_prefs_events_processed_total",
        "persona_prefs_events_dead_lettered_total",
        "persona_prefs_decisions_total",
        "persona_prefs_consumer_pending",
        "persona_prefs_injection_seconds",
        "persona_prefs_llm_requests_total",
        "persona_prefs_llm_tokens_total",
        "persona_prefs_embed_batch_size",
        "persona_prefs_best_match_similarity",
        "persona_prefs_build_info",
    ] {
        assert!(named.contains(watched), "no panel shows {watched}");
    }
}
