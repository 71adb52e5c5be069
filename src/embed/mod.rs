//! Embedding stage: text → unit vector, behind the [`Embedder`] trait.

use serde::Deserialize;

use crate::config::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedConfig {
    pub kind: EmbedderKind,
    pub model_dir: String,
    pub max_batch: usize,
    pub batch_linger_ms: u64,
    pub max_input_chars: usize,
    pub local_match_threshold: f64,
    pub openai_match_threshold: f64,
    pub openai: OpenAiEmbedConfig,
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
