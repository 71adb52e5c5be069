//! Taking over the original system's memory: its hashes and its index (case-insensitive ids,
//! vectors of another size; 8 dims stand in for its 3072) are refused at start-up with the
//! reason; `persona-prefs index migrate` rebuilds the index and re-embeds the topics; then the
//! worker reinforces the original preferences instead of duplicating them.

mod common;

use common::cli::{run, stderr, stdout};
use common::{Cleanup, test_config};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use persona_prefs::ingest::event::ConversationEvent;
use persona_prefs::ingest::pipeline::Action;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const ORIGINAL_DIMS: usize = 8;

/// Writes the original system's index and hashes, field for field as its `add_preference` did.
async fn write_original_memory(config: &Config) -> redis::aio::MultiplexedConnection {
    let mut connection = redis::Client::open(config.redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let prefix = format!("{}:persona_pref:", config.redis.key_prefix);
    let _: Value = redis::cmd("FT.CREATE")
        .arg(&config.redis.index_name)
        .arg(&["ON", "HASH", "PREFIX", "1"][..])
        .arg(&prefix)
        .arg(
            &[
                "SCHEMA",
                "persona_id",
                "TAG",
                "category",
                "TAG",
                "active",
                "TAG",
            ][..],
        )
        .arg(&["related_user_ids_index", "TAG", "strength", "NUMERIC"][..])
        .arg(&["embedding", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM"][..])
        .arg(ORIGINAL_DIMS)
        .arg(&["DISTANCE_METRIC", "COSINE"][..])
        .query_async(&mut connection)
        .await
        .map(|_: redis::Value| Value::Null)
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for (id, name, opinion, category) in [
        ("a1", "green tea", "I love green tea.", "culinary"),
        ("a2", "rainy days", "Rainy days are calming.", "nature"),
        ("a3", "jazz", "Jazz is underrated.", "musical"),
        (
            "a4",
            "",
            "A record the original wrote without a name.",
            "personal",
        ),
    ] {
        let vector: Vec<u8> = (0..ORIGINAL_DIMS)
            .flat_map(|_| rng.random_range(-1.0f32..1.0).to_le_bytes())
            .collect();
        let _: i64 = redis::cmd("HSET")
            .arg(format!("{prefix}stargazer:{id}"))
            .arg(
                &[
                    "id",
                    id,
                    "persona_id",
                    "stargazer",
                    "name",
                    name,
                    "opinion",
                    opinion,
                ][..],
            )
            .arg(
                &[
                    "category",
                    category,
                    "strength",
                    "0.5",
                    "triggering_user_id",
                    "42",
                ][..],
            )
            .arg(&["triggering_message_id", "m0", "source_platform", "discord"][..])
            .arg(&["source_channel_id", "c1", "related_user_ids", "[]"][..])
            .arg(&["related_user_ids_index", "", "related_kg_uuids", "[]"][..])
            .arg(&["evolution_history", "[]", "active", "1"][..])
            .arg(&["created_at", "2026-01-01T00:00:00+00:00"][..])
            .arg(&["last_reinforced", "2026-01-01T00:00:00+00:00"][..])
            .arg(&["reinforcement_count", "0", "embedding"][..])
            .arg(vector)
            .query_async(&mut connection)
            .await
            .unwrap();
    }
    connection
}

async fn migrate(config: &Config, extra: &[&str]) -> Value {
    let mut args = vec!["index", "migrate", "--json"];
    args.extend_from_slice(extra);
    let output = run(config, &args).await;
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_str(&stdout(&output)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_original_systems_memory_is_migrated_and_then_reinforced_not_duplicated() {
    let config = test_config("migrate");
    let _cleanup = Cleanup(config.clone());
    let mut connection = write_original_memory(&config).await;

    let refused = App::start(config.clone())
        .await
        .err()
        .expect("the original index does not fit")
        .to_string();
    assert!(refused.contains("not CASESENSITIVE"), "{refused}");
    assert!(refused.contains("DIM is 8"), "{refused}");

    let planned = migrate(&config, &["--dry-run"]).await;
    assert_eq!(planned["index_action"], "would rebuild");
    assert_eq!(planned["preferences"], 4);
    assert_eq!(planned["reembedded"], 3);
    assert_eq!(planned["without_topic"].as_array().unwrap().len(), 1);
    let untouched: i64 = redis::cmd("HSTRLEN")
        .arg(format!(
            "{}:persona_pref:stargazer:a1",
            config.redis.key_prefix
        ))
        .arg("embedding")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(
        untouched,
        (ORIGINAL_DIMS * 4) as i64,
        "a dry run writes nothing"
    );

    let done = migrate(&config, &[]).await;
    assert_eq!(done["index_action"], "rebuilt", "{done}");
    assert_eq!(done["reembedded"], 3);
    assert_eq!(done["indexed"], 3, "{done}");
    assert_eq!(
        done["indexing_failures"], 1,
        "the record without a topic keeps its old vector and stays out of the index: {done}"
    );

    // The worker starts, and the persona saying it again reinforces the original record.
    let app = App::start(config.clone()).await.unwrap();
    let event: ConversationEvent = serde_json::from_value(json!({
        "event_id": "after-migration", "persona_id": "stargazer", "platform": "discord",
        "channel_id": "c1",
        "messages": [{"message_id": "m9", "role": "persona", "content": "I love green tea.",
                      "timestamp": "2026-11-20T08:00:00Z"}]}))
    .unwrap();
    let outcome = app.pipeline().process(&event).await.unwrap();
    assert_eq!(outcome.decisions[0].action, Action::Reinforce);
    assert_eq!(outcome.decisions[0].preference_id, "a1");
    let tea = app
        .store
        .get_preference("stargazer", "a1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tea.reinforcement_count, 1);
    assert_eq!(tea.provenance.triggering_user_id, "42", "provenance kept");

    let again = migrate(&config, &[]).await;
    assert_eq!(again["index_action"], "kept");
    assert_eq!(again["reembedded"], 0, "a second run finds nothing to do");
}

/// Vectors of the wrong size written under a sound index (an embedder swapped without
/// migrating) fail to index; `status` warns, and a migration re-embeds them and rebuilds the
/// index so its failure count starts again from zero.
#[tokio::test(flavor = "multi_thread")]
async fn vectors_of_the_wrong_size_under_a_sound_index_are_re_embedded() {
    let config = test_config("migratekept");
    let _cleanup = Cleanup(config.clone());
    let store = persona_prefs::store::PreferenceStore::connect(&config.redis, &config.store)
        .await
        .unwrap();
    store.ensure_index().await.unwrap();
    // A new index first scans the keyspace in the background; a write racing that scan can be
    // indexed (and fail) twice, and RediSearch counts both failures.
    store
        .wait_until_indexed(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let mut connection = store.connection();
    for (id, name) in [("b1", "green tea"), ("b2", "jazz")] {
        let _: i64 = redis::cmd("HSET")
            .arg(format!("{}ada:{id}", store.hash_prefix()))
            .arg(&["id", id, "persona_id", "ada", "name", name, "opinion", name][..])
            .arg(&["category", "culinary", "strength", "0.5", "active", "1"][..])
            .arg("embedding")
            .arg(vec![0u8; ORIGINAL_DIMS * 4])
            .query_async(&mut connection)
            .await
            .unwrap();
    }
    let info = store
        .wait_until_indexed(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(info.hash_indexing_failures, 2);
    let status = run(&config, &["status", "--json", "--listen-ms", "100"]).await;
    assert!(
        stdout(&status).contains("could not be indexed"),
        "{}",
        stdout(&status)
    );

    let done = migrate(&config, &[]).await;
    assert_eq!(done["index_action"], "rebuilt", "{done}");
    assert_eq!(done["reembedded"], 2);
    assert_eq!(done["indexed"], 2);
    assert_eq!(done["indexing_failures"], 0);
    let again = migrate(&config, &[]).await;
    assert_eq!(again["index_action"], "kept", "{again}");
}
