//! Bringing existing preference hashes up to this build: data written by the original system
//! (its index lacks CASESENSITIVE ids; its vectors are 3072-dim Gemini embeddings of the whole
//! opinion), or by this service under another embedder.
//!
//! Steps: drop an index whose schema does not fit (the hashes stay); re-embed every preference
//! whose vector does not fit the configured dimensions (or all of them, when the embedder
//! changed but not its size) from its topic, this build's matching key; create the index and
//! wait until it has read every hash. Safe to run again: a second run finds nothing to do.
//! Run it with the workers stopped: a change of mind written during the run could have its new
//! vector overwritten.

use std::time::Duration;

use serde::Serialize;

use crate::embed::{EmbedError, Embedder};
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
}

impl Default for MigrateOptions {
    fn default() -> Self {
        MigrateOptions {
            reembed_all: false,
            dry_run: false,
            batch: 32,
            index_patience: Duration::from_secs(600),
        }
    }
}

/// What a migration found and did.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationReport {
    pub index: String,
    /// `kept`, `created`, `rebuilt` (dropped for `index_problems`, then created), or in a dry
    /// run what would happen: `would create`, `would rebuild`.
    pub index_action: String,
    pub index_problems: Vec<String>,
    pub preferences: usize,
    /// Preferences given a new vector (in a dry run: that would be).
    pub reembedded: usize,
    /// Keys whose hash has no topic to embed; left as they are.
    pub without_topic: Vec<String>,
    /// Documents in the index afterwards, and hashes it could not index.
    pub indexed: u64,
    pub indexing_failures: u64,
    pub dry_run: bool,
}

pub async fn migrate(
    store: &PreferenceStore,
    embedder: &dyn Embedder,
    options: MigrateOptions,
) -> Result<MigrationReport, MigrateError> {
    let existing = store.index_info().await?;
    let mut problems = existing
        .as_ref()
        .map(|info| index::mismatches(info, &store.hash_prefix(), store.config().embedding_dims))
        .unwrap_or_default();
    let keys = store.all_preference_keys().await?;
    let mut to_embed = Vec::new();
    let mut without_topic = Vec::new();
    // Hashes this run cannot fix: no topic to embed, and a vector the index cannot take.
    let mut stuck = 0u64;
    for chunk in keys.chunks(500) {
        for status in store.embedding_status(chunk).await? {
            if status.topic.trim().is_empty() {
                stuck += u64::from(!status.fits);
                without_topic.push(status.key);
            } else if options.reembed_all || !status.fits {
                to_embed.push((status.key, status.topic));
            }
        }
    }
    // RediSearch keeps counting a hash that once failed to index, even after it is fixed:
    // when more failed than this run leaves broken, rebuild so the count means something.
    if let Some(info) = &existing
        && info.hash_indexing_failures > stuck
    {
        problems.push(format!(
            "{} hashes failed to index (vectors of another size?)",
            info.hash_indexing_failures
        ));
    }
    let mut report = MigrationReport {
        index: store.index_name().to_string(),
        index_action: String::new(),
        index_problems: problems.clone(),
        preferences: keys.len(),
        reembedded: to_embed.len(),
        without_topic,
        indexed: existing.as_ref().map_or(0, |info| info.num_docs),
        indexing_failures: existing
            .as_ref()
            .map_or(0, |info| info.hash_indexing_failures),
        dry_run: options.dry_run,
    };
    let action = match (&existing, problems.is_empty()) {
        (None, _) => "create",
        (Some(_), true) => "kept",
        (Some(_), false) => "rebuild",
    };
    if options.dry_run {
        report.index_action = match action {
            "kept" => "kept".into(),
            other => format!("would {other}"),
        };
        return Ok(report);
    }
    // Drop before re-embedding so the old index does not chase every write.
    if action == "rebuild" {
        store.drop_index().await?;
    }
    let mut written = 0usize;
    for chunk in to_embed.chunks(options.batch.max(1)) {
        let topics: Vec<String> = chunk.iter().map(|(_, topic)| topic.clone()).collect();
        let vectors = embedder.embed(&topics).await?;
        let updates: Vec<(String, Vec<f32>)> = chunk
            .iter()
            .map(|(key, _)| key.clone())
            .zip(vectors)
            .collect();
        written += store.set_embeddings(&updates).await? as usize;
        tracing::info!(written, of = to_embed.len(), "re-embedded");
    }
    report.reembedded = written;
    store.ensure_index().await?;
    let info = store.wait_until_indexed(options.index_patience).await?;
    report.index_action = match action {
        "create" => "created".into(),
        "rebuild" => "rebuilt".into(),
        other => other.into(),
    };
    report.indexed = info.num_docs;
    report.indexing_failures = info.hash_indexing_failures;
    Ok(report)
}
