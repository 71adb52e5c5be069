//! `persona-prefs status` through the real binary: what is missing before a worker ran, healthy
//! once one serves, and dead letters flagged for an operator.

mod common;

use common::cli::{run, stderr, stdout};
use common::{Cleanup, Running, test_config};
use persona_prefs::config::Config;
use serde_json::Value;

async fn status(config: &Config) -> (Option<i32>, Value) {
    let output = run(config, &["status", "--json", "--listen-ms", "300"]).await;
    let body = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&output), stderr(&output)));
    (output.status.code(), body)
}

fn mentions(list: &Value, text: &str) -> bool {
    list.as_array()
        .unwrap()
        .iter()
        .any(|item| item.as_str().unwrap().contains(text))
}

#[tokio::test(flavor = "multi_thread")]
async fn status_tells_what_is_missing_then_healthy_then_dead_letters() {
    let config = test_config("status");
    let _cleanup = Cleanup(config.clone());

    // Nothing has run: no index, no stream, nobody answering.
    let (code, before) = status(&config).await;
    assert_eq!(code, Some(1), "{before}");
    assert_eq!(before["healthy"], false);
    assert!(mentions(&before["problems"], "does not exist"), "{before}");
    assert!(mentions(&before["problems"], "no replica"), "{before}");

    // A worker and the service: healthy.
    let running = Running::worker_and_service(config.clone()).await;
    let (code, healthy) = status(&config).await;
    assert_eq!(code, Some(0), "{healthy}");
    assert_eq!(healthy["nats"]["replicas"].as_array().unwrap().len(), 1);
    assert_eq!(healthy["nats"]["dead_letters"], 0);
    assert_eq!(
        healthy["redis"]["exists"], config.redis.text_index,
        "an index exists where one is kept (redis.text_index)"
    );
    let human = run(&config, &["status"]).await;
    assert!(stdout(&human).contains("healthy"), "{}", stdout(&human));

    // A letter nobody has looked at is a warning, not a failure.
    running
        .app
        .js
        .publish(
            persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada"),
            b"{not json".to_vec().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    running.drain().await;
    let (code, flagged) = status(&config).await;
    assert_eq!(code, Some(0), "{flagged}");
    assert_eq!(flagged["nats"]["dead_letters"], 1);
    assert!(mentions(&flagged["warnings"], "dlq list"), "{flagged}");

    running.stop().await;
}
