//! A hot persona starves no one: one persona flooded with 10 000 queued events, and a quiet
//! persona's event published behind them is applied while thousands of the flood still wait,
//! not after it. Then every event of the flood takes effect once (nothing lost to the waiting).
//! Real NATS, Redis and the local model; no timing assertion, only the order things happen in.

mod common;

use std::time::Duration;

use common::test_config;
use persona_prefs::app::{App, wait_until_drained};
use persona_prefs::store::ListOptions;
use serde_json::json;

const FLOOD: usize = 10_000;

#[tokio::test(flavor = "multi_thread")]
async fn a_quiet_personas_event_is_applied_while_a_flood_still_waits() {
    let mut config = test_config("fairness");
    // The worker pulls far enough to see past the flood, and works on at most four of one
    // persona's events at once (docs: ingest.max_in_flight, ingest.max_in_flight_per_persona).
    config.ingest.max_in_flight = FLOOD + 100;
    config.ingest.max_in_flight_per_persona = 4;
    let _cleanup = common::Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    let consumer = app.consumer().await.unwrap();

    let event = |persona: &str, n: usize, said: &str| {
        json!({"event_id": format!("{persona}-{n}"), "persona_id": persona, "platform": "test",
            "channel_id": "c", "messages": [{"message_id": format!("{persona}-{n}-m"),
            "role": "persona", "content": said,
            "timestamp": format!("2026-11-20T{:02}:{:02}:{:02}Z", 8 + n / 3600, (n / 60) % 60, n % 60)}]})
    };
    let mut acks = Vec::with_capacity(1001);
    let publish = |payload: serde_json::Value| {
        let persona = payload["persona_id"].as_str().unwrap().to_string();
        let subject =
            persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, &persona);
        let js = app.js.clone();
        async move {
            js.publish(subject, serde_json::to_vec(&payload).unwrap().into())
                .await
                .unwrap()
        }
    };
    for n in 0..FLOOD {
        acks.push(publish(event("hot", n, "I love green tea.")).await);
        // The client holds at most a few thousand publish acks outstanding.
        if acks.len() == 1000 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    acks.push(publish(event("quiet", 0, "Honestly, jazz is underrated.")).await);
    for ack in acks {
        ack.await.unwrap();
    }

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped));
    let listed = |persona: &'static str| {
        let store = app.store.clone();
        async move {
            store
                .list_preferences(persona, &ListOptions::default())
                .await
                .unwrap()
        }
    };
    // A bound on "never", far above any answer: not a timing assertion.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        if !listed("quiet").await.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the quiet persona's event was never applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hot_done = listed("hot")
        .await
        .first()
        .map_or(0, |tea| 1 + tea.reinforcement_count as usize);
    assert!(
        hot_done < FLOOD / 2,
        "the quiet persona waited for the flood: {hot_done} of {FLOOD} were done first"
    );
    println!("the quiet persona's event was applied after {hot_done} of the flood's {FLOOD}");

    // Every event of the flood then takes effect, once.
    wait_until_drained(&app.js, consumer, Duration::from_secs(600))
        .await
        .unwrap();
    let tea = listed("hot").await;
    assert_eq!(tea.len(), 1);
    assert_eq!(
        1 + tea[0].reinforcement_count as usize,
        FLOOD,
        "one add and a reinforcement per event"
    );
    let _ = stop.send(true);
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.returned_for_redelivery, 0);
}

/// Where the per-persona limit matters: a slow model answering one request at a time. Without
/// the limit, the flood's requests queue for the model ahead of the quiet persona's (255 of 600
/// in the run that checked); with it, a few at most (3).
#[tokio::test(flavor = "multi_thread")]
async fn a_flooded_persona_holds_at_most_its_share_of_a_slow_model() {
    const FLOOD: usize = 600;
    let fake = common::fake_openai::FakeOpenAi::start().await;
    fake.respond_with(|_, body| {
        let message = common::fake_openai::persona_message(body);
        let topic = message
            .trim_start_matches("I love ")
            .trim_end_matches('.')
            .to_string();
        common::fake_openai::Reply::Delay(
            Duration::from_millis(10),
            Box::new(common::fake_openai::Reply::opinions(json!([{
                "name": topic, "opinion": message, "category": "personal", "stance": "for",
                "strength": 0.6, "related_user_ids": [], "evidence": message}]))),
        )
    });
    let mut config = test_config("fairness_llm");
    config.extract.kind = persona_prefs::extract::ExtractorKind::Llm;
    config.extract.llm.base_url = fake.base_url.clone();
    config.extract.llm.max_concurrent_requests = 1;
    config.ingest.max_in_flight = FLOOD + 100;
    config.ingest.max_in_flight_per_persona = 4;
    let _cleanup = common::Cleanup(config.clone());
    let app = App::start(config.clone()).await.unwrap();
    let consumer = app.consumer().await.unwrap();
    for (persona, n, said) in (0..FLOOD)
        .map(|n| ("hot", n, "I love green tea."))
        .chain(std::iter::once(("quiet", 0, "I love jazz.")))
    {
        let payload = json!({"event_id": format!("{persona}-{n}"), "persona_id": persona,
            "platform": "test", "channel_id": "c", "messages": [{"message_id": format!("{persona}-{n}-m"),
            "role": "persona", "content": said,
            "timestamp": format!("2026-11-20T08:{:02}:{:02}Z", (n / 60) % 60, n % 60)}]});
        persona_prefs::client::publish_event(
            &app.js,
            &config.ingest.subject_prefix,
            persona,
            serde_json::to_vec(&payload).unwrap(),
            None,
        )
        .await
        .unwrap();
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped));
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while app
        .store
        .list_preferences("quiet", &ListOptions::default())
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the quiet persona's event was never applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The model's own log: how many of the flood's requests it was asked before the quiet one.
    let asked: Vec<String> = fake
        .received()
        .iter()
        .map(|request| common::fake_openai::persona_message(&request.body))
        .collect();
    let ahead = asked
        .iter()
        .position(|message| message == "I love jazz.")
        .expect("the quiet persona's message was asked");
    assert!(
        ahead <= 16,
        "the quiet persona queued behind the flood for the model: {ahead} of its requests first"
    );
    println!(
        "with a one-at-a-time model, {ahead} of the flood's {FLOOD} requests came before the quiet persona's"
    );
    wait_until_drained(&app.js, consumer, Duration::from_secs(600))
        .await
        .unwrap();
    let _ = stop.send(true);
    let _ = worker.await;
}
