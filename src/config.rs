//! Configuration: serde structs whose defaults live in `config/default.toml` (embedded in the
//! binary), layered with an optional file and then environment variables, and validated at
//! start-up with errors that name the offending key.
//!
//! Layers, later wins:
//! 1. `config/default.toml` (compiled in, so the binary runs with no files around it);
//! 2. a TOML file (`--config PATH` or `PERSONA_PREFS_CONFIG`), which may set any subset of keys;
//! 3. `PERSONA_PREFS__<SECTION>__<KEY>=value` environment variables (value parsed as TOML,
//!    falling back to a plain string), plus the short forms `REDIS_URL`, `REDIS_CLUSTER_NODES`
//!    (comma-separated), `NATS_URL` and
//!    `PERSONA_PREFS_MODEL_DIR`.
//!
//! Why the layering is written here (about 110 lines) rather than taken from figment or
//! config-rs: an environment variable naming a key that does not exist is an error naming the
//! variable (with those crates it is at best serde's "unknown field", which names neither the
//! variable nor the layer it came from); a retired
//! key is refused with what replaced it ([`RETIRED_KEYS`]); a value is typed by the default it
//! overrides (an API key variable that looks like a number stays a string); and the short forms
//! above are plain names operators already set. Each of those would be code around either crate
//! anyway, and the whole of it is tested below.
//!
//! About 640 lines before its tests: each stage keeps its own section's struct and checks in
//! its module; what is here is the layering and the checks that span sections.

use std::path::Path;

use serde::Deserialize;

pub use crate::embed::EmbedConfig;
pub use crate::extract::ExtractConfig;
pub use crate::ingest::IngestConfig;
pub use crate::serve::ServeConfig;
pub use crate::settings::{ConfigError, Secret, TlsFiles, redact_url};
pub use crate::store::config::{InjectConfig, RedisConfig, StoreConfig, VectorQuantisation};

const DEFAULT_TOML: &str = include_str!("../config/default.toml");
const ENV_PREFIX: &str = "PERSONA_PREFS__";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub redis: RedisConfig,
    pub store: StoreConfig,
    pub inject: InjectConfig,
    pub nats: NatsConfig,
    pub extract: ExtractConfig,
    pub embed: EmbedConfig,
    pub ingest: IngestConfig,
    pub serve: ServeConfig,
    pub ui: UiConfig,
    pub mcp: McpConfig,
    pub metrics: MetricsConfig,
    pub telemetry: TelemetryConfig,
    pub log: LogConfig,
}

/// `[telemetry]`: what leaves the process besides metrics and logs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    pub otlp: crate::otlp::OtlpConfig,
}

/// `persona-prefs ui`, the persona inspector.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiConfig {
    pub listen: String,
    /// Curation shown and accepted; the NATS user must hold the write role too.
    pub allow_writes: bool,
}

/// `[mcp]`: the MCP server's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The persona a stdio server serves (`--persona` overrides it).
    pub persona: String,
    /// Where the streamable HTTP server listens (`/mcp` on it).
    pub listen: String,
    /// Host names an HTTP request may name (DNS-rebinding protection): loopback by default;
    /// add the names clients reach this server by.
    pub allowed_hosts: Vec<String>,
    /// Bearer tokens and the persona each gives a session, for HTTP. A token is read from the
    /// environment variable `token_env` names, never written in a configuration file.
    pub tokens: Vec<McpToken>,
}

/// One bearer token of the HTTP server and the persona it is bound to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpToken {
    /// The environment variable holding the token.
    pub token_env: String,
    pub persona: String,
}

impl McpConfig {
    pub fn validate(&self) -> Result<(), crate::settings::ConfigError> {
        let invalid = |key: &str, message: String| crate::settings::ConfigError::Invalid {
            key: key.into(),
            message,
        };
        if !self.persona.is_empty() {
            crate::store::validate::persona_id(&self.persona)
                .map_err(|e| invalid("mcp.persona", e.to_string()))?;
        }
        for (n, token) in self.tokens.iter().enumerate() {
            crate::store::validate::persona_id(&token.persona)
                .map_err(|e| invalid(&format!("mcp.tokens[{n}].persona"), e.to_string()))?;
            if token.token_env.is_empty() {
                return Err(invalid(
                    &format!("mcp.tokens[{n}].token_env"),
                    "names no environment variable".into(),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line per event for people; coloured only when stderr is a terminal.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsConfig {
    pub url: String,
    /// Upper bound on one request or event payload, in bytes.
    pub max_payload_bytes: usize,
    pub connect_timeout_ms: u64,
    /// How long a client of the service (the CLI, the library's `Client`) waits for a reply.
    pub request_timeout_ms: u64,
    pub tls_ca_file: String,
    pub tls_client_cert_file: String,
    pub tls_client_key_file: String,
    pub nkey_seed_file: String,
    /// A decentralised-auth `.creds` file: the user's JWT and its NKey seed.
    pub credentials_file: String,
}

impl NatsConfig {
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
pub struct MetricsConfig {
    /// Address of the Prometheus `/metrics`, `/healthz` and `/readyz` listener; empty disables it.
    pub listen: String,
}

impl Config {
    /// Defaults, then `file` (if any), then the process environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Config::load_from(file, &env)
    }

    /// The embedded defaults only, validated. Tests start from this and adjust fields.
    pub fn defaults() -> Config {
        Config::load_from(None, &[]).expect("config/default.toml is valid")
    }

    /// Like [`Config::load`] with an explicit environment, so tests need not mutate the process's.
    pub fn load_from(file: Option<&Path>, env: &[(String, String)]) -> Result<Config, ConfigError> {
        let mut value: toml::Value =
            toml::from_str(DEFAULT_TOML).map_err(|error| ConfigError::Parse {
                message: format!("embedded default.toml: {error}"),
            })?;
        let file = file.map(Path::to_path_buf).or_else(|| {
            env.iter()
                .find(|(name, _)| name == "PERSONA_PREFS_CONFIG")
                .map(|(_, path)| path.into())
        });
        if let Some(path) = file {
            let text = std::fs::read_to_string(&path).map_err(|error| ConfigError::File {
                path: path.display().to_string(),
                message: error.to_string(),
            })?;
            let overlay: toml::Value =
                toml::from_str(&text).map_err(|error| ConfigError::File {
                    path: path.display().to_string(),
                    message: error.to_string(),
                })?;
            merge(&mut value, overlay);
        }
        for (variable, raw) in env {
            if variable == "REDIS_CLUSTER_NODES" {
                let nodes: Vec<toml::Value> = raw
                    .split(',')
                    .map(str::trim)
                    .filter(|node| !node.is_empty())
                    .map(|node| toml::Value::String(node.to_string()))
                    .collect();
                let path = ["redis".to_string(), "cluster_nodes".to_string()];
                set_path(&mut value, &path, toml::Value::Array(nodes)).map_err(|message| {
                    ConfigError::Env {
                        variable: variable.clone(),
                        message,
                    }
                })?;
                continue;
            }
            let path: Vec<String> = match variable.as_str() {
                "REDIS_URL" => vec!["redis".into(), "url".into()],
                "NATS_URL" => vec!["nats".into(), "url".into()],
                "PERSONA_PREFS_MODEL_DIR" => vec!["embed".into(), "model_dir".into()],
                other => match other.strip_prefix(ENV_PREFIX) {
                    Some(rest) => rest.split("__").map(str::to_ascii_lowercase).collect(),
                    None => continue,
                },
            };
            set_path(&mut value, &path, parse_env_value(raw)).map_err(|message| {
                ConfigError::Env {
                    variable: variable.clone(),
                    message,
                }
            })?;
        }
        refuse_retired_keys(&value)?;
        let mut config: Config =
            value
                .try_into()
                .map_err(|error: toml::de::Error| ConfigError::Parse {
                    message: error.to_string().trim().replace('\n', " "),
                })?;
        config.validate()?;
        // After validation, which tells a check set by hand (refused without the local model)
        // from the kind's own.
        config.extract.choose_rules_check(config.embed.kind);
        Ok(config)
    }

    /// Checks that serde cannot express; every error names its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.into(),
            message,
        };
        let unit = |key: &str, value: f64| {
            if (0.0..=1.0).contains(&value) {
                Ok(())
            } else {
                Err(invalid(key, format!("must be within [0, 1], got {value}")))
            }
        };
        if !(self.store.strength_half_life_days >= 0.0
            && self.store.strength_half_life_days.is_finite())
        {
            return Err(invalid(
                "store.strength_half_life_days",
                "must be 0 (no decay) or a positive number of days".into(),
            ));
        }
        unit(
            "extract.rules_min_sentence_score",
            self.extract.rules_check(),
        )?;
        unit(
            "extract.rules_check_keeps_at_word_score",
            self.extract.rules_check_keeps_at_word_score,
        )?;
        unit(
            "extract.learned_beside_rules_min_confidence",
            self.extract.learned_beside_rules_min_confidence,
        )?;
        unit(
            "extract.learned_gate_min_score",
            self.extract.learned_gate_min_score,
        )?;
        unit("extract.learned_word_gate", self.extract.learned_word_gate)?;
        if self.extract.learned_int8
            && self.extract.learned_encoder_dir.is_empty()
            && !(self.embed.kind == crate::embed::EmbedderKind::Local
                && self.embed.query_precision == crate::embed::QueryPrecision::Int8)
        {
            return Err(invalid(
                "extract.learned_int8",
                "reads through the embedder's 8-bit pass: set embed.kind = \"local\" and \
                 embed.query_precision = \"int8\", or name the reader's own encoder in \
                 extract.learned_encoder_dir"
                    .into(),
            ));
        }
        // Set by hand; a kind's own check (`rules_then_learned`) needs the model for the kind
        // itself, and says so when the extractor is built.
        if self
            .extract
            .rules_min_sentence_score
            .is_some_and(|check| check > 0.0)
            && self.embed.kind != crate::embed::EmbedderKind::Local
        {
            return Err(invalid(
                "extract.rules_min_sentence_score",
                "reads with the local model: set embed.kind = \"local\", or 0".into(),
            ));
        }
        let adjudication = &self.extract.adjudication;
        if !(0.0..1.0).contains(&adjudication.grey_zone_low)
            || adjudication.grey_zone_low >= self.embed.match_threshold()
        {
            return Err(invalid(
                "extract.adjudication.grey_zone_low",
                format!(
                    "must be within [0, the match threshold {}), got {}",
                    self.embed.match_threshold(),
                    adjudication.grey_zone_low
                ),
            ));
        }
        if self.store.max_bases > 64 {
            return Err(invalid("store.max_bases", "must be at most 64".into()));
        }
        if self.store.max_base_depth > 8 {
            return Err(invalid("store.max_base_depth", "must be at most 8".into()));
        }
        if self.store.lock_ttl_ms == 0 {
            return Err(invalid("store.lock_ttl_ms", "must be positive".into()));
        }
        if !self.redis.cluster_nodes.is_empty() && self.redis.tls().any() {
            return Err(invalid(
                "redis.cluster_nodes",
                "TLS files (redis.tls_*) are not applied to cluster connections yet; use \
                 rediss:// seeds trusted by the system's roots, or a single node"
                    .into(),
            ));
        }
        if !self.redis.url.starts_with("redis://") && !self.redis.url.starts_with("rediss://") {
            return Err(invalid(
                "redis.url",
                format!(
                    "must start with redis:// or rediss://, got {:?}",
                    self.redis.url
                ),
            ));
        }
        if self.redis.key_prefix.is_empty() || self.redis.key_prefix.contains(char::is_whitespace) {
            return Err(invalid(
                "redis.key_prefix",
                "must be non-empty without whitespace".into(),
            ));
        }
        if self.redis.index_name.is_empty() || self.redis.index_name.contains(char::is_whitespace) {
            return Err(invalid(
                "redis.index_name",
                "must be non-empty without whitespace".into(),
            ));
        }
        self.redis.tls().validate("redis")?;
        if self.redis.tls().any() && !self.redis.url.starts_with("rediss://") {
            return Err(invalid(
                "redis.url",
                "TLS files are set (redis.tls_*) but the URL is not rediss://".into(),
            ));
        }
        self.nats.tls().validate("nats")?;
        if !self.nats.nkey_seed_file.is_empty()
            && let Err(error) = std::fs::File::open(&self.nats.nkey_seed_file)
        {
            return Err(invalid(
                "nats.nkey_seed_file",
                format!("cannot read {:?}: {error}", self.nats.nkey_seed_file),
            ));
        }
        if !self.nats.credentials_file.is_empty() {
            if !self.nats.nkey_seed_file.is_empty() {
                return Err(invalid(
                    "nats.credentials_file",
                    "set either this or nats.nkey_seed_file, not both: each names the user".into(),
                ));
            }
            let contents =
                std::fs::read_to_string(&self.nats.credentials_file).map_err(|error| {
                    invalid(
                        "nats.credentials_file",
                        format!("cannot read {:?}: {error}", self.nats.credentials_file),
                    )
                })?;
            // Refuse a wrong file (a bare seed, a JWT alone) here, not as an opaque
            // authentication failure at connect time.
            if !contents.contains("BEGIN NATS USER JWT") || !contents.contains("NKEY SEED") {
                return Err(invalid(
                    "nats.credentials_file",
                    format!(
                        "{:?} is not a .creds file: it needs a NATS USER JWT block and a USER NKEY SEED block",
                        self.nats.credentials_file
                    ),
                ));
            }
        }
        // Every key of a persona shares a hash slot through the tag `{persona}`; a brace in the
        // prefix would become the tag instead, and glob characters would widen every SCAN.
        if let Some(bad) = self
            .redis
            .key_prefix
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        {
            return Err(invalid(
                "redis.key_prefix",
                format!("contains {bad:?}; allowed are A-Z a-z 0-9 _ - . :"),
            ));
        }
        if self.redis.key_prefix.is_empty() {
            return Err(invalid("redis.key_prefix", "must not be empty".into()));
        }
        if let Some(bad) = self
            .redis
            .cluster_nodes
            .iter()
            .find(|node| !(node.starts_with("redis://") || node.starts_with("rediss://")))
        {
            return Err(invalid(
                "redis.cluster_nodes",
                format!(
                    "{:?} must start with redis:// or rediss://",
                    redact_url(bad)
                ),
            ));
        }
        if self.redis.response_timeout_ms == 0 {
            return Err(invalid(
                "redis.response_timeout_ms",
                "must be positive".into(),
            ));
        }
        let store = &self.store;
        if !(1..=32768).contains(&store.embedding_dims) {
            return Err(invalid(
                "store.embedding_dims",
                format!("must be within 1..=32768, got {}", store.embedding_dims),
            ));
        }
        if !(store.reinforce_rate > 0.0 && store.reinforce_rate <= 1.0) {
            return Err(invalid(
                "store.reinforce_rate",
                format!("must be within (0, 1], got {}", store.reinforce_rate),
            ));
        }
        unit("store.evolved_strength", store.evolved_strength)?;
        unit("store.default_strength", store.default_strength)?;
        unit("store.conflict_threshold", store.conflict_threshold)?;
        unit("store.user_relevance_floor", store.user_relevance_floor)?;
        unit("store.min_semantic_relevance", store.min_semantic_relevance)?;
        if store.categories.is_empty() {
            return Err(invalid(
                "store.categories",
                "must list at least one category".into(),
            ));
        }
        if !store.categories.contains(&store.fallback_category) {
            return Err(invalid(
                "store.fallback_category",
                format!(
                    "{:?} is not one of store.categories",
                    store.fallback_category
                ),
            ));
        }
        if let Some(bad) = store
            .categories
            .iter()
            .find(|c| c.is_empty() || !c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_'))
        {
            return Err(invalid(
                "store.categories",
                format!("{bad:?}: categories are non-empty [A-Za-z0-9_] words"),
            ));
        }
        for (key, value) in [
            ("store.max_name_chars", store.max_name_chars),
            ("store.max_opinion_chars", store.max_opinion_chars),
            ("store.conflict_top_k", store.conflict_top_k),
            ("store.vector_search_ef", store.vector_search_ef),
            ("store.vector_build_ef", store.vector_build_ef),
            ("store.max_top_k", store.max_top_k),
            ("store.max_injection_count", store.max_injection_count),
            ("store.max_injection_chars", store.max_injection_chars),
            ("store.max_related_ids", store.max_related_ids),
            ("store.max_evidence_users", store.max_evidence_users),
            ("store.max_evolution_history", store.max_evolution_history),
            ("store.max_voicings", store.max_voicings),
            ("inject.min_evidence", self.inject.min_evidence as usize),
            ("nats.max_payload_bytes", self.nats.max_payload_bytes),
            (
                "nats.request_timeout_ms",
                self.nats.request_timeout_ms as usize,
            ),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be positive".into()));
            }
        }
        if !store.erasure_secret.0.is_empty() && store.erasure_secret.0.len() < 16 {
            return Err(invalid(
                "store.erasure_secret",
                "must be at least 16 bytes (or empty for a key kept in Redis)".into(),
            ));
        }
        for (key, value) in [
            ("store.vector_search_ef", store.vector_search_ef),
            ("store.vector_build_ef", store.vector_build_ef),
        ] {
            if value > 10_000 {
                return Err(invalid(
                    key,
                    format!("must be within 1..=10000, got {value}"),
                ));
            }
        }
        if store.conflict_top_k > store.max_top_k {
            return Err(invalid(
                "store.conflict_top_k",
                format!("must not exceed store.max_top_k ({})", store.max_top_k),
            ));
        }
        if self
            .nats
            .url
            .split(',')
            .map(str::trim)
            .any(|url| !url.starts_with("nats://") && !url.starts_with("tls://"))
        {
            return Err(invalid(
                "nats.url",
                format!("must start with nats:// or tls://, got {:?}", self.nats.url),
            ));
        }
        self.embed.validate(store.embedding_dims)?;
        self.extract.validate()?;
        self.ingest.validate()?;
        // Exactly-once rests on the effect records: an event that can still be redelivered or
        // replayed after its records expired would be applied twice.
        let ttl = store.effect_ttl_hours;
        let (events, letters) = (
            self.ingest.events_max_age_hours,
            self.ingest.dlq_max_age_hours,
        );
        if ttl > 0 && (events == 0 || letters == 0 || ttl < events.max(letters)) {
            return Err(invalid(
                "store.effect_ttl_hours",
                format!(
                    "{ttl} h is shorter than events or dead letters are kept \
                     (ingest.events_max_age_hours {events}, ingest.dlq_max_age_hours {letters}; \
                     0 = for ever): an event replayed after its effect records expired would \
                     be applied twice. Use at least {} or 0",
                    if events == 0 || letters == 0 {
                        0
                    } else {
                        events.max(letters)
                    }
                ),
            ));
        }
        self.serve.validate()?;
        self.mcp.validate()?;
        Ok(())
    }
}

/// Recursively overlays `overlay` onto `base`: tables merge key by key, anything else replaces.
/// Keys that moved or went away, with what to do instead: a configuration still naming one
/// is refused with that, rather than with serde's bare "unknown field".
const RETIRED_KEYS: &[(&str, &str, &str)] = &[
    (
        "ingest",
        "lock_ttl_ms",
        "moved to store.lock_ttl_ms (the lock serves erasure too); set that instead",
    ),
    (
        "ingest",
        "lock_patience_ms",
        "moved to store.lock_patience_ms (the lock serves erasure too); set that instead",
    ),
    (
        "metrics",
        "namespace",
        "removed: it never changed anything (metric names are always persona_prefs_*); delete it",
    ),
];

/// Keys `config/default.toml` leaves unset, whose value is then chosen from other keys (the
/// extractor's kind picks its own check), and which the environment may still set.
const UNSET_BY_DEFAULT: &[&str] = &["extract.rules_min_sentence_score"];

fn refuse_retired_keys(value: &toml::Value) -> Result<(), ConfigError> {
    for (section, key, instead) in RETIRED_KEYS {
        if value
            .get(section)
            .and_then(|table| table.get(key))
            .is_some()
        {
            return Err(ConfigError::Invalid {
                key: format!("{section}.{key}"),
                message: instead.to_string(),
            });
        }
    }
    Ok(())
}

fn merge(base: &mut toml::Value, overlay: toml::Value) {
    match (base, overlay) {
        (toml::Value::Table(base), toml::Value::Table(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

fn set_path(root: &mut toml::Value, path: &[String], value: toml::Value) -> Result<(), String> {
    let (last, parents) = path.split_last().ok_or("empty key")?;
    let mut node = root;
    for part in parents {
        node = node
            .as_table_mut()
            .and_then(|table| table.get_mut(part))
            .ok_or_else(|| format!("no config section `{}`", path.join(".")))?;
    }
    let table = node
        .as_table_mut()
        .ok_or_else(|| format!("`{}` is not a section", path.join(".")))?;
    let key = path.join(".");
    // A key whose default is no value (chosen from other keys when unset) is absent from the
    // defaults; an override sets it as written.
    if table.get(last).is_none() && UNSET_BY_DEFAULT.contains(&key.as_str()) {
        table.insert(last.clone(), value);
        return Ok(());
    }
    let existing = table.get(last).ok_or_else(|| {
        match RETIRED_KEYS
            .iter()
            .find(|(section, name, _)| key == format!("{section}.{name}"))
        {
            Some((_, _, instead)) => format!("`{key}` {instead}"),
            None => format!("no config key `{key}`"),
        }
    })?;
    // A value that parsed as TOML but into another type than the default's (e.g. a numeric-looking
    // API key name) is taken as the string it was written as.
    let value = match (existing, value) {
        (toml::Value::String(_), toml::Value::String(s)) => toml::Value::String(s),
        (toml::Value::String(_), other) => toml::Value::String(other.to_string()),
        (_, value) => value,
    };
    table.insert(last.clone(), value);
    Ok(())
}

fn parse_env_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut table| table.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials_before_they_are_shown() {
        assert_eq!(
            redact_url("rediss://user:secret@db.example:6380/0"),
            "rediss://***@db.example:6380/0"
        );
        assert_eq!(
            redact_url("nats://s3cr3t-token@nats:4222"),
            "nats://***@nats:4222"
        );
        assert_eq!(redact_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(
            redact_url("redis://host:6379/path@odd"),
            "redis://host:6379/path@odd",
            "an @ after the authority is not a credential"
        );
        // Lists of servers, each with its own credentials, and URLs without a scheme.
        assert_eq!(
            redact_url("nats://a:b@h1:4222/x,nats://c:d@h2:4222"),
            "nats://***@h1:4222/x,nats://***@h2:4222"
        );
        assert_eq!(redact_url("user:pass@proxy:8080"), "***@proxy:8080");
        assert_eq!(
            redact_url("https://k:s@api.example?q=a@b"),
            "https://***@api.example?q=a@b"
        );
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn embedded_defaults_are_valid() {
        let config = Config::defaults();
        assert_eq!(config.redis.key_prefix, "stargazer");
        assert_eq!(config.store.embedding_dims, 384);
    }

    #[test]
    fn env_overrides_nested_keys_and_short_forms() {
        let config = Config::load_from(
            None,
            &env(&[
                ("PERSONA_PREFS__STORE__REINFORCE_RATE", "0.2"),
                ("PERSONA_PREFS__REDIS__KEY_PREFIX", "demo"),
                ("REDIS_URL", "redis://10.0.0.1:7000"),
            ]),
        )
        .unwrap();
        assert_eq!(config.store.reinforce_rate, 0.2);
        assert_eq!(config.redis.key_prefix, "demo");
        assert_eq!(config.redis.url, "redis://10.0.0.1:7000");
    }

    #[test]
    fn the_check_on_the_rules_is_a_score_and_needs_the_local_model() {
        for bad in ["-0.1", "1.5", "NaN"] {
            let error = Config::load_from(
                None,
                &env(&[("PERSONA_PREFS__EXTRACT__RULES_MIN_SENTENCE_SCORE", bad)]),
            )
            .unwrap_err()
            .to_string();
            assert!(
                error.contains("extract.rules_min_sentence_score"),
                "{bad}: {error}"
            );
        }
        let error = Config::load_from(
            None,
            &env(&[
                ("PERSONA_PREFS__EXTRACT__RULES_MIN_SENTENCE_SCORE", "0.05"),
                ("PERSONA_PREFS__EMBED__KIND", "openai"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("extract.rules_min_sentence_score") && error.contains("local"),
            "{error}"
        );
        let config = Config::load_from(
            None,
            &env(&[("PERSONA_PREFS__EXTRACT__RULES_MIN_SENTENCE_SCORE", "0.05")]),
        )
        .unwrap();
        assert_eq!(config.extract.rules_check(), 0.05);
        assert_eq!(Config::defaults().extract.rules_check(), 0.6);
        // Without the local model the rules' own check is off: there is nothing to read it
        // with, and the rules need nothing.
        let config = Config::load_from(
            None,
            &env(&[
                ("PERSONA_PREFS__EMBED__KIND", "openai"),
                ("PERSONA_PREFS__STORE__EMBEDDING_DIMS", "1536"),
            ]),
        )
        .unwrap();
        assert_eq!(config.extract.rules_check(), 0.0);
        assert!(!config.extract.reads_with_local_model());
    }

    /// Each kind's check on the rules when the key is unset: 0.6 for the rules with the local
    /// model (the default) and after the rules (the configurations measured held out); a value
    /// set is taken as given, 0 included.
    #[test]
    fn each_kind_checks_the_rules_at_its_own_value_unless_told() {
        use crate::extract::ExtractorKind;
        // (extract.kind, rules_min_sentence_score as set, the check read)
        let table: [(&str, Option<&str>, f64); 6] = [
            ("rules", None, 0.6),
            ("rules", Some("0"), 0.0),
            ("rules_then_learned", None, 0.6),
            ("rules_then_learned", Some("0"), 0.0),
            ("rules_then_learned", Some("0.08"), 0.08),
            ("rules", Some("0.6"), 0.6),
        ];
        for (kind, set, check) in table {
            let mut vars = vec![("PERSONA_PREFS__EXTRACT__KIND", kind)];
            if let Some(value) = set {
                vars.push(("PERSONA_PREFS__EXTRACT__RULES_MIN_SENTENCE_SCORE", value));
            }
            let config = Config::load_from(None, &env(&vars)).unwrap();
            assert_eq!(config.extract.rules_check(), check, "{kind} {set:?}");
            assert_eq!(
                config.extract.learned_beside_rules_min_confidence, 1.0,
                "{kind}: nothing beside the rules unless told"
            );
        }
        assert_eq!(
            crate::extract::default_rules_check(
                ExtractorKind::Learned,
                crate::embed::EmbedderKind::Local
            ),
            0.0
        );
        // A kind's own check is no reason to refuse another embedder: the learned kinds say
        // what they need when the extractor is built.
        Config::load_from(
            None,
            &env(&[
                ("PERSONA_PREFS__EXTRACT__KIND", "rules_then_learned"),
                ("PERSONA_PREFS__EMBED__KIND", "openai"),
                ("PERSONA_PREFS__STORE__EMBEDDING_DIMS", "1536"),
            ]),
        )
        .unwrap();
    }

    /// Scores in [0, 1] of the extractor's: refused with their key's name out of range, their
    /// shipped default when unset, 1 taken as given (off for the first two; the word gate then
    /// lets nothing through).
    #[test]
    fn the_extractors_unit_scores_are_bounded_and_named_when_wrong() {
        type Read = fn(&Config) -> f64;
        let scores: [(&str, &str, Read, f64); 3] = [
            (
                "PERSONA_PREFS__EXTRACT__RULES_CHECK_KEEPS_AT_WORD_SCORE",
                "extract.rules_check_keeps_at_word_score",
                |c| c.extract.rules_check_keeps_at_word_score,
                0.4,
            ),
            (
                "PERSONA_PREFS__EXTRACT__LEARNED_BESIDE_RULES_MIN_CONFIDENCE",
                "extract.learned_beside_rules_min_confidence",
                |c| c.extract.learned_beside_rules_min_confidence,
                1.0,
            ),
            (
                "PERSONA_PREFS__EXTRACT__LEARNED_WORD_GATE",
                "extract.learned_word_gate",
                |c| c.extract.learned_word_gate,
                0.0,
            ),
        ];
        for (variable, key, read, default) in scores {
            for bad in ["-0.1", "1.5", "NaN"] {
                let error = Config::load_from(None, &env(&[(variable, bad)]))
                    .unwrap_err()
                    .to_string();
                assert!(error.contains(key), "{key} = {bad}: {error}");
            }
            assert_eq!(read(&Config::defaults()), default, "{key}");
            let config = Config::load_from(None, &env(&[(variable, "1")])).unwrap();
            assert_eq!(read(&config), 1.0, "{key}");
        }
    }

    #[test]
    fn the_vector_search_and_build_efforts_are_bounded_and_named_when_wrong() {
        for (variable, key) in [
            (
                "PERSONA_PREFS__STORE__VECTOR_SEARCH_EF",
                "store.vector_search_ef",
            ),
            (
                "PERSONA_PREFS__STORE__VECTOR_BUILD_EF",
                "store.vector_build_ef",
            ),
        ] {
            for bad in ["0", "10001"] {
                let error = Config::load_from(None, &env(&[(variable, bad)]))
                    .unwrap_err()
                    .to_string();
                assert!(error.contains(key), "{variable}={bad}: {error}");
            }
        }
        let config = Config::load_from(
            None,
            &env(&[
                ("PERSONA_PREFS__STORE__VECTOR_SEARCH_EF", "200"),
                ("PERSONA_PREFS__STORE__VECTOR_BUILD_EF", "64"),
            ]),
        )
        .unwrap();
        assert_eq!(config.store.vector_search_ef, 200);
        assert_eq!(config.store.vector_build_ef, 64);
    }

    #[test]
    fn a_learned_reader_that_is_not_a_file_is_named_at_start_up() {
        let error = Config::load_from(
            None,
            &env(&[(
                "PERSONA_PREFS__EXTRACT__LEARNED_READER",
                "/no/such/reader.safetensors",
            )]),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("extract.learned_reader"), "{error}");
        let shipped = Config::defaults();
        assert!(
            shipped.extract.learned_reader.is_empty(),
            "the shipped reader"
        );
    }

    #[test]
    fn a_moved_key_is_refused_with_its_new_name() {
        let error = Config::load_from(None, &env(&[("PERSONA_PREFS__INGEST__LOCK_TTL_MS", "100")]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("`ingest.lock_ttl_ms` moved"), "{error}");
        assert!(error.contains("store.lock_ttl_ms"), "{error}");
        let file = std::env::temp_dir().join(format!("moved-{}.toml", std::process::id()));
        std::fs::write(&file, "[ingest]\nlock_patience_ms = 5\n").unwrap();
        let error = Config::load_from(Some(&file), &[]).unwrap_err().to_string();
        let _ = std::fs::remove_file(&file);
        assert!(error.contains("`ingest.lock_patience_ms`"), "{error}");
        assert!(error.contains("store.lock_patience_ms"), "{error}");
        let config =
            Config::load_from(None, &env(&[("PERSONA_PREFS__STORE__LOCK_TTL_MS", "100")])).unwrap();
        assert_eq!(config.store.lock_ttl_ms, 100);
    }

    #[test]
    fn effect_records_must_outlive_every_way_an_event_can_come_back() {
        let refused = |pairs: &[(&str, &str)]| {
            Config::load_from(None, &env(pairs))
                .unwrap_err()
                .to_string()
        };
        let error = refused(&[("PERSONA_PREFS__STORE__EFFECT_TTL_HOURS", "200")]);
        assert!(
            error.contains("store.effect_ttl_hours") && error.contains("at least 720"),
            "{error}"
        );
        let error = refused(&[("PERSONA_PREFS__INGEST__DLQ_MAX_AGE_HOURS", "0")]);
        assert!(
            error.contains("store.effect_ttl_hours") && error.contains("or 0"),
            "dead letters kept for ever need records kept for ever: {error}"
        );
        Config::load_from(
            None,
            &env(&[
                ("PERSONA_PREFS__INGEST__DLQ_MAX_AGE_HOURS", "0"),
                ("PERSONA_PREFS__STORE__EFFECT_TTL_HOURS", "0"),
            ]),
        )
        .unwrap();
        Config::load_from(
            None,
            &env(&[("PERSONA_PREFS__STORE__EFFECT_TTL_HOURS", "720")]),
        )
        .unwrap();
    }

    #[test]
    fn scale_out_settings_are_read_and_checked_naming_the_key() {
        let config = Config::load_from(
            None,
            &env(&[
                (
                    "REDIS_CLUSTER_NODES",
                    "redis://10.0.0.1:7000, redis://10.0.0.2:7000",
                ),
                ("NATS_URL", "nats://10.0.0.1:4222,nats://10.0.0.2:4222"),
                ("PERSONA_PREFS__INGEST__STREAM_REPLICAS", "3"),
                ("PERSONA_PREFS__STORE__VECTOR_QUANTISATION", "fp32"),
            ]),
        )
        .unwrap();
        assert_eq!(
            config.redis.cluster_nodes,
            ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]
        );
        assert_eq!(config.ingest.stream_replicas, 3);
        assert_eq!(config.store.vector_quantisation, VectorQuantisation::Fp32);
        assert_eq!(
            config.ingest.max_ack_pending(),
            (config.ingest.max_in_flight * config.ingest.max_workers) as i64
        );
        for (pairs, key) in [
            (
                &[("PERSONA_PREFS__REDIS__KEY_PREFIX", "a{b}")][..],
                "redis.key_prefix",
            ),
            (
                &[("PERSONA_PREFS__REDIS__KEY_PREFIX", "a*")][..],
                "redis.key_prefix",
            ),
            (
                &[("PERSONA_PREFS__REDIS__KEY_PREFIX", "")][..],
                "redis.key_prefix",
            ),
            (
                &[("REDIS_CLUSTER_NODES", "http://x:1")][..],
                "redis.cluster_nodes",
            ),
            (
                &[
                    ("REDIS_CLUSTER_NODES", "redis://x:1"),
                    ("PERSONA_PREFS__REDIS__TLS_CA_FILE", "/ca.pem"),
                ][..],
                "redis.cluster_nodes",
            ),
            (&[("NATS_URL", "nats://a:1,http://b:2")][..], "nats.url"),
            (
                &[("PERSONA_PREFS__INGEST__STREAM_REPLICAS", "0")][..],
                "ingest.stream_replicas",
            ),
            (
                &[("PERSONA_PREFS__INGEST__STREAM_MAX_BYTES", "-5")][..],
                "ingest.stream_max_bytes",
            ),
            (
                &[("PERSONA_PREFS__INGEST__MAX_WORKERS", "0")][..],
                "ingest.max_workers",
            ),
        ] {
            let error = Config::load_from(None, &env(pairs))
                .unwrap_err()
                .to_string();
            assert!(error.contains(key), "{pairs:?}: {error}");
        }
    }

    #[test]
    fn unknown_env_key_is_named() {
        let error =
            Config::load_from(None, &env(&[("PERSONA_PREFS__STORE__NO_SUCH", "1")])).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("PERSONA_PREFS__STORE__NO_SUCH") && text.contains("store.no_such"),
            "{text}"
        );
    }

    #[test]
    fn invalid_value_names_its_key() {
        let error = Config::load_from(
            None,
            &env(&[("PERSONA_PREFS__STORE__CONFLICT_THRESHOLD", "1.5")]),
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("store.conflict_threshold"),
            "{error}"
        );
        let error = Config::load_from(
            None,
            &env(&[("PERSONA_PREFS__STORE__EMBEDDING_DIMS", "\"many\"")]),
        )
        .unwrap_err();
        assert!(error.to_string().contains("embedding_dims"), "{error}");
        for tokens in ["4", "1024"] {
            let error = Config::load_from(
                None,
                &env(&[("PERSONA_PREFS__EMBED__LOCAL_MAX_TOKENS", tokens)]),
            )
            .unwrap_err();
            assert!(
                error.to_string().contains("embed.local_max_tokens"),
                "{error}"
            );
        }
        let error = Config::load_from(
            None,
            &env(&[("PERSONA_PREFS__EMBED__QUERY_PRECISION", "int4")]),
        )
        .unwrap_err();
        assert!(error.to_string().contains("query_precision"), "{error}");
        let f32_queries = Config::load_from(
            None,
            &env(&[("PERSONA_PREFS__EMBED__QUERY_PRECISION", "f32")]),
        )
        .unwrap();
        assert_eq!(
            f32_queries.embed.query_precision,
            crate::embed::QueryPrecision::F32
        );
    }

    #[test]
    fn file_overlay_rejects_unknown_keys() {
        let dir = std::env::temp_dir().join(format!("pp-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "[store]\nreinforce_rat = 0.3\n").unwrap();
        let error = Config::load_from(Some(&path), &[]).unwrap_err();
        assert!(error.to_string().contains("reinforce_rat"), "{error}");
        std::fs::write(&path, "[store]\nreinforce_rate = 0.3\n").unwrap();
        assert_eq!(
            Config::load_from(Some(&path), &[])
                .unwrap()
                .store
                .reinforce_rate,
            0.3
        );
    }
}
