//! Bringing existing data up to this build: data written by the original system (its keys
//! lack the persona hash tag, its index lacks CASESENSITIVE ids and indexes 3072-dim Gemini
//! embeddings of the whole opinion), by this service before persona slots (same keys, a VECTOR
//! field in the shared index), or under another embedder or quantisation.
//!
//! Steps, each safe to repeat, so a run cut short is simply run again:
//! 1. move every preference hash of an earlier layout into the persona's slot (`keys.rs`): the
//!    new key is written with its structures by one script unless an earlier run already
//!    wrote it, then the old key is deleted;
//! 2. drop an index whose schema does not fit (the hashes stay; until then start-up refuses,
//!    so no worker runs on a half-moved memory), and move effect and erasure records;
//! 3. for every persona: drop a vector set of another quantisation or size, re-embed every
//!    preference whose vector does not fit (or all of them, after a change of embedder) from
//!    its topic, and bring the structures in step with each hash;
//! 4. create the index (on every master) and wait until it has read every hash.
//!
//! Run it with the workers stopped: a change of mind written during the run could have its new
//! vector overwritten.

use std::time::Duration;

use serde::Serialize;

use crate::embed::{EmbedError, Embedder};
use crate::store::record::field;
use crate::store::{PreferenceStore, StoreError, index};

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("redis: {0}")]
    Store(#[from] StoreError),
    #[error("embedder: {0}")]
    Embed(#[from] EmbedError),
}

#[derive(Debug, Clone, Copy)]
pub struct MigrateOptions {
    /// Re-embed every preference, not only those whose vector has the wrong size.
    pub reembed_all: bool,
    /// Report what would change; write nothing.
    pub dry_run: bool,
    /// Topics embedded per call.
    pub batch: usize,
    /// How long to wait for the new index to read every hash.
    pub index_patience: Duration,
    /// Stop after moving this many preferences of an earlier layout (tests of a run cut
    /// short; `None` = all).
    pub max_moves: Option<usize>,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        MigrateOptions {
            reembed_all: false,
            dry_run: false,
            batch: 32,
            index_patience: Duration::from_secs(600),
            max_moves: None,
        }
    }
}

/// What the index step found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexAction {
    Kept,
    Created,
    Rebuilt,
    WouldCreate,
    WouldRebuild,
    /// A run cut short (`max_moves`) before the index step.
    Pending,
    /// On a Redis Cluster, where there is no shared index to keep or build.
    NoneOnCluster,
    /// `redis.text_index` is off and no index was there.
    Off,
    /// `redis.text_index` is off: the index a deployment had was dropped (hashes kept).
    Dropped,
    WouldDrop,
}

impl std::fmt::Display for IndexAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IndexAction::Kept => "kept",
            IndexAction::Created => "created",
            IndexAction::Rebuilt => "rebuilt",
            IndexAction::WouldCreate => "would create",
            IndexAction::WouldRebuild => "would rebuild",
            IndexAction::Pending => "pending (run cut short: run it again)",
            IndexAction::NoneOnCluster => "none (a cluster has no shared index)",
            IndexAction::Off => "none (redis.text_index is off)",
            IndexAction::Dropped => "dropped (redis.text_index is off; hashes kept)",
            IndexAction::WouldDrop => "would drop (redis.text_index is off)",
        })
    }
}

/// What a migration found and did.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationReport {
    pub index: String,
    pub index_action: IndexAction,
    pub index_problems: Vec<String>,
    /// Preferences of an earlier layout moved into their persona's slot (in a dry run: found).
    pub moved: usize,
    /// Effect records and erasure records of an earlier layout moved (dry run: found).
    pub effects_moved: usize,
    pub erasures_moved: usize,
    /// Personas and preferences in this layout after the moves.
    pub personas: usize,
    pub preferences: usize,
    /// Personas added to the registry (found with memory but not listed).
    pub registered: u64,
    /// Preferences given a new vector (in a dry run: that would be).
    pub reembedded: usize,
    /// Personas whose vector set was rebuilt (another quantisation or size).
    pub vector_sets_rebuilt: usize,
    /// Preferences whose hash has no topic to embed; left as they are.
    pub without_topic: Vec<String>,
    /// Documents in the index afterwards, and hashes it could not index.
    pub indexed: u64,
    pub indexing_failures: u64,
    pub dry_run: bool,
    /// Preferences of an earlier layout whose texts held secrets (keys, tokens, passwords),
    /// replaced as ingest replaces them before they were moved (dry run: found). By old key.
    pub redacted: Vec<String>,
    /// False when `max_moves` stopped the run early: run it again.
    pub complete: bool,
}

pub async fn migrate(
    store: &PreferenceStore,
    embedder: &dyn Embedder,
    options: MigrateOptions,
) -> Result<MigrationReport, MigrateError> {
    let keys = store.keys().clone();
    // A cluster has no shared index (RediSearch 2.10 has no coordinator): nothing to rebuild.
    let cluster = store.connection().is_cluster();
    let wanted = store.has_text_index();
    let existing = store.existing_index().await?;
    let problems = existing
        .as_ref()
        .map(|info| index::mismatches(info, &store.hash_prefix()))
        .unwrap_or_default();
    // An index that does not fit is rebuilt, or dropped when none is wanted.
    let rebuild = existing.is_some() && (!problems.is_empty() || !wanted);
    let patterns = keys.legacy_patterns();
    let legacy_preferences: Vec<(String, String, String)> = store
        .scan_every_master(&patterns.preferences)
        .await?
        .into_iter()
        .filter_map(|key| {
            keys.parse_legacy_preference(&key)
                .map(|(persona, id)| (key, persona, id))
        })
        .collect();
    let legacy_effects: Vec<(String, String, String)> = store
        .scan_every_master(&patterns.effects)
        .await?
        .into_iter()
        .filter_map(|key| {
            keys.parse_legacy_effect(&key)
                .map(|(persona, effect)| (key, persona, effect))
        })
        .collect();
    let legacy_erasures: Vec<(String, String)> = store
        .scan_every_master(&patterns.erasures)
        .await?
        .into_iter()
        .filter_map(|key| {
            keys.parse_legacy_erasures(&key)
                .map(|persona| (key, persona))
        })
        .collect();
    let mut report = MigrationReport {
        index: store.index_name().to_string(),
        index_action: IndexAction::Kept,
        index_problems: problems.clone(),
        moved: legacy_preferences.len(),
        effects_moved: legacy_effects.len(),
        erasures_moved: legacy_erasures.len(),
        personas: 0,
        registered: 0,
        preferences: 0,
        reembedded: 0,
        vector_sets_rebuilt: 0,
        without_topic: Vec::new(),
        indexed: existing.as_ref().map_or(0, |info| info.num_docs),
        indexing_failures: existing
            .as_ref()
            .map_or(0, |info| info.hash_indexing_failures),
        dry_run: options.dry_run,
        redacted: Vec::new(),
        complete: true,
    };
    if options.dry_run {
        report.index_action = match (&existing, rebuild) {
            _ if cluster => IndexAction::NoneOnCluster,
            (None, _) if !wanted => IndexAction::Off,
            (Some(_), _) if !wanted => IndexAction::WouldDrop,
            (None, _) => IndexAction::WouldCreate,
            (Some(_), true) => IndexAction::WouldRebuild,
            (Some(_), false) => IndexAction::Kept,
        };
        let personas = personas_in_layout(store).await?;
        report.personas = personas.len();
        for persona in &personas {
            let ids = store.preference_ids(persona).await?;
            report.preferences += ids.len();
            for status in store.embedding_status(persona, &ids).await? {
                if status.topic.trim().is_empty() {
                    report.without_topic.push(status.key);
                } else if options.reembed_all || !status.fits {
                    report.reembedded += 1;
                }
            }
        }
        // Moved preferences are re-embedded too when their vector does not fit (the
        // original's 3072-dim vectors); count them by their vector's length.
        for (key, _, _) in &legacy_preferences {
            let fields = store.raw_hash(key).await?;
            let value = |wanted: &str| {
                fields
                    .iter()
                    .find(|(name, _)| name == wanted)
                    .map(|(_, value)| value.as_slice())
                    .unwrap_or_default()
            };
            let mut copy = fields.clone();
            if redact_secrets(&mut copy).any {
                report.redacted.push(key.clone());
            }
            let fits = value(field::EMBEDDING).len() == store.config().embedding_dims * 4;
            if String::from_utf8_lossy(value(field::NAME))
                .trim()
                .is_empty()
            {
                report.without_topic.push(key.clone());
            } else if options.reembed_all || !fits {
                report.reembedded += 1;
            }
        }
        return Ok(report);
    }
    // The old index stays until every key is moved: a run cut short leaves it in place, so
    // start-up keeps refusing until a run finishes.
    let mut moved = 0;
    let mut topics_redacted: Vec<(String, String)> = Vec::new();
    for (key, persona, id) in &legacy_preferences {
        if options.max_moves.is_some_and(|max| moved >= max) {
            report.moved = moved;
            report.complete = false;
            report.index_action = IndexAction::Pending;
            return Ok(report);
        }
        let mut fields = store.raw_hash(key).await?;
        if !fields.is_empty() {
            let redacted = redact_secrets(&mut fields);
            if redacted.any {
                report.redacted.push(key.clone());
            }
            if redacted.topic {
                // Its vector was of the topic with the secret in it: embedded again below.
                topics_redacted.push((persona.clone(), id.clone()));
            }
            store.import_preference(persona, id, &fields).await?;
        }
        store.delete_key(key).await?;
        moved += 1;
        if moved % 1000 == 0 {
            tracing::info!(
                moved,
                of = legacy_preferences.len(),
                "moved into persona slots"
            );
        }
    }
    report.moved = moved;
    // Drop before re-embedding so the old index does not chase every write.
    if rebuild {
        store.drop_index().await?;
    }
    for (key, persona, effect) in &legacy_effects {
        store.import_effect(key, persona, effect).await?;
    }
    for (key, persona) in &legacy_erasures {
        store.import_erasures(key, persona).await?;
    }
    // Locks of the earlier layout are short-lived and held by no one while workers are stopped;
    // tokens carry the server's time, so a fresh counter cannot repeat one.
    for key in store.scan_every_master(&patterns.locks).await? {
        if keys.is_legacy_lock(&key) {
            store.delete_key(&key).await?;
        }
    }
    let personas = personas_in_layout(store).await?;
    report.personas = personas.len();
    // Personas written before the registry existed become listable.
    report.registered = store.register_personas(&personas).await?;
    let mut reembedded = 0;
    for persona in &personas {
        if store.drop_misfit_vector_set(persona).await? {
            report.vector_sets_rebuilt += 1;
        }
        let ids = store.preference_ids(persona).await?;
        report.preferences += ids.len();
        let mut to_embed = Vec::new();
        for status in store.embedding_status(persona, &ids).await? {
            if status.topic.trim().is_empty() {
                report.without_topic.push(status.key);
            } else if options.reembed_all
                || !status.fits
                || topics_redacted
                    .iter()
                    .any(|(p, id)| p == persona && *id == status.preference_id)
            {
                to_embed.push((status.preference_id, status.topic));
            }
        }
        for chunk in to_embed.chunks(options.batch.max(1)) {
            let topics: Vec<String> = chunk.iter().map(|(_, topic)| topic.clone()).collect();
            let vectors = embedder.embed(&topics).await?;
            let updates: Vec<(String, Vec<f32>)> = chunk
                .iter()
                .map(|(id, _)| id.clone())
                .zip(vectors)
                .collect();
            reembedded += store.set_embeddings(persona, &updates).await? as usize;
        }
        for id in &ids {
            store.resync_preference(persona, id).await?;
        }
        store.settle_user_vector_sets(persona).await?;
        tracing::info!(persona, preferences = ids.len(), "persona migrated");
    }
    report.reembedded = reembedded;
    store.ensure_index().await?;
    let info = store.wait_until_indexed(options.index_patience).await?;
    report.index_action = match (&existing, rebuild) {
        _ if cluster => IndexAction::NoneOnCluster,
        (None, _) if !wanted => IndexAction::Off,
        (Some(_), _) if !wanted => IndexAction::Dropped,
        (None, _) => IndexAction::Created,
        (Some(_), true) => IndexAction::Rebuilt,
        (Some(_), false) => IndexAction::Kept,
    };
    report.indexed = info.num_docs;
    report.indexing_failures = info.hash_indexing_failures;
    // Every key has moved: start-up may now trust the memory without looking for old keys.
    store.record_layout().await?;
    Ok(report)
}

/// What [`redact_secrets`] changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Redacted {
    any: bool,
    /// The topic itself held a secret, so its vector must be computed again.
    topic: bool,
}

/// Replaces secrets in every text of a preference read from an earlier layout (its topic,
/// opinion, category and every past version's opinions and reasons) as ingest and the
/// administration writes do (`extract::redact`): the original system stored what it was
/// given. A text that is mostly secrets keeps its redaction marks rather than being dropped:
/// a migration loses nothing it cannot say it lost.
fn redact_secrets(fields: &mut [(String, Vec<u8>)]) -> Redacted {
    let mut redacted = Redacted::default();
    for (name, value) in fields.iter_mut() {
        let Ok(text) = std::str::from_utf8(value) else {
            continue;
        };
        let replaced = match name.as_str() {
            field::NAME | field::OPINION | field::CATEGORY => {
                let (clean, share) = crate::extract::redact::redact(text);
                (share > 0.0 || clean != text).then_some(clean)
            }
            field::EVOLUTION_HISTORY => redact_history(text),
            _ => None,
        };
        if let Some(clean) = replaced {
            redacted.any = true;
            redacted.topic |= name == field::NAME;
            *value = clean.into_bytes();
        }
    }
    redacted
}

/// The history (a JSON list of entries) with secrets replaced in every entry's texts; `None`
/// when nothing changed or it is not a JSON list (left as it is).
fn redact_history(text: &str) -> Option<String> {
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(text).ok()?;
    let mut changed = false;
    for entry in entries.iter_mut() {
        for key in ["old_opinion", "new_opinion", "reason"] {
            if let Some(serde_json::Value::String(said)) = entry.get_mut(key) {
                let (clean, _) = crate::extract::redact::redact(said);
                if clean != *said {
                    *said = clean;
                    changed = true;
                }
            }
        }
    }
    changed.then(|| serde_json::to_string(&entries).expect("JSON values serialise"))
}

/// Every persona with preferences in this layout, from the id sets' keys.
async fn personas_in_layout(store: &PreferenceStore) -> Result<Vec<String>, MigrateError> {
    let keys = store.keys();
    let sample = keys.ids("PERSONA");
    let (head, tail) = sample
        .split_once("{PERSONA}")
        .expect("the id set key holds the persona tag");
    let pattern = format!("{head}{{*}}{tail}");
    Ok(store
        .scan_every_master(&pattern)
        .await?
        .into_iter()
        .filter_map(|key| {
            key.strip_prefix(&format!("{head}{{"))
                .and_then(|rest| rest.strip_suffix(&format!("}}{tail}")))
                .map(str::to_string)
        })
        .collect())
}
