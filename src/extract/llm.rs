//! Opinion extraction with an OpenAI-compatible chat model (OpenAI, Ollama, vLLM, llama.cpp
//! server). The model is asked for strict JSON; its answer is then validated so that only
//! opinions the persona itself voiced survive:
//! - `evidence` must occur verbatim in the persona message (case and spacing aside);
//! - `stance` must be "for" or "against"; `strength` is clamped to [0, 1];
//! - `related_user_ids` are kept only when they are participants of the conversation.

use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ExtractError, ExtractedOpinion, ExtractionInput, Extractor, LlmConfig, evidence_in_message,
};
use crate::openai_http::{ApiClient, ApiError};
use crate::store::Stance;
use crate::telemetry;

pub struct LlmExtractor {
    client: ApiClient,
    /// Bounds requests in flight across every event (`extract.llm.max_concurrent_requests`).
    permits: tokio::sync::Semaphore,
    model: String,
    temperature: f64,
    max_opinions: usize,
    system_prompt: String,
}

const PROMPT: &str = r#"You extract the opinions, preferences and ideals that the PERSONA itself expresses in its latest message.
Only the persona's own message counts. Never extract what a user said, asked or claimed, and never extract from quoted or injected context.
What counts: a liking or dislike ("I love X", "not a fan of X", "X is the worst"), a judgement stated as fact ("X is underrated"), a comparison (the preferred thing "for", the other "against"), a value or ideal ("honesty matters to me").
What does not count: questions; hypotheticals ("if I could...", "I would love to..."); what others think, unless the persona says it agrees; views the persona held once but not now ("as a kid I loved X"); a remark on one moment or event ("the weather was awful yesterday"); thanks and pleasantries about the chat or the user ("nice talking to you"); jokes meant as jokes; sarcasm read literally (read what it means).
The topic ("name") is the thing itself, as the persona would name it again: never a pronoun, a filler word ("honestly", "haha"), or "that movie" / "the one" unless earlier messages name it, in which case use that name.
Reply with one JSON object and nothing else:
{"opinions": [{"name": "short topic, 1-6 words", "opinion": "first-person sentence, understandable on its own", "category": one of CATEGORIES, "stance": "for" or "against", "strength": number 0..1 (0.8-0.9 for strong words like love or hate, 0.4-0.6 for mild or hedged ones), "related_user_ids": ["ids of users the opinion is about"], "evidence": "verbatim quote of the persona message that expresses it"}]}
Return {"opinions": []} when the persona expresses no opinion. At most MAX opinions."#;

/// The system prompt with the categories and the limit filled in.
fn system_prompt(max_opinions: usize, categories: &[String]) -> String {
    PROMPT
        .replace("CATEGORIES", &format!("{categories:?}"))
        .replace("MAX", &max_opinions.to_string())
}

#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    opinions: Vec<RawOpinion>,
}

#[derive(Deserialize)]
struct RawOpinion {
    #[serde(default)]
    name: String,
    #[serde(default)]
    opinion: String,
    #[serde(default)]
    category: String,
    #[serde(default)]
    stance: String,
    #[serde(default)]
    strength: Option<f64>,
    #[serde(default)]
    related_user_ids: Vec<String>,
    #[serde(default)]
    evidence: String,
}

impl LlmExtractor {
    pub fn new(
        config: &LlmConfig,
        max_opinions: usize,
        categories: &[String],
    ) -> Result<LlmExtractor, ExtractError> {
        let client = config.api_client()?;
        let system_prompt = system_prompt(max_opinions, categories);
        Ok(LlmExtractor {
            client,
            permits: tokio::sync::Semaphore::new(config.max_concurrent_requests.max(1)),
            model: config.model.clone(),
            temperature: config.temperature,
            max_opinions,
            system_prompt,
        })
    }

    fn request_body(&self, input: &ExtractionInput<'_>) -> Value {
        let conversation = json!({
            "earlier_messages": input.context,
            "participants": input.participants,
            "persona_message": input.persona_message,
        });
        json!({
            "model": self.model,
            "temperature": self.temperature,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": conversation.to_string()},
            ],
        })
    }

    /// Keeps the opinions that pass validation; drops (and logs) the rest.
    fn validate(&self, reply: Reply, input: &ExtractionInput<'_>) -> Vec<ExtractedOpinion> {
        let mut kept = Vec::new();
        for raw in reply.opinions.into_iter() {
            let Some(stance) = Stance::parse(raw.stance.trim().to_ascii_lowercase().as_str())
            else {
                tracing::debug!(stance = %raw.stance, "dropping LLM opinion with an unknown stance");
                continue;
            };
            if raw.name.trim().is_empty() || raw.opinion.trim().is_empty() {
                continue;
            }
            if !evidence_in_message(&raw.evidence, input.persona_message) {
                tracing::info!(name = %raw.name, "dropping LLM opinion whose evidence is not in the persona's message");
                continue;
            }
            let related_user_ids = raw
                .related_user_ids
                .into_iter()
                .filter(|id| input.participants.contains(id))
                .collect();
            kept.push(ExtractedOpinion {
                name: raw.name.trim().to_string(),
                opinion: raw.opinion.trim().to_string(),
                category: raw.category.trim().to_ascii_lowercase(),
                stance,
                strength: raw
                    .strength
                    .filter(|s| s.is_finite())
                    .unwrap_or(0.5)
                    .clamp(0.0, 1.0),
                related_user_ids,
                evidence: raw.evidence.trim().to_string(),
            });
            if kept.len() == self.max_opinions {
                break;
            }
        }
        kept
    }
}

impl Extractor for LlmExtractor {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>> {
        Box::pin(async move {
            // Held through retries and backoff too: a rate-limited API gets fewer callers.
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| ExtractError::Rejected("extractor closed".into()))?;
            let body = self.request_body(input);
            let record =
                |outcome: &'static str, took: Duration| telemetry::llm_request(outcome, took);
            // A reply whose content is not the JSON asked for is retried like a 5xx: models
            // occasionally wrap JSON in prose, and a second sample usually complies.
            let mut last_error = String::new();
            for _ in 0..2 {
                let reply = self
                    .client
                    .post_json("chat/completions", &body, &record)
                    .await
                    .map_err(|error| match error {
                        ApiError::Unavailable(m) => ExtractError::Unavailable(m),
                        ApiError::Rejected(m) => ExtractError::Rejected(m),
                    })?;
                if let Some(usage) = reply.get("usage") {
                    telemetry::llm_tokens(
                        usage["prompt_tokens"].as_u64().unwrap_or(0),
                        usage["completion_tokens"].as_u64().unwrap_or(0),
                    );
                }
                let content = reply["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap_or_default();
                match parse_content(content) {
                    Ok(parsed) => return Ok(self.validate(parsed, input)),
                    Err(error) => {
                        telemetry::llm_request("malformed", Duration::ZERO);
                        last_error = error;
                    }
                }
            }
            Err(ExtractError::Unavailable(format!(
                "LLM reply is not the JSON asked for: {last_error}"
            )))
        })
    }
}

/// Parses the model's content, tolerating a Markdown code fence around the JSON.
fn parse_content(content: &str) -> Result<Reply, String> {
    parse_json_content(content)
}

/// The model's content as `T`, tolerating a Markdown code fence around the JSON (both LLM
/// stages ask for strict JSON; models still fence it now and then).
pub(super) fn parse_json_content<T: serde::de::DeserializeOwned>(
    content: &str,
) -> Result<T, String> {
    let trimmed = content.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(trimmed);
    serde_json::from_str::<T>(unfenced.trim()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::system_prompt;

    /// The model is told the conventions the labelled sets follow, so that a real model's
    /// figures from `evaluate-extraction` measure it against the same reading of an opinion.
    #[test]
    fn the_prompt_fills_in_its_limits_and_states_what_is_not_an_opinion() {
        let prompt = system_prompt(8, &["culinary".to_string(), "musical".to_string()]);
        assert!(
            !prompt.contains("CATEGORIES") && !prompt.contains("MAX"),
            "{prompt}"
        );
        assert!(prompt.contains(r#"["culinary", "musical"]"#), "{prompt}");
        assert!(prompt.contains("At most 8 opinions"), "{prompt}");
        for convention in [
            "questions",
            "hypotheticals",
            "what others think",
            "one moment or event",
            "pleasantries",
            "never a pronoun",
            "the other \"against\"",
        ] {
            assert!(
                prompt.contains(convention),
                "the prompt names {convention:?}"
            );
        }
    }
}
