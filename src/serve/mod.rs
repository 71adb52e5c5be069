//! Serve stage: injection and administration over NATS request-reply.

use serde::Deserialize;

use crate::config::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    pub service_name: String,
    pub subject_prefix: String,
    pub queue_group: String,
    pub query_cache_size: usize,
    pub resident_count: usize,
}

impl ServeConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.service_name.is_empty()
            || !self
                .service_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(ConfigError::Invalid {
                key: "serve.service_name".into(),
                message: "must be [A-Za-z0-9_-]+".into(),
            });
        }
        if self.subject_prefix.is_empty() || self.subject_prefix.contains(['*', '>', ' ']) {
            return Err(ConfigError::Invalid {
                key: "serve.subject_prefix".into(),
                message: "must be a plain subject prefix".into(),
            });
        }
        Ok(())
    }
}
