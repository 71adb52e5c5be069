//! Taking over earlier memory: the original system's hashes and index (case-insensitive ids,
//! vectors of another size; 8 dims stand in for its 3072), and this service's own layout from
//! before persona slots, are refused at start-up with the reason; `persona-prefs index
//! migrate` moves every key into its persona's slot, rebuilds the index and re-embeds the
//! topics, in a run that can be cut short and run again; then the worker reinforces the
//! original preferences instead of duplicating them.
//!
//! `scripts/test` runs this suite on a Redis Cluster too. There is no shared index on a cluster
//! (RediSearch 2.10 has no coordinator), so the earlier layouts are written there as hashes
//! only, start-up refuses them by the layout record instead of by the index, and the report
//! shows no index to rebuild.

mod common;

use common::cli::{run, stderr, stdout};
use common::{Cleanup, test_config};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use persona_prefs::ingest::event::ConversationEvent;
use persona_prefs::ingest::pipeline::Action;
use persona_prefs::store::{ListOptions, Preference, PreferenceStore, RedisConnection};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const ORIGINAL_DIMS: usize = 8;

/// Writes the original system's index and hashes, field for field as its `add_preference` did.
async fn write_original_memory(config: &Config) -> RedisConnection {
    write_memory(config, "stargazer", ORIGINAL_DIMS, false).await
}

/// Writes an index and four hashes in the layout before persona slots: the original system's
/// (`dims` = its size, no CASESENSITIVE), or this service's own (`cased`).
async fn write_memory(config: &Config, persona: &str, dims: usize, cased: bool) -> RedisConnection {
    let mut connection = store(config).await.connection();
    let prefix = format!("{}:persona_pref:", config.redis.key_prefix);
    if on_cluster(config) {
        return write_hashes(connection, &prefix, persona, dims).await;
    }
    let _: Value = redis::cmd("FT.CREATE")
        .arg(&config.redis.index_name)
        .arg(&["ON", "HASH", "PREFIX", "1"][..])
        .arg(&prefix)
        .arg(&["SCHEMA", "persona_id", "TAG"][..])
        .arg(if cased {
            &["CASESENSITIVE"][..]
        } else {
            &[][..]
        })
        .arg(&["category", "TAG", "active", "TAG"][..])
        .arg(&["related_user_ids_index", "TAG", "strength", "NUMERIC"][..])
        .arg(&["embedding", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM"][..])
        .arg(dims)
        .arg(&["DISTANCE_METRIC", "COSINE"][..])
        .query_async(&mut connection)
        .await
        .map(|_: redis::Value| Value::Null)
        .unwrap();
    write_hashes(connection, &prefix, persona, dims).await
}

/// The four hashes of the earlier layouts, field for field.
async fn write_hashes(
    mut connection: RedisConnection,
    prefix: &str,
    persona: &str,
    dims: usize,
) -> RedisConnection {
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
        let vector: Vec<u8> = (0..dims)
            .flat_map(|_| rng.random_range(-1.0f32..1.0).to_le_bytes())
            .collect();
        let _: i64 = redis::cmd("HSET")
            .arg(format!("{prefix}{persona}:{id}"))
            .arg(
                &[
                    "id",
                    id,
                    "persona_id",
                    persona,
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

fn on_cluster(config: &Config) -> bool {
    !config.redis.cluster_nodes.is_empty()
}

/// The index step of a run with nothing to rebuild.
fn index_kept(config: &Config) -> &'static str {
    if on_cluster(config) {
        "none_on_cluster"
    } else if !config.redis.text_index {
        "off"
    } else {
        "kept"
    }
}

/// Whether the deployment keeps a full-text index (`redis.text_index`, single node).
fn indexes(config: &Config) -> bool {
    !on_cluster(config) && config.redis.text_index
}

async fn store(config: &Config) -> PreferenceStore {
    PreferenceStore::connect(&config.redis, &config.store)
        .await
        .unwrap()
}

/// Keys matching `pattern` on every master.
async fn keys_matching(config: &Config, pattern: &str) -> Vec<String> {
    store(config)
        .await
        .scan_every_master(pattern)
        .await
        .unwrap()
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
    // The original stored what it was given: a secret in an opinion, one in a past version.
    let _: i64 = redis::cmd("HSET")
        .arg(format!(
            "{}:persona_pref:stargazer:a2",
            config.redis.key_prefix
        ))
        .arg("opinion")
        .arg("Rainy days are calming, says ada@example.com.")
        .arg("evolution_history")
        .arg(
            json!([{"old_opinion": "Rain is dull; my api key is sk-abcdefghijklmnopqrstuvwx",
                    "new_opinion": "Rainy days are calming.", "reason": "a walk",
                    "timestamp": "2026-01-01T00:00:00+00:00"}])
            .to_string(),
        )
        .query_async(&mut connection)
        .await
        .unwrap();

    let refused = App::start(config.clone())
        .await
        .err()
        .expect("the original index does not fit")
        .to_string();
    assert!(refused.contains("index migrate"), "{refused}");
    if on_cluster(&config) {
        assert!(refused.contains("earlier layout"), "{refused}");
    } else {
        assert!(refused.contains("not CASESENSITIVE"), "{refused}");
        assert!(refused.contains("VECTOR field"), "{refused}");
    }

    let planned = migrate(&config, &["--dry-run"]).await;
    let cluster = on_cluster(&config);
    // The original's index is not one this deployment keeps (redis.text_index is off by
    // default): the migration drops it, hashes kept.
    assert_eq!(
        planned["index_action"],
        if cluster {
            "none_on_cluster"
        } else {
            "would_drop"
        }
    );
    assert_eq!(planned["moved"], 4, "{planned}");
    assert_eq!(planned["reembedded"], 3);
    assert_eq!(planned["without_topic"].as_array().unwrap().len(), 1);
    assert_eq!(
        planned["redacted"].as_array().unwrap().len(),
        1,
        "{planned}"
    );
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
    assert_eq!(
        done["index_action"],
        if cluster {
            "none_on_cluster"
        } else {
            "dropped"
        },
        "{done}"
    );
    assert_eq!(done["moved"], 4);
    assert_eq!(done["reembedded"], 3);
    assert_eq!(done["indexed"], 0, "no index is kept: {done}");
    assert!(
        store(&config)
            .await
            .existing_index()
            .await
            .unwrap()
            .is_none(),
        "the original's index is gone"
    );
    assert_eq!(done["indexing_failures"], 0, "{done}");
    assert_eq!(done["complete"], true);
    let left = keys_matching(
        &config,
        &format!("{}:persona_pref:stargazer:*", config.redis.key_prefix),
    )
    .await;
    assert!(
        left.is_empty(),
        "no key of the old layout is left: {left:?}"
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
    // Moved with the secrets replaced as ingest replaces them, past versions included.
    assert_eq!(done["redacted"].as_array().unwrap().len(), 1, "{done}");
    let rain = app
        .store
        .get_preference("stargazer", "a2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rain.opinion, "Rainy days are calming, says [redacted].");
    let past = serde_json::to_string(&rain.evolution_history).unwrap();
    assert!(
        !past.contains("sk-abc") && past.contains("[redacted]"),
        "{past}"
    );

    let again = migrate(&config, &[]).await;
    assert_eq!(again["index_action"], index_kept(&config));
    assert_eq!(again["moved"], 0);
    assert_eq!(again["reembedded"], 0, "a second run finds nothing to do");
}

/// This service's own layout before persona slots (keys without the hash tag, one key per
/// effect record, an erasure record, a VECTOR field in the shared index), migrated by a run
/// cut short after two preferences and then run again: nothing is lost, nothing doubled, and
/// exactly-once and erasure still hold across the move.
#[tokio::test(flavor = "multi_thread")]
async fn a_migration_cut_short_finishes_when_run_again() {
    // With the full-text index kept (redis.text_index): the earlier layout's is rebuilt.
    let mut config = test_config("migratesteps");
    config.redis.text_index = true;
    let _cleanup = Cleanup(config.clone());
    let mut connection = write_memory(&config, "ada", common::DIMS, true).await;
    let prefix = &config.redis.key_prefix;
    // An effect record (an event already applied) and an erasure record, as that build wrote
    // them: an erased user's digest is the same in every layout.
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}:persona_pref_effect:ada:discord:c1:m5#0"))
        .arg("a1")
        .arg("EX")
        .arg(3600)
        .query_async(&mut connection)
        .await
        .unwrap();
    let store = store(&config).await;
    let _: () = redis::cmd("HSET")
        .arg(format!("{prefix}:persona_pref_erased:ada"))
        .arg("not-a-real-digest")
        .arg(r#"{"pseudonym":"erased-1","erased_at":"2026-01-01T00:00:00Z"}"#)
        .query_async(&mut connection)
        .await
        .unwrap();

    let a1_vector: Vec<u8> = redis::cmd("HGET")
        .arg(format!("{prefix}:persona_pref:ada:a1"))
        .arg("embedding")
        .query_async(&mut connection)
        .await
        .unwrap();

    let first = migrate(&config, &["--max-moves", "2"]).await;
    assert_eq!(first["moved"], 2, "{first}");
    assert_eq!(first["complete"], false);
    assert_eq!(first["index_action"], "pending");
    let refused = App::start(config.clone())
        .await
        .err()
        .expect("keys of the earlier layout are left: start-up still refuses")
        .to_string();
    assert!(refused.contains("index migrate"), "{refused}");

    let second = migrate(&config, &[]).await;
    assert_eq!(second["moved"], 2, "the other two: {second}");
    assert_eq!(
        second["index_action"],
        if indexes(&config) {
            "rebuilt"
        } else {
            "none_on_cluster"
        },
        "{second}"
    );
    if indexes(&config) {
        assert_eq!(second["indexed"], 4, "{second}");
    }
    assert_eq!(second["effects_moved"], 1);
    assert_eq!(second["erasures_moved"], 1);
    assert_eq!(second["preferences"], 4);
    assert_eq!(second["personas"], 1);
    assert_eq!(second["complete"], true);
    assert_eq!(
        second["reembedded"], 0,
        "vectors of the configured size are kept: {second}"
    );
    let third = migrate(&config, &[]).await;
    assert_eq!(third["moved"], 0, "{third}");
    assert_eq!(third["index_action"], index_kept(&config));

    for pattern in [
        format!("{prefix}:persona_pref:ada:*"),
        format!("{prefix}:persona_pref_effect:*"),
        format!("{prefix}:persona_pref_erased:ada"),
    ] {
        let left = keys_matching(&config, &pattern).await;
        assert!(left.is_empty(), "{pattern}: {left:?}");
    }
    let erasures: Vec<String> = redis::cmd("HKEYS")
        .arg(store.keys().erasures("ada"))
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(erasures, vec!["not-a-real-digest".to_string()]);
    let ttl: Vec<i64> = redis::cmd("HTTL")
        .arg(store.keys().effects("ada"))
        .arg("FIELDS")
        .arg(1)
        .arg("discord:c1:m5#0")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(
        (3500..=3600).contains(&ttl[0]),
        "the record keeps its lifetime: {ttl:?}"
    );

    // Every preference once, searchable where its vector fits, and the moved effect record
    // still makes its effect happen once only.
    let all = common::all_preferences(&store, "ada").await;
    let mut ids: Vec<&str> = all.iter().map(|p| p.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["a1", "a2", "a3", "a4"]);
    let a1 = store.get_preference("ada", "a1").await.unwrap().unwrap();
    // Its vector moved into the persona's vector set: the hash keeps no second copy.
    assert!(
        store
            .raw_hash(&store.preference_key("ada", "a1"))
            .await
            .unwrap()
            .iter()
            .all(|(name, _)| name != "embedding"),
        "an active preference's vector lives in the vector set only"
    );
    let found = store
        .search_preferences(
            "ada",
            &persona_prefs::store::query::bytes_to_vector(&a1_vector),
            1,
            false,
        )
        .await
        .unwrap();
    assert_eq!(found[0].preference.id, a1.id);
    let repeat = store
        .reinforce_preference(
            "ada",
            "a1",
            persona_prefs::store::WriteGuard {
                effect_id: Some("discord:c1:m5#0"),
                message: None,
                lock: None,
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert!(
        !repeat.applied,
        "the effect recorded before the move is not applied again"
    );
}

/// Vectors of the wrong size in this layout (an embedder swapped without migrating) are not
/// searchable; a migration re-embeds them from their topics and puts them in the persona's
/// vector set.
#[tokio::test(flavor = "multi_thread")]
async fn vectors_of_the_wrong_size_are_re_embedded() {
    let config = test_config("migratekept");
    let _cleanup = Cleanup(config.clone());
    let store = store(&config).await;
    store.ensure_index().await.unwrap();
    let mut connection = store.connection();
    for (id, name) in [("b1", "green tea"), ("b2", "jazz")] {
        let _: i64 = redis::cmd("HSET")
            .arg(store.preference_key("ada", id))
            .arg(&["id", id, "persona_id", "ada", "name", name, "opinion", name][..])
            .arg(&["category", "culinary", "strength", "0.5", "active", "1"][..])
            .arg("embedding")
            .arg(vec![0u8; ORIGINAL_DIMS * 4])
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(store.resync_preference("ada", id).await.unwrap());
    }
    let topic = |text: &str| {
        let config = config.clone();
        let text = text.to_string();
        async move {
            let embedder = persona_prefs::embed::from_config(&config.embed).unwrap();
            embedder.embed(&[text]).await.unwrap().remove(0)
        }
    };
    let jazz = topic("jazz").await;
    assert!(
        store.nearest_topics("ada", &jazz).await.unwrap().is_empty(),
        "a vector of another size is not searchable"
    );

    let done = migrate(&config, &[]).await;
    assert_eq!(done["index_action"], index_kept(&config), "{done}");
    assert_eq!(done["reembedded"], 2);
    assert_eq!(done["indexed"], if indexes(&config) { 2 } else { 0 });
    let nearest = store.nearest_topics("ada", &jazz).await.unwrap();
    assert_eq!(nearest[0].preference.id, "b2");
    assert!(nearest[0].similarity() > 0.99, "{nearest:?}");
    let again = migrate(&config, &[]).await;
    assert_eq!(again["reembedded"], 0, "{again}");
}

/// Start-up records the layout of a memory that holds no earlier key, so later start-ups read
/// one key instead of walking the keyspace; a memory recorded in another layout is refused.
#[tokio::test(flavor = "multi_thread")]
async fn start_up_records_the_layout_and_refuses_another() {
    let config = test_config("layout");
    let _cleanup = Cleanup(config.clone());
    let store = store(&config).await;
    let mut connection = store.connection();
    let recorded = || {
        let mut connection = store.connection();
        let key = store.keys().layout();
        async move {
            redis::cmd("GET")
                .arg(key)
                .query_async::<Option<String>>(&mut connection)
                .await
                .unwrap()
        }
    };
    assert_eq!(recorded().await, None);
    drop(App::start(config.clone()).await.unwrap());
    assert_eq!(
        recorded().await.as_deref(),
        Some(persona_prefs::store::keys::LAYOUT)
    );

    let _: () = redis::cmd("SET")
        .arg(store.keys().layout())
        .arg("persona-slots-99")
        .query_async(&mut connection)
        .await
        .unwrap();
    let refused = App::start(config.clone())
        .await
        .err()
        .expect("a layout this build does not read")
        .to_string();
    assert!(refused.contains("persona-slots-99"), "{refused}");
}

/// The layout before vectors moved out of the hashes (issue 32): every active preference's
/// hash held an FP32 copy of the vector its persona's vector set also held. A migration drops
/// the copies and loses nothing: every preference is found by its own vector afterwards, a
/// retracted one keeps its vector for a restore, and a second run finds nothing to do.
/// Then `--reembed-all` (a change of model) computes every vector again from its topic, and a
/// change of quantisation rebuilds the vector sets from the vectors they held.
#[tokio::test(flavor = "multi_thread")]
async fn vectors_leave_the_hashes_and_survive_re_embedding_and_requantisation() {
    use persona_prefs::store::{WriteGuard, query::vector_to_bytes};
    let config = test_config("migratevectors");
    let _cleanup = Cleanup(config.clone());
    let store = store(&config).await;
    store.ensure_index().await.unwrap();
    store.ensure_layout().await.unwrap();
    let embedder = persona_prefs::embed::from_config(&config.embed).unwrap();
    let topics = ["green tea", "jazz records", "rainy mornings"];
    let vectors = embedder
        .embed(&topics.iter().map(|t| t.to_string()).collect::<Vec<_>>())
        .await
        .unwrap();
    // Stand-ins for the model's vectors: each topic's, turned a little, so re-embedding shows.
    let turned: Vec<Vec<f32>> = vectors
        .iter()
        .map(|v| {
            let mut w = v.clone();
            w.rotate_left(1);
            w
        })
        .collect();
    let mut ids = Vec::new();
    let mut connection = store.connection();
    for (topic, vector) in topics.iter().zip(&turned) {
        let added = store
            .add_preference(common::new_preference(
                "ada",
                topic,
                &format!("I like {topic}."),
                vector.clone(),
            ))
            .await
            .unwrap();
        ids.push(added.id);
    }
    let before = store
        .list_preferences("ada", &ListOptions::default())
        .await
        .unwrap();
    // As the earlier layouts wrote it: the record in the hash as well (layout 1), and the
    // vector too (before 2026-11-25).
    common::as_previous_layout(&store, "ada").await;
    for (id, vector) in ids.iter().zip(&turned) {
        let _: i64 = redis::cmd("HSET")
            .arg(store.preference_key("ada", id))
            .arg("embedding")
            .arg(vector_to_bytes(vector))
            .query_async(&mut connection)
            .await
            .unwrap();
    }
    let refused = store.ensure_layout().await.unwrap_err().to_string();
    assert!(refused.contains("index migrate"), "{refused}");
    let hash_vectors = async |store: &PreferenceStore| {
        let mut connection = store.connection();
        let mut held = 0;
        for id in &ids {
            let length: i64 = redis::cmd("HSTRLEN")
                .arg(store.preference_key("ada", id))
                .arg("embedding")
                .query_async(&mut connection)
                .await
                .unwrap();
            held += usize::from(length > 0);
        }
        held
    };
    assert_eq!(hash_vectors(&store).await, 3);

    let done = migrate(&config, &[]).await;
    assert_eq!(
        done["reembedded"], 0,
        "vectors of the right size are kept: {done}"
    );
    assert_eq!(hash_vectors(&store).await, 0, "no second copy in any hash");
    store.ensure_layout().await.unwrap();
    let records = async |store: &PreferenceStore| {
        let mut connection = store.connection();
        let mut held = 0;
        for id in &ids {
            let exists: i64 = redis::cmd("EXISTS")
                .arg(store.preference_key("ada", id))
                .query_async(&mut connection)
                .await
                .unwrap();
            held += usize::try_from(exists).unwrap();
        }
        held
    };
    assert_eq!(records(&store).await, 0, "no record kept twice: no hash");
    let after = store
        .list_preferences("ada", &ListOptions::default())
        .await
        .unwrap();
    let undecayed = |list: Vec<Preference>| {
        list.into_iter()
            .map(|p| Preference {
                decayed_strength: None,
                ..p
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        undecayed(after),
        undecayed(before),
        "every record as it was"
    );
    for (id, vector) in ids.iter().zip(&turned) {
        let nearest = store.nearest_topics("ada", vector).await.unwrap();
        assert_eq!(&nearest[0].preference.id, id);
        assert!(nearest[0].similarity() > 0.999, "{nearest:?}");
    }
    // A retracted preference parks its vector in its hash, and a migration leaves it there.
    store
        .retract_preference("ada", &ids[2], "", WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    let again = migrate(&config, &[]).await;
    assert_eq!(again["reembedded"], 0, "{again}");
    assert_eq!(hash_vectors(&store).await, 1);

    // A change of model: every vector computed again from its topic, the retracted one too.
    let reembedded = migrate(&config, &["--reembed-all"]).await;
    assert_eq!(reembedded["reembedded"], 3, "{reembedded}");
    for (id, vector) in ids.iter().zip(&vectors).take(2) {
        let nearest = store.nearest_topics("ada", vector).await.unwrap();
        assert_eq!(&nearest[0].preference.id, id);
        assert!(
            nearest[0].similarity() > 0.999,
            "the model's own vector now: {nearest:?}"
        );
    }
    store
        .restore_preference("ada", &ids[2], 1, "", WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    let nearest = store.nearest_topics("ada", &vectors[2]).await.unwrap();
    assert_eq!(nearest[0].preference.id, ids[2]);
    assert!(nearest[0].similarity() > 0.999, "{nearest:?}");

    // A change of quantisation: the sets are rebuilt from the vectors they held, none lost
    // and none re-embedded.
    let mut fp32 = config.clone();
    fp32.store.vector_quantisation = persona_prefs::config::VectorQuantisation::Fp32;
    let output = common::cli::run_with_env(
        &config,
        &["index", "migrate", "--json"],
        &[("PERSONA_PREFS__STORE__VECTOR_QUANTISATION", "fp32")],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requantised: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(requantised["vector_sets_rebuilt"], 1, "{requantised}");
    assert_eq!(requantised["reembedded"], 0, "{requantised}");
    let fp32_store = self::store(&fp32).await;
    assert_eq!(hash_vectors(&fp32_store).await, 0);
    for (id, vector) in ids.iter().zip(&vectors) {
        let nearest = fp32_store.nearest_topics("ada", vector).await.unwrap();
        assert_eq!(&nearest[0].preference.id, id);
        assert!(nearest[0].similarity() > 0.999, "{nearest:?}");
    }
}

/// Memory written before users had vector sets of their own: `index migrate` builds them (the
/// user pass then searches them), and a change of quantisation rebuilds them with the
/// persona's set.
#[tokio::test(flavor = "multi_thread")]
async fn migrate_builds_the_users_own_vector_sets_and_requantisation_rebuilds_them() {
    use persona_prefs::store::keys::USER_SET_MIN;
    use persona_prefs::store::query::vector_to_bytes;
    let config = test_config("migrateusersets");
    let _cleanup = Cleanup(config.clone());
    let store = store(&config).await;
    store.ensure_index().await.unwrap();
    store.ensure_layout().await.unwrap();
    let mut ids = Vec::new();
    let mut vectors = Vec::new();
    for step in 0..USER_SET_MIN as u64 + 2 {
        let vector = common::unit_vector(500 + step);
        let mut preference = common::new_preference(
            "ada",
            &format!("topic {step}"),
            &format!("I like topic {step}."),
            vector.clone(),
        );
        preference.related_user_ids = vec!["u1".to_string()];
        ids.push(store.add_preference(preference).await.unwrap().id);
        vectors.push(vector);
    }
    let user_set = store.keys().about_vectors("ada", "u1");
    let mut connection = store.connection();
    // The set as it stands: its members and quantisation; each preference the nearest its own
    // vector in it.
    let holds = async |connection: &mut RedisConnection| {
        for (id, vector) in ids.iter().zip(&vectors) {
            let nearest: Vec<String> = redis::cmd("VSIM")
                .arg(&user_set)
                .arg("FP32")
                .arg(vector_to_bytes(vector))
                .arg("WITHSCORES")
                .arg("COUNT")
                .arg(1)
                .query_async(connection)
                .await
                .unwrap();
            assert_eq!(&nearest[0], id);
            assert!(nearest[1].parse::<f64>().unwrap() > 0.99, "{nearest:?}");
        }
        let members: usize = redis::cmd("VCARD")
            .arg(&user_set)
            .query_async(connection)
            .await
            .unwrap();
        let info: Vec<redis::Value> = redis::cmd("VINFO")
            .arg(&user_set)
            .query_async(connection)
            .await
            .unwrap();
        let info: Vec<String> = info
            .iter()
            .map(persona_prefs::store::query::value_to_string)
            .collect();
        let quantisation = info
            .chunks(2)
            .find(|pair| pair[0] == "quant-type")
            .map(|pair| pair[1].clone())
            .unwrap();
        (members, quantisation)
    };
    assert_eq!(holds(&mut connection).await, (ids.len(), "int8".into()));
    // As memory from before these sets: none.
    let _: i64 = redis::cmd("DEL")
        .arg(&user_set)
        .query_async(&mut connection)
        .await
        .unwrap();
    migrate(&config, &[]).await;
    assert_eq!(holds(&mut connection).await, (ids.len(), "int8".into()));

    let output = common::cli::run_with_env(
        &config,
        &["index", "migrate", "--json"],
        &[("PERSONA_PREFS__STORE__VECTOR_QUANTISATION", "fp32")],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requantised: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(requantised["vector_sets_rebuilt"], 1, "{requantised}");
    assert_eq!(holds(&mut connection).await, (ids.len(), "f32".into()));
}
