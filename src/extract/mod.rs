//! Extraction stage: persona messages → opinions, behind the [`Extractor`] trait.

use serde::Deserialize;

use crate::config::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractConfig {
    pub kind: ExtractorKind,
    pub max_opinions_per_message: usize,
    pub llm: LlmConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtractorKind {
    Rules,
    Llm,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    pub base_url: String,
    pub model: String,
    pub api_key_env: String,
    pub timeout_ms: u64,
    pub max_retries: u32,
    pub max_backoff_ms: u64,
    pub temperature: f64,
}

impl ExtractConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.into(),
            message,
        };
        if self.max_opinions_per_message == 0 {
            return Err(invalid(
                "extract.max_opinions_per_message",
                "must be positive".into(),
            ));
        }
        if !self.llm.base_url.starts_with("http://") && !self.llm.base_url.starts_with("https://") {
            return Err(invalid(
                "extract.llm.base_url",
                format!("must be an http(s) URL, got {:?}", self.llm.base_url),
            ));
        }
        if self.llm.timeout_ms == 0 {
            return Err(invalid("extract.llm.timeout_ms", "must be positive".into()));
        }
        Ok(())
    }
}
