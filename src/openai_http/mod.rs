//! A small client for OpenAI-compatible HTTP APIs (OpenAI, Ollama, vLLM, llama.cpp server),
//! shared by the LLM extractor and the remote embedder: JSON POST with a timeout, retries with
//! exponential backoff on 429, 5xx, timeouts and connection errors, honouring `Retry-After`;
//! with an [`AdaptiveLimit`], as many requests at once as the server can take (`limit.rs`).

pub mod limit;

use std::sync::Arc;
use std::time::Duration;

pub use limit::AdaptiveLimit;
use limit::Outcome;

use backon::Retryable;
use serde_json::Value;

use crate::retry::RetryPolicy;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Worth retrying later: the service was down, slow or rate-limited through every retry.
    #[error("{0}")]
    Unavailable(String),
    /// The service refused the request (4xx other than 400, 422 and 429) or answered something
    /// unusable.
    #[error("{0}")]
    Rejected(String),
    /// The service refused the request's shape (400, 422): a server may not take a parameter
    /// (a JSON Schema, a temperature) that another does; the caller may ask another way.
    #[error("{0}")]
    BadRequest(String),
}

#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    max_retries: u32,
    max_backoff: Duration,
    /// Requests in flight, adapted to the server; none: the caller bounds them.
    limit: Option<Arc<AdaptiveLimit>>,
}

pub struct ApiClientSettings<'a> {
    pub base_url: &'a str,
    /// Name of the environment variable holding the key; a missing variable means no key
    /// (fine for local servers such as Ollama).
    pub api_key_env: &'a str,
    pub timeout: Duration,
    pub max_retries: u32,
    pub max_backoff: Duration,
}

impl ApiClient {
    pub fn new(settings: ApiClientSettings<'_>) -> Result<ApiClient, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(5)))
            .build()
            .map_err(|e| ApiError::Rejected(format!("building HTTP client: {e}")))?;
        let api_key = std::env::var(settings.api_key_env)
            .ok()
            .filter(|key| !key.is_empty());
        Ok(ApiClient {
            http,
            base_url: settings.base_url.trim_end_matches('/').to_string(),
            api_key,
            max_retries: settings.max_retries,
            max_backoff: settings.max_backoff,
            limit: None,
        })
    }

    /// Every attempt takes a permit of `limit` before it is sent, and reports how it went. A
    /// retry's backoff holds no permit.
    pub fn with_limit(mut self, limit: Arc<AdaptiveLimit>) -> ApiClient {
        self.limit = Some(limit);
        self
    }

    /// The limit attempts take their permits from.
    pub fn limit(&self) -> Option<&Arc<AdaptiveLimit>> {
        self.limit.as_ref()
    }

    /// GETs `{root}/{path}`, where root is the base URL without a trailing `/v1` (llama.cpp
    /// serves `/props` and `/health` there): once, no retries. `None` when it does not answer
    /// with JSON (a hosted API has no such endpoint).
    pub async fn get_root_json(&self, path: &str) -> Option<Value> {
        let root = self.base_url.strip_suffix("/v1").unwrap_or(&self.base_url);
        let url = format!("{root}/{}", path.trim_start_matches('/'));
        let mut request = self.http.get(&url).timeout(Duration::from_secs(5));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.json::<Value>().await.ok()
    }

    /// POSTs `body` to `{base_url}/{path}` and returns the JSON reply, retrying transient
    /// failures. `on_attempt` sees each attempt's outcome (for metrics).
    pub async fn post_json(
        &self,
        path: &str,
        body: &Value,
        on_attempt: &(dyn Fn(&'static str, Duration) + Sync),
    ) -> Result<Value, ApiError> {
        let url = format!("{}/{}", self.base_url, path.trim_start_matches('/'));
        // What errors may say about the endpoint: never its credentials.
        let shown = crate::settings::redact_url(&url);
        let policy = RetryPolicy {
            first: Duration::from_millis(100),
            max: self.max_backoff,
        };
        let attempt = || async {
            let transient = |error: ApiError, retry_after: Option<Duration>| Failure {
                error,
                retryable: true,
                retry_after,
            };
            // Taken before the request's own time starts: waiting here is not its timeout.
            let permit = match &self.limit {
                Some(limit) => Some(limit.acquire().await),
                None => None,
            };
            let report = |outcome: Outcome| {
                if let Some(permit) = permit {
                    permit.finish(outcome);
                }
            };
            let started = std::time::Instant::now();
            let mut request = self.http.post(&url).json(body);
            // The event's or request's span is this call's parent (W3C Trace Context).
            if let Some(trace) = crate::trace_context::current() {
                request = request.header(crate::trace_context::TRACEPARENT, trace.header_value());
            }
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let response = match request.send().await {
                Ok(response) => response,
                Err(error) => {
                    report(if error.is_timeout() {
                        Outcome::Overloaded
                    } else {
                        Outcome::Ignored
                    });
                    on_attempt(
                        if error.is_timeout() {
                            "timeout"
                        } else {
                            "connection_error"
                        },
                        started.elapsed(),
                    );
                    return Err(transient(
                        ApiError::Unavailable(format!("POST {shown}: {}", error.without_url())),
                        None,
                    ));
                }
            };
            let status = response.status();
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
                .map(Duration::from_secs_f64);
            let text = match response.text().await {
                Ok(text) => text,
                Err(error) => {
                    report(Outcome::Overloaded);
                    on_attempt("timeout", started.elapsed());
                    return Err(transient(
                        ApiError::Unavailable(format!(
                            "reading reply from {shown}: {}",
                            error.without_url()
                        )),
                        None,
                    ));
                }
            };
            let busy = status.as_u16() == 429 || status.as_u16() == 503;
            report(if busy {
                Outcome::Overloaded
            } else if status.is_success() {
                Outcome::Answered
            } else {
                Outcome::Ignored
            });
            if status.as_u16() == 429 || status.is_server_error() {
                on_attempt(
                    if status.as_u16() == 429 {
                        "rate_limited"
                    } else {
                        "server_error"
                    },
                    started.elapsed(),
                );
                return Err(transient(
                    ApiError::Unavailable(format!(
                        "POST {shown}: HTTP {status}{}",
                        error_code(&text)
                    )),
                    retry_after,
                ));
            }
            if !status.is_success() {
                on_attempt("rejected", started.elapsed());
                let message = format!("POST {shown}: HTTP {status}{}", error_code(&text));
                return Err(Failure {
                    error: if matches!(status.as_u16(), 400 | 422) {
                        ApiError::BadRequest(message)
                    } else {
                        ApiError::Rejected(message)
                    },
                    retryable: false,
                    retry_after: None,
                });
            }
            match serde_json::from_str::<Value>(&text) {
                Ok(value) => {
                    on_attempt("ok", started.elapsed());
                    Ok(value)
                }
                Err(error) => {
                    on_attempt("malformed", started.elapsed());
                    Err(transient(
                        ApiError::Unavailable(format!("POST {shown}: reply is not JSON: {error}")),
                        None,
                    ))
                }
            }
        };
        attempt
            .retry(policy.backoff(self.max_retries as usize))
            .when(|failure| failure.retryable)
            // A server's Retry-After replaces the policy's wait (capped), but never adds retries.
            .adjust(|failure, wait| {
                wait.map(|wait| {
                    failure
                        .retry_after
                        .map_or(wait, |asked| asked.min(self.max_backoff))
                })
            })
            .await
            .map_err(|failure| failure.error)
    }
}

/// The error code of an OpenAI-style error body (`{"error": {"code"|"type": …}}`) as `: code`,
/// when it is a short token; nothing else of an upstream body is shown. A body may echo the
/// request (users' words) or carry secrets, and errors reach dead-letter headers and logs.
fn error_code(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        return String::new();
    };
    let error = &value["error"];
    [&error["code"], &error["type"]]
        .into_iter()
        .filter_map(Value::as_str)
        .find(|code| {
            !code.is_empty()
                && code.len() <= 64
                && code
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        })
        .map(|code| format!(": {code}"))
        .unwrap_or_default()
}

/// One attempt's failure: whether another attempt may succeed, and how long the server asked
/// to wait before it.
struct Failure {
    error: ApiError,
    retryable: bool,
    retry_after: Option<Duration>,
}
