//! The data's whole life across personas, through the running service (NATS, Redis, the
//! worker with the default extractor): a user erased from every persona at once, and a persona
//! deleted whole; both stick when the past arrives late.

mod common;

use std::time::Duration;

use common::{Running, test_config};
use persona_prefs::client::{
    Client, DeletePersonaRequest, Endpoint, ErrorKind, ListRequest, PersonasRequest,
};
use persona_prefs::serve::protocol::{AddRequest, EvolveRequest};
use serde_json::{Value, json};

struct Service {
    running: Running,
    client: Client,
    _cleanup: common::Cleanup,
}

async fn service(label: &str) -> Service {
    let config = test_config(label);
    let cleanup = common::Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    Service {
        running,
        client,
        _cleanup: cleanup,
    }
}

/// An event in which `user` says something and `persona` answers `said`, at `timestamp`.
fn event(id: &str, persona: &str, user: &str, said: &str, timestamp: &str) -> Value {
    json!({"event_id": id, "persona_id": persona, "platform": "discord", "channel_id": "c1",
        "messages": [
            {"message_id": format!("{id}-0"), "role": "user", "user_id": user,
             "content": "What do you think?", "timestamp": timestamp},
            {"message_id": format!("{id}-1"), "role": "persona", "content": said,
             "timestamp": timestamp}]})
}

/// An RFC 3339 time `seconds` from now.
fn from_now(seconds: i64) -> String {
    (time::OffsetDateTime::now_utc() + time::Duration::seconds(seconds))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

impl Service {
    /// Everything the service holds of `persona`, retracted preferences and their past
    /// versions too, as one JSON text.
    async fn everything_of(&self, persona: &str) -> String {
        let list = self
            .client
            .list(&ListRequest {
                persona_id: persona.into(),
                category: None,
                include_retracted: true,
                limit: 1000,
            })
            .await
            .unwrap();
        serde_json::to_string(&list).unwrap()
    }

    async fn names_of(&self, persona: &str) -> Vec<String> {
        let list = self
            .client
            .list(&ListRequest {
                persona_id: persona.into(),
                category: None,
                include_retracted: false,
                limit: 1000,
            })
            .await
            .unwrap();
        let mut names: Vec<String> = list.into_iter().map(|p| p.name).collect();
        names.sort();
        names
    }

    /// Every Redis key of `persona` (its hash tag), on this test's prefix.
    fn keys_of(&self, persona: &str) -> Vec<String> {
        let config = &self.running.app.config;
        let client = redis::Client::open(config.redis.url.as_str()).unwrap();
        let mut connection = client.get_connection().unwrap();
        let pattern = format!("{}:*{{{persona}}}*", config.redis.key_prefix);
        let mut keys = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, page): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut connection)
                .unwrap();
            keys.extend(page);
            if next == 0 {
                return keys;
            }
            cursor = next;
        }
    }

    /// The payloads left in `stream`.
    async fn payloads_in(&self, stream: &str) -> Vec<String> {
        let stream = self.running.app.js.get_stream(stream).await.unwrap();
        let last = stream.get_info().await.unwrap().state.last_sequence;
        let mut payloads = Vec::new();
        for sequence in 1..=last {
            if let Ok(message) = stream.get_raw_message(sequence).await {
                payloads.push(String::from_utf8_lossy(&message.payload).into_owned());
            }
        }
        payloads
    }

    /// Waits until no event left in the events stream contains `needle` (the worker erases
    /// an event just after acking it, so it may take a moment).
    async fn wait_until_no_event_contains(&self, needle: &str) {
        let stream = self.running.app.config.ingest.stream.clone();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left: Vec<String> = self
                .payloads_in(&stream)
                .await
                .into_iter()
                .filter(|payload| payload.contains(needle))
                .collect();
            if left.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still in the events stream: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_is_erased_from_every_persona_at_once_and_it_sticks() {
    let s = service("everywhere").await;
    let config = s.running.app.config.clone();
    // sam-42 talked with ada and bob; u2 with cy.
    for (id, persona, user, said) in [
        ("e1", "ada", "sam-42", "I love green tea."),
        ("e2", "bob", "sam-42", "Honestly, jazz is underrated."),
        ("e3", "cy", "u2", "I adore thunderstorms."),
    ] {
        s.running
            .publish_event(&event(id, persona, user, said, "2026-11-20T08:00:00Z"))
            .await;
    }
    s.running.drain().await;
    assert_eq!(s.names_of("ada").await, vec!["green tea"]);
    // A curator wrote what sam-42 recommends, then changed it: the past version quotes them.
    let quoted = s
        .client
        .add(&AddRequest {
            persona_id: "ada".into(),
            name: "films".into(),
            opinion: "Films sam-42 recommends are always worth it.".into(),
            ..AddRequest::default()
        })
        .await
        .unwrap();
    s.client
        .evolve(&EvolveRequest {
            persona_id: "ada".into(),
            preference_id: quoted.id.clone(),
            new_opinion: "I choose my films myself; sam-42's picks are hit and miss.".into(),
            reason: "after talking with sam-42".into(),
            new_stance: None,
        })
        .await
        .unwrap();
    // Many personas with no memory of them, so the registry is walked in several pages.
    let idle: Vec<String> = (0..150).map(|n| format!("idle-{n}")).collect();
    s.running.app.store.register_personas(&idle).await.unwrap();

    let mut pages = Vec::new();
    let erased = s
        .client
        .purge_user_everywhere_all("sam-42", 20, |page| pages.push(page.clone()))
        .await
        .unwrap();
    assert!(pages.len() > 1, "walked in pages: {}", pages.len());
    assert!(pages.last().unwrap().done);
    assert!(
        pages
            .iter()
            .rev()
            .skip(1)
            .all(|page| !page.done && !page.cursor.is_empty())
    );
    assert!(
        pages.iter().all(|page| page.personas_visited <= 20),
        "pages of the size asked for"
    );
    assert!(
        erased.personas_visited >= 153,
        "every persona visited: {}",
        erased.personas_visited
    );
    let mut touched: Vec<&str> = erased
        .personas
        .iter()
        .map(|p| p.memory.persona_id.as_str())
        .collect();
    touched.sort();
    assert_eq!(touched, vec!["ada", "bob"], "{erased:?}");
    assert_eq!(erased.personas_touched, 2);
    assert_eq!(
        erased.events_erased, 2,
        "their settled events left the stream"
    );
    assert_eq!(erased.preferences_retracted, 2, "only they evidenced them");
    assert!(erased.pseudonym.starts_with("erased-"));

    for persona in ["ada", "bob"] {
        let everything = s.everything_of(persona).await;
        assert!(
            !everything.contains("sam-42"),
            "{persona} still names them: {everything}"
        );
    }
    let films = s.client.get("ada", &quoted.id).await.unwrap();
    assert_eq!(
        films.opinion,
        format!(
            "I choose my films myself; {}'s picks are hit and miss.",
            erased.pseudonym
        )
    );
    let past = &films.evolution_history[0];
    assert_eq!(
        past.old_opinion.as_deref(),
        Some(format!("Films {} recommends are always worth it.", erased.pseudonym).as_str()),
        "the past version no longer quotes them"
    );
    assert_eq!(s.names_of("cy").await, vec!["thunderstorms"]);
    assert!(
        s.everything_of("cy").await.contains("\"u2\""),
        "another user's memory is untouched"
    );
    let events = s.payloads_in(&config.ingest.stream).await;
    assert!(
        events.iter().all(|payload| !payload.contains("sam-42")),
        "{events:?}"
    );

    // dee was not in the registry when the erasure ran: their earlier conversation with her,
    // arriving now, teaches her nothing and leaves the stream too.
    s.running
        .publish_event(&event(
            "e4",
            "dee",
            "sam-42",
            "I adore storms.",
            "2026-11-20T09:00:00Z",
        ))
        .await;
    s.running.drain().await;
    assert_eq!(s.names_of("dee").await, Vec::<String>::new());
    s.wait_until_no_event_contains("sam-42").await;
    // A conversation after the erasure is new evidence, remembered as usual.
    s.running
        .publish_event(&event(
            "e5",
            "dee",
            "sam-42",
            "I love rainy days.",
            &from_now(5),
        ))
        .await;
    s.running.drain().await;
    assert_eq!(s.names_of("dee").await, vec!["rainy days"]);

    // Asked again, the erasure reaches what they said since (dee's new view, which only they
    // evidenced) under the same pseudonym, and nothing else.
    let again = s
        .client
        .purge_user_everywhere_all("sam-42", 1000, |_| {})
        .await
        .unwrap();
    assert_eq!(again.pseudonym, erased.pseudonym);
    let touched: Vec<&str> = again
        .personas
        .iter()
        .map(|p| p.memory.persona_id.as_str())
        .collect();
    assert_eq!(touched, vec!["dee"], "{again:?}");
    assert_eq!(again.preferences_retracted, 1);
    assert_eq!(s.names_of("dee").await, Vec::<String>::new());

    // A continuation of an erasure never started is refused, as is a page size out of bounds.
    for request in [
        json!({"user_id": "nobody-7", "cursor": 12}),
        json!({"user_id": "nobody-7", "cursor": "0:ada"}),
        json!({"user_id": "sam-42", "cursor": "ada"}),
        json!({"user_id": "sam-42", "max_personas": 0}),
        json!({"user_id": "sam-42", "max_personas": 1001}),
        json!({"user_id": "sam-42", "persona_id": "ada"}),
    ] {
        let error = s
            .client
            .request_json(Endpoint::PurgeUserEverywhere, &request)
            .await
            .expect_err("refused");
        assert!(
            error
                .kind()
                .is_some_and(|kind| matches!(kind, ErrorKind::Invalid | ErrorKind::Malformed)),
            "{request}: {error}"
        );
    }
    s.running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_persona_is_gone_and_its_late_events_are_refused() {
    let s = service("delete_persona").await;
    let config = s.running.app.config.clone();
    s.running
        .publish_event(&event(
            "e1",
            "ada",
            "u1",
            "I love green tea.",
            "2026-11-20T08:00:00Z",
        ))
        .await;
    s.running
        .publish_event(&event(
            "e2",
            "bob",
            "u1",
            "Honestly, jazz is underrated.",
            "2026-11-20T08:00:00Z",
        ))
        .await;
    // An event the worker cannot read becomes ada's dead letter.
    s.running
        .publish_event(&json!({"event_id": "broken", "persona_id": "ada", "messages": "none"}))
        .await;
    s.running.drain().await;
    assert_eq!(s.names_of("ada").await, vec!["green tea"]);
    assert!(!s.keys_of("ada").is_empty());

    // The confirmation must repeat the persona id.
    let error = s
        .client
        .request_json(
            Endpoint::DeletePersona,
            &DeletePersonaRequest {
                persona_id: "ada".into(),
                confirm: "bob".into(),
            },
        )
        .await
        .expect_err("refused");
    assert_eq!(error.kind(), Some(ErrorKind::Invalid), "{error}");
    assert_eq!(s.names_of("ada").await, vec!["green tea"]);

    let deleted = s.client.delete_persona("ada").await.unwrap();
    assert_eq!(deleted.preferences_deleted, 1);
    assert!(deleted.keys_deleted >= 2, "{deleted:?}");
    assert_eq!(deleted.stored_events.events_erased, 2, "{deleted:?}");
    assert_eq!(deleted.stored_events.events_pending, 0);
    assert_eq!(deleted.stored_events.dead_letters_erased, 1, "{deleted:?}");
    assert_eq!(s.keys_of("ada"), Vec::<String>::new());
    let personas = s
        .client
        .personas(&PersonasRequest {
            offset: 0,
            limit: 100,
        })
        .await
        .unwrap();
    let listed: Vec<&str> = personas
        .personas
        .iter()
        .map(|p| p.persona_id.as_str())
        .collect();
    assert_eq!(listed, vec!["bob"], "the registry forgot ada");
    let events = s.payloads_in(&config.ingest.stream).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].contains("\"bob\""));
    assert_eq!(
        s.payloads_in(&config.ingest.dlq_stream).await,
        Vec::<String>::new()
    );

    // An event from before the deletion that arrives after it (a backlog, a replay) is
    // refused whole: ada gets no key back, and the event leaves the stream.
    s.running
        .publish_event(&event(
            "e3",
            "ada",
            "u1",
            "I adore storms.",
            "2026-11-20T09:00:00Z",
        ))
        .await;
    s.running.drain().await;
    s.wait_until_no_event_contains("storms").await;
    assert_eq!(s.keys_of("ada"), Vec::<String>::new());

    // Deleting again is harmless; what comes after the deletion starts ada afresh.
    let again = s.client.delete_persona("ada").await.unwrap();
    assert_eq!(again.preferences_deleted, 0);
    s.running
        .publish_event(&event(
            "e4",
            "ada",
            "u1",
            "I love rainy days.",
            &from_now(5),
        ))
        .await;
    s.running.drain().await;
    assert_eq!(s.names_of("ada").await, vec!["rainy days"]);
    assert_eq!(s.names_of("bob").await, vec!["jazz"], "bob is untouched");
    s.running.stop().await;
}
