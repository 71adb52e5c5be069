//! The operator's side of dead letters, through the real binary: list them with their reasons,
//! read one, replay the ones whose cause is fixed, discard the rest.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::cli::{run, stderr, stdout};
use common::fake_openai::{FakeOpenAi, Reply, persona_message};
use common::{Cleanup, Running, test_config};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use persona_prefs::extract::ExtractorKind;
use serde_json::{Value, json};

async fn list(config: &Config, extra: &[&str]) -> Value {
    let mut args = vec!["dlq", "list", "--json"];
    args.extend_from_slice(extra);
    let output = run(config, &args).await;
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_str(&stdout(&output)).unwrap()
}

fn codes(listing: &Value) -> Vec<&str> {
    listing["letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["reason_code"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_are_listed_shown_replayed_once_fixed_and_discarded() {
    // An LLM that is down until the test says otherwise.
    let fake = FakeOpenAi::start().await;
    let llm_up = Arc::new(AtomicBool::new(false));
    let up = llm_up.clone();
    fake.respond_with(move |_, body| {
        if up.load(Ordering::SeqCst) && persona_message(body).contains("storms") {
            Reply::opinions(json!([{"name": "storms", "opinion": "I adore storms.", "category": "nature",
                "stance": "for", "strength": 0.7, "related_user_ids": [], "evidence": "I adore storms"}]))
        } else {
            Reply::status(500)
        }
    });
    let mut config = test_config("dlq");
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm.base_url = fake.base_url.clone();
    config.extract.llm.timeout_ms = 400;
    config.extract.llm.max_retries = 0;
    config.ingest.max_deliver = 2;
    config.ingest.retry_delay_ms = 50;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    let app = &running.app;

    // One event the LLM outage defeats, one that can never be read.
    let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada");
    let event = json!({"event_id": "storms-1", "persona_id": "ada", "platform": "p", "channel_id": "c",
        "messages": [{"message_id": "m1", "role": "persona", "content": "I adore storms.",
                      "timestamp": "2026-11-20T08:00:00Z"}]});
    for payload in [serde_json::to_vec(&event).unwrap(), b"{not json".to_vec()] {
        app.js
            .publish(subject.clone(), payload.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    running.drain().await;

    let listing = list(&config, &[]).await;
    assert_eq!(listing["stored"], 2);
    let mut all_codes = codes(&listing);
    all_codes.sort();
    assert_eq!(all_codes, ["invalid_json", "max_deliver"]);
    let human = run(&config, &["dlq", "list"]).await;
    assert!(stdout(&human).contains("max_deliver"), "{}", stdout(&human));
    assert!(stdout(&human).contains("2 shown, 2 stored"));

    let outage = list(&config, &["--code", "max_deliver", "--persona", "ada"]).await;
    assert_eq!(codes(&outage), ["max_deliver"]);
    let letter = &outage["letters"][0];
    assert_eq!(letter["event_id"], "storms-1");
    assert_eq!(letter["original_subject"], subject);
    assert_eq!(letter["deliveries"], 2);
    let outage_seq = letter["sequence"].as_u64().unwrap();
    assert_eq!(
        codes(&list(&config, &["--persona", "somebody_else"]).await),
        Vec::<&str>::new()
    );

    let shown = run(&config, &["dlq", "show", &outage_seq.to_string()]).await;
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(stdout(&shown).contains("code              max_deliver"));
    assert!(stdout(&shown).contains("I adore storms."), "the payload");

    // Usage and lookup errors are told apart by exit code.
    for limit in ["0", "10001"] {
        let refused = run(&config, &["dlq", "list", "--limit", limit]).await;
        assert_eq!(refused.status.code(), Some(1), "limit {limit}");
        assert!(stderr(&refused).contains("limit must be within 1..=10000"));
    }
    let refused = run(&config, &["dlq", "list", "--persona", "not a persona"]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        run(&config, &["dlq", "replay"]).await.status.code(),
        Some(2)
    );
    let missing = run(&config, &["dlq", "show", "999999"]).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("999999 not found"));

    // Once the LLM is back, replaying the outage's letter stores its opinion.
    llm_up.store(true, Ordering::SeqCst);
    let replayed = run(
        &config,
        &["dlq", "replay", "--all", "--code", "max_deliver"],
    )
    .await;
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    assert!(stdout(&replayed).contains("replayed 1 of 1"));
    running.drain().await;
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].name, "storms");
    assert_eq!(stored[0].provenance.persona_message_id, "m1");

    // The replayed letter is gone; replaying it again finds nothing.
    let remaining = list(&config, &[]).await;
    assert_eq!(codes(&remaining), ["invalid_json"]);
    let again = run(&config, &["dlq", "replay", &outage_seq.to_string()]).await;
    assert_eq!(again.status.code(), Some(1));

    let unreadable = remaining["letters"][0]["sequence"].as_u64().unwrap();
    let discarded = run(&config, &["dlq", "discard", &unreadable.to_string()]).await;
    assert!(stdout(&discarded).contains("discarded 1 of 1"));
    assert_eq!(list(&config, &[]).await["stored"], 0);

    running.stop().await;
}

/// A letter whose headers name a subject outside the events stream is refused rather than
/// published there.
#[tokio::test(flavor = "multi_thread")]
async fn replay_only_ever_publishes_into_the_events_stream() {
    let config = test_config("dlqforged");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        persona_prefs::ingest::worker::HEADER_ORIGINAL_SUBJECT,
        "somewhere.else",
    );
    headers.insert(
        persona_prefs::ingest::worker::HEADER_REASON_CODE,
        "permanent",
    );
    let ack = app
        .js
        .publish_with_headers(
            persona_prefs::subjects::dead_letter_subject(&config.ingest.dlq_subject_prefix, "ada"),
            headers,
            b"{}".to_vec().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let refused = run(&config, &["dlq", "replay", &ack.sequence.to_string()]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("is not under"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(list(&config, &[]).await["stored"], 1, "the letter is kept");
}

/// An event that only just fits the server's max payload has no room left for the reason
/// headers: its letter keeps the head of the payload and its original size, instead of the
/// event being nak'ed for ever.
#[tokio::test(flavor = "multi_thread")]
async fn an_event_too_big_to_dead_letter_whole_is_dead_lettered_truncated() {
    let config = test_config("dlqbig");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker(config.clone()).await;
    let max = running.app.nats.server_info().max_payload;
    let payload = vec![b'x'; max - 200];
    running
        .app
        .js
        .publish(
            persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada"),
            payload.into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    running.drain().await;
    let listing = list(&config, &[]).await;
    assert_eq!(codes(&listing), ["invalid_json"]);
    let stream = running
        .app
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await
        .unwrap();
    let letter = stream
        .get_raw_message(listing["letters"][0]["sequence"].as_u64().unwrap())
        .await
        .unwrap();
    assert_eq!(
        letter
            .headers
            .get(persona_prefs::ingest::worker::HEADER_TRUNCATED_FROM)
            .unwrap()
            .as_str(),
        (max - 200).to_string()
    );
    assert!(letter.payload.len() < max - 200);
    let sequence = listing["letters"][0]["sequence"]
        .as_u64()
        .unwrap()
        .to_string();
    let refused = run(&config, &["dlq", "replay", &sequence]).await;
    assert_eq!(
        refused.status.code(),
        Some(1),
        "a cut payload is not replayed"
    );
    assert!(stderr(&refused).contains("holds only the first"));
    running.stop().await;
}

/// Listing streams the letters (many server batches' worth here) oldest first, filters by
/// persona on the server and by reason code here, stops at the limit and says so, and agrees
/// with `show` letter for letter.
#[tokio::test(flavor = "multi_thread")]
async fn a_listing_filters_and_limits_thousands_of_letters_in_order() {
    use persona_prefs::ingest::dead_letters::{DeadLetters, Selection};
    use persona_prefs::ingest::worker::{HEADER_REASON_CODE, ensure_jetstream};
    let config = test_config("dlqmany");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    ensure_jetstream(&app.js, &config.ingest).await.unwrap();
    let letters = DeadLetters::new(app.js.clone(), config.ingest.clone());
    let everything = Selection {
        limit: 10_000,
        ..Default::default()
    };
    assert!(letters.list(&everything).await.unwrap().letters.is_empty());

    let total = 1500;
    let mut acks = Vec::new();
    for n in 0..total {
        let mut headers = async_nats::HeaderMap::new();
        // Every 100th letter (n = 7, 107, …) is an outage; the rest are schema errors.
        let code = if n % 100 == 7 {
            "max_deliver"
        } else {
            "schema"
        };
        headers.insert(HEADER_REASON_CODE, code);
        let subject = persona_prefs::subjects::dead_letter_subject(
            &config.ingest.dlq_subject_prefix,
            &format!("p{}", n % 3),
        );
        let payload = json!({"event_id": format!("e{n}")}).to_string();
        acks.push(
            app.js
                .publish_with_headers(subject, headers, payload.into())
                .await
                .unwrap(),
        );
    }
    for ack in acks {
        ack.await.unwrap();
    }
    let event_ids = |listing: &persona_prefs::ingest::dead_letters::Listing| {
        listing
            .letters
            .iter()
            .map(|l| l.event_id.clone().unwrap())
            .collect::<Vec<_>>()
    };

    // The event ids among the first `count` published for which `keep` holds.
    let published = |count: usize, keep: fn(usize) -> bool| -> Vec<String> {
        (0..count)
            .filter(|n| keep(*n))
            .map(|n| format!("e{n}"))
            .collect()
    };
    let select = |persona: Option<&str>, code: Option<&str>, limit: usize| Selection {
        persona_id: persona.map(str::to_string),
        reason_code: code.map(str::to_string),
        limit,
        max_bytes: 0,
    };

    let all = letters.list(&everything).await.unwrap();
    assert_eq!(
        (all.letters.len(), all.stored, all.truncated),
        (total, 1500, false)
    );
    assert_eq!(
        event_ids(&all),
        published(total, |_| true),
        "oldest first, none missing"
    );

    let outages = letters
        .list(&select(None, Some("max_deliver"), 10_000))
        .await
        .unwrap();
    assert_eq!(event_ids(&outages), published(total, |n| n % 100 == 7));

    // n % 3 == 1 and n % 100 == 7: 7, 307, 607, …
    let persona_outages = letters
        .list(&select(Some("p1"), Some("max_deliver"), 10_000))
        .await
        .unwrap();
    assert_eq!(
        event_ids(&persona_outages),
        published(total, |n| n % 100 == 7 && n % 3 == 1)
    );

    let first = letters.list(&select(Some("p2"), None, 40)).await.unwrap();
    assert!(first.truncated, "more p2 letters remain");
    assert_eq!(event_ids(&first), published(120, |n| n % 3 == 2));
    let exact = letters
        .list(&select(None, Some("max_deliver"), 15))
        .await
        .unwrap();
    assert!(!exact.truncated, "exactly the limit, nothing left over");

    // Letters can be large: a listing also stops at a payload byte cap, and says so.
    let payload_bytes = all.letters[0].payload.len();
    let capped = letters
        .list(&Selection {
            max_bytes: payload_bytes * 10,
            ..select(None, None, 10_000)
        })
        .await
        .unwrap();
    assert!(capped.truncated);
    assert_eq!(event_ids(&capped), published(10, |_| true));

    for letter in [&all.letters[0], &outages.letters[3], &first.letters[39]] {
        let shown = letters.get(letter.sequence).await.unwrap();
        assert_eq!(
            (
                &shown.event_id,
                &shown.reason_code,
                &shown.subject,
                &shown.dead_lettered_at
            ),
            (
                &letter.event_id,
                &letter.reason_code,
                &letter.subject,
                &letter.dead_lettered_at
            )
        );
    }
}
