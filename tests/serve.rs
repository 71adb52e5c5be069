//! The request-reply services through a real NATS server and Redis: injection, administration,
//! errors, discovery and the Python client example.

mod common;

use std::time::Duration;

use common::{Cleanup, test_config, unit_vector, vector_near};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use persona_prefs::serve::Services;
use persona_prefs::store::{NewPreference, Provenance, Stance};
use serde_json::{Value, json};
use tokio::sync::watch;

struct Service {
    app: App,
    services: Option<Services>,
    _stop: watch::Sender<bool>,
    _cleanup: Cleanup,
}

impl Service {
    /// The persona's one preference holds the F32 model's vector of `topic`, as ingest would
    /// store it, not the 8-bit query pass's (which serves injection and search text only):
    /// searched with the F32 vector it is all but identical (the vector set keeps it in 8 bits
    /// of its own), where a query-pass vector sits near 0.997.
    async fn assert_stored_as_ingest_stores(&self, persona_id: &str, topic: &str) {
        let exact = self.app.embedder.embed(&[topic.to_string()]).await.unwrap();
        let queried = self
            .app
            .query_embedder
            .embed(&[topic.to_string()])
            .await
            .unwrap();
        assert_ne!(exact, queried, "the query pass differs from the stored one");
        let hits = self
            .app
            .store
            // The exact search (retracted included): cosine to the dequantised copy, not VSIM's
            // approximate score.
            .search_preferences(persona_id, &exact[0], 1, true)
            .await
            .unwrap();
        let similarity = 1.0 - hits[0].score;
        assert!(
            similarity > 0.9999,
            "stored vector's similarity to the F32 one: {similarity}"
        );
    }

    async fn start(config: Config) -> Service {
        let cleanup = Cleanup(config.clone());
        let app = App::start(config).await.unwrap();
        let (stop, stopped) = watch::channel(false);
        let services = app.serve(stopped).await.unwrap();
        Service {
            app,
            services: Some(services),
            _stop: stop,
            _cleanup: cleanup,
        }
    }

    /// The subject a request to `endpoint` naming `persona` goes to.
    fn subject(&self, endpoint: &str, persona: &str) -> String {
        let config = &self.app.config.serve;
        persona_prefs::serve::Endpoint::from_name(endpoint)
            .expect("an endpoint's name")
            .subject(&config.subject_prefix, &config.tenant, persona)
    }

    /// Sends a request; returns (error status if any, body).
    async fn call(&self, endpoint: &str, body: Value) -> (Option<u16>, Value) {
        self.call_raw(endpoint, serde_json::to_vec(&body).unwrap())
            .await
    }

    /// To the subject of the persona the body names, as a client in another language would;
    /// a body naming no valid persona id goes to the endpoint's unscoped subject (answered while
    /// `serve.legacy_subjects` is on), where the service itself must refuse it.
    async fn call_raw(&self, endpoint: &str, payload: Vec<u8>) -> (Option<u16>, Value) {
        let persona = serde_json::from_slice::<Value>(&payload)
            .ok()
            .and_then(|body| body["persona_id"].as_str().map(str::to_string))
            .filter(|persona| persona_prefs::store::validate::persona_id(persona).is_ok());
        let subject = match persona {
            Some(persona) => self.subject(endpoint, &persona),
            None => persona_prefs::serve::Endpoint::from_name(endpoint)
                .expect("an endpoint's name")
                .role_subject(&self.app.config.serve.subject_prefix),
        };
        let reply = tokio::time::timeout(
            Duration::from_secs(10),
            self.app.nats.request(subject, payload.into()),
        )
        .await
        .expect("a reply within 10 s")
        .expect("request delivered");
        (
            common::service_error_code(&reply),
            serde_json::from_slice(&reply.payload).unwrap_or(Value::Null),
        )
    }

    async fn ok(&self, endpoint: &str, body: Value) -> Value {
        let (status, reply) = self.call(endpoint, body).await;
        assert_eq!(status, None, "{endpoint} failed: {reply}");
        reply
    }

    async fn seed(
        &self,
        persona: &str,
        name: &str,
        opinion: &str,
        embedding: Vec<f32>,
        strength: f64,
        users: &[&str],
    ) -> String {
        let new = NewPreference {
            persona_id: persona.into(),
            name: name.into(),
            opinion: opinion.into(),
            category: "culinary".into(),
            stance: Some(Stance::For),
            stance_at: None,
            strength: Some(strength),
            provenance: Provenance {
                triggering_user_id: users.first().map(|u| u.to_string()).unwrap_or_default(),
                ..Default::default()
            },
            related_user_ids: users.iter().map(|u| u.to_string()).collect(),
            related_kg_uuids: Vec::new(),
            embedding,
            inherited_from: None,
        };
        self.app.store.add_preference(new).await.unwrap().id
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(services) = self.services.take() {
            let _ = futures::executor::block_on(async {
                tokio::time::timeout(Duration::from_secs(1), services.stop()).await
            });
        }
    }
}

fn ids(reply: &Value) -> Vec<String> {
    reply["preferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn inject_with_a_precomputed_embedding_ranks_and_renders() {
    let s = Service::start(test_config("inject")).await;
    let query = unit_vector(1);
    let strong = s
        .seed(
            "ada",
            "tea",
            "I love green tea & <jasmine>.",
            vector_near(&query, 0.9, 2),
            0.9,
            &[],
        )
        .await;
    let weak = s
        .seed(
            "ada",
            "coffee",
            "Coffee is fine.",
            vector_near(&query, 0.9, 3),
            0.2,
            &[],
        )
        .await;
    let about_carol = s
        .seed(
            "ada",
            "carol",
            "Carol's puns are the best.",
            vector_near(&query, 0.0, 4),
            0.8,
            &["carol"],
        )
        .await;
    s.seed("bob", "tea", "Bob's tea view.", query.clone(), 1.0, &[])
        .await;

    let reply = s
        .ok("inject", json!({"persona_id": "ada", "query_embedding": query, "active_user_ids": ["carol"], "format": "xml"}))
        .await;
    assert_eq!(reply["persona_id"], "ada");
    assert_eq!(ids(&reply)[0], strong, "relevance x strength first");
    assert!(ids(&reply).contains(&about_carol) && ids(&reply).contains(&weak));
    assert!(
        !reply.to_string().contains("Bob's"),
        "one persona's data only"
    );
    let carol = reply["preferences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == about_carol.as_str())
        .unwrap();
    assert_eq!(carol["matched_by"], json!(["user:carol"]));
    let rendered = reply["rendered"].as_str().unwrap();
    assert!(
        rendered.starts_with("<persona_preferences>") && rendered.contains("&amp; &lt;jasmine&gt;"),
        "{rendered}"
    );
    assert!(reply["took_ms"].as_f64().unwrap() >= 0.0);

    let markdown = s.ok("inject", json!({"persona_id": "ada", "query_embedding": query, "format": "markdown", "max_count": 1})).await;
    assert_eq!(ids(&markdown), vec![strong.clone()]);
    assert!(markdown["rendered"].as_str().unwrap().contains("**tea**"));
    let tight = s
        .ok(
            "inject",
            json!({"persona_id": "ada", "query_embedding": query, "max_chars": 16}),
        )
        .await;
    assert_eq!(
        ids(&tight),
        vec![weak],
        "only the 15-char opinion fits 16 characters"
    );

    // The same embedding as base64 of its little-endian bytes: the same answer.
    use base64::Engine;
    let bytes: Vec<u8> = query.iter().flat_map(|f| f.to_le_bytes()).collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let packed = s
        .ok(
            "inject",
            json!({"persona_id": "ada", "query_embedding": encoded, "active_user_ids": ["carol"], "format": "xml"}),
        )
        .await;
    assert_eq!(ids(&packed), ids(&reply));
    // Not base64, not whole floats, or the wrong number of them: refused, saying which.
    let short = base64::engine::general_purpose::STANDARD.encode(&bytes[..bytes.len() - 4]);
    for (embedding, kind, says) in [
        ("not base64!".to_string(), "malformed", "not base64"),
        (
            base64::engine::general_purpose::STANDARD.encode(&bytes[..6]),
            "malformed",
            "whole number",
        ),
        (short, "wrong_dims", "383"),
    ] {
        let (status, body) = s
            .call(
                "inject",
                json!({"persona_id": "ada", "query_embedding": embedding}),
            )
            .await;
        assert_eq!(status, Some(400), "{body}");
        assert_eq!(body["error"]["kind"], kind, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn short_queries_skip_the_semantic_pass_and_explain_says_why() {
    let s = Service::start(test_config("injectshort")).await;
    let embed = |text: &str| {
        let embedder = s.app.embedder.clone();
        let text = text.to_string();
        async move { embedder.embed(&[text]).await.unwrap().remove(0) }
    };
    let chess = s
        .seed(
            "ada",
            "chess",
            "Chess with Carol is fun.",
            embed("chess").await,
            0.7,
            &["carol"],
        )
        .await;
    let okra = s
        .seed(
            "ada",
            "okra",
            "Okra is slimy.",
            embed("okra").await,
            0.9,
            &[],
        )
        .await;

    for query in ["", "ok", "hmm, ok... thanks!", "  ?! "] {
        let reply = s
            .ok(
                "inject",
                json!({"persona_id": "ada", "query": query, "active_user_ids": ["carol"], "format": "xml", "explain": true}),
            )
            .await;
        assert_eq!(
            ids(&reply),
            vec![chess.clone()],
            "{query:?}: only the present user's"
        );
        assert!(reply["semantic_skipped"].is_string(), "{query:?}: {reply}");
        let rendered = reply["rendered"].as_str().unwrap();
        assert!(
            rendered.contains(r#"why="about carol, who is in the conversation""#),
            "{rendered}"
        );
    }
    // Without a present user, a short query injects nothing rather than noise.
    let nothing = s
        .ok("inject", json!({"persona_id": "ada", "query": "ok"}))
        .await;
    assert_eq!(ids(&nothing), Vec::<String>::new());
    // A real question runs the semantic pass, and says so by leaving the field out.
    let asked = s
        .ok(
            "inject",
            json!({"persona_id": "ada", "query": "what do you think of okra?", "format": "markdown", "explain": true, "resident": true, "max_count": 1}),
        )
        .await;
    assert!(asked.get("semantic_skipped").is_none(), "{asked}");
    assert_eq!(ids(&asked), vec![okra.clone()]);
    let rendered = asked["rendered"].as_str().unwrap();
    assert!(
        rendered.contains("(why: one of your strongest views; close to the conversation)"),
        "{rendered}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn inject_by_text_and_with_resident_preferences() {
    let s = Service::start(test_config("injecttext")).await;
    let embed = |text: &str| {
        let embedder = s.app.embedder.clone();
        let text = text.to_string();
        async move { embedder.embed(&[text]).await.unwrap().remove(0) }
    };
    let tea = s
        .seed(
            "ada",
            "green tea",
            "I love green tea.",
            embed("green tea").await,
            0.6,
            &[],
        )
        .await;
    let storms = s
        .seed(
            "ada",
            "thunderstorms",
            "I adore thunderstorms.",
            embed("thunderstorms").await,
            0.95,
            &[],
        )
        .await;
    let jazz = s
        .seed(
            "ada",
            "jazz",
            "Jazz is underrated.",
            embed("jazz").await,
            0.9,
            &[],
        )
        .await;

    let reply = s
        .ok(
            "inject",
            json!({"persona_id": "ada", "query": "what tea do you drink?", "max_count": 1}),
        )
        .await;
    assert_eq!(
        ids(&reply),
        vec![tea.clone()],
        "the text query found its topic"
    );
    let again = s
        .ok(
            "inject",
            json!({"persona_id": "ada", "query": "what tea do you drink?", "max_count": 1}),
        )
        .await;
    assert_eq!(
        ids(&again),
        vec![tea.clone()],
        "a cached query embeds the same"
    );

    // Residents (the service's resident_count, 3 here) count against max_count: with 2, the
    // two strongest fill it and the query's result does not fit.
    let with_resident = s.ok("inject", json!({"persona_id": "ada", "query": "what tea do you drink?", "max_count": 2, "resident": true})).await;
    assert_eq!(ids(&with_resident), vec![storms.clone(), jazz.clone()]);
    let resident = &with_resident["preferences"][1];
    assert_eq!(resident["matched_by"], json!(["resident"]));
    assert!(
        with_resident["rendered"]
            .as_str()
            .unwrap()
            .contains("thunderstorms")
    );
    // With room for all three, the tea the query found is a resident too: listed once, with
    // both reasons.
    let roomy = s.ok("inject", json!({"persona_id": "ada", "query": "what tea do you drink?", "max_count": 5, "resident": true})).await;
    assert_eq!(ids(&roomy), vec![storms.clone(), jazz.clone(), tea.clone()]);
    assert_eq!(
        roomy["preferences"][2]["matched_by"],
        json!(["resident", "semantic"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_request_gets_a_typed_error_reply() {
    let mut config = test_config("errors");
    config.nats.max_payload_bytes = 64 * 1024;
    let s = Service::start(config).await;
    let good = unit_vector(1);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("inject", b"{not json".to_vec(), 400, "malformed"),
        (
            "list",
            serde_json::to_vec(&json!({"persona_id": "ada", "category": ""})).unwrap(),
            400,
            "invalid",
        ),
        ("inject", vec![0xff, 0xfe], 400, "malformed"),
        (
            "inject",
            serde_json::to_vec(
                &json!({"persona_id": "ada", "query_embedding": good, "colour": "red"}),
            )
            .unwrap(),
            400,
            "malformed",
        ),
        (
            "inject",
            serde_json::to_vec(&json!({"persona_id": "ada", "query_embedding": [0.1, 0.2]}))
                .unwrap(),
            400,
            "wrong_dims",
        ),
        (
            "inject",
            serde_json::to_vec(
                &json!({"persona_id": "ada", "query_embedding": good, "format": "yaml"}),
            )
            .unwrap(),
            400,
            "malformed",
        ),
        (
            "inject",
            serde_json::to_vec(&json!({"persona_id": "ada"})).unwrap(),
            400,
            "malformed",
        ),
        (
            "inject",
            serde_json::to_vec(&json!({"persona_id": "a.b", "query": "tea"})).unwrap(),
            400,
            "invalid",
        ),
        (
            "inject",
            serde_json::to_vec(&json!({"query": "tea"})).unwrap(),
            400,
            "malformed",
        ),
        (
            "inject",
            serde_json::to_vec(
                &json!({"persona_id": "ada", "query_embedding": good, "max_count": 0}),
            )
            .unwrap(),
            400,
            "invalid",
        ),
        ("inject", vec![b' '; 70 * 1024], 400, "oversize"),
        (
            "get",
            serde_json::to_vec(&json!({"persona_id": "ada", "preference_id": "nope"})).unwrap(),
            404,
            "not_found",
        ),
        (
            "reinforce",
            serde_json::to_vec(&json!({"persona_id": "ada", "preference_id": "nope"})).unwrap(),
            404,
            "not_found",
        ),
        (
            "list",
            serde_json::to_vec(&json!({"persona_id": "ada", "limit": 0})).unwrap(),
            400,
            "invalid",
        ),
        (
            "search",
            serde_json::to_vec(&json!({"persona_id": "ada", "query": ""})).unwrap(),
            400,
            "invalid",
        ),
    ];
    for (endpoint, payload, status, kind) in cases {
        let (got, body) = s.call_raw(endpoint, payload).await;
        assert_eq!(got, Some(status), "{endpoint}: {body}");
        assert_eq!(body["error"]["code"], status);
        assert_eq!(body["error"]["kind"], kind, "{endpoint}: {body}");
        assert!(!body["error"]["message"].as_str().unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn administration_mirrors_the_original_tools() {
    let s = Service::start(test_config("admin")).await;
    let added = s
        .ok("add", json!({"persona_id": "ada", "name": "green tea", "opinion": "I love green tea.", "category": "culinary",
                          "stance": "for", "triggering_user_id": "u1", "related_user_ids": ["u1"]}))
        .await;
    let id = added["id"].as_str().unwrap().to_string();
    s.assert_stored_as_ingest_stores("ada", "green tea").await;
    let got = s
        .ok("get", json!({"persona_id": "ada", "preference_id": id}))
        .await;
    assert_eq!(got["opinion"], "I love green tea.");
    assert_eq!(
        s.call("get", json!({"persona_id": "bob", "preference_id": id}))
            .await
            .0,
        Some(404),
        "another persona's id is not found"
    );

    let reinforced = s
        .ok(
            "reinforce",
            json!({"persona_id": "ada", "preference_id": id}),
        )
        .await;
    assert_eq!(reinforced["reinforcement_count"], 1);
    let evolved = s
        .ok("evolve", json!({"persona_id": "ada", "preference_id": id, "new_opinion": "Green tea is too grassy now.", "reason": "tasted better", "new_stance": "against"}))
        .await;
    assert_eq!(evolved["evolutions"], 1);
    s.assert_stored_as_ingest_stores("ada", "green tea").await;
    let found = s
        .ok("search", json!({"persona_id": "ada", "query": "green tea"}))
        .await;
    assert_eq!(found[0]["id"], id.as_str());
    assert!(found[0]["similarity"].as_f64().unwrap() > 0.9);
    let stats = s.ok("stats", json!({"persona_id": "ada"})).await;
    assert_eq!(
        (stats["total"].as_u64(), stats["active"].as_u64()),
        (Some(1), Some(1))
    );

    s.ok(
        "retract",
        json!({"persona_id": "ada", "preference_id": id, "reason": "no longer sure"}),
    )
    .await;
    assert_eq!(s.ok("list", json!({"persona_id": "ada"})).await, json!([]));
    let all = s
        .ok(
            "list",
            json!({"persona_id": "ada", "include_retracted": true}),
        )
        .await;
    assert_eq!(all[0]["active"], false);
    assert_eq!(all[0]["evolution_history"].as_array().unwrap().len(), 2);
}

/// Keyword search finds the words of a long question that its embedding drowns; hybrid blends
/// both (0.7 similarity + 0.3 keyword) so the named thing comes first. Without a full-text
/// index (the default, and a cluster) the service ranks the persona's records itself.
#[tokio::test(flavor = "multi_thread")]
async fn keyword_and_hybrid_search_find_the_words_of_the_query() {
    keyword_and_hybrid_search(test_config("keyword")).await;
}

/// The same answers with the full-text index kept (`redis.text_index`).
#[tokio::test(flavor = "multi_thread")]
async fn keyword_search_asks_the_full_text_index_when_one_is_kept() {
    let mut config = test_config("keywordindex");
    config.redis.text_index = true;
    keyword_and_hybrid_search(config).await;
}

/// Calls of the named commands since the server started (`INFO commandstats`; names in any
/// case).
async fn command_calls(
    connection: &mut persona_prefs::store::RedisConnection,
    names: &[&str],
) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            names
                .iter()
                .any(|n| n.eq_ignore_ascii_case(name))
                .then_some(stats)
        })
        .filter_map(|stats| {
            stats
                .split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

async fn keyword_and_hybrid_search(config: persona_prefs::config::Config) {
    let asks_the_index = config.redis.text_index && config.redis.cluster_nodes.is_empty();
    let s = Service::start(config).await;
    let full_text_searches = || {
        let mut connection = s.app.store.connection();
        async move { command_calls(&mut connection, &["ft.search"]).await }
    };
    // Counted on a single node only: a cluster connection answers INFO per node.
    let searches_before = if asks_the_index {
        full_text_searches().await
    } else {
        0
    };
    let zorblax = s
        .seed(
            "ada",
            "zorblax",
            "The band Zorblax makes the best synth music.",
            unit_vector(11),
            0.7,
            &[],
        )
        .await;
    s.seed(
        "ada",
        "green tea",
        "I love green tea.",
        unit_vector(12),
        0.7,
        &[],
    )
    .await;
    s.seed("ada", "rain", "Rain is calming.", unit_vector(13), 0.7, &[])
        .await;
    let query = "what do you make of the new Zorblax album?";

    let keyword = s
        .ok(
            "search",
            json!({"persona_id": "ada", "query": query, "mode": "keyword"}),
        )
        .await;
    let keyword = keyword.as_array().unwrap();
    assert_eq!(
        keyword.len(),
        1,
        "only the record with those words: {keyword:?}"
    );
    assert_eq!(keyword[0]["id"], zorblax.as_str());
    assert_eq!(keyword[0]["keyword"], 1.0);
    assert_eq!(keyword[0]["relevance"], 1.0);
    if asks_the_index {
        assert!(
            full_text_searches().await > searches_before,
            "with redis.text_index on, keyword search asks the index"
        );
    }

    let hybrid = s
        .ok(
            "search",
            json!({"persona_id": "ada", "query": query, "mode": "hybrid"}),
        )
        .await;
    let hybrid = hybrid.as_array().unwrap();
    assert_eq!(hybrid.len(), 3);
    assert_eq!(hybrid[0]["id"], zorblax.as_str());
    assert!(hybrid[1].get("keyword").is_none(), "{:?}", hybrid[1]);
    let relevance = |hit: &Value| hit["relevance"].as_f64().unwrap();
    assert!(relevance(&hybrid[0]) >= relevance(&hybrid[1]));

    let only_stop_words = s
        .ok(
            "search",
            json!({"persona_id": "ada", "query": "the and of it", "mode": "keyword"}),
        )
        .await;
    assert_eq!(only_stop_words, json!([]), "no word to search, no hits");

    let semantic = s
        .ok("search", json!({"persona_id": "ada", "query": query}))
        .await;
    assert!(
        semantic
            .as_array()
            .unwrap()
            .iter()
            .all(|hit| hit.get("keyword").is_none())
    );
    let (status, _) = s
        .call(
            "search",
            json!({"persona_id": "ada", "query": query, "mode": "fuzzy"}),
        )
        .await;
    assert_eq!(status, Some(400));
}

/// A reply larger than the NATS server accepts would never arrive; the requester gets an error
/// that says to ask for less instead of waiting for a timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_reply_too_large_for_nats_is_an_error_not_silence() {
    let s = Service::start(test_config("bigreply")).await;
    let long = "I have a great deal to say about this. ".repeat(100);
    let names: Vec<String> = (0..300).map(|n| format!("topic {n}")).collect();
    let seeds = names
        .iter()
        .enumerate()
        .map(|(n, name)| s.seed("ada", name, &long, unit_vector(1000 + n as u64), 0.5, &[]));
    futures::future::join_all(seeds).await;
    let (status, reply) = s
        .call("list", json!({"persona_id": "ada", "limit": 1000}))
        .await;
    assert_eq!(status, Some(400), "{reply}");
    assert_eq!(reply["error"]["kind"], "reply_too_large");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ask for fewer")
    );
    let fewer = s
        .ok("list", json!({"persona_id": "ada", "limit": 50}))
        .await;
    assert_eq!(fewer.as_array().unwrap().len(), 50);
}

/// Erasure reaches JetStream: events the worker has settled and dead letters that name the
/// user are erased; an event still to be processed is left (it carries others' words too),
/// teaches nothing from what the persona said to the erased user when processed, and is
/// erased by the worker once settled.
#[tokio::test(flavor = "multi_thread")]
async fn purge_user_erases_the_users_settled_events_and_dead_letters() {
    let config = test_config("purgestreams");
    let s = Service::start(config.clone()).await;
    s.app.consumer().await.unwrap();
    let publish = |payload: Value| {
        let js = s.app.js.clone();
        let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada");
        async move {
            js.publish(subject, serde_json::to_vec(&payload).unwrap().into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    let event = |id: &str, user: &str, said: &str, timestamp: &str| {
        json!({"event_id": id, "persona_id": "ada", "platform": "discord", "channel_id": "c1",
            "messages": [
                {"message_id": format!("{id}-0"), "role": "user", "user_id": user,
                 "content": "Well?", "timestamp": timestamp},
                {"message_id": format!("{id}-1"), "role": "persona", "content": said,
                 "timestamp": timestamp}]})
    };
    let purge = json!({"persona_id": "ada", "user_id": "u9", "pseudonym": "erased-u9"});

    // No worker yet: the event waits in the backlog, so it is left alone.
    publish(event(
        "e1",
        "u9",
        "I love green tea.",
        "2026-11-20T08:00:00Z",
    ))
    .await;
    let first = s.ok("purge_user", purge.clone()).await;
    assert_eq!(
        first["stored_events"]["pending"][0]["stream_sequence"], 1,
        "{first}"
    );
    assert!(
        first["stored_events"]["pending"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("not processed yet")
    );
    assert_eq!(
        first["stored_events"],
        json!({"events_erased": 0, "events_pending": 1, "dead_letters_erased": 0,
            "pending": first["stored_events"]["pending"]})
    );

    // A worker settles it (learning nothing from it), another user's event, and a letter.
    let running = common::Running::worker(config.clone()).await;
    publish(event(
        "e2",
        "u2",
        "Honestly, jazz is underrated.",
        "2026-11-20T08:05:00Z",
    ))
    .await;
    publish(event("e3", "u9", "I adore storms.", "yesterday")).await;
    running.drain().await;
    let names: Vec<String> = s
        .ok("list", json!({"persona_id": "ada"}))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        vec!["jazz"],
        "nothing learnt from u9's earlier conversation"
    );
    // Once settled, the worker erases the event that was pending at the erasure (just after
    // acking it, so it may take a moment).
    let events_stream = s.app.js.get_stream(&config.ingest.stream).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while events_stream.get_raw_message(1).await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "e1 was never erased");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // e3 is left, twice over: the event it was, and the dead letter it became.
    let second = s.ok("purge_user", purge.clone()).await;
    assert_eq!(
        second["stored_events"],
        json!({"events_erased": 1, "events_pending": 0, "dead_letters_erased": 1, "pending": []})
    );
    let remaining = |stream: String| {
        let js = s.app.js.clone();
        async move {
            let stream = js.get_stream(&stream).await.unwrap();
            let last = stream.get_info().await.unwrap().state.last_sequence;
            let mut payloads = Vec::new();
            for sequence in 1..=last {
                if let Ok(message) = stream.get_raw_message(sequence).await {
                    payloads.push(String::from_utf8_lossy(&message.payload).into_owned());
                }
            }
            payloads
        }
    };
    let events = remaining(config.ingest.stream.clone()).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].contains("\"u2\""), "{events:?}");
    assert_eq!(
        remaining(config.ingest.dlq_stream.clone()).await,
        Vec::<String>::new()
    );

    let third = s.ok("purge_user", purge).await;
    assert_eq!(
        third["stored_events"],
        json!({"events_erased": 0, "events_pending": 0, "dead_letters_erased": 0, "pending": []}),
        "a repeat finds nothing left"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn purge_user_pseudonymises_and_retracts_what_only_they_evidenced() {
    let s = Service::start(test_config("purge")).await;
    let only_u1 = s
        .seed(
            "ada",
            "u1's jokes",
            "u1 tells the best jokes.",
            unit_vector(1),
            0.7,
            &["u1"],
        )
        .await;
    let shared = s
        .seed(
            "ada",
            "chess",
            "Chess is fascinating.",
            unit_vector(2),
            0.7,
            &["u2"],
        )
        .await;
    // u1 also reinforced the chess opinion, but u2 started it: u1 is not its only evidence.
    s.app
        .store
        .reinforce_preference_from(
            "ada",
            &shared,
            &Provenance {
                triggering_user_id: "u1".into(),
                triggering_message_id: "m-u1".into(),
                persona_message_id: "m-ada".into(),
                source_platform: "discord".into(),
                source_channel_id: "c1".into(),
            },
            Default::default(),
        )
        .await
        .unwrap();
    let untouched = s
        .seed(
            "ada",
            "rain",
            "Rain is calming.",
            unit_vector(3),
            0.7,
            &["u3"],
        )
        .await;

    let report = s
        .ok(
            "purge_user",
            json!({"persona_id": "ada", "user_id": "u1", "pseudonym": "erased-1"}),
        )
        .await;
    assert_eq!(report["retracted"], json!([only_u1]));
    let mut rewritten: Vec<String> = serde_json::from_value(report["rewritten"].clone()).unwrap();
    rewritten.sort();
    let mut expected = vec![only_u1.clone(), shared.clone()];
    expected.sort();
    assert_eq!(rewritten, expected);

    let all = s
        .ok(
            "list",
            json!({"persona_id": "ada", "include_retracted": true}),
        )
        .await;
    assert!(
        !all.to_string().contains("\"u1\""),
        "the user id is gone everywhere: {all}"
    );
    let chess = s
        .ok("get", json!({"persona_id": "ada", "preference_id": shared}))
        .await;
    assert_eq!(chess["active"], true);
    assert_eq!(chess["evidence_user_ids"], json!(["u2", "erased-1"]));
    let logged = &chess["reinforcements"][0];
    assert_eq!(logged["triggering_user_id"], "erased-1");
    assert_eq!(
        logged["persona_message_id"], "m-ada",
        "only the user is replaced"
    );
    let jokes = s
        .ok(
            "get",
            json!({"persona_id": "ada", "preference_id": only_u1}),
        )
        .await;
    assert_eq!(jokes["active"], false);
    assert_eq!(jokes["related_user_ids"], json!(["erased-1"]));
    assert_eq!(jokes["triggering_user_id"], "erased-1");
    let rain = s
        .ok(
            "get",
            json!({"persona_id": "ada", "preference_id": untouched}),
        )
        .await;
    assert_eq!(rain["related_user_ids"], json!(["u3"]));
    // The user-pass of injection no longer finds them under the old id.
    let reply = s.ok("inject", json!({"persona_id": "ada", "query_embedding": unit_vector(9), "active_user_ids": ["u1"], "max_count": 8})).await;
    assert!(
        reply["preferences"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["matched_by"] != json!(["user:u1"]))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_is_discoverable_and_replicas_share_a_queue_group() {
    let s = Service::start(test_config("discover")).await;
    let (stop, stopped) = watch::channel(false);
    let replica = s.app.serve(stopped).await.unwrap();
    let name = s.app.config.serve.service_name.clone();
    let info = s
        .app
        .nats
        .request(format!("$SRV.INFO.{name}"), "".into())
        .await
        .unwrap();
    let info: Value = serde_json::from_slice(&info.payload).unwrap();
    let subjects: Vec<&str> = info["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["subject"].as_str().unwrap())
        .collect();
    assert!(
        subjects.contains(
            &"persona.prefs.read.inject.default.*"
                .replace("persona.prefs", &s.app.config.serve.subject_prefix)
                .as_str()
        ) && subjects.contains(
            &format!(
                "{}.erase.purge_user.default.*",
                s.app.config.serve.subject_prefix
            )
            .as_str()
        ),
        "{subjects:?}"
    );
    assert_eq!(
        info["endpoints"][0]["queue_group"],
        s.app.config.serve.queue_group.as_str()
    );

    for _ in 0..40 {
        s.ok("stats", json!({"persona_id": "ada"})).await;
    }
    // Error replies keep their JSON body and count as errors in $SRV.STATS.
    for n in 0..10 {
        let (status, body) = s
            .call(
                "get",
                json!({"persona_id": "ada", "preference_id": format!("missing-{n}")}),
            )
            .await;
        assert_eq!(status, Some(404));
        assert_eq!(body["error"]["kind"], "not_found", "{body}");
    }
    // Each replica answers $SRV.STATS; both must have served some of the 40 requests.
    let inbox = s.app.nats.new_inbox();
    let mut replies = s.app.nats.subscribe(inbox.clone()).await.unwrap();
    s.app
        .nats
        .publish_with_reply(format!("$SRV.STATS.{name}"), inbox, "".into())
        .await
        .unwrap();
    let mut served = Vec::new();
    let mut failed = Vec::new();
    for _ in 0..2 {
        let message = tokio::time::timeout(
            Duration::from_secs(5),
            futures::StreamExt::next(&mut replies),
        )
        .await
        .unwrap()
        .unwrap();
        let stats: Value = serde_json::from_slice(&message.payload).unwrap();
        let stats_endpoint = stats["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "stats")
            .unwrap()
            .clone();
        served.push(stats_endpoint["num_requests"].as_u64().unwrap());
        assert_eq!(stats_endpoint["num_errors"], 0, "{stats}");
        let get = stats["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "get")
            .unwrap();
        assert_eq!(get["num_errors"], get["num_requests"], "{stats}");
        failed.push(get["num_errors"].as_u64().unwrap());
        if get["num_errors"] != 0 {
            assert_eq!(get["last_error"], "404:preference not found", "{stats}");
        }
    }
    assert_eq!(
        failed.iter().sum::<u64>(),
        10,
        "every error reply counted once"
    );
    assert_eq!(served.iter().sum::<u64>(), 40);
    assert!(
        served.iter().all(|n| *n > 0),
        "both replicas served requests: {served:?}"
    );
    let _ = stop.send(true);
    replica.stop().await;
}

/// A Redis + RediSearch server of the test's own (from the binaries scripts/services unpacked),
/// for tests that kill it or read its global command statistics. Killed on drop.
struct PrivateRedis {
    process: std::process::Child,
    url: String,
}

impl PrivateRedis {
    fn start() -> PrivateRedis {
        let (Ok(server), Ok(module)) = (
            std::env::var("PERSONA_PREFS_REDIS_SERVER"),
            std::env::var("PERSONA_PREFS_REDISEARCH_MODULE"),
        ) else {
            panic!(
                "PERSONA_PREFS_REDIS_SERVER / PERSONA_PREFS_REDISEARCH_MODULE unset: run through scripts/test"
            );
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let process = std::process::Command::new(server)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--loadmodule",
                &module,
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        PrivateRedis {
            process,
            url: format!("redis://127.0.0.1:{port}"),
        }
    }

    /// Starts the app against this Redis once it answers.
    /// An app on this private single-node Redis (also when the suite runs on a cluster).
    async fn app(&self, config: &mut Config) -> App {
        config.redis.url = self.url.clone();
        config.redis.cluster_nodes.clear();
        for _ in 0..100 {
            if let Ok(app) = App::start(config.clone()).await {
                return app;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("private redis did not start");
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A Redis of the test's own, killed mid-test: requests get 503, not silence.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_redis_is_a_503() {
    let mut redis = PrivateRedis::start();
    let mut config = test_config("down503");
    config.redis.response_timeout_ms = 500;
    let app = redis.app(&mut config).await;
    let (_stop, stopped) = watch::channel(false);
    let services = app.serve(stopped).await.unwrap();
    redis.process.kill().unwrap();
    redis.process.wait().unwrap();
    let subject = persona_prefs::serve::Endpoint::Stats.subject(
        &config.serve.subject_prefix,
        &config.serve.tenant,
        "ada",
    );
    let reply = tokio::time::timeout(
        Duration::from_secs(20),
        app.nats.request(
            subject,
            serde_json::to_vec(&json!({"persona_id": "ada"}))
                .unwrap()
                .into(),
        ),
    )
    .await
    .expect("a reply, not silence")
    .unwrap();
    assert_eq!(common::service_error_code(&reply), Some(503));
    let body: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(body["error"]["kind"], "unavailable");
    services.stop().await;
    common::cleanup_nats(&config);
}

/// The fast read path: an injection is one round trip to Redis (the persona's vector search,
/// one of each present user's own set, and beside them plain commands saying which users' sets
/// are whole and naming the bases, or the injection script where it is needed: residents, or
/// a user without a whole set; its passes read only the persona's own structures; no index
/// query), counted by the server itself.
#[tokio::test(flavor = "multi_thread")]
async fn injection_with_an_embedding_is_one_round_trip_and_no_index_query() {
    let redis = PrivateRedis::start();
    let mut config = test_config("twoqueries");
    let app = redis.app(&mut config).await;
    let (_stop, stopped) = watch::channel(false);
    let services = app.serve(stopped).await.unwrap();
    let query = unit_vector(1);
    let mut seeded = NewPreference {
        persona_id: "ada".into(),
        name: "tea".into(),
        opinion: "I love tea.".into(),
        category: "culinary".into(),
        stance: Some(Stance::For),
        stance_at: None,
        strength: Some(0.8),
        provenance: Provenance::default(),
        related_user_ids: vec!["u1".into()],
        related_kg_uuids: Vec::new(),
        embedding: vector_near(&query, 0.9, 2),
        inherited_from: None,
    };
    app.store.add_preference(seeded.clone()).await.unwrap();
    seeded.related_user_ids.clear();
    app.store.add_preference(seeded).await.unwrap();

    let mut connection = app.store.connection();
    // Calls per command since start-up: (client commands, FT.SEARCH, VSIM).
    let calls = |connection: &mut persona_prefs::store::RedisConnection| {
        let mut connection = connection.clone();
        async move {
            (
                command_calls(&mut connection, &["evalsha", "eval", "script|load"]).await,
                command_calls(&mut connection, &["ft.search"]).await,
                command_calls(&mut connection, &["vsim"]).await,
            )
        }
    };
    let subject = persona_prefs::serve::Endpoint::Inject.subject(
        &config.serve.subject_prefix,
        &config.serve.tenant,
        "ada",
    );
    let request = |body: &Value| {
        let nats = app.nats.clone();
        let subject = subject.clone();
        let payload = serde_json::to_vec(body).unwrap();
        async move { nats.request(subject, payload.into()).await.unwrap() }
    };
    // The first request with residents loads the script.
    request(&json!({"persona_id": "ada", "query_embedding": query, "resident": true})).await;
    // One vector search over the persona, and one of u1's own set (`USER_SET_MIN` is 1): no
    // script but for the residents, whom only it walks to.
    for body in [
        json!({"persona_id": "ada", "query_embedding": query}),
        json!({"persona_id": "ada", "query_embedding": query, "active_user_ids": ["u1", "u2"]}),
        json!({"persona_id": "ada", "query_embedding": query, "active_user_ids": ["u1"], "resident": true}),
    ] {
        let (scripts_before, searches_before, vsim_before) = calls(&mut connection).await;
        let reply = app
            .nats
            .request(subject.clone(), serde_json::to_vec(&body).unwrap().into())
            .await
            .unwrap();
        assert!(
            reply.headers.is_none(),
            "{}",
            String::from_utf8_lossy(&reply.payload)
        );
        let body_text = String::from_utf8_lossy(&reply.payload);
        assert!(body_text.contains("I love tea."), "{body_text}");
        let (scripts, searches, vsim) = calls(&mut connection).await;
        let script_calls = u64::from(body["resident"] == true);
        assert_eq!(
            scripts - scripts_before,
            script_calls,
            "script calls: {body}"
        );
        assert_eq!(searches - searches_before, 0, "no index query: {body}");
        // The persona's set, and each present user's own set (searched whatever it holds:
        // a missing one is a key lookup; the script says which searches count).
        let users = body["active_user_ids"].as_array().map_or(0, Vec::len) as u64;
        assert_eq!(
            vsim - vsim_before,
            1 + users,
            "one vector search, and one a present user: {body}"
        );
    }
    // A server that has forgotten its scripts (restarted, or a replica promoted since the
    // script was loaded) is given the script again, and the request still succeeds.
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut connection)
        .await
        .unwrap();
    let loads_before = command_calls(&mut connection, &["script|load"]).await;
    let reply = request(&json!({"persona_id": "ada", "query_embedding": query,
        "active_user_ids": ["u1"], "resident": true}))
    .await;
    let body_text = String::from_utf8_lossy(&reply.payload);
    assert!(reply.headers.is_none(), "{body_text}");
    assert!(body_text.contains("I love tea."), "{body_text}");
    assert_eq!(
        command_calls(&mut connection, &["script|load"]).await - loads_before,
        1,
        "the script loaded once more"
    );
    services.stop().await;
    common::cleanup_nats(&config);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_example_client_gets_a_rendered_block() {
    let s = Service::start(test_config("python")).await;
    let embedding = s
        .app
        .embedder
        .embed(&["green tea".to_string()])
        .await
        .unwrap()
        .remove(0);
    s.seed("ada", "green tea", "I love green tea.", embedding, 0.8, &[])
        .await;
    let pythonpath = std::env::var("PERSONA_PREFS_PYTHONPATH")
        .expect("run through scripts/test (installs nats-py)");
    let run = |persona: &'static str| {
        let prefix = s.app.config.serve.subject_prefix.clone();
        let nats_url = s.app.config.nats.url.clone();
        let pythonpath = pythonpath.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new("python3")
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/examples/inject_client.py"
                ))
                .args([persona, "what do you like to drink?"])
                .env("PYTHONPATH", pythonpath)
                .env("NATS_URL", nats_url)
                .env("PERSONA_PREFS_SUBJECT_PREFIX", prefix)
                .output()
                .unwrap()
        })
    };
    let output = run("ada").await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let reply: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        reply["rendered"]
            .as_str()
            .unwrap()
            .contains("I love green tea."),
        "{reply}"
    );
    let bad = run("not.valid").await.unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(error["error"]["code"], 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_role_has_its_own_subjects_and_the_old_ones_answer_only_while_enabled() {
    use persona_prefs::serve::Endpoint;
    use persona_prefs::serve::protocol::Role;
    let prefix = "persona.prefs";
    for (endpoint, subject) in [
        (Endpoint::Inject, "persona.prefs.read.inject.default.ada"),
        (Endpoint::Search, "persona.prefs.read.search.default.ada"),
        (Endpoint::Add, "persona.prefs.write.add.default.ada"),
        (Endpoint::Retract, "persona.prefs.write.retract.default.ada"),
        (
            Endpoint::PurgeUser,
            "persona.prefs.erase.purge_user.default.ada",
        ),
        (Endpoint::Personas, "persona.prefs.read.personas.default"),
    ] {
        assert_eq!(endpoint.subject(prefix, "default", "ada"), subject);
    }
    for role in Role::ALL {
        assert!(
            Endpoint::ALL.iter().any(|e| e.role() == role),
            "{role:?} has endpoints"
        );
    }

    let s = Service::start(test_config("legacy")).await;
    let legacy = Endpoint::Stats.legacy_subject(&s.app.config.serve.subject_prefix);
    let reply = s
        .app
        .nats
        .request(legacy.clone(), r#"{"persona_id": "ada"}"#.into())
        .await
        .expect("the old subject still answers");
    assert!(reply.headers.is_none(), "a success reply");

    let mut config = test_config("nolegacy");
    config.serve.legacy_subjects = false;
    let s = Service::start(config).await;
    s.ok("stats", json!({"persona_id": "ada"})).await;
    let legacy = Endpoint::Stats.legacy_subject(&s.app.config.serve.subject_prefix);
    let refused = s
        .app
        .nats
        .request(legacy, r#"{"persona_id": "ada"}"#.into())
        .await
        .expect_err("no one answers the old subject");
    assert_eq!(
        refused.kind(),
        async_nats::client::RequestErrorKind::NoResponders
    );
}

/// Erasure finishes wherever the ack floor is and whatever shape a stored event has: an event
/// the worker settled while an earlier one still waits (above the ack floor) is erased; the
/// waiting one is reported with why; a dead letter kept under the unknown subject, and one
/// whose user id is a number, are erased too.
#[tokio::test(flavor = "multi_thread")]
async fn purge_user_erases_above_the_ack_floor_unknown_letters_and_numeric_ids() {
    let fake = common::fake_openai::FakeOpenAi::start().await;
    // The first event's extraction hangs: it stays unsettled, holding the ack floor down.
    fake.respond_with(|_, body| {
        let prompt = body.to_string();
        let answer = common::fake_openai::Reply::opinions(json!([]));
        if prompt.contains("hangs") {
            common::fake_openai::Reply::Delay(Duration::from_secs(60), Box::new(answer))
        } else {
            answer
        }
    });
    let mut config = test_config("purgefloor");
    config.extract.kind = persona_prefs::extract::ExtractorKind::Llm;
    config.extract.llm.base_url = fake.base_url.clone();
    // Every message goes to the model: the gate would keep "This one hangs." (no opinion in it)
    // from the model, and the first event would settle at once.
    config.extract.llm.gate_min_score = 0.0;
    // At the end the hanging event is returned for redelivery at once.
    config.ingest.grace_period_ms = 200;
    let s = Service::start(config.clone()).await;
    let running = common::Running::worker(config.clone()).await;
    let publish = |subject: String, payload: Value| {
        let js = s.app.js.clone();
        async move {
            js.publish(subject, serde_json::to_vec(&payload).unwrap().into())
                .await
                .unwrap()
                .await
                .unwrap()
                .sequence
        }
    };
    let ada = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada");
    let event = |id: &str, said: &str| {
        json!({"event_id": id, "persona_id": "ada", "platform": "discord", "channel_id": "c1",
            "messages": [
                {"message_id": format!("{id}-0"), "role": "user", "user_id": "u9",
                 "content": "Well?", "timestamp": "2026-11-20T08:00:00Z"},
                {"message_id": format!("{id}-1"), "role": "persona", "content": said,
                 "timestamp": "2026-11-20T08:00:01Z"}]})
    };
    let waiting = publish(ada.clone(), event("e1", "This one hangs.")).await;
    let settled = publish(ada.clone(), event("e2", "This one is quick.")).await;
    // The second is settled while the first holds the ack floor below both.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while s
        .app
        .store
        .settled_events("ada", &[settled])
        .await
        .unwrap()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "e2 was never settled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut consumer = running.consumer.clone();
    let floor = consumer.info().await.unwrap().ack_floor.stream_sequence;
    assert!(floor < settled, "e2 is above the ack floor ({floor})");

    // A letter under the unknown subject (an odd event subject), and one with a numeric id.
    publish(format!("{ada}.odd"), event("e3", "Odd subject.")).await;
    let mut numeric = event("e4", "Numbers.");
    numeric["messages"][0]["user_id"] = json!(9);
    publish(ada.clone(), numeric).await;
    let dlq = s
        .app
        .js
        .get_stream(&config.ingest.dlq_stream)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while dlq.clone().info().await.unwrap().state.messages < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the letters never came"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let u9 = s
        .ok("purge_user", json!({"persona_id": "ada", "user_id": "u9"}))
        .await;
    let report = &u9["stored_events"];
    assert_eq!(report["events_erased"], 2, "e2, and e3's event: {u9}");
    assert_eq!(report["pending"][0]["stream_sequence"], waiting, "{u9}");
    assert_eq!(report["events_pending"], 1);
    assert_eq!(
        report["dead_letters_erased"], 1,
        "the unknown-subject letter: {u9}"
    );
    let numeric = s
        .ok("purge_user", json!({"persona_id": "ada", "user_id": "9"}))
        .await;
    assert_eq!(
        numeric["stored_events"]["dead_letters_erased"], 1,
        "the letter naming user 9 as a number: {numeric}"
    );
    let events = s.app.js.get_stream(&config.ingest.stream).await.unwrap();
    assert!(events.get_raw_message(settled).await.is_err(), "e2 is gone");
    assert!(events.get_raw_message(waiting).await.is_ok(), "e1 waits");
    assert_eq!(dlq.clone().info().await.unwrap().state.messages, 0);
    running.stop().await;
}

/// Curation writes go through the same persona lock as ingest and erasure (a busy persona is
/// a 503, not a race), and through the same secret redaction as ingest.
#[tokio::test(flavor = "multi_thread")]
async fn curation_takes_the_persona_lock_and_redacts_secrets() {
    let mut config = test_config("curation");
    config.store.lock_patience_ms = 200;
    let s = Service::start(config).await;
    let locks =
        persona_prefs::store::PersonaLock::new(s.app.store.clone(), Duration::from_secs(10));
    let held = locks.try_acquire("ada").await.unwrap().unwrap();
    let add = json!({"persona_id": "ada", "name": "tea",
        "opinion": "Tea is great, green tea above all, in the morning with a little honey and lemon. \
            Unrelated: sk-abcdefghijklmnopqrstuvwx."});
    let (status, busy) = s.call("add", add.clone()).await;
    assert_eq!(status, Some(503), "{busy}");
    assert!(busy["error"]["message"].as_str().unwrap().contains("busy"));
    locks.release(held).await.unwrap();

    let added = s.ok("add", add).await;
    let opinion = added["opinion"].as_str().unwrap();
    assert!(!opinion.contains("sk-abc"), "{opinion}");
    assert!(opinion.contains("[redacted]"), "{opinion}");
    let (status, refused) = s
        .call(
            "evolve",
            json!({"persona_id": "ada", "preference_id": added["id"],
                "new_opinion": "sk-abcdefghijklmnopqrstuvwxyz012345"}),
        )
        .await;
    assert_eq!(status, Some(400), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mostly secrets")
    );
}

/// A caller-chosen pseudonym that is already a user of the persona (or an erased one) is
/// refused: erasing u1 "as" u2 would merge u1's traces into u2's.
#[tokio::test(flavor = "multi_thread")]
async fn a_pseudonym_that_names_a_known_user_is_refused() {
    let s = Service::start(test_config("pseudonym")).await;
    s.seed(
        "ada",
        "u2's songs",
        "u2 sings well.",
        unit_vector(3),
        0.6,
        &["u2"],
    )
    .await;
    s.seed(
        "ada",
        "u1's jokes",
        "u1 is funny.",
        unit_vector(4),
        0.6,
        &["u1"],
    )
    .await;
    let (status, refused) = s
        .call(
            "purge_user",
            json!({"persona_id": "ada", "user_id": "u1", "pseudonym": "u2"}),
        )
        .await;
    assert_eq!(status, Some(400), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pseudonym")
    );
    let erased = s
        .ok(
            "purge_user",
            json!({"persona_id": "ada", "user_id": "u1", "pseudonym": "erased-1"}),
        )
        .await;
    assert_eq!(erased["pseudonym"], "erased-1");
    // An erased user's id is known too: it cannot become someone else's pseudonym.
    let (status, _) = s
        .call(
            "purge_user",
            json!({"persona_id": "ada", "user_id": "u2", "pseudonym": "u1"}),
        )
        .await;
    assert_eq!(status, Some(400));
}

/// Every request's subject names the persona it touches (`….<tenant>.<persona>`), and a body
/// naming another persona is refused: NATS permissions on subjects hold a client to its
/// personas, whatever the body says. Another tenant's subjects are not this service's.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_naming_another_persona_than_its_subject_is_refused() {
    let s = Service::start(test_config("scoped")).await;
    let ask = |subject: String, body: String| {
        let nats = s.app.nats.clone();
        async move { nats.request(subject, body.into()).await }
    };
    let added = s
        .ok(
            "add",
            json!({"persona_id": "bob", "name": "green tea", "opinion": "Green tea is lovely."}),
        )
        .await;
    let id = added["id"].as_str().unwrap().to_string();
    let user = json!({"role": "user", "user_id": "u1", "content": "tea?"});
    // Every endpoint about one persona, each body well formed and naming bob, sent to ada's
    // subject: refused, and nothing of bob's read or written.
    let table = [
        (
            "inject",
            json!({"persona_id": "bob", "query": "what do you think about tea?"}),
        ),
        (
            "check",
            json!({"persona_id": "bob", "draft": "I love tea.", "conversation": [user]}),
        ),
        (
            "add",
            json!({"persona_id": "bob", "name": "coffee", "opinion": "Coffee is fine."}),
        ),
        (
            "reinforce",
            json!({"persona_id": "bob", "preference_id": id}),
        ),
        (
            "evolve",
            json!({"persona_id": "bob", "preference_id": id, "new_opinion": "Tea is dull."}),
        ),
        ("retract", json!({"persona_id": "bob", "preference_id": id})),
        ("get", json!({"persona_id": "bob", "preference_id": id})),
        ("list", json!({"persona_id": "bob"})),
        ("stats", json!({"persona_id": "bob"})),
        ("search", json!({"persona_id": "bob", "query": "tea"})),
        ("purge_user", json!({"persona_id": "bob", "user_id": "u1"})),
        ("bases", json!({"persona_id": "bob"})),
        (
            "set_bases",
            json!({"persona_id": "bob", "bases": ["carol"]}),
        ),
        (
            "restore",
            json!({"persona_id": "bob", "preference_id": id, "version": 1}),
        ),
        ("consolidate", json!({"persona_id": "bob", "apply": true})),
        (
            "delete_persona",
            json!({"persona_id": "bob", "confirm": "bob"}),
        ),
    ];
    let mut expected: Vec<&str> = persona_prefs::serve::Endpoint::ALL
        .into_iter()
        .filter(|e| e.touches_one_persona())
        .map(|e| e.name())
        .collect();
    let mut listed: Vec<&str> = table.iter().map(|(endpoint, _)| *endpoint).collect();
    expected.sort();
    listed.sort();
    assert_eq!(
        listed, expected,
        "every endpoint about one persona is in the table"
    );
    for (endpoint, body) in table {
        let refused = ask(s.subject(endpoint, "ada"), body.to_string())
            .await
            .unwrap();
        assert_eq!(
            common::service_error_code(&refused),
            Some(400),
            "{endpoint}"
        );
        let body: Value = serde_json::from_slice(&refused.payload).unwrap();
        assert_eq!(body["error"]["kind"], "invalid", "{endpoint}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("\"bob\"") && message.contains("\"ada\""),
            "{endpoint}: {message}"
        );
    }
    let kept = s
        .ok("get", json!({"persona_id": "bob", "preference_id": id}))
        .await;
    assert_eq!(
        (
            &kept["active"],
            &kept["reinforcement_count"],
            &kept["opinion"]
        ),
        (&json!(true), &json!(0), &json!("Green tea is lovely.")),
        "bob's preference untouched: {kept}"
    );
    let stats = s.ok("stats", json!({"persona_id": "bob"})).await;
    assert_eq!(stats["total"], 1, "nothing added, nothing deleted: {stats}");
    let bases = s.ok("bases", json!({"persona_id": "bob"})).await;
    assert_eq!(bases["bases"], json!([]), "no bases set: {bases}");

    let answered = ask(
        s.subject("stats", "ada"),
        r#"{"persona_id": "ada"}"#.to_string(),
    )
    .await
    .unwrap();
    assert!(
        answered.headers.is_none(),
        "the persona's own subject answers"
    );

    let config = &s.app.config.serve;
    let elsewhere = persona_prefs::serve::Endpoint::Stats.subject(
        &config.subject_prefix,
        "another-tenant",
        "ada",
    );
    let nobody = ask(elsewhere, r#"{"persona_id": "ada"}"#.to_string())
        .await
        .unwrap_err();
    assert_eq!(
        nobody.kind(),
        async_nats::client::RequestErrorKind::NoResponders
    );
}

/// docs/PERMISSIONS.md's subject table is what operators copy into NATS permissions: it must
/// list exactly the endpoints the service announces, at exactly their subjects.
#[tokio::test(flavor = "multi_thread")]
async fn the_permissions_table_lists_exactly_the_subjects_the_service_announces() {
    let mut config = test_config("permissions_table");
    config.serve.legacy_subjects = false;
    let s = Service::start(config).await;
    let serve = &s.app.config.serve;
    let info = s
        .app
        .nats
        .request(format!("$SRV.INFO.{}", serve.service_name), "".into())
        .await
        .unwrap();
    let info: Value = serde_json::from_slice(&info.payload).unwrap();
    let mut announced: Vec<(String, String)> = info["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            // Back to the table's names: the default prefix, placeholders for tenant and persona.
            let subject = e["subject"].as_str().unwrap();
            let subject = subject
                .replacen(&serve.subject_prefix, "persona.prefs", 1)
                .replace(&format!(".{}.*", serve.tenant), ".<tenant>.<persona_id>");
            let subject = match subject.strip_suffix(&format!(".{}", serve.tenant)) {
                Some(unscoped) => format!("{unscoped}.<tenant>"),
                None => subject,
            };
            (e["name"].as_str().unwrap().to_string(), subject)
        })
        .collect();
    announced.sort();

    let table = std::fs::read_to_string("docs/PERMISSIONS.md").unwrap();
    let mut documented: Vec<(String, String)> = Vec::new();
    for row in table.lines().filter(|l| l.starts_with("| `persona.prefs.")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let pattern = cells[1].trim_matches('`');
        for name in cells[2].split('`').skip(1).step_by(2).map(str::to_string) {
            documented.push((name.clone(), pattern.replace("<endpoint>", &name)));
        }
    }
    documented.sort();
    assert_eq!(
        documented, announced,
        "docs/PERMISSIONS.md's table (left) against $SRV.INFO (right)"
    );
    assert_eq!(announced.len(), persona_prefs::serve::Endpoint::ALL.len());
}

/// Every administration write stores texts as ingest does: the same secrets, in every text a
/// curator can write (topic, opinion, a change of mind and its reason, the reasons of a
/// retraction and a restore), come back redacted, never as given.
#[tokio::test(flavor = "multi_thread")]
async fn every_administration_write_redacts_the_secrets_ingest_redacts() {
    let s = Service::start(test_config("redact_writes")).await;
    let secrets = [
        "sk-abcdefghijklmnopqrstuvwx",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "ada.lovelace@example.com",
        "password: hunter2hunter2",
        "Bearer abcdefghijklmnop.qrstu",
        "+44 20 7946 0958",
        "4111 1111 1111 1111",
    ];
    for (n, secret) in secrets.iter().enumerate() {
        // Each also goes through ingest's own redaction, which these must agree with.
        let (redacted, _) = persona_prefs::extract::redact::redact(secret);
        assert_eq!(redacted, "[redacted]", "ingest redacts {secret}");
        let added = s
            .ok(
                "add",
                json!({"persona_id": "ada", "name": format!("the morning tea ritual {n} with honey, lemon and toast, {secret}"),
                    "opinion": format!("Tea in the morning, with honey and lemon, is the best start; note {secret}")}),
            )
            .await;
        let id = added["id"].as_str().unwrap().to_string();
        s.ok(
            "evolve",
            json!({"persona_id": "ada", "preference_id": id,
                "new_opinion": format!("Coffee in the morning is a better start after all; {secret}"),
                "reason": format!("a long talk over breakfast about mornings, {secret}")}),
        )
        .await;
        s.ok(
            "retract",
            json!({"persona_id": "ada", "preference_id": id, "reason": format!("written by mistake during a test run, {secret}")}),
        )
        .await;
        s.ok(
            "restore",
            json!({"persona_id": "ada", "preference_id": id, "version": 1,
                "reason": format!("it was right after all, said the curator, {secret}")}),
        )
        .await;
        let stored = s
            .ok("get", json!({"persona_id": "ada", "preference_id": id}))
            .await
            .to_string();
        assert!(!stored.contains(secret), "{secret} stored: {stored}");
        assert!(
            stored.matches("[redacted]").count() >= 5,
            "{secret}: every text redacted: {stored}"
        );
    }
}
