//! The servers go away and come back under a running worker: a NATS restart (JetStream on
//! disk) and a Redis restart (saved on shutdown). Nothing published is lost, nothing is
//! applied twice: N events voicing one opinion end as one preference reinforced N − 1 times.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Cleanup, Running, free_port, scratch_dir, test_config};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use serde_json::json;

/// A server process of our own, on a fixed port and data directory, so it can be stopped and
/// started again as the same server.
struct Server {
    command: Vec<String>,
    port: u16,
    child: Option<Child>,
}

impl Server {
    fn nats(dir: &Path) -> Server {
        let binary = std::env::var("PERSONA_PREFS_NATS_SERVER")
            .expect("PERSONA_PREFS_NATS_SERVER unset: run through scripts/test");
        let port = free_port();
        let command = vec![
            binary,
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-js".into(),
            "-sd".into(),
            dir.join("jetstream").to_string_lossy().into_owned(),
        ];
        Server {
            command,
            port,
            child: None,
        }
    }

    fn redis(dir: &Path) -> Server {
        let (Ok(binary), Ok(module)) = (
            std::env::var("PERSONA_PREFS_REDIS_SERVER"),
            std::env::var("PERSONA_PREFS_REDISEARCH_MODULE"),
        ) else {
            panic!(
                "PERSONA_PREFS_REDIS_SERVER / _REDISEARCH_MODULE unset: run through scripts/test"
            );
        };
        let port = free_port();
        let command = vec![
            binary,
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.to_string_lossy().into_owned(),
            // Saved on shutdown, index definitions included, and loaded on start.
            "--save".into(),
            "3600 1".into(),
            "--appendonly".into(),
            "no".into(),
            "--loadmodule".into(),
            module,
        ];
        Server {
            command,
            port,
            child: None,
        }
    }

    async fn start(&mut self) {
        self.child = Some(
            Command::new(&self.command[0])
                .args(&self.command[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "{} did not start",
                self.command[0]
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, as an orchestrator stops a server, and wait for it to exit.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Publishes until JetStream confirms, retrying while the server is away.
async fn publish(app: &App, n: usize) {
    let event = json!({
        "event_id": format!("e{n}"), "persona_id": "ada", "platform": "p", "channel_id": "c",
        "messages": [{"message_id": format!("m{n}"), "role": "persona", "content": "I love green tea.",
                      "timestamp": format!("2026-11-20T10:{:02}:{:02}Z", (n / 60) % 60, n % 60)}]
    });
    let subject = persona_prefs::subjects::event_subject(&app.config.ingest.subject_prefix, "ada");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("e{n}").as_str());
        let sent = app
            .js
            .publish_with_headers(
                subject.clone(),
                headers,
                serde_json::to_vec(&event).unwrap().into(),
            )
            .await;
        if let Ok(ack) = sent
            && ack.await.is_ok()
        {
            return;
        }
        assert!(Instant::now() < deadline, "could not publish event {n}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn green_tea(app: &App) -> (usize, u64) {
    let all = common::active_preferences(&app.store, "ada").await;
    (all.len(), all.first().map_or(0, |p| p.reinforcement_count))
}

fn config_for(label: &str) -> Config {
    let mut config = test_config(label);
    config.ingest.retry_delay_ms = 100;
    config.ingest.max_deliver = 50;
    // Acks sent while NATS is down are lost; those events come back after ack_wait and must
    // change nothing. A short wait keeps the test quick.
    config.ingest.ack_wait_ms = 3000;
    config.nats.connect_timeout_ms = 2000;
    config.redis.response_timeout_ms = 1000;
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nats_restart_loses_and_doubles_nothing() {
    let dir = scratch_dir("natsrestart");
    let mut nats = Server::nats(&dir);
    nats.start().await;
    let mut config = config_for("natsrestart");
    config.nats.url = format!("nats://127.0.0.1:{}", nats.port);
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config).await;
    let app = &running.app;

    for n in 0..20 {
        publish(app, n).await;
    }
    nats.stop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    nats.start().await;
    for n in 20..40 {
        publish(app, n).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while green_tea(app).await != (1, 39) {
        assert!(
            Instant::now() < deadline,
            "after the restart: {:?}",
            green_tea(app).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    running.drain().await;
    assert_eq!(green_tea(app).await, (1, 39), "and nothing more after");
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redis_restart_loses_and_doubles_nothing() {
    let dir = scratch_dir("redisrestart");
    let mut redis = Server::redis(&dir);
    redis.start().await;
    let mut config = config_for("redisrestart");
    config.redis.url = format!("redis://127.0.0.1:{}", redis.port);
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config).await;
    let app = &running.app;

    for n in 0..20 {
        publish(app, n).await;
    }
    running.drain().await;
    redis.stop();
    // Events arriving while Redis is away wait (nak and retry) instead of being dropped.
    for n in 20..30 {
        publish(app, n).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.start().await;
    for n in 30..40 {
        publish(app, n).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(state) = tokio::time::timeout(Duration::from_secs(2), green_tea(app)).await
            && state == (1, 39)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "redis restart: events went missing"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    running.drain().await;
    assert_eq!(green_tea(app).await, (1, 39));
    running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET path` on the metrics listener; the status line.
async fn status_of(address: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut socket) = tokio::net::TcpStream::connect(address).await else {
        return "no listener".into();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if socket.write_all(request.as_bytes()).await.is_err() {
        return "no answer".into();
    }
    let mut response = String::new();
    let read = tokio::time::timeout(Duration::from_secs(5), socket.read_to_string(&mut response));
    if !matches!(read.await, Ok(Ok(_))) {
        return "no answer".into();
    }
    response.lines().next().unwrap_or_default().to_string()
}

/// Waits until `/readyz` answers `expected`, or fails saying what it answered.
async fn wait_for_readiness(address: std::net::SocketAddr, expected: &str, while_: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = status_of(address, "/readyz").await;
        if status.contains(expected) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{while_}: /readyz said {status:?}, expected {expected}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `/readyz` follows the servers, so an orchestrator stops routing to a replica that cannot
/// work: 503 while Redis hangs (SIGSTOP) or NATS is gone, 200 once each is back, and 503 from
/// shutdown on while the listener still answers.
#[tokio::test(flavor = "multi_thread")]
async fn readiness_follows_redis_and_nats_outages() {
    let dir = scratch_dir("readiness");
    let mut redis = Server::redis(&dir);
    let mut nats = Server::nats(&dir);
    redis.start().await;
    nats.start().await;
    let mut config = config_for("readiness");
    config.redis.url = format!("redis://127.0.0.1:{}", redis.port);
    config.redis.cluster_nodes = Vec::new();
    config.nats.url = format!("nats://127.0.0.1:{}", nats.port);
    config.metrics.listen = "127.0.0.1:0".into();
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    let _consumer = app.consumer().await.unwrap();
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .build_recorder()
        .handle();
    let (ready_tx, ready) = tokio::sync::watch::channel(false);
    let (shutdown, stopped) = tokio::sync::watch::channel(false);
    let (listener_stop, listener_stopped) = tokio::sync::watch::channel(false);
    let address =
        persona_prefs::app::start_metrics(&config, Some(metrics), ready, listener_stopped)
            .await
            .unwrap()
            .unwrap();
    tokio::spawn(persona_prefs::app::watch_readiness(
        app.clone(),
        ready_tx,
        stopped,
    ));
    wait_for_readiness(address, "200", "at start").await;

    let redis_pid = redis.child.as_ref().unwrap().id().to_string();
    Command::new("kill")
        .args(["-STOP", &redis_pid])
        .status()
        .unwrap();
    wait_for_readiness(address, "503", "with Redis hung").await;
    Command::new("kill")
        .args(["-CONT", &redis_pid])
        .status()
        .unwrap();
    wait_for_readiness(address, "200", "with Redis back").await;

    nats.stop();
    wait_for_readiness(address, "503", "with NATS gone").await;
    nats.start().await;
    wait_for_readiness(address, "200", "with NATS back").await;

    shutdown.send(true).unwrap();
    wait_for_readiness(address, "503", "shutting down").await;
    let _ = listener_stop.send(true);
    let _ = std::fs::remove_dir_all(&dir);
}
