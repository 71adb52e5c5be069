//! Ingest throughput with 1, 2 and 4 worker processes (`persona-prefs serve`, the real binary)
//! on one stream, against a 3-server JetStream cluster (R3 streams, started here from the
//! pinned nats-server) and the configured Redis: a single node, or the local Redis Cluster
//! when REDIS_CLUSTER_NODES is set (`scripts/services cluster-start`).
//!
//! For each count: `BENCH_EVENTS` (4 000) events over 64 personas, published once every worker
//! has a pull open; the clock runs from the first publish until the consumer has nothing
//! pending or unacknowledged, and every event's effect is then counted (one add or one
//! reinforcement each). Two kinds of event: topics repeating as conversations do (the
//! embedding cache takes the model off most of them: what Redis and the pipeline cost), and
//! every topic new (each embedded by the local model: what the model costs). Printed: events/s
//! and the ratio to one worker. Each replica should add throughput until something saturates;
//! on this machine the question is which: the processes share 2 cores, and every worker loads
//! its own model. `BENCH_REPLICAS=1,2,4` picks the counts.
//!
//! `cargo bench --bench replicas` with REDIS_URL (or REDIS_CLUSTER_NODES),
//! PERSONA_PREFS_NATS_SERVER and PERSONA_PREFS_MODEL_DIR set (`source .services/env`).

#[path = "../tests/common/cli.rs"]
#[allow(dead_code)]
mod cli;
mod support;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use persona_prefs::app::{App, wait_until_drained};
use persona_prefs::config::Config;
use support::{distinct_topic, repeated_topic};

const PERSONAS: usize = 64;
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Three JetStream servers on loopback, routed to each other; their client URLs.
fn start_jetstream_cluster(dir: &std::path::Path) -> (Vec<Killed>, String) {
    let binary = std::env::var("PERSONA_PREFS_NATS_SERVER")
        .expect("PERSONA_PREFS_NATS_SERVER unset: source .services/env");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let routes_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let routes = routes_ports
        .iter()
        .map(|port| format!("nats://127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let nodes = (0..3)
        .map(|i| {
            Killed(
                Command::new(&binary)
                    .args(["-a", "127.0.0.1", "-p", &ports[i].to_string(), "-js"])
                    .args(["-sd", &dir.join(format!("n{i}")).to_string_lossy()])
                    .args(["--server_name", &format!("n{i}")])
                    .args(["--cluster_name", "persona-prefs-bench"])
                    .args([
                        "--cluster",
                        &format!("nats://127.0.0.1:{}", routes_ports[i]),
                    ])
                    .args(["--routes", &routes])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start nats-server"),
            )
        })
        .collect();
    let urls = ports
        .iter()
        .map(|port| format!("nats://127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    (nodes, urls)
}

#[tokio::main]
async fn main() {
    let events: usize = std::env::var("BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let counts: Vec<usize> = std::env::var("BENCH_REPLICAS")
        .unwrap_or_else(|_| "1,2,4".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("BENCH_REPLICAS: counts, comma-separated")
        })
        .collect();
    let mut base = Config::load(None).expect("config (source .services/env)");
    let dir = std::env::temp_dir().join(format!("persona-prefs-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (nodes, urls) = start_jetstream_cluster(&dir);
    let nats_pids: Vec<u32> = nodes.iter().map(|node| node.0.id()).collect();
    base.nats.url = urls;
    base.ingest.stream_replicas = 3;
    base.metrics.listen = String::new();
    let redis = if base.redis.cluster_nodes.is_empty() {
        "one Redis node".to_string()
    } else {
        format!(
            "a Redis Cluster ({} seed nodes)",
            base.redis.cluster_nodes.len()
        )
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "{events} events over {PERSONAS} personas; a 3-server JetStream cluster (R3); {redis}; \
         {cores} cores shared by every process"
    );

    let mut table = Vec::new();
    for (kind, topic_of, cache) in [
        (
            "repeated topics",
            (|n| repeated_topic(n, 1)) as fn(usize) -> String,
            true,
        ),
        (
            "every topic new",
            distinct_topic as fn(usize) -> String,
            false,
        ),
    ] {
        let mut first = None;
        for &count in &counts {
            let (rate, cpu) = run(
                &base, &dir, &nats_pids, kind, count, events, topic_of, cache,
            )
            .await;
            let first = *first.get_or_insert(rate);
            table.push((kind, count, rate, rate / first, cpu));
        }
    }
    println!();
    println!(
        "{:<18} {:>8} {:>10} {:>13} | {:>34} {:>6}",
        "events",
        "workers",
        "events/s",
        "x one worker",
        "CPU s per 1 000 events: workers redis nats bench",
        "busy"
    );
    for (kind, count, rate, ratio, cpu) in table {
        let per_thousand = |seconds: f64| seconds * 1000.0 / events as f64;
        println!(
            "{kind:<18} {count:>8} {rate:>10.0} {ratio:>13.2} | {:>31.2} {:>5.2} {:>4.2} {:>5.2} {:>5.0}%",
            per_thousand(cpu.workers),
            per_thousand(cpu.redis),
            per_thousand(cpu.nats),
            per_thousand(cpu.bench),
            100.0 * cpu.total() / (cpu.wall * cores.max(1) as f64),
        );
    }
    println!(
        "busy: CPU seconds of every process over wall time x {cores} cores; at 100% nothing \
         more can run, whoever asks"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where the CPU went during one run, in seconds.
struct CpuUse {
    workers: f64,
    redis: f64,
    nats: f64,
    /// This process: publishing and awaiting acks.
    bench: f64,
    wall: f64,
}

impl CpuUse {
    fn total(&self) -> f64 {
        self.workers + self.redis + self.nats + self.bench
    }
}

/// Starts `count` worker processes on a fresh stream, publishes `events` events and returns
/// events/s until all are acked, after checking each took effect once, and the CPU each
/// party used meanwhile.
#[allow(clippy::too_many_arguments)]
async fn run(
    base: &Config,
    dir: &std::path::Path,
    nats_pids: &[u32],
    kind: &str,
    count: usize,
    events: usize,
    topic_of: fn(usize) -> String,
    cache: bool,
) -> (f64, CpuUse) {
    let mut config = base.clone();
    let name = format!(
        "benchreplicas{}x{count}{}",
        if cache { "r" } else { "d" },
        std::process::id()
    );
    config.redis.key_prefix = name.clone();
    config.redis.index_name = format!("idx:{name}");
    config.ingest.stream = format!("{name}_events");
    config.ingest.consumer = format!("{name}_worker");
    config.ingest.subject_prefix = format!("{name}.messages");
    config.ingest.dlq_stream = format!("{name}_dlq");
    config.ingest.dlq_subject_prefix = format!("{name}.dlq");
    config.serve.subject_prefix = format!("{name}.prefs");
    config.serve.service_name = format!("pp-{name}");
    config.serve.queue_group = format!("{name}_q");
    if !cache {
        config.embed.cache_size = 0;
    }
    // The cluster elects its JetStream leader after the servers meet.
    let deadline = Instant::now() + Duration::from_secs(60);
    let app = loop {
        match tokio::time::timeout(Duration::from_secs(10), App::start(config.clone())).await {
            Ok(Ok(app)) if app.consumer().await.is_ok() => break app,
            _ => assert!(
                Instant::now() < deadline,
                "the JetStream cluster did not form"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut extra: Vec<(&str, String)> = vec![
        ("PERSONA_PREFS__INGEST__STREAM_REPLICAS", "3".into()),
        (
            "PERSONA_PREFS__EMBED__CACHE_SIZE",
            config.embed.cache_size.to_string(),
        ),
        (
            "PERSONA_PREFS__SERVE__QUEUE_GROUP",
            config.serve.queue_group.clone(),
        ),
    ];
    if !config.redis.cluster_nodes.is_empty() {
        extra.push(("REDIS_CLUSTER_NODES", config.redis.cluster_nodes.join(",")));
    }
    let workers: Vec<Killed> = (0..count)
        .map(|i| {
            let log = std::fs::File::create(dir.join(format!("{name}-{i}.log"))).unwrap();
            Killed(
                Command::new(env!("CARGO_BIN_EXE_persona-prefs"))
                    .arg("serve")
                    .envs(cli::config_env(&config))
                    .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
                    .env("RUST_LOG", "persona_prefs=warn")
                    .stdout(Stdio::null())
                    .stderr(Stdio::from(log))
                    .spawn()
                    .expect("start persona-prefs serve"),
            )
        })
        .collect();
    let mut consumer = app.consumer().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while consumer.info().await.unwrap().num_waiting < count {
        assert!(
            Instant::now() < deadline,
            "workers did not start pulling (logs in {})",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let worker_pids: Vec<u32> = workers.iter().map(|worker| worker.0.id()).collect();
    let sum = |pids: &[u32]| {
        pids.iter()
            .map(|pid| support::cpu_seconds(*pid))
            .sum::<f64>()
    };
    let (workers_before, nats_before, bench_before) = (
        sum(&worker_pids),
        sum(nats_pids),
        support::cpu_seconds(std::process::id()),
    );
    let redis_before = support::redis_cpu_seconds(&app.store).await;
    let started = Instant::now();
    support::publish_opinion_events(&app, &name, events, PERSONAS, topic_of).await;
    wait_until_drained(&app.js, consumer, Duration::from_secs(900))
        .await
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    let rate = events as f64 / wall;
    let cpu = CpuUse {
        workers: sum(&worker_pids) - workers_before,
        redis: support::redis_cpu_seconds(&app.store).await - redis_before,
        nats: sum(nats_pids) - nats_before,
        bench: support::cpu_seconds(std::process::id()) - bench_before,
        wall,
    };
    drop(workers);
    println!(
        "{kind}, {count} workers: {events} events in {:.2} s",
        events as f64 / rate
    );

    let effects = support::effects_stored(&app.store, PERSONAS).await;
    assert_eq!(
        effects, events as u64,
        "{kind}, {count} workers: each event adds or reinforces exactly one preference"
    );
    for persona in 0..PERSONAS {
        let _ = app.store.delete_persona(&format!("p{persona}")).await;
    }
    for stream in [&config.ingest.stream, &config.ingest.dlq_stream] {
        let _ = app.js.delete_stream(stream).await;
    }
    (rate, cpu)
}
