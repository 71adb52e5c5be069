//! Asking an OpenAI-compatible chat model for JSON of a given shape: the one way both LLM
//! stages (extraction, adjudication) talk to it, made for what real servers and small models do.
//!
//! - **As many requests at once as the server takes.** Requests take permits of an
//!   [`AdaptiveLimit`] that starts from the slots the server reports (llama.cpp `/props`
//!   `total_slots`, asked once) and follows its answers; waiting for a permit is not part of a
//!   request's timeout.
//! - **Constrained decoding where the server offers it.** The reply's JSON Schema is sent in
//!   the nested OpenAI shape (`{"type": "json_schema", "json_schema": {"name", "strict",
//!   "schema"}}`), which llama.cpp enforces by grammar (its flat `{"type": "json_schema",
//!   "schema"}` is silently ignored). A server that answers 400 to it is asked with
//!   `json_object`, then plain text, then without `temperature`; what worked is remembered for
//!   the process.
//! - **A bounded reply.** `max_tokens` is always sent: a small model that repeats itself would
//!   otherwise run to the end of its context. A reply cut off (`finish_reason: "length"`) is
//!   asked again once with twice the budget.
//! - **JSON recovered** from code fences, prose around it and `<think>` blocks.
//! - **An unusable reply is reported with what the model said** (cut short and redacted), as
//!   [`ExtractError::Unusable`], which dead-letters the event with that reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{ExtractError, LlmConfig, redact};
use crate::openai_http::{AdaptiveLimit, ApiClient, ApiError};
use crate::telemetry;

/// How much of an unusable reply its error shows.
const SHOWN_CHARS: usize = 300;

/// A question for the model: instructions, the input, and the JSON Schema of the answer.
pub struct Question<'a> {
    pub system: &'a str,
    pub user: String,
    /// The schema's name in the request (letters, digits, `_`).
    pub schema_name: &'static str,
    pub schema: &'a Value,
    /// Tokens the answer may take; the configured `max_tokens` when `None`.
    pub max_tokens: Option<u32>,
}

/// How the answer's shape is asked for, from the most constrained to the least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum Shape {
    Schema = 0,
    JsonObject = 1,
    Plain = 2,
}

impl Shape {
    fn from_u8(value: u8) -> Shape {
        match value {
            0 => Shape::Schema,
            1 => Shape::JsonObject,
            _ => Shape::Plain,
        }
    }

    fn plainer(self) -> Option<Shape> {
        match self {
            Shape::Schema => Some(Shape::JsonObject),
            Shape::JsonObject => Some(Shape::Plain),
            Shape::Plain => None,
        }
    }
}

/// A chat model behind an OpenAI-compatible API.
pub struct ChatModel {
    client: ApiClient,
    model: String,
    temperature: f64,
    max_tokens: u32,
    /// The most constrained shape the server took (it refused the ones before).
    shape: AtomicU8,
    /// The server refused `temperature`.
    without_temperature: AtomicBool,
    /// The server's slots, asked once.
    slots_asked: tokio::sync::OnceCell<()>,
}

impl ChatModel {
    pub fn new(config: &LlmConfig) -> Result<ChatModel, ExtractError> {
        let cap = config.max_concurrent_requests.max(1);
        let limit = Arc::new(AdaptiveLimit::new(cap, 1, cap));
        Ok(ChatModel {
            client: config.api_client()?.with_limit(limit),
            model: config.model.clone(),
            temperature: config.temperature,
            max_tokens: config.max_tokens.max(1),
            shape: AtomicU8::new(Shape::Schema as u8),
            without_temperature: AtomicBool::new(false),
            slots_asked: tokio::sync::OnceCell::new(),
        })
    }

    /// How the answer's shape is asked for now: `json_schema` until the server refused it,
    /// then `json_object`, then `plain`.
    pub fn reply_shape(&self) -> &'static str {
        match Shape::from_u8(self.shape.load(Ordering::Relaxed)) {
            Shape::Schema => "json_schema",
            Shape::JsonObject => "json_object",
            Shape::Plain => "plain",
        }
    }

    /// Requests the server is given at once now.
    pub fn concurrency_limit(&self) -> usize {
        self.client.limit().map_or(0, |limit| limit.limit())
    }

    /// Asks `question` and parses the answer as `T`.
    pub async fn ask<T: DeserializeOwned>(
        &self,
        question: &Question<'_>,
    ) -> Result<T, ExtractError> {
        self.ask_slots_once().await;
        let mut shape = Shape::from_u8(self.shape.load(Ordering::Relaxed));
        let mut temperature = !self.without_temperature.load(Ordering::Relaxed);
        let mut budget = question.max_tokens.unwrap_or(self.max_tokens).max(1);
        let mut cut_off_before = false;
        let mut malformed_before = false;
        let record = |outcome: &'static str, took: Duration| telemetry::llm_request(outcome, took);
        loop {
            let body = self.body(question, shape, temperature, budget);
            let reply = match self
                .client
                .post_json("chat/completions", &body, &record)
                .await
            {
                Ok(reply) => reply,
                Err(ApiError::BadRequest(message)) => {
                    // Ask more plainly: the schema, then the JSON mode, then the temperature.
                    if let Some(plainer) = shape.plainer() {
                        tracing::info!(?shape, ?plainer, %message, "the LLM server refused a reply shape; asking more plainly");
                        shape = plainer;
                        continue;
                    }
                    if temperature {
                        tracing::info!(%message, "the LLM server refused the request; asking without a temperature");
                        temperature = false;
                        continue;
                    }
                    return Err(ExtractError::Rejected(message));
                }
                Err(ApiError::Unavailable(message)) => {
                    return Err(ExtractError::Unavailable(message));
                }
                Err(ApiError::Rejected(message)) => return Err(ExtractError::Rejected(message)),
            };
            // What the server took is what it is asked from now on.
            self.shape.fetch_max(shape as u8, Ordering::Relaxed);
            if !temperature {
                self.without_temperature.store(true, Ordering::Relaxed);
            }
            if let Some(usage) = reply.get("usage") {
                telemetry::llm_tokens(
                    usage["prompt_tokens"].as_u64().unwrap_or(0),
                    usage["completion_tokens"].as_u64().unwrap_or(0),
                );
            }
            let choice = &reply["choices"][0];
            let content = choice["message"]["content"].as_str().unwrap_or_default();
            if choice["finish_reason"].as_str() == Some("length") {
                telemetry::llm_request("cut_off", Duration::ZERO);
                if !cut_off_before {
                    cut_off_before = true;
                    budget = budget.saturating_mul(2);
                    continue;
                }
                return Err(ExtractError::Unusable(format!(
                    "the LLM's reply was cut off at max_tokens twice (the second time at {budget} tokens; extract.llm.max_tokens sets the first); it began: {}",
                    shown(content)
                )));
            }
            match recover_json::<T>(content) {
                Ok(answer) => return Ok(answer),
                Err(error) => {
                    telemetry::llm_request("malformed", Duration::ZERO);
                    if !malformed_before {
                        malformed_before = true;
                        continue;
                    }
                    return Err(ExtractError::Unusable(format!(
                        "the LLM's reply is not the JSON asked for ({error}); it said: {}",
                        shown(content)
                    )));
                }
            }
        }
    }

    fn body(&self, question: &Question<'_>, shape: Shape, temperature: bool, budget: u32) -> Value {
        let mut body = json!({
            "model": self.model,
            "max_tokens": budget,
            "messages": [
                {"role": "system", "content": question.system},
                {"role": "user", "content": question.user},
            ],
        });
        if temperature {
            body["temperature"] = json!(self.temperature);
        }
        match shape {
            Shape::Schema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": question.schema_name,
                        "strict": true,
                        "schema": question.schema,
                    },
                });
            }
            Shape::JsonObject => body["response_format"] = json!({"type": "json_object"}),
            Shape::Plain => {}
        }
        body
    }

    /// Starts the limit at the slots the server reports (llama.cpp `/props`), once. A server
    /// without `/props` (a hosted API) keeps the configured cap.
    async fn ask_slots_once(&self) {
        self.slots_asked
            .get_or_init(|| async {
                let Some(limit) = self.client.limit() else {
                    return;
                };
                let slots = self
                    .client
                    .get_root_json("props")
                    .await
                    .and_then(|props| props["total_slots"].as_u64());
                if let Some(slots) = slots {
                    limit.set_limit(slots as usize);
                    tracing::info!(
                        slots,
                        limit = limit.limit(),
                        "LLM server reports its slots; requests at once start there"
                    );
                }
                telemetry::llm_concurrency_limit(limit.limit());
            })
            .await;
    }
}

/// What an error may show of a model's reply: one line, secrets redacted, cut short.
fn shown(content: &str) -> String {
    let line: String = content
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let (redacted, _) = redact::redact(line.trim());
    let mut cut: String = redacted.chars().take(SHOWN_CHARS).collect();
    if redacted.chars().count() > SHOWN_CHARS {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// The JSON answer in a model's reply: the reply itself, or inside a code fence, or the first
/// object in prose around it; `<think>` blocks are left out first.
pub fn recover_json<T: DeserializeOwned>(content: &str) -> Result<T, String> {
    let mut text = content.to_string();
    while let Some(start) = text.find("<think>") {
        match text[start..].find("</think>") {
            Some(end) => text.replace_range(start..start + end + "</think>".len(), ""),
            // Still thinking when it stopped: there is no answer after it.
            None => text.truncate(start),
        }
    }
    let trimmed = text.trim();
    let mut first_error = match serde_json::from_str::<T>(trimmed) {
        Ok(answer) => return Ok(answer),
        Err(error) => error.to_string(),
    };
    if trimmed.is_empty() {
        first_error = "the reply is empty".into();
    }
    let mut candidates: Vec<&str> = Vec::new();
    let mut rest = trimmed;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(0, |n| n + 1);
        let Some(close) = after[body_start..].find("```") else {
            break;
        };
        candidates.push(&after[body_start..body_start + close]);
        rest = &after[body_start + close + 3..];
    }
    candidates.extend(json_objects(trimmed));
    for candidate in candidates {
        if let Ok(answer) = serde_json::from_str::<T>(candidate.trim()) {
            return Ok(answer);
        }
    }
    Err(first_error)
}

/// Every balanced `{…}` in `text` that starts at a top level, in order (braces inside JSON
/// strings do not count).
fn json_objects(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        let mut end = None;
        for (i, &byte) in bytes.iter().enumerate().skip(open) {
            if in_string {
                match byte {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(end) => {
                found.push(&text[open..=end]);
                start = end + 1;
            }
            None => start = open + 1,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Answer {
        same_topic: bool,
    }

    #[test]
    fn json_is_recovered_from_what_models_wrap_it_in() {
        let table = [
            ("bare", r#"{"same_topic": true}"#),
            ("fenced", "```json\n{\"same_topic\": true}\n```"),
            (
                "fenced without a language",
                "```\n{\"same_topic\": true}\n```",
            ),
            (
                "prose around it",
                "Sure! Here is the JSON:\n{\"same_topic\": true}\nHope this helps.",
            ),
            (
                "a think block first",
                "<think>They are {both} about tea.</think>\n{\"same_topic\": true}",
            ),
            (
                "braces inside strings",
                r#"Answer: {"same_topic": true, "note": "a } in text"} done"#,
            ),
            (
                "an earlier object that is not the answer",
                r#"{"thinking": 1} then {"same_topic": true}"#,
            ),
        ];
        for (case, content) in table {
            assert_eq!(
                recover_json::<Answer>(content),
                Ok(Answer { same_topic: true }),
                "{case}"
            );
        }
    }

    #[test]
    fn what_holds_no_answer_says_so() {
        for content in [
            "",
            "I cannot help with that.",
            "<think>still thinking {\"same_topic\": true}",
            "{\"same_topic\": ",
        ] {
            assert!(recover_json::<Answer>(content).is_err(), "{content:?}");
        }
    }

    #[test]
    fn an_unusable_reply_is_shown_cut_short_redacted_and_on_one_line() {
        let key = format!("sk-{}", "a".repeat(40));
        let shown = shown(&format!("line one\nmy key is {key} {}", "x".repeat(500)));
        assert!(!shown.contains(&key), "{shown}");
        assert!(shown.contains(redact::MARK), "{shown}");
        assert!(!shown.contains('\n'));
        assert!(shown.chars().count() < SHOWN_CHARS + 10, "{}", shown.len());
    }
}
