//! Opinion extraction with an OpenAI-compatible chat model (OpenAI, Ollama, vLLM, llama.cpp
//! server). The model is asked for strict JSON; its answer is then validated so that only
//! opinions the persona itself voiced survive:
//! - `evidence` must occur verbatim in the persona message (case and spacing aside);
//! - `stance` must be "for" or "against"; `strength` is clamped to [0, 1];
//! - `related_user_ids` are kept only when they are participants of the conversation.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::chat::{ChatModel, Question};
use super::{
    ExtractError, ExtractedOpinion, ExtractionInput, Extractor, LlmConfig, evidence_in_message,
};
use crate::model::Stance;

pub struct LlmExtractor {
    model: Arc<ChatModel>,
    max_opinions: usize,
    system_prompt: String,
    /// The answer's JSON Schema: evidence first (a model writes in schema order, so it quotes
    /// before it names), lengths bounded, stance and category from their lists.
    schema: Value,
}

/// Longest quote, topic and opinion the schema lets a model write (in characters); a
/// constrained server stops a string there.
const MAX_EVIDENCE_CHARS: u64 = 300;
const MAX_TOPIC_CHARS: u64 = 60;
const MAX_OPINION_CHARS: u64 = 300;

const PROMPT: &str = r#"You extract the opinions, preferences and ideals that the PERSONA itself expresses in its latest message.
Only the persona's own message counts. Never extract what a user said, asked or claimed, and never extract from quoted or injected context.
What counts: a liking or dislike ("I love X", "not a fan of X", "X is the worst"), a judgement stated as fact ("X is underrated"), a comparison (the preferred thing "for", the other "against"), a value or ideal ("honesty matters to me").
What does not count: questions; hypotheticals ("if I could...", "I would love to..."); what others think, unless the persona says it agrees; views the persona held once but not now ("as a kid I loved X"); a remark on one moment or event ("the weather was awful yesterday"); thanks and pleasantries about the chat or the user ("nice talking to you"); jokes meant as jokes; sarcasm read literally (read what it means).
The topic ("name") is the thing itself, as the persona would name it again: never a pronoun, a filler word ("honestly", "haha"), or "that movie" / "the one" unless earlier messages name it, in which case use that name.
Reply with one JSON object, {"opinions": [...]}, and nothing else. Each opinion has, in this order:
- evidence: the words of the persona's message that express it, copied exactly;
- name: the topic, one to six words;
- stance: for or against;
- strength: from 0 to 1; 0.8 to 0.9 for strong words like love or hate, 0.4 to 0.6 for mild or hedged ones;
- category: one of CATEGORIES;
- opinion: the opinion as a first-person sentence that is understandable on its own;
- related_user_ids: ids of participants the opinion is about, usually none.
At most MAX opinions; {"opinions": []} when the persona expresses none.
Example. The persona's message: "Honestly, I can't stand jazz, but green tea is lovely."
Reply: {"opinions": [{"evidence": "I can't stand jazz", "name": "jazz", "stance": "against", "strength": 0.8, "category": "musical", "opinion": "I can't stand jazz.", "related_user_ids": []}, {"evidence": "green tea is lovely", "name": "green tea", "stance": "for", "strength": 0.6, "category": "culinary", "opinion": "I find green tea lovely.", "related_user_ids": []}]}"#;

/// The system prompt with the categories and the limit filled in.
fn system_prompt(max_opinions: usize, categories: &[String]) -> String {
    PROMPT
        .replace("CATEGORIES", &format!("{categories:?}"))
        .replace("MAX", &max_opinions.to_string())
}

/// The reply's JSON Schema.
fn reply_schema(max_opinions: usize, categories: &[String]) -> Value {
    let text = |max: u64| json!({"type": "string", "minLength": 1, "maxLength": max});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["opinions"],
        "properties": {"opinions": {
            "type": "array",
            "maxItems": max_opinions,
            "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["evidence", "name", "stance", "strength", "category", "opinion", "related_user_ids"],
                "properties": {
                    "evidence": text(MAX_EVIDENCE_CHARS),
                    "name": text(MAX_TOPIC_CHARS),
                    "stance": {"type": "string", "enum": ["for", "against"]},
                    "strength": {"type": "number", "minimum": 0, "maximum": 1},
                    "category": {"type": "string", "enum": categories},
                    "opinion": text(MAX_OPINION_CHARS),
                    "related_user_ids": {"type": "array", "maxItems": 8, "items": text(256)},
                },
            },
        }},
    })
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
        Ok(LlmExtractor::with_model(
            Arc::new(ChatModel::new(config)?),
            max_opinions,
            categories,
        ))
    }

    /// An extractor asking `model` (shared with the adjudicator: one server, one limit).
    pub fn with_model(
        model: Arc<ChatModel>,
        max_opinions: usize,
        categories: &[String],
    ) -> LlmExtractor {
        LlmExtractor {
            model,
            max_opinions,
            system_prompt: system_prompt(max_opinions, categories),
            schema: reply_schema(max_opinions, categories),
        }
    }

    /// The model this extractor asks.
    pub fn model(&self) -> &Arc<ChatModel> {
        &self.model
    }

    fn question(&self, input: &ExtractionInput<'_>) -> Question<'_> {
        let conversation = json!({
            "earlier_messages": input.context,
            "participants": input.participants,
            "persona_message": input.persona_message,
        });
        Question {
            system: &self.system_prompt,
            user: conversation.to_string(),
            schema_name: "opinions",
            schema: &self.schema,
            max_tokens: None,
        }
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
                found_by: Some("llm".to_string()),
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
            let reply: Reply = self.model.ask(&self.question(input)).await?;
            Ok(self.validate(reply, input))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example in the prompt is a real one: its reply is what the validation keeps for
    /// its message, in the schema's order, with nothing a model could copy as a placeholder.
    #[test]
    fn the_prompts_example_is_a_real_answer_to_its_message() {
        let prompt = system_prompt(8, &["culinary".into(), "musical".into()]);
        let message = prompt
            .split("The persona's message: \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap();
        let reply = prompt.split("Reply: ").nth(1).unwrap();
        let parsed: Reply = serde_json::from_str(reply).unwrap();
        assert_eq!(parsed.opinions.len(), 2);
        for opinion in &parsed.opinions {
            assert!(
                evidence_in_message(&opinion.evidence, message),
                "{}",
                opinion.evidence
            );
        }
        let value: Value = serde_json::from_str(reply).unwrap();
        let keys: Vec<&str> = value["opinions"][0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let schema = reply_schema(8, &["culinary".into()]);
        let required: Vec<&str> = schema["properties"]["opinions"]["items"]["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort();
        let mut sorted_required = required.clone();
        sorted_required.sort();
        assert_eq!(sorted_keys, sorted_required, "the example has every field");
        assert_eq!(required[0], "evidence", "evidence comes first");
        assert!(!reply.contains("1-6") && !reply.contains("short topic"));
    }

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
