//! The deployment files agree with the service: the configuration they pass is one the worker
//! accepts, and the names and numbers they repeat (ports, probe paths, stream and consumer,
//! shutdown timings) are the service's own. `scripts/check-deploy` checks the manifests'
//! schemas; this checks their meaning.

use std::path::Path;

use persona_prefs::config::{Config, LogFormat};

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// `KEY: value` lines of the first block under `section:` (two-space indented), unquoted.
fn yaml_block(text: &str, section: &str) -> Vec<(String, String)> {
    let mut lines = text
        .lines()
        .skip_while(|line| line.trim_end() != section)
        .skip(1);
    let mut pairs = Vec::new();
    for line in lines.by_ref() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.trim().split_once(": ") else {
            break;
        };
        pairs.push((key.to_string(), value.trim_matches('"').to_string()));
    }
    assert!(!pairs.is_empty(), "no {section} block");
    pairs
}

/// The value of the first `key: value` line in a text.
fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|line| line.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key}"))
        .trim_matches('"')
        .to_string()
}

#[test]
fn the_kubernetes_configmap_is_a_configuration_the_worker_accepts() {
    let env = yaml_block(&read("deploy/k8s/base/configmap.yaml"), "data:");
    let config = Config::load_from(None, &env).expect("the ConfigMap's environment is valid");
    assert_eq!(
        config.metrics.listen, "0.0.0.0:9464",
        "probes and scrapes reach it"
    );
    assert_eq!(config.log.format, LogFormat::Json);
    assert_eq!(config.ingest.stream_replicas, 3);

    // A misspelt key is refused by name, so the ConfigMap cannot silently carry one.
    let mut misspelt = env.clone();
    misspelt.push(("PERSONA_PREFS__METRICS__LISTN".into(), "0.0.0.0:1".into()));
    let error = Config::load_from(None, &misspelt).unwrap_err().to_string();
    assert!(error.contains("listn"), "{error}");
}

#[test]
fn the_deployment_probes_the_metrics_port_and_outlasts_the_shutdown() {
    let deployment = read("deploy/k8s/base/deployment.yaml");
    let defaults = Config::defaults();
    assert!(deployment.contains("containerPort: 9464"));
    assert!(deployment.contains("httpGet: {path: /healthz, port: metrics}"));
    assert!(deployment.contains("httpGet: {path: /readyz, port: metrics}"));
    assert!(deployment.contains("runAsUser: 10001"));
    assert!(
        read("deploy/Dockerfile").contains("--uid 10001"),
        "the image's user is the one the Deployment runs as"
    );
    // SIGTERM: in-flight events get the grace period, requests the service's drain period;
    // Kubernetes must not SIGKILL before both are over.
    let grace_seconds: u64 = field(&deployment, "terminationGracePeriodSeconds")
        .parse()
        .unwrap();
    let needed = defaults.ingest.grace_period_ms / 1000 + 10;
    assert!(
        grace_seconds > needed,
        "terminationGracePeriodSeconds {grace_seconds} <= {needed}"
    );
}

#[test]
fn the_autoscalers_watch_the_workers_own_stream_and_consumer() {
    let scaled = read("deploy/k8s/overlays/keda/scaledobject.yaml");
    let defaults = Config::defaults();
    assert_eq!(field(&scaled, "stream"), defaults.ingest.stream);
    assert_eq!(field(&scaled, "consumer"), defaults.ingest.consumer);
    assert_eq!(field(&scaled, "name"), "persona-prefs");
    let hpa = read("deploy/k8s/overlays/hpa/horizontalpodautoscaler.yaml");
    assert!(hpa.contains("kind: Deployment\n    name: persona-prefs"));
    // Injection is answered by the same replicas, so neither scales below two.
    assert_eq!(field(&scaled, "minReplicaCount"), "2");
    assert_eq!(field(&hpa, "minReplicas"), "2");
}

#[test]
fn the_compose_worker_gets_a_valid_configuration_from_the_image() {
    let dockerfile = read("deploy/Dockerfile");
    // The ENV instruction: from `ENV ` through its last `\`-continued line.
    let mut env: Vec<(String, String)> = Vec::new();
    for line in dockerfile
        .lines()
        .skip_while(|line| !line.starts_with("ENV "))
    {
        let pairs = line.trim_start_matches("ENV ").trim_end_matches('\\');
        for pair in pairs.split_whitespace() {
            let (key, value) = pair.split_once('=').unwrap();
            env.push((key.into(), value.into()));
        }
        if !line.ends_with('\\') {
            break;
        }
    }
    assert!(env.len() >= 3, "{env:?}");
    let compose = read("deploy/docker-compose.yml");
    let worker = &compose[compose.find("  worker:").unwrap()..];
    env.extend(yaml_block(worker, "    environment:"));
    let config = Config::load_from(None, &env).expect("the image's and compose's env are valid");
    assert_eq!(config.metrics.listen, "0.0.0.0:9464");
    assert_eq!(config.redis.url, "redis://redis:6379");
}

/// The quoted strings in a text.
fn quoted(text: &str) -> std::collections::BTreeSet<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_nsc_script_grants_each_role_what_the_tested_authorization_block_does() {
    let conf = read("deploy/nats/authorization.conf");
    let script = "deploy/nats/nsc-roles.sh";
    let root = env!("CARGO_MANIFEST_DIR");
    for (block, variable) in [
        ("PRODUCER", "producer"),
        ("PROMPT_BUILDER", "prompt_builder"),
        ("ADMIN", "admin"),
        ("WORKER", "worker"),
    ] {
        // The role's block, up to the next line that closes at its indentation.
        let start = conf
            .find(&format!("  {block} = {{"))
            .unwrap_or_else(|| panic!("no {block} block"));
        let body = &conf[start..];
        let body = &body[..body.find("\n  }").unwrap()];
        let (publish, subscribe) = body.split_once("subscribe:").unwrap();
        let subscribe = subscribe.lines().next().unwrap();

        // The script's lists, as bash reads them.
        let printed = std::process::Command::new("bash")
            .current_dir(root)
            .arg("-c")
            .arg(format!(
                "eval \"$(sed -n '/^producer_pub=/,/^worker_sub=/p' {script})\"; \
                 printf '%s\\n%s\\n' \"${variable}_pub\" \"${variable}_sub\""
            ))
            .output()
            .unwrap();
        let printed = String::from_utf8(printed.stdout).unwrap();
        let mut lines = printed.lines();
        let list = |line: Option<&str>| -> std::collections::BTreeSet<String> {
            line.unwrap().split(',').map(str::to_string).collect()
        };
        assert_eq!(list(lines.next()), quoted(publish), "{block} publish");
        assert_eq!(list(lines.next()), quoted(subscribe), "{block} subscribe");
        let responds = body.contains("allow_responses: true");
        assert_eq!(responds, block == "WORKER", "{block} allow_responses");
    }
    let script_text = read(script);
    assert!(script_text.contains("add_user worker \"$worker_pub\" \"$worker_sub\" responses"));
}
