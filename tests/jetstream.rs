//! JetStream at scale: an existing stream and consumer are brought to the configured settings
//! at start-up, and a three-server JetStream cluster that loses a server mid-stream loses and
//! doubles nothing.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Cleanup, Running, free_port, scratch_dir, test_config};
use persona_prefs::app::App;
use serde_json::json;

/// A stream and consumer created under one configuration are updated, not only reused, when
/// the worker starts under another: ack wait, max ack pending (sized for every worker), stream
/// size limits.
#[tokio::test(flavor = "multi_thread")]
async fn an_existing_stream_and_consumer_take_the_configured_settings() {
    let mut config = test_config("reconcile");
    let _cleanup = Cleanup(config.clone());
    config.ingest.ack_wait_ms = 30_000;
    config.ingest.max_in_flight = 4;
    config.ingest.max_workers = 2;
    let first = App::start(config.clone()).await.unwrap();
    let mut consumer = first.consumer().await.unwrap();
    let info = consumer.info().await.unwrap().config.clone();
    assert_eq!(info.ack_wait, Duration::from_secs(30));
    assert_eq!(info.max_ack_pending, 8);

    config.ingest.ack_wait_ms = 5_000;
    config.ingest.max_in_flight = 8;
    config.ingest.max_workers = 4;
    config.ingest.stream_max_bytes = 10 << 20;
    config.ingest.dlq_max_bytes = 1 << 20;
    let second = App::start(config.clone()).await.unwrap();
    let mut consumer = second.consumer().await.unwrap();
    let info = consumer.info().await.unwrap().config.clone();
    assert_eq!(info.ack_wait, Duration::from_secs(5));
    assert_eq!(
        info.max_ack_pending, 32,
        "max_in_flight × max_workers, so four workers all get work"
    );
    let mut events = second.js.get_stream(&config.ingest.stream).await.unwrap();
    assert_eq!(events.info().await.unwrap().config.max_bytes, 10 << 20);
    let mut letters = second
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await
        .unwrap();
    assert_eq!(letters.info().await.unwrap().config.max_bytes, 1 << 20);
}

/// One server of a local three-server JetStream cluster.
struct NatsNode {
    child: Option<Child>,
    port: u16,
}

impl NatsNode {
    fn start(dir: &Path, name: &str, port: u16, cluster_port: u16, routes: &str) -> NatsNode {
        let binary = std::env::var("PERSONA_PREFS_NATS_SERVER")
            .expect("PERSONA_PREFS_NATS_SERVER unset: run through scripts/test");
        let child = Command::new(binary)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js"])
            .args(["-sd", &dir.join(name).to_string_lossy()])
            .args([
                "--server_name",
                name,
                "--cluster_name",
                "persona-prefs-test",
            ])
            .args(["--cluster", &format!("nats://127.0.0.1:{cluster_port}")])
            .args(["--routes", routes])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        NatsNode {
            child: Some(child),
            port,
        }
    }

    /// SIGKILL: the server vanishes mid-stream, as a crashed machine would.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for NatsNode {
    fn drop(&mut self) {
        self.kill();
    }
}

const PERSONAS: usize = 50;
const EVENTS: usize = 10_000;
const OPINIONS: [&str; 5] = [
    "I love green tea.",
    "I love jazz.",
    "I love rainy days.",
    "I love chess.",
    "I love poetry.",
];

fn event(n: usize) -> (String, serde_json::Value) {
    let persona = format!("p{}", n % PERSONAS);
    let turn = n / PERSONAS;
    let event = json!({
        "event_id": format!("e{n}"), "persona_id": persona, "platform": "p", "channel_id": "c",
        "messages": [{"message_id": format!("m{n}"), "role": "persona",
                      "content": OPINIONS[turn % OPINIONS.len()],
                      "timestamp": format!("2026-11-20T{:02}:{:02}:{:02}Z", turn / 3600, (turn / 60) % 60, turn % 60)}]
    });
    (persona, event)
}

/// 10 000 events into R3 streams on three servers; the server the worker is connected to is
/// killed (SIGKILL) a third of the way through. The publisher retries until JetStream confirms (the message id keeps a
/// retry from storing twice); the worker reconnects to the others. In the end every persona
/// holds each of its five opinions once, reinforced exactly once per later event.
#[tokio::test(flavor = "multi_thread")]
async fn a_jetstream_cluster_losing_a_server_mid_stream_loses_and_doubles_nothing() {
    let dir = scratch_dir("jscluster");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let cluster_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let routes = cluster_ports
        .iter()
        .map(|port| format!("nats://127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes: Vec<NatsNode> = (0..3)
        .map(|i| NatsNode::start(&dir, &format!("n{i}"), ports[i], cluster_ports[i], &routes))
        .collect();
    let mut config = test_config("jscluster");
    config.nats.url = nodes
        .iter()
        .map(|node| format!("nats://127.0.0.1:{}", node.port))
        .collect::<Vec<_>>()
        .join(",");
    config.ingest.stream_replicas = 3;
    config.ingest.ack_wait_ms = 5_000;
    config.ingest.retry_delay_ms = 100;
    config.ingest.max_deliver = 100;
    config.nats.connect_timeout_ms = 2_000;
    let _cleanup = Cleanup(config.clone());

    // The cluster elects its JetStream leader after the servers meet.
    let deadline = Instant::now() + Duration::from_secs(60);
    let running = loop {
        match tokio::time::timeout(Duration::from_secs(10), App::start(config.clone())).await {
            Ok(Ok(app)) => {
                if app.consumer().await.is_ok() {
                    break Running::worker(config.clone()).await;
                }
            }
            _ => assert!(
                Instant::now() < deadline,
                "the JetStream cluster did not form"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let publisher = async_nats::connect(
        ports
            .iter()
            .map(|port| format!("nats://127.0.0.1:{port}").parse().unwrap())
            .collect::<Vec<async_nats::ServerAddr>>(),
    )
    .await
    .unwrap();
    let js = async_nats::jetstream::new(publisher);
    let subject_prefix = config.ingest.subject_prefix.clone();

    let started = Instant::now();
    for batch in (0..EVENTS).collect::<Vec<_>>().chunks(500) {
        if batch[0] == EVENTS / 3 {
            // The server the worker is connected to, so the worker itself must fail over.
            let connected = running.app.nats.server_info().port;
            let node = nodes
                .iter_mut()
                .find(|node| node.port == connected)
                .expect("the worker is connected to one of the three");
            node.kill();
        }
        // Publish the batch, then await its acks; retry whatever was not confirmed.
        let mut pending: Vec<usize> = batch.to_vec();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !pending.is_empty() {
            let mut acks = Vec::new();
            for &n in &pending {
                let (persona, body) = event(n);
                let mut headers = async_nats::HeaderMap::new();
                headers.insert("Nats-Msg-Id", format!("e{n}").as_str());
                let sent = js
                    .publish_with_headers(
                        format!("{subject_prefix}.{persona}"),
                        headers,
                        serde_json::to_vec(&body).unwrap().into(),
                    )
                    .await;
                acks.push((n, sent));
            }
            let mut failed = Vec::new();
            for (n, sent) in acks {
                let confirmed = match sent {
                    Ok(ack) => tokio::time::timeout(Duration::from_secs(10), ack)
                        .await
                        .is_ok_and(|ack| ack.is_ok()),
                    Err(_) => false,
                };
                if !confirmed {
                    failed.push(n);
                }
            }
            assert!(
                Instant::now() < deadline,
                "{} events could not be published",
                failed.len()
            );
            if !failed.is_empty() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            pending = failed;
        }
    }
    println!(
        "published {EVENTS} events in {:.1}s (one server killed at event {})",
        started.elapsed().as_secs_f64(),
        EVENTS / 3
    );

    // Every persona: five preferences, each voiced EVENTS / PERSONAS / 5 times, so reinforced
    // one time fewer than that.
    let per_opinion = (EVENTS / PERSONAS / OPINIONS.len()) as u64;
    let expected: Vec<u64> = vec![per_opinion - 1; OPINIONS.len()];
    let wrong = common::wait_for_reinforcement_counts(
        &running.app.store,
        PERSONAS,
        &expected,
        Duration::from_secs(240),
    )
    .await;
    assert!(
        wrong.is_empty(),
        "expected {expected:?} for every persona; wrong: {:?}",
        &wrong[..wrong.len().min(5)]
    );
    println!(
        "all {EVENTS} events applied exactly once after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    running.stop().await;
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}
