//! Redis Cluster failover under a running worker: a private cluster of three masters, each
//! with a replica, loses a master (SIGKILL) mid-stream. Its replica takes over; the worker
//! follows the new slot map, and with `redis.min_replicas_acked = 1` no acked effect was only
//! on the dead master. Until the killed node returns (as the new master's replica) that shard
//! takes no write the worker could count as stored, so its events wait in JetStream. Nothing
//! is lost, nothing is applied twice.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Cleanup, Running, free_port, scratch_dir, test_config};
use serde_json::json;

/// A free port for a cluster node: Redis Cluster also listens on the port + 10000, so the port
/// must be 55535 or less, with its bus port free too.
fn cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55535 && std::net::TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
}

struct Node {
    child: Option<Child>,
    port: u16,
    dir: std::path::PathBuf,
}

impl Node {
    fn start(dir: &std::path::Path, name: &str) -> Node {
        let mut node = Node {
            child: None,
            port: cluster_port(),
            dir: dir.join(name),
        };
        node.spawn();
        node
    }

    /// Starts (again) on the same port and directory: a node that comes back keeps its
    /// cluster identity (nodes.conf) and rejoins.
    fn spawn(&mut self) {
        let binary = std::env::var("PERSONA_PREFS_REDIS_SERVER")
            .expect("PERSONA_PREFS_REDIS_SERVER unset: run through scripts/test");
        let (port, own) = (self.port, &self.dir);
        std::fs::create_dir_all(own).unwrap();
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", &own.to_string_lossy()])
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args(["--cluster-node-timeout", "1000"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn connection(&self) -> redis::Connection {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(connection) = redis::Client::open(self.url()).unwrap().get_connection() {
                return connection;
            }
            assert!(
                Instant::now() < deadline,
                "node {} did not start",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn command<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command.query(&mut self.connection()).unwrap()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three masters with the slots split evenly, each with one replica; waits until the cluster
/// is up and every replica is in sync.
fn form_cluster(nodes: &[Node]) {
    for node in &nodes[1..] {
        let _: () = nodes[0].command(&["CLUSTER", "MEET", "127.0.0.1", &node.port.to_string()]);
    }
    let share = 16384 / 3;
    for (i, master) in nodes[..3].iter().enumerate() {
        let first = i * share;
        let last = if i == 2 { 16383 } else { first + share - 1 };
        let _: () = master.command(&[
            "CLUSTER",
            "ADDSLOTSRANGE",
            &first.to_string(),
            &last.to_string(),
        ]);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for (master, replica) in nodes[..3].iter().zip(&nodes[3..]) {
        let id: String = master.command(&["CLUSTER", "MYID"]);
        loop {
            // The replica must know the master before it can follow it.
            let known: String = replica.command(&["CLUSTER", "NODES"]);
            if known.contains(&id) {
                let _: () = replica.command(&["CLUSTER", "REPLICATE", &id]);
                break;
            }
            assert!(Instant::now() < deadline, "nodes did not meet");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    loop {
        let ok = nodes.iter().all(|node| {
            let info: String = node.command(&["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok")
        }) && nodes[..3].iter().all(|master| {
            let info: String = master.command(&["INFO", "replication"]);
            info.contains("connected_slaves:1") && info.contains("state=online")
        });
        if ok {
            return;
        }
        assert!(Instant::now() < deadline, "the cluster did not form");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const PERSONAS: usize = 20;
const EVENTS: usize = 600;
const OPINIONS: [&str; 5] = [
    "I love green tea.",
    "I love jazz.",
    "I love rainy days.",
    "I love chess.",
    "I love poetry.",
];

#[tokio::test(flavor = "multi_thread")]
async fn a_master_killed_mid_stream_fails_over_and_loses_nothing() {
    let dir = scratch_dir("redisfailover");
    let mut nodes: Vec<Node> = (0..6)
        .map(|i| Node::start(&dir, &format!("n{i}")))
        .collect();
    form_cluster(&nodes);
    let mut config = test_config("redisfailover");
    config.redis.cluster_nodes = nodes.iter().map(Node::url).collect();
    config.redis.min_replicas_acked = 1;
    config.redis.response_timeout_ms = 1_000;
    config.ingest.retry_delay_ms = 100;
    config.ingest.max_deliver = 200;
    config.ingest.ack_wait_ms = 5_000;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;

    let started = Instant::now();
    for n in 0..EVENTS {
        if n == EVENTS / 3 {
            nodes[0].kill();
        }
        let turn = n / PERSONAS;
        running
            .publish_event(&json!({
                "event_id": format!("e{n}"), "persona_id": format!("p{}", n % PERSONAS),
                "platform": "p", "channel_id": "c",
                "messages": [{"message_id": format!("m{n}"), "role": "persona",
                              "content": OPINIONS[turn % OPINIONS.len()],
                              "timestamp": format!("2026-11-20T10:{:02}:{:02}Z", turn / 60, turn % 60)}]
            }))
            .await;
    }

    // The replica of the killed master took over its slots.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = nodes[3].command(&["INFO", "replication"]);
        if info.contains("role:master") {
            break;
        }
        assert!(Instant::now() < deadline, "no failover: {info}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // With no replica left, that shard takes no write the worker could count as stored
    // (min_replicas_acked = 1): its events wait in JetStream. The killed master comes back,
    // as an orchestrator restarts it, rejoins as the new master's replica, and they go on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    nodes[0].spawn();

    let per_opinion = (EVENTS / PERSONAS / OPINIONS.len()) as u64;
    let expected: Vec<u64> = vec![per_opinion - 1; OPINIONS.len()];
    let wrong = common::wait_for_reinforcement_counts(
        &running.app.store,
        PERSONAS,
        &expected,
        Duration::from_secs(120),
    )
    .await;
    assert!(
        wrong.is_empty(),
        "expected {expected:?} for every persona; wrong: {:?}; {}",
        &wrong[..wrong.len().min(5)],
        running.backlog().await
    );
    println!(
        "{EVENTS} events applied exactly once across a failover in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    running.stop().await;
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}
