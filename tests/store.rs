//! The preference store against a real Redis with RediSearch: every operation of seed 000.

mod common;

use std::collections::HashMap;

use common::{TestStore, new_preference, test_config, unit_vector, vector_near};
use persona_prefs::store::{
    Evolution, InjectionQuery, ListOptions, MatchReason, PersonaLock, Preference, PreferenceStore,
    Provenance, StoreError, WriteGuard,
};

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn ids(list: &[impl AsRef<str>]) -> Vec<String> {
    list.iter().map(|s| s.as_ref().to_string()).collect()
}

/// An element's attributes in the persona's vector set `vectors`, as JSON.
async fn element_attributes(
    connection: &mut persona_prefs::store::RedisConnection,
    vectors: &str,
    id: &str,
) -> serde_json::Value {
    let attributes: String = redis::cmd("VGETATTR")
        .arg(vectors)
        .arg(id)
        .query_async(connection)
        .await
        .unwrap();
    serde_json::from_str(&attributes).unwrap()
}

/// `text` with quotes and apostrophes swapped, as attributes keep JSON-holding fields.
fn swapped_quotes(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' => '\'',
            '\'' => '"',
            c => c,
        })
        .collect()
}

#[tokio::test]
async fn add_stores_the_seed_layout_and_returns_the_record_without_embedding() {
    let t = TestStore::new("add").await;
    let mut new = new_preference(
        "ada",
        "rainy days",
        "I find rainy days calming.",
        unit_vector(1),
    );
    new.related_user_ids = ids(&["u1", "u2"]);
    new.related_kg_uuids = ids(&["kg-1"]);
    let added = t.add_preference(new).await.unwrap();

    assert_eq!(added.id.len(), 32);
    assert_eq!(added.strength, 0.5);
    assert!(added.active);
    assert_eq!(added.reinforcement_count, 0);
    assert!(added.evolution_history.is_empty());

    // An active preference's record is kept once, as its element's attributes in the
    // persona's vector set (what injection reads under one-letter names, the rest under short
    // names); no hash beside it.
    let key = format!(
        "{}:persona_pref:{{ada}}:{}",
        t.config.redis.key_prefix, added.id
    );
    let mut connection = t.connection();
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(exists, 0, "an active preference has no hash");
    let attributes: String = redis::cmd("VGETATTR")
        .arg(t.keys().vectors("ada"))
        .arg(&added.id)
        .query_async(&mut connection)
        .await
        .unwrap();
    let element: serde_json::Value = serde_json::from_str(&attributes).unwrap();
    assert_eq!(element["n"], "rainy days", "{attributes}");
    assert_eq!(element["o"], "I find rainy days calming.", "{attributes}");
    assert_eq!(element["u"], "u1,u2", "{attributes}");
    // A field holding JSON keeps it with quotes and apostrophes swapped (no escapes).
    assert_eq!(element["kg"], "['kg-1']", "{attributes}");
    assert_eq!(element["w"], 2, "{attributes}");
    assert_eq!(element["tu"], "user-1", "{attributes}");
    assert_eq!(element["tm"], "msg-1", "{attributes}");
    assert_eq!(element["sp"], "discord", "{attributes}");
    assert_eq!(element["sc"], "chan-1", "{attributes}");
    // Written through the API: by an administrator.
    assert!(added.curated);
    assert_eq!(element["cu"], true, "{attributes}");
    // What holds its default is left out (every reader takes a missing field for it): never
    // reinforced, its last voicing its stance's own (read from `sa`), no history, no
    // reinforcement log, not inherited, no baseline.
    for default in ["rc", "lr", "eh", "hd", "rf", "ed", "if", "bl"] {
        assert!(element.get(default).is_none(), "{default}: {attributes}");
    }
    // The vector lives in the persona's vector set only.
    let in_set: Vec<f32> = redis::cmd("VEMB")
        .arg(t.keys().vectors("ada"))
        .arg(&added.id)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(
        cosine(&in_set, &unit_vector(1)) > 0.9999,
        "the vector set keeps the vector (quantised)"
    );

    let fetched = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    // Read back, it carries its strength after decay: just written, all but all of it.
    let decayed = fetched
        .decayed_strength
        .expect("an active preference's decay");
    assert!(decayed <= added.strength && decayed > 0.999 * added.strength);
    assert_eq!(
        Preference {
            decayed_strength: None,
            ..fetched
        },
        added
    );

    // The persona's structures hold it: its id, its vector, its strength, who it is about.
    let keys = t.keys();
    let member = |command: &str, key: String, member: String| {
        let mut connection = t.connection();
        let command = command.to_string();
        async move {
            let value: redis::Value = redis::cmd(&command)
                .arg(key)
                .arg(member)
                .query_async(&mut connection)
                .await
                .unwrap();
            value
        }
    };
    assert_eq!(
        member("SISMEMBER", keys.ids("ada"), added.id.clone()).await,
        redis::Value::Int(1)
    );
    assert_eq!(
        member("VISMEMBER", keys.vectors("ada"), added.id.clone()).await,
        redis::Value::Int(1)
    );
    assert_ne!(
        member("ZSCORE", keys.strongest("ada"), added.id.clone()).await,
        redis::Value::Nil
    );
    for user in ["u1", "u2"] {
        assert_ne!(
            member(
                "ZSCORE",
                keys.about("ada"),
                persona_prefs::store::Keys::about_member(user, &added.id)
            )
            .await,
            redis::Value::Nil,
            "{user}"
        );
    }

    // Retracted, it leaves the set, and its hash at {prefix}:persona_pref:{<persona>}:{id}
    // (the persona's hash slot) holds the record with the original's fields (those holding
    // their default left out) and its vector, parked for a restore.
    let version = t
        .retract_preference("ada", &added.id, "", WriteGuard::default())
        .await
        .unwrap();
    assert!(version.is_some());
    let raw: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    let text = |f: &str| String::from_utf8(raw[f].clone()).unwrap();
    assert_eq!(text("id"), added.id);
    assert_eq!(text("persona_id"), "ada");
    assert_eq!(text("name"), "rainy days");
    assert_eq!(text("active"), "0");
    assert_eq!(text("related_user_ids"), r#"["u1","u2"]"#);
    assert_eq!(text("related_user_ids_index"), "u1,u2");
    assert_eq!(text("related_kg_uuids"), r#"["kg-1"]"#);
    assert_eq!(text("triggering_user_id"), "user-1");
    assert_eq!(text("triggering_message_id"), "msg-1");
    assert_eq!(text("source_platform"), "discord");
    assert_eq!(text("source_channel_id"), "chan-1");
    assert_eq!(text("curated"), "1");
    for default in [
        "history_entries_dropped",
        "reinforcements",
        "evidence_users_dropped",
        "inherited_from",
        "baseline",
    ] {
        assert!(!raw.contains_key(default), "{default} is left out");
    }
    assert_eq!(
        raw["embedding"].len(),
        t.config.store.embedding_dims * 4,
        "the vector, parked"
    );
    assert_eq!(
        member("VISMEMBER", keys.vectors("ada"), added.id.clone()).await,
        redis::Value::Int(0)
    );
    let retracted = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert!(!retracted.active);
    assert_eq!(retracted.related_kg_uuids, added.related_kg_uuids);
}

#[tokio::test]
async fn name_and_opinion_are_truncated_on_character_boundaries() {
    let t = TestStore::new("trunc").await;
    let name = "é".repeat(300);
    let opinion = "🐈".repeat(5000);
    let added = t
        .add_preference(new_preference("ada", &name, &opinion, unit_vector(2)))
        .await
        .unwrap();
    assert_eq!(added.name.chars().count(), 256);
    assert_eq!(added.opinion.chars().count(), 4096);
    assert!(added.opinion.chars().all(|c| c == '🐈'));
    let fetched = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(fetched.opinion, added.opinion);
}

#[tokio::test]
async fn unknown_category_becomes_philosophical_and_known_ones_are_kept() {
    let t = TestStore::new("category").await;
    let cases = [
        ("culinary", "culinary"),
        ("Musical", "musical"),
        ("astrology", "philosophical"),
        ("", "philosophical"),
    ];
    for (seed, (given, stored)) in cases.iter().enumerate() {
        let mut new = new_preference(
            "ada",
            "thing",
            "I like the thing.",
            unit_vector(seed as u64),
        );
        new.category = given.to_string();
        assert_eq!(
            t.add_preference(new).await.unwrap().category,
            *stored,
            "category {given:?}"
        );
    }
}

#[tokio::test]
async fn strength_is_clamped_to_the_unit_interval() {
    let t = TestStore::new("strength").await;
    let cases = [
        (Some(1.7), 1.0),
        (Some(-0.3), 0.0),
        (Some(0.42), 0.42),
        (None, 0.5),
    ];
    for (seed, (given, stored)) in cases.into_iter().enumerate() {
        let mut new = new_preference("ada", "thing", "I like it.", unit_vector(seed as u64));
        new.strength = given;
        assert_eq!(
            t.add_preference(new).await.unwrap().strength,
            stored,
            "strength {given:?}"
        );
    }
    let mut new = new_preference("ada", "thing", "I like it.", unit_vector(9));
    new.strength = Some(f64::NAN);
    assert!(matches!(
        t.add_preference(new).await,
        Err(StoreError::InvalidInput {
            field: "strength",
            ..
        })
    ));
}

#[tokio::test]
async fn reinforce_follows_the_diminishing_returns_curve() {
    let t = TestStore::new("reinforce").await;
    let added = t
        .add_preference(new_preference(
            "ada",
            "tea",
            "I love green tea.",
            unit_vector(3),
        ))
        .await
        .unwrap();
    let first = t
        .reinforce_preference("ada", &added.id, WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    assert!(
        (first.strength - 0.575).abs() < 1e-12,
        "0.5 + 0.15 * 0.5, got {}",
        first.strength
    );
    assert_eq!(first.reinforcement_count, 1);
    let second = t
        .reinforce_preference("ada", &added.id, WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    assert!((second.strength - (0.575 + 0.15 * 0.425)).abs() < 1e-12);
    let stored = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(stored.reinforcement_count, 2);
    assert!(stored.last_reinforced >= stored.created_at);
}

/// Each reinforcement is logged with the turn that caused it; the log keeps the most recent
/// `store.max_reinforcement_log`, while `reinforcement_count` keeps counting.
#[tokio::test]
async fn reinforcements_are_logged_with_provenance_and_capped() {
    let mut config = test_config("reinforcelog");
    config.store.max_reinforcement_log = 2;
    let t = TestStore::with_config(config).await;
    let added = t
        .add_preference(new_preference(
            "ada",
            "tea",
            "I love green tea.",
            unit_vector(3),
        ))
        .await
        .unwrap();
    for turn in 1..=3 {
        let provenance = Provenance {
            triggering_user_id: format!("u{turn}"),
            triggering_message_id: format!("user-msg-{turn}"),
            persona_message_id: format!("persona-msg-{turn}"),
            source_platform: "discord".into(),
            source_channel_id: "c1".into(),
        };
        t.reinforce_preference_from("ada", &added.id, &provenance, WriteGuard::default())
            .await
            .unwrap()
            .unwrap();
    }
    let stored = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(stored.reinforcement_count, 3);
    let logged: Vec<&str> = stored
        .reinforcements
        .iter()
        .map(|r| r.provenance.persona_message_id.as_str())
        .collect();
    assert_eq!(
        logged,
        ["persona-msg-2", "persona-msg-3"],
        "the most recent, oldest first"
    );
    assert_eq!(stored.reinforcements[1].provenance.triggering_user_id, "u3");
    assert_eq!(
        stored.reinforcements[1].provenance.triggering_message_id,
        "user-msg-3"
    );
    assert!(!stored.reinforcements[1].timestamp.is_empty());
    assert_eq!(stored.evidence_user_ids, ["user-1", "u1", "u2", "u3"]);

    let mut config = test_config("reinforcenolog");
    config.store.max_reinforcement_log = 0;
    let t = TestStore::with_config(config).await;
    let added = t
        .add_preference(new_preference(
            "ada",
            "tea",
            "I love green tea.",
            unit_vector(3),
        ))
        .await
        .unwrap();
    t.reinforce_preference("ada", &added.id, WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    let stored = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(stored.reinforcement_count, 1);
    assert!(stored.reinforcements.is_empty(), "0 keeps no log");
}

#[tokio::test]
async fn missing_preferences_are_none_not_errors() {
    let t = TestStore::new("missing").await;
    let g = WriteGuard::default();
    assert!(t.get_preference("ada", "nope").await.unwrap().is_none());
    assert!(
        t.reinforce_preference("ada", "nope", g)
            .await
            .unwrap()
            .is_none()
    );
    let v = unit_vector(1);
    let evolution = Evolution {
        new_opinion: "x",
        new_embedding: &v,
        reason: "r",
        new_stance: None,
        expressed_at: None,
        evidence_user_id: None,
    };
    assert!(
        t.evolve_preference("ada", "nope", &evolution, g)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        t.retract_preference("ada", "nope", "r", g)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn fifty_concurrent_reinforcements_all_count() {
    let t = TestStore::new("concurrent").await;
    let added = t
        .add_preference(new_preference(
            "ada",
            "jazz",
            "I adore jazz.",
            unit_vector(4),
        ))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let store: PreferenceStore = t.store.clone();
            let id = added.id.clone();
            tokio::spawn(async move {
                store
                    .reinforce_preference("ada", &id, WriteGuard::default())
                    .await
                    .unwrap()
                    .unwrap()
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let stored = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(stored.reinforcement_count, 50);
    let expected = 1.0 - 0.5 * 0.85f64.powi(50);
    assert!(
        (stored.strength - expected).abs() < 1e-9,
        "expected {expected}, got {}",
        stored.strength
    );
}

#[tokio::test]
async fn evolve_logs_the_change_and_replaces_opinion_and_embedding() {
    let t = TestStore::new("evolve").await;
    let old_vector = unit_vector(5);
    let added = t
        .add_preference(new_preference(
            "ada",
            "cilantro",
            "I love cilantro.",
            old_vector.clone(),
        ))
        .await
        .unwrap();
    t.reinforce_preference("ada", &added.id, WriteGuard::default())
        .await
        .unwrap();
    let new_vector = unit_vector(6);
    let evolution = Evolution {
        new_opinion: "Cilantro tastes like soap to me now.",
        new_embedding: &new_vector,
        reason: "msg-9 said so",
        new_stance: Some(persona_prefs::store::Stance::Against),
        expressed_at: Some("2026-05-01T12:00:00Z"),
        evidence_user_id: Some("user-9"),
    };
    let outcome = t
        .evolve_preference("ada", &added.id, &evolution, WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.strength, 0.6);
    assert_eq!(outcome.evolutions, 1);
    let stored = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(stored.opinion, "Cilantro tastes like soap to me now.");
    assert_eq!(stored.strength, 0.6);
    assert_eq!(stored.stance, Some(persona_prefs::store::Stance::Against));
    assert_eq!(stored.stance_at, "2026-05-01T12:00:00Z");
    let entry = &stored.evolution_history[0];
    assert_eq!(entry.old_opinion.as_deref(), Some("I love cilantro."));
    assert_eq!(
        entry.new_opinion.as_deref(),
        Some("Cilantro tastes like soap to me now.")
    );
    assert_eq!(entry.reason, "msg-9 said so");
    assert!(!entry.timestamp.is_empty());
    // The index now finds it by the new embedding, not the old one.
    let by_new = t
        .search_preferences("ada", &new_vector, 1, false)
        .await
        .unwrap();
    assert!(
        by_new[0].score < 1e-4,
        "new embedding is stored, distance {}",
        by_new[0].score
    );
}

#[tokio::test]
async fn retract_is_a_soft_delete_that_searches_and_lists_skip() {
    let t = TestStore::new("retract").await;
    let vector = unit_vector(7);
    let added = t
        .add_preference(new_preference(
            "ada",
            "opera",
            "I love opera.",
            vector.clone(),
        ))
        .await
        .unwrap();
    let quiet = t
        .add_preference(new_preference(
            "ada",
            "noise",
            "I hate noise.",
            unit_vector(8),
        ))
        .await
        .unwrap();
    let outcome = t
        .retract_preference("ada", &added.id, "changed my mind", WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    assert!(!outcome.active);
    t.retract_preference("ada", &quiet.id, "", WriteGuard::default())
        .await
        .unwrap()
        .unwrap();

    let stored = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert!(!stored.active);
    assert_eq!(stored.opinion, "I love opera.", "record kept");
    assert_eq!(stored.evolution_history.len(), 1);
    assert_eq!(
        stored.evolution_history[0].action.as_deref(),
        Some("retraction")
    );
    assert_eq!(stored.evolution_history[0].reason, "changed my mind");
    // Every retraction is a version, reason or not, so it can be restored.
    let silent = t.get_preference("ada", &quiet.id).await.unwrap().unwrap();
    assert_eq!(silent.evolution_history.len(), 1);
    assert_eq!(silent.evolution_history[0].reason, "");
    assert_eq!(silent.evolution_history[0].version, Some(1));
    assert_eq!(silent.evolution_history[0].old_active, Some(true));
    assert_eq!(silent.version, 2);

    assert!(
        t.search_preferences("ada", &vector, 5, false)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        t.search_preferences("ada", &vector, 5, true)
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(
        t.find_conflicts("ada", &vector, None)
            .await
            .unwrap()
            .is_empty()
    );
    let options = ListOptions {
        limit: 50,
        ..Default::default()
    };
    assert!(
        t.list_preferences("ada", &options)
            .await
            .unwrap()
            .is_empty()
    );
    let all = ListOptions {
        include_retracted: true,
        limit: 50,
        ..Default::default()
    };
    assert_eq!(t.list_preferences("ada", &all).await.unwrap().len(), 2);
    let injection = InjectionQuery {
        persona_id: "ada",
        query_embedding: &vector,
        max_count: 8,
        max_chars: 2000,
        active_user_ids: &[],
    };
    assert!(
        t.get_preferences_for_injection(&injection)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn list_is_strongest_first_with_category_filter_and_limit() {
    let t = TestStore::new("list").await;
    for (seed, (category, strength)) in [
        ("culinary", 0.3),
        ("musical", 0.9),
        ("culinary", 0.7),
        ("musical", 0.1),
    ]
    .into_iter()
    .enumerate()
    {
        let mut new = new_preference("ada", "x", "I have a view.", unit_vector(seed as u64));
        new.category = category.into();
        new.strength = Some(strength);
        t.add_preference(new).await.unwrap();
    }
    let strengths = |list: Vec<persona_prefs::store::Preference>| {
        list.into_iter().map(|p| p.strength).collect::<Vec<_>>()
    };
    let all = t
        .list_preferences(
            "ada",
            &ListOptions {
                limit: 50,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(strengths(all), vec![0.9, 0.7, 0.3, 0.1]);
    let culinary = ListOptions {
        category: Some("culinary".into()),
        limit: 50,
        ..Default::default()
    };
    assert_eq!(
        strengths(t.list_preferences("ada", &culinary).await.unwrap()),
        vec![0.7, 0.3]
    );
    let top2 = ListOptions {
        limit: 2,
        ..Default::default()
    };
    assert_eq!(
        strengths(t.list_preferences("ada", &top2).await.unwrap()),
        vec![0.9, 0.7]
    );
}

#[tokio::test]
async fn stats_count_active_retracted_and_categories() {
    let t = TestStore::new("stats").await;
    let mut made = Vec::new();
    for (seed, category) in ["culinary", "musical", "culinary", "ethical"]
        .into_iter()
        .enumerate()
    {
        let mut new = new_preference("ada", "x", "I have a view.", unit_vector(seed as u64));
        new.category = category.into();
        made.push(t.add_preference(new).await.unwrap());
    }
    t.add_preference(new_preference(
        "bob",
        "x",
        "Other persona.",
        unit_vector(99),
    ))
    .await
    .unwrap();
    t.retract_preference("ada", &made[3].id, "", WriteGuard::default())
        .await
        .unwrap();
    let stats = t.stats("ada").await.unwrap();
    assert_eq!((stats.total, stats.active, stats.retracted), (4, 3, 1));
    assert_eq!(stats.by_category.get("culinary"), Some(&2));
    assert_eq!(stats.by_category.get("musical"), Some(&1));
    assert_eq!(
        stats.by_category.get("ethical"),
        None,
        "only active preferences are tallied"
    );
}

#[tokio::test]
async fn search_is_nearest_first_with_cosine_distance() {
    let t = TestStore::new("search").await;
    let base = unit_vector(10);
    for (seed, similarity) in [(11, 0.95f32), (12, 0.6), (13, 0.85)] {
        let opinion = format!("similar at {similarity}");
        t.add_preference(new_preference(
            "ada",
            "x",
            &opinion,
            vector_near(&base, similarity, seed),
        ))
        .await
        .unwrap();
    }
    let hits = t.search_preferences("ada", &base, 10, false).await.unwrap();
    let similarities: Vec<f64> = hits.iter().map(|h| h.similarity()).collect();
    assert_eq!(hits.len(), 3);
    assert!(
        similarities.windows(2).all(|w| w[0] >= w[1]),
        "{similarities:?}"
    );
    assert!(
        (similarities[0] - 0.95).abs() < 0.01 && (similarities[2] - 0.6).abs() < 0.01,
        "{similarities:?}"
    );
    assert_eq!(
        t.search_preferences("ada", &base, 2, false)
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn find_conflicts_keeps_only_matches_over_the_threshold() {
    let t = TestStore::new("conflicts").await;
    let base = unit_vector(20);
    for (seed, similarity) in [(21, 0.95f32), (22, 0.82), (23, 0.7)] {
        t.add_preference(new_preference(
            "ada",
            "x",
            "view",
            vector_near(&base, similarity, seed),
        ))
        .await
        .unwrap();
    }
    let default = t.find_conflicts("ada", &base, None).await.unwrap();
    assert_eq!(default.len(), 2, "0.80 default keeps 0.95 and 0.82");
    assert!(default.iter().all(|hit| hit.similarity() >= 0.8));
    assert_eq!(
        t.find_conflicts("ada", &base, Some(0.9))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        t.find_conflicts("ada", &base, Some(0.5))
            .await
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn a_persona_never_sees_another_personas_preferences() {
    let t = TestStore::new("isolation").await;
    let shared = unit_vector(30);
    let mut theirs = new_preference("bob", "secret", "Bob's private view.", shared.clone());
    theirs.related_user_ids = ids(&["u1"]);
    let bobs = t.add_preference(theirs).await.unwrap();
    // Case matters: "Bob" is not "bob".
    t.add_preference(new_preference(
        "Bob",
        "other",
        "Capital Bob's view.",
        shared.clone(),
    ))
    .await
    .unwrap();

    assert!(
        t.search_preferences("ada", &shared, 10, true)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        t.find_conflicts("ada", &shared, Some(0.0))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(t.get_preference("ada", &bobs.id).await.unwrap().is_none());
    assert!(
        t.list_preferences(
            "ada",
            &ListOptions {
                include_retracted: true,
                limit: 10,
                ..Default::default()
            }
        )
        .await
        .unwrap()
        .is_empty()
    );
    let users = ids(&["u1"]);
    let query = InjectionQuery {
        persona_id: "ada",
        query_embedding: &shared,
        max_count: 8,
        max_chars: 2000,
        active_user_ids: &users,
    };
    assert!(
        t.get_preferences_for_injection(&query)
            .await
            .unwrap()
            .is_empty()
    );
    let lower = t
        .search_preferences("bob", &shared, 10, false)
        .await
        .unwrap();
    assert_eq!(lower.len(), 1);
    assert_eq!(lower[0].preference.persona_id, "bob");
}

#[tokio::test]
async fn hostile_user_ids_neither_break_queries_nor_reach_other_personas() {
    let t = TestStore::new("escape").await;
    let vector = unit_vector(40);
    let hostile = "u-1}|@persona_id:{bob";
    let mut mine = new_preference(
        "ada",
        "hostile user",
        "I distrust this user.",
        unit_vector(41),
    );
    mine.related_user_ids = ids(&[hostile, "name with spaces", "a:b-c.d"]);
    let mine = t.add_preference(mine).await.unwrap();
    let mut bobs = new_preference("bob", "bob", "Bob's view about u-1.", vector.clone());
    bobs.related_user_ids = ids(&["u-1"]);
    t.add_preference(bobs).await.unwrap();

    for user in [hostile, "name with spaces", "a:b-c.d"] {
        let users = ids(&[user]);
        let query = InjectionQuery {
            persona_id: "ada",
            query_embedding: &vector,
            max_count: 8,
            max_chars: 2000,
            active_user_ids: &users,
        };
        let chosen = t.get_preferences_for_injection(&query).await.unwrap();
        assert_eq!(chosen.len(), 1, "user {user:?}");
        assert_eq!(chosen[0].id, mine.id);
        assert!(
            chosen[0]
                .matched_by
                .contains(&MatchReason::User(user.to_string()))
        );
    }
}

/// Six views of `persona_id` at cosine 0.9, 0.35, 0.3, 0.2, 0.1 and 0 from `query` (the
/// default `store.min_semantic_relevance` is 0.25): the ids of the three over it.
async fn views_either_side_of_the_floor(
    t: &TestStore,
    persona_id: &str,
    query: &[f32],
    seed: u64,
) -> Vec<String> {
    assert_eq!(t.config.store.min_semantic_relevance, 0.25);
    let mut near = Vec::new();
    for (k, similarity) in [0.9f32, 0.35, 0.3, 0.2, 0.1, 0.0].into_iter().enumerate() {
        let preference = new_preference(
            persona_id,
            &format!("view {k}"),
            "A view at a known distance.",
            vector_near(query, similarity, seed + k as u64),
        );
        let id = t.add_preference(preference).await.unwrap().id;
        if similarity > 0.25 {
            near.push(id);
        }
    }
    near
}

/// The injection passes' sizes for a search alone: 16 hits, no residents, the configured floor.
fn semantic_pass_sizes(t: &TestStore) -> persona_prefs::store::query::PassSizes {
    persona_prefs::store::query::PassSizes {
        top_k: 16,
        strongest: 0,
        search_ef: t.config.store.vector_search_ef,
        half_life_days: 0.0,
        now_days: 0.0,
        min_semantic_relevance: t.config.store.min_semantic_relevance,
    }
}

/// The ids injection chooses for `persona_id` near `query` (at most 8, no user present), sorted.
async fn injected_ids(t: &TestStore, persona_id: &str, query: &[f32]) -> Vec<String> {
    let request = InjectionQuery {
        persona_id,
        query_embedding: query,
        max_count: 8,
        max_chars: 2000,
        active_user_ids: &[],
    };
    let mut chosen: Vec<String> = t
        .get_preferences_for_injection(&request)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    chosen.sort();
    chosen
}

/// The semantic search asks Redis only for the hits close enough to inject
/// (`store.min_semantic_relevance`, 0.25: `VSIM … EPSILON`), and every one of those comes
/// back: the views just over the floor are injected, those under it are neither injected nor
/// sent.
#[tokio::test]
async fn the_semantic_search_leaves_out_only_the_hits_too_far_to_inject() {
    let t = TestStore::new("inject-epsilon").await;
    let query_vector = unit_vector(60);
    let mut near = views_either_side_of_the_floor(&t, "ada", &query_vector, 61).await;
    near.sort();
    assert_eq!(
        injected_ids(&t, "ada", &query_vector).await,
        near,
        "the views over the floor, and only those"
    );

    // What Redis answers the store's own search: only those three.
    let sizes = semantic_pass_sizes(&t);
    let pipe = persona_prefs::store::query::plain_injection_pipeline(
        t.keys(),
        "ada",
        &query_vector,
        sizes,
        &[],
        false,
    )
    .expect("a query, no residents: the plain pipeline");
    let mut connection = t.connection();
    let replies = connection
        .pipeline_for_key(&t.keys().vectors("ada"), &pipe)
        .await
        .unwrap();
    let hits = persona_prefs::store::query::parse_vector_hits(
        replies[0].clone(),
        persona_prefs::store::query::VectorScore::VsimScore,
    )
    .unwrap();
    let mut sent: Vec<String> = hits.into_iter().map(|hit| hit.id).collect();
    sent.sort();
    assert_eq!(
        sent, near,
        "Redis sent only the hits close enough to inject"
    );
}

/// A base layer's semantic search runs inside the injection script (it reads its hits'
/// vectors for the override check): it leaves out the hits too far to inject as the persona's
/// own search does, so their attributes and vectors are neither read nor sent.
#[tokio::test]
async fn a_base_layers_search_leaves_out_only_the_hits_too_far_to_inject() {
    let t = TestStore::new("inject-epsilon-base").await;
    let query_vector = unit_vector(70);
    let mut near = views_either_side_of_the_floor(&t, "elder", &query_vector, 71).await;
    t.set_bases("kid", &["elder".to_string()]).await.unwrap();
    near.sort();
    assert_eq!(
        injected_ids(&t, "kid", &query_vector).await,
        near,
        "the base's views over the floor, and only those"
    );

    // What the script answers for the base layer (with its hits' vectors): only those three.
    let sizes = semantic_pass_sizes(&t);
    let pipe = persona_prefs::store::query::injection_pipeline(
        t.keys(),
        "elder",
        &query_vector,
        sizes,
        &[],
        true,
    );
    let mut connection = t.connection();
    // The injection above ran the script on the base's node, so it is loaded there.
    let replies = connection
        .pipeline_for_key(&t.keys().vectors("elder"), &pipe)
        .await
        .unwrap();
    let Some(redis::Value::Array(parts)) = replies.last() else {
        panic!("the script answers an array: {replies:?}");
    };
    let redis::Value::Array(semantic) = &parts[0] else {
        panic!("the semantic part is an array: {parts:?}");
    };
    let mut sent: Vec<String> = semantic
        .chunks(3)
        .map(|hit| match &hit[0] {
            redis::Value::BulkString(id) => String::from_utf8(id.clone()).unwrap(),
            other => panic!("an id: {other:?}"),
        })
        .collect();
    sent.sort();
    assert_eq!(
        sent, near,
        "the script read only the hits close enough to inject"
    );
    let redis::Value::Array(vectors) = &parts[4] else {
        panic!("the vectors part is an array: {parts:?}");
    };
    assert_eq!(
        vectors.len(),
        2 * near.len(),
        "one vector read for each of those"
    );
}

#[tokio::test]
async fn injection_merges_semantic_and_user_passes_and_respects_caps() {
    let t = TestStore::new("inject").await;
    let query_vector = unit_vector(50);
    // Topic matches with different strengths.
    let mut strong = new_preference(
        "ada",
        "a",
        "Strong and relevant.",
        vector_near(&query_vector, 0.9, 51),
    );
    strong.strength = Some(0.9);
    let strong = t.add_preference(strong).await.unwrap();
    let mut weak = new_preference(
        "ada",
        "b",
        "Weak but relevant.",
        vector_near(&query_vector, 0.9, 52),
    );
    weak.strength = Some(0.2);
    let weak = t.add_preference(weak).await.unwrap();
    // Off-topic, but about a user in the conversation.
    let mut about_user = new_preference(
        "ada",
        "c",
        "Carol tells good jokes.",
        vector_near(&query_vector, 0.0, 53),
    );
    about_user.related_user_ids = ids(&["carol"]);
    about_user.strength = Some(0.8);
    let about_user = t.add_preference(about_user).await.unwrap();
    // On-topic and about the user: both reasons.
    let mut both = new_preference(
        "ada",
        "d",
        "Carol and I share this.",
        vector_near(&query_vector, 0.85, 54),
    );
    both.related_user_ids = ids(&["carol", "dave"]);
    both.strength = Some(0.7);
    let both = t.add_preference(both).await.unwrap();

    let users = ids(&["carol"]);
    let query = InjectionQuery {
        persona_id: "ada",
        query_embedding: &query_vector,
        max_count: 8,
        max_chars: 2000,
        active_user_ids: &users,
    };
    let chosen = t.get_preferences_for_injection(&query).await.unwrap();
    let order: Vec<&str> = chosen.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(chosen.len(), 4, "deduplicated by id");
    assert_eq!(order[0], strong.id, "highest relevance x strength first");
    assert_eq!(*order.last().unwrap(), weak.id);
    let by_id = |id: &str| chosen.iter().find(|c| c.id == id).unwrap();
    assert_eq!(by_id(&strong.id).matched_by, vec![MatchReason::Semantic]);
    assert!(
        by_id(&about_user.id)
            .matched_by
            .contains(&MatchReason::User("carol".into()))
    );
    assert!(
        by_id(&about_user.id).relevance >= 0.5,
        "user floor lifts an off-topic preference about a present user"
    );
    let both_reasons = &by_id(&both.id).matched_by;
    assert!(
        both_reasons.contains(&MatchReason::Semantic)
            && both_reasons.contains(&MatchReason::User("carol".into()))
    );
    assert!(
        !both_reasons.contains(&MatchReason::User("dave".into())),
        "dave is not in the conversation"
    );
    for c in &chosen {
        // Ranked by relevance x decayed strength (just written: hardly decayed at all).
        assert!((c.score - c.relevance * c.decayed_strength).abs() < 1e-12);
        assert!(c.decayed_strength <= c.strength && c.decayed_strength > 0.99 * c.strength);
    }

    let capped = InjectionQuery {
        max_count: 2,
        ..query.clone()
    };
    assert_eq!(
        t.get_preferences_for_injection(&capped)
            .await
            .unwrap()
            .len(),
        2
    );
    // "Strong and relevant." is 20 chars: a 25-char budget fits it and nothing longer than 5.
    let tight = InjectionQuery {
        max_chars: 25,
        ..query.clone()
    };
    let fitted = t.get_preferences_for_injection(&tight).await.unwrap();
    assert_eq!(
        fitted.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        vec![strong.id.as_str()]
    );
    assert!(
        fitted
            .iter()
            .map(|c| c.opinion.chars().count())
            .sum::<usize>()
            <= 25
    );
}

#[tokio::test]
async fn limits_are_enforced_with_errors_that_name_the_field() {
    let t = TestStore::new("limits").await;
    let vector = unit_vector(60);
    let short = vec![0.1f32; 8];
    let error = t
        .search_preferences("ada", &short, 5, false)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::InvalidInput {
                field: "embedding",
                ..
            }
        ),
        "{error}"
    );
    assert!(
        t.search_preferences("ada", &vector, 0, false)
            .await
            .is_err()
    );
    assert!(
        t.search_preferences("ada", &vector, 101, false)
            .await
            .is_err()
    );
    assert!(
        t.search_preferences("a.b", &vector, 5, false)
            .await
            .is_err()
    );
    assert!(
        t.get_preference("ada", "x:y").await.is_err(),
        "a ':' in an id could address another persona's key"
    );
    let query = InjectionQuery {
        persona_id: "ada",
        query_embedding: &vector,
        max_count: 0,
        max_chars: 2000,
        active_user_ids: &[],
    };
    assert!(t.get_preferences_for_injection(&query).await.is_err());
    let query = InjectionQuery {
        max_count: 8,
        max_chars: 20_001,
        ..query
    };
    assert!(t.get_preferences_for_injection(&query).await.is_err());
    let many: Vec<String> = (0..65).map(|i| format!("u{i}")).collect();
    let query = InjectionQuery {
        max_chars: 2000,
        active_user_ids: &many,
        ..query
    };
    assert!(t.get_preferences_for_injection(&query).await.is_err());
    let mut comma = new_preference("ada", "x", "y", vector.clone());
    comma.related_user_ids = ids(&["a,b"]);
    assert!(matches!(
        t.add_preference(comma).await,
        Err(StoreError::InvalidInput {
            field: "related_user_ids",
            ..
        })
    ));
    assert!(
        t.add_preference(new_preference("ada", "  ", "y", vector.clone()))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn ensure_index_is_idempotent() {
    let mut config = common::test_config("index");
    config.redis.text_index = true;
    let t = TestStore::with_config(config).await;
    let first = t.index_info().await.unwrap().unwrap();
    let again = t.ensure_index().await.unwrap();
    assert_eq!(again.attributes, first.attributes);
    assert!(
        !again.attributes.iter().any(|(_, kind)| kind == "VECTOR"),
        "vectors live in the personas' vector sets, not in the shared index: {:?}",
        again.attributes
    );
}

/// With the opt-in full-text index every record keeps its hash too (RediSearch reads hashes)
/// and its element holds injection's view only; without it an active record lives in its
/// element alone. A deployment that turns the index off or on moves each record at its next
/// write, and reads the same preference either way.
#[tokio::test]
async fn the_text_index_keeps_a_hash_for_every_record_and_without_it_an_active_one_has_none() {
    let mut config = common::test_config("placement");
    config.redis.text_index = true;
    let t = TestStore::with_config(config.clone()).await;
    let mut without = config.clone();
    without.redis.text_index = false;
    let plain = PreferenceStore::connect(&without.redis, &without.store)
        .await
        .unwrap();
    let added = t
        .add_preference(new_preference(
            "ada",
            "green tea",
            "I love green tea.",
            unit_vector(5),
        ))
        .await
        .unwrap();
    let key = t.preference_key("ada", &added.id);
    let mut connection = t.connection();
    let place = async |connection: &mut persona_prefs::store::RedisConnection| {
        let hashes: i64 = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(connection)
            .await
            .unwrap();
        let attributes: String = redis::cmd("VGETATTR")
            .arg(t.keys().vectors("ada"))
            .arg(&added.id)
            .query_async(connection)
            .await
            .unwrap();
        let element: serde_json::Value = serde_json::from_str(&attributes).unwrap();
        (hashes == 1, element.get("w").is_some())
    };
    // On a cluster there is no index (RediSearch 2.10 has no coordinator): no hash either.
    let indexed = t.has_text_index();
    assert_eq!(place(&mut connection).await, (indexed, !indexed));
    plain
        .reinforce_preference("ada", &added.id, WriteGuard::default())
        .await
        .unwrap();
    assert_eq!(
        place(&mut connection).await,
        (false, true),
        "without the index: the element is the record"
    );
    let read_plain = plain
        .get_preference("ada", &added.id)
        .await
        .unwrap()
        .unwrap();
    t.reinforce_preference("ada", &added.id, WriteGuard::default())
        .await
        .unwrap();
    assert_eq!(place(&mut connection).await, (indexed, !indexed));
    let read_indexed = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(read_plain.reinforcement_count, 1);
    assert_eq!(read_indexed.reinforcement_count, 2);
    for read in [&read_plain, &read_indexed] {
        assert_eq!(
            (&read.name, &read.opinion, &read.stance, &read.created_at),
            (
                &added.name,
                &added.opinion,
                &added.stance,
                &added.created_at
            ),
            "the same record, wherever it lives"
        );
        assert_eq!(read.provenance, added.provenance);
        assert_eq!(read.related_kg_uuids, added.related_kg_uuids);
    }
}

/// A persona's vector set made under another embedding size or quantisation refuses a write
/// as a whole (naming the fix), instead of writing the hash and failing halfway.
#[tokio::test]
async fn a_write_to_a_vector_set_of_another_size_or_quantisation_is_refused_whole() {
    let t = TestStore::new("misfit").await;
    let added = t
        .add_preference(new_preference("ada", "tea", "I love tea.", unit_vector(3)))
        .await
        .unwrap();
    let mut bigger = t.config.clone();
    bigger.store.embedding_dims = 768;
    let mut binary = t.config.clone();
    binary.store.vector_quantisation = persona_prefs::config::VectorQuantisation::Bin;
    for other in [bigger, binary] {
        let store = PreferenceStore::connect(&other.redis, &other.store)
            .await
            .unwrap();
        let error = store
            .reinforce_preference("ada", &added.id, WriteGuard::default())
            .await
            .unwrap_err();
        assert!(
            matches!(error, StoreError::VectorSetMismatch { .. }),
            "{error:?}"
        );
        assert!(!error.is_retryable(), "{error}");
        assert!(error.to_string().contains("index migrate"), "{error}");
    }
    let unchanged = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(unchanged.reinforcement_count, 0, "nothing written");
}

/// Every command a node runs, scripts' own included (`MONITOR`), from each node of the local
/// cluster when the suite runs on one, else from REDIS_URL's server: a line a command.
async fn command_streams(
    config: &persona_prefs::config::Config,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let urls = if config.redis.cluster_nodes.is_empty() {
        vec![config.redis.url.clone()]
    } else {
        config.redis.cluster_nodes.clone()
    };
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    for url in urls {
        let address = url
            .trim_start_matches("redis://")
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        stream.write_all(b"*1\r\n$7\r\nMONITOR\r\n").await.unwrap();
        let mut lines = tokio::io::BufReader::new(stream).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("+OK"));
        let sender = sender.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
    }
    receiver
}

#[tokio::test]
async fn a_new_preference_is_linked_into_its_vector_set_at_the_configured_build_effort() {
    let mut config = test_config("build_ef");
    config.store.vector_build_ef = 37;
    let t = TestStore::with_config(config).await;
    let mut commands = command_streams(&t.config).await;
    let added = t
        .add_preference(new_preference("ada", "tea", "I love tea.", unit_vector(5)))
        .await
        .unwrap();
    let prefix = format!("\"{}:", t.config.redis.key_prefix);
    let vadd = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let line = commands.recv().await.expect("MONITOR stream ended");
            if line.contains("\"VADD\"") && line.contains(&prefix) {
                return line;
            }
        }
    })
    .await
    .expect("no VADD of this test's vector set within 10 s");
    assert!(vadd.contains("\"EF\" \"37\""), "{vadd}");
    let found = t
        .search_preferences("ada", &unit_vector(5), 1, false)
        .await
        .unwrap();
    assert_eq!(
        found.first().map(|hit| hit.preference.id.as_str()),
        Some(added.id.as_str())
    );
}

#[tokio::test]
async fn an_index_with_a_foreign_schema_is_refused() {
    let config = common::test_config("schema");
    let mut connection = redis::Client::open(config.redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: redis::Value = redis::cmd("FT.CREATE")
        .arg(&config.redis.index_name)
        .arg("ON")
        .arg("HASH")
        .arg("PREFIX")
        .arg(1)
        .arg(format!("{}:persona_pref:", config.redis.key_prefix))
        .arg("SCHEMA")
        .arg("persona_id")
        .arg("TEXT")
        .query_async(&mut connection)
        .await
        .unwrap();
    let store = PreferenceStore::connect(&config.redis, &config.store)
        .await
        .unwrap();
    let error = store.ensure_index().await.unwrap_err().to_string();
    common::cleanup_redis(&config);
    assert!(
        error.contains("persona_id is TEXT, expected TAG")
            && error.contains("category (TAG) is missing")
            && error.contains("index migrate"),
        "{error}"
    );
}

/// The shared index of the layout before per-persona vector sets (an HNSW field over every
/// persona's vectors) is refused, naming the migration.
#[tokio::test]
async fn an_index_of_the_earlier_layout_is_refused() {
    let config = common::test_config("oldschema");
    let mut connection = redis::Client::open(config.redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut create = persona_prefs::store::index::create_command(
        &config.redis.index_name,
        &format!("{}:persona_pref:", config.redis.key_prefix),
    );
    create
        .arg("embedding")
        .arg("VECTOR")
        .arg("HNSW")
        .arg(6)
        .arg("TYPE")
        .arg("FLOAT32")
        .arg("DIM")
        .arg(common::DIMS)
        .arg("DISTANCE_METRIC")
        .arg("COSINE");
    let _: redis::Value = create.query_async(&mut connection).await.unwrap();
    let store = PreferenceStore::connect(&config.redis, &config.store)
        .await
        .unwrap();
    let error = store.ensure_index().await.unwrap_err().to_string();
    common::cleanup_redis(&config);
    assert!(
        error.contains("VECTOR field") && error.contains("index migrate"),
        "{error}"
    );
}

#[tokio::test]
async fn a_failed_search_is_an_error_not_an_empty_result() {
    let t = TestStore::new("failsearch").await;
    let mut connection = t.connection();
    // The persona's vector set is not a vector set: every search of it fails.
    let _: () = redis::cmd("SET")
        .arg(t.keys().vectors("ada"))
        .arg("not a vector set")
        .query_async(&mut connection)
        .await
        .unwrap();
    let error = t
        .search_preferences("ada", &unit_vector(1), 5, false)
        .await
        .unwrap_err();
    assert!(
        !error.is_retryable(),
        "a broken structure will not fix itself: {error}"
    );
    assert!(t.nearest_topics("ada", &unit_vector(1)).await.is_err());
    let query = InjectionQuery {
        persona_id: "ada",
        query_embedding: &unit_vector(1),
        max_count: 8,
        max_chars: 2000,
        active_user_ids: &[],
    };
    assert!(t.get_preferences_for_injection(&query).await.is_err());
}

#[tokio::test]
async fn an_unreachable_redis_is_a_retryable_error() {
    let mut config = common::test_config("down");
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    config.redis.url = format!("redis://127.0.0.1:{port}");
    if !config.redis.cluster_nodes.is_empty() {
        config.redis.cluster_nodes = vec![config.redis.url.clone()];
    }
    config.redis.response_timeout_ms = 300;
    let error = match PreferenceStore::connect(&config.redis, &config.store).await {
        Err(error) => error,
        Ok(store) => store.get_preference("ada", "x").await.unwrap_err(),
    };
    assert!(error.is_retryable(), "{error:?}");
}

/// An effect record lasts as long as its event can come back (`store.effect_ttl_hours`,
/// checked at start-up against how long events and dead letters are kept), or for ever.
#[tokio::test]
async fn effect_records_last_as_long_as_configured_or_for_ever() {
    for (hours, expected_ttl) in [(744u64, 744 * 3600i64), (0, -1)] {
        let mut config = test_config("effectttl");
        config.store.effect_ttl_hours = hours;
        if hours == 0 {
            config.ingest.dlq_max_age_hours = 0;
        }
        config.validate().unwrap();
        let t = TestStore::with_config(config).await;
        let guard = WriteGuard {
            effect_id: Some("discord:c1:m1#0"),
            message: None,
            lock: None,
        };
        t.add_preference_guarded(
            new_preference("ada", "tea", "I love tea.", unit_vector(72)),
            guard,
        )
        .await
        .unwrap();
        let mut connection = t.connection();
        // One field of the persona's effect hash, with a lifetime of its own.
        let effects = t.keys().effects("ada");
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg(&effects)
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(fields, vec!["discord:c1:m1#0".to_string()]);
        let ttls: Vec<i64> = redis::cmd("HTTL")
            .arg(&effects)
            .arg("FIELDS")
            .arg(1)
            .arg(&fields[0])
            .query_async(&mut connection)
            .await
            .unwrap();
        let ttl = ttls[0];
        assert!(
            (expected_ttl - 5..=expected_ttl).contains(&ttl) || (expected_ttl == -1 && ttl == -1),
            "effect_ttl_hours {hours}: TTL {ttl}"
        );
    }
}

#[tokio::test]
async fn writes_under_an_effect_id_apply_once() {
    let t = TestStore::new("effects").await;
    let new = new_preference("ada", "tea", "I love tea.", unit_vector(70));
    let guard = WriteGuard {
        effect_id: Some("m1#0"),
        message: None,
        lock: None,
    };
    let first = t.add_preference_guarded(new.clone(), guard).await.unwrap();
    let again = t.add_preference_guarded(new, guard).await.unwrap();
    assert!(first.applied && !again.applied);
    assert_eq!(first.preference.id, again.preference.id, "no twin");
    assert_eq!(t.stats("ada").await.unwrap().total, 1);

    let id = first.preference.id;
    let reinforce = WriteGuard {
        effect_id: Some("m2#0"),
        message: None,
        lock: None,
    };
    assert!(
        t.reinforce_preference("ada", &id, reinforce)
            .await
            .unwrap()
            .unwrap()
            .applied
    );
    let repeat = t
        .reinforce_preference("ada", &id, reinforce)
        .await
        .unwrap()
        .unwrap();
    assert!(!repeat.applied);
    assert_eq!(
        repeat.reinforcement_count, 1,
        "redelivery never reinforces twice"
    );

    let evolve = WriteGuard {
        effect_id: Some("m3#0"),
        message: None,
        lock: None,
    };
    let v = unit_vector(71);
    let evolution = Evolution {
        new_opinion: "Tea is dull.",
        new_embedding: &v,
        reason: "r",
        new_stance: None,
        expressed_at: None,
        evidence_user_id: None,
    };
    assert!(
        t.evolve_preference("ada", &id, &evolution, evolve)
            .await
            .unwrap()
            .unwrap()
            .applied
    );
    assert!(
        !t.evolve_preference("ada", &id, &evolution, evolve)
            .await
            .unwrap()
            .unwrap()
            .applied
    );
    assert_eq!(
        t.get_preference("ada", &id)
            .await
            .unwrap()
            .unwrap()
            .evolution_history
            .len(),
        1
    );
}

/// Deleting a persona leaves none of its keys behind (preferences, effect records, the lock
/// and its token counter) and touches no other persona.
#[tokio::test]
async fn deleting_a_persona_leaves_nothing_of_it() {
    let t = TestStore::new("delete").await;
    for persona in ["ada", "bob"] {
        let added = t
            .add_preference(new_preference(
                persona,
                "tea",
                "I love tea.",
                unit_vector(81),
            ))
            .await
            .unwrap();
        let locks = PersonaLock::new(t.store.clone(), std::time::Duration::from_secs(5));
        let held = locks.try_acquire(persona).await.unwrap().unwrap();
        let guard = WriteGuard {
            effect_id: Some("discord:c1:m1#0"),
            message: None,
            lock: Some(&held),
        };
        t.reinforce_preference(persona, &added.id, guard)
            .await
            .unwrap()
            .unwrap();
        locks.release(held).await.unwrap();
        // An erasure leaves a record of itself, which must go too.
        t.purge_user(persona, "u1", "erased-1", WriteGuard::default())
            .await
            .unwrap();
    }
    // The persona as a whole key segment: a random preference id of another persona can
    // contain "ada" (a CI run drew one).
    let keys_of = |persona: &'static str| {
        let mut connection = t.connection();
        let prefix = t.config.redis.key_prefix.clone();
        async move {
            let mut keys = Vec::new();
            // The hash tag delimits the persona id in every key.
            for pattern in [format!("{prefix}:*{{{persona}}}*")] {
                let found: Vec<String> = redis::cmd("KEYS")
                    .arg(pattern)
                    .query_async(&mut connection)
                    .await
                    .unwrap();
                keys.extend(found);
            }
            keys
        }
    };
    assert!(
        keys_of("ada").await.len() >= 4,
        "{:?}",
        keys_of("ada").await
    );
    let bobs = keys_of("bob").await;
    t.delete_persona("ada").await.unwrap();
    assert_eq!(keys_of("ada").await, Vec::<String>::new());
    assert_eq!(
        keys_of("bob").await.len(),
        bobs.len(),
        "other personas untouched"
    );

    // The lock works again from a fresh counter, with a token no earlier holder had.
    let locks = PersonaLock::new(t.store.clone(), std::time::Duration::from_secs(5));
    let again = locks.try_acquire("ada").await.unwrap().unwrap();
    assert!(again.token().starts_with("1-"), "{}", again.token());
}

#[tokio::test]
async fn a_write_with_a_lost_lock_is_fenced() {
    let t = TestStore::new("fence").await;
    let added = t
        .add_preference(new_preference("ada", "tea", "I love tea.", unit_vector(80)))
        .await
        .unwrap();
    let locks = PersonaLock::new(t.store.clone(), std::time::Duration::from_millis(200));
    let held = locks.try_acquire("ada").await.unwrap().expect("free lock");
    assert!(
        locks.try_acquire("ada").await.unwrap().is_none(),
        "exclusive"
    );
    let guard = WriteGuard {
        effect_id: None,
        message: None,
        lock: Some(&held),
    };
    assert!(
        t.reinforce_preference("ada", &added.id, guard)
            .await
            .unwrap()
            .is_some()
    );

    // The holder stalls past the expiry; another worker takes the lock.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let newer = locks
        .try_acquire("ada")
        .await
        .unwrap()
        .expect("expired lock is free");
    let error = t
        .reinforce_preference("ada", &added.id, guard)
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Fenced { .. }), "{error:?}");
    let stale_add = t
        .add_preference_guarded(new_preference("ada", "x", "y", unit_vector(81)), guard)
        .await;
    assert!(matches!(stale_add, Err(StoreError::Fenced { .. })));
    assert_eq!(
        t.get_preference("ada", &added.id)
            .await
            .unwrap()
            .unwrap()
            .reinforcement_count,
        1
    );
    // Releasing with the stale token does not free the newer holder's lock.
    locks.release(held).await.unwrap();
    assert!(locks.try_acquire("ada").await.unwrap().is_none());
    locks.release(newer).await.unwrap();
    assert!(locks.try_acquire("ada").await.unwrap().is_some());
}

#[tokio::test]
async fn records_written_by_the_original_system_decode() {
    let t = TestStore::new("legacy").await;
    // The original's hash as `index migrate` leaves it: at this layout's key, then brought
    // into the persona's structures.
    let key = t.keys().preference("stargazer", "abc123");
    let mut connection = t.connection();
    let history = r#"[{"old_opinion":"I like X.","new_opinion":"I love X.","timestamp":"2025-01-01T00:00:00+00:00","reason":"grew on me"}]"#;
    let embedding = persona_prefs::store::query::vector_to_bytes(&unit_vector(90));
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg(&[
            ("id", "abc123"),
            ("persona_id", "stargazer"),
            ("name", "X"),
            ("opinion", "I love X."),
            ("category", "aesthetic"),
            ("strength", "0.6"),
            ("triggering_user_id", "42"),
            ("triggering_message_id", "43"),
            ("source_platform", "discord"),
            ("source_channel_id", "44"),
            ("related_user_ids", "[]"),
            ("related_user_ids_index", ""),
            ("related_kg_uuids", "[]"),
            ("evolution_history", history),
            ("active", "1"),
            ("created_at", "2025-01-01T00:00:00+00:00"),
            ("last_reinforced", "2025-01-01T00:00:00+00:00"),
            ("reinforcement_count", "3"),
        ])
        .arg("embedding")
        .arg(embedding)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(t.resync_preference("stargazer", "abc123").await.unwrap());
    let legacy = t
        .get_preference("stargazer", "abc123")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(legacy.reinforcement_count, 3);
    assert_eq!(legacy.stance, None);
    assert_eq!(legacy.evolution_history[0].reason, "grew on me");
    let found = t
        .search_preferences("stargazer", &unit_vector(90), 1, false)
        .await
        .unwrap();
    assert_eq!(found[0].preference.id, "abc123");
}

/// An erasure over a persona larger than one lock lifetime renews the lock as it goes instead
/// of being fenced halfway.
#[tokio::test]
async fn an_erasure_longer_than_the_lock_ttl_renews_the_lock_and_finishes() {
    use futures::StreamExt;
    let t = TestStore::new("longpurge").await;
    // 3000 preferences take 2-4 s to erase here, several lock lifetimes (the whole test took
    // 25 s under CI's load); the lifetime itself is long enough that a stall of a shared CI
    // machine (a few hundred ms between two scripts) does not take the lock from a holder
    // that is renewing as it should.
    let adds = (0..3000u64).map(|n| {
        let mut new = new_preference("ada", &format!("topic {n}"), "About u1.", unit_vector(n));
        new.related_user_ids = ids(&["u1"]);
        new.provenance.triggering_user_id = "u1".into();
        t.add_preference(new)
    });
    let added: Vec<_> = futures::stream::iter(adds)
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(added.iter().all(Result::is_ok));

    let ttl = std::time::Duration::from_millis(600);
    let locks = PersonaLock::new(t.store.clone(), ttl);
    let held = locks.try_acquire("ada").await.unwrap().unwrap();
    let guard = WriteGuard {
        effect_id: None,
        message: None,
        lock: Some(&held),
    };
    let started = std::time::Instant::now();
    let report = t
        .purge_user("ada", "u1", "erased-1", guard)
        .await
        .expect("the erasure finishes");
    // Printed rather than asserted (no timing assertions): a run quicker than one lifetime
    // proved less, and the line shows it.
    eprintln!(
        "the erasure took {:?} against a lock lifetime of {ttl:?}",
        started.elapsed()
    );
    assert_eq!(report.rewritten.len(), 3000);
    assert!(
        held.renew(&t.store).await.unwrap(),
        "the lock is still ours at the end"
    );
}

/// An effect record names the preference it was applied to: a write to another preference
/// under the same effect id is refused whole, not taken as done.
#[tokio::test]
async fn an_effect_record_of_another_preference_is_refused() {
    let t = TestStore::new("effectmismatch").await;
    let a = t
        .add_preference(new_preference("ada", "tea", "I love tea.", unit_vector(80)))
        .await
        .unwrap();
    let b = t
        .add_preference(new_preference(
            "ada",
            "rain",
            "I love rain.",
            unit_vector(81),
        ))
        .await
        .unwrap();
    let guard = WriteGuard {
        effect_id: Some("shared-effect"),
        message: None,
        lock: None,
    };
    let first = t.reinforce_preference("ada", &a.id, guard).await.unwrap();
    assert!(first.unwrap().applied);
    let error = t
        .reinforce_preference("ada", &b.id, guard)
        .await
        .expect_err("the record names another preference");
    assert!(
        matches!(
            error,
            persona_prefs::store::StoreError::EffectMismatch { .. }
        ),
        "{error}"
    );
    assert!(!error.is_retryable(), "permanent: retrying cannot help");
    let untouched = t.get_preference("ada", &b.id).await.unwrap().unwrap();
    assert_eq!(untouched.reinforcement_count, 0);
}

/// Records stay bounded however much evidence and how many changes of mind a preference
/// gathers: 20 000 users reinforce it and it changes its mind 30 times with 4 KB opinions. The
/// lists keep their newest entries and count the rest; erasing a user stays one linear pass.
/// Prints the record's size and the purge's time (measured here, not asserted: shared
/// machines are noisy).
#[tokio::test(flavor = "multi_thread")]
async fn records_stay_bounded_under_20000_evidence_users_and_many_changes_of_mind() {
    let t = TestStore::new("bounded").await;
    let defaults = persona_prefs::config::Config::defaults().store;
    let (evidence_cap, history_cap) = (defaults.max_evidence_users, defaults.max_evolution_history);
    let added = t
        .add_preference(new_preference("ada", "tea", "I love tea.", unit_vector(90)))
        .await
        .unwrap();
    let id = added.id.clone();
    let users: Vec<String> = (0..20_000).map(|n| format!("user-{n:05}")).collect();
    for chunk in users.chunks(200) {
        futures::future::try_join_all(chunk.iter().map(|user| {
            let provenance = Provenance {
                triggering_user_id: user.clone(),
                ..Provenance::default()
            };
            let id = &id;
            let t = &t;
            async move {
                t.reinforce_preference_from("ada", id, &provenance, WriteGuard::default())
                    .await
            }
        }))
        .await
        .unwrap();
    }
    let reinforced = t.get_preference("ada", &id).await.unwrap().unwrap();
    assert_eq!(reinforced.reinforcement_count, 20_000);
    let opinion = "I have changed my mind about tea again. ".repeat(100);
    let vector = unit_vector(91);
    let mut evolutions = 0;
    for n in 0..30 {
        let reason = format!("change {n}");
        let evolution = Evolution {
            new_opinion: &opinion,
            new_embedding: &vector,
            reason: &reason,
            new_stance: None,
            expressed_at: None,
            evidence_user_id: None,
        };
        evolutions = t
            .evolve_preference("ada", &id, &evolution, WriteGuard::default())
            .await
            .unwrap()
            .unwrap()
            .evolutions;
    }
    assert_eq!(evolutions, 30, "the count goes on past the cap");

    let stored = t.get_preference("ada", &id).await.unwrap().unwrap();
    assert_eq!(
        stored.reinforcement_count, 0,
        "a change of mind starts the count again"
    );
    assert_eq!(stored.evidence_user_ids.len(), evidence_cap);
    // The last 200 came in one concurrent batch, after all the others: they are what is kept.
    let kept: std::collections::BTreeSet<&String> = stored.evidence_user_ids.iter().collect();
    let newest: std::collections::BTreeSet<&String> =
        users[users.len() - evidence_cap..].iter().collect();
    assert_eq!(kept, newest, "the most recent evidence is kept");
    // user-1 (the creator) and the first 19 800 - 1 of the others were dropped by the cap.
    assert_eq!(
        stored.evidence_users_dropped as usize,
        20_001 - evidence_cap,
        "every user beyond the cap is counted"
    );
    assert_eq!(stored.evolution_history.len(), history_cap);
    assert_eq!(stored.history_entries_dropped as usize, 30 - history_cap);
    assert_eq!(
        stored.evolution_history.last().unwrap().reason,
        "change 29",
        "the newest history is kept"
    );
    let key = t.keys().preference("ada", &id);
    let size: usize = t
        .raw_hash(&key)
        .await
        .unwrap()
        .iter()
        .map(|(field, value)| field.len() + value.len())
        .sum();
    // Ten history entries of two 4 KB opinions, the current opinion, 200 evidence users and
    // 20 reinforcements: under 128 KiB. Unbounded, this record would hold 20 000 users and 30
    // entries (about 500 KB).
    assert!(size < 128 * 1024, "the record is {size} bytes");

    // Erasing a user in the list, and one dropped from it: each a single linear pass. The
    // preference has other evidence (listed and counted), so it stays active.
    for user in ["user-19999", "user-00000"] {
        let started = std::time::Instant::now();
        let report = t
            .purge_user(
                "ada",
                user,
                &format!("erased-{user}"),
                WriteGuard::default(),
            )
            .await
            .unwrap();
        println!(
            "bounded record: {size} bytes; purge of {user}: {:.2} ms, {report:?}",
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    let after = t.get_preference("ada", &id).await.unwrap().unwrap();
    assert!(after.active);
    assert!(!after.evidence_user_ids.contains(&"user-19999".to_string()));
    assert!(
        after
            .evidence_user_ids
            .contains(&"erased-user-19999".to_string())
    );
}

/// An erasure record is a keyed digest: not the bare SHA-256 anyone can recompute for every
/// likely user id, and unreadable under another key. Records from before keying still count,
/// and go when the same user is erased again.
#[tokio::test]
async fn erasure_records_are_keyed_digests() {
    use hmac::Mac;
    use sha2::Digest;
    let mut config = test_config("erasurekey");
    config.store.erasure_secret = persona_prefs::config::Secret("a-secret-of-16-bytes+".into());
    let t = TestStore::with_config(config.clone()).await;
    t.purge_user("ada", "u1", "erased-u1", WriteGuard::default())
        .await
        .unwrap();
    let key = format!("{}:persona_pref_erased:{{ada}}", config.redis.key_prefix);
    let fields: Vec<String> = t
        .raw_hash(&key)
        .await
        .unwrap()
        .into_iter()
        .map(|(field, _)| field)
        .collect();
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"a-secret-of-16-bytes+").unwrap();
    mac.update(b"ada\0u1");
    let keyed = hex(&mac.finalize().into_bytes());
    let bare = hex(&sha2::Sha256::digest(b"ada\0u1"));
    assert_eq!(
        fields,
        vec![keyed],
        "one keyed field, not the bare digest {bare}"
    );
    assert!(t.erasures("ada", &["u1"]).await.unwrap().contains_key("u1"));

    // Under another key the record names nobody.
    let mut other = config.clone();
    other.store.erasure_secret = persona_prefs::config::Secret("another-secret-16-bytes".into());
    let elsewhere = PreferenceStore::connect(&other.redis, &other.store)
        .await
        .unwrap();
    assert!(elsewhere.erasures("ada", &["u1"]).await.unwrap().is_empty());

    // A record of the bare-digest days is honoured, and replaced when erased again.
    let mut connection = t.connection();
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg(hex(&sha2::Sha256::digest(b"ada\0u2")))
        .arg(r#"{"pseudonym": "erased-u2", "erased_at": "2026-11-01T00:00:00Z"}"#)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(t.erasures("ada", &["u2"]).await.unwrap().contains_key("u2"));
    t.purge_user("ada", "u2", "erased-u2", WriteGuard::default())
        .await
        .unwrap();
    let fields = t.raw_hash(&key).await.unwrap().len();
    assert_eq!(fields, 2, "u1 and u2, both keyed now");
    assert!(t.erasures("ada", &["u2"]).await.unwrap().contains_key("u2"));
}

/// A retracted preference leaves the vector set, so its vector waits in its hash: a restore
/// puts it back (and the hash's copy goes), and an administrative search over retracted
/// preferences scores it from there.
#[tokio::test]
async fn a_retracted_preference_keeps_its_vector_for_a_restore() {
    let t = TestStore::new("vectorpark").await;
    let added = t
        .add_preference(new_preference(
            "ada",
            "opera",
            "I love opera.",
            unit_vector(5),
        ))
        .await
        .unwrap();
    let key = t.preference_key("ada", &added.id);
    let hash_vector = || {
        let mut connection = t.connection();
        let key = key.clone();
        async move {
            let bytes: Option<Vec<u8>> = redis::cmd("HGET")
                .arg(&key)
                .arg("embedding")
                .query_async(&mut connection)
                .await
                .unwrap();
            bytes.map(|b| persona_prefs::store::query::bytes_to_vector(&b))
        }
    };
    assert_eq!(hash_vector().await, None);

    t.retract_preference("ada", &added.id, "", WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    let parked = hash_vector()
        .await
        .expect("retracted: the vector waits in the hash");
    assert!(cosine(&parked, &unit_vector(5)) > 0.9999);
    let found = t
        .search_preferences("ada", &unit_vector(5), 1, true)
        .await
        .unwrap();
    assert_eq!(
        found[0].preference.id, added.id,
        "scored from the parked vector"
    );
    assert!(found[0].score < 1e-3, "{}", found[0].score);
    assert!(
        t.search_preferences("ada", &unit_vector(5), 1, false)
            .await
            .unwrap()
            .is_empty(),
        "not searchable while retracted"
    );

    t.restore_preference("ada", &added.id, 1, "", WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        hash_vector().await,
        None,
        "back in the set, out of the hash"
    );
    let found = t
        .search_preferences("ada", &unit_vector(5), 1, false)
        .await
        .unwrap();
    assert_eq!(found[0].preference.id, added.id);
    assert!(found[0].score < 1e-3, "{}", found[0].score);
}

/// The user pass scores a present user's preferences by their cosine with the query (read
/// from the vector set's own bytes under Q8, from its dequantised vector otherwise) and keeps
/// the nearest: ten off-topic preferences about carol (similarity 0.02 to 0.20, under the
/// semantic pass's floor), the least similar the strongest. Two asked for, so the pass keeps
/// the four nearest (0.20 to 0.14), and of those the two strongest are chosen.
#[tokio::test]
async fn the_user_pass_keeps_the_present_users_preferences_nearest_the_query() {
    for quantisation in [
        persona_prefs::config::VectorQuantisation::Q8,
        persona_prefs::config::VectorQuantisation::Fp32,
    ] {
        let mut config = test_config("user-pass");
        config.store.vector_quantisation = quantisation;
        let t = TestStore::with_config(config).await;
        let query_vector = unit_vector(70);
        let mut by_similarity = Vec::new();
        for step in 1..=10u32 {
            let similarity = 0.02 * step as f32;
            let mut preference = new_preference(
                "ada",
                &format!("carol-{step}"),
                &format!("Carol's remark number {step}."),
                vector_near(&query_vector, similarity, 70 + step as u64),
            );
            preference.related_user_ids = ids(&["carol"]);
            preference.strength = Some(1.0 - 0.05 * step as f64);
            by_similarity.push(t.add_preference(preference).await.unwrap().id);
        }
        let users = ids(&["carol"]);
        // Searched in carol's own vector set, then (the set gone, as in memory from before
        // those sets) ranked in the service from her candidates' stored vectors.
        for path in ["carol's set", "her candidates"] {
            let chosen = t
                .get_preferences_for_injection(&InjectionQuery {
                    persona_id: "ada",
                    query_embedding: &query_vector,
                    max_count: 2,
                    max_chars: 2000,
                    active_user_ids: &users,
                })
                .await
                .unwrap();
            let chosen: Vec<&str> = chosen.iter().map(|c| c.id.as_str()).collect();
            // Steps 7 and 8 (0.14, 0.16): the strongest of the four nearest.
            assert_eq!(
                chosen,
                vec![by_similarity[6].as_str(), by_similarity[7].as_str()],
                "{quantisation:?}, {path}"
            );
            let _: i64 = redis::cmd("DEL")
                .arg(t.keys().about_vectors("ada", "carol"))
                .query_async(&mut t.connection())
                .await
                .unwrap();
        }
    }
}

/// The user pass searches each present user's own vector set, which every write keeps equal to
/// the user's entries in the about-set once the user has `USER_SET_MIN` of them (fewer are
/// read one by one); memory written before those sets (none, or one that lost members) is
/// still answered, by reading the user's candidates, until `index migrate` rebuilds the set.
/// Each member carries its preference's attributes, kept in step by every write (a set from
/// before that is answered by reading them from the persona's set, and rebuilt by the
/// migration). Retraction, erasure and deletion take members and sets away.
#[tokio::test]
async fn a_users_own_vector_set_follows_every_write_and_a_missing_one_is_not_a_wrong_answer() {
    use persona_prefs::store::keys::USER_SET_MIN;
    let t = TestStore::new("user-sets").await;
    let query_vector = unit_vector(90);
    // Weak preferences nearest the query fill the semantic pass (2 × 3 hits), so what is
    // chosen about the users comes from the user pass alone.
    for step in 1..=8u32 {
        let mut preference = new_preference(
            "ada",
            &format!("other-{step}"),
            &format!("Another remark number {step}."),
            vector_near(&query_vector, 0.9 + 0.01 * step as f32, 200 + step as u64),
        );
        preference.strength = Some(0.02);
        t.add_preference(preference).await.unwrap();
    }
    let mut by_similarity = Vec::new();
    for step in 1..=12u32 {
        let mut preference = new_preference(
            "ada",
            &format!("dana-{step}"),
            &format!("Dana's remark number {step}."),
            vector_near(&query_vector, 0.5 + 0.03 * step as f32, 90 + step as u64),
        );
        preference.related_user_ids = ids(&["dana"]);
        by_similarity.push(t.add_preference(preference).await.unwrap().id);
    }
    // Nearest first: the last added is the nearest.
    by_similarity.reverse();
    // Eve's are farther than any of dana's: with both present, the nearest of either user's.
    let mut eves = Vec::new();
    for step in 1..=USER_SET_MIN as u32 {
        let mut preference = new_preference(
            "ada",
            &format!("eve-{step}"),
            &format!("Eve's remark number {step}."),
            vector_near(&query_vector, 0.5 + 0.001 * step as f32, 300 + step as u64),
        );
        preference.related_user_ids = ids(&["eve"]);
        eves.push(t.add_preference(preference).await.unwrap().id);
    }
    let reading = t.connection();
    // A raw command, to leave the states older or damaged memory would.
    let raw = |args: &[&str]| {
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        let mut connection = reading.clone();
        async move {
            command
                .query_async::<redis::Value>(&mut connection)
                .await
                .unwrap()
        }
    };
    let members = |user: &str| {
        let set = t.keys().about_vectors("ada", user);
        let mut connection = reading.clone();
        async move {
            let mut found: Vec<String> = redis::cmd("VRANDMEMBER")
                .arg(&set)
                .arg(100)
                .query_async(&mut connection)
                .await
                .unwrap();
            found.sort();
            found
        }
    };
    let sorted = |list: &[String]| {
        let mut list = list.to_vec();
        list.sort();
        list
    };
    assert_eq!(members("dana").await, sorted(&by_similarity));
    assert_eq!(members("eve").await, sorted(&eves));
    let users = ids(&["eve", "dana"]);
    let inject = |max_count: usize| {
        let users = users.clone();
        let query_vector = query_vector.clone();
        let t = &t;
        async move {
            let chosen = t
                .get_preferences_for_injection(&InjectionQuery {
                    persona_id: "ada",
                    query_embedding: &query_vector,
                    max_count,
                    max_chars: 2000,
                    active_user_ids: &users,
                })
                .await
                .unwrap();
            for c in &chosen {
                assert!(c.opinion.starts_with("Dana's remark"), "{c:?}");
            }
            chosen.into_iter().map(|c| c.id).collect::<Vec<_>>()
        }
    };
    let from_the_sets = inject(3).await;
    assert_eq!(from_the_sets, by_similarity[..3].to_vec());

    // Each member of a user's set carries its attributes as the persona's set holds them (the
    // user pass reads them from its search), and a reinforcement keeps the copy in step.
    let attributes = |key: String, id: String| {
        let mut connection = reading.clone();
        async move {
            redis::cmd("VGETATTR")
                .arg(key)
                .arg(id)
                .query_async::<Option<String>>(&mut connection)
                .await
                .unwrap()
        }
    };
    let persona_set = t.keys().vectors("ada");
    let dana = t.keys().about_vectors("ada", "dana");
    for id in &by_similarity {
        let own = attributes(dana.clone(), id.clone()).await;
        assert!(own.is_some(), "{id} carries attributes in dana's set");
        // What injection reads of the persona's element (which holds the whole record).
        let whole = attributes(persona_set.clone(), id.clone()).await.unwrap();
        let own: serde_json::Value = serde_json::from_str(&own.unwrap()).unwrap();
        assert_eq!(own, common::injection_view(&whole), "{id}");
    }
    t.reinforce_preference("ada", &by_similarity[0], WriteGuard::default())
        .await
        .unwrap();
    let reinforced = attributes(dana.clone(), by_similarity[0].clone()).await;
    assert!(
        reinforced.as_deref().unwrap().contains("\"rc\":1"),
        "{reinforced:?}"
    );
    // Voiced again since its stance: decay counts from then, so the time is kept.
    assert!(
        reinforced.as_deref().unwrap().contains("\"lr\":"),
        "{reinforced:?}"
    );
    let whole = attributes(persona_set.clone(), by_similarity[0].clone())
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&reinforced.unwrap()).unwrap(),
        common::injection_view(&whole)
    );
    assert_eq!(inject(3).await, from_the_sets);
    // A set built before its members carried attributes: the same answer, the hits'
    // attributes read from the persona's set.
    for id in &by_similarity {
        raw(&["VSETATTR", &dana, id, ""]).await;
    }
    assert_eq!(
        attributes(dana.clone(), by_similarity[0].clone()).await,
        None
    );
    assert_eq!(inject(3).await, from_the_sets);

    // One of eve's retracted: under the threshold her set goes (at a `USER_SET_MIN` of 1, with
    // her last view), and whatever candidates she has left are read one by one beside dana's
    // set.
    t.retract_preference("ada", &eves[0], "", WriteGuard::default())
        .await
        .unwrap();
    assert!(members("eve").await.is_empty());
    assert_eq!(inject(3).await, from_the_sets);
    // Restored: at the threshold again, her set is rebuilt whole.
    t.restore_preference("ada", &eves[0], 1, "", WriteGuard::default())
        .await
        .unwrap();
    assert_eq!(members("eve").await, sorted(&eves));

    // Memory from before the sets: dana has none, or one short. Same answer, from the
    // candidates.
    raw(&["VREM", &dana, &by_similarity[0]]).await;
    assert_eq!(inject(3).await, from_the_sets);
    raw(&["DEL", &dana]).await;
    assert_eq!(inject(3).await, from_the_sets);
    // A stray set of another size under her name (not whole, so not read): its search's error
    // does not fail the injection.
    raw(&["VADD", &dana, "VALUES", "3", "1", "0", "0", "stray"]).await;
    assert_eq!(inject(3).await, from_the_sets);
    raw(&["DEL", &dana]).await;
    // A write leaves a set that is not whole to `index migrate`, which resyncs every
    // preference and then settles every user: whole again.
    t.resync_preference("ada", &by_similarity[5]).await.unwrap();
    assert!(members("dana").await.is_empty());
    assert_eq!(inject(3).await, from_the_sets);
    // Eve's set is whole but, as one built before members carried attributes, without them:
    // the migration rebuilds it with them.
    let eve = t.keys().about_vectors("ada", "eve");
    raw(&["VSETATTR", &eve, &eves[0], ""]).await;
    assert_eq!(attributes(eve.clone(), eves[0].clone()).await, None);
    assert_eq!(t.settle_user_vector_sets("ada").await.unwrap(), 2);
    assert_eq!(members("dana").await, sorted(&by_similarity));
    assert_eq!(members("eve").await, sorted(&eves));
    for id in by_similarity.iter().chain(&eves) {
        let set = if eves.contains(id) { &eve } else { &dana };
        let own = attributes(set.clone(), id.clone()).await.unwrap();
        let whole = attributes(persona_set.clone(), id.clone()).await.unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&own).unwrap(),
            common::injection_view(&whole),
            "{id} rebuilt with its attributes"
        );
    }
    assert_eq!(inject(3).await, from_the_sets);

    // A retracted preference leaves the set, and a restored one comes back.
    t.retract_preference("ada", &by_similarity[0], "", WriteGuard::default())
        .await
        .unwrap();
    assert_eq!(members("dana").await, sorted(&by_similarity[1..]));
    assert_eq!(inject(3).await, by_similarity[1..4].to_vec());
    t.restore_preference("ada", &by_similarity[0], 1, "", WriteGuard::default())
        .await
        .unwrap();
    assert_eq!(members("dana").await, sorted(&by_similarity));
    assert_eq!(inject(3).await, from_the_sets);

    // An erased user's set goes with the user; the other user's stays until the persona goes.
    t.purge_user("ada", "dana", "erased-dana", WriteGuard::default())
        .await
        .unwrap();
    let exists = |key: String| {
        let mut connection = reading.clone();
        async move {
            redis::cmd("EXISTS")
                .arg(key)
                .query_async::<i64>(&mut connection)
                .await
                .unwrap()
        }
    };
    assert_eq!(exists(dana).await, 0);
    assert_eq!(exists(eve.clone()).await, 1);
    t.delete_persona("ada").await.unwrap();
    assert_eq!(exists(eve).await, 0);
}

/// The registry walk that erasure everywhere pages through reaches every persona registered
/// for the whole walk, in pages of the size asked for, while personas are written (a write
/// moves one to the end, the cursor's own among them), deleted and added, and while many share
/// one score (a migration registers personas at 0).
#[tokio::test(flavor = "multi_thread")]
async fn the_registry_walk_pages_and_reaches_every_persona_present_throughout() {
    let t = TestStore::new("registry-walk").await;
    let tied: Vec<String> = (0..40).map(|n| format!("tied-{n:02}")).collect();
    t.register_personas(&tied).await.unwrap();
    for n in 0..10 {
        t.register_persona(&format!("written-{n}")).await.unwrap();
    }
    let throughout: Vec<String> = tied
        .iter()
        .filter(|id| id.as_str() != "tied-39")
        .cloned()
        .chain((0..10).map(|n| format!("written-{n}")))
        .collect();

    let mut visited: Vec<String> = Vec::new();
    let mut moved = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let (next, page) = t.scan_personas(&cursor, 7).await.unwrap();
        pages += 1;
        assert!(page.len() <= 7, "{page:?}");
        visited.extend(page.iter().cloned());
        if next.is_empty() {
            break;
        }
        assert_eq!(page.len(), 7, "only the last page is short");
        match pages {
            // The cursor's own persona is written: the next page starts after where it was.
            1 => {
                let (_, last) = next.split_once(':').unwrap();
                moved.push(last.to_string());
                t.register_persona(last).await.unwrap();
            }
            // One already visited and one not yet visited are written; one not yet visited
            // is deleted; one is registered for the first time.
            2 => {
                for id in [&visited[0], "tied-30"] {
                    moved.push(id.to_string());
                    t.register_persona(id).await.unwrap();
                }
                t.delete_persona("tied-39").await.unwrap();
                t.register_persona("newcomer").await.unwrap();
            }
            _ => {}
        }
        cursor = next;
        assert!(pages < 100, "the walk ends");
    }

    assert!(pages >= 7, "paged: {pages}");
    for id in &throughout {
        assert!(visited.contains(id), "{id} was never visited: {visited:?}");
    }
    assert!(
        !visited.iter().any(|id| id == "tied-39"),
        "deleted before its page"
    );
    for id in &visited {
        let times = visited.iter().filter(|other| *other == id).count();
        assert!(
            times == 1 || (times == 2 && moved.contains(id)),
            "{id} visited {times} times"
        );
    }
    // A cursor that no walk returned is refused, naming the field.
    let error = t.scan_personas("not-a-cursor", 7).await.unwrap_err();
    assert!(error.to_string().contains("cursor"), "{error}");
}

/// A change of mind, with evidence, whose texts are full of quotes and apostrophes.
fn a_change_of_mind_full_of_quotes(new_embedding: &[f32]) -> Evolution<'_> {
    Evolution {
        new_opinion: r#"I've changed my mind: "meh"."#,
        new_embedding,
        reason: r#"they said "it's overrated""#,
        new_stance: None,
        expressed_at: None,
        evidence_user_id: Some("user-9"),
    }
}

/// Fields that hold JSON (history, evidence, voicings, …) are kept in an element's attributes
/// with quotes and apostrophes swapped, so their structure costs no escapes: texts full of
/// both read back exactly, and attributes written before (`w` 1, the JSON as it was) still
/// read, and are re-encoded at their next write.
#[tokio::test]
async fn texts_with_quotes_and_apostrophes_survive_the_compact_encoding_and_the_old_one() {
    let t = TestStore::new("quotes").await;
    let tricky = r#"It's "the" best \ ever, isn't it? '"'"#;
    let added = t
        .add_preference(new_preference("ada", "films", tricky, unit_vector(5)))
        .await
        .unwrap();
    let new_vector = unit_vector(6);
    let evolution = a_change_of_mind_full_of_quotes(&new_vector);
    t.evolve_preference("ada", &added.id, &evolution, WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    let stored = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    let entry = &stored.evolution_history[0];
    assert_eq!(entry.old_opinion.as_deref(), Some(tricky));
    assert_eq!(entry.reason, r#"they said "it's overrated""#);
    assert_eq!(stored.evidence_user_ids, ids(&["user-1", "user-9"]));

    if t.has_text_index() {
        return; // every record keeps its hash; the element holds injection's view only
    }
    let mut connection = t.connection();
    let vectors = t.keys().vectors("ada");
    let mut element = element_attributes(&mut connection, &vectors, &added.id).await;
    let history = element["eh"].as_str().unwrap().to_string();
    assert!(history.starts_with("[{'"), "{history}");
    assert_eq!(element["w"], 2, "{element}");

    // The same record as the earlier encoding wrote it: JSON as it is, `w` 1.
    for field in ["eh", "eu", "kg", "rf", "vo", "bl"] {
        if let Some(text) = element
            .get(field)
            .and_then(|v| v.as_str())
            .map(swapped_quotes)
        {
            element[field] = serde_json::Value::String(text);
        }
    }
    element["w"] = 1.into();
    let _: () = redis::cmd("VSETATTR")
        .arg(&vectors)
        .arg(&added.id)
        .arg(element.to_string())
        .query_async(&mut connection)
        .await
        .unwrap();
    let earlier = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(
        Preference {
            decayed_strength: None,
            ..earlier.clone()
        },
        Preference {
            decayed_strength: None,
            ..stored.clone()
        }
    );
    t.reinforce_preference("ada", &added.id, WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    let element = element_attributes(&mut connection, &vectors, &added.id).await;
    assert_eq!(element["w"], 2, "re-encoded at its next write: {element}");
    let reinforced = t.get_preference("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(reinforced.evolution_history, stored.evolution_history);
    assert_eq!(reinforced.opinion, stored.opinion);
}

/// A voicing whose texts and numbers are awkward to encode: quotes, apostrophes, a slash, and a
/// strength of seventeen digits, which must come back to the last bit.
fn an_awkward_voicing(
    at: &str,
    message: &str,
    opinion: &str,
    related_users: &[&str],
) -> persona_prefs::model::timeline::Voicing {
    persona_prefs::model::timeline::Voicing {
        at: persona_prefs::timestamp::Timestamp::parse(at).unwrap(),
        stance: Some(persona_prefs::store::Stance::Against),
        strength: 0.1 + 0.2,
        topic: "pineapple / pizza".into(),
        opinion: opinion.into(),
        category: "culinary".into(),
        provenance: Provenance {
            triggering_user_id: "o'neil".into(),
            triggering_message_id: format!("{message}-0"),
            persona_message_id: format!("{message}-1"),
            source_platform: "discord".into(),
            source_channel_id: "chan \"1\"".into(),
        },
        related_user_ids: ids(related_users),
        related_kg_uuids: ids(&["kg-1"]),
    }
}

/// A preference voiced once holds that voicing twice: as its timeline and as its own fields,
/// which the voicing created. Its element keeps the fields only (`vr` in the voicing's place,
/// about 230 of 500 bytes), and the timeline reads back exactly, however awkward its texts
/// and numbers. A second voicing keeps the timeline as it is.
#[tokio::test]
async fn a_preference_voiced_once_keeps_its_voicing_once_and_reads_it_back_exactly() {
    use persona_prefs::model::timeline::{Voiced, voice};

    let t = TestStore::new("voiced-once").await;
    let voicing = |at: &str, message: &str, opinion: &str| {
        an_awkward_voicing(at, message, opinion, &["sam", "o'neil"])
    };
    let first = t
        .checked_voicing(voicing(
            "2026-11-20T09:26:00.123456Z",
            "m1",
            "It's \"vile\" \\ truly, isn't it?\n\u{e9} \u{1f34d} /",
        ))
        .unwrap();
    let added = t
        .add_voiced(
            "ada",
            first.clone(),
            None,
            &unit_vector(3),
            WriteGuard::default(),
        )
        .await
        .unwrap()
        .preference;
    let stored = t.timeline("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(stored.timeline.voicings, vec![first.clone()]);
    assert_eq!(added.strength.to_bits(), (0.1f64 + 0.2).to_bits());

    let mut connection = t.connection();
    let vectors = t.keys().vectors("ada");
    if !t.has_text_index() {
        let mut once = element_attributes(&mut connection, &vectors, &added.id).await;
        assert!(once.get("vo").is_none(), "{once}");
        assert_eq!(once["vr"], 1, "{once}");

        // An element written before (the voicing kept as it is, quotes swapped) reads the
        // same, and `index migrate`'s resync of every preference writes it the short way.
        let swapped = swapped_quotes(&serde_json::to_string(&stored.timeline.voicings).unwrap());
        once.as_object_mut().unwrap().remove("vr");
        once["vo"] = swapped.into();
        let _: () = redis::cmd("VSETATTR")
            .arg(&vectors)
            .arg(&added.id)
            .arg(once.to_string())
            .query_async(&mut connection)
            .await
            .unwrap();
        let earlier = t.timeline("ada", &added.id).await.unwrap().unwrap();
        assert_eq!(earlier.timeline.voicings, vec![first.clone()]);
        assert!(t.resync_preference("ada", &added.id).await.unwrap());
        let resynced = element_attributes(&mut connection, &vectors, &added.id).await;
        assert!(resynced.get("vo").is_none(), "{resynced}");
        assert_eq!(resynced["vr"], 1, "{resynced}");
    }

    // A second voicing (another message, the same stance): the timeline holds two.
    let second = t
        .checked_voicing(voicing("2026-11-21T10:00:00Z", "m2", "Still vile."))
        .unwrap();
    let Voiced::Changed(change) = voice(
        &stored.identity,
        &stored.timeline,
        second.clone(),
        &t.timeline_rules(),
    ) else {
        panic!("a second voicing from another message changes the preference");
    };
    assert_eq!(
        t.write_voiced(&stored, &change, None, WriteGuard::default())
            .await
            .unwrap(),
        Some(true)
    );
    let twice = t.timeline("ada", &added.id).await.unwrap().unwrap();
    assert_eq!(twice.timeline.voicings, vec![first, second]);
    if !t.has_text_index() {
        let kept = element_attributes(&mut connection, &vectors, &added.id).await;
        assert!(kept.get("vr").is_none(), "{kept}");
        assert!(
            kept["vo"].as_str().unwrap().starts_with("[{'"),
            "the voicings as they are: {kept}"
        );
    }
}

/// The service decodes an element's attributes itself (`READ` hands them over raw, so Redis's
/// one thread no longer decodes every record ingest reads). It must read exactly what the
/// write scripts read (`record_from_attributes` in record.lua): checked here against that Lua,
/// run in Redis on the same elements, for records of every shape the scripts write and for
/// attributes as earlier versions wrote them. An add's and a replayed voicing's writes are
/// encoded in the service too (`ADD` and `APPLY` place them), and must be what record.lua
/// would write.
#[tokio::test]
async fn the_service_reads_and_encodes_an_elements_record_as_the_write_scripts_do() {
    let t = TestStore::new("element-record").await;
    let mut written = Vec::new();
    // Awkward texts, related users and knowledge-graph ids, a change of mind with evidence.
    let mut tricky = new_preference(
        "ada",
        "films / \"noir\"",
        r#"It's "the" best \ ever, isn't it? é 🍍"#,
        unit_vector(11),
    );
    tricky.related_user_ids = ids(&["sam", "o'neil"]);
    tricky.related_kg_uuids = ids(&["kg-1", "kg/2"]);
    let tricky = t.add_preference(tricky).await.unwrap();
    let new_vector = unit_vector(12);
    let evolution = a_change_of_mind_full_of_quotes(&new_vector);
    t.evolve_preference("ada", &tricky.id, &evolution, WriteGuard::default())
        .await
        .unwrap()
        .unwrap();
    written.push(tricky.id);
    // Reinforced again and again: the log, the count, the strength's seventeen digits.
    let reinforced = t
        .add_preference(new_preference("ada", "tea", "I love tea.", unit_vector(13)))
        .await
        .unwrap();
    for _ in 0..4 {
        t.reinforce_preference("ada", &reinforced.id, WriteGuard::default())
            .await
            .unwrap()
            .unwrap();
    }
    written.push(reinforced.id);
    // Voiced once through the timeline (the voicing kept once, `vr`), then a second voicing.
    let voicing = |at: &str, message: &str| {
        an_awkward_voicing(at, message, "It's \"vile\" \\ truly", &["sam"])
    };
    let add_voiced = async |at: &str, message: &str, seed: u64| {
        let first = t.checked_voicing(voicing(at, message)).unwrap();
        t.add_voiced(
            "ada",
            first,
            None,
            &unit_vector(seed),
            WriteGuard::default(),
        )
        .await
        .unwrap()
        .preference
    };
    let once = add_voiced("2026-11-20T09:26:00.123456Z", "m1", 14).await;
    written.push(once.id.clone());
    let twice = add_voiced("2026-11-20T09:27:00Z", "m2", 15).await;
    let stored = t.timeline("ada", &twice.id).await.unwrap().unwrap();
    let second = t
        .checked_voicing(voicing("2026-11-21T10:00:00Z", "m3"))
        .unwrap();
    let persona_prefs::model::timeline::Voiced::Changed(change) =
        persona_prefs::model::timeline::voice(
            &stored.identity,
            &stored.timeline,
            second,
            &t.timeline_rules(),
        )
    else {
        panic!("a second voicing from another message changes the preference");
    };
    t.write_voiced(&stored, &change, None, WriteGuard::default())
        .await
        .unwrap();
    written.push(twice.id);

    let mut connection = t.connection();
    let vectors = t.keys().vectors("ada");
    if !t.has_text_index() {
        // A write encodes the record in the service (add.lua and apply.lua place it): the
        // service's encoding of every record above is record.lua's, and the element the
        // second voicing left is exactly the service's, which record.lua re-encoding in place
        // (a resync) leaves as it is, in the persona's set and in the related user's own.
        use persona_prefs::store::element_record::encode_element;
        let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
        let raw_attributes =
            |connection: &mut persona_prefs::store::RedisConnection, key: String, id: String| {
                let mut connection = connection.clone();
                async move {
                    redis::cmd("VGETATTR")
                        .arg(key)
                        .arg(id)
                        .query_async::<String>(&mut connection)
                        .await
                        .unwrap()
                }
            };
        for id in &written {
            let record = t.record_fields("ada", &[id]).await.unwrap()[0]
                .clone()
                .unwrap();
            let raw = raw_attributes(&mut connection, vectors.clone(), id.clone()).await;
            assert_eq!(json(&encode_element(&record).whole), json(&raw), "{id}");
        }
        let voiced = written.last().unwrap().clone();
        let record = t.record_fields("ada", &[&voiced]).await.unwrap()[0]
            .clone()
            .unwrap();
        let placed = raw_attributes(&mut connection, vectors.clone(), voiced.clone()).await;
        assert_eq!(
            placed,
            encode_element(&record).whole,
            "the second voicing's element is the service's encoding"
        );
        let added_once = written[2].clone();
        let record = t.record_fields("ada", &[&added_once]).await.unwrap()[0]
            .clone()
            .unwrap();
        assert_eq!(
            raw_attributes(&mut connection, vectors.clone(), added_once).await,
            encode_element(&record).whole,
            "an added element is the service's encoding"
        );
        let record = t.record_fields("ada", &[&voiced]).await.unwrap()[0]
            .clone()
            .unwrap();
        let sams = t.keys().about_vectors("ada", "sam");
        let view = raw_attributes(&mut connection, sams.clone(), voiced.clone()).await;
        assert_eq!(view, encode_element(&record).view);
        // Every element here, whether the service encoded it (an add, a replayed voicing) or
        // a script did (a reinforcement, a change of mind), is what record.lua re-encoding it
        // in place writes.
        for id in &written {
            let before = raw_attributes(&mut connection, vectors.clone(), id.clone()).await;
            assert!(t.resync_preference("ada", id).await.unwrap());
            let after = raw_attributes(&mut connection, vectors.clone(), id.clone()).await;
            assert_eq!(json(&after), json(&before), "{id}");
        }
        let resynced_view = raw_attributes(&mut connection, sams, voiced.clone()).await;
        assert_eq!(json(&resynced_view), json(&view));

        // Attributes as earlier versions wrote them: JSON fields unswapped (`w` 1), a number
        // for the strength, an unknown reinforcement count, a field of an earlier system, an
        // empty last voicing, a curated mark.
        let base = element_attributes(&mut connection, &vectors, &written[1]).await;
        let mut earlier = base.clone();
        for field in ["eu", "rf", "kg", "eh"] {
            if let Some(text) = earlier
                .get(field)
                .and_then(|v| v.as_str())
                .map(swapped_quotes)
            {
                earlier[field] = text.into();
            }
        }
        earlier["w"] = 1.into();
        earlier["s"] = serde_json::json!(0.575_000_000_000_000_1);
        earlier["rn"] = 1.into();
        earlier["lr"] = "".into();
        earlier["cu"] = true.into();
        earlier["x"] = serde_json::json!({"legacy_field": "kept \"as\" it was"});
        let _: () = redis::cmd("VSETATTR")
            .arg(&vectors)
            .arg(&written[1])
            .arg(earlier.to_string())
            .query_async(&mut connection)
            .await
            .unwrap();
    }

    // The write scripts' own reader, run in Redis on the same elements.
    let lua = redis::Script::new(&format!(
        "{}\n{}",
        include_str!("../src/store/scripts/record.lua"),
        r#"local out = {}
for i = 2, #KEYS do
  local r = load_record(KEYS[i], KEYS[1])
  local flat = {}
  if r then
    for name, value in pairs(r) do
      if name ~= 'embedding' then flat[#flat + 1] = name; flat[#flat + 1] = value end
    end
  end
  out[#out + 1] = flat
end
return out"#
    ));
    let mut invocation = lua.prepare_invoke();
    invocation.key(&vectors);
    for id in &written {
        invocation.key(t.keys().preference("ada", id));
    }
    let by_lua: Vec<Vec<String>> = invocation.invoke_async(&mut connection).await.unwrap();
    let refs: Vec<&str> = written.iter().map(String::as_str).collect();
    let by_service = t.record_fields("ada", &refs).await.unwrap();
    // JSON-holding fields compare as JSON (Lua's encoder escapes a slash and orders keys its
    // own way); every other field as text, to the last character.
    let comparable = |value: &str| match serde_json::from_str::<serde_json::Value>(value) {
        Ok(json @ (serde_json::Value::Array(_) | serde_json::Value::Object(_))) => json,
        _ => serde_json::Value::String(value.to_string()),
    };
    for ((id, flat), service) in written.iter().zip(by_lua).zip(by_service) {
        let lua: HashMap<String, serde_json::Value> = flat
            .chunks(2)
            .map(|pair| (pair[0].clone(), comparable(&pair[1])))
            .collect();
        let service: HashMap<String, serde_json::Value> = service
            .unwrap_or_else(|| panic!("{id}: the service found no record"))
            .into_iter()
            .map(|(name, value)| (name, comparable(&value)))
            .collect();
        assert!(lua.len() > 10, "{id}: {lua:?}");
        assert_eq!(service, lua, "{id}");
    }
}
