//! The shipped alert rules through Prometheus's own tools, and a real Prometheus scraping real
//! `persona-prefs serve` processes. `scripts/services tools` installs Debian's prometheus
//! package (prometheus and promtool); `scripts/test` runs it first.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Cleanup, free_port, scratch_dir, test_config};
use persona_prefs::app::connect_nats;
use persona_prefs::client::{Client, Endpoint};
use serde_json::{Value, json};

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
}

/// A Prometheus tool, or a failure that says how to install it.
fn tool(name: &str) -> Command {
    let found = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "{name} is not installed: `scripts/services tools` installs Debian's prometheus package"
    );
    Command::new(name)
}

fn run(mut command: Command) -> String {
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{command:?} failed:\n{text}");
    text
}

/// The alert names in alerts.yml, in order.
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- alert: "))
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_every_alert_has_a_unit_test_and_a_runbook_section() {
    for (verb, file) in [
        ("check", "prometheus/alerts.yml"),
        ("test", "prometheus/alerts.test.yml"),
    ] {
        let mut command = tool("promtool");
        command.args([verb, "rules"]).arg(deploy(file));
        let said = run(command);
        assert!(
            said.contains("SUCCESS"),
            "promtool {verb} rules {file}:\n{said}"
        );
    }

    let rules = std::fs::read_to_string(deploy("prometheus/alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(deploy("prometheus/alerts.test.yml")).unwrap();
    let runbook =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/RUNBOOK.md"))
            .unwrap();
    let alerts = alert_names(&rules);
    assert!(alerts.len() >= 10, "{alerts:?}");
    for alert in &alerts {
        // A case where it fires (listed under exp_alerts with labels) and where it stays quiet.
        let cases: Vec<&str> = tests
            .split("- eval_time:")
            .filter(|case| case.contains(&format!("alertname: {alert}\n")))
            .collect();
        assert!(
            cases.iter().any(|case| case.contains("exp_labels")),
            "no unit test where {alert} fires"
        );
        assert!(
            cases.iter().any(|case| case.contains("exp_alerts: []")),
            "no unit test where {alert} stays quiet"
        );
        let anchor = alert.to_lowercase();
        assert!(
            rules.contains(&format!("runbook_url: \"docs/RUNBOOK.md#{anchor}\"")),
            "{alert} has no runbook_url"
        );
        assert!(
            runbook.contains(&format!("\n## {alert}\n")),
            "docs/RUNBOOK.md has no section for {alert}"
        );
    }
    let runbook_urls = rules.matches("runbook_url:").count();
    assert_eq!(runbook_urls, alerts.len(), "one runbook_url per alert");
}

async fn http_get(url: &str) -> Option<(u16, String)> {
    let response = reqwest::get(url).await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.ok()?))
}

async fn wait_for(what: &str, patience: Duration, mut ready: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !ready().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One instant query through Prometheus's HTTP API; the vector it returns.
async fn query(prometheus: &str, promql: &str) -> Vec<Value> {
    let response = reqwest::Client::new()
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", promql)])
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "success", "{promql}: {body}");
    body["data"]["result"].as_array().unwrap().clone()
}

fn scalar(sample: &Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_scrapes_two_workers_and_computes_a_fleet_wide_injection_quantile() {
    let mut config = test_config("prometheus");
    let _cleanup = Cleanup(config.clone());
    let dir = scratch_dir("prometheus");
    let mut processes = common::Children(Vec::new());

    // Two replicas of the worker, as a deployment runs them, each with its own metrics port.
    let metrics_ports = [free_port(), free_port()];
    for (n, port) in metrics_ports.iter().enumerate() {
        config.metrics.listen = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join(format!("worker-{n}.log"))).unwrap();
        processes.0.push(
            Command::new(env!("CARGO_BIN_EXE_persona-prefs"))
                .arg("serve")
                .envs(common::cli::config_env(&config))
                .stdout(Stdio::null())
                .stderr(Stdio::from(log))
                .spawn()
                .expect("start persona-prefs serve"),
        );
    }
    for (n, port) in metrics_ports.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !matches!(
            http_get(&format!("http://127.0.0.1:{port}/readyz")).await,
            Some((200, _))
        ) {
            if let Some(status) = processes.0[n].try_wait().unwrap() {
                let log = std::fs::read_to_string(dir.join(format!("worker-{n}.log")));
                panic!("worker {n} exited ({status}) before it was ready:\n{log:?}");
            }
            assert!(Instant::now() < deadline, "worker {n} never became ready");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    let nats = connect_nats(&config).await.unwrap();
    let client = Client::new(nats, &config);
    let vector = common::unit_vector(7);
    let inject = async |count: usize| {
        for n in 0..count {
            let request = if n % 2 == 0 {
                json!({"persona_id": "ada", "query_embedding": vector})
            } else {
                json!({"persona_id": "ada", "query": "what shall we drink?"})
            };
            client
                .request_json(Endpoint::Inject, &request)
                .await
                .expect("an injection answers");
        }
    };
    // A rate needs a series Prometheus has seen before it grew: create the histograms first.
    inject(2).await;

    // Prometheus with the shipped rules, scraping both replicas every second.
    let prometheus_port = free_port();
    let targets: Vec<String> = metrics_ports
        .iter()
        .map(|port| format!("'127.0.0.1:{port}'"))
        .collect();
    std::fs::copy(deploy("prometheus/alerts.yml"), dir.join("alerts.yml")).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [alerts.yml]\n\
             scrape_configs:\n  - job_name: persona-prefs\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let mut prometheus = tool("prometheus");
    prometheus
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    processes.0.push(prometheus.spawn().unwrap());
    let api = format!("http://127.0.0.1:{prometheus_port}");
    wait_for("Prometheus ready", Duration::from_secs(60), async || {
        matches!(http_get(&format!("{api}/-/ready")).await, Some((200, _)))
    })
    .await;

    // Both targets up: Prometheus itself scraped them.
    wait_for(
        "both workers scraped",
        Duration::from_secs(60),
        async || {
            let up = query(&api, "sum(up{job=\"persona-prefs\"})").await;
            up.first().is_some_and(|sample| scalar(sample) == 2.0)
        },
    )
    .await;
    let build = query(&api, "count(persona_prefs_build_info)").await;
    assert_eq!(scalar(&build[0]), 2.0, "{build:?}");

    // Injections through the queue group reach both replicas' histograms.
    inject(40).await;

    // The fleet-wide p99 of injection latency from both replicas' summed buckets: needs two
    // scrapes after the requests, and the requests were counted on both replicas.
    let per_instance =
        "sum by (instance) (persona_prefs_requests_total{endpoint=\"inject\",status=\"200\"})";
    wait_for(
        "every injection counted once",
        Duration::from_secs(30),
        async || {
            let counted = query(&api, per_instance).await;
            counted.iter().map(scalar).sum::<f64>() == 42.0
        },
    )
    .await;
    let fleet_p99 = "histogram_quantile(0.99, sum by (le) \
         (increase(persona_prefs_injection_seconds_bucket{query=\"embedding\"}[1m])))";
    let mut p99 = f64::NAN;
    wait_for(
        "a fleet-wide quantile",
        Duration::from_secs(30),
        async || {
            p99 = query(&api, fleet_p99)
                .await
                .first()
                .map_or(f64::NAN, scalar);
            p99.is_finite()
        },
    )
    .await;
    assert!(
        p99 > 0.0 && p99 <= 30.0,
        "p99 {p99} s is within the buckets"
    );

    // The shipped rules loaded and evaluate without error against real series.
    let rules_of = async || -> Value {
        reqwest::get(format!("{api}/api/v1/rules"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    };
    let rules = rules_of().await;
    let loaded: Vec<&Value> = rules["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["rules"].as_array().unwrap())
        .collect();
    let shipped = alert_names(&std::fs::read_to_string(deploy("prometheus/alerts.yml")).unwrap());
    assert_eq!(loaded.len(), shipped.len(), "{rules}");
    wait_for("the rules evaluated", Duration::from_secs(30), async || {
        rules_of().await["data"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|rule| rule["health"] == "ok")
    })
    .await;
    // A healthy fleet fires nothing (an alert that fires here would page on a quiet day).
    let firing = query(&api, "ALERTS{alertstate=\"firing\"}").await;
    assert!(firing.is_empty(), "{firing:?}");
}
