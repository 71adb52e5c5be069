//! The preference store: a persona's opinions as Redis hashes, with per-persona structures in
//! the persona's own hash slot (a vector set of its active preferences, its strongest, who each
//! is about: `keys.rs`) for the hot paths, and a RediSearch index for the administrative ones
//! (list, stats, keyword search). Implements every operation of the original
//! `PersonaPreferenceManager` (seed 000) plus what exactly-once ingest needs: idempotency keys
//! and lock fencing on every write. Works on one Redis node or a Redis Cluster.
//!
//! **Invariant:** only this module talks to Redis. Every query that takes a caller's value
//! escapes it ([`query::escape_tag`]) and is restricted to one persona.

pub mod connection;
mod error;
pub mod index;
pub mod keys;
mod layout;
pub mod lock;
pub mod query;
pub mod record;
mod scripts;
pub mod validate;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

pub use connection::RedisConnection;
pub use error::StoreError;
pub use index::IndexInfo;
pub use keys::Keys;

/// A stored preference's topic and whether its vector fits the index (migration).
#[derive(Debug, Clone)]
pub struct EmbeddingStatus {
    pub persona_id: String,
    pub preference_id: String,
    pub key: String,
    pub topic: String,
    /// The stored vector has `store.embedding_dims` FLOAT32 values.
    pub fits: bool,
}
pub use lock::{LockToken, PersonaLock};
pub use record::{
    AddOutcome, Evolution, EvolveOutcome, HistoryEntry, InjectedPreference, InjectionQuery,
    MatchReason, NewPreference, Preference, PreferenceStats, Provenance, PurgeReport,
    ReinforceOutcome, Reinforcement, RetractOutcome, ScoredPreference, Stance,
};

use crate::config::{RedisConfig, StoreConfig};
use crate::telemetry;
use query::{persona_filter, vector_to_bytes};
use record::field;

/// Options for an idempotent, fenced write. The default is a plain write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteGuard<'a> {
    /// A caller-chosen id of this effect (e.g. `<message id>#<opinion ordinal>`): the write is
    /// applied at most once per id, and a repeat reports `applied: false`.
    pub effect_id: Option<&'a str>,
    /// The persona lock the caller holds; the write is refused with [`StoreError::Fenced`] when
    /// the lock has since expired or passed to another worker.
    pub lock: Option<&'a LockToken>,
}

/// Options for [`PreferenceStore::list_preferences`].
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub category: Option<String>,
    pub include_retracted: bool,
    pub limit: usize,
}

/// The store. Cheap to clone: clones share one multiplexed, reconnecting connection.
#[derive(Clone)]
pub struct PreferenceStore {
    connection: RedisConnection,
    settings: Arc<Settings>,
}

struct Settings {
    keys: Keys,
    min_replicas_acked: u64,
    replica_wait_ms: u64,
    key_prefix: String,
    index_name: String,
    store: StoreConfig,
}

/// A client for `redis.url`: rediss:// uses TLS, trusting `redis.tls_ca_file` (or the system's
/// roots) and presenting the client certificate when one is configured.
fn redis_client(redis: &RedisConfig) -> Result<redis::Client, StoreError> {
    let invalid = |field: &'static str, reason: String| StoreError::InvalidInput { field, reason };
    let tls = redis.tls();
    if !tls.any() {
        return redis::Client::open(redis.url.as_str())
            .map_err(|error| invalid("redis.url", error.to_string()));
    }
    let read = |field: &'static str, path: &str| {
        std::fs::read(path).map_err(|error| invalid(field, format!("{path}: {error}")))
    };
    let root_cert = match tls.ca_file {
        "" => None,
        path => Some(read("redis.tls_ca_file", path)?),
    };
    let client_tls = match (tls.client_cert_file, tls.client_key_file) {
        ("", _) | (_, "") => None,
        (cert, key) => Some(redis::ClientTlsConfig {
            client_cert: read("redis.tls_client_cert_file", cert)?,
            client_key: read("redis.tls_client_key_file", key)?,
        }),
    };
    redis::Client::build_with_tls(
        redis.url.as_str(),
        redis::TlsCertificates {
            client_tls,
            root_cert,
        },
    )
    .map_err(|error| invalid("redis.url", error.to_string()))
}

impl PreferenceStore {
    /// Connects (with automatic reconnects). Does not touch the index: call
    /// [`PreferenceStore::ensure_index`] at start-up.
    pub async fn connect(
        redis: &RedisConfig,
        store: &StoreConfig,
    ) -> Result<PreferenceStore, StoreError> {
        let connection = if redis.cluster_nodes.is_empty() {
            let client = redis_client(redis)?;
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(Some(Duration::from_millis(redis.response_timeout_ms)))
                .set_connection_timeout(Some(Duration::from_millis(redis.response_timeout_ms)))
                .set_number_of_retries(2)
                .set_max_delay(Duration::from_secs(2));
            RedisConnection::Single(ConnectionManager::new_with_config(client, config).await?)
        } else {
            RedisConnection::Cluster(Arc::new(cluster_connection(redis).await?))
        };
        Ok(PreferenceStore {
            connection,
            settings: Arc::new(Settings {
                keys: Keys::new(&redis.key_prefix),
                min_replicas_acked: redis.min_replicas_acked,
                // Within the response timeout, so WAIT answers with a count instead of the
                // client giving up on it.
                replica_wait_ms: (redis.response_timeout_ms / 2).max(1),
                key_prefix: redis.key_prefix.clone(),
                index_name: redis.index_name.clone(),
                store: store.clone(),
            }),
        })
    }

    /// The shared connection, for callers that measure raw Redis cost (benches) or need a
    /// command the store does not wrap.
    pub fn connection(&self) -> RedisConnection {
        self.connection.clone()
    }

    /// Every key and pattern of the layout.
    pub fn keys(&self) -> &Keys {
        &self.settings.keys
    }

    pub fn index_name(&self) -> &str {
        &self.settings.index_name
    }

    pub fn key_prefix(&self) -> &str {
        &self.settings.key_prefix
    }

    pub fn config(&self) -> &StoreConfig {
        &self.settings.store
    }

    /// `{key_prefix}:persona_pref:` — what the index covers.
    pub fn hash_prefix(&self) -> String {
        self.settings.keys.preference_prefix()
    }

    pub fn preference_key(&self, persona_id: &str, preference_id: &str) -> String {
        self.settings.keys.preference(persona_id, preference_id)
    }

    /// Erasure records of one persona: digest of an erased user id → [`Erasure`].
    fn erasures_key(&self, persona_id: &str) -> String {
        self.settings.keys.erasures(persona_id)
    }

    pub(crate) fn lock_key(&self, persona_id: &str) -> String {
        self.settings.keys.lock(persona_id)
    }

    /// The key a persona's RediSearch queries are routed by: the index on the master that owns
    /// the persona's slot holds all of its preferences.
    fn route_key(&self, persona_id: &str) -> String {
        self.settings.keys.ids(persona_id)
    }

    // ----- index -------------------------------------------------------------------------

    /// Creates the index if missing (on every master of a cluster: each indexes its own keys).
    /// If it exists with another schema, fails with an error naming the difference, so nothing
    /// is written where it cannot be found.
    pub async fn ensure_index(&self) -> Result<IndexInfo, StoreError> {
        if self.connection.is_cluster() {
            // RediSearch 2.10 treats an index name as a key (FT.CREATE is MOVED to the master
            // owning the name's slot) and has no coordinator, so no index can see every shard.
            // Every hot and administrative path but keyword search reads the personas' own
            // structures; on a cluster there is no shared index at all.
            return Ok(IndexInfo::cluster_placeholder(&self.settings.index_name));
        }
        let nodes = self.index_info_per_node().await?;
        for (node, info) in &nodes {
            let Some(info) = info else { continue };
            let problems = index::mismatches(info, &self.hash_prefix());
            if !problems.is_empty() {
                let at = if self.connection.is_cluster() {
                    format!(" on {node}")
                } else {
                    String::new()
                };
                return Err(StoreError::IndexMismatch {
                    index: info.name.clone(),
                    reason: format!(
                        "{}{at}. Run `persona-prefs index migrate` (it rebuilds the index and moves \
                         data of earlier layouts; hashes are kept), or fix the configuration",
                        problems.join("; "),
                    ),
                });
            }
        }
        if nodes.iter().any(|(_, info)| info.is_none()) {
            let mut connection = self.connection.clone();
            let create = index::create_command(&self.settings.index_name, &self.hash_prefix());
            for (node, reply) in connection.query_every_master(&create).await? {
                if let Value::ServerError(error) = reply {
                    let text = loose_text(&error.to_string());
                    // Another worker created it between our probe and our create: verify theirs.
                    if !text.contains("already exists") {
                        return Err(StoreError::UnexpectedReply(format!(
                            "FT.CREATE on {node}: {error}"
                        )));
                    }
                }
            }
        }
        let mut again = self.index_info().await?;
        let info = again.take().ok_or_else(|| {
            StoreError::UnexpectedReply("index missing right after FT.CREATE".into())
        })?;
        let problems = index::mismatches(&info, &self.hash_prefix());
        if !problems.is_empty() {
            return Err(StoreError::IndexMismatch {
                index: info.name.clone(),
                reason: problems.join("; "),
            });
        }
        Ok(info)
    }

    /// `FT.INFO`, or `None` when the index does not exist. On a cluster, the masters' answers
    /// summed (documents, failures) and the least caught-up share indexed; `None` when any
    /// master lacks the index.
    pub async fn index_info(&self) -> Result<Option<IndexInfo>, StoreError> {
        if self.connection.is_cluster() {
            return Ok(Some(IndexInfo::cluster_placeholder(
                &self.settings.index_name,
            )));
        }
        let mut combined: Option<IndexInfo> = None;
        for (_, info) in self.index_info_per_node().await? {
            let Some(info) = info else { return Ok(None) };
            combined = Some(match combined {
                None => info,
                Some(mut total) => {
                    total.num_docs += info.num_docs;
                    total.hash_indexing_failures += info.hash_indexing_failures;
                    total.percent_indexed = total.percent_indexed.min(info.percent_indexed);
                    total
                }
            });
        }
        Ok(combined)
    }

    /// `FT.INFO` of every master (one entry on a single node).
    pub async fn index_info_per_node(
        &self,
    ) -> Result<Vec<(String, Option<IndexInfo>)>, StoreError> {
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("FT.INFO");
        command.arg(&self.settings.index_name);
        let mut nodes = Vec::new();
        for (node, reply) in connection.query_every_master(&command).await? {
            let info = match reply {
                Value::ServerError(error) => {
                    let text = loose_text(&error.to_string());
                    if text.contains("unknown index name") || text.contains("no such index") {
                        None
                    } else {
                        return Err(StoreError::UnexpectedReply(format!(
                            "FT.INFO on {node}: {error}"
                        )));
                    }
                }
                reply => Some(index::parse_info(&self.settings.index_name, reply)?),
            };
            nodes.push((node, info));
        }
        nodes.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(nodes)
    }

    /// Drops the index definition on every master; the hashes stay (no `DD`).
    pub async fn drop_index(&self) -> Result<(), StoreError> {
        if self.connection.is_cluster() {
            return Ok(());
        }
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("FT.DROPINDEX");
        command.arg(&self.settings.index_name);
        for (node, reply) in connection.query_every_master(&command).await? {
            if let Value::ServerError(error) = reply {
                let text = loose_text(&error.to_string());
                if !(text.contains("unknown index name") || text.contains("no such index")) {
                    return Err(StoreError::UnexpectedReply(format!(
                        "FT.DROPINDEX on {node}: {error}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Polls `FT.INFO` until the index has read every existing hash (after a create), or
    /// `patience` runs out.
    pub async fn wait_until_indexed(&self, patience: Duration) -> Result<IndexInfo, StoreError> {
        let deadline = Instant::now() + patience;
        loop {
            let info = self.index_info().await?.ok_or_else(|| {
                StoreError::UnexpectedReply(format!("index {} vanished", self.settings.index_name))
            })?;
            if info.percent_indexed >= 1.0 || Instant::now() >= deadline {
                return Ok(info);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // ----- migration ---------------------------------------------------------------------

    /// Every key matching `pattern` on every master, by SCAN so Redis is never blocked.
    /// For migration only: the service itself never scans.
    pub async fn scan_every_master(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        self.scan_every_master_until(pattern, |key| {
            found.push(key.to_string());
            false
        })
        .await?;
        found.sort();
        found.dedup();
        Ok(found)
    }

    /// Walks the keys matching `pattern` on every master until `stop` says so; returns the key
    /// it stopped at.
    pub(crate) async fn scan_every_master_until(
        &self,
        pattern: &str,
        mut stop: impl FnMut(&str) -> bool,
    ) -> Result<Option<String>, StoreError> {
        let mut connection = self.connection.clone();
        for node in connection.masters().await? {
            let mut cursor: u64 = 0;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let (next, keys): (u64, Vec<String>) =
                    connection.query_at_node(&node, &scan).await?;
                if let Some(key) = keys.into_iter().find(|key| stop(key)) {
                    return Ok(Some(key));
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(None)
    }

    /// The ids of every preference of one persona, retracted too.
    pub async fn preference_ids(&self, persona_id: &str) -> Result<Vec<String>, StoreError> {
        validate::persona_id(persona_id)?;
        let mut connection = self.connection.clone();
        let mut ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.settings.keys.ids(persona_id))
            .query_async(&mut connection)
            .await?;
        ids.sort();
        Ok(ids)
    }

    /// For each preference of one persona, its topic (`name`) and whether its stored vector has
    /// the configured size, in one pipelined round trip.
    pub async fn embedding_status(
        &self,
        persona_id: &str,
        preference_ids: &[String],
    ) -> Result<Vec<EmbeddingStatus>, StoreError> {
        if preference_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in preference_ids {
            let key = self.preference_key(persona_id, id);
            pipe.cmd("HGET").arg(&key).arg(field::NAME);
            pipe.cmd("HSTRLEN").arg(&key).arg(field::EMBEDDING);
        }
        let mut connection = self.connection.clone();
        let replies = connection
            .pipeline_for_key(&self.route_key(persona_id), &pipe)
            .await?;
        let expected = (self.settings.store.embedding_dims * 4) as i64;
        Ok(preference_ids
            .iter()
            .zip(replies.chunks(2))
            .map(|(id, pair)| EmbeddingStatus {
                persona_id: persona_id.to_string(),
                preference_id: id.clone(),
                key: self.preference_key(persona_id, id),
                topic: query::value_to_string(&pair[0]),
                fits: matches!(pair[1], Value::Int(length) if length == expected),
            })
            .collect())
    }

    /// Stores new vectors for existing preferences of one persona (a preference deleted
    /// meanwhile stays deleted) and puts them in the persona's vector set. Returns how many
    /// were written.
    pub async fn set_embeddings(
        &self,
        persona_id: &str,
        updates: &[(String, Vec<f32>)],
    ) -> Result<u64, StoreError> {
        let dims = self.settings.store.embedding_dims;
        let mut written = 0;
        for (preference_id, vector) in updates {
            validate::embedding(vector, dims)?;
            let mut invocation = self.invocation(
                &scripts::SET_EMBEDDING,
                persona_id,
                preference_id,
                WriteGuard::default(),
            )?;
            invocation
                .arg(query::vector_to_bytes(vector))
                .arg(preference_id.as_str());
            let mut connection = self.connection.clone();
            let done: u64 = invocation.invoke_async(&mut connection).await?;
            written += done;
        }
        Ok(written)
    }

    /// Migration: every field of a hash, as bytes (the embedding is binary).
    pub async fn raw_hash(&self, key: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut connection = self.connection.clone();
        let fields: Vec<(String, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut connection)
            .await?;
        Ok(fields)
    }

    /// Migration: writes a preference read from an earlier layout into this one, with its
    /// structures, unless an earlier run already did. True when written.
    pub async fn import_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        fields: &[(String, Vec<u8>)],
    ) -> Result<bool, StoreError> {
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        let mut invocation = self.invocation(
            &scripts::IMPORT,
            persona_id,
            preference_id,
            WriteGuard::default(),
        )?;
        // The id first: the script reads it from ARGV[7]. The key's id is the truth, as the
        // original system wrote it to both.
        invocation.arg(field::ID).arg(preference_id);
        for (name, value) in fields {
            if name != field::ID {
                invocation.arg(name.as_str()).arg(value.as_slice());
            }
        }
        let mut connection = self.connection.clone();
        let written: u64 = invocation.invoke_async(&mut connection).await?;
        Ok(written == 1)
    }

    /// Migration: brings a preference's structures in step with its hash.
    pub async fn resync_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<bool, StoreError> {
        let mut invocation = self.invocation(
            &scripts::RESYNC,
            persona_id,
            preference_id,
            WriteGuard::default(),
        )?;
        invocation.arg(preference_id);
        let mut connection = self.connection.clone();
        let done: u64 = invocation.invoke_async(&mut connection).await?;
        Ok(done == 1)
    }

    /// Migration: a persona's vector set, when its quantisation or size no longer fits the
    /// configuration, is deleted (a resync of every preference rebuilds it). True when deleted.
    pub async fn drop_misfit_vector_set(&self, persona_id: &str) -> Result<bool, StoreError> {
        let key = self.settings.keys.vectors(persona_id);
        let mut connection = self.connection.clone();
        let info: Value = match redis::cmd("VINFO")
            .arg(&key)
            .query_async(&mut connection)
            .await
        {
            Ok(info) => info,
            Err(_) => return Ok(false),
        };
        let pairs: Vec<String> = match &info {
            Value::Array(items) => items.iter().map(query::value_to_string).collect(),
            Value::Map(items) => items
                .iter()
                .flat_map(|(k, v)| [query::value_to_string(k), query::value_to_string(v)])
                .collect(),
            _ => return Ok(false),
        };
        let get = |name: &str| {
            pairs
                .chunks(2)
                .find(|pair| pair[0] == name)
                .map(|pair| pair[1].clone())
        };
        let quantisation = self.settings.store.vector_quantisation.vinfo_name();
        let fits = get("quant-type").as_deref() == Some(quantisation)
            && get("vector-dim").and_then(|d| d.parse().ok())
                == Some(self.settings.store.embedding_dims);
        if fits {
            return Ok(false);
        }
        let _: i64 = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut connection)
            .await?;
        Ok(true)
    }

    /// Deletes one key (migration: a legacy key once its data is in this layout).
    pub async fn delete_key(&self, key: &str) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    /// Migration: an effect record of the earlier layout (one key each) becomes a field of the
    /// persona's effect hash, keeping its remaining lifetime; then the old key goes.
    pub async fn import_effect(
        &self,
        legacy_key: &str,
        persona_id: &str,
        effect_id: &str,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let value: Option<String> = redis::cmd("GET")
            .arg(legacy_key)
            .query_async(&mut connection)
            .await?;
        let ttl_ms: i64 = redis::cmd("PTTL")
            .arg(legacy_key)
            .query_async(&mut connection)
            .await?;
        if let Some(value) = value {
            let effects = self.settings.keys.effects(persona_id);
            let mut pipe = redis::pipe();
            pipe.cmd("HSET")
                .arg(&effects)
                .arg(effect_id)
                .arg(value)
                .ignore();
            if ttl_ms > 0 {
                pipe.cmd("HPEXPIRE")
                    .arg(&effects)
                    .arg(ttl_ms)
                    .arg("FIELDS")
                    .arg(1)
                    .arg(effect_id)
                    .ignore();
            }
            let _: () = pipe.atomic().query_async(&mut connection).await?;
        }
        self.delete_key(legacy_key).await
    }

    /// Migration: the erasure records of the earlier layout join the persona's erasure hash
    /// (records already there win); then the old key goes.
    pub async fn import_erasures(
        &self,
        legacy_key: &str,
        persona_id: &str,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let records: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(legacy_key)
            .query_async(&mut connection)
            .await?;
        let erasures = self.settings.keys.erasures(persona_id);
        for (digest, record) in records {
            let _: i64 = redis::cmd("HSETNX")
                .arg(&erasures)
                .arg(digest)
                .arg(record)
                .query_async(&mut connection)
                .await?;
        }
        self.delete_key(legacy_key).await
    }

    // ----- writes ------------------------------------------------------------------------

    /// Adds a preference and returns it (without the embedding).
    pub async fn add_preference(&self, new: NewPreference) -> Result<Preference, StoreError> {
        Ok(self
            .add_preference_guarded(new, WriteGuard::default())
            .await?
            .preference)
    }

    /// Adds a preference under a [`WriteGuard`]: with an effect id, a repeat returns the
    /// preference the first call created instead of a twin.
    pub async fn add_preference_guarded(
        &self,
        new: NewPreference,
        guard: WriteGuard<'_>,
    ) -> Result<AddOutcome, StoreError> {
        let started = Instant::now();
        let config = &self.settings.store;
        validate::persona_id(&new.persona_id)?;
        validate::embedding(&new.embedding, config.embedding_dims)?;
        validate::related_ids(
            "related_user_ids",
            &new.related_user_ids,
            config.max_related_ids,
            validate::user_id,
        )?;
        validate::related_ids(
            "related_kg_uuids",
            &new.related_kg_uuids,
            config.max_related_ids,
            validate::short_id,
        )?;
        validate::provenance(&new.provenance)?;
        let strength = match new.strength {
            None => config.default_strength,
            Some(value) if value.is_nan() => return Err(StoreError::invalid("strength", "is NaN")),
            Some(value) => value.clamp(0.0, 1.0),
        };
        let name = validate::truncate_chars(new.name.trim(), config.max_name_chars);
        let opinion = validate::truncate_chars(new.opinion.trim(), config.max_opinion_chars);
        if name.is_empty() {
            return Err(StoreError::invalid("name", "is empty"));
        }
        if opinion.is_empty() {
            return Err(StoreError::invalid("opinion", "is empty"));
        }
        let category = self.coerce_category(&new.category);
        let now = now_iso();
        let preference = Preference {
            id: uuid::Uuid::new_v4().simple().to_string(),
            persona_id: new.persona_id,
            name,
            opinion,
            category,
            strength,
            stance: new.stance,
            stance_at: new.stance_at.unwrap_or_else(|| now.clone()),
            provenance: new.provenance,
            related_user_ids: new.related_user_ids,
            related_kg_uuids: new.related_kg_uuids,
            evidence_user_ids: Vec::new(),
            evolution_history: Vec::new(),
            active: true,
            created_at: now.clone(),
            last_reinforced: now,
            reinforcement_count: 0,
            reinforcements: Vec::new(),
        };
        let mut preference = preference;
        if !preference.provenance.triggering_user_id.is_empty() {
            preference
                .evidence_user_ids
                .push(preference.provenance.triggering_user_id.clone());
        }
        let json = |value: &Vec<String>| serde_json::to_string(value).expect("strings serialise");
        let fields: Vec<(&str, Vec<u8>)> = vec![
            (field::ID, preference.id.clone().into_bytes()),
            (
                field::PERSONA_ID,
                preference.persona_id.clone().into_bytes(),
            ),
            (field::NAME, preference.name.clone().into_bytes()),
            (field::OPINION, preference.opinion.clone().into_bytes()),
            (field::CATEGORY, preference.category.clone().into_bytes()),
            (
                field::STRENGTH,
                format_float(preference.strength).into_bytes(),
            ),
            (
                field::STANCE,
                preference
                    .stance
                    .map(Stance::as_str)
                    .unwrap_or("")
                    .as_bytes()
                    .to_vec(),
            ),
            (field::STANCE_AT, preference.stance_at.clone().into_bytes()),
            (
                field::TRIGGERING_USER_ID,
                preference
                    .provenance
                    .triggering_user_id
                    .clone()
                    .into_bytes(),
            ),
            (
                field::TRIGGERING_MESSAGE_ID,
                preference
                    .provenance
                    .triggering_message_id
                    .clone()
                    .into_bytes(),
            ),
            (
                field::PERSONA_MESSAGE_ID,
                preference
                    .provenance
                    .persona_message_id
                    .clone()
                    .into_bytes(),
            ),
            (
                field::SOURCE_PLATFORM,
                preference.provenance.source_platform.clone().into_bytes(),
            ),
            (
                field::SOURCE_CHANNEL_ID,
                preference.provenance.source_channel_id.clone().into_bytes(),
            ),
            (
                field::RELATED_USER_IDS,
                json(&preference.related_user_ids).into_bytes(),
            ),
            (
                field::RELATED_USER_IDS_INDEX,
                preference.related_user_ids.join(",").into_bytes(),
            ),
            (
                field::RELATED_KG_UUIDS,
                json(&preference.related_kg_uuids).into_bytes(),
            ),
            (
                field::EVIDENCE_USER_IDS,
                json(&preference.evidence_user_ids).into_bytes(),
            ),
            (field::EVOLUTION_HISTORY, b"[]".to_vec()),
            (field::EMBEDDING, vector_to_bytes(&new.embedding)),
            (field::ACTIVE, b"1".to_vec()),
            (
                field::CREATED_AT,
                preference.created_at.clone().into_bytes(),
            ),
            (
                field::LAST_REINFORCED,
                preference.last_reinforced.clone().into_bytes(),
            ),
            (field::REINFORCEMENT_COUNT, b"0".to_vec()),
        ];
        let mut invocation =
            self.invocation(&scripts::ADD, &preference.persona_id, &preference.id, guard)?;
        for (name, value) in &fields {
            invocation.arg(*name).arg(value.as_slice());
        }
        let reply: Value = self.write(invocation, &preference.persona_id).await?;
        let (applied, id) = match reply {
            Value::Array(items) if items.len() == 2 => (
                matches!(items[0], Value::Int(1)),
                query::value_to_string(&items[1]),
            ),
            other => {
                return Err(StoreError::UnexpectedReply(format!(
                    "add script returned {other:?}"
                )));
            }
        };
        telemetry::store_op("add", started.elapsed());
        if applied {
            return Ok(AddOutcome {
                preference,
                applied,
            });
        }
        let existing = self
            .get_preference(&preference.persona_id, &id)
            .await?
            .ok_or_else(|| {
                StoreError::UnexpectedReply(format!(
                    "effect record points at preference {id}, which is gone"
                ))
            })?;
        Ok(AddOutcome {
            preference: existing,
            applied,
        })
    }

    /// Raises strength on the diminishing-returns curve `s' = s + rate·(1 − s)`, counts the
    /// reinforcement and stamps `last_reinforced`, atomically. `None` when not found.
    pub async fn reinforce_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        guard: WriteGuard<'_>,
    ) -> Result<Option<ReinforceOutcome>, StoreError> {
        self.reinforce_preference_from(persona_id, preference_id, &Provenance::default(), guard)
            .await
    }

    /// [`PreferenceStore::reinforce_preference`] from a conversation turn: its user joins the
    /// preference's evidence, and the reinforcement log records the turn (`provenance`).
    pub async fn reinforce_preference_from(
        &self,
        persona_id: &str,
        preference_id: &str,
        provenance: &Provenance,
        guard: WriteGuard<'_>,
    ) -> Result<Option<ReinforceOutcome>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        validate::provenance(provenance)?;
        let now = now_iso();
        let entry = serde_json::to_string(&Reinforcement {
            timestamp: now.clone(),
            provenance: provenance.clone(),
        })
        .map_err(|e| StoreError::UnexpectedReply(format!("encoding a reinforcement: {e}")))?;
        let mut invocation =
            self.invocation(&scripts::REINFORCE, persona_id, preference_id, guard)?;
        invocation
            .arg(format_float(self.settings.store.reinforce_rate))
            .arg(now)
            .arg(&provenance.triggering_user_id)
            .arg(entry)
            .arg(self.settings.store.max_reinforcement_log);
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("reinforce", started.elapsed());
        let Some(items) = script_reply(reply, 5)? else {
            return Ok(None);
        };
        Ok(Some(ReinforceOutcome {
            applied: items[0] == "1",
            id: items[1].clone(),
            name: items[2].clone(),
            strength: items[3].parse().unwrap_or(0.0),
            reinforcement_count: items[4].parse().unwrap_or(0),
        }))
    }

    /// A change of mind: logs {old_opinion, new_opinion, timestamp, reason}, stores the new
    /// opinion and its embedding, resets strength to `store.evolved_strength`. Atomic.
    pub async fn evolve_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        evolution: &Evolution<'_>,
        guard: WriteGuard<'_>,
    ) -> Result<Option<EvolveOutcome>, StoreError> {
        let started = Instant::now();
        let config = &self.settings.store;
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        validate::embedding(evolution.new_embedding, config.embedding_dims)?;
        if let Some(user) = evolution.evidence_user_id {
            validate::external_text("evidence_user_id", user)?;
        }
        let opinion =
            validate::truncate_chars(evolution.new_opinion.trim(), config.max_opinion_chars);
        if opinion.is_empty() {
            return Err(StoreError::invalid("new_opinion", "is empty"));
        }
        let reason = validate::truncate_chars(evolution.reason, config.max_opinion_chars);
        let now = now_iso();
        let mut invocation = self.invocation(&scripts::EVOLVE, persona_id, preference_id, guard)?;
        invocation
            .arg(opinion.as_str())
            .arg(vector_to_bytes(evolution.new_embedding))
            .arg(format_float(config.evolved_strength))
            .arg(now.as_str())
            .arg(reason.as_str())
            .arg(evolution.new_stance.map(Stance::as_str).unwrap_or(""))
            .arg(evolution.expressed_at.unwrap_or(now.as_str()))
            .arg(evolution.evidence_user_id.unwrap_or(""));
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("evolve", started.elapsed());
        let Some(items) = script_reply(reply, 6)? else {
            return Ok(None);
        };
        Ok(Some(EvolveOutcome {
            applied: items[0] == "1",
            id: items[1].clone(),
            name: items[2].clone(),
            new_opinion: items[3].clone(),
            strength: items[4].parse().unwrap_or(0.0),
            evolutions: items[5].parse().unwrap_or(0),
        }))
    }

    /// Soft delete: `active` becomes "0", the record stays; a non-empty reason is logged as a
    /// "retraction" history entry. `None` when not found.
    pub async fn retract_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        reason: &str,
        guard: WriteGuard<'_>,
    ) -> Result<Option<RetractOutcome>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        let reason = validate::truncate_chars(reason.trim(), self.settings.store.max_opinion_chars);
        let mut invocation =
            self.invocation(&scripts::RETRACT, persona_id, preference_id, guard)?;
        invocation.arg(reason.as_str()).arg(now_iso());
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("retract", started.elapsed());
        let Some(items) = script_reply(reply, 3)? else {
            return Ok(None);
        };
        Ok(Some(RetractOutcome {
            id: items[1].clone(),
            name: items[2].clone(),
            active: false,
        }))
    }

    /// Runs a write script. A refusal for a lost lock becomes [`StoreError::Fenced`]. With
    /// `redis.min_replicas_acked` set, the write counts only once that many replicas have it
    /// (`WAIT`): a failover must not lose an effect whose event was acked. Fewer replicas in
    /// time is a retryable error; the event is redelivered and its effect record keeps the
    /// retry from applying twice.
    async fn write(
        &self,
        invocation: redis::ScriptInvocation<'_>,
        persona_id: &str,
    ) -> Result<Value, StoreError> {
        let mut connection = self.connection.clone();
        let reply: Value = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(fenced(persona_id))?;
        let replicas = self.settings.min_replicas_acked;
        if replicas > 0 {
            let mut wait = redis::cmd("WAIT");
            wait.arg(replicas).arg(self.settings.replica_wait_ms);
            let acked: u64 = connection
                .query_for_key(&self.route_key(persona_id), &wait)
                .await?;
            if acked < replicas {
                return Err(StoreError::NotReplicated {
                    persona_id: persona_id.to_string(),
                    acked,
                    wanted: replicas,
                });
            }
        }
        Ok(reply)
    }

    /// A write script's invocation with the shared keys and arguments (see `scripts.rs`).
    fn invocation<'s>(
        &self,
        script: &'s redis::Script,
        persona_id: &str,
        preference_id: &str,
        guard: WriteGuard<'_>,
    ) -> Result<redis::ScriptInvocation<'s>, StoreError> {
        if let Some(effect_id) = guard.effect_id {
            validate::effect_id(effect_id)?;
        }
        if let Some(lock) = guard.lock
            && lock.persona_id() != persona_id
        {
            return Err(StoreError::invalid(
                "lock",
                format!(
                    "lock is for persona {}, write is for {persona_id}",
                    lock.persona_id()
                ),
            ));
        }
        let config = &self.settings.store;
        let mut invocation = script.prepare_invoke();
        for key in self
            .settings
            .keys
            .write_script_keys(persona_id, preference_id)
        {
            invocation.key(key);
        }
        invocation
            .arg(guard.effect_id.unwrap_or_default())
            // How long an idempotency record outlives its write (`store.effect_ttl_hours`,
            // at least as long as events and dead letters are kept; 0 = for ever).
            .arg(config.effect_ttl_hours * 3600)
            .arg(guard.lock.map(LockToken::token).unwrap_or_default())
            .arg(config.vector_quantisation.vadd_option())
            .arg(config.embedding_dims * 4);
        Ok(invocation)
    }

    // ----- reads -------------------------------------------------------------------------

    /// One preference, or `None`. A record whose hash says it belongs to another persona is
    /// treated as not found.
    pub async fn get_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<Option<Preference>, StoreError> {
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        let mut connection = self.connection.clone();
        let values: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
            .arg(self.preference_key(persona_id, preference_id))
            .arg(&field::ALL_BUT_EMBEDDING[..])
            .query_async(&mut connection)
            .await?;
        let fields: HashMap<String, Vec<u8>> = field::ALL_BUT_EMBEDDING
            .iter()
            .zip(values)
            .filter_map(|(name, value)| value.map(|v| (name.to_string(), v)))
            .collect();
        if fields.is_empty() {
            return Ok(None);
        }
        let fields: HashMap<String, String> = fields
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let preference = Preference::from_fields(&fields)?;
        Ok((preference.persona_id == persona_id).then_some(preference))
    }

    /// A persona's preferences, strongest first (ties by id), read from the persona's own
    /// records: its id set names them all, and all live in its slot, so this works the same on
    /// one node and on a cluster (where RediSearch 2.10 cannot answer for every shard).
    pub async fn list_preferences(
        &self,
        persona_id: &str,
        options: &ListOptions,
    ) -> Result<Vec<Preference>, StoreError> {
        validate::persona_id(persona_id)?;
        if let Some(category) = &options.category
            && category.trim().is_empty()
        {
            return Err(StoreError::invalid("category", "is empty"));
        }
        let limit = options.limit.clamp(1, validate::MAX_LIST_LIMIT);
        let mut listed: Vec<Preference> = self
            .all_records(persona_id)
            .await?
            .into_iter()
            .filter(|p| options.include_retracted || p.active)
            .filter(|p| {
                options
                    .category
                    .as_ref()
                    .is_none_or(|category| &p.category == category)
            })
            .collect();
        listed.sort_by(|a, b| {
            b.strength
                .total_cmp(&a.strength)
                .then_with(|| a.id.cmp(&b.id))
        });
        listed.truncate(limit);
        Ok(listed)
    }

    /// Totals, active/retracted split and active preferences per category.
    pub async fn stats(&self, persona_id: &str) -> Result<PreferenceStats, StoreError> {
        validate::persona_id(persona_id)?;
        let records = self.all_records(persona_id).await?;
        let total = records.len() as u64;
        let mut by_category = std::collections::BTreeMap::new();
        let mut active = 0;
        for preference in records.iter().filter(|p| p.active) {
            active += 1;
            *by_category.entry(preference.category.clone()).or_insert(0) += 1;
        }
        Ok(PreferenceStats {
            persona_id: persona_id.to_string(),
            total,
            active,
            retracted: total - active,
            by_category,
        })
    }

    /// Every record of one persona (without embeddings), by its id set, pipelined in chunks.
    async fn all_records(&self, persona_id: &str) -> Result<Vec<Preference>, StoreError> {
        let ids = self.preference_ids(persona_id).await?;
        let mut records = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(1000) {
            records.extend(
                self.preferences_by_id(persona_id, chunk)
                    .await?
                    .into_iter()
                    .flatten(),
            );
        }
        Ok(records)
    }

    /// KNN over one persona's preferences; `score` is the cosine distance, nearest first.
    /// Active preferences come from the persona's vector set; with `include_retracted`, every
    /// preference of the persona is scored exactly from its stored vector instead (an
    /// administrative search, proportional to the persona's size). A failed search is an error,
    /// never an empty list.
    pub async fn search_preferences(
        &self,
        persona_id: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::embedding(query_embedding, self.settings.store.embedding_dims)?;
        let top_k = validate::top_k(top_k, self.settings.store.max_top_k)?;
        let scored: Vec<(String, f64)> = if include_retracted {
            self.exact_neighbours(persona_id, query_embedding, top_k)
                .await?
        } else {
            self.vector_neighbours(persona_id, query_embedding, top_k)
                .await?
                .into_iter()
                .map(|hit| (hit.id, hit.similarity))
                .collect()
        };
        let records = self
            .preferences_by_id(
                persona_id,
                &scored.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
            )
            .await?;
        telemetry::store_op("search", started.elapsed());
        Ok(scored
            .into_iter()
            .zip(records)
            .filter_map(|((_, similarity), preference)| {
                preference.map(|preference| ScoredPreference {
                    preference,
                    score: 1.0 - similarity,
                })
            })
            .collect())
    }

    /// Full-text search of one persona's topics and opinions (BM25 over the TEXT fields),
    /// best first, with each hit's cosine similarity to `query_embedding` computed from its
    /// stored vector, so callers can blend the two. No word to search: no hits.
    pub async fn keyword_search(
        &self,
        persona_id: &str,
        text: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
    ) -> Result<Vec<(Preference, f64, f64)>, StoreError> {
        validate::persona_id(persona_id)?;
        validate::embedding(query_embedding, self.settings.store.embedding_dims)?;
        let top_k = validate::top_k(top_k, self.settings.store.max_top_k)?;
        if self.connection.is_cluster() {
            // RediSearch 2.10 routes an index by its name's slot and has no coordinator: on a
            // cluster one index would see one shard's preferences only. The persona's records
            // all live in its slot, so BM25 over them gives the same answer.
            return self
                .keyword_search_in_records(
                    persona_id,
                    text,
                    query_embedding,
                    top_k,
                    include_retracted,
                )
                .await;
        }
        let Some(words) = query::keyword_clause(text) else {
            return Ok(Vec::new());
        };
        let filter = persona_filter(persona_id, include_retracted);
        let mut returned: Vec<&str> = field::ALL_BUT_EMBEDDING.to_vec();
        returned.push(field::EMBEDDING);
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("FT.SEARCH");
        command
            .arg(&self.settings.index_name)
            .arg(format!("{filter} {words}"))
            .arg("WITHSCORES")
            .arg("SCORER")
            .arg("BM25")
            .arg("LIMIT")
            .arg(0)
            .arg(top_k)
            .arg("RETURN")
            .arg(returned.len())
            .arg(&returned[..])
            .arg("DIALECT")
            .arg(2);
        let reply: Value = connection
            .query_for_key(&self.route_key(persona_id), &command)
            .await?;
        Ok(query::parse_keyword_reply(reply)?
            .into_iter()
            .filter(|hit| hit.preference.persona_id == persona_id)
            .map(|hit| {
                let similarity = cosine(&hit.embedding, query_embedding);
                (hit.preference, hit.bm25, similarity)
            })
            .collect())
    }

    /// [`PreferenceStore::keyword_search`] over the persona's own records (BM25, k1 1.2,
    /// b 0.75, as RediSearch scores; no stemming), for a cluster, where no index sees them all.
    async fn keyword_search_in_records(
        &self,
        persona_id: &str,
        text: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
    ) -> Result<Vec<(Preference, f64, f64)>, StoreError> {
        let words = query::keyword_words(text);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let records: Vec<Preference> = self
            .all_records(persona_id)
            .await?
            .into_iter()
            .filter(|p| include_retracted || p.active)
            .collect();
        let documents: Vec<Vec<String>> = records
            .iter()
            .map(|p| query::document_words(&format!("{} {}", p.name, p.opinion)))
            .collect();
        let scores = query::bm25(&words, &documents);
        let mut hits: Vec<(usize, f64)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, score)| *score > 0.0)
            .collect();
        hits.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(records[a.0].id.cmp(&records[b.0].id))
        });
        hits.truncate(top_k);
        let mut pipe = redis::pipe();
        for (at, _) in &hits {
            pipe.cmd("HGET")
                .arg(self.preference_key(persona_id, &records[*at].id))
                .arg(field::EMBEDDING);
        }
        let mut connection = self.connection.clone();
        let vectors = if hits.is_empty() {
            Vec::new()
        } else {
            connection
                .pipeline_for_key(&self.route_key(persona_id), &pipe)
                .await?
        };
        let mut records: Vec<Option<Preference>> = records.into_iter().map(Some).collect();
        Ok(hits
            .into_iter()
            .zip(vectors)
            .filter_map(|((at, score), vector)| {
                let similarity = match vector {
                    Value::BulkString(bytes) => {
                        cosine(&query::bytes_to_vector(&bytes), query_embedding)
                    }
                    _ => 0.0,
                };
                records[at].take().map(|p| (p, score, similarity))
            })
            .collect())
    }

    /// The ingest decision's search: the persona's active preferences nearest to a topic,
    /// `store.conflict_top_k` of them, carrying only what deciding reads (id, topic, stance and
    /// its time). Every event runs it: one VSIM over the persona's own vector set, whose
    /// attributes carry those fields, so no hash is read.
    pub async fn nearest_topics(
        &self,
        persona_id: &str,
        topic_embedding: &[f32],
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::embedding(topic_embedding, self.settings.store.embedding_dims)?;
        let hits = self
            .vector_neighbours(
                persona_id,
                topic_embedding,
                self.settings.store.conflict_top_k,
            )
            .await?;
        telemetry::store_op("search", started.elapsed());
        Ok(hits
            .into_iter()
            .map(|hit| ScoredPreference {
                score: 1.0 - hit.similarity,
                preference: hit.attributes.into_preference(hit.id, persona_id),
            })
            .collect())
    }

    /// `VSIM` over the persona's vector set: the nearest active preferences with their cosine
    /// similarity and attributes.
    async fn vector_neighbours(
        &self,
        persona_id: &str,
        embedding: &[f32],
        top_k: usize,
    ) -> Result<Vec<query::VectorHit>, StoreError> {
        let mut connection = self.connection.clone();
        let reply: Value = redis::cmd("VSIM")
            .arg(self.settings.keys.vectors(persona_id))
            .arg("FP32")
            .arg(vector_to_bytes(embedding))
            .arg("WITHSCORES")
            .arg("WITHATTRIBS")
            .arg("COUNT")
            .arg(top_k)
            .query_async(&mut connection)
            .await?;
        query::parse_vector_hits(reply, query::VectorScore::VsimScore)
    }

    /// Every preference of the persona (retracted too) scored exactly against `embedding`
    /// from its stored vector: (id, cosine similarity), nearest first, at most `top_k`.
    async fn exact_neighbours(
        &self,
        persona_id: &str,
        embedding: &[f32],
        top_k: usize,
    ) -> Result<Vec<(String, f64)>, StoreError> {
        let ids = self.preference_ids(persona_id).await?;
        let mut scored = Vec::with_capacity(ids.len());
        let mut connection = self.connection.clone();
        for chunk in ids.chunks(500) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HGET")
                    .arg(self.preference_key(persona_id, id))
                    .arg(field::EMBEDDING);
            }
            let vectors = connection
                .pipeline_for_key(&self.route_key(persona_id), &pipe)
                .await?;
            for (id, vector) in chunk.iter().zip(vectors) {
                if let Value::BulkString(bytes) = vector {
                    let similarity = cosine(&query::bytes_to_vector(&bytes), embedding);
                    scored.push((id.clone(), similarity));
                }
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(top_k);
        Ok(scored)
    }

    /// Whole records of one persona by id, in order, in one pipelined round trip; `None` for
    /// an id whose hash is gone.
    async fn preferences_by_id(
        &self,
        persona_id: &str,
        ids: &[String],
    ) -> Result<Vec<Option<Preference>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HMGET")
                .arg(self.preference_key(persona_id, id))
                .arg(&field::ALL_BUT_EMBEDDING[..]);
        }
        let mut connection = self.connection.clone();
        let replies = connection
            .pipeline_for_key(&self.route_key(persona_id), &pipe)
            .await?;
        replies
            .into_iter()
            .map(|reply| {
                let values: Vec<Option<Vec<u8>>> =
                    redis::from_redis_value(reply).map_err(redis::RedisError::from)?;
                let fields: HashMap<String, String> = field::ALL_BUT_EMBEDDING
                    .iter()
                    .zip(values)
                    .filter_map(|(name, value)| {
                        value.map(|v: Vec<u8>| {
                            (name.to_string(), String::from_utf8_lossy(&v).into_owned())
                        })
                    })
                    .collect();
                if fields.is_empty() {
                    return Ok(None);
                }
                let preference = Preference::from_fields(&fields)?;
                Ok((preference.persona_id == persona_id).then_some(preference))
            })
            .collect()
    }

    /// Active preferences whose similarity (1 − distance) to `embedding` is at least
    /// `threshold` (default `store.conflict_threshold`), among the nearest `conflict_top_k`.
    pub async fn find_conflicts(
        &self,
        persona_id: &str,
        embedding: &[f32],
        threshold: Option<f64>,
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        let threshold = threshold.unwrap_or(self.settings.store.conflict_threshold);
        let hits = self
            .search_preferences(
                persona_id,
                embedding,
                self.settings.store.conflict_top_k,
                false,
            )
            .await?;
        Ok(hits
            .into_iter()
            .filter(|hit| hit.similarity() >= threshold)
            .collect())
    }

    /// The preferences worth putting into a system prompt: a semantic pass (the persona's
    /// `max_count·2` nearest active preferences) and a user pass (its preferences about the
    /// present users, nearest first), in one round trip; merged by id, ranked by relevance ×
    /// strength, capped by count and by total opinion characters. Each result says why it was
    /// chosen.
    pub async fn get_preferences_for_injection(
        &self,
        query: &InjectionQuery<'_>,
    ) -> Result<Vec<InjectedPreference>, StoreError> {
        Ok(self
            .get_preferences_for_injection_with_resident(query, 0)
            .await?
            .0)
    }

    /// [`PreferenceStore::get_preferences_for_injection`] plus up to `resident_count` of the
    /// persona's strongest active preferences regardless of the query ("always-on" context),
    /// deduplicated against the query's results. All three passes are one script over the
    /// persona's own structures (`scripts::INJECT`): one round trip, one node.
    pub async fn get_preferences_for_injection_with_resident(
        &self,
        query: &InjectionQuery<'_>,
        resident_count: usize,
    ) -> Result<(Vec<InjectedPreference>, Vec<InjectedPreference>), StoreError> {
        let started = Instant::now();
        let config = &self.settings.store;
        validate::persona_id(query.persona_id)?;
        validate::embedding(query.query_embedding, config.embedding_dims)?;
        if query.max_count == 0 || query.max_count > config.max_injection_count {
            return Err(StoreError::invalid(
                "max_count",
                format!("must be within 1..={}", config.max_injection_count),
            ));
        }
        if query.max_chars == 0 || query.max_chars > config.max_injection_chars {
            return Err(StoreError::invalid(
                "max_chars",
                format!("must be within 1..={}", config.max_injection_chars),
            ));
        }
        validate::related_ids(
            "active_user_ids",
            query.active_user_ids,
            config.max_related_ids,
            validate::user_id,
        )?;
        if resident_count > config.max_injection_count {
            return Err(StoreError::invalid(
                "resident_count",
                format!("must be at most {}", config.max_injection_count),
            ));
        }
        let top_k = (query.max_count * 2).min(config.max_top_k);
        // Fetch a few extra strongest: some may already be among the query's results.
        let strongest = if resident_count > 0 {
            resident_count + query.max_count
        } else {
            0
        };
        let mut connection = self.connection.clone();
        let reply: Value = query::injection_invocation(
            self.keys(),
            query.persona_id,
            &vector_to_bytes(query.query_embedding),
            top_k,
            strongest,
            query.active_user_ids,
        )
        .invoke_async(&mut connection)
        .await?;
        let passes = query::parse_injection_reply(reply)?;
        let to_scored = |hits: Vec<query::VectorHit>| -> Vec<ScoredPreference> {
            hits.into_iter()
                .map(|hit| ScoredPreference {
                    score: 1.0 - hit.similarity,
                    preference: hit.attributes.into_preference(hit.id, query.persona_id),
                })
                .collect()
        };
        let selected = rank_for_injection(
            query,
            to_scored(passes.semantic),
            to_scored(passes.about_users),
            config,
        );
        let mut resident = Vec::new();
        for (id, attributes) in passes.strongest {
            if resident.len() == resident_count {
                break;
            }
            if selected.iter().any(|s| s.id == id) {
                continue;
            }
            let preference = attributes.into_preference(id, query.persona_id);
            resident.push(InjectedPreference {
                score: preference.strength,
                relevance: 0.0,
                strength: preference.strength,
                id: preference.id,
                name: preference.name,
                opinion: preference.opinion,
                category: preference.category,
                matched_by: vec![MatchReason::Resident],
            });
        }
        telemetry::store_op("inject", started.elapsed());
        Ok((selected, resident))
    }
}

/// Merges the two passes, ranks by relevance × strength and applies the caps. Pure, so the
/// ranking rules are testable without Redis.
pub fn rank_for_injection(
    query: &InjectionQuery<'_>,
    semantic: Vec<ScoredPreference>,
    by_user: Vec<ScoredPreference>,
    config: &StoreConfig,
) -> Vec<InjectedPreference> {
    let user_relevance_floor = config.user_relevance_floor;
    let mut merged: Vec<InjectedPreference> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    let passes = semantic
        .into_iter()
        .map(|hit| (hit, false))
        .chain(by_user.into_iter().map(|hit| (hit, true)));
    for (hit, from_user_pass) in passes {
        if hit.preference.persona_id != query.persona_id || !hit.preference.active {
            continue;
        }
        let mut relevance = hit.similarity().clamp(0.0, 1.0);
        if !from_user_pass && relevance < config.min_semantic_relevance {
            continue;
        }
        let mut reasons = Vec::new();
        if from_user_pass {
            relevance = relevance.max(user_relevance_floor);
            for user in &hit.preference.related_user_ids {
                if query.active_user_ids.contains(user) {
                    reasons.push(MatchReason::User(user.clone()));
                }
            }
        } else {
            reasons.push(MatchReason::Semantic);
        }
        match position.get(&hit.preference.id) {
            Some(&at) => {
                let existing = &mut merged[at];
                existing.relevance = existing.relevance.max(relevance);
                existing.score = existing.relevance * existing.strength;
                for reason in reasons {
                    if !existing.matched_by.contains(&reason) {
                        existing.matched_by.push(reason);
                    }
                }
            }
            None => {
                position.insert(hit.preference.id.clone(), merged.len());
                let strength = hit.preference.strength;
                merged.push(InjectedPreference {
                    id: hit.preference.id,
                    name: hit.preference.name,
                    opinion: hit.preference.opinion,
                    category: hit.preference.category,
                    strength,
                    relevance,
                    score: relevance * strength,
                    matched_by: reasons,
                });
            }
        }
    }
    // Highest score first; ties by id so the order is stable across calls.
    merged.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    let mut chosen = Vec::new();
    let mut chars = 0usize;
    for candidate in merged {
        if chosen.len() == query.max_count {
            break;
        }
        let length = candidate.opinion.chars().count();
        // A long opinion that does not fit is skipped so shorter, lower-ranked ones can still
        // use the budget.
        if chars + length > query.max_chars {
            continue;
        }
        chars += length;
        chosen.push(candidate);
    }
    chosen
}

impl PreferenceStore {
    /// Erasure of one user from one persona's memory: the user id is replaced by `pseudonym`
    /// in related users, evidence and provenance of every preference, and preferences whose
    /// only evidence was that user's conversations are retracted (with a history entry).
    pub async fn purge_user(
        &self,
        persona_id: &str,
        user_id: &str,
        pseudonym: &str,
        guard: WriteGuard<'_>,
    ) -> Result<PurgeReport, StoreError> {
        validate::persona_id(persona_id)?;
        validate::user_id("user_id", user_id)?;
        validate::user_id("pseudonym", pseudonym)?;
        if user_id == pseudonym {
            return Err(StoreError::invalid(
                "pseudonym",
                "must differ from the user id",
            ));
        }
        let mut report = PurgeReport {
            persona_id: persona_id.into(),
            pseudonym: pseudonym.into(),
            ..Default::default()
        };
        let now = now_iso();
        // Recorded first, so that from now on ingest leaves this user's earlier conversations
        // alone (events still in the backlog, redelivered or replayed from dead letters would
        // otherwise bring the id back); a purge cut short is simply run again.
        self.record_erasure(persona_id, user_id, pseudonym, &now)
            .await?;
        // Every preference of the persona, without a cap: an erasure must not stop at a page
        // size. The script itself leaves preferences that do not name the user untouched.
        let preference_ids = self.preference_ids(persona_id).await?;
        // An erasure over a large persona can outlast the lock: renew it before starting and
        // whenever a third of its lifetime has passed.
        let mut renewed = None;
        for preference_id in preference_ids {
            if let Some(lock) = guard.lock {
                lock.keep_alive(self, &mut renewed).await?;
            }
            let mut invocation = self.invocation(
                &scripts::PURGE_USER,
                persona_id,
                &preference_id,
                WriteGuard {
                    effect_id: None,
                    ..guard
                },
            )?;
            invocation.arg(user_id).arg(pseudonym).arg(now.as_str());
            let reply: Value = self.write(invocation, persona_id).await?;
            if let Some(items) = script_reply(reply, 2)? {
                if items[0] == "1" {
                    report.rewritten.push(preference_id.clone());
                }
                if items[1] == "1" {
                    report.retracted.push(preference_id);
                }
            }
        }
        Ok(report)
    }

    async fn record_erasure(
        &self,
        persona_id: &str,
        user_id: &str,
        pseudonym: &str,
        erased_at: &str,
    ) -> Result<(), StoreError> {
        let erasure = Erasure {
            pseudonym: pseudonym.into(),
            erased_at: erased_at.into(),
        };
        let mut connection = self.connection.clone();
        let _: () = redis::cmd("HSET")
            .arg(self.erasures_key(persona_id))
            .arg(erasure_digest(persona_id, user_id))
            .arg(serde_json::to_string(&erasure).expect("an erasure serialises"))
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    /// The erasures recorded for any of `user_ids` in this persona, by user id. One round trip.
    pub async fn erasures(
        &self,
        persona_id: &str,
        user_ids: &[&str],
    ) -> Result<HashMap<String, Erasure>, StoreError> {
        let mut found = HashMap::new();
        let user_ids: Vec<&str> = user_ids
            .iter()
            .copied()
            .filter(|id| !id.is_empty())
            .collect();
        if user_ids.is_empty() {
            return Ok(found);
        }
        let mut command = redis::cmd("HMGET");
        command.arg(self.erasures_key(persona_id));
        for user_id in &user_ids {
            command.arg(erasure_digest(persona_id, user_id));
        }
        let mut connection = self.connection.clone();
        let values: Vec<Option<String>> = command.query_async(&mut connection).await?;
        for (user_id, value) in user_ids.iter().zip(values) {
            if let Some(erasure) = value.and_then(|v| serde_json::from_str::<Erasure>(&v).ok()) {
                found.insert(user_id.to_string(), erasure);
            }
        }
        Ok(found)
    }

    /// Deletes every key of one persona (preferences, their structures, idempotency records,
    /// lock, erasure records); the persona's id set names every preference, so nothing is
    /// scanned. Returns how many keys went. For demos, tests and erasure of a whole persona;
    /// ordinary forgetting is [`PreferenceStore::retract_preference`].
    pub async fn delete_persona(&self, persona_id: &str) -> Result<u64, StoreError> {
        validate::persona_id(persona_id)?;
        let keys = &self.settings.keys;
        let ids = self.preference_ids(persona_id).await?;
        let mut connection = self.connection.clone();
        let mut deleted = 0u64;
        // Preference hashes first: the id set that lists them goes last, so a deletion cut
        // short can be run again.
        for chunk in ids.chunks(1000) {
            let hashes: Vec<String> = chunk
                .iter()
                .map(|id| keys.preference(persona_id, id))
                .collect();
            let removed: u64 = redis::cmd("UNLINK")
                .arg(&hashes)
                .query_async(&mut connection)
                .await?;
            deleted += removed;
        }
        let mut structures = keys.persona_structures(persona_id).to_vec();
        // The id set last (see above).
        structures.rotate_left(1);
        let removed: u64 = redis::cmd("UNLINK")
            .arg(&structures)
            .query_async(&mut connection)
            .await?;
        Ok(deleted + removed)
    }

    fn coerce_category(&self, category: &str) -> String {
        let lowered = category.trim().to_ascii_lowercase();
        if self.settings.store.categories.contains(&lowered) {
            lowered
        } else {
            self.settings.store.fallback_category.clone()
        }
    }
}

fn script_reply(reply: Value, expected: usize) -> Result<Option<Vec<String>>, StoreError> {
    match reply {
        Value::Nil => Ok(None),
        Value::Array(items) if items.len() == expected => {
            Ok(Some(items.iter().map(query::value_to_string).collect()))
        }
        other => Err(StoreError::UnexpectedReply(format!(
            "script returned {other:?}"
        ))),
    }
}

fn fenced(persona_id: &str) -> impl Fn(redis::RedisError) -> StoreError + '_ {
    move |error| {
        if error.to_string().contains("FENCED") {
            StoreError::Fenced {
                persona_id: persona_id.to_string(),
            }
        } else {
            error.into()
        }
    }
}

/// An error's text lower-cased with only letters, digits and single spaces, so matching does not
/// depend on how the client quotes or splits the server's message (RediSearch answers "Unknown
/// index name", which the client splits into a code and details).
fn loose_text(text: &str) -> String {
    let text: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { ' ' })
        .collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A client for a Redis Cluster from its seed nodes (`redis.cluster_nodes`). It follows MOVED
/// and ASK redirects and refreshes its slot map after a failover.
async fn cluster_connection(redis: &RedisConfig) -> Result<connection::ClusterHandle, StoreError> {
    let timeout = Duration::from_millis(redis.response_timeout_ms);
    let client = redis::cluster::ClusterClientBuilder::new(redis.cluster_nodes.clone())
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(6)
        // A master that died stays in the slot map until the client gives up reconnecting to
        // it; only then does it ask the other nodes for the new map (its replica now serves
        // the slots). Without a limit it would keep retrying the dead address.
        .max_connection_attempts(std::num::NonZeroUsize::new(3).expect("3 is not zero"))
        .build()
        .map_err(|error| StoreError::InvalidInput {
            field: "redis.cluster_nodes",
            reason: error.to_string(),
        })?;
    Ok(connection::ClusterHandle::connect(client).await?)
}

/// Shortest text that parses back to the same f64.
fn format_float(value: f64) -> String {
    format!("{value}")
}

/// UTC now as RFC 3339 with microseconds, like the original's `datetime.isoformat()`.
/// A user erased from one persona's memory (`purge_user`): conversations with them up to
/// `erased_at` are no longer evidence, and ingest writes `pseudonym` wherever such a
/// conversation would have named them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Erasure {
    pub pseudonym: String,
    /// RFC 3339.
    pub erased_at: String,
}

impl Erasure {
    /// Whether a persona message sent at `expressed_at` belongs to the erased past. A time
    /// that cannot be read counts as erased: erasure errs on the side of forgetting.
    pub fn covers(&self, expressed_at: &str) -> bool {
        let parse = |text: &str| {
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
        };
        match (parse(expressed_at), parse(&self.erased_at)) {
            (Some(expressed), Some(erased)) => expressed <= erased,
            _ => true,
        }
    }
}

/// The field an erasure is recorded under: a SHA-256 digest of persona and user id, so the
/// record of an erasure does not itself keep the erased id in the clear.
fn erasure_digest(persona_id: &str, user_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::new()
        .chain_update(persona_id.as_bytes())
        .chain_update([0u8])
        .chain_update(user_id.as_bytes())
        .finalize();
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

pub fn now_iso() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| now.unix_timestamp().to_string())
}

/// Cosine similarity; 0 for vectors of different sizes (a record awaiting migration).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
