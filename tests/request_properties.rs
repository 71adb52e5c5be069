//! Bad input at volume, through the real service (NATS, Redis, the local model): 10 000
//! generated request bodies over every endpoint, each shaped like the endpoint's own (its
//! fields, with plausible values most of the time and hostile ones often: wrong types, limits
//! broken, unknown fields, another persona, text that breaks parsers, raw bytes). The
//! property: every request gets a reply, and every reply is either the endpoint's answer or a
//! typed refusal (400 or 404, with its kind and a message); never a 500, never a 503 while
//! Redis and NATS are up, never silence.

mod common;

use std::time::Duration;

use common::{Running, test_config};
use persona_prefs::client::{AddRequest, Client, Endpoint};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

const CASES: u32 = 10_000;

/// Text with what breaks parsers and prompts (as tests/properties.rs): markup, quotes,
/// separators, control and bidi characters, astral symbols.
fn hostile_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<char>(),
            2 => prop::sample::select(vec![
                '<', '>', '&', '"', '\'', '{', '}', '|', ':', ',', '.', '\\', '\n', '\r', '\t',
                '\0', '\u{202e}', '\u{200b}', '*', '#', '[', ']', '`', '-', ' ', '😀', '>', '.',
            ]),
            3 => prop::char::range('a', 'z'),
        ],
        0..48,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// A JSON value of any type.
fn loose_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        hostile_text().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        prop::collection::vec(hostile_text().prop_map(Value::from), 0..3).prop_map(Value::from),
        Just(json!({"nested": {"deep": [1, 2, 3]}})),
    ]
}

/// A plausible value for a field of that name, often one that breaks its limit.
fn field_value(name: &'static str, ids: Vec<String>) -> BoxedStrategy<Value> {
    let text = || hostile_text().prop_map(Value::from);
    let count = || {
        prop_oneof![
            4 => (0u64..64).prop_map(Value::from),
            1 => (0u64..2_000_000).prop_map(Value::from),
            1 => any::<i64>().prop_map(Value::from),
        ]
    };
    match name {
        "persona_id" | "confirm" => prop_oneof![
            8 => Just(json!("ada")),
            1 => Just(json!("bob")),
            1 => "[A-Za-z0-9_-]{0,70}".prop_map(Value::from),
            1 => text(),
        ]
        .boxed(),
        "preference_id" => prop_oneof![
            3 => prop::sample::select(ids).prop_map(Value::from),
            1 => "[A-Za-z0-9_-]{0,140}".prop_map(Value::from),
            1 => text(),
        ]
        .boxed(),
        "user_id" | "pseudonym" | "triggering_user_id" | "triggering_message_id" => prop_oneof![
            3 => "[a-z0-9_-]{1,12}".prop_map(Value::from),
            1 => "[a-z]{300}".prop_map(Value::from),
            1 => text(),
        ]
        .boxed(),
        "query_embedding" => prop_oneof![
            2 => prop::collection::vec(-1.0f32..1.0, 384..=384)
                .prop_map(|v| json!(v)),
            1 => prop::collection::vec(-1.0f32..1.0, 0..400).prop_map(|v| json!(v)),
            1 => prop::collection::vec(loose_value(), 0..4).prop_map(Value::from),
        ]
        .boxed(),
        // A version that exists is small: most of the time one of the first few.
        "version" => prop_oneof![3 => (1u64..4).prop_map(Value::from), 1 => count()].boxed(),
        "cursor" => prop_oneof![
            1 => count(),
            1 => Just(json!("")),
            1 => "[0-9]{1,13}:[a-z_-]{1,12}".prop_map(Value::from),
            1 => loose_value(),
        ]
        .boxed(),
        "max_count" | "max_chars" | "limit" | "offset" | "top_k" | "max_personas" => {
            count().boxed()
        }
        "strength" | "threshold" => prop_oneof![
            3 => (-0.5f64..1.5).prop_map(Value::from),
            1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ]
        .boxed(),
        "stance" | "new_stance" => prop_oneof![
            2 => Just(json!("for")),
            2 => Just(json!("against")),
            1 => text(),
        ]
        .boxed(),
        "mode" => prop::sample::select(vec!["semantic", "keyword", "hybrid", "vibes"])
            .prop_map(Value::from)
            .boxed(),
        "format" => prop::sample::select(vec!["json", "xml", "markdown", "yaml"])
            .prop_map(Value::from)
            .boxed(),
        "category" => prop_oneof![
            2 => prop::sample::select(vec!["culinary", "aesthetic", "personal"]).prop_map(Value::from),
            1 => text(),
        ]
        .boxed(),
        "include_retracted" | "apply" | "explain" => any::<bool>().prop_map(Value::from).boxed(),
        "active_user_ids" | "bases" | "related_user_ids" => {
            prop::collection::vec("[a-z0-9_-]{1,10}", 0..40)
                .prop_map(|ids| json!(ids))
                .boxed()
        }
        "conversation" => prop::collection::vec(
            (
                prop::sample::select(vec!["user", "persona", "system", "robot"]),
                hostile_text(),
            )
                .prop_map(|(role, content)| json!({"role": role, "content": content})),
            0..4,
        )
        .prop_map(Value::from)
        .boxed(),
        // Texts: query, name, opinion, new_opinion, reason, draft.
        _ => prop_oneof![
            3 => text(),
            1 => prop::sample::select(vec![
                "I love green tea.", "Honestly, jazz is underrated.", "tea", "hi",
                "I can't stand crowds, but I adore storms.",
            ])
            .prop_map(Value::from),
            1 => "[a-z ]{5000}".prop_map(Value::from),
        ]
        .boxed(),
    }
}

/// The fields a request to `endpoint` may carry.
fn fields_of(endpoint: Endpoint) -> &'static [&'static str] {
    match endpoint {
        Endpoint::Inject => &[
            "persona_id",
            "query",
            "query_embedding",
            "active_user_ids",
            "max_count",
            "max_chars",
            "format",
            "explain",
        ],
        Endpoint::Add => &[
            "persona_id",
            "name",
            "opinion",
            "category",
            "stance",
            "strength",
            "triggering_user_id",
            "triggering_message_id",
            "related_user_ids",
        ],
        Endpoint::Reinforce | Endpoint::Get => &["persona_id", "preference_id"],
        Endpoint::Evolve => &[
            "persona_id",
            "preference_id",
            "new_opinion",
            "reason",
            "new_stance",
        ],
        Endpoint::Retract => &["persona_id", "preference_id", "reason"],
        Endpoint::List => &["persona_id", "category", "include_retracted", "limit"],
        Endpoint::Stats | Endpoint::Bases => &["persona_id"],
        Endpoint::Search => &["persona_id", "query", "top_k", "include_retracted", "mode"],
        Endpoint::PurgeUser => &["persona_id", "user_id", "pseudonym"],
        Endpoint::SetBases => &["persona_id", "bases"],
        Endpoint::Restore => &["persona_id", "preference_id", "version", "reason"],
        Endpoint::Consolidate => &["persona_id", "threshold", "apply"],
        Endpoint::Personas => &["limit", "offset"],
        Endpoint::Check => &["persona_id", "draft", "conversation"],
        Endpoint::PurgeUserEverywhere => &["user_id", "cursor", "max_personas"],
        Endpoint::DeletePersona => &["persona_id", "confirm"],
    }
}

/// A request: an endpoint and the bytes sent to it (for `ada`'s subject; a deletion for
/// `doomed`'s).
fn request(ids: Vec<String>) -> impl Strategy<Value = (Endpoint, Vec<u8>)> {
    prop::sample::select(Endpoint::ALL.to_vec()).prop_flat_map(move |endpoint| {
        let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = fields_of(endpoint)
            .iter()
            .map(|name| {
                // persona_id is there almost always; other fields two times in three.
                let present = if *name == "persona_id" { 0.95 } else { 0.66 };
                prop::option::weighted(present, field_value(name, ids.clone()))
                    .prop_map(move |value| value.map(|value| (name.to_string(), value)))
                    .boxed()
            })
            .collect();
        let body = (
            fields,
            prop::option::weighted(0.05, (hostile_text(), loose_value())),
        )
            .prop_map(move |(fields, unknown)| {
                let mut body: Map<String, Value> = fields.into_iter().flatten().collect();
                // Deletions go to a persona of their own, so ada keeps her memory for the rest.
                if endpoint == Endpoint::DeletePersona {
                    for key in ["persona_id", "confirm"] {
                        if body.get(key) == Some(&json!("ada")) {
                            body.insert(key.into(), json!("doomed"));
                        }
                    }
                }
                if let Some((name, value)) = unknown {
                    body.insert(format!("x{name}"), value);
                }
                serde_json::to_vec(&Value::Object(body)).unwrap()
            });
        let payload = prop_oneof![
            20 => body,
            1 => prop::collection::vec(any::<u8>(), 0..256),
            1 => Just(b"{\"persona_id\": \"ada\"".to_vec()),
        ];
        (Just(endpoint), payload)
    })
}

#[test]
fn every_request_body_gets_an_answer_or_a_typed_refusal() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = test_config("request_properties");
    let _cleanup = common::Cleanup(config.clone());
    let running = runtime.block_on(Running::worker_and_service(config.clone()));
    let _entered = runtime.enter();
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    // ada has memory for the requests to reach: a few preferences, each changed twice.
    let mut ids = Vec::new();
    for (name, opinion) in [
        ("green tea", "I love green tea."),
        ("jazz", "Jazz is underrated."),
        ("crowds", "I can't stand crowds."),
    ] {
        let added = runtime
            .block_on(client.add(&AddRequest {
                persona_id: "ada".into(),
                name: name.into(),
                opinion: opinion.into(),
                ..AddRequest::default()
            }))
            .unwrap();
        // Two changes of mind, so versions 1 and 2 are there to restore.
        for said in ["I have come round on it.", "Back to how I first saw it."] {
            runtime
                .block_on(client.evolve(&persona_prefs::client::EvolveRequest {
                    persona_id: "ada".into(),
                    preference_id: added.id.clone(),
                    new_opinion: said.into(),
                    reason: String::new(),
                    new_stance: None,
                }))
                .unwrap();
        }
        ids.push(added.id);
    }

    let nats = running.app.nats.clone();
    let serve = running.app.config.serve.clone();
    let outcomes: std::cell::RefCell<std::collections::BTreeMap<String, usize>> =
        Default::default();
    let mut runner = TestRunner::new(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&request(ids), |(endpoint, payload)| {
        let persona = if endpoint == Endpoint::DeletePersona {
            "doomed"
        } else {
            "ada"
        };
        let subject = endpoint.subject(&serve.subject_prefix, &serve.tenant, persona);
        let reply = runtime.block_on(async {
            // Not a timing assertion: a bound on "never silence", far above any answer.
            tokio::time::timeout(
                Duration::from_secs(60),
                nats.request(subject.clone(), payload.clone().into()),
            )
            .await
        });
        let reply = match reply {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => {
                return Err(TestCaseError::fail(format!(
                    "{endpoint}: no reply ({error}) to {}",
                    String::from_utf8_lossy(&payload)
                )));
            }
            Err(_) => {
                return Err(TestCaseError::fail(format!(
                    "{endpoint}: no reply within 60 s to {}",
                    String::from_utf8_lossy(&payload)
                )));
            }
        };
        let code = common::service_error_code(&reply);
        let body: Value = serde_json::from_slice(&reply.payload).map_err(|error| {
            TestCaseError::fail(format!("{endpoint}: a reply that is not JSON ({error})"))
        })?;
        match code {
            None => {
                *outcomes
                    .borrow_mut()
                    .entry(format!("{endpoint} ok"))
                    .or_default() += 1;
            }
            Some(code @ (400 | 404)) => {
                let kind = body["error"]["kind"].as_str().unwrap_or_default();
                let message = body["error"]["message"].as_str().unwrap_or_default();
                prop_assert!(
                    !kind.is_empty() && !message.is_empty(),
                    "{endpoint}: an error without kind or message: {body}"
                );
                prop_assert_eq!(body["error"]["code"].as_u64(), Some(u64::from(code)));
                // A restore of a version the history no longer keeps (every write of the run
                // adds one, and ten are kept) is the store's own answer: the body got through.
                let kind = if endpoint == Endpoint::Restore && message.contains("is not kept") {
                    "reached the store (version not kept)"
                } else {
                    kind
                };
                *outcomes
                    .borrow_mut()
                    .entry(format!("{endpoint} {code} {kind}"))
                    .or_default() += 1;
            }
            Some(other) => {
                return Err(TestCaseError::fail(format!(
                    "{endpoint}: {other} {body} for {}",
                    String::from_utf8_lossy(&payload)
                )));
            }
        }
        Ok(())
    });
    // What the cases reached, so a property that only ever met refusals shows it.
    let outcomes = outcomes.into_inner();
    for (outcome, count) in &outcomes {
        eprintln!("{count:>6}  {outcome}");
    }
    result.unwrap();
    let answered: usize = outcomes
        .iter()
        .filter(|(outcome, _)| outcome.ends_with(" ok"))
        .map(|(_, count)| count)
        .sum();
    assert!(
        answered >= 1000,
        "the generated bodies reached the endpoints' work, not only their refusals: {answered} answered"
    );
    for endpoint in Endpoint::ALL {
        let reached = outcomes.contains_key(&format!("{endpoint} ok"))
            || outcomes.contains_key(&format!(
                "{endpoint} 400 reached the store (version not kept)"
            ));
        assert!(
            reached,
            "{endpoint} never got a generated body past its checks: {outcomes:?}"
        );
    }
    runtime.block_on(running.stop());
}
