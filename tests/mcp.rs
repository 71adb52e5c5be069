//! `persona-prefs mcp` the way agents use it: the official Python MCP SDK (`mcp`, pinned in
//! scripts/python/mcp-requirements.txt) drives the real binary over stdio and over streamable
//! HTTP, against a running service (tests/python/mcp_client.py holds what it checks: the four
//! tools and their limits, every action's effect through the service, the beliefs resource,
//! another persona refused whatever the arguments say, bad arguments answered with tool errors,
//! and over HTTP each bearer token held to its own persona).

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{Cleanup, Running, test_config};
use persona_prefs::serve::protocol::AddRequest;
use persona_prefs::store::Stance;

fn python() -> (String, String) {
    let path = std::env::var("PERSONA_PREFS_MCP_PYTHONPATH").expect(
        "PERSONA_PREFS_MCP_PYTHONPATH is not set: run the tests with scripts/test, which installs the MCP SDK",
    );
    let script = format!("{}/tests/python/mcp_client.py", env!("CARGO_MANIFEST_DIR"));
    (path, script)
}

/// A running service with two personas: ada likes green tea, bob likes jazz.
async fn service(label: &str) -> (Running, persona_prefs::config::Config, Cleanup) {
    let config = test_config(label);
    let cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = persona_prefs::client::Client::new(running.app.nats.clone(), &config);
    for (persona, name, opinion) in [
        ("ada", "green tea", "I love green tea."),
        ("bob", "jazz", "Jazz is the best music there is."),
    ] {
        client
            .add(&AddRequest {
                persona_id: persona.into(),
                name: name.into(),
                opinion: opinion.into(),
                stance: Some(Stance::For),
                ..AddRequest::default()
            })
            .await
            .unwrap();
    }
    (running, config, cleanup)
}

fn run_client(config: &persona_prefs::config::Config, args: &[&str], extra_env: &[(&str, &str)]) {
    let (pythonpath, script) = python();
    let mut command = std::process::Command::new("python3");
    command
        .arg(&script)
        .args(args)
        .env("PYTHONPATH", pythonpath)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in common::cli::config_env(config) {
        command.env(name, value);
    }
    for (name, value) in extra_env {
        command.env(name, value);
    }
    let output = command.output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("ok"),
        "the MCP client failed:\n{stdout}\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_uses_the_tools_over_stdio() {
    let (running, config, _cleanup) = service("mcpstdio").await;
    let binary = env!("CARGO_BIN_EXE_persona-prefs");
    let config_for_client = config.clone();
    tokio::task::spawn_blocking(move || {
        run_client(&config_for_client, &["stdio", binary, "ada", "bob"], &[]);
    })
    .await
    .unwrap();
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_uses_the_tools_over_http_each_token_held_to_its_persona() {
    let (running, config, _cleanup) = service("mcphttp").await;
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    let (ada_token, bob_token) = ("ada-token-0123456789abcdef", "bob-token-0123456789abcdef");
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_persona-prefs"));
    server
        .args(["mcp", "--transport", "http", "--listen", &listen])
        .env(
            "PERSONA_PREFS__MCP__TOKENS",
            r#"[{token_env = "TEST_MCP_TOKEN_ADA", persona = "ada"}, {token_env = "TEST_MCP_TOKEN_BOB", persona = "bob"}]"#,
        )
        .env("TEST_MCP_TOKEN_ADA", ada_token)
        .env("TEST_MCP_TOKEN_BOB", bob_token)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (name, value) in common::cli::config_env(&config) {
        server.env(name, value);
    }
    let _server = common::Children(vec![server.spawn().unwrap()]);
    let health = format!("http://{listen}/healthz");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if reqwest::get(&health)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the MCP server did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = format!("http://{listen}/mcp");
    let config_for_client = config.clone();
    tokio::task::spawn_blocking(move || {
        run_client(
            &config_for_client,
            &["http", &url, ada_token, "ada", bob_token, "bob"],
            &[],
        );
    })
    .await
    .unwrap();
    running.stop().await;
}
