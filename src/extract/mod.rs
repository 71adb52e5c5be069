//! Extraction stage: persona messages → opinions, behind the [`Extractor`] trait.
//!
//! - [`rules::RulesExtractor`]: offline first-person opinion patterns (the default);
//! - [`llm::LlmExtractor`]: an OpenAI-compatible chat model asked for strict JSON, whose
//!   output is checked against the persona's own words.
//!
//! **Invariant:** every opinion returned carries `evidence` that occurs verbatim (up to case
//! and whitespace) in the persona message it was extracted from. Users cannot talk the persona
//! into an opinion, and text injected into the prompt is never re-mined.

pub mod adjudicate;
pub mod chat;
pub mod evaluate;
#[cfg(feature = "local-embedder")]
pub mod learned;
pub mod llm;
pub mod people;
pub mod redact;
pub mod rules;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::settings::ConfigError;

pub use crate::model::ExtractedOpinion;

/// A message of the conversation, as the extractor sees it.
#[derive(Debug, Clone, Serialize)]
pub struct TurnText<'a> {
    pub role: &'a str,
    pub user_id: &'a str,
    pub content: &'a str,
}

/// One persona message with the turns before it.
#[derive(Debug, Clone)]
pub struct ExtractionInput<'a> {
    pub persona_message: &'a str,
    /// Earlier messages of the event, oldest first (context only; never mined).
    pub context: Vec<TurnText<'a>>,
    /// Users known to be in the conversation; related_user_ids are restricted to these.
    pub participants: &'a [String],
}

pub trait Extractor: Send + Sync {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>>;
}

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// The LLM was unreachable, slow, rate-limited or answered garbage through every retry.
    #[error("extractor unavailable: {0}")]
    Unavailable(String),
    /// The LLM refused the request (bad key, bad model name, request too large).
    #[error("extractor rejected the request: {0}")]
    Rejected(String),
    /// The LLM answered, twice, with what cannot be used (not the JSON asked for, or cut off
    /// at its token budget); says what it answered, cut short and redacted. Asking again later
    /// gets the same answer, so the event is dead-lettered with this reason.
    #[error("LLM reply unusable: {0}")]
    Unusable(String),
}

impl ExtractError {
    pub fn is_retryable(&self) -> bool {
        // A refused request is usually configuration (key, model) rather than this message,
        // so it is retried too; max_deliver bounds it and dead-letters with the reason.
        !matches!(self, ExtractError::Unusable(_))
    }
}

/// Builds the configured extractor. The learned ones read with `local`, the local model the
/// embedder uses (`embed::from_config_sharing`).
pub fn from_config(
    config: &ExtractConfig,
    categories: &[String],
    local: Option<crate::embed::LocalModel>,
) -> Result<Arc<dyn Extractor>, ExtractError> {
    Ok(stages_from_config(config, categories, local)?.0)
}

/// The extractor and the adjudicator, if there is one.
pub type Stages = (Arc<dyn Extractor>, Option<Arc<dyn adjudicate::Adjudicator>>);

/// The configured extractor and, with the LLM extractor and adjudication on, the adjudicator.
/// Both ask one [`chat::ChatModel`]: the same server, whose slots one limit counts.
pub fn stages_from_config(
    config: &ExtractConfig,
    categories: &[String],
    local: Option<crate::embed::LocalModel>,
) -> Result<Stages, ExtractError> {
    // The gate in front of a reader's own encoder reads with the embedder's model, as the
    // reader reads (`reader_view`).
    let embedders = local.clone().map(|model| reader_view(config, model));
    let local = reader_model(config, local)?;
    Ok(match config.kind {
        ExtractorKind::Rules if !config.reads_with_local_model() => (
            Arc::new(rules::RulesExtractor::new(config.max_opinions_per_message)),
            None,
        ),
        ExtractorKind::Rules | ExtractorKind::RulesThenLearned => {
            (learned_from_config(config, local)?, None)
        }
        ExtractorKind::Learned => (
            gated_reader(config, learned_from_config(config, local)?, embedders)?,
            None,
        ),
        ExtractorKind::Llm => {
            let model = Arc::new(chat::ChatModel::new(&config.llm)?);
            let llm: Arc<dyn Extractor> = Arc::new(llm::LlmExtractor::with_model(
                model.clone(),
                config.max_opinions_per_message,
                categories,
            ));
            let adjudicator: Option<Arc<dyn adjudicate::Adjudicator>> =
                config.adjudication.enabled.then(|| {
                    Arc::new(adjudicate::LlmAdjudicator::with_model(
                        model.clone(),
                        &config.adjudication,
                    )) as Arc<dyn adjudicate::Adjudicator>
                });
            (gated(config, llm, local)?, adjudicator)
        }
    })
}

/// The model the learned reader reads with: its own encoder (`extract.learned_encoder_dir`),
/// loaded only when something reads with it, or the embedder's `local` model.
#[cfg(feature = "local-embedder")]
pub fn reader_model(
    config: &ExtractConfig,
    local: Option<crate::embed::LocalModel>,
) -> Result<Option<crate::embed::LocalModel>, ExtractError> {
    let reads = config.reads_with_local_model()
        || (config.kind == ExtractorKind::Llm && config.llm.gate_min_score > 0.0);
    if !reads {
        return Ok(local);
    }
    // Messages are cut as the embedder cuts them; the encoder's tokenizer cuts again at its
    // 256 tokens.
    let max_input_chars = local
        .as_ref()
        .map_or(READER_MAX_INPUT_CHARS, |model| model.max_input_chars());
    Ok(match own_encoder(config, max_input_chars)? {
        Some(own) => Some(own),
        None => local.map(|model| reader_view(config, model)),
    })
}

/// The embedder's `model` as the learned reader reads it: through its 8-bit pass with
/// `extract.learned_int8` (the weights search queries use, `embed.query_precision = "int8"`;
/// never the stored vectors' pass), otherwise as it is.
#[cfg(feature = "local-embedder")]
pub fn reader_view(
    config: &ExtractConfig,
    model: crate::embed::LocalModel,
) -> crate::embed::LocalModel {
    if config.learned_int8 {
        Arc::new(model.for_queries())
    } else {
        model
    }
}

#[cfg(not(feature = "local-embedder"))]
fn reader_view(
    _config: &ExtractConfig,
    model: crate::embed::LocalModel,
) -> crate::embed::LocalModel {
    model
}

/// The reader's own encoder, loaded from `extract.learned_encoder_dir` (`None` when unset),
/// reading at most `max_input_chars` of a message.
#[cfg(feature = "local-embedder")]
pub fn own_encoder(
    config: &ExtractConfig,
    max_input_chars: usize,
) -> Result<Option<crate::embed::LocalModel>, ExtractError> {
    if config.learned_encoder_dir.is_empty() {
        return Ok(None);
    }
    let encoder = crate::embed::local::LocalEmbedder::load_with(
        std::path::Path::new(&config.learned_encoder_dir),
        max_input_chars,
        crate::embed::local::LocalOptions {
            // This encoder only reads messages for the reader: its 8-bit copy is kept only
            // when the reader is to read through it, and then it reads through nothing else.
            int8_queries: config.learned_int8,
            ..Default::default()
        },
    )
    .map_err(|e| ExtractError::Rejected(format!("extract.learned_encoder_dir: {e}")))?;
    Ok(Some(reader_view(config, Arc::new(encoder))))
}

#[cfg(not(feature = "local-embedder"))]
pub fn reader_model(
    _config: &ExtractConfig,
    local: Option<crate::embed::LocalModel>,
) -> Result<Option<crate::embed::LocalModel>, ExtractError> {
    Ok(local)
}

/// The most characters of a message the reader's own encoder reads when there is no embedder
/// to take the limit from (`embed.max_input_chars`' default).
#[cfg(feature = "local-embedder")]
const READER_MAX_INPUT_CHARS: usize = 2000;

/// The learned reader over its own encoder behind the LLM's gate
/// (`extract.learned_gate_min_score` above 0): the rules, and the shipped reader's sentence
/// score over the embedder's `local` model, decide which messages the costlier encoder reads.
#[cfg(feature = "local-embedder")]
fn gated_reader(
    config: &ExtractConfig,
    reader: Arc<dyn Extractor>,
    local: Option<crate::embed::LocalModel>,
) -> Result<Arc<dyn Extractor>, ExtractError> {
    if config.learned_gate_min_score <= 0.0 {
        return Ok(reader);
    }
    let model = local.ok_or_else(|| {
        ExtractError::Rejected(
            "extract.learned_gate_min_score reads with the embedder's local model: set \
             embed.kind = \"local\", or 0"
                .into(),
        )
    })?;
    behind_gate(
        config,
        reader,
        model,
        learned::SHIPPED_HEAD,
        config.learned_gate_min_score,
    )
}

/// The LLM extractor behind its gate (`extract.llm.gate_min_score` above 0, with the local
/// model): only messages the rules read an opinion in, or the learned sentence score rates
/// that high, go to the model.
#[cfg(feature = "local-embedder")]
fn gated(
    config: &ExtractConfig,
    llm: Arc<dyn Extractor>,
    local: Option<crate::embed::LocalModel>,
) -> Result<Arc<dyn Extractor>, ExtractError> {
    let (Some(model), true) = (local, config.llm.gate_min_score > 0.0) else {
        return Ok(llm);
    };
    behind_gate(
        config,
        llm,
        model,
        &config.learned_reader_bytes()?,
        config.llm.gate_min_score,
    )
}

/// `inner` asked only about the messages the rules read an opinion in, or the sentence score of
/// the reader in `reader_file` over `model` rates at least `min_score` ([`learned::Gate`]).
#[cfg(feature = "local-embedder")]
fn behind_gate(
    config: &ExtractConfig,
    inner: Arc<dyn Extractor>,
    model: crate::embed::LocalModel,
    reader_file: &[u8],
    min_score: f64,
) -> Result<Arc<dyn Extractor>, ExtractError> {
    Ok(Arc::new(learned::Gated {
        gate: learned::Gate {
            rules: rules::RulesExtractor::new(config.max_opinions_per_message),
            learned: learned::LearnedExtractor::from_file(
                model,
                config.max_opinions_per_message,
                reader_file,
                learned::Reads::Alone,
            )?
            .batched(learned::READ_BATCH),
            min_score: min_score as f32,
        },
        inner,
    }))
}

/// Without the local model there is no gate: `inner` as it is.
#[cfg(not(feature = "local-embedder"))]
fn gated_reader(
    _config: &ExtractConfig,
    inner: Arc<dyn Extractor>,
    _local: Option<crate::embed::LocalModel>,
) -> Result<Arc<dyn Extractor>, ExtractError> {
    Ok(inner)
}

#[cfg(not(feature = "local-embedder"))]
use self::gated_reader as gated;

#[cfg(feature = "local-embedder")]
fn learned_from_config(
    config: &ExtractConfig,
    local: Option<crate::embed::LocalModel>,
) -> Result<Arc<dyn Extractor>, ExtractError> {
    let model = local.ok_or_else(|| {
        ExtractError::Rejected(
            "extract.kind learned and rules_then_learned, and extract.rules_min_sentence_score, \
             read with the local model: set embed.kind = \"local\""
                .into(),
        )
    })?;
    let max = config.max_opinions_per_message;
    let reader = config.learned_reader_bytes()?;
    Ok(match config.kind {
        ExtractorKind::Learned => Arc::new(
            learned::LearnedExtractor::from_file(model, max, &reader, learned::Reads::Alone)?
                .batched(learned::READ_BATCH),
        ),
        // The check reads only the sentence score; after the rules, the reader's own finds
        // are read at the pair its training chose for there.
        kind => {
            let reads = if kind == ExtractorKind::Rules {
                learned::Reads::Alone
            } else {
                learned::Reads::AfterRules
            };
            let reader = learned::LearnedExtractor::from_file(model, max, &reader, reads)?;
            // One copy of the word score's weights, for the check and the word gate.
            let words =
                learned::word_score::WordScore::shipped().map_err(ExtractError::Rejected)?;
            // Only after the rules does it read whole messages; the check reads sentence
            // scores through its own batcher.
            let reader = if kind == ExtractorKind::Rules {
                reader
            } else {
                reader.batched(learned::READ_BATCH)
            };
            let checked = learned::CheckedRules::new(
                rules::RulesExtractor::new(max),
                reader,
                config.rules_check() as f32,
            )
            .with_word_score(words.clone(), config.rules_check_keeps_at_word_score as f32);
            if kind == ExtractorKind::Rules {
                Arc::new(checked)
            } else {
                let beside = config.learned_beside_rules_min_confidence as f32;
                let word_gate = config.learned_word_gate as f32;
                Arc::new(learned::RulesThenLearned {
                    rules: checked,
                    beside_rules: (beside < 1.0).then_some(beside),
                    word_gate: (word_gate > 0.0).then_some((words, word_gate)),
                })
            }
        }
    })
}

#[cfg(not(feature = "local-embedder"))]
fn learned_from_config(
    _config: &ExtractConfig,
    _local: Option<crate::embed::LocalModel>,
) -> Result<Arc<dyn Extractor>, ExtractError> {
    Err(ExtractError::Rejected(
        "this build has no local model (built without the local-embedder feature)".into(),
    ))
}

/// True when `evidence` occurs in `message`, ignoring case and runs of whitespace.
pub fn evidence_in_message(evidence: &str, message: &str) -> bool {
    let fold = |text: &str| {
        text.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let evidence =
        fold(evidence.trim_matches(|c: char| c == '"' || c == '\'' || c.is_whitespace()));
    !evidence.is_empty() && fold(message).contains(&evidence)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractConfig {
    pub kind: ExtractorKind,
    pub max_opinions_per_message: usize,
    /// A learned reader's file (what `scripts/train-learned-extractor` writes) to read with
    /// instead of the shipped one; empty: the shipped one. For `learned`,
    /// `rules_then_learned` and the LLM's gate.
    #[serde(default)]
    pub learned_reader: String,
    /// The encoder `learned_reader` was trained over, when it is not the embedder's model: a
    /// folder with its `config.json`, `tokenizer.json` and `model.safetensors` (BERT or MPNet;
    /// `scripts/services fetch-encoder` unpacks all-mpnet-base-v2). Empty: the embedder's local
    /// model, which the shipped reader was trained over.
    #[serde(default)]
    pub learned_encoder_dir: String,
    /// The learned reader (what `learned` and `rules_then_learned` read, the check on the
    /// rules, the gates) reads through its encoder's dense layers in 8-bit integers: its own
    /// encoder's (`learned_encoder_dir`, loaded with them), or the embedder's model's, which
    /// search queries use (`embed.query_precision = "int8"`). Two to three times as fast, its
    /// states within cosine 0.99 of the F32 ones. Nothing stored is read so: every opinion
    /// found is embedded in F32 as ever. False (the default): F32, what it was trained over.
    #[serde(default)]
    pub learned_int8: bool,
    /// With the local model, a finding of the rules is kept only when the learned reader's
    /// sentence score of its own sentence is at least this: a check on the rules' precision,
    /// paid for in recall (`learned::CheckedRules`). 0: the rules' findings as they are. For
    /// `rules` and `rules_then_learned`; unset, each kind's own
    /// ([`ExtractConfig::rules_check`]).
    #[serde(default)]
    pub rules_min_sentence_score: Option<f64>,
    /// With that check on, a finding whose sentence's word score
    /// (`learned::word_score`, a hashed-words logistic regression costing microseconds) is at
    /// least this is kept without reading the model; the model judges the rest. 1: the model
    /// reads every finding.
    #[serde(default = "default_keeps_at_word_score")]
    pub rules_check_keeps_at_word_score: f64,
    /// For `rules_then_learned`: where the rules find something, the learned reader's own
    /// finds on other topics are kept beside theirs when their span confidence is at least
    /// this (a message often voices two views, and the rules read one). 1 (the default): only
    /// the rules' findings there.
    #[serde(default = "default_beside_rules_min_confidence")]
    pub learned_beside_rules_min_confidence: f64,
    /// For `rules_then_learned`: where the rules find nothing, the reader reads the message
    /// only when the word score (`learned::word_score`, microseconds) of one of its sentences
    /// is at least this. 0 (the default): every such message is read.
    #[serde(default)]
    pub learned_word_gate: f64,
    /// For `learned` over a reader's own encoder (`learned_encoder_dir`): a message is read by
    /// it only when the rules find something in it or the shipped reader's sentence score,
    /// over the embedder's model, rates it at least this (the LLM's gate, `learned::Gate`, in
    /// front of the costlier encoder). 0 (the default): every message is read.
    #[serde(default)]
    pub learned_gate_min_score: f64,
    pub llm: LlmConfig,
    pub adjudication: AdjudicationConfig,
}

/// `extract.rules_check_keeps_at_word_score`'s value when a file leaves it out: the shipped
/// one (`config/default.toml` says how it was chosen).
fn default_keeps_at_word_score() -> f64 {
    0.4
}

/// `extract.learned_beside_rules_min_confidence`'s value when a file leaves it out: the shipped
/// one, off (`config/default.toml` says how it was chosen).
fn default_beside_rules_min_confidence() -> f64 {
    1.0
}

/// What each kind checks the rules' findings at when `extract.rules_min_sentence_score` is
/// unset, given the embedder: 0.6 for the rules with the local model (the default since stop
/// 85: held out, people's chat 0.907 [0.89-0.92] and persona 0.965 precision against the
/// unchecked rules' 0.842 and 0.964, for 0.023 and 0.013 of recall, at 0.86-0.95 x their
/// throughput on real chat; README "Choosing an extractor"), and nothing without it (there is
/// no model to read the sentence score with, and the rules need none); 0.6 after the rules,
/// where the model is loaded anyway (over every held-out set, 4 881 opinions, +0.006
/// precision and +0.061 recall against the rules alone). Pure.
pub fn default_rules_check(kind: ExtractorKind, embedder: crate::embed::EmbedderKind) -> f64 {
    match kind {
        ExtractorKind::RulesThenLearned => RULES_CHECK,
        ExtractorKind::Rules if embedder == crate::embed::EmbedderKind::Local => RULES_CHECK,
        ExtractorKind::Rules | ExtractorKind::Learned | ExtractorKind::Llm => 0.0,
    }
}

/// The check measured and chosen for the rules (`rules_min_sentence_score`): the highest
/// value costing at most 0.02 recall on chat tuning set 5 and the development set.
pub const RULES_CHECK: f64 = 0.6;

/// Grey-zone adjudication by the LLM (`adjudicate.rs`); only with `extract.kind = "llm"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdjudicationConfig {
    pub enabled: bool,
    /// Similarities from here up to the match threshold are put to the LLM.
    pub grey_zone_low: f64,
    /// Verdicts remembered, by pair.
    pub cache_size: usize,
}

impl LlmConfig {
    /// The HTTP client of the chat-completions API this configures (extraction and
    /// adjudication share its settings).
    pub fn api_client(&self) -> Result<crate::openai_http::ApiClient, ExtractError> {
        crate::openai_http::ApiClient::new(crate::openai_http::ApiClientSettings {
            base_url: &self.base_url,
            api_key_env: &self.api_key_env,
            timeout: std::time::Duration::from_millis(self.timeout_ms),
            max_retries: self.max_retries,
            max_backoff: std::time::Duration::from_millis(self.max_backoff_ms),
        })
        .map_err(|e| ExtractError::Rejected(e.to_string()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractorKind {
    Rules,
    Llm,
    /// The learned extractor alone (`learned/`).
    Learned,
    /// The rules, and the learned extractor on messages where they find nothing.
    RulesThenLearned,
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
    /// The most requests in flight at once; fewer when the server reports fewer slots or
    /// answers slowly (`openai_http::limit`).
    pub max_concurrent_requests: usize,
    /// Tokens an answer may take (sent as `max_tokens`); a reply cut off there is asked again
    /// once with twice as many.
    pub max_tokens: u32,
    /// Only messages the rules read an opinion in, or whose learned sentence score is at least
    /// this, go to the model (with the local embedder); 0 sends every message.
    pub gate_min_score: f64,
}

impl ExtractConfig {
    /// The check on the rules' findings: `extract.rules_min_sentence_score` as set, or as
    /// [`Config::load_from`](crate::config::Config::load_from) chose it for the kind and the
    /// embedder ([`default_rules_check`]); 0 in a configuration that never went through it.
    pub fn rules_check(&self) -> f64 {
        self.rules_min_sentence_score.unwrap_or(0.0)
    }

    /// Fills an unset `rules_min_sentence_score` with the kind's own for `embedder`.
    pub fn choose_rules_check(&mut self, embedder: crate::embed::EmbedderKind) {
        if self.rules_min_sentence_score.is_none() {
            self.rules_min_sentence_score = Some(default_rules_check(self.kind, embedder));
        }
    }

    /// Whether the extractor reads with the local model: the learned kinds, and the rules
    /// checked by the learned sentence score. (The LLM's gate is the LLM's own.)
    pub fn reads_with_local_model(&self) -> bool {
        match self.kind {
            ExtractorKind::Learned | ExtractorKind::RulesThenLearned => true,
            ExtractorKind::Rules => self.rules_check() > 0.0,
            ExtractorKind::Llm => false,
        }
    }

    /// The learned reader's file: `extract.learned_reader`, or the shipped one.
    #[cfg(feature = "local-embedder")]
    pub fn learned_reader_bytes(&self) -> Result<std::borrow::Cow<'static, [u8]>, ExtractError> {
        if self.learned_reader.is_empty() {
            return Ok(std::borrow::Cow::Borrowed(learned::SHIPPED_HEAD));
        }
        std::fs::read(&self.learned_reader)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| {
                ExtractError::Rejected(format!(
                    "extract.learned_reader {:?}: {e}",
                    self.learned_reader
                ))
            })
    }

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
        if !self.learned_reader.is_empty() && !std::path::Path::new(&self.learned_reader).is_file()
        {
            return Err(invalid(
                "extract.learned_reader",
                format!("{:?} is not a file", self.learned_reader),
            ));
        }
        if !self.learned_encoder_dir.is_empty() {
            if !std::path::Path::new(&self.learned_encoder_dir).is_dir() {
                return Err(invalid(
                    "extract.learned_encoder_dir",
                    format!("{:?} is not a folder", self.learned_encoder_dir),
                ));
            }
            if self.learned_reader.is_empty() {
                return Err(invalid(
                    "extract.learned_encoder_dir",
                    "the shipped reader reads the embedder's model: name a reader trained over \
                     this encoder in extract.learned_reader"
                        .into(),
                ));
            }
        }
        if !self.llm.base_url.starts_with("http://") && !self.llm.base_url.starts_with("https://") {
            return Err(invalid(
                "extract.llm.base_url",
                format!("must be an http(s) URL, got {:?}", self.llm.base_url),
            ));
        }
        if self.llm.max_concurrent_requests == 0 {
            return Err(invalid(
                "extract.llm.max_concurrent_requests",
                "must be positive".into(),
            ));
        }
        if self.llm.max_tokens == 0 {
            return Err(invalid("extract.llm.max_tokens", "must be positive".into()));
        }
        if self.llm.timeout_ms == 0 {
            return Err(invalid("extract.llm.timeout_ms", "must be positive".into()));
        }
        Ok(())
    }
}
