//! Request and reply bodies of the `persona-prefs` NATS services (JSON). Unknown fields are
//! refused so a misspelt option is an error, not a silent default. See docs/PROTOCOL.md.

use serde::{Deserialize, Serialize};

use super::render::Format;
use crate::store::{InjectedPreference, Preference, Stance};

fn default_max_count() -> usize {
    8
}
fn default_max_chars() -> usize {
    2000
}
fn default_limit() -> usize {
    50
}
fn default_top_k() -> usize {
    10
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectRequest {
    pub persona_id: String,
    /// The conversational context as text; embedded by the service (cached for repeats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// A precomputed embedding with the index's dimensions: the fast path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_embedding: Option<Vec<f32>>,
    #[serde(default)]
    pub active_user_ids: Vec<String>,
    #[serde(default = "default_max_count")]
    pub max_count: usize,
    #[serde(default = "default_max_chars")]
    pub max_chars: usize,
    #[serde(default)]
    pub format: Format,
    /// Also return the persona's strongest preferences regardless of the query.
    #[serde(default)]
    pub resident: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct InjectReply {
    pub persona_id: String,
    /// Query results first (ranked), then resident ones (`matched_by: ["resident"]`).
    pub preferences: Vec<InjectedPreference>,
    pub rendered: String,
    pub took_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddRequest {
    pub persona_id: String,
    pub name: String,
    pub opinion: String,
    #[serde(default)]
    pub category: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stance: Option<Stance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strength: Option<f64>,
    #[serde(default)]
    pub triggering_user_id: String,
    #[serde(default)]
    pub triggering_message_id: String,
    #[serde(default)]
    pub source_platform: String,
    #[serde(default)]
    pub source_channel_id: String,
    #[serde(default)]
    pub related_user_ids: Vec<String>,
    #[serde(default)]
    pub related_kg_uuids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreferenceRef {
    pub persona_id: String,
    pub preference_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvolveRequest {
    pub persona_id: String,
    pub preference_id: String,
    pub new_opinion: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_stance: Option<Stance>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetractRequest {
    pub persona_id: String,
    pub preference_id: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    pub persona_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default)]
    pub include_retracted: bool,
    #[serde(default = "default_limit")]
    pub limit: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaRequest {
    pub persona_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    pub persona_id: String,
    pub query: String,
    #[serde(default = "default_top_k")]
    pub top_k: usize,
    #[serde(default)]
    pub include_retracted: bool,
    #[serde(default)]
    pub mode: SearchMode,
}

/// How `search` finds preferences.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Nearest topics to the query's embedding.
    #[default]
    Semantic,
    /// Words of the query in topics and opinions (BM25).
    Keyword,
    /// Both, blended: relevance = 0.7 × similarity + 0.3 × keyword score.
    Hybrid,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchHit {
    #[serde(flatten)]
    pub preference: Preference,
    /// Cosine distance.
    pub score: f64,
    pub similarity: f64,
    /// BM25 relative to the best keyword hit (0–1); keyword and hybrid modes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword: Option<f64>,
    /// What the hits are ordered by: similarity, keyword score, or their blend.
    pub relevance: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeUserRequest {
    pub persona_id: String,
    pub user_id: String,
    /// What replaces the id; a random `erased-…` pseudonym when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pseudonym: Option<String>,
}

/// The body of every error reply, beside the `Nats-Service-Error` headers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorReply {
    pub error: ErrorBody,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// HTTP-like status: 400, 404, 500, 503.
    pub code: u16,
    /// Stable machine-readable kind: `malformed`, `oversize`, `wrong_dims`, `invalid`,
    /// `reply_too_large`, `not_found`, `unavailable`, `internal`.
    pub kind: String,
    pub message: String,
}
