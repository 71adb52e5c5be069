//! A persona's memory is a function of what it said and when, not of the order its events
//! arrive in. The sample conversation and a 30-event conversation with several changes of mind
//! (`examples/changes_of_mind.jsonl`), published in the order they were said and then shuffled
//! under five seeds, to one worker and to two, each end with the same memory: stances,
//! strengths, counts, evidence, and every version of the past with its time.

mod common;

use std::collections::BTreeMap;

use common::{Cleanup, Running, test_config};
use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::extract::{ExtractionInput, Extractor, TurnText};
use persona_prefs::store::Preference;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde_json::Value;

const SAMPLE: &str = include_str!("../examples/sample_conversation.jsonl");
const CHANGES_OF_MIND: &str = include_str!("../examples/changes_of_mind.jsonl");

fn events(jsonl: &str) -> Vec<Value> {
    jsonl
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The 30-event conversation reads as written: these are the opinions the rules extractor
/// finds in it, event by event (topic and stance). The arrival-order test below is only as
/// strong as the changes of mind it carries.
#[tokio::test]
async fn the_changes_of_mind_conversation_reads_as_written() {
    let extractor = RulesExtractor::new(8);
    let mut read = Vec::new();
    for (n, event) in events(CHANGES_OF_MIND).iter().enumerate() {
        let messages = event["messages"].as_array().unwrap();
        let persona = messages.iter().find(|m| m["role"] == "persona").unwrap();
        let context: Vec<TurnText> = messages
            .iter()
            .filter(|m| m["role"] != "persona")
            .map(|m| TurnText {
                role: "user",
                user_id: m["user_id"].as_str().unwrap(),
                content: m["content"].as_str().unwrap(),
            })
            .collect();
        let input = ExtractionInput {
            persona_message: persona["content"].as_str().unwrap(),
            context,
            participants: &[],
        };
        for opinion in extractor.extract(&input).await.unwrap() {
            read.push(format!("{n} {} {}", opinion.name, opinion.stance.as_str()));
        }
    }
    let expected = [
        "0 jazz for",
        "1 winter against",
        "2 sushi for",
        "3 jazz for",
        "4 running against",
        "5 poetry for",
        "6 crowds against",
        "7 jazz against",
        "8 sushi for",
        "9 winter for",
        "10 running for",
        "11 jazz against",
        "12 poetry for",
        "13 winter for",
        "14 crowds against",
        "15 sushi against",
        "16 running for",
        "17 green tea for",
        "18 jazz for",
        "19 poetry for",
        "20 green tea for",
        "21 winter against",
        "22 jazz for",
        "23 crowds against",
        "24 sushi for",
        "25 running against",
        "26 opera for",
        "27 opera against",
        "28 green tea for",
        "29 spring for",
    ];
    assert_eq!(read, expected);
}

/// What a persona remembers, comparable across runs: every preference (retracted ones too)
/// keyed by topic, without what only says when the store wrote it (its id, creation time).
async fn remembered(running: &Running, persona: &str) -> BTreeMap<String, Preference> {
    let mut memory = BTreeMap::new();
    for preference in common::all_preferences(&running.app.store, persona).await {
        let mut key = preference.name.clone();
        for n in 2.. {
            if !memory.contains_key(&key) {
                break;
            }
            key = format!("{} #{n}", preference.name);
        }
        memory.insert(
            key,
            Preference {
                id: String::new(),
                created_at: String::new(),
                ..preference
            },
        );
    }
    memory
}

/// Publishes `events` in `order` to `workers` workers on a fresh prefix and streams, waits
/// until all are settled, and returns what each persona remembers.
async fn run(
    events: &[Value],
    order: &[usize],
    workers: usize,
) -> BTreeMap<String, BTreeMap<String, Preference>> {
    let config = test_config("order");
    let _cleanup = Cleanup(config.clone());
    let mut running = Vec::new();
    for _ in 0..workers {
        running.push(Running::worker(config.clone()).await);
    }
    for &index in order {
        running[0].publish_event(&events[index]).await;
    }
    for worker in &running {
        worker.drain().await;
    }
    let letters = running[0]
        .app
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await;
    if let Ok(mut letters) = letters {
        assert_eq!(
            letters.info().await.unwrap().state.messages,
            0,
            "nothing is dead-lettered"
        );
    }
    let mut memory = BTreeMap::new();
    for persona in ["demo_stargazer", "demo_ember"] {
        memory.insert(persona.to_string(), remembered(&running[0], persona).await);
    }
    for worker in running {
        worker.stop().await;
    }
    memory
}

fn describe(
    memory: &BTreeMap<String, BTreeMap<String, Preference>>,
) -> BTreeMap<&str, Vec<String>> {
    memory
        .iter()
        .map(|(persona, preferences)| {
            (
                persona.as_str(),
                preferences
                    .iter()
                    .map(|(topic, p)| {
                        format!(
                            "{topic}: {:?} v{} strength {:.4} x{} history {:?}",
                            p.stance,
                            p.version,
                            p.strength,
                            p.reinforcement_count,
                            p.evolution_history
                                .iter()
                                .map(|h| (h.old_stance.clone(), h.timestamp.clone()))
                                .collect::<Vec<_>>()
                        )
                    })
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_arrival_order_ends_with_the_memory_of_in_order_delivery() {
    let mut all = events(SAMPLE);
    all.extend(events(CHANGES_OF_MIND));
    let in_order: Vec<usize> = (0..all.len()).collect();
    let expected = run(&all, &in_order, 1).await;

    // What in-order delivery remembers is what the conversations say.
    let ember = &expected["demo_ember"];
    let jazz = &ember["jazz"];
    assert_eq!(jazz.version, 3, "jazz: for, against, for: {jazz:?}");
    assert_eq!(jazz.evolution_history.len(), 2);
    let cilantro = &expected["demo_stargazer"]["cilantro"];
    assert_eq!(
        cilantro.version, 2,
        "the sample's change of mind about cilantro"
    );

    for seed in 1..=5u64 {
        let mut order = in_order.clone();
        order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
        for workers in [1, 2] {
            let memory = run(&all, &order, workers).await;
            assert!(
                memory == expected,
                "seed {seed}, {workers} worker(s): the memory differs from in-order delivery\n\
                 got:      {:#?}\nexpected: {:#?}",
                describe(&memory),
                describe(&expected)
            );
        }
    }
}
