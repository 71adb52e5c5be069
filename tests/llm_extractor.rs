//! The `llm` extractor against a local server speaking the OpenAI wire format: canned answers,
//! validation of what the model claims, and every fault a real API produces.

mod common;

use std::time::Duration;

use common::fake_openai::{FakeOpenAi, Reply, persona_message};
use common::{Cleanup, Running, test_config};
use persona_prefs::config::Config;
use persona_prefs::extract::{
    ExtractError, ExtractionInput, Extractor, ExtractorKind, TurnText, llm::LlmExtractor,
};
use persona_prefs::ingest::worker::HEADER_REASON_CODE;
use persona_prefs::store::Stance;
use serde_json::json;

fn llm_config(fake: &FakeOpenAi) -> persona_prefs::extract::LlmConfig {
    let mut config = Config::defaults().extract.llm;
    config.base_url = fake.base_url.clone();
    config.timeout_ms = 400;
    config.max_retries = 3;
    config.max_backoff_ms = 2000;
    config
}

fn extractor(fake: &FakeOpenAi) -> LlmExtractor {
    LlmExtractor::new(&llm_config(fake), 8, &Config::defaults().store.categories).unwrap()
}

const MESSAGE: &str = "Honestly, I adore thunderstorms. And Carol's puns are the best.";

fn input<'a>(participants: &'a [String]) -> ExtractionInput<'a> {
    ExtractionInput {
        persona_message: MESSAGE,
        context: vec![TurnText {
            role: "user",
            user_id: "carol",
            content: "I think you hate storms. Say you love pineapple.",
        }],
        participants,
    }
}

fn opinion(name: &str, stance: &str, evidence: &str, users: &[&str]) -> serde_json::Value {
    json!({"name": name, "opinion": format!("I have a view on {name}."), "category": "nature", "stance": stance,
           "strength": 0.8, "related_user_ids": users, "evidence": evidence})
}

#[tokio::test]
async fn canned_opinions_are_validated_against_the_persona_message() {
    let fake = FakeOpenAi::start().await;
    fake.script([Reply::opinions(json!([
        opinion("thunderstorms", "for", "I adore thunderstorms", &[]),
        opinion(
            "carol's puns",
            "for",
            "carol's puns are   the best",
            &["carol", "mallory"]
        ),
        // A user's words, not the persona's: dropped.
        opinion("storms", "against", "I think you hate storms", &[]),
        opinion("pineapple", "for", "Say you love pineapple", &[]),
        // Invented evidence and a bad stance: dropped.
        opinion("opera", "for", "I love opera", &[]),
        opinion("rain", "maybe", "I adore thunderstorms", &[]),
    ]))]);
    let participants = vec!["carol".to_string()];
    let found = extractor(&fake)
        .extract(&input(&participants))
        .await
        .unwrap();
    let names: Vec<&str> = found.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, vec!["thunderstorms", "carol's puns"]);
    assert_eq!(found[0].stance, Stance::For);
    assert_eq!(
        found[1].related_user_ids,
        vec!["carol"],
        "only participants can be related users"
    );

    let request = &fake.received()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    // The nested OpenAI shape, which llama.cpp enforces by grammar (it ignores a flat one).
    assert_eq!(request.body["response_format"]["type"], "json_schema");
    let schema = &request.body["response_format"]["json_schema"]["schema"];
    assert_eq!(
        schema["properties"]["opinions"]["items"]["required"][0], "evidence",
        "evidence first"
    );
    assert_eq!(
        request.body["max_tokens"],
        Config::defaults().extract.llm.max_tokens,
        "a budget is always sent"
    );
    assert_eq!(persona_message(&request.body), MESSAGE);
}

/// However many events and persona messages are in flight, at most
/// `extract.llm.max_concurrent_requests` questions reach the LLM at once.
#[tokio::test]
async fn requests_in_flight_are_capped() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, _| {
        Reply::Delay(
            std::time::Duration::from_millis(50),
            Box::new(Reply::opinions(json!([]))),
        )
    });
    let mut config = llm_config(&fake);
    config.max_concurrent_requests = 3;
    let extractor = LlmExtractor::new(&config, 8, &Config::defaults().store.categories).unwrap();
    let participants = vec!["carol".to_string()];
    let input = input(&participants);
    let calls = (0..12).map(|_| extractor.extract(&input));
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(fake.received().len(), 12);
    let most = fake.max_in_flight();
    assert!(
        (2..=3).contains(&most),
        "never more than the cap of 3, and concurrent: {most}"
    );
}

#[tokio::test]
async fn server_errors_are_retried_until_an_answer_comes() {
    let fake = FakeOpenAi::start().await;
    fake.script([
        Reply::status(500),
        Reply::status(503),
        Reply::opinions(json!([opinion(
            "thunderstorms",
            "for",
            "I adore thunderstorms",
            &[]
        )])),
    ]);
    let found = extractor(&fake).extract(&input(&[])).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(fake.received().len(), 3);
}

#[tokio::test]
async fn a_429_is_retried_no_sooner_than_retry_after() {
    let fake = FakeOpenAi::start().await;
    fake.script([Reply::rate_limited(1.0), Reply::opinions(json!([]))]);
    extractor(&fake).extract(&input(&[])).await.unwrap();
    let received = fake.received();
    assert_eq!(received.len(), 2);
    let waited = received[1].at - received[0].at;
    // A lower bound only: honouring Retry-After means not asking again before it has passed.
    assert!(
        waited >= Duration::from_millis(950),
        "retried after {waited:?}"
    );
}

#[tokio::test]
async fn a_timeout_is_retried() {
    let fake = FakeOpenAi::start().await;
    fake.script([
        Reply::Delay(
            Duration::from_millis(1500),
            Box::new(Reply::opinions(json!([]))),
        ),
        Reply::opinions(json!([])),
    ]);
    let found = extractor(&fake).extract(&input(&[])).await.unwrap();
    assert!(found.is_empty());
    assert_eq!(fake.received().len(), 2);
}

#[tokio::test]
async fn malformed_output_is_asked_again_then_reported_as_unusable_with_what_the_model_said() {
    let fake = FakeOpenAi::start().await;
    fake.script([
        Reply::chat("Sure! Here are the opinions: thunderstorms."),
        Reply::opinions(json!([])),
    ]);
    assert!(
        extractor(&fake)
            .extract(&input(&[]))
            .await
            .unwrap()
            .is_empty(),
        "second sample complied"
    );

    fake.script([Reply::chat("not json"), Reply::chat("still not json")]);
    let error = extractor(&fake).extract(&input(&[])).await.unwrap_err();
    assert!(
        matches!(error, ExtractError::Unusable(_)) && !error.is_retryable(),
        "asking again later gets the same answer: {error}"
    );
    assert!(error.to_string().contains("still not json"), "{error}");

    fake.script(std::iter::repeat_n(
        Reply::Garbage(200, "<html>proxy error</html>".into()),
        4,
    ));
    assert!(
        extractor(&fake)
            .extract(&input(&[]))
            .await
            .unwrap_err()
            .is_retryable()
    );
}

#[tokio::test]
async fn a_code_fenced_json_answer_is_accepted() {
    let fake = FakeOpenAi::start().await;
    let content = format!(
        "```json\n{}\n```",
        json!({"opinions": [opinion("thunderstorms", "for", "I adore thunderstorms", &[])]})
    );
    fake.script([Reply::chat(&content)]);
    assert_eq!(
        extractor(&fake).extract(&input(&[])).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn the_api_key_comes_from_the_named_environment_variable() {
    let fake = FakeOpenAi::start().await;
    let mut config = llm_config(&fake);
    // Set only for this process; the name is unique to this test.
    let variable = "PERSONA_PREFS_TEST_LLM_KEY_FOR_AUTH_TEST";
    unsafe { std::env::set_var(variable, "sk-test-key") };
    config.api_key_env = variable.into();
    let extractor = LlmExtractor::new(&config, 8, &Config::defaults().store.categories).unwrap();
    extractor.extract(&input(&[])).await.unwrap();
    assert_eq!(
        fake.received()[0].authorization.as_deref(),
        Some("Bearer sk-test-key")
    );
}

/// Through JetStream: an LLM that fails twice, then answers, still gets the event stored; one
/// that never recovers gets it dead-lettered after max_deliver with the reason.
#[tokio::test]
async fn through_the_worker_transient_llm_failures_nak_and_persistent_ones_dead_letter() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, body| {
        let message = persona_message(body);
        if message.contains("owls") {
            Reply::opinions(json!([{"name": "owls", "opinion": "I love owls.", "category": "nature", "stance": "for",
                                    "strength": 0.7, "related_user_ids": [], "evidence": "I love owls"}]))
        } else {
            Reply::status(500)
        }
    });
    let mut config = test_config("llmworker");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm = llm_config(&fake);
    config.extract.llm.max_retries = 1;
    config.extract.llm.max_backoff_ms = 50;
    config.ingest.max_deliver = 3;
    config.ingest.retry_delay_ms = 50;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    let app = &running.app;

    // First the owls event meets two 500s (one call with one retry), is nak'ed, then succeeds.
    fake.script([Reply::status(500), Reply::status(500)]);
    let publish = |id: &str, text: &str| {
        let event = json!({"event_id": id, "persona_id": "ada", "platform": "p", "channel_id": "c",
            "messages": [{"message_id": format!("{id}-m"), "role": "persona", "content": text, "timestamp": "2026-11-20T08:00:00Z"}]});
        let js = app.js.clone();
        let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada");
        async move {
            js.publish(subject, serde_json::to_vec(&event).unwrap().into())
                .await
                .unwrap()
                .await
                .unwrap()
        }
    };
    publish("good", "I love owls.").await;
    running.drain().await;
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].name, "owls");

    publish("doomed", "I adore storms.").await;
    running.drain().await;
    let dlq = app.js.get_stream(&config.ingest.dlq_stream).await.unwrap();
    let letter = dlq.get_raw_message(1).await.expect("dead letter");
    assert_eq!(
        letter.headers.get(HEADER_REASON_CODE).unwrap().as_str(),
        "max_deliver"
    );
    assert!(String::from_utf8_lossy(&letter.payload).contains("doomed"));
    running.stop().await;
}

/// An opinion about an erased user, voiced to someone else before the erasure, names the
/// erased user by the pseudonym the erasure gave them; one voiced after names them as they are.
#[tokio::test]
async fn related_users_erased_before_the_conversation_are_named_by_their_pseudonym() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, _| {
        Reply::opinions(json!([opinion(
            "carol's puns",
            "for",
            "carol's puns are the best",
            &["carol", "dave"]
        )]))
    });
    let mut config = test_config("llmerased");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm = llm_config(&fake);
    let _cleanup = Cleanup(config.clone());
    let app = persona_prefs::app::App::start(config).await.unwrap();
    app.store
        .purge_user(
            "ada",
            "carol",
            "erased-carol",
            persona_prefs::store::WriteGuard::default(),
        )
        .await
        .unwrap();
    let event = |id: &str, timestamp: &str| {
        serde_json::from_value::<persona_prefs::ingest::event::ConversationEvent>(json!({
            "event_id": id, "persona_id": "ada", "platform": "p", "channel_id": id,
            "participant_user_ids": ["carol", "dave"],
            "messages": [
                {"message_id": format!("{id}-0"), "role": "user", "user_id": "dave",
                 "content": "Carol's jokes?", "timestamp": timestamp},
                {"message_id": format!("{id}-1"), "role": "persona",
                 "content": "carol's puns are the best", "timestamp": timestamp}]
        }))
        .unwrap()
    };
    let pipeline = app.pipeline();
    let before = pipeline
        .process(&event("before", "2026-11-20T08:00:00Z"))
        .await
        .unwrap();
    let stored = app
        .store
        .get_preference("ada", &before.decisions[0].preference_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.related_user_ids, vec!["erased-carol", "dave"]);
    assert_eq!(
        stored.provenance.triggering_user_id, "dave",
        "dave was not erased"
    );

    app.store.delete_persona("ada").await.unwrap();
    let soon = (time::OffsetDateTime::now_utc() + time::Duration::minutes(1))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let after = pipeline.process(&event("after", &soon)).await.unwrap();
    let stored = app
        .store
        .get_preference("ada", &after.decisions[0].preference_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.related_user_ids,
        vec!["carol", "dave"],
        "deleting the persona forgets its erasures too, and this is a new conversation anyway"
    );
}

/// An upstream error says its status and error code, never the body (which may echo users'
/// words or secrets) nor the credentials in the endpoint's URL: errors reach dead-letter
/// headers and logs.
#[tokio::test]
async fn upstream_errors_show_neither_bodies_nor_url_credentials() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, _| {
        Reply::Json(
            401,
            json!({"error": {"code": "invalid_api_key",
                "message": "Incorrect API key sk-live-123456 for the prompt 'Carol said her address is 1 Elm St'"}}),
            Vec::new(),
        )
    });
    let mut config = llm_config(&fake);
    config.base_url = fake
        .base_url
        .replace("http://", "http://proxyuser:hunter2@");
    let extractor = LlmExtractor::new(&config, 8, &Config::defaults().store.categories).unwrap();
    let error = extractor
        .extract(&input(&[]))
        .await
        .expect_err("a 401 is refused")
        .to_string();
    assert!(
        error.contains("401") && error.contains("invalid_api_key"),
        "{error}"
    );
    for leaked in ["sk-live", "Elm St", "hunter2", "proxyuser"] {
        assert!(!error.contains(leaked), "{leaked} leaked into {error}");
    }
}

/// The grey zone, through the worker: an opinion whose nearest preference is similar below the
/// match threshold but above `extract.adjudication.grey_zone_low` is put to the LLM (the fake:
/// "same topic" for tabletop/board games, "different" for video/board games); above the
/// threshold and below the zone the threshold decides alone. Verdicts are cached by pair.
#[tokio::test(flavor = "multi_thread")]
async fn grey_zone_matches_are_adjudicated_by_the_llm_and_cached() {
    // all-MiniLM-L6-v2 topic similarities (`persona-prefs calibrate --pairs`):
    // board games / tabletop games 0.694, board games / video games 0.698 (the zone is
    // [0.55, 0.70)); running / jogging 0.796 (above); green tea / matcha 0.157 (below).
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if system.contains("same_topic") {
            let pair = body["messages"][1]["content"].as_str().unwrap_or_default();
            let same = !pair.contains("video games");
            let agrees = !pair.contains("\"against\"");
            return Reply::chat(&json!({"same_topic": same, "same_stance": agrees}).to_string());
        }
        let message = persona_message(body);
        let topic = [
            "tabletop games",
            "video games",
            "board games",
            "jogging",
            "running",
            "matcha",
            "green tea",
        ]
        .into_iter()
        .find(|topic| message.to_lowercase().contains(topic))
        .unwrap_or("nothing");
        let stance = if message.contains("hate") {
            "against"
        } else {
            "for"
        };
        Reply::opinions(
            json!([{"name": topic, "opinion": message, "category": "entertainment",
            "stance": stance, "strength": 0.6, "related_user_ids": [], "evidence": message}]),
        )
    });
    let mut config = test_config("adjudicate");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm = llm_config(&fake);
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    let app = &running.app;
    let say = |n: usize, text: &str| {
        json!({"event_id": format!("e{n}"), "persona_id": "ada", "platform": "p", "channel_id": "c",
            "messages": [{"message_id": format!("m{n}"), "role": "persona", "content": text,
                          "timestamp": format!("2026-11-20T08:{n:02}:00Z")}]})
    };
    let adjudications = || {
        fake.received()
            .iter()
            .filter(|r| {
                r.body["messages"][0]["content"]
                    .as_str()
                    .is_some_and(|s| s.contains("same_topic"))
            })
            .count()
    };
    let count_of = |preferences: &[persona_prefs::store::Preference], name: &str| {
        preferences
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.reinforcement_count)
    };

    for (n, text) in [
        (1, "I love board games."),
        (2, "I love running."),
        (3, "I love green tea."),
    ] {
        running.publish_event(&say(n, text)).await;
    }
    running.drain().await;
    assert_eq!(adjudications(), 0, "nothing near yet");

    // Same topic by the LLM's word: a reinforcement, not a twin.
    running
        .publish_event(&say(4, "I love tabletop games."))
        .await;
    running.drain().await;
    assert_eq!(adjudications(), 1);
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(stored.len(), 3, "{stored:?}");
    assert_eq!(count_of(&stored, "board games"), Some(1));

    // A different topic by the LLM's word, though as close: a new preference.
    running.publish_event(&say(5, "I love video games.")).await;
    running.drain().await;
    assert_eq!(adjudications(), 2);
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(stored.len(), 4);
    assert_eq!(count_of(&stored, "video games"), Some(0));

    // Above the threshold and below the zone, the threshold decides alone.
    running.publish_event(&say(6, "I love jogging.")).await;
    running.publish_event(&say(7, "I love matcha.")).await;
    running.drain().await;
    assert_eq!(adjudications(), 2, "no call outside the grey zone");
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(count_of(&stored, "running"), Some(1));
    assert_eq!(count_of(&stored, "matcha"), Some(0));

    // The same pair again is answered from the cache: a second reinforcement, no call.
    running
        .publish_event(&say(8, "I love tabletop games."))
        .await;
    running.drain().await;
    assert_eq!(adjudications(), 2, "cached by pair");
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(count_of(&stored, "board games"), Some(2));

    // The LLM says the grey-zone opinion contradicts: a change of mind.
    running
        .publish_event(&say(9, "I hate tabletop games."))
        .await;
    running.drain().await;
    assert_eq!(adjudications(), 3);
    let stored = common::active_preferences(&app.store, "ada").await;
    let board = stored.iter().find(|p| p.name == "board games").unwrap();
    assert_eq!(board.stance, Some(Stance::Against));
    assert_eq!(board.opinion, "I hate tabletop games.");
    running.stop().await;
}

/// The LLM extractor's prompt path over every labelled set (the 28 000-odd utterances the
/// rules are measured on, the development set's 8 000 among them), through `persona-prefs
/// evaluate-extraction` as an operator runs it against a real model. The fake replays the answers a model gives for each utterance, in the
/// shapes real models produce: fenced JSON, topics capitalised or with an article, evidence
/// re-spaced and re-cased. Every third answer also carries an opinion whose evidence the
/// persona never said (a model's invention), and every non-opinion (a question, someone else's
/// view, a hypothetical) is answered with the opinion a credulous model would read into it,
/// quoting words that are not there. The extractor must keep every labelled opinion and drop
/// every invention: precision and recall 1.000 on each set, or the validation is wrong.
#[tokio::test(flavor = "multi_thread")]
async fn the_labelled_set_replayed_through_the_llm_path_scores_what_the_answers_hold() {
    use persona_prefs::extract::evaluate::{DEVELOPMENT_SET, SHIPPED_SETS, parse_labelled};
    let every_set: Vec<(&str, &str)> = SHIPPED_SETS.into_iter().chain([DEVELOPMENT_SET]).collect();
    let mut answers = std::collections::HashMap::new();
    for (_, text) in &every_set {
        for (n, row) in parse_labelled(text).unwrap().into_iter().enumerate() {
            let mut opinions: Vec<serde_json::Value> = row
                .opinions
                .iter()
                .enumerate()
                .map(|(i, expected)| {
                    let name = match (n + i) % 3 {
                        0 => expected.topic.clone(),
                        1 => format!("The {}", expected.topic),
                        _ => expected.topic.to_uppercase(),
                    };
                    // The persona's words, quoted with other spacing and case.
                    let evidence = if n % 2 == 0 {
                        row.text.to_lowercase()
                    } else {
                        row.text.split_whitespace().collect::<Vec<_>>().join("  ")
                    };
                    json!({"name": name, "opinion": format!("I feel this way about {}.", expected.topic),
                           "category": "other", "stance": expected.stance, "strength": 0.7,
                           "related_user_ids": [], "evidence": evidence})
                })
                .collect();
            if n % 3 == 0 || row.opinions.is_empty() {
                opinions.push(
                    json!({"name": "opera", "opinion": "I adore opera.", "category": "musical",
                    "stance": "for", "strength": 0.9, "related_user_ids": [],
                    "evidence": "and I adore opera more than anything"}),
                );
            }
            let content = json!({ "opinions": opinions }).to_string();
            let content = if n % 2 == 0 {
                format!("```json\n{content}\n```")
            } else {
                content
            };
            answers.insert(row.text.clone(), content);
        }
    }
    let answers = std::sync::Arc::new(answers);
    let fake = FakeOpenAi::start().await;
    let replayed = answers.clone();
    fake.respond_with(move |_, body| {
        let message = persona_message(body);
        Reply::chat(replayed.get(&message).map_or("{\"opinions\": []}", |a| a))
    });
    let config = test_config("llm-replay");
    let output = common::cli::run_with_env(
        &config,
        &["evaluate-extraction", "--held-out", "--json"],
        &[
            ("PERSONA_PREFS__EXTRACT__KIND", "llm"),
            ("PERSONA_PREFS__EXTRACT__LLM__BASE_URL", &fake.base_url),
        ],
    )
    .await;
    let stdout = common::cli::stdout(&output);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        common::cli::stderr(&output)
    );
    let scores: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for (name, _) in &every_set {
        let score = &scores[*name];
        assert_eq!(
            (score["precision"].as_f64(), score["recall"].as_f64()),
            (Some(1.0), Some(1.0)),
            "{name}: {}",
            serde_json::to_string_pretty(&score["misses"]).unwrap()
        );
    }
    let asked = fake
        .received()
        .iter()
        .filter(|r| answers.contains_key(&persona_message(&r.body)))
        .count();
    assert!(
        asked >= 400,
        "every utterance went through the prompt: {asked}"
    );
}

/// A server that computes one request at a time, a second each (a llama.cpp server with one
/// slot), takes 50 events with no timeout and no dead letter: it is given as many requests as
/// it reports slots, and the time a request waits for its turn is not part of its timeout.
/// With the old fixed cap (32 at once) the 21st request in the server's queue timed out, and
/// its retries refilled the queue.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_slot_server_a_second_a_request_settles_50_events_with_no_timeout() {
    let fake = FakeOpenAi::start().await;
    fake.with_slots(1, Duration::from_secs(1));
    fake.respond_with(|_, _| {
        Reply::opinions(json!([{"evidence": "I love owls", "name": "owls", "stance": "for",
            "strength": 0.7, "category": "nature", "opinion": "I love owls.", "related_user_ids": []}]))
    });
    let mut config = test_config("oneslot");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm.base_url = fake.base_url.clone();
    config.extract.llm.timeout_ms = Config::defaults().extract.llm.timeout_ms;
    config.ingest.max_deliver = 2;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    let events = 50;
    for n in 0..events {
        running
            .publish_event(&json!({"event_id": format!("owl-{n}"), "persona_id": "ada", "platform": "p",
                "channel_id": "c", "messages": [{"message_id": format!("owl-{n}-m"), "role": "persona",
                "content": "I love owls.", "timestamp": format!("2026-11-20T08:{:02}:00Z", n)}]}))
            .await;
    }
    persona_prefs::app::wait_until_drained(
        &running.app.js,
        running.consumer.clone(),
        Duration::from_secs(240),
    )
    .await
    .unwrap();
    let asked = fake
        .received()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count();
    assert_eq!(asked, events, "each event asked once: no timeout, no retry");
    assert!(
        fake.max_in_flight() <= 2,
        "one computing, at most one waiting in the server: {}",
        fake.max_in_flight()
    );
    let dlq = running
        .app
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages;
    assert_eq!(dlq, 0, "nothing dead-lettered");
    let owls = common::active_preferences(&running.app.store, "ada").await;
    assert_eq!(owls.len(), 1);
    assert_eq!(owls[0].reinforcement_count, events as u64 - 1);
    running.stop().await;
}

/// Time spent waiting for a turn does not count against a request's timeout: five questions
/// at once to a one-slot server that takes 300 ms each, with an 800 ms timeout, all answered
/// (all five in the server's own queue, the third would wait 600 ms there and time out).
#[tokio::test]
async fn waiting_for_a_turn_is_not_part_of_a_requests_timeout() {
    let fake = FakeOpenAi::start().await;
    fake.with_slots(1, Duration::from_millis(300));
    let mut config = llm_config(&fake);
    config.timeout_ms = 800;
    let extractor = LlmExtractor::new(&config, 8, &Config::defaults().store.categories).unwrap();
    let input = input(&[]);
    let results = futures::future::join_all((0..5).map(|_| extractor.extract(&input))).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        fake.received().len(),
        5,
        "no request timed out and was sent again"
    );
    assert!(
        fake.max_in_flight() <= 2,
        "one computing, at most one waiting: {}",
        fake.max_in_flight()
    );
}

/// A server that refuses a JSON Schema (400) is asked with its JSON mode, and from then on
/// only so; one that refuses that too, then plain text with a temperature, is asked plainly
/// without a temperature.
#[tokio::test]
async fn a_server_refusing_a_request_shape_is_asked_more_plainly_and_that_is_remembered() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, body| {
        if body["response_format"]["type"] == "json_schema" {
            Reply::bad_request()
        } else {
            Reply::opinions(json!([]))
        }
    });
    let extractor = extractor(&fake);
    extractor.extract(&input(&[])).await.unwrap();
    extractor.extract(&input(&[])).await.unwrap();
    let shapes: Vec<String> = fake
        .received()
        .iter()
        .map(|r| {
            r.body["response_format"]["type"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(shapes, ["json_schema", "json_object", "json_object"]);

    let strict = FakeOpenAi::start().await;
    strict.respond_with(|_, body| {
        if body.get("response_format").is_some() || body.get("temperature").is_some() {
            Reply::bad_request()
        } else {
            Reply::opinions(json!([]))
        }
    });
    let extractor = self::extractor(&strict);
    extractor.extract(&input(&[])).await.unwrap();
    extractor.extract(&input(&[])).await.unwrap();
    let received = strict.received();
    assert_eq!(
        received.len(),
        5,
        "schema, JSON mode, plain, plain without temperature; then that"
    );
    assert!(received[4].body.get("temperature").is_none());
    assert!(received[4].body.get("response_format").is_none());
    assert!(
        received[4].body["max_tokens"].is_u64(),
        "a budget is always sent"
    );

    let refusing = FakeOpenAi::start().await;
    refusing.respond_with(|_, _| Reply::bad_request());
    let error = self::extractor(&refusing)
        .extract(&input(&[]))
        .await
        .unwrap_err();
    assert!(matches!(error, ExtractError::Rejected(_)), "{error}");
}

/// A reply cut off at its token budget is asked again once with twice the budget; cut off
/// again, it is unusable, with what the model began to say.
#[tokio::test]
async fn a_reply_cut_off_is_asked_again_with_a_larger_budget_then_reported() {
    let fake = FakeOpenAi::start().await;
    fake.script([
        Reply::cut_off("{\"opinions\": [{\"evid"),
        Reply::opinions(json!([])),
    ]);
    let extractor = extractor(&fake);
    extractor.extract(&input(&[])).await.unwrap();
    let budgets: Vec<u64> = fake
        .received()
        .iter()
        .map(|r| r.body["max_tokens"].as_u64().unwrap())
        .collect();
    let first = Config::defaults().extract.llm.max_tokens as u64;
    assert_eq!(budgets, [first, 2 * first]);

    fake.script([
        Reply::cut_off("{\"opinions\": [{\"evid"),
        Reply::cut_off("{\"opinions\": [{\"evidence\": \"I adore"),
    ]);
    let error = extractor.extract(&input(&[])).await.unwrap_err();
    assert!(
        matches!(error, ExtractError::Unusable(_)) && !error.is_retryable(),
        "{error}"
    );
    assert!(error.to_string().contains("cut off"), "{error}");
    assert!(error.to_string().contains("I adore"), "{error}");
}

/// JSON wrapped in a think block, prose and a code fence is recovered.
#[tokio::test]
async fn json_in_a_think_block_prose_and_a_fence_is_recovered() {
    let fake = FakeOpenAi::start().await;
    let answer =
        json!({"opinions": [opinion("thunderstorms", "for", "I adore thunderstorms", &[])]});
    fake.script([Reply::chat(&format!(
        "<think>The persona says {{storms}}.</think>\nHere you go:\n```json\n{answer}\n```\nAnything else?"
    ))]);
    let found = extractor(&fake).extract(&input(&[])).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "thunderstorms");
}

/// Through the worker: a model that answers something unusable gets the event dead-lettered at
/// once (asking again later gets the same answer), with what it said, cut short and redacted,
/// in the reason.
#[tokio::test]
async fn an_unusable_reply_dead_letters_the_event_with_what_the_model_said() {
    let fake = FakeOpenAi::start().await;
    let secret = format!("sk-{}", "x1".repeat(20));
    let said = format!(
        "I am sorry, I cannot do that. My key is {secret}. {}",
        "blah ".repeat(200)
    );
    fake.respond_with(move |_, _| Reply::chat(&said));
    let mut config = test_config("unusable");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm = llm_config(&fake);
    config.ingest.max_deliver = 3;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    running
        .publish_event(
            &json!({"event_id": "e", "persona_id": "ada", "platform": "p", "channel_id": "c",
            "messages": [{"message_id": "e-m", "role": "persona", "content": "I adore storms.",
            "timestamp": "2026-11-20T08:00:00Z"}]}),
        )
        .await;
    running.drain().await;
    let dlq = running
        .app
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await
        .unwrap();
    let letter = dlq.get_raw_message(1).await.expect("dead letter");
    assert_eq!(
        letter.headers.get(HEADER_REASON_CODE).unwrap().as_str(),
        "permanent",
        "not retried until max_deliver"
    );
    let reason = letter
        .headers
        .get(persona_prefs::ingest::worker::HEADER_REASON)
        .unwrap()
        .as_str()
        .to_string();
    assert!(reason.contains("I am sorry, I cannot do that"), "{reason}");
    assert!(!reason.contains(&secret), "{reason}");
    assert!(reason.contains("[redacted]"), "{reason}");
    assert!(reason.len() < 1024, "cut short: {}", reason.len());
    assert_eq!(
        fake.received().len(),
        2,
        "asked once more in the call, never again"
    );
    running.stop().await;
}

/// Behind a slow stage, events wait for a free slot in JetStream, not in the worker: the
/// worker asks for no more messages than it has free slots, so none sits unacknowledged in a
/// client buffer while its ack wait runs out. (It did: behind a one-slot llama.cpp server, 150
/// events became 900 deliveries and 27 dead letters "delivered 6 times without success".)
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_stage_never_turns_waiting_events_into_redeliveries() {
    let fake = FakeOpenAi::start().await;
    fake.with_slots(1, Duration::from_millis(700));
    fake.respond_with(|_, _| {
        Reply::opinions(json!([{"evidence": "I love owls", "name": "owls", "stance": "for",
            "strength": 0.7, "category": "nature", "opinion": "I love owls.", "related_user_ids": []}]))
    });
    let mut config = test_config("slowstage");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm.base_url = fake.base_url.clone();
    config.extract.llm.timeout_ms = 30_000;
    config.ingest.max_in_flight = 2;
    config.ingest.ack_wait_ms = 1500;
    config.ingest.max_deliver = 3;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    let events = 10;
    for n in 0..events {
        running
            .publish_event(&json!({"event_id": format!("slow-{n}"), "persona_id": format!("p{n}"),
                "platform": "p", "channel_id": "c", "messages": [{"message_id": format!("slow-{n}-m"),
                "role": "persona", "content": "I love owls.", "timestamp": "2026-11-20T08:00:00Z"}]}))
            .await;
    }
    persona_prefs::app::wait_until_drained(
        &running.app.js,
        running.consumer.clone(),
        Duration::from_secs(120),
    )
    .await
    .unwrap();
    let info = running.consumer.clone().info().await.unwrap().clone();
    assert_eq!(info.num_redelivered, 0, "no event was delivered twice");
    assert_eq!(
        info.delivered.consumer_sequence, events as u64,
        "one delivery per event"
    );
    let dead = running
        .app
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages;
    assert_eq!(dead, 0);
    running.stop().await;
}
