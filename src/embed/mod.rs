//! Embedding stage: text → unit vector, behind the [`Embedder`] trait.
//!
//! - `local::LocalEmbedder`: all-MiniLM-L6-v2 on the CPU with candle (the default; the
//!   `local-embedder` cargo feature, on by default);
//! - [`openai::OpenAiEmbedder`]: any OpenAI-compatible `/v1/embeddings` server;
//! - [`batcher::BatchingEmbedder`]: gathers texts from concurrent callers into one batch, so
//!   the local model runs at batch throughput while each event embeds only its own texts;
//! - [`cache::CachingEmbedder`]: answers recently embedded texts from memory (topics repeat).

pub mod batcher;
pub mod cache;
#[cfg(feature = "local-embedder")]
pub mod fast_bert;
#[cfg(feature = "local-embedder")]
pub mod local;
pub mod openai;
#[cfg(feature = "local-embedder")]
mod quantized_bert;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;

use crate::settings::ConfigError;

/// `vector` scaled to unit length (a zero vector stays as it is): cosine search wants unit
/// vectors, whichever embedder made them.
pub(crate) fn normalise(vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.into_iter().map(|v| v / norm).collect()
    } else {
        vector
    }
}

/// Text in, one vector per text out (same order), each of [`Embedder::dims`] dimensions.
pub trait Embedder: Send + Sync {
    fn dims(&self) -> usize;
    fn embed<'a>(&'a self, texts: &'a [String])
    -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedError {
    /// The model files are missing or unreadable, or the model failed; not worth retrying.
    #[error("embedding model: {0}")]
    Model(String),
    /// The remote embedder failed in a way that may pass (timeout, 429, 5xx, connection).
    #[error("embedding service unavailable: {0}")]
    Unavailable(String),
    /// The remote embedder refused the request or answered nonsense.
    #[error("embedding service rejected the request: {0}")]
    Rejected(String),
}

impl EmbedError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, EmbedError::Unavailable(_))
    }
}

/// Builds the configured embedder for what is stored (the exact one), wrapped in the
/// micro-batcher and (unless `cache_size` is 0) the cache of recent texts. Its callers (the
/// CLI's migrate and calibrate) embed nothing for search, so the 8-bit weights and their
/// threads are not loaded.
pub fn from_config(config: &EmbedConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    let exact_only = EmbedConfig {
        query_precision: QueryPrecision::F32,
        ..config.clone()
    };
    Ok(from_config_sharing(&exact_only)?.exact)
}

/// The local model the configuration names, when it names one: the embedder reads texts
/// with it, and the learned extractor reads messages with the same weights.
#[cfg(feature = "local-embedder")]
pub type LocalModel = Arc<local::LocalEmbedder>;
#[cfg(not(feature = "local-embedder"))]
pub type LocalModel = Arc<()>;

/// The embedders one process runs, sharing one model.
pub struct Embedders {
    /// For everything stored and everything compared with what is stored: preferences'
    /// topics, find_conflicts' queries, an operator's add or evolve.
    pub exact: Arc<dyn Embedder>,
    /// For search text only (injection and search queries), where a person waits: the local
    /// model's 8-bit pass with `embed.query_precision = "int8"`, otherwise `exact` itself.
    /// Its own batcher and cache, so a query's vector never stands in for a stored one.
    pub queries: Arc<dyn Embedder>,
    /// The local model itself when the embedder is the local one (the learned extractor
    /// reads messages with the same weights).
    pub local: Option<LocalModel>,
}

/// The configured embedders, each behind the micro-batcher and the cache (see [`Embedders`]).
pub fn from_config_sharing(config: &EmbedConfig) -> Result<Embedders, EmbedError> {
    let wrap = |inner: Arc<dyn Embedder>| -> Arc<dyn Embedder> {
        let batched: Arc<dyn Embedder> = Arc::new(batcher::BatchingEmbedder::new(
            inner,
            config.max_batch,
            std::time::Duration::from_millis(config.batch_linger_ms),
        ));
        match std::num::NonZeroUsize::new(config.cache_size) {
            Some(capacity) => Arc::new(cache::CachingEmbedder::new(batched, capacity)),
            None => batched,
        }
    };
    match config.kind {
        #[cfg(feature = "local-embedder")]
        EmbedderKind::Local => {
            let model = load_local(config)?;
            let exact = wrap(model.clone());
            let queries = match config.query_precision {
                QueryPrecision::Int8 => wrap(Arc::new(model.for_queries())),
                QueryPrecision::F32 => exact.clone(),
            };
            Ok(Embedders {
                exact,
                queries,
                local: Some(model),
            })
        }
        #[cfg(not(feature = "local-embedder"))]
        EmbedderKind::Local => Err(EmbedError::Model(
            "this build has no local embedder (built without the local-embedder feature): \
             set embed.kind = \"openai\""
                .into(),
        )),
        EmbedderKind::Openai => {
            let exact = wrap(Arc::new(openai::OpenAiEmbedder::new(
                &config.openai,
                config.max_input_chars,
            )?));
            Ok(Embedders {
                queries: exact.clone(),
                exact,
                local: None,
            })
        }
    }
}

/// Loads the local model from `embed.model_dir`.
#[cfg(feature = "local-embedder")]
pub fn load_local(config: &EmbedConfig) -> Result<Arc<local::LocalEmbedder>, EmbedError> {
    Ok(Arc::new(local::LocalEmbedder::load_with(
        std::path::Path::new(&config.model_dir),
        config.max_input_chars,
        local::LocalOptions {
            max_tokens: config.local_max_tokens,
            int8_queries: config.query_precision == QueryPrecision::Int8,
            ..local::LocalOptions::default()
        },
    )?))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedConfig {
    pub kind: EmbedderKind,
    pub model_dir: String,
    pub max_batch: usize,
    pub batch_linger_ms: u64,
    pub max_input_chars: usize,
    /// Tokens the local model reads per text (at most 512, its position table).
    pub local_max_tokens: usize,
    /// Recently embedded texts kept in memory; 0 disables the cache.
    pub cache_size: usize,
    /// The local model's arithmetic for search text (injection and search queries): "int8"
    /// or "f32". What is stored is always embedded in F32.
    pub query_precision: QueryPrecision,
    pub local_match_threshold: f64,
    pub openai_match_threshold: f64,
    pub openai: OpenAiEmbedConfig,
}

/// See [`EmbedConfig::query_precision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryPrecision {
    Int8,
    F32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderKind {
    Local,
    Openai,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiEmbedConfig {
    pub base_url: String,
    pub model: String,
    pub api_key_env: String,
    pub dims: usize,
    pub timeout_ms: u64,
    pub max_retries: u32,
}

impl EmbedConfig {
    /// The dimensions the configured embedder produces.
    pub fn dims(&self) -> usize {
        match self.kind {
            EmbedderKind::Local => LOCAL_DIMS,
            EmbedderKind::Openai => self.openai.dims,
        }
    }

    /// The topic-similarity threshold for the configured embedder.
    pub fn match_threshold(&self) -> f64 {
        match self.kind {
            EmbedderKind::Local => self.local_match_threshold,
            EmbedderKind::Openai => self.openai_match_threshold,
        }
    }

    pub fn validate(&self, store_dims: usize) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.into(),
            message,
        };
        if self.dims() != store_dims {
            let key = if self.kind == EmbedderKind::Local {
                "store.embedding_dims"
            } else {
                "embed.openai.dims"
            };
            return Err(invalid(
                key,
                format!(
                    "the {:?} embedder produces {} dimensions but store.embedding_dims is {store_dims}",
                    self.kind,
                    self.dims()
                ),
            ));
        }
        if self.max_batch == 0 || self.max_batch > 1024 {
            return Err(invalid(
                "embed.max_batch",
                format!("must be within 1..=1024, got {}", self.max_batch),
            ));
        }
        if self.max_input_chars == 0 {
            return Err(invalid("embed.max_input_chars", "must be positive".into()));
        }
        if self.local_max_tokens < 8 || self.local_max_tokens > 512 {
            return Err(invalid(
                "embed.local_max_tokens",
                format!(
                    "must be within 8..=512 (the model's position table), got {}",
                    self.local_max_tokens
                ),
            ));
        }
        for (key, value) in [
            ("embed.local_match_threshold", self.local_match_threshold),
            ("embed.openai_match_threshold", self.openai_match_threshold),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(invalid(key, format!("must be within [0, 1], got {value}")));
            }
        }
        if !self.openai.base_url.starts_with("http://")
            && !self.openai.base_url.starts_with("https://")
        {
            return Err(invalid(
                "embed.openai.base_url",
                format!("must be an http(s) URL, got {:?}", self.openai.base_url),
            ));
        }
        Ok(())
    }
}

/// all-MiniLM-L6-v2's output size.
pub const LOCAL_DIMS: usize = 384;
