//! An opinion the persona voiced, as an extractor reads it from one of its messages.

use serde::{Deserialize, Serialize};

use super::Stance;

/// One opinion the persona expressed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractedOpinion {
    /// What the opinion is about, short ("green tea", "rainy days"): the matching key.
    pub name: String,
    /// The opinion in the first person, readable on its own.
    pub opinion: String,
    pub category: String,
    pub stance: Stance,
    pub strength: f64,
    #[serde(default)]
    pub related_user_ids: Vec<String>,
    /// A verbatim quote of the persona's message.
    pub evidence: String,
    /// What found it, for the debug logs and `evaluate-extraction --explain`: the rules
    /// extractor's rule (`liking_verb`; `list_of_likings > liking_verb` when a reader
    /// re-read part of a clause), or the extractor (`llm`, `learned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_by: Option<String>,
}
