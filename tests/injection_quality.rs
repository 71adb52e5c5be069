//! How well injection picks the preferences a conversation calls for, measured on a labelled
//! set (`tests/data/injection_relevance.json`: 42 preferences of one persona, 32 user messages
//! each with the preferences a thoughtful persona would bring to mind). Through the real
//! service and the local embedding model. Prints recall and precision of `inject` (default
//! caps), of the three `search` modes at 5, and of injection under other relevance floors
//! (`store.min_semantic_relevance`); fails if injection drops below its floors.

mod common;

use std::collections::BTreeMap;

use common::{Cleanup, test_config};
use persona_prefs::app::App;
use persona_prefs::client::{Client, Endpoint};
use serde::Deserialize;
use serde_json::{Value, json};

const FLOORS: [f64; 6] = [0.10, 0.15, 0.20, 0.25, 0.30, 0.35];

fn floor_label(floor: f64) -> &'static str {
    [
        "floor 0.10",
        "floor 0.15",
        "floor 0.20",
        "floor 0.25",
        "floor 0.30",
        "floor 0.35",
    ][FLOORS.iter().position(|f| *f == floor).unwrap()]
}

#[derive(Deserialize)]
struct LabelledSet {
    preferences: Vec<Value>,
    queries: Vec<Query>,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    relevant: Vec<String>,
}

async fn request(app: &App, endpoint: Endpoint, body: Value) -> Value {
    Client::new(app.nats.clone(), &app.config)
        .request_json(endpoint, &body)
        .await
        .unwrap_or_else(|error| panic!("{error}"))
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn injection_brings_the_relevant_preferences_to_mind() {
    let set: LabelledSet = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/data/injection_relevance.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    assert!(set.preferences.len() >= 40 && set.queries.len() >= 30);
    let config = test_config("injectquality");
    let _cleanup = Cleanup(config.clone());
    let app = App::start(config).await.unwrap();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let _services = app.serve(stopped).await.unwrap();
    for preference in &set.preferences {
        let mut body = preference.clone();
        body["persona_id"] = json!("ada");
        request(&app, Endpoint::Add, body).await;
    }

    // recall: share of the relevant preferences returned; precision: share of the returned
    // that are relevant. Summed over queries (micro-averaged).
    let mut tallies: BTreeMap<&'static str, (usize, usize, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    for query in &set.queries {
        let injected = request(
            &app,
            Endpoint::Inject,
            json!({"persona_id": "ada", "query": query.query}),
        )
        .await;
        let mut results: Vec<(&'static str, Vec<String>)> =
            vec![("inject", names(&injected["preferences"]))];
        for mode in ["semantic", "keyword", "hybrid"] {
            let found = request(
                &app,
                Endpoint::Search,
                json!({"persona_id": "ada", "query": query.query, "top_k": 5, "mode": mode}),
            )
            .await;
            results.push((mode, names(&found)));
        }
        // What injection would return under other relevance floors: the 8 nearest (the
        // default max_count; strengths are equal here, so ranking is by similarity) at or
        // above the floor.
        let nearest = request(
            &app,
            Endpoint::Search,
            json!({"persona_id": "ada", "query": query.query, "top_k": 8}),
        )
        .await;
        for floor in FLOORS {
            let kept: Vec<String> = nearest
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["similarity"].as_f64().unwrap() >= floor)
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect();
            results.push((floor_label(floor), kept));
        }
        for (label, returned) in results {
            let hits = returned
                .iter()
                .filter(|name| query.relevant.contains(name))
                .count();
            let tally = tallies.entry(label).or_default();
            tally.0 += hits;
            tally.1 += query.relevant.len();
            tally.2 += returned.len();
            if label == "inject" && hits < query.relevant.len() {
                misses.push(format!(
                    "{:?}: wanted {:?}, injected {returned:?}",
                    query.query, query.relevant
                ));
            }
        }
    }
    for miss in &misses {
        println!("inject miss: {miss}");
    }
    let mut measured = BTreeMap::new();
    for (label, (hits, relevant, returned)) in &tallies {
        let recall = *hits as f64 / *relevant as f64;
        let precision = *hits as f64 / (*returned).max(1) as f64;
        println!(
            "{label:<9} recall {recall:.3}  precision {precision:.3}  ({hits} of {relevant} relevant, {returned} returned)"
        );
        measured.insert(*label, (recall, precision));
    }
    // First measurement (all-MiniLM-L6-v2, store.min_semantic_relevance 0.25): recall 0.682,
    // precision 0.577. The floor sweep put 0.25 at the best F1 (0.20: 0.80 / 0.32; 0.30:
    // 0.50 / 0.69), and hybrid search recalled less than semantic (0.77 against 0.84 at 5),
    // so neither default changed. These floors only catch regressions.
    let (recall, precision) = measured["inject"];
    assert!(recall >= 0.62, "injection recall {recall:.3} below 0.62");
    assert!(
        precision >= 0.52,
        "injection precision {precision:.3} below 0.52"
    );
}
