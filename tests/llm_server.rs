//! The LLM path against a real llama.cpp server: `scripts/services llm-start` (the pinned
//! SmolLM2-135M-Instruct, one slot), which `scripts/test` starts. These test the server's wire
//! behaviour, not the model's quality: requests accepted, the reply's schema enforced by the
//! server, replies parsed or dead-lettered with a reason, and a one-slot server never flooded
//! into timeouts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Cleanup, Running, test_config};
use persona_prefs::config::Config;
use persona_prefs::extract::adjudicate::{Adjudicator, LlmAdjudicator, Statement};
use persona_prefs::extract::chat::{ChatModel, Question};
use persona_prefs::extract::llm::LlmExtractor;
use persona_prefs::extract::{ExtractError, ExtractionInput, Extractor, ExtractorKind, LlmConfig};
use persona_prefs::ingest::worker::{HEADER_REASON, HEADER_REASON_CODE};
use persona_prefs::store::Stance;
use serde::Deserialize;
use serde_json::json;

/// The real server `scripts/services llm-start` runs.
fn real_llm() -> LlmConfig {
    let url = std::env::var("PERSONA_PREFS_LLM_URL").expect(
        "PERSONA_PREFS_LLM_URL is not set: run the tests with scripts/test, which starts the \
         local LLM server (scripts/services llm-start)",
    );
    let mut config = Config::defaults().extract.llm;
    config.base_url = url;
    config.model = std::env::var("PERSONA_PREFS_LLM_MODEL_NAME").unwrap_or_default();
    // Shared 2-core machines: a request in the server's queue behind a long one may wait.
    config.timeout_ms = 60_000;
    config.max_tokens = 256;
    config
}

#[derive(Deserialize, Debug)]
struct Sketch {
    colour: String,
    words: Vec<String>,
}

/// The server holds the model to the JSON Schema sent in the nested OpenAI shape: an enum, an
/// array's length and strings' lengths, which a 135M model left to itself does not keep to
/// when asked to describe something at length.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_enforces_the_reply_schema() {
    let model = ChatModel::new(&real_llm()).unwrap();
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["colour", "words"],
        "properties": {
            "colour": {"type": "string", "enum": ["red", "green", "blue"]},
            "words": {"type": "array", "minItems": 1, "maxItems": 2,
                      "items": {"type": "string", "minLength": 1, "maxLength": 8}},
        },
    });
    for subject in [
        "a sunset over the sea",
        "a forest in spring",
        "the night sky",
    ] {
        let sketch: Sketch = model
            .ask(&Question {
                system: "Describe what you are shown at great length, in many flowing sentences.",
                user: format!("Describe {subject}."),
                schema_name: "sketch",
                schema: &schema,
                max_tokens: Some(96),
            })
            .await
            .unwrap_or_else(|error| panic!("{subject}: {error}"));
        assert!(
            ["red", "green", "blue"].contains(&sketch.colour.as_str()),
            "{sketch:?}"
        );
        assert!((1..=2).contains(&sketch.words.len()), "{sketch:?}");
        assert!(
            sketch
                .words
                .iter()
                .all(|w| (1..=8).contains(&w.chars().count())),
            "{sketch:?}"
        );
    }
    assert_eq!(
        model.reply_shape(),
        "json_schema",
        "the server took the schema"
    );
    // Started at the server's one slot (/props); one computing and one waiting at most.
    assert!(
        model.concurrency_limit() <= 2,
        "{}",
        model.concurrency_limit()
    );
}

/// The extractor and the adjudicator get answers they can use, or say why not: what a real
/// small model says is parsed and validated, never a transport failure.
#[tokio::test(flavor = "multi_thread")]
async fn the_extractor_and_the_adjudicator_are_answered_by_a_real_server() {
    let model = Arc::new(ChatModel::new(&real_llm()).unwrap());
    let categories = Config::defaults().store.categories;
    let extractor = LlmExtractor::with_model(model.clone(), 8, &categories);
    for message in [
        "Honestly, I adore thunderstorms.",
        "I can't stand crowds, but green tea is lovely.",
        "What time is it?",
    ] {
        let input = ExtractionInput {
            persona_message: message,
            context: Vec::new(),
            participants: &[],
        };
        match extractor.extract(&input).await {
            Ok(opinions) => {
                for opinion in opinions {
                    assert!(
                        persona_prefs::extract::evidence_in_message(&opinion.evidence, message),
                        "validated: {opinion:?}"
                    );
                }
            }
            Err(error @ ExtractError::Unusable(_)) => {
                // A small model's answer can be unusable; it is reported with its words.
                assert!(error.to_string().contains("LLM"), "{error}");
            }
            Err(error) => panic!("{message}: the server failed the request: {error}"),
        }
    }
    let adjudicator =
        LlmAdjudicator::with_model(model.clone(), &Config::defaults().extract.adjudication);
    let statement = |topic: &str, opinion: &str, stance| Statement {
        topic: topic.into(),
        opinion: opinion.into(),
        stance: Some(stance),
    };
    let verdict = adjudicator
        .adjudicate(
            &statement("jogging", "I love jogging.", Stance::For),
            "p1",
            &statement("running", "Running is my favourite thing.", Stance::For),
        )
        .await
        .expect("an adjudication from the real server");
    assert!(!verdict.same_stance || verdict.same_topic, "{verdict:?}");
    assert_eq!(model.reply_shape(), "json_schema");
}

/// Through JetStream and the worker with the LLM extractor: every event settles, processed or
/// dead-lettered with a reason, none for a timeout or for being delivered too often. Twelve
/// events with two persona messages each, all in flight at once against one slot.
#[tokio::test(flavor = "multi_thread")]
async fn events_through_a_real_one_slot_server_all_settle_with_no_timeout() {
    let mut config = test_config("realllm");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm = real_llm();
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    let sayings = [
        "I love green tea.",
        "Honestly, thunderstorms are wonderful.",
        "I can't stand crowds.",
        "Jazz is the best music there is.",
    ];
    let events = 12;
    for n in 0..events {
        let first = sayings[n % sayings.len()];
        let second = sayings[(n + 1) % sayings.len()];
        running
            .publish_event(&json!({"event_id": format!("real-{n}"), "persona_id": "ada", "platform": "p",
                "channel_id": "c", "messages": [
                    {"message_id": format!("real-{n}-0"), "role": "user", "user_id": "u1",
                     "content": "What do you think?", "timestamp": format!("2026-11-20T09:{n:02}:00Z")},
                    {"message_id": format!("real-{n}-1"), "role": "persona", "content": first,
                     "timestamp": format!("2026-11-20T09:{n:02}:10Z")},
                    {"message_id": format!("real-{n}-2"), "role": "persona", "content": second,
                     "timestamp": format!("2026-11-20T09:{n:02}:20Z")}]}))
            .await;
    }
    persona_prefs::app::wait_until_drained(
        &running.app.js,
        running.consumer.clone(),
        Duration::from_secs(600),
    )
    .await
    .unwrap_or_else(|error| panic!("events left unsettled: {error}"));
    let letters = common_dead_letters(&running, &config).await;
    for (code, reason) in &letters {
        assert_eq!(
            code, "permanent",
            "dead-lettered only for an unusable reply: {reason}"
        );
        assert!(reason.contains("LLM reply unusable"), "{reason}");
    }
    let info = running.consumer.clone().info().await.unwrap().clone();
    assert_eq!(
        info.num_redelivered, 0,
        "no event needed a second delivery (no timeout, no retry exhausted)"
    );
    running.stop().await;
}

async fn common_dead_letters(running: &Running, config: &Config) -> Vec<(String, String)> {
    let Ok(stream) = running.app.js.get_stream(&config.ingest.dlq_stream).await else {
        return Vec::new();
    };
    let last = stream.get_info().await.unwrap().state.last_sequence;
    let mut letters = Vec::new();
    for sequence in 1..=last {
        if let Ok(message) = stream.get_raw_message(sequence).await {
            let header = |name: &str| {
                message
                    .headers
                    .get(name)
                    .map(|v| v.as_str().to_string())
                    .unwrap_or_default()
            };
            letters.push((header(HEADER_REASON_CODE), header(HEADER_REASON)));
        }
    }
    letters
}
