//! Runs the real `persona-prefs` binary against a test's configuration (names passed as
//! environment overrides, as an operator would).

use std::process::Output;

use persona_prefs::config::Config;

pub async fn run(config: &Config, args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let envs = [
        ("REDIS_URL", config.redis.url.clone()),
        ("NATS_URL", config.nats.url.clone()),
        (
            "PERSONA_PREFS__REDIS__KEY_PREFIX",
            config.redis.key_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__REDIS__INDEX_NAME",
            config.redis.index_name.clone(),
        ),
        (
            "PERSONA_PREFS__SERVE__SUBJECT_PREFIX",
            config.serve.subject_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__SUBJECT_PREFIX",
            config.ingest.subject_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__STREAM",
            config.ingest.stream.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__DLQ_SUBJECT_PREFIX",
            config.ingest.dlq_subject_prefix.clone(),
        ),
        (
            "PERSONA_PREFS__INGEST__DLQ_STREAM",
            config.ingest.dlq_stream.clone(),
        ),
    ];
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
