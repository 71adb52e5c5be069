//! Adjudication of grey-zone matches by the LLM (the update phase mem0 and Graphiti use).
//!
//! Ingest decides "same topic" by the similarity of two topics' embeddings against the match
//! threshold. Near the threshold that is a coin toss ("board games" / "video games" are 0.70
//! apart with all-MiniLM-L6-v2, "running" / "jogging" 0.6): a wrong call makes a silent twin
//! or a silent merge. With an LLM configured, a candidate whose nearest preference falls in
//! the grey zone (`extract.adjudication.grey_zone_low` up to the threshold) is put to it: the
//! same topic or not, the same stance or not. Verdicts are cached by pair (the candidate's
//! topic, opinion and stance; the preference's id and opinion), so a topic voiced again costs
//! no second call until either side changes.

use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock, Mutex};

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::chat::{ChatModel, Question};
use super::{AdjudicationConfig, ExtractError, LlmConfig};
use crate::model::Stance;
use crate::telemetry;

/// One side of a pair put to the adjudicator.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub topic: String,
    pub opinion: String,
    pub stance: Option<Stance>,
}

pub use crate::model::Verdict;

pub trait Adjudicator: Send + Sync {
    /// Whether `candidate` (just voiced) and `existing` (the preference `existing_id`) are
    /// about the same topic, and if so whether they take the same stance.
    fn adjudicate<'a>(
        &'a self,
        candidate: &'a Statement,
        existing_id: &'a str,
        existing: &'a Statement,
    ) -> BoxFuture<'a, Result<Verdict, ExtractError>>;

    /// The lower bound of the grey zone: similarities from here up to the match threshold are
    /// adjudicated.
    fn grey_zone_low(&self) -> f64;
}

const PROMPT: &str = r#"You compare two statements by the same persona: an existing preference (A) and a newly voiced opinion (B).
Decide:
- same_topic: true only if both are about the same thing (the same food, work, activity, idea), not merely related things of one kind ("board games" and "video games" are different topics; "running" and "jogging" are the same).
- same_stance: when same_topic, true if B agrees with A (both for, or both against), false if B contradicts A.
Reply with one JSON object with the two booleans, same_topic and same_stance, and nothing else."#;

/// The verdict's JSON Schema.
static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["same_topic", "same_stance"],
        "properties": {
            "same_topic": {"type": "boolean"},
            "same_stance": {"type": "boolean"},
        },
    })
});

/// A verdict is a few tokens; this leaves room for a model that spaces its JSON out.
const VERDICT_TOKENS: u32 = 64;

#[derive(Deserialize)]
struct Reply {
    same_topic: bool,
    #[serde(default)]
    same_stance: bool,
}

pub struct LlmAdjudicator {
    model: Arc<ChatModel>,
    grey_zone_low: f64,
    cache: Mutex<lru::LruCache<String, Verdict>>,
}

impl LlmAdjudicator {
    pub fn new(
        llm: &LlmConfig,
        config: &AdjudicationConfig,
    ) -> Result<LlmAdjudicator, ExtractError> {
        Ok(LlmAdjudicator::with_model(
            Arc::new(ChatModel::new(llm)?),
            config,
        ))
    }

    /// An adjudicator asking `model` (shared with the extractor: one server, one limit).
    pub fn with_model(model: Arc<ChatModel>, config: &AdjudicationConfig) -> LlmAdjudicator {
        LlmAdjudicator {
            model,
            grey_zone_low: config.grey_zone_low,
            cache: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(config.cache_size.max(1)).expect("at least one"),
            )),
        }
    }

    fn cache_key(candidate: &Statement, existing_id: &str, existing: &Statement) -> String {
        let stance = |s: Option<Stance>| s.map(Stance::as_str).unwrap_or("");
        [
            candidate.topic.trim().to_lowercase().as_str(),
            candidate.opinion.trim(),
            stance(candidate.stance),
            existing_id,
            existing.opinion.trim(),
            stance(existing.stance),
        ]
        .join("\u{1f}")
    }
}

impl Adjudicator for LlmAdjudicator {
    fn adjudicate<'a>(
        &'a self,
        candidate: &'a Statement,
        existing_id: &'a str,
        existing: &'a Statement,
    ) -> BoxFuture<'a, Result<Verdict, ExtractError>> {
        Box::pin(async move {
            let key = Self::cache_key(candidate, existing_id, existing);
            let cached = self
                .cache
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .get(&key)
                .copied();
            if let Some(verdict) = cached {
                telemetry::adjudication(verdict.outcome(), true);
                return Ok(verdict);
            }
            let side = |s: &Statement| {
                json!({"topic": s.topic, "opinion": s.opinion,
                       "stance": s.stance.map(Stance::as_str).unwrap_or("unstated")})
            };
            let question = Question {
                system: PROMPT,
                user: json!({"A": side(existing), "B": side(candidate)}).to_string(),
                schema_name: "verdict",
                schema: &SCHEMA,
                max_tokens: Some(VERDICT_TOKENS),
            };
            let parsed: Reply = self.model.ask(&question).await.inspect_err(|_| {
                telemetry::adjudication("failed", false);
            })?;
            let verdict = Verdict {
                same_topic: parsed.same_topic,
                same_stance: parsed.same_topic && parsed.same_stance,
            };
            telemetry::adjudication(verdict.outcome(), false);
            self.cache
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .put(key, verdict);
            Ok(verdict)
        })
    }

    fn grey_zone_low(&self) -> f64 {
        self.grey_zone_low
    }
}
