//! The `persona-prefs` command line driving the real service over NATS.

mod common;

use std::process::Output;

use common::cli::stdout;
use common::{Cleanup, test_config};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use serde_json::Value;
use tokio::sync::watch;

async fn cli(config: &Config, args: &[&str]) -> Output {
    common::cli::run(config, args).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_drives_every_administration_endpoint() {
    let config = test_config("cli");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    let (_stop, stopped) = watch::channel(false);
    let services = app.serve(stopped).await.unwrap();

    let added = cli(
        &config,
        &[
            "prefs",
            "add",
            "--persona",
            "ada",
            "--name",
            "green tea",
            "--opinion",
            "I love green tea.",
            "--category",
            "culinary",
            "--stance",
            "for",
            "--json",
        ],
    )
    .await;
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let id = serde_json::from_slice::<Value>(&added.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    let listed = cli(&config, &["prefs", "list", "--persona", "ada"]).await;
    assert!(
        stdout(&listed).contains("green tea") && stdout(&listed).contains("I love green tea."),
        "{}",
        stdout(&listed)
    );
    let got = cli(&config, &["prefs", "get", "--persona", "ada", &id]).await;
    assert!(
        stdout(&got).contains("stance        for"),
        "{}",
        stdout(&got)
    );
    assert!(
        cli(&config, &["prefs", "reinforce", "--persona", "ada", &id])
            .await
            .status
            .success()
    );
    let got = cli(&config, &["prefs", "get", "--persona", "ada", &id]).await;
    assert!(
        stdout(&got).contains("(by hand)"),
        "the reinforcement is logged: {}",
        stdout(&got)
    );
    let stats = cli(&config, &["prefs", "stats", "--persona", "ada", "--json"]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&stats.stdout).unwrap()["active"],
        1
    );
    let searched = cli(&config, &["prefs", "search", "--persona", "ada", "tea"]).await;
    assert!(stdout(&searched).contains("green tea"));
    let injected = cli(
        &config,
        &[
            "inject",
            "--persona",
            "ada",
            "--query",
            "some green tea?",
            "--format",
            "xml",
        ],
    )
    .await;
    assert!(
        stdout(&injected).contains("<persona_preferences>"),
        "{}",
        stdout(&injected)
    );
    let evolved = cli(
        &config,
        &[
            "prefs",
            "evolve",
            "--persona",
            "ada",
            &id,
            "--opinion",
            "Green tea bores me now.",
            "--stance",
            "against",
        ],
    )
    .await;
    assert!(
        evolved.status.success(),
        "{}",
        String::from_utf8_lossy(&evolved.stderr)
    );
    assert!(
        cli(
            &config,
            &[
                "prefs",
                "retract",
                "--persona",
                "ada",
                &id,
                "--reason",
                "test"
            ]
        )
        .await
        .status
        .success()
    );
    let all = cli(
        &config,
        &["prefs", "list", "--persona", "ada", "--all", "--json"],
    )
    .await;
    assert_eq!(
        serde_json::from_slice::<Value>(&all.stdout).unwrap()[0]["active"],
        false
    );
    let purged = cli(
        &config,
        &["prefs", "purge-user", "--persona", "ada", "--user", "u1"],
    )
    .await;
    assert!(stdout(&purged).contains("rewritten      0"));
    assert!(
        stdout(&purged).contains("events erased  0 (0 not yet processed"),
        "{}",
        stdout(&purged)
    );
    // Without --persona, the user is erased from every persona, with progress on stderr.
    for persona in ["bob", "cy"] {
        cli(
            &config,
            &[
                "prefs",
                "add",
                "--persona",
                persona,
                "--name",
                "sam-7's jokes",
                "--opinion",
                "sam-7's jokes are the best.",
            ],
        )
        .await;
    }
    let everywhere = cli(&config, &["prefs", "purge-user", "--user", "nobody-here"]).await;
    assert_eq!(
        everywhere.status.code(),
        Some(0),
        "{}",
        common::cli::stderr(&everywhere)
    );
    assert!(
        common::cli::stderr(&everywhere).contains("; done"),
        "progress: {}",
        common::cli::stderr(&everywhere)
    );
    let summary = stdout(&everywhere);
    assert!(summary.contains("personas touched  0"), "{summary}");
    let everywhere = cli(
        &config,
        &["prefs", "purge-user", "--user", "sam-7", "--json"],
    )
    .await;
    let everywhere: Value = serde_json::from_slice(&everywhere.stdout).unwrap();
    assert_eq!(everywhere["done"], true, "{everywhere}");
    assert!(
        everywhere["personas_visited"].as_u64().unwrap() >= 3,
        "{everywhere}"
    );
    assert_eq!(everywhere["personas_touched"], 2, "{everywhere}");
    let bob = cli(&config, &["prefs", "list", "--persona", "bob", "--json"]).await;
    let bob: Value = serde_json::from_slice(&bob.stdout).unwrap();
    assert!(
        bob[0]["opinion"].as_str().unwrap().starts_with("erased-"),
        "the text no longer quotes sam-7: {bob}"
    );
    let chosen = cli(
        &config,
        &[
            "prefs",
            "purge-user",
            "--user",
            "sam-7",
            "--pseudonym",
            "x-1",
        ],
    )
    .await;
    assert_eq!(chosen.status.code(), Some(2), "a pseudonym needs --persona");

    // A persona deleted whole, once its id is typed twice.
    let unconfirmed = cli(
        &config,
        &[
            "prefs",
            "delete-persona",
            "--persona",
            "cy",
            "--confirm",
            "bob",
        ],
    )
    .await;
    assert_eq!(unconfirmed.status.code(), Some(2));
    let deleted = cli(
        &config,
        &[
            "prefs",
            "delete-persona",
            "--persona",
            "cy",
            "--confirm",
            "cy",
        ],
    )
    .await;
    assert!(
        stdout(&deleted).contains("preferences    1"),
        "{}",
        stdout(&deleted)
    );
    let cy = cli(&config, &["prefs", "list", "--persona", "cy", "--json"]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&cy.stdout).unwrap(),
        serde_json::json!([])
    );

    let index = cli(&config, &["index", "info", "--json"]).await;
    let index: Value = serde_json::from_slice(&index.stdout).unwrap();
    assert_eq!(index["name"], config.redis.index_name.as_str());
    if config.redis.cluster_nodes.is_empty() && config.redis.text_index {
        assert!(index["num_docs"].as_u64().unwrap() >= 1, "{index}");
    } else {
        assert_eq!(index["shared_index"], false, "{index}");
    }

    // Exit codes: 1 for an error reply, 2 for usage, 3 when no service answers.
    let missing = cli(&config, &["prefs", "get", "--persona", "ada", "nope"]).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("404"));
    assert_eq!(cli(&config, &["prefs", "get"]).await.status.code(), Some(2));
    services.stop().await;
    let nobody = cli(&config, &["prefs", "stats", "--persona", "ada"]).await;
    assert_eq!(
        nobody.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&nobody.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_reads_jsonl_and_help_shows_examples() {
    let config = test_config("clipublish");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/sample_conversation.jsonl"
    );
    // The sample's events are for persona demo_stargazer; publish them to this test's stream.
    let published = cli(&config, &["publish", "--file", sample]).await;
    assert!(
        published.status.success(),
        "{}",
        String::from_utf8_lossy(&published.stderr)
    );
    assert!(stdout(&published).contains("published 12 events"));
    let again = cli(&config, &["publish", "--file", sample]).await;
    assert!(
        stdout(&again).contains("published 0 events"),
        "re-publishing is deduplicated by event id"
    );
    let help = cli(&config, &["inject", "--help"]).await;
    assert!(stdout(&help).contains("Examples:"));
    let bad_config = tokio::task::spawn_blocking(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_persona-prefs"))
            .args(["index", "info"])
            .env("PERSONA_PREFS__STORE__REINFORCE_RATE", "7")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(bad_config.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_config.stderr).contains("store.reinforce_rate"));
}

/// Logs for people and for collectors: `log.format = "json"` writes one JSON object per line;
/// text written to a pipe (not a terminal) carries no colour codes.
#[tokio::test(flavor = "multi_thread")]
async fn logs_are_json_lines_or_plain_text_off_a_terminal() {
    for format in ["json", "text"] {
        // A fresh prefix each: `index ensure` logs that it looks for earlier layouts once.
        let config = test_config("logs");
        let _cleanup = Cleanup(config.clone());
        let output = common::cli::run_with_env(
            &config,
            &["index", "ensure"],
            &[("RUST_LOG", "info"), ("PERSONA_PREFS__LOG__FORMAT", format)],
        )
        .await;
        let logs = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{logs}");
        assert!(
            !logs.contains('\x1b'),
            "no colour codes off a terminal: {logs:?}"
        );
        assert!(logs.contains("earlier layouts"), "{format}: {logs}");
        if format == "json" {
            for line in logs.lines().filter(|line| !line.trim().is_empty()) {
                let object: serde_json::Value =
                    serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}"));
                assert!(object["level"].is_string(), "{line}");
            }
        }
    }
}

/// `--timeout` is the request's own patience: a reply slower than the NATS client's default
/// (10 s) still arrives when the timeout allows it, and a shorter timeout gives up in time.
#[tokio::test(flavor = "multi_thread")]
async fn the_timeout_applies_to_long_requests() {
    let config = test_config("clitimeout");
    let nats = persona_prefs::app::connect_nats(&config).await.unwrap();
    // A slow replica of the stats endpoint: answers after 11 s.
    let subject = persona_prefs::serve::Endpoint::Stats
        .subscription(&config.serve.subject_prefix, &config.serve.tenant);
    let mut requests = nats.subscribe(subject).await.unwrap();
    let replier = nats.clone();
    tokio::spawn(async move {
        while let Some(request) = futures::StreamExt::next(&mut requests).await {
            let replier = replier.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(11)).await;
                let body = r#"{"persona_id": "ada", "total": 7, "active": 7, "retracted": 0, "by_category": {}}"#;
                let _ = replier.publish(request.reply.unwrap(), body.into()).await;
            });
        }
    });
    nats.flush().await.unwrap();

    let patient = cli(
        &config,
        &[
            "prefs",
            "stats",
            "--persona",
            "ada",
            "--json",
            "--timeout",
            "20",
        ],
    )
    .await;
    assert!(
        patient.status.success(),
        "{}",
        common::cli::stderr(&patient)
    );
    assert!(
        stdout(&patient).contains("\"total\": 7"),
        "{}",
        stdout(&patient)
    );

    let hasty = cli(
        &config,
        &["prefs", "stats", "--persona", "ada", "--timeout", "1"],
    )
    .await;
    assert_eq!(
        hasty.status.code(),
        Some(3),
        "no reply in time: unavailable"
    );
    assert!(
        common::cli::stderr(&hasty).contains("within 1 s"),
        "{}",
        common::cli::stderr(&hasty)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn calibrate_measures_the_configured_embedder_on_labelled_topic_pairs() {
    let config = test_config("calibrate");
    // The local model on the shipped pairs: a threshold, its accuracy, the configured one's.
    let output = cli(&config, &["calibrate", "--json"]).await;
    assert!(output.status.success(), "{}", common::cli::stderr(&output));
    let found: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert!(found["pairs"].as_u64().unwrap() >= 90);
    let threshold = found["threshold"].as_f64().unwrap();
    assert!((0.4..0.95).contains(&threshold), "{found}");
    assert!(found["accuracy"].as_f64().unwrap() >= 0.85, "{found}");
    assert!(found["accuracy"].as_f64() >= found["configured_accuracy"].as_f64());

    // An OpenAI-compatible embedder (the fake: a topic's vector is its first word's), on the
    // operator's own pairs: it is that embedder that is measured, and the key to set is its.
    let fake = common::fake_openai::FakeOpenAi::start().await;
    fake.respond_with(|_, body| {
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let first = text
                    .as_str()
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_string();
                let mut vector = vec![0.01f64; 384];
                vector[first.bytes().map(usize::from).sum::<usize>() % 384] = 1.0;
                serde_json::json!({"index": index, "embedding": vector})
            })
            .collect();
        common::fake_openai::Reply::ok(serde_json::json!({"data": data}))
    });
    let pairs = common::scratch_dir("calibrate").join("pairs.jsonl");
    std::fs::write(
        &pairs,
        "{\"a\": \"tea green\", \"b\": \"tea black\", \"same\": true}\n\
         {\"a\": \"jazz old\", \"b\": \"jazz new\", \"same\": true}\n\
         {\"a\": \"tea green\", \"b\": \"jazz new\", \"same\": false}\n\
         {\"a\": \"chess\", \"b\": \"opera\", \"same\": false}\n",
    )
    .unwrap();
    let output = common::cli::run_with_env(
        &config,
        &["calibrate", "--pairs", pairs.to_str().unwrap()],
        &[
            ("PERSONA_PREFS__EMBED__KIND", "openai"),
            ("PERSONA_PREFS__EMBED__OPENAI__BASE_URL", &fake.base_url),
            ("PERSONA_PREFS__EMBED__OPENAI__DIMS", "384"),
            ("OPENAI_API_KEY", "sk-test"),
        ],
    )
    .await;
    let printed = stdout(&output);
    assert!(output.status.success(), "{}", common::cli::stderr(&output));
    assert!(printed.contains("accuracy 100.0%"), "{printed}");
    assert!(
        printed.contains("To use it: embed.openai_match_threshold = "),
        "{printed}"
    );
    assert!(
        !fake.received().is_empty(),
        "the configured embedder was asked"
    );
    // A pairs file that is not pairs is refused with the line.
    std::fs::write(&pairs, "{\"a\": \"x\"}\n").unwrap();
    let output = cli(&config, &["calibrate", "--pairs", pairs.to_str().unwrap()]).await;
    assert!(!output.status.success());
    assert!(
        common::cli::stderr(&output).contains("line 1"),
        "{}",
        common::cli::stderr(&output)
    );
}

/// A held-out set is read once a round, after the change: an ordinary `evaluate-extraction`
/// (choosing a value, trying a rule) reads the tuning sets and the development set and says
/// that the held-out ones were left out; `--held-out` reads them too.
#[tokio::test(flavor = "multi_thread")]
async fn evaluate_extraction_reads_the_held_out_sets_only_when_asked() {
    let config = test_config("evaluate-held-out");
    let sets = |output: &Output| -> Vec<String> {
        assert!(output.status.success(), "{}", common::cli::stderr(output));
        let scores: Value = serde_json::from_str(&stdout(output)).unwrap();
        scores.as_object().unwrap().keys().cloned().collect()
    };
    let ordinary = sets(&cli(&config, &["evaluate-extraction", "--json"]).await);
    assert!(
        ordinary.iter().all(|name| !name.contains("held-out")),
        "{ordinary:?}"
    );
    assert!(
        ordinary.iter().any(|name| name == "tuning")
            && ordinary.iter().any(|name| name.starts_with("development")),
        "{ordinary:?}"
    );
    // Every held-out set the crate ships (a round that reads a new one adds it there), and no
    // fewer than the 19 read by 2026-12-06.
    let shipped_held_out = persona_prefs::extract::evaluate::SHIPPED_SETS
        .iter()
        .filter(|(name, _)| persona_prefs::extract::evaluate::is_held_out(name))
        .count();
    assert!(shipped_held_out >= 19, "{shipped_held_out}");
    let with_held_out = sets(&cli(&config, &["evaluate-extraction", "--held-out", "--json"]).await);
    assert_eq!(
        with_held_out
            .iter()
            .filter(|name| persona_prefs::extract::evaluate::is_held_out(name))
            .count(),
        shipped_held_out,
        "{with_held_out:?}"
    );
    assert_eq!(with_held_out.len(), ordinary.len() + shipped_held_out);
    let text = cli(&config, &["evaluate-extraction"]).await;
    assert!(
        stdout(&text).contains(&format!(
            "the {shipped_held_out} held-out sets are not read: --held-out reads them"
        )),
        "{}",
        stdout(&text)
    );
}

/// What an extractor found can be kept and scored again later: `--write-found` writes each
/// utterance's findings in the labelled sets' format, and `--found` scores such a file in
/// place of the extractor, with the same figures; a file that names one utterance twice with
/// other findings is refused, naming the line.
#[tokio::test(flavor = "multi_thread")]
async fn evaluate_extraction_scores_findings_kept_from_an_earlier_reading() {
    let config = test_config("evaluate-found");
    let dir = std::env::temp_dir().join(format!("persona-prefs-found-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let set = dir.join("set.jsonl");
    std::fs::write(
        &set,
        concat!(
            r#"{"text": "I love green tea.", "opinions": [{"topic": "green tea", "stance": "for"}]}"#,
            "\n",
            r#"{"text": "Honestly, I can't stand reality TV.", "opinions": [{"topic": "reality tv", "stance": "against"}]}"#,
            "\n",
            r#"{"text": "The train left at noon.", "opinions": []}"#,
            "\n",
        ),
    )
    .unwrap();
    let kept = dir.join("found.jsonl");
    let (set_arg, kept_arg) = (set.to_str().unwrap(), kept.to_str().unwrap());
    let scores = |output: &Output| -> Value {
        assert!(output.status.success(), "{}", common::cli::stderr(output));
        serde_json::from_str::<Value>(&stdout(output)).unwrap()[set_arg].clone()
    };
    let read = scores(
        &cli(
            &config,
            &[
                "evaluate-extraction",
                "--set",
                set_arg,
                "--write-found",
                kept_arg,
                "--json",
            ],
        )
        .await,
    );
    let written = std::fs::read_to_string(&kept).unwrap();
    let written_findings: usize = written
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["opinions"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(written_findings, read["found"].as_u64().unwrap() as usize);
    let rescored = scores(
        &cli(
            &config,
            &[
                "evaluate-extraction",
                "--set",
                set_arg,
                "--found",
                kept_arg,
                "--json",
            ],
        )
        .await,
    );
    for figure in ["found", "matched", "recalled", "expected"] {
        assert_eq!(rescored[figure], read[figure], "{figure}");
    }
    assert!(read["matched"].as_u64().unwrap() >= 1, "{read}");

    std::fs::write(
        &kept,
        format!(
            "{written}{}\n",
            r#"{"text": "I love green tea.", "opinions": []}"#
        ),
    )
    .unwrap();
    let refused = cli(
        &config,
        &["evaluate-extraction", "--set", set_arg, "--found", kept_arg],
    )
    .await;
    assert!(!refused.status.success());
    let said = common::cli::stderr(&refused);
    assert!(
        said.contains("again, with other findings") && said.contains("line "),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
