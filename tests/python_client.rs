//! The Python client package (`clients/python`), installed with pip from the repository into a
//! fresh directory, then run against a running service (`clients/python/tests/against_service.py`:
//! every call's effect, the service's error codes, the 503 retry, publishing, and the JSON
//! Schemas of docs/ checked with the `jsonschema` package against real events and replies).

mod common;

use common::{Cleanup, Running, test_config};

#[tokio::test(flavor = "multi_thread")]
async fn the_python_client_installs_and_works_against_the_service() {
    let config = test_config("pyclient");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let root = env!("CARGO_MANIFEST_DIR");
    // nats-py comes from scripts/services (.services/python), jsonschema with the MCP SDK's
    // pinned set (.services/mcp-python); the package itself is installed here, every run.
    let nats_py = std::env::var("PERSONA_PREFS_PYTHONPATH")
        .expect("PERSONA_PREFS_PYTHONPATH is not set: run the tests with scripts/test");
    let jsonschema = std::env::var("PERSONA_PREFS_MCP_PYTHONPATH")
        .expect("PERSONA_PREFS_MCP_PYTHONPATH is not set: run the tests with scripts/test");
    let target =
        std::env::temp_dir().join(format!("persona-prefs-client-{}", uuid::Uuid::new_v4()));
    let nats_url = config.nats.url.clone();
    let subject_prefix = config.serve.subject_prefix.clone();
    let events_prefix = config.ingest.subject_prefix.clone();
    let target_for_run = target.clone();
    let output = tokio::task::spawn_blocking(move || {
        let install = std::process::Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
            ])
            .arg("--target")
            .arg(&target_for_run)
            .arg(format!("{root}/clients/python"))
            .output()
            .expect("python3 -m pip runs");
        assert!(
            install.status.success(),
            "pip install ./clients/python failed:\n{}",
            String::from_utf8_lossy(&install.stderr)
        );
        std::process::Command::new("python3")
            .arg(format!("{root}/clients/python/tests/against_service.py"))
            .arg(root)
            .env(
                "PYTHONPATH",
                format!("{}:{nats_py}:{jsonschema}", target_for_run.display()),
            )
            .env("NATS_URL", nats_url)
            .env("PERSONA_PREFS_SUBJECT_PREFIX", subject_prefix)
            .env("PERSONA_PREFS_EVENTS_PREFIX", events_prefix)
            .output()
            .expect("python3 runs")
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&target);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("ok"),
        "the Python client's checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    running.stop().await;
}
