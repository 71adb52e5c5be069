//! The preference store: a persona's opinions as Redis hashes, searched through a RediSearch
//! HNSW index. Implements every operation of the original `PersonaPreferenceManager` (seed 000)
//! plus what exactly-once ingest needs: idempotency keys and lock fencing on every write.
//!
//! **Invariant:** only this module talks to Redis. Every query that takes a caller's value
//! escapes it ([`query::escape_tag`]) and is restricted to one persona.

mod error;
pub mod index;
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

pub use error::StoreError;
pub use index::IndexInfo;

/// A stored preference's topic and whether its vector fits the index (migration).
#[derive(Debug, Clone)]
pub struct EmbeddingStatus {
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
use query::{
    escape_tag, knn_command, knn_query, parse_knn_reply, parse_search_reply, persona_filter,
    vector_to_bytes,
};
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
    connection: ConnectionManager,
    settings: Arc<Settings>,
}

struct Settings {
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
        let client = redis_client(redis)?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_millis(redis.response_timeout_ms)))
            .set_connection_timeout(Some(Duration::from_millis(redis.response_timeout_ms)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(2));
        let connection = ConnectionManager::new_with_config(client, config).await?;
        Ok(PreferenceStore {
            connection,
            settings: Arc::new(Settings {
                key_prefix: redis.key_prefix.clone(),
                index_name: redis.index_name.clone(),
                store: store.clone(),
            }),
        })
    }

    /// The shared connection, for callers that measure raw Redis cost (benches) or need a
    /// command the store does not wrap.
    pub fn connection(&self) -> ConnectionManager {
        self.connection.clone()
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
        format!("{}:persona_pref:", self.settings.key_prefix)
    }

    pub fn preference_key(&self, persona_id: &str, preference_id: &str) -> String {
        format!(
            "{}:persona_pref:{persona_id}:{preference_id}",
            self.settings.key_prefix
        )
    }

    fn effect_key(&self, persona_id: &str, effect_id: &str) -> String {
        format!(
            "{}:persona_pref_effect:{persona_id}:{effect_id}",
            self.settings.key_prefix
        )
    }

    /// Erasure records of one persona: digest of an erased user id → [`Erasure`].
    fn erasures_key(&self, persona_id: &str) -> String {
        format!(
            "{}:persona_pref_erased:{persona_id}",
            self.settings.key_prefix
        )
    }

    pub(crate) fn lock_key(&self, persona_id: &str) -> String {
        format!(
            "{}:persona_pref_lock:{persona_id}",
            self.settings.key_prefix
        )
    }

    // ----- index -------------------------------------------------------------------------

    /// Creates the index if missing. If it exists with another schema or DIM, fails with an
    /// error naming both, so vectors are never written where they cannot be searched.
    pub async fn ensure_index(&self) -> Result<IndexInfo, StoreError> {
        if let Some(info) = self.index_info().await? {
            let problems = index::mismatches(
                &info,
                &self.hash_prefix(),
                self.settings.store.embedding_dims,
            );
            if !problems.is_empty() {
                return Err(StoreError::IndexMismatch {
                    index: info.name.clone(),
                    reason: format!(
                        "{}. Drop it with `FT.DROPINDEX {}` (hashes are kept) and restart to rebuild it, or fix the configuration",
                        problems.join("; "),
                        info.name
                    ),
                });
            }
            return Ok(info);
        }
        let mut connection = self.connection.clone();
        let created: Result<Value, redis::RedisError> = index::create_command(
            &self.settings.index_name,
            &self.hash_prefix(),
            self.settings.store.embedding_dims,
        )
        .query_async(&mut connection)
        .await;
        match created {
            Ok(_) => {}
            // Another worker created it between our probe and our create: verify theirs.
            Err(error) if loose_text(&error).contains("already exists") => {}
            Err(error) => return Err(error.into()),
        }
        self.index_info().await?.ok_or_else(|| {
            StoreError::UnexpectedReply("index missing right after FT.CREATE".into())
        })
    }

    /// `FT.INFO`, or `None` when the index does not exist.
    pub async fn index_info(&self) -> Result<Option<IndexInfo>, StoreError> {
        let mut connection = self.connection.clone();
        let reply: Result<Value, redis::RedisError> = redis::cmd("FT.INFO")
            .arg(&self.settings.index_name)
            .query_async(&mut connection)
            .await;
        match reply {
            Ok(reply) => Ok(Some(index::parse_info(&self.settings.index_name, reply)?)),
            Err(error) if is_unknown_index(&error) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Drops the index definition; the hashes stay (no `DD`).
    pub async fn drop_index(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let _: Value = redis::cmd("FT.DROPINDEX")
            .arg(&self.settings.index_name)
            .query_async(&mut connection)
            .await?;
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

    /// Every preference hash of every persona under the key prefix (by SCAN).
    pub async fn all_preference_keys(&self) -> Result<Vec<String>, StoreError> {
        self.scan_keys(&format!("{}*", self.hash_prefix())).await
    }

    /// For each key, its topic (`name`) and whether its stored vector has the configured size,
    /// in one pipelined round trip.
    pub async fn embedding_status(
        &self,
        keys: &[String],
    ) -> Result<Vec<EmbeddingStatus>, StoreError> {
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("HGET").arg(key).arg(field::NAME);
            pipe.cmd("HSTRLEN").arg(key).arg(field::EMBEDDING);
        }
        let mut connection = self.connection.clone();
        let replies: Vec<Value> = pipe.query_async(&mut connection).await?;
        let expected = (self.settings.store.embedding_dims * 4) as i64;
        Ok(keys
            .iter()
            .zip(replies.chunks(2))
            .map(|(key, pair)| EmbeddingStatus {
                key: key.clone(),
                topic: query::value_to_string(&pair[0]),
                fits: matches!(pair[1], Value::Int(length) if length == expected),
            })
            .collect())
    }

    /// Stores new vectors for existing hashes (a hash deleted meanwhile stays deleted).
    /// Returns how many were written.
    pub async fn set_embeddings(&self, updates: &[(String, Vec<f32>)]) -> Result<u64, StoreError> {
        let dims = self.settings.store.embedding_dims;
        let mut pipe = redis::pipe();
        for (key, vector) in updates {
            validate::embedding(vector, dims)?;
            pipe.invoke_script(
                scripts::SET_EMBEDDING
                    .key(key)
                    .arg(query::vector_to_bytes(vector)),
            );
        }
        let mut connection = self.connection.clone();
        // A pipeline sends EVALSHA only, so the script must be loaded first.
        let _: String = scripts::SET_EMBEDDING
            .prepare_invoke()
            .load_async(&mut connection)
            .await?;
        let written: Vec<u64> = pipe.query_async(&mut connection).await?;
        Ok(written.into_iter().sum())
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
        let key = self.preference_key(&preference.persona_id, &preference.id);
        let mut invocation = self.invocation(&scripts::ADD, &key, &preference.persona_id, guard)?;
        for (name, value) in &fields {
            invocation.arg(*name).arg(value.as_slice());
        }
        let mut connection = self.connection.clone();
        let reply: Value = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(fenced(&preference.persona_id))?;
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
        let key = self.preference_key(persona_id, preference_id);
        let now = now_iso();
        let entry = serde_json::to_string(&Reinforcement {
            timestamp: now.clone(),
            provenance: provenance.clone(),
        })
        .map_err(|e| StoreError::UnexpectedReply(format!("encoding a reinforcement: {e}")))?;
        let mut invocation = self.invocation(&scripts::REINFORCE, &key, persona_id, guard)?;
        invocation
            .arg(format_float(self.settings.store.reinforce_rate))
            .arg(now)
            .arg(&provenance.triggering_user_id)
            .arg(entry)
            .arg(self.settings.store.max_reinforcement_log);
        let mut connection = self.connection.clone();
        let reply: Value = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(fenced(persona_id))?;
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
        let key = self.preference_key(persona_id, preference_id);
        let mut invocation = self.invocation(&scripts::EVOLVE, &key, persona_id, guard)?;
        invocation
            .arg(opinion.as_str())
            .arg(vector_to_bytes(evolution.new_embedding))
            .arg(format_float(config.evolved_strength))
            .arg(now.as_str())
            .arg(reason.as_str())
            .arg(evolution.new_stance.map(Stance::as_str).unwrap_or(""))
            .arg(evolution.expressed_at.unwrap_or(now.as_str()))
            .arg(evolution.evidence_user_id.unwrap_or(""));
        let mut connection = self.connection.clone();
        let reply: Value = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(fenced(persona_id))?;
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
        let key = self.preference_key(persona_id, preference_id);
        let mut invocation = self.invocation(&scripts::RETRACT, &key, persona_id, guard)?;
        invocation.arg(reason.as_str()).arg(now_iso());
        let mut connection = self.connection.clone();
        let reply: Value = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(fenced(persona_id))?;
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

    fn invocation<'s>(
        &self,
        script: &'s redis::Script,
        key: &str,
        persona_id: &str,
        guard: WriteGuard<'_>,
    ) -> Result<redis::ScriptInvocation<'s>, StoreError> {
        let mut invocation = script.prepare_invoke();
        let effect_key = match guard.effect_id {
            Some(effect_id) => {
                validate::effect_id(effect_id)?;
                self.effect_key(persona_id, effect_id)
            }
            None => self.effect_key(persona_id, "-"),
        };
        let lock_key = self.lock_key(persona_id);
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
        invocation
            .key(key)
            .key(effect_key)
            .key(lock_key)
            .arg(if guard.effect_id.is_some() { "1" } else { "" })
            // How long an idempotency record outlives its write (`store.effect_ttl_hours`,
            // at least as long as events and dead letters are kept; 0 = for ever).
            .arg(self.settings.store.effect_ttl_hours * 3600)
            .arg(guard.lock.map(LockToken::token).unwrap_or_default());
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

    /// A persona's preferences, strongest first, through the index (never `KEYS`).
    pub async fn list_preferences(
        &self,
        persona_id: &str,
        options: &ListOptions,
    ) -> Result<Vec<Preference>, StoreError> {
        validate::persona_id(persona_id)?;
        let limit = options.limit.clamp(1, validate::MAX_LIST_LIMIT);
        let mut filter = persona_filter(persona_id, options.include_retracted);
        if let Some(category) = &options.category {
            filter.push_str(&format!(
                " @{}:{{{}}}",
                field::CATEGORY,
                escape_tag(category)
            ));
        }
        let mut cmd = redis::cmd("FT.SEARCH");
        cmd.arg(&self.settings.index_name)
            .arg(filter)
            .arg("SORTBY")
            .arg(field::STRENGTH)
            .arg("DESC")
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .arg("RETURN")
            .arg(field::ALL_BUT_EMBEDDING.len())
            .arg(&field::ALL_BUT_EMBEDDING[..])
            .arg("DIALECT")
            .arg(2);
        let mut connection = self.connection.clone();
        let reply: Value = cmd.query_async(&mut connection).await?;
        let (_, hits) = parse_search_reply(reply)?;
        Ok(hits
            .into_iter()
            .map(|(preference, _)| preference)
            .filter(|p| p.persona_id == persona_id)
            .collect())
    }

    /// Totals, active/retracted split and active preferences per category, in one round trip.
    pub async fn stats(&self, persona_id: &str) -> Result<PreferenceStats, StoreError> {
        validate::persona_id(persona_id)?;
        let index = &self.settings.index_name;
        let count = |filter: String| {
            let mut cmd = redis::cmd("FT.SEARCH");
            cmd.arg(index)
                .arg(filter)
                .arg("LIMIT")
                .arg(0)
                .arg(0)
                .arg("DIALECT")
                .arg(2);
            cmd
        };
        let mut pipe = redis::pipe();
        pipe.add_command(count(persona_filter(persona_id, true)))
            .add_command(count(persona_filter(persona_id, false)));
        let mut aggregate = redis::cmd("FT.AGGREGATE");
        aggregate
            .arg(index)
            .arg(persona_filter(persona_id, false))
            .arg("GROUPBY")
            .arg(1)
            .arg(format!("@{}", field::CATEGORY))
            .arg("REDUCE")
            .arg("COUNT")
            .arg(0)
            .arg("AS")
            .arg("count")
            .arg("DIALECT")
            .arg(2);
        pipe.add_command(aggregate);
        let mut connection = self.connection.clone();
        let (total, active, groups): (Value, Value, Value) =
            pipe.query_async(&mut connection).await?;
        let total = parse_search_reply(total)?.0;
        let active = parse_search_reply(active)?.0;
        let mut by_category = std::collections::BTreeMap::new();
        if let Value::Array(rows) = groups {
            for row in rows.into_iter().skip(1) {
                let Value::Array(pairs) = row else { continue };
                let words: Vec<String> = pairs.iter().map(query::value_to_string).collect();
                let get = |key: &str| {
                    words
                        .iter()
                        .position(|w| w == key)
                        .and_then(|i| words.get(i + 1))
                        .cloned()
                };
                if let (Some(category), Some(count)) = (get(field::CATEGORY), get("count")) {
                    by_category.insert(category, count.parse().unwrap_or(0));
                }
            }
        }
        Ok(PreferenceStats {
            persona_id: persona_id.to_string(),
            total,
            active,
            retracted: total.saturating_sub(active),
            by_category,
        })
    }

    /// KNN over one persona's preferences; `score` is the cosine distance, nearest first.
    /// A failed search is an error, never an empty list.
    pub async fn search_preferences(
        &self,
        persona_id: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        self.knn(
            persona_id,
            query_embedding,
            top_k,
            include_retracted,
            &field::ALL_BUT_EMBEDDING,
        )
        .await
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
        let Some(words) = query::keyword_clause(text) else {
            return Ok(Vec::new());
        };
        let filter = persona_filter(persona_id, include_retracted);
        let mut returned: Vec<&str> = field::ALL_BUT_EMBEDDING.to_vec();
        returned.push(field::EMBEDDING);
        let mut connection = self.connection.clone();
        let reply: Value = redis::cmd("FT.SEARCH")
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
            .arg(2)
            .query_async(&mut connection)
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

    /// The ingest decision's search: the persona's active preferences nearest to a topic,
    /// `store.conflict_top_k` of them, carrying only what deciding reads (id, topic, stance and
    /// its time). Every event runs it, and RediSearch loads each returned field of each hit.
    pub async fn nearest_topics(
        &self,
        persona_id: &str,
        topic_embedding: &[f32],
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        self.knn(
            persona_id,
            topic_embedding,
            self.settings.store.conflict_top_k,
            false,
            &field::DECISION,
        )
        .await
    }

    async fn knn(
        &self,
        persona_id: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
        returned: &[&str],
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::embedding(query_embedding, self.settings.store.embedding_dims)?;
        let top_k = validate::top_k(top_k, self.settings.store.max_top_k)?;
        let query = knn_query(&persona_filter(persona_id, include_retracted), top_k);
        let mut connection = self.connection.clone();
        let reply: Value = knn_command(
            &self.settings.index_name,
            &query,
            &vector_to_bytes(query_embedding),
            top_k,
            returned,
        )
        .query_async(&mut connection)
        .await?;
        let hits = parse_knn_reply(reply)?;
        telemetry::store_op("search", started.elapsed());
        Ok(hits
            .into_iter()
            .filter(|hit| hit.preference.persona_id == persona_id)
            .collect())
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

    /// The preferences worth putting into a system prompt: a semantic pass (KNN, top
    /// `max_count·2`) and a user pass (KNN restricted to preferences about the present users),
    /// sent in one pipelined round trip; merged by id, ranked by relevance × strength, capped by
    /// count and by total opinion characters. Each result says why it was chosen.
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
    /// deduplicated against the query's results. The resident query rides in the same
    /// pipelined round trip.
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
        let top_k = (query.max_count * 2).min(config.max_top_k);
        let filter = persona_filter(query.persona_id, false);
        let mut pipe = query::injection_pipeline(
            &self.settings.index_name,
            query.persona_id,
            &vector_to_bytes(query.query_embedding),
            top_k,
            query.active_user_ids,
        );
        let user_pass = !query.active_user_ids.is_empty();
        if resident_count > config.max_injection_count {
            return Err(StoreError::invalid(
                "resident_count",
                format!("must be at most {}", config.max_injection_count),
            ));
        }
        if resident_count > 0 {
            // Fetch a few extra: some of the strongest may already be among the query results.
            let mut strongest = redis::cmd("FT.SEARCH");
            strongest
                .arg(&self.settings.index_name)
                .arg(&filter)
                .arg("SORTBY")
                .arg(field::STRENGTH)
                .arg("DESC")
                .arg("LIMIT")
                .arg(0)
                .arg(resident_count + query.max_count)
                .arg("RETURN")
                .arg(field::INJECTION.len())
                .arg(&field::INJECTION[..])
                .arg("DIALECT")
                .arg(2);
            pipe.add_command(strongest);
        }
        let mut connection = self.connection.clone();
        let replies: Vec<Value> = pipe.query_async(&mut connection).await?;
        let mut replies = replies.into_iter();
        let semantic = parse_knn_reply(replies.next().unwrap_or(Value::Nil))?;
        let by_user = if user_pass {
            parse_knn_reply(replies.next().unwrap_or(Value::Nil))?
        } else {
            Vec::new()
        };
        let selected = rank_for_injection(query, semantic, by_user, config);
        let mut resident = Vec::new();
        if resident_count > 0 {
            let (_, strongest) = parse_search_reply(replies.next().unwrap_or(Value::Nil))?;
            for (preference, _) in strongest {
                if resident.len() == resident_count {
                    break;
                }
                if preference.persona_id != query.persona_id
                    || selected.iter().any(|s| s.id == preference.id)
                {
                    continue;
                }
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
        // Every key of the persona, without a cap: an erasure must not stop at a page size.
        // The script itself leaves preferences that do not name the user untouched.
        let key_prefix = self.preference_key(persona_id, "");
        let keys = self.scan_keys(&format!("{key_prefix}*")).await?;
        // An erasure over a large persona can outlast the lock: renew it before starting (the
        // scan took time too) and whenever a third of its lifetime has passed.
        let mut renewed = None;
        for key in keys {
            if let Some(lock) = guard.lock {
                lock.keep_alive(self, &mut renewed).await?;
            }
            let preference_id = key[key_prefix.len()..].to_string();
            let mut invocation = self.invocation(
                &scripts::PURGE_USER,
                &key,
                persona_id,
                WriteGuard {
                    effect_id: None,
                    ..guard
                },
            )?;
            invocation.arg(user_id).arg(pseudonym).arg(now.as_str());
            let mut connection = self.connection.clone();
            let reply: Value = invocation
                .invoke_async(&mut connection)
                .await
                .map_err(fenced(persona_id))?;
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

    /// Deletes every key of one persona (preferences, idempotency records, lock), by SCAN so
    /// Redis is never blocked. Returns how many keys went. For demos, tests and erasure of a
    /// whole persona; ordinary forgetting is [`PreferenceStore::retract_preference`].
    pub async fn delete_persona(&self, persona_id: &str) -> Result<u64, StoreError> {
        validate::persona_id(persona_id)?;
        let prefix = &self.settings.key_prefix;
        let patterns = [
            format!("{prefix}:persona_pref:{persona_id}:*"),
            format!("{prefix}:persona_pref_effect:{persona_id}:*"),
            format!("{prefix}:persona_pref_lock:{persona_id}"),
            format!("{prefix}:persona_pref_lock:{persona_id}:fence"),
            format!("{prefix}:persona_pref_erased:{persona_id}"),
        ];
        let mut connection = self.connection.clone();
        let mut deleted = 0u64;
        for pattern in patterns {
            let keys = self.scan_keys(&pattern).await?;
            for chunk in keys.chunks(1000) {
                let removed: u64 = redis::cmd("UNLINK")
                    .arg(chunk)
                    .query_async(&mut connection)
                    .await?;
                deleted += removed;
            }
        }
        Ok(deleted)
    }

    /// Every key matching `pattern`, by SCAN so Redis is never blocked (never `KEYS`).
    async fn scan_keys(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let mut connection = self.connection.clone();
        let mut found = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut connection)
                .await?;
            found.extend(keys);
            if next == 0 {
                return Ok(found);
            }
            cursor = next;
        }
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

fn is_unknown_index(error: &redis::RedisError) -> bool {
    // RediSearch answers "Unknown index name" (or "Unknown Index name", "no such index" in other
    // versions); redis-rs splits the first word off as an error code, so compare loosely.
    let text = loose_text(error);
    text.contains("unknown index name") || text.contains("no such index")
}

/// An error's text lower-cased with only letters, digits and single spaces, so matching does not
/// depend on how the client quotes or splits the server's message.
fn loose_text(error: &redis::RedisError) -> String {
    let text: String = error
        .to_string()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { ' ' })
        .collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
