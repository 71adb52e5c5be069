//! Runs the real `persona-prefs` binary against a test's configuration, passed the way an
//! operator would: as environment overrides.

use std::process::Output;

use persona_prefs::config::Config;

/// The environment that points the binary at this test's services and names.
pub fn config_env(config: &Config) -> Vec<(&'static str, String)> {
    vec![
        ("REDIS_URL", config.redis.url.clone()),
        ("NATS_URL", config.nats.url.clone()),
        ("PERSONA_PREFS_MODEL_DIR", config.embed.model_dir.clone()),
        (
            "PERSONA_PREFS__REDIS__KEY_PREFIX",
            config.redis.key_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__REDIS__INDEX_NAME",
            config.redis.index_name.clone(),
        ),
        (
            "PERSONA_PREFS__REDIS__TEXT_INDEX",
            config.redis.text_index.to_string(),
        ),
        (
            "PERSONA_PREFS__INGEST__STREAM",
            config.ingest.stream.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__CONSUMER",
            config.ingest.consumer.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__SUBJECT_PREFIX",
            config.ingest.subject_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__DLQ_SUBJECT_PREFIX",
            config.ingest.dlq_subject_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__DLQ_STREAM",
            config.ingest.dlq_stream.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__ACK_WAIT_MS",
            config.ingest.ack_wait_ms.to_string(),
        ),
        (
            "PERSONA_PREFS__INGEST__MAX_IN_FLIGHT",
            config.ingest.max_in_flight.to_string(),
        ),
        (
            "PERSONA_PREFS__SERVE__SUBJECT_PREFIX",
            config.serve.subject_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__SERVE__SERVICE_NAME",
            config.serve.service_name.clone(),
        ),
        (
            "PERSONA_PREFS__SERVE__QUEUE_GROUP",
            config.serve.queue_group.clone(),
        ),
        (
            "PERSONA_PREFS__METRICS__LISTEN",
            config.metrics.listen.clone(),
        ),
    ]
}

pub async fn run(config: &Config, args: &[&str]) -> Output {
    run_with_env(config, args, &[]).await
}

/// [`run`] with more environment variables.
pub async fn run_with_env(config: &Config, args: &[&str], extra: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut envs: Vec<(String, String)> = config_env(config)
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    envs.extend(
        extra
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string())),
    );
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_persona-prefs"))
            .args(&args)
            .envs(envs)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
