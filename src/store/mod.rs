//! The preference store: a persona's opinions as Redis hashes, with per-persona structures in
//! the persona's own hash slot (a vector set of its active preferences, its strongest, who each
//! is about: `keys.rs`) for the hot paths, and a RediSearch index for the administrative ones
//! (list, stats, keyword search). Implements every operation of the original
//! `PersonaPreferenceManager` (seed 000) plus what exactly-once ingest needs: idempotency keys
//! and lock fencing on every write. Works on one Redis node or a Redis Cluster.
//!
//! The operations are split by concern: `write.rs`, `read.rs`, `inject.rs`, `erasure.rs`,
//! `migration.rs`, `layout.rs`, `index.rs`; this file holds the connection, the settings and
//! the helpers they share.
//!
//! **Invariant:** only this module talks to Redis. Every query that takes a caller's value
//! escapes it ([`query::escape_tag`]) and is restricted to one persona.

pub mod config;
pub mod connection;
mod curate;
pub mod effects;
pub mod element_record;
mod erasure;
mod error;
pub mod index;
mod inject;
pub mod keys;
mod layers;
mod layout;
pub mod lock;
mod migration;
pub mod query;
mod read;
pub mod record;
mod registry;
mod scripts;
mod timeline;
pub mod validate;
mod write;

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

pub use crate::model::Erasure;
pub use connection::RedisConnection;
pub use curate::{Consolidation, ConsolidationReport, MergedPreference, RestoreOutcome};
pub use effects::MessageEffects;
pub use error::StoreError;
pub use index::IndexInfo;
pub use inject::{
    InjectionCandidates, InjectionSelection, decayed_strength, decayed_strength_of,
    select_for_injection,
};
pub use keys::Keys;
pub use layers::{BaseLayer, Bases};
pub use migration::EmbeddingStatus;
pub use registry::{PersonaDirectory, PersonaSummary};
pub use timeline::StoredTimeline;

pub use lock::{HeldLock, LockToken, PersonaLock};
pub use record::{
    AddOutcome, Evolution, EvolveOutcome, HistoryEntry, InheritedView, InjectedPreference,
    InjectionQuery, MatchReason, NewPreference, Preference, PreferenceStats, Provenance,
    PurgeReport, ReinforceOutcome, Reinforcement, RetractOutcome, ScoredPreference, Stance,
};

use config::{RedisConfig, StoreConfig};

/// Options for an idempotent, fenced write. The default is a plain write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteGuard<'a> {
    /// The id of what this write applies ([`MessageEffects`] makes them for ingest): the write
    /// is applied at most once per id, and a repeat reports `applied: false`.
    pub effect_id: Option<&'a str>,
    /// The persona message the write comes from: an add also records the message's effect on
    /// the new preference ([`MessageEffects::on_preference`]), so the message cannot later
    /// reinforce or evolve what it created.
    pub message: Option<&'a MessageEffects>,
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
    /// Personas this process marked in the registry, and when (`registry.rs`).
    registry_touched: Arc<std::sync::Mutex<lru::LruCache<String, std::time::Instant>>>,
}

#[derive(Clone)]
struct Settings {
    keys: Keys,
    min_replicas_acked: u64,
    replica_wait_ms: u64,
    key_prefix: String,
    index_name: String,
    /// `redis.text_index`: keep the full-text index (single node only).
    text_index: bool,
    store: StoreConfig,
    /// The key of erasure records' digests (see [`PreferenceStore::connect`]).
    erasure_key: Vec<u8>,
    /// `inject.min_evidence`: voicings of the current version a preference needs before it is
    /// injected (1: at once).
    min_evidence: u64,
    /// Similarity at or above which two topics are the same one: a persona's own view then
    /// overrides a base's, and consolidation merges. Ingest's match threshold
    /// ([`PreferenceStore::with_topic_match_threshold`]); `store.conflict_threshold` until set.
    topic_match_threshold: f64,
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
        PreferenceStore {
            connection,
            registry_touched: Arc::new(std::sync::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(65_536).expect("not zero"),
            ))),
            settings: Arc::new(Settings {
                keys: Keys::new(&redis.key_prefix),
                min_replicas_acked: redis.min_replicas_acked,
                // Within the response timeout, so WAIT answers with a count instead of the
                // client giving up on it.
                replica_wait_ms: (redis.response_timeout_ms / 2).max(1),
                key_prefix: redis.key_prefix.clone(),
                index_name: redis.index_name.clone(),
                text_index: redis.text_index,
                store: store.clone(),
                erasure_key: Vec::new(),
                min_evidence: 1,
                topic_match_threshold: store.conflict_threshold,
            }),
        }
        .with_erasure_key(&store.erasure_secret.0)
        .await
    }

    /// Sets the erasure records' key: the configured secret, or the deployment's random key
    /// kept in Redis (made once, by whichever process comes first).
    async fn with_erasure_key(mut self, secret: &str) -> Result<PreferenceStore, StoreError> {
        let key = if secret.is_empty() {
            let name = format!("{}:persona_prefs_erasure_key", self.settings.key_prefix);
            let mut connection = self.connection.clone();
            let fresh = uuid::Uuid::new_v4().simple().to_string()
                + &uuid::Uuid::new_v4().simple().to_string();
            let _: Option<String> = redis::cmd("SET")
                .arg(&name)
                .arg(&fresh)
                .arg("NX")
                .query_async(&mut connection)
                .await?;
            let stored: Option<String> = redis::cmd("GET")
                .arg(&name)
                .query_async(&mut connection)
                .await?;
            stored.unwrap_or(fresh).into_bytes()
        } else {
            secret.as_bytes().to_vec()
        };
        let mut settings = (*self.settings).clone();
        settings.erasure_key = key;
        self.settings = Arc::new(settings);
        Ok(self)
    }

    /// The shared connection, for callers that measure raw Redis cost (benches) or need a
    /// command the store does not wrap.
    /// The store deciding "same topic" at `threshold` (the embedder's match threshold, as
    /// ingest does): for overrides of a base's view and for consolidation.
    pub fn with_topic_match_threshold(mut self, threshold: f64) -> PreferenceStore {
        Arc::make_mut(&mut self.settings).topic_match_threshold = threshold;
        self
    }

    /// Injection's confirmation gate (`inject.min_evidence`).
    pub fn with_min_evidence(mut self, min_evidence: u64) -> PreferenceStore {
        Arc::make_mut(&mut self.settings).min_evidence = min_evidence.max(1);
        self
    }

    pub fn topic_match_threshold(&self) -> f64 {
        self.settings.topic_match_threshold
    }

    pub fn connection(&self) -> RedisConnection {
        self.connection.clone()
    }

    /// Every master answers a PING (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        for (node, reply) in connection.query_every_master(&redis::cmd("PING")).await? {
            if let Value::ServerError(error) = reply {
                return Err(StoreError::UnexpectedReply(format!(
                    "PING on {node}: {error}"
                )));
            }
        }
        Ok(())
    }

    /// Every key and pattern of the layout.
    pub fn keys(&self) -> &Keys {
        &self.settings.keys
    }

    pub fn index_name(&self) -> &str {
        &self.settings.index_name
    }

    /// Whether keyword search has a full-text index to ask: `redis.text_index` on, and a
    /// single node (a cluster has no shared index: RediSearch 2.10 has no coordinator).
    /// Otherwise it ranks the persona's own records in the service.
    pub fn has_text_index(&self) -> bool {
        self.settings.text_index && !self.connection.is_cluster()
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

/// Maps a write script's error reply to its typed error, by the reply's error code (the first
/// word, which the scripts set: [`scripts::FENCED`], [`scripts::MISFIT`]), never by searching
/// its text.
fn script_error(persona_id: &str) -> impl Fn(redis::RedisError) -> StoreError + '_ {
    move |error| match error.code() {
        Some(scripts::FENCED) => StoreError::Fenced {
            persona_id: persona_id.to_string(),
        },
        Some(scripts::MISFIT) => StoreError::VectorSetMismatch {
            persona_id: persona_id.to_string(),
            detail: error.detail().unwrap_or_default().to_string(),
        },
        Some(scripts::CONFLICT) => StoreError::Conflict {
            persona_id: persona_id.to_string(),
            preference_id: error.detail().unwrap_or_default().to_string(),
        },
        Some(scripts::EFFECT) => StoreError::EffectMismatch {
            persona_id: persona_id.to_string(),
            detail: error.detail().unwrap_or_default().to_string(),
        },
        _ => error.into(),
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
