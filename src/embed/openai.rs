//! Remote embeddings over an OpenAI-compatible `/v1/embeddings` endpoint.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;

use super::{EmbedError, Embedder, OpenAiEmbedConfig, normalise};
use crate::openai_http::{ApiClient, ApiClientSettings, ApiError};
use crate::telemetry;
use crate::text::truncate_chars;

pub struct OpenAiEmbedder {
    client: ApiClient,
    model: String,
    dims: usize,
    max_input_chars: usize,
}

impl OpenAiEmbedder {
    pub fn new(
        config: &OpenAiEmbedConfig,
        max_input_chars: usize,
    ) -> Result<OpenAiEmbedder, EmbedError> {
        let client = ApiClient::new(ApiClientSettings {
            base_url: &config.base_url,
            api_key_env: &config.api_key_env,
            timeout: Duration::from_millis(config.timeout_ms),
            max_retries: config.max_retries,
            max_backoff: Duration::from_secs(10),
        })
        .map_err(|e| EmbedError::Model(e.to_string()))?;
        Ok(OpenAiEmbedder {
            client,
            model: config.model.clone(),
            dims: config.dims,
            max_input_chars,
        })
    }
}

impl Embedder for OpenAiEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            let started = std::time::Instant::now();
            let input: Vec<String> = texts
                .iter()
                .map(|t| truncate_chars(t, self.max_input_chars))
                .collect();
            let body = json!({ "model": self.model, "input": input, "encoding_format": "float" });
            let reply = self
                .client
                .post_json("embeddings", &body, &|_, _| {})
                .await
                .map_err(|error| match error {
                    ApiError::Unavailable(m) => EmbedError::Unavailable(m),
                    ApiError::Rejected(m) | ApiError::BadRequest(m) => EmbedError::Rejected(m),
                })?;
            let data = reply["data"]
                .as_array()
                .ok_or_else(|| EmbedError::Rejected("reply has no data array".into()))?;
            let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
            for (position, item) in data.iter().enumerate() {
                let index = item["index"]
                    .as_u64()
                    .map(|i| i as usize)
                    .unwrap_or(position);
                let vector: Vec<f32> = item["embedding"]
                    .as_array()
                    .ok_or_else(|| {
                        EmbedError::Rejected(format!("data[{position}] has no embedding"))
                    })?
                    .iter()
                    .map(|v| v.as_f64().map(|f| f as f32))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        EmbedError::Rejected(format!("data[{position}].embedding has a non-number"))
                    })?;
                if vector.len() != self.dims {
                    return Err(EmbedError::Rejected(format!(
                        "embedding has {} dimensions, embed.openai.dims is {}",
                        vector.len(),
                        self.dims
                    )));
                }
                let slot = vectors
                    .get_mut(index)
                    .ok_or_else(|| EmbedError::Rejected(format!("index {index} out of range")))?;
                // Most services return unit vectors; this makes sure.
                *slot = Some(normalise(vector));
            }
            let vectors: Option<Vec<Vec<f32>>> = vectors.into_iter().collect();
            let vectors = vectors
                .ok_or_else(|| EmbedError::Rejected("reply is missing embeddings".into()))?;
            telemetry::embed_batch(texts.len(), started.elapsed());
            Ok(vectors)
        })
    }
}
