//! The store's configuration (`[redis]` and `[store]` in `config/default.toml`).

use serde::Deserialize;

use crate::settings::{Secret, TlsFiles};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    pub url: String,
    /// Seed nodes of a Redis Cluster (`redis://host:port` each). Non-empty: cluster mode, and
    /// `url` is not used.
    pub cluster_nodes: Vec<String>,
    /// Replicas that must hold a write before it counts as stored (`WAIT`); 0 = the master's
    /// answer suffices.
    pub min_replicas_acked: u64,
    pub key_prefix: String,
    pub index_name: String,
    /// Keep a RediSearch full-text index over every preference hash (single node only), for
    /// keyword and hybrid search. Off, keyword search ranks a persona's own records in the
    /// service, as on a cluster: the index cost 353 bytes per preference, 10 % of its memory.
    pub text_index: bool,
    pub response_timeout_ms: u64,
    pub tls_ca_file: String,
    pub tls_client_cert_file: String,
    pub tls_client_key_file: String,
}

impl RedisConfig {
    pub fn tls(&self) -> TlsFiles<'_> {
        TlsFiles {
            ca_file: &self.tls_ca_file,
            client_cert_file: &self.tls_client_cert_file,
            client_key_file: &self.tls_client_key_file,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The key of erasure records' digests (HMAC-SHA256 of persona and user id), so a record
    /// cannot be reversed by trying every user id. Empty: a random key kept in Redis.
    pub erasure_secret: Secret,
    pub embedding_dims: usize,
    pub reinforce_rate: f64,
    pub evolved_strength: f64,
    pub default_strength: f64,
    pub categories: Vec<String>,
    pub fallback_category: String,
    pub max_name_chars: usize,
    pub max_opinion_chars: usize,
    pub conflict_top_k: usize,
    pub conflict_threshold: f64,
    /// How many candidates `VSIM` explores on the hot paths (its `EF`; Redis defaults to 100,
    /// or COUNT when larger). Chosen by recall against exact search (benches/search_effort.rs).
    pub vector_search_ef: usize,
    /// How many candidates `VADD` explores to link a new element into a persona's vector set
    /// (its `EF`; Redis defaults to 200). Chosen by recall against exact search of sets built
    /// at each value (benches/search_effort.rs): most of a new topic's write is this search.
    pub vector_build_ef: usize,
    pub user_relevance_floor: f64,
    pub min_semantic_relevance: f64,
    pub max_top_k: usize,
    pub max_injection_count: usize,
    pub max_injection_chars: usize,
    pub max_related_ids: usize,
    /// Reinforcements kept, with provenance, per preference (the most recent; 0 keeps none).
    pub max_reinforcement_log: usize,
    /// Evidence users kept per preference (the most recent); more are counted, not listed.
    pub max_evidence_users: usize,
    /// History entries (changes of mind, retractions) kept per preference (the newest).
    pub max_evolution_history: usize,
    /// Voicings kept in each preference's timeline (`model::timeline`): a late opinion lands
    /// where it was said as long as it is newer than the oldest kept; older ones are folded in.
    pub max_voicings: usize,
    /// Half-life of strength while a preference is not voiced again, in days; 0: no decay.
    pub strength_half_life_days: f64,
    /// Base personas per persona, and how deep bases of bases are followed.
    pub max_bases: usize,
    pub max_base_depth: usize,
    /// Lifetime of idempotency records, in hours; 0 keeps them for ever.
    pub effect_ttl_hours: u64,
    /// How each persona's vector set stores its vectors: "q8", "fp32" or "bin".
    pub vector_quantisation: VectorQuantisation,
    /// The per-persona lock (ingest's decide-and-write, and erasure): its lifetime without
    /// renewal, and how long a caller waits for it.
    pub lock_ttl_ms: u64,
    pub lock_patience_ms: u64,
}

/// Vector set quantisation (`VADD … Q8 | NOQUANT | BIN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VectorQuantisation {
    Q8,
    Fp32,
    Bin,
}

impl VectorQuantisation {
    /// The VADD option.
    pub fn vadd_option(self) -> &'static str {
        match self {
            VectorQuantisation::Q8 => "Q8",
            VectorQuantisation::Fp32 => "NOQUANT",
            VectorQuantisation::Bin => "BIN",
        }
    }

    /// What `VINFO` reports as `quant-type`.
    pub fn vinfo_name(self) -> &'static str {
        match self {
            VectorQuantisation::Q8 => "int8",
            VectorQuantisation::Fp32 => "f32",
            VectorQuantisation::Bin => "bin",
        }
    }
}

/// What injection may pick (`[inject]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectConfig {
    /// A preference is injected only once the persona has voiced its current version this many
    /// times, or an administrator wrote it; stored at once either way. 1: at once.
    pub min_evidence: u64,
}

impl StoreConfig {
    /// `[store]` of `config/default.toml`, for the store's own unit tests.
    #[cfg(test)]
    pub(crate) fn defaults() -> StoreConfig {
        let defaults: toml::Value =
            toml::from_str(include_str!("../../config/default.toml")).expect("defaults parse");
        defaults["store"]
            .clone()
            .try_into()
            .expect("[store] of the defaults")
    }
}
