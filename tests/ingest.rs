//! The ingest pipeline end to end: JetStream → extract → embed → decide → Redis, with the rules
//! extractor and the local embedding model, under redelivery, bad input, concurrency and crashes.

mod common;

use persona_prefs::timestamp::Timestamp;

use std::time::Duration;

use async_nats::jetstream;
use common::{Cleanup, Running, test_config};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use persona_prefs::ingest::event::ConversationEvent;
use persona_prefs::ingest::pipeline::Action;
use persona_prefs::ingest::worker::{HEADER_REASON, HEADER_REASON_CODE, WorkerReport};
use persona_prefs::store::{Preference, Stance, WriteGuard};
use serde_json::{Value, json};

/// An in-process worker on its own streams, consumer, key prefix and index.
/// A running worker (`common::Running`) with the ingest tests' helpers.
pub struct Harness {
    running: Running,
    _cleanup: Cleanup,
}

impl std::ops::Deref for Harness {
    type Target = Running;
    fn deref(&self) -> &Running {
        &self.running
    }
}

impl Harness {
    pub async fn start(config: Config) -> Harness {
        let cleanup = Cleanup(config.clone());
        Harness {
            running: Running::worker(config).await,
            _cleanup: cleanup,
        }
    }

    pub async fn publish(&self, event: &Value) {
        let id = format!(
            "{}-{}",
            event["event_id"].as_str().unwrap(),
            uuid::Uuid::new_v4()
        );
        self.publish_raw(
            &subject(&self.app.config, event["persona_id"].as_str().unwrap()),
            serde_json::to_vec(event).unwrap(),
            &id,
        )
        .await;
    }

    pub async fn publish_raw(&self, subject: &str, payload: Vec<u8>, message_id: &str) -> bool {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", message_id);
        let ack = self
            .app
            .js
            .publish_with_headers(subject.to_string(), headers, payload.into())
            .await
            .unwrap()
            .await
            .unwrap();
        ack.duplicate
    }

    pub async fn preferences(&self, persona: &str) -> Vec<Preference> {
        common::all_preferences(&self.app.store, persona).await
    }

    pub async fn dead_letters(&self) -> Vec<(async_nats::HeaderMap, Vec<u8>, String)> {
        dead_letters(&self.app.js, &self.app.config).await
    }

    pub async fn stop(self) -> WorkerReport {
        self.running.stop().await
    }
}

pub fn subject(config: &Config, persona: &str) -> String {
    persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, persona)
}

pub async fn dead_letters(
    js: &jetstream::Context,
    config: &Config,
) -> Vec<(async_nats::HeaderMap, Vec<u8>, String)> {
    let stream = js.get_stream(&config.ingest.dlq_stream).await.unwrap();
    let last = stream.get_info().await.unwrap().state.last_sequence;
    let mut letters = Vec::new();
    for sequence in 1..=last {
        if let Ok(message) = stream.get_raw_message(sequence).await {
            letters.push((
                message.headers,
                message.payload.to_vec(),
                message.subject.to_string(),
            ));
        }
    }
    letters
}

/// An event of user/persona turns; message ids are `<event_id>-<n>`, a minute apart from `minute`.
pub fn event(persona: &str, event_id: &str, minute: u32, turns: &[(&str, &str)]) -> Value {
    let messages: Vec<Value> = turns
        .iter()
        .enumerate()
        .map(|(n, (who, text))| {
            let mut message = json!({
                "message_id": format!("{event_id}-{n}"),
                "role": if *who == "persona" { "persona" } else { "user" },
                "content": text,
                "timestamp": format!("2026-11-20T{:02}:{:02}:{:02}Z", 8 + (minute / 60) % 12, minute % 60, n % 60),
            });
            if *who != "persona" {
                message["user_id"] = json!(who);
            }
            message
        })
        .collect();
    json!({"event_id": event_id, "persona_id": persona, "platform": "discord", "channel_id": "c1", "messages": messages})
}

fn find<'a>(preferences: &'a [Preference], name: &str) -> &'a Preference {
    preferences
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no preference {name:?} in {:?}", names(preferences)))
}

fn names(preferences: &[Preference]) -> Vec<&str> {
    preferences.iter().map(|p| p.name.as_str()).collect()
}

#[tokio::test]
async fn a_conversation_becomes_preferences_with_provenance_reinforcement_and_evolution() {
    let h = Harness::start(test_config("flow")).await;
    h.publish(&event(
        "ada",
        "e1",
        0,
        &[
            ("u1", "What do you drink?"),
            ("persona", "I love green tea. Coffee is too bitter for me."),
        ],
    ))
    .await;
    h.drain().await;
    h.publish(&event(
        "ada",
        "e2",
        10,
        &[
            ("u2", "Tea again?"),
            (
                "persona",
                "I really love green tea, it's my morning ritual.",
            ),
        ],
    ))
    .await;
    h.drain().await;
    h.publish(&event(
        "ada",
        "e3",
        20,
        &[
            ("u3", "Try this coffee."),
            ("persona", "Okay, honestly, coffee is wonderful."),
        ],
    ))
    .await;
    h.drain().await;

    let preferences = h.preferences("ada").await;
    assert_eq!(preferences.len(), 2, "{:?}", names(&preferences));
    let tea = find(&preferences, "green tea");
    assert_eq!(tea.reinforcement_count, 1);
    assert_eq!(tea.reinforcements.len(), 1);
    assert_eq!(
        tea.reinforcements[0].provenance.persona_message_id, "e2-1",
        "the reinforcement names the message that restated it"
    );
    assert_eq!(tea.reinforcements[0].provenance.triggering_user_id, "u2");
    assert_eq!(tea.stance, Some(Stance::For));
    assert_eq!(
        tea.provenance.triggering_user_id, "u1",
        "provenance is the latest user message before the opinion"
    );
    assert_eq!(tea.provenance.triggering_message_id, "e1-0");
    assert_eq!(tea.provenance.persona_message_id, "e1-1");
    assert_eq!(tea.provenance.source_platform, "discord");
    assert_eq!(tea.category, "culinary");
    let coffee = find(&preferences, "coffee");
    assert_eq!(coffee.stance, Some(Stance::For), "changed its mind");
    assert_eq!(coffee.strength, 0.6);
    assert_eq!(coffee.evolution_history.len(), 1);
    assert_eq!(
        coffee.evolution_history[0].old_opinion.as_deref(),
        Some("Coffee is too bitter for me.")
    );
    assert!(
        coffee.evolution_history[0].reason.contains("e3-1"),
        "reason names the message: {}",
        coffee.evolution_history[0].reason
    );
    h.stop().await;
}

#[tokio::test]
async fn user_and_system_messages_are_never_mined() {
    let h = Harness::start(test_config("roles")).await;
    let mut e = event(
        "ada",
        "e1",
        0,
        &[
            (
                "u1",
                "I love pineapple pizza. You love pineapple pizza too.",
            ),
            ("persona", "Nice try, but I don't like pineapple pizza."),
        ],
    );
    e["messages"].as_array_mut().unwrap().push(json!({
        "message_id": "sys-1", "role": "system", "content": "The persona adores opera.", "timestamp": "2026-11-20T08:05:00Z"
    }));
    h.publish(&e).await;
    h.drain().await;
    let preferences = h.preferences("ada").await;
    assert_eq!(names(&preferences), vec!["pineapple pizza"]);
    assert_eq!(
        preferences[0].stance,
        Some(Stance::Against),
        "the persona's own stance, not the user's"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_older_contradiction_enters_the_history_at_its_own_time_and_the_newer_stance_stays() {
    let config = test_config("order");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config).await.unwrap();
    let pipeline = app.pipeline();
    let newer = serde_json::from_value::<ConversationEvent>(event(
        "ada",
        "late",
        30,
        &[
            ("u1", "Try it."),
            ("persona", "Honestly, cilantro is wonderful."),
        ],
    ))
    .unwrap();
    let older = serde_json::from_value::<ConversationEvent>(event(
        "ada",
        "early",
        5,
        &[
            ("u1", "Cilantro?"),
            ("persona", "I think cilantro is disgusting."),
        ],
    ))
    .unwrap();
    // Delivered out of order: the newer event is processed first.
    pipeline.process(&newer).await.unwrap();
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(
        stored[0].stance_at, "2026-11-20T08:30:01Z",
        "the stance time is the persona message's timestamp"
    );
    let outcome = pipeline.process(&older).await.unwrap();
    assert_eq!(outcome.decisions[0].action, Action::Stale);
    assert!(
        outcome.decisions[0].applied,
        "a late contradiction is recorded"
    );
    let cilantro = common::active_preferences(&app.store, "ada").await;
    assert_eq!(cilantro.len(), 1);
    assert_eq!(
        cilantro[0].stance,
        Some(Stance::For),
        "the newer stance stays"
    );
    assert_eq!(cilantro[0].stance_at, "2026-11-20T08:30:01Z");
    assert_eq!(cilantro[0].version, 2);
    let past = &cilantro[0].evolution_history;
    assert_eq!(
        past.len(),
        1,
        "the older stance is in the history: {past:?}"
    );
    assert_eq!(past[0].version, Some(1));
    assert_eq!(past[0].old_stance.as_deref(), Some("against"));
    assert_eq!(
        past[0].timestamp, "2026-11-20T08:30:01Z",
        "it was in force until the newer stance was voiced"
    );
    assert_eq!(
        past[0].reason,
        "changed mind in persona message late-1 (replying to late-0 from user u1)"
    );
}

/// A persona restating what its prompt reminded it of is an echo, not new evidence: with the
/// preference's id in the message's `injected_preference_ids`, nothing is reinforced. Without
/// the field the same words reinforce, and a change of mind about an injected preference still
/// counts.
#[tokio::test]
async fn restating_an_injected_preference_is_an_echo_not_a_reinforcement() {
    let config = test_config("echo");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config).await.unwrap();
    let pipeline = app.pipeline();
    let parse = |value: Value| serde_json::from_value::<ConversationEvent>(value).unwrap();
    let first = event(
        "ada",
        "e1",
        0,
        &[
            ("u1", "What do you drink?"),
            ("persona", "I love green tea. Coffee is too bitter for me."),
        ],
    );
    pipeline.process(&parse(first)).await.unwrap();
    let before = common::active_preferences(&app.store, "ada").await;
    let tea = find(&before, "green tea").clone();
    let coffee = find(&before, "coffee").clone();

    let mut echo = event(
        "ada",
        "e2",
        10,
        &[("u2", "Tea?"), ("persona", "I love green tea.")],
    );
    echo["messages"][1]["injected_preference_ids"] = json!([tea.id, coffee.id]);
    let outcome = pipeline.process(&parse(echo)).await.unwrap();
    assert_eq!(outcome.decisions[0].action, Action::Echo);
    assert_eq!(outcome.decisions[0].preference_id, tea.id);
    let echoed = app
        .store
        .get_preference("ada", &tea.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(echoed.reinforcement_count, 0);
    assert_eq!(echoed.strength, tea.strength);

    let unprompted = event(
        "ada",
        "e3",
        20,
        &[("u3", "And tea?"), ("persona", "I love green tea.")],
    );
    let outcome = pipeline.process(&parse(unprompted)).await.unwrap();
    assert_eq!(outcome.decisions[0].action, Action::Reinforce);
    let reinforced = app
        .store
        .get_preference("ada", &tea.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reinforced.reinforcement_count, 1);

    let mut change_of_mind = event(
        "ada",
        "e4",
        30,
        &[
            ("u4", "Coffee?"),
            ("persona", "Okay, honestly, coffee is wonderful."),
        ],
    );
    change_of_mind["messages"][1]["injected_preference_ids"] = json!([coffee.id]);
    let outcome = pipeline.process(&parse(change_of_mind)).await.unwrap();
    assert_eq!(outcome.decisions[0].action, Action::Evolve);
    let evolved = app
        .store
        .get_preference("ada", &coffee.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(evolved.stance, Some(Stance::For));
}

/// An event with many opinions can take longer to decide than the persona lock lives; the
/// pipeline renews the lock as it goes rather than being fenced halfway.
#[tokio::test]
async fn a_large_event_outlasting_the_lock_renews_it() {
    let mut config = test_config("longevent");
    config.store.lock_ttl_ms = 100;
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config).await.unwrap();
    // 50 persona messages of 8 opinions: 400 decisions, about a second, ten lock lifetimes.
    let colours = [
        "red", "blue", "green", "yellow", "purple", "orange", "white", "black",
    ];
    let turns: Vec<(&str, String)> = (0..50)
        .map(|n| {
            let sentences: Vec<String> = colours
                .iter()
                .map(|colour| format!("I love {colour} kite{n}."))
                .collect();
            ("persona", sentences.join(" "))
        })
        .collect();
    let turns: Vec<(&str, &str)> = turns.iter().map(|(w, t)| (*w, t.as_str())).collect();
    let event: ConversationEvent = serde_json::from_value(event("ada", "big", 0, &turns)).unwrap();
    let outcome = app
        .pipeline()
        .process(&event)
        .await
        .expect("not fenced halfway");
    assert_eq!(outcome.decisions.len(), 400);
}

/// Events and dead letters hold users' words: JetStream keeps them only as long as configured,
/// and a changed setting reaches streams that already exist.
#[tokio::test]
async fn the_streams_keep_events_and_letters_only_as_long_as_configured() {
    let mut config = test_config("retention");
    config.ingest.events_max_age_hours = 1;
    config.ingest.dlq_max_age_hours = 2;
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let max_age = |stream: String| {
        let js = app.js.clone();
        async move {
            let mut stream = js.get_stream(stream).await.unwrap();
            stream.info().await.unwrap().config.max_age
        }
    };
    assert_eq!(
        max_age(config.ingest.stream.clone()).await,
        Duration::from_secs(3600)
    );
    assert_eq!(
        max_age(config.ingest.dlq_stream.clone()).await,
        Duration::from_secs(7200)
    );

    let mut changed = config.clone();
    changed.ingest.events_max_age_hours = 24;
    changed.ingest.dlq_max_age_hours = 0;
    let app = App::start(changed.clone()).await.unwrap();
    app.consumer().await.unwrap();
    assert_eq!(
        max_age(config.ingest.stream.clone()).await,
        Duration::from_secs(24 * 3600)
    );
    assert_eq!(
        max_age(config.ingest.dlq_stream.clone()).await,
        Duration::ZERO,
        "0 keeps letters for ever"
    );
}

#[tokio::test]
async fn a_redelivered_or_republished_event_changes_nothing() {
    let h = Harness::start(test_config("redeliver")).await;
    let first = event(
        "ada",
        "e1",
        0,
        &[("u1", "Tea?"), ("persona", "I love green tea.")],
    );
    let second = event(
        "ada",
        "e2",
        5,
        &[
            ("u1", "More?"),
            ("persona", "I adore green tea. I think jazz is wonderful."),
        ],
    );
    h.publish(&first).await;
    h.publish(&second).await;
    h.drain().await;
    let before = h.preferences("ada").await;
    assert_eq!(find(&before, "green tea").reinforcement_count, 1);

    // A producer re-publishes both events under new message ids (past the duplicate window).
    h.publish(&first).await;
    h.publish(&second).await;
    h.drain().await;
    assert_eq!(
        h.preferences("ada").await,
        before,
        "re-publishing changed nothing"
    );

    // A redelivery straight into the pipeline: every effect reports it was applied before.
    let again = h
        .app
        .pipeline()
        .process(&serde_json::from_value(second).unwrap())
        .await
        .unwrap();
    assert!(
        again.decisions.iter().all(|d| !d.applied),
        "{:?}",
        again.decisions
    );
    assert_eq!(h.preferences("ada").await, before);
    h.stop().await;
}

#[tokio::test]
async fn jetstream_drops_a_message_id_published_twice() {
    let h = Harness::start(test_config("dedupe")).await;
    let payload =
        serde_json::to_vec(&event("ada", "e1", 0, &[("persona", "I love owls.")])).unwrap();
    let subject = subject(&h.app.config, "ada");
    assert!(!h.publish_raw(&subject, payload.clone(), "same-id").await);
    assert!(
        h.publish_raw(&subject, payload, "same-id").await,
        "second publish is reported as a duplicate"
    );
    h.drain().await;
    assert_eq!(
        find(&h.preferences("ada").await, "owls").reinforcement_count,
        0
    );
    h.stop().await;
}

#[tokio::test]
async fn each_kind_of_bad_input_is_dead_lettered_with_its_reason() {
    let mut config = test_config("dlq");
    config.nats.max_payload_bytes = 2048;
    let h = Harness::start(config).await;
    let subject_ada = subject(&h.app.config, "ada");
    let valid = event("ada", "ok", 0, &[("persona", "I love owls.")]);
    let mut wrong_role = valid.clone();
    wrong_role["messages"][0]["role"] = json!("narrator");
    let mut too_long = valid.clone();
    too_long["messages"][0]["content"] = json!("x".repeat(1900));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "invalid_json",
            b"{this is not json".to_vec(),
            "invalid_json",
        ),
        ("schema", serde_json::to_vec(&wrong_role).unwrap(), "schema"),
        (
            "oversize",
            serde_json::to_vec(&too_long).unwrap(),
            "oversize",
        ),
        ("invalid_utf8", vec![0xff, 0xfe, 0x7b, 0x7d], "invalid_utf8"),
        ("empty", Vec::new(), "invalid_json"),
    ];
    for (id, payload, _) in &cases {
        h.publish_raw(&subject_ada, payload.clone(), id).await;
    }
    // The wrong persona in the subject.
    h.publish_raw(
        &subject(&h.app.config, "bob"),
        serde_json::to_vec(&valid).unwrap(),
        "mismatch",
    )
    .await;
    h.publish(&valid).await;
    h.drain().await;

    let letters = h.dead_letters().await;
    assert_eq!(
        letters.len(),
        cases.len() + 1,
        "every bad event, and only those, dead-lettered"
    );
    for (_, payload, code) in &cases {
        let letter = letters
            .iter()
            .find(|(_, p, _)| p == payload)
            .unwrap_or_else(|| panic!("no dead letter for {code}"));
        assert_eq!(
            letter.0.get(HEADER_REASON_CODE).map(|v| v.as_str()),
            Some(*code)
        );
        assert!(
            !letter.0.get(HEADER_REASON).unwrap().as_str().is_empty(),
            "a readable reason"
        );
        assert_eq!(
            letter.2,
            persona_prefs::subjects::dead_letter_subject(
                &h.app.config.ingest.dlq_subject_prefix,
                "ada"
            )
        );
    }
    let mismatch = letters
        .iter()
        .find(|(_, _, s)| s.ends_with(".bob"))
        .expect("mismatch dead-lettered under its subject's persona");
    assert!(
        mismatch
            .0
            .get(HEADER_REASON)
            .unwrap()
            .as_str()
            .contains("persona_id")
    );
    assert_eq!(
        names(&h.preferences("ada").await),
        vec!["owls"],
        "the valid event still went through"
    );
    h.stop().await;
}

#[tokio::test]
async fn secrets_are_redacted_and_mostly_secret_opinions_dropped() {
    let h = Harness::start(test_config("redact")).await;
    h.publish(&event(
        "ada",
        "e1",
        0,
        &[("persona", "I love green tea, write to me at ada@example.com about it. Honestly, sk-abcdefghijklmnopqrstuvwxyz0123 is beautiful.")],
    ))
    .await;
    h.drain().await;
    let preferences = h.preferences("ada").await;
    assert_eq!(
        names(&preferences),
        vec!["green tea"],
        "the key-as-topic opinion is dropped"
    );
    let tea = &preferences[0];
    assert!(
        !tea.opinion.contains("ada@example.com") && tea.opinion.contains("[redacted]"),
        "{}",
        tea.opinion
    );
    h.stop().await;
}

#[tokio::test]
async fn shutdown_finishes_in_flight_events_within_the_grace_period() {
    let h = Harness::start(test_config("grace")).await;
    for n in 0..20 {
        h.publish(&event(
            "ada",
            &format!("e{n}"),
            n,
            &[("persona", "I love green tea.")],
        ))
        .await;
    }
    h.drain().await;
    let report = h.stop().await;
    assert_eq!(report.returned_for_redelivery, 0);
}

/// After `purge_user`, conversations with that user from before the erasure are no longer
/// evidence, however they reach the worker: late from the backlog, redelivered, or replayed
/// from the dead letters. They must not bring the erased id back. A conversation after the
/// erasure is new evidence like any other.
#[tokio::test]
async fn an_erased_users_earlier_conversations_never_bring_them_back() {
    let config = test_config("erasure");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config).await.unwrap();
    let pipeline = app.pipeline();
    let parse = |value: &Value| serde_json::from_value::<ConversationEvent>(value.clone()).unwrap();
    let first = event(
        "ada",
        "e1",
        0,
        &[
            ("u9", "What do you drink?"),
            ("persona", "I love green tea. Coffee is too bitter for me."),
        ],
    );
    pipeline.process(&parse(&first)).await.unwrap();
    let by_another = event(
        "ada",
        "e2",
        5,
        &[
            ("u2", "Tea again?"),
            (
                "persona",
                "I really love green tea, it's my morning ritual.",
            ),
        ],
    );
    pipeline.process(&parse(&by_another)).await.unwrap();
    let change_of_mind = event(
        "ada",
        "e3",
        10,
        &[
            ("u9", "Try this coffee."),
            ("persona", "Okay, honestly, coffee is wonderful."),
        ],
    );
    pipeline.process(&parse(&change_of_mind)).await.unwrap();
    // Published before the erasure, still waiting in the backlog while it runs.
    let backlog = event(
        "ada",
        "e4",
        20,
        &[
            ("u9", "Weather?"),
            ("persona", "I adore storms. I love green tea."),
        ],
    );

    let report = app
        .store
        .purge_user("ada", "u9", "erased-u9", WriteGuard::default())
        .await
        .unwrap();
    let before = common::all_preferences(&app.store, "ada").await;
    let coffee = find(&before, "coffee");
    assert_eq!(
        report.retracted,
        vec![coffee.id.clone()],
        "only u9 spoke of coffee"
    );
    assert!(
        coffee.evolution_history[0]
            .reason
            .contains("from user erased-u9)"),
        "the reason for the change of mind no longer names the user: {}",
        coffee.evolution_history[0].reason
    );
    let mentions_u9 = |preferences: &[Preference]| {
        preferences
            .iter()
            .filter(|p| {
                serde_json::to_string(p).unwrap().contains("\"u9\"")
                    || p.evolution_history
                        .iter()
                        .any(|h| h.reason.contains("user u9)"))
            })
            .map(|p| p.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(mentions_u9(&before), Vec::<String>::new());

    for late in [&backlog, &first, &change_of_mind] {
        let outcome = pipeline.process(&parse(late)).await.unwrap();
        assert!(
            outcome.decisions.iter().all(|d| d.action == Action::Erased),
            "{:?}",
            outcome.decisions
        );
    }
    let after = common::all_preferences(&app.store, "ada").await;
    assert_eq!(mentions_u9(&after), Vec::<String>::new());
    assert!(
        !after.iter().any(|p| p.name == "storms"),
        "nothing learnt from the backlog"
    );
    let tea = find(&after, "green tea");
    assert_eq!(
        tea.reinforcement_count,
        find(&before, "green tea").reinforcement_count
    );
    assert_eq!(tea.provenance.triggering_user_id, "erased-u9");

    // A chat pipeline whose clock runs fast stamps a conversation held before the erasure
    // with later times; JetStream stored it before the erasure, and that decides.
    let soon = (time::OffsetDateTime::now_utc() + time::Duration::minutes(1))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let mut fast_clock = event(
        "ada",
        "e5",
        30,
        &[("u9", "Weather?"), ("persona", "I adore storms.")],
    );
    for message in fast_clock["messages"].as_array_mut().unwrap() {
        message["timestamp"] = json!(soon);
    }
    let mut stored_before = parse(&fast_clock);
    stored_before.received_at = Some(Timestamp::parse(&an_hour_ago()).unwrap());
    let outcome = pipeline.process(&stored_before).await.unwrap();
    assert_eq!(outcome.decisions[0].action, Action::Erased);
    assert!(
        outcome.predates_an_erasure,
        "so the worker erases it once settled"
    );

    // The same user talks to the persona again after the erasure: new evidence.
    let mut later = parse(&fast_clock);
    later.received_at = Some(Timestamp::parse(&soon).unwrap());
    let outcome = pipeline.process(&later).await.unwrap();
    assert!(!outcome.predates_an_erasure);
    assert_eq!(outcome.decisions[0].action, Action::Add);
    let storms = find(&common::all_preferences(&app.store, "ada").await, "storms").clone();
    assert_eq!(storms.provenance.triggering_user_id, "u9");
}

/// A time safely before any erasure a test makes now.
fn an_hour_ago() -> String {
    (time::OffsetDateTime::now_utc() - time::Duration::hours(1))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// An extractor whose answer changes from one delivery to the next, as an LLM's may.
struct ScriptedExtractor(std::sync::Mutex<std::collections::VecDeque<Vec<(&'static str, Stance)>>>);

impl persona_prefs::extract::Extractor for ScriptedExtractor {
    fn extract<'a>(
        &'a self,
        _input: &'a persona_prefs::extract::ExtractionInput<'a>,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Vec<persona_prefs::extract::ExtractedOpinion>, persona_prefs::extract::ExtractError>,
    > {
        let answer = self
            .0
            .lock()
            .unwrap()
            .pop_front()
            .expect("a scripted answer");
        let opinions = answer
            .into_iter()
            .map(|(topic, stance)| persona_prefs::extract::ExtractedOpinion {
                name: topic.into(),
                opinion: format!("I have views on {}.", topic.to_lowercase()),
                category: "food".into(),
                stance,
                strength: 0.7,
                related_user_ids: Vec::new(),
                evidence: String::new(),
                found_by: None,
            })
            .collect();
        Box::pin(async move { Ok(opinions) })
    }
}

/// Effects are keyed by what they apply, not by where an opinion came in the extraction: an
/// extractor that reorders, rewords, drops or adds opinions between deliveries of one event
/// still gets each opinion applied exactly once, and never reinforces a preference with the
/// message that created it.
#[tokio::test]
async fn redeliveries_with_reordered_extractions_apply_each_opinion_exactly_once() {
    let config = test_config("reorder");
    let _cleanup = Cleanup(config.clone());
    let mut app = App::start(config).await.unwrap();
    app.extractor = std::sync::Arc::new(ScriptedExtractor(std::sync::Mutex::new(
        [
            // The first delivery saw one opinion (and failed before the rest, say).
            vec![("green tea", Stance::For)],
            // The redelivery sees two, the other way round.
            vec![
                ("black coffee", Stance::Against),
                ("green tea", Stance::For),
            ],
            // Another: reworded, plus a third opinion.
            vec![
                ("Green  Tea!", Stance::For),
                ("rainy days", Stance::For),
                ("black coffee", Stance::Against),
            ],
            // And one where the extractor finds nothing.
            vec![],
        ]
        .into(),
    )));
    let pipeline = app.pipeline();
    let delivery = serde_json::from_value::<ConversationEvent>(event(
        "ada",
        "e1",
        0,
        &[
            ("u1", "Drinks?"),
            ("persona", "Green tea, never black coffee. And rain."),
        ],
    ))
    .unwrap();
    let mut applied = Vec::new();
    for _ in 0..4 {
        let outcome = pipeline.process(&delivery).await.unwrap();
        applied.extend(
            outcome
                .decisions
                .iter()
                .filter(|d| d.applied)
                .map(|d| (d.action, d.name.clone())),
        );
    }
    assert_eq!(
        applied,
        vec![
            (Action::Add, "green tea".to_string()),
            (Action::Add, "black coffee".to_string()),
            (Action::Add, "rainy days".to_string()),
        ],
        "each opinion applied once, by the delivery that first saw it"
    );
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(stored.len(), 3, "no twins: {stored:?}");
    for preference in &stored {
        assert_eq!(
            preference.reinforcement_count, 0,
            "{} was never reinforced by the message that created it",
            preference.name
        );
    }
}

/// Ids at their limits make effect ids of a bounded length: a valid event is processed, not
/// dead-lettered halfway for an effect id over its cap.
#[tokio::test]
async fn an_event_with_maximal_ids_is_processed() {
    let config = test_config("longids");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config).await.unwrap();
    let long = |c: char| {
        c.to_string()
            .repeat(persona_prefs::store::validate::MAX_EXTERNAL_ID_CHARS)
    };
    let mut value = event(
        "ada",
        "e1",
        0,
        &[("u1", "Owls?"), ("persona", "I love owls. I hate noise.")],
    );
    value["platform"] = json!(long('p'));
    value["channel_id"] = json!(long('c'));
    value["messages"][1]["message_id"] = json!(long('m'));
    let event = serde_json::from_value::<ConversationEvent>(value).unwrap();
    let outcome = app.pipeline().process(&event).await.unwrap();
    assert_eq!(outcome.decisions.len(), 2);
    assert!(outcome.decisions.iter().all(|d| d.applied));
    let again = app.pipeline().process(&event).await.unwrap();
    assert!(again.decisions.iter().all(|d| !d.applied), "and once only");
}

/// A scan (erasure's, the dead-letter list's) that hears nothing more before a subject's last
/// message is an error, not a success: erasure must never report done with words left behind.
#[tokio::test]
async fn a_scan_that_stops_before_the_subjects_end_is_an_error() {
    use persona_prefs::ingest::scan::ended;
    let config = test_config("scanend");
    let _cleanup = Cleanup(config.clone());
    let nats = persona_prefs::app::connect_nats(&config).await.unwrap();
    let js = jetstream::new(nats);
    let stream = js
        .create_stream(jetstream::stream::Config {
            name: config.ingest.stream.clone(),
            subjects: vec![format!("{}.>", config.ingest.subject_prefix)],
            ..Default::default()
        })
        .await
        .unwrap();
    let subject = format!("{}.ada", config.ingest.subject_prefix);
    for n in 0..3 {
        js.publish(subject.clone(), format!("{n}").into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let stopped_early = ended(&stream, &subject, 2).await.unwrap_err();
    assert!(
        stopped_early.contains("before its last message (3)"),
        "{stopped_early}"
    );
    assert_eq!(ended(&stream, &subject, 3).await, Ok(()));
    // A last message deleted while the scan ran does not count against it.
    stream.delete_message(3).await.unwrap();
    assert_eq!(ended(&stream, &subject, 2).await, Ok(()));
    // Nor does a subject with no messages at all.
    assert_eq!(ended(&stream, &format!("{subject}.none"), 0).await, Ok(()));
}

/// `inject.min_evidence = 2`: what the persona said once is stored at once but reaches a
/// prompt only when it says it again; what an administrator added reaches it at once. At the
/// default (1), the first mention is injected.
#[tokio::test]
async fn with_a_confirmation_gate_a_view_is_injected_once_voiced_twice_or_curated() {
    for min_evidence in [1u64, 2] {
        let mut config = test_config("gate");
        config.inject.min_evidence = min_evidence;
        let _cleanup = Cleanup(config.clone());
        let app = App::start(config).await.unwrap();
        let pipeline = app.pipeline();
        let parse = |value: Value| serde_json::from_value::<ConversationEvent>(value).unwrap();
        let owls = app
            .embedder
            .embed(&["owls".to_string()])
            .await
            .unwrap()
            .remove(0);
        let injected = || async {
            app.store
                .get_preferences_for_injection(&persona_prefs::store::InjectionQuery {
                    persona_id: "ada",
                    query_embedding: &owls,
                    max_count: 10,
                    max_chars: 2000,
                    active_user_ids: &[],
                })
                .await
                .unwrap()
                .into_iter()
                .map(|p| p.name)
                .collect::<Vec<String>>()
        };
        pipeline
            .process(&parse(event(
                "ada",
                "e1",
                0,
                &[("u1", "Owls?"), ("persona", "I love owls.")],
            )))
            .await
            .unwrap();
        assert_eq!(
            common::active_preferences(&app.store, "ada").await.len(),
            1,
            "stored at once"
        );
        let first = injected().await;
        if min_evidence == 1 {
            assert_eq!(first, ["owls"], "the default injects the first mention");
            continue;
        }
        assert!(first.is_empty(), "voiced once: not injected yet: {first:?}");
        pipeline
            .process(&parse(event(
                "ada",
                "e2",
                5,
                &[("u2", "Owls again?"), ("persona", "I love owls.")],
            )))
            .await
            .unwrap();
        assert_eq!(injected().await, ["owls"], "voiced twice: injected");

        let mut curated = common::new_preference(
            "ada",
            "owl pellets",
            "Owl pellets are fascinating.",
            owls.clone(),
        );
        curated.stance = Some(Stance::For);
        app.store.add_preference(curated).await.unwrap();
        let names = injected().await;
        assert!(
            names.contains(&"owl pellets".to_string()),
            "written by an administrator: injected at once: {names:?}"
        );
    }
}

/// Opinions about the people and things present: "your cooking" in a reply to Maya is Maya's
/// cooking, about Maya, so the per-user pass of injection finds it when she is present; the
/// knowledge-graph entities the producer lists for a message stay with the opinions that name
/// them (`related_kg_uuids`), and those listed without a name with every opinion of it.
#[tokio::test]
async fn opinions_about_the_people_and_things_present_are_related_to_them() {
    let config = test_config("people");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config).await.unwrap();
    let mut value = event(
        "ada",
        "e1",
        0,
        &[
            (
                "maya",
                "I made lasagne again. What do you think of my cooking?",
            ),
            (
                "persona",
                "Maya, your cooking is wonderful. And Dune is a masterpiece.",
            ),
        ],
    );
    value["messages"][1]["mentions"] = json!([
        {"kg_uuid": "kg-dune", "name": "Dune"},
        {"kg_uuid": "kg-thread"}
    ]);
    let outcome = app
        .pipeline()
        .process(&serde_json::from_value::<ConversationEvent>(value).unwrap())
        .await
        .unwrap();
    assert_eq!(outcome.decisions.len(), 2, "{:?}", outcome.decisions);
    let preferences = common::active_preferences(&app.store, "ada").await;
    let cooking = find(&preferences, "maya's cooking");
    assert_eq!(cooking.related_user_ids, ["maya"]);
    assert_eq!(cooking.related_kg_uuids, ["kg-thread"]);
    let dune = find(&preferences, "dune");
    assert!(dune.related_user_ids.is_empty());
    assert_eq!(dune.related_kg_uuids, ["kg-dune", "kg-thread"]);

    // With Maya present, the user pass brings her up whatever the query.
    let query = app
        .embedder
        .embed(&["what should we watch tonight".to_string()])
        .await
        .unwrap()
        .remove(0);
    let injected = app
        .store
        .get_preferences_for_injection(&persona_prefs::store::InjectionQuery {
            persona_id: "ada",
            query_embedding: &query,
            max_count: 5,
            max_chars: 2000,
            active_user_ids: &["maya".to_string()],
        })
        .await
        .unwrap();
    assert!(
        injected.iter().any(|p| p.name == "maya's cooking"
            && p.matched_by
                .contains(&persona_prefs::store::MatchReason::User("maya".into()))),
        "{injected:?}"
    );
}

/// With the check on the rules (`extract.rules_min_sentence_score`; unset, the default, 0.6
/// with the local model), the worker remembers the view and not the remark beside it that the
/// rules also read as one; unchecked (0), both.
#[tokio::test]
async fn the_check_on_the_rules_keeps_a_remark_beside_a_view_out_of_memory() {
    let message = "Writing the code, yes. I love hiking.";
    for (check, expected) in [
        (Some(0.0), vec!["hiking", "writing the code"]),
        (Some(0.08), vec!["hiking"]),
        (None, vec!["hiking"]),
    ] {
        let mut config = test_config("checked");
        if check.is_some() {
            config.extract.rules_min_sentence_score = check;
        }
        assert_eq!(
            config.extract.rules_check(),
            check.unwrap_or(0.6),
            "the default checks at 0.6"
        );
        let h = Harness::start(config).await;
        h.publish(&event(
            "ada",
            "e1",
            0,
            &[("u1", "Which part did you enjoy?"), ("persona", message)],
        ))
        .await;
        h.drain().await;
        let preferences = h.preferences("ada").await;
        let mut found = names(&preferences);
        found.sort();
        assert_eq!(found, expected, "checked at {check:?}");
        h.stop().await;
    }
}
