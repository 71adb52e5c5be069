//! Request and reply bodies of the `persona-prefs` NATS services (JSON). Unknown fields are
//! refused so a misspelt option is an error, not a silent default. See docs/PROTOCOL.md.

use serde::{Deserialize, Serialize};

use super::render::Format;
use crate::store::{InjectedPreference, Preference, Stance};

/// Who may call an endpoint: the middle token of its subject, so a NATS permission on
/// `<prefix>.read.>`, `<prefix>.write.>` or `<prefix>.erase.>` grants exactly one role
/// (docs/PERMISSIONS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Injection and reading: prompt builders, the inspector.
    Read,
    /// Curation: add, reinforce, evolve, retract.
    Write,
    /// Erasure of a user's data.
    Erase,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Read, Role::Write, Role::Erase];

    pub fn token(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Erase => "erase",
        }
    }
}

/// Every endpoint of the service; its subject is `<serve.subject_prefix>.<role>.<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Inject,
    Add,
    Reinforce,
    Evolve,
    Retract,
    Get,
    List,
    Stats,
    Search,
    PurgeUser,
    Bases,
    SetBases,
    Restore,
    Consolidate,
    Personas,
    Check,
    PurgeUserEverywhere,
    DeletePersona,
}

impl Endpoint {
    /// In the order they are registered.
    pub const ALL: [Endpoint; 18] = [
        Endpoint::Inject,
        Endpoint::Add,
        Endpoint::Reinforce,
        Endpoint::Evolve,
        Endpoint::Retract,
        Endpoint::Get,
        Endpoint::List,
        Endpoint::Stats,
        Endpoint::Search,
        Endpoint::PurgeUser,
        Endpoint::Bases,
        Endpoint::SetBases,
        Endpoint::Restore,
        Endpoint::Consolidate,
        Endpoint::Personas,
        Endpoint::Check,
        Endpoint::PurgeUserEverywhere,
        Endpoint::DeletePersona,
    ];

    /// Every endpoint's name (the `endpoint` label of the request metrics).
    pub fn names() -> Vec<&'static str> {
        Endpoint::ALL
            .iter()
            .map(|endpoint| endpoint.name())
            .collect()
    }

    /// The last token of the endpoint's subject.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Inject => "inject",
            Endpoint::Add => "add",
            Endpoint::Reinforce => "reinforce",
            Endpoint::Evolve => "evolve",
            Endpoint::Retract => "retract",
            Endpoint::Get => "get",
            Endpoint::List => "list",
            Endpoint::Stats => "stats",
            Endpoint::Search => "search",
            Endpoint::PurgeUser => "purge_user",
            Endpoint::Bases => "bases",
            Endpoint::SetBases => "set_bases",
            Endpoint::Restore => "restore",
            Endpoint::Consolidate => "consolidate",
            Endpoint::Personas => "personas",
            Endpoint::Check => "check",
            Endpoint::PurgeUserEverywhere => "purge_user_everywhere",
            Endpoint::DeletePersona => "delete_persona",
        }
    }

    pub fn role(self) -> Role {
        match self {
            Endpoint::Inject
            | Endpoint::Get
            | Endpoint::List
            | Endpoint::Stats
            | Endpoint::Search
            | Endpoint::Bases
            | Endpoint::Personas
            | Endpoint::Check => Role::Read,
            Endpoint::Add
            | Endpoint::Reinforce
            | Endpoint::Evolve
            | Endpoint::Retract
            | Endpoint::SetBases
            | Endpoint::Restore
            | Endpoint::Consolidate => Role::Write,
            Endpoint::PurgeUser | Endpoint::PurgeUserEverywhere | Endpoint::DeletePersona => {
                Role::Erase
            }
        }
    }

    /// The endpoint named `name` ([`Endpoint::name`]).
    pub fn from_name(name: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether a request names one persona (every endpoint but `personas`, which lists them,
    /// and `purge_user_everywhere`, which walks them).
    pub fn touches_one_persona(self) -> bool {
        !matches!(self, Endpoint::Personas | Endpoint::PurgeUserEverywhere)
    }

    /// The subject a request is sent to, ending in the tokens that name what it touches:
    /// `<subject_prefix>.<role>.<name>.<tenant>.<persona>` (`persona.prefs.read.inject.default.ada`),
    /// or `<subject_prefix>.read.personas.<tenant>`, so that a NATS permission can hold a client
    /// to one persona (`….inject.default.ada`) or to a tenant's (`….inject.default.>`).
    pub fn subject(self, subject_prefix: &str, tenant: &str, persona_id: &str) -> String {
        if self.touches_one_persona() {
            format!(
                "{}.{tenant}.{persona_id}",
                self.role_subject(subject_prefix)
            )
        } else {
            format!("{}.{tenant}", self.role_subject(subject_prefix))
        }
    }

    /// What the service subscribes to: [`Endpoint::subject`] with a wildcard for the persona.
    pub fn subscription(self, subject_prefix: &str, tenant: &str) -> String {
        if self.touches_one_persona() {
            format!("{}.{tenant}.*", self.role_subject(subject_prefix))
        } else {
            format!("{}.{tenant}", self.role_subject(subject_prefix))
        }
    }

    /// The persona a request's subject names, when it is this endpoint's scoped subject.
    pub fn persona_in_subject<'a>(
        self,
        subject_prefix: &str,
        tenant: &str,
        subject: &'a str,
    ) -> Option<&'a str> {
        let scope = format!("{}.{tenant}.", self.role_subject(subject_prefix));
        subject
            .strip_prefix(scope.as_str())
            .filter(|persona| self.touches_one_persona() && !persona.contains('.'))
    }

    /// Whether the endpoint existed before personas were named in subjects, so is also
    /// answered at the older subjects while `serve.legacy_subjects` is on.
    pub fn has_legacy_subjects(self) -> bool {
        !matches!(
            self,
            Endpoint::PurgeUserEverywhere | Endpoint::DeletePersona
        )
    }

    /// `<subject_prefix>.<role>.<name>`: the subject of the release before personas were named
    /// in subjects, answered while `serve.legacy_subjects` is on (CHANGELOG.md).
    pub fn role_subject(self, subject_prefix: &str) -> String {
        format!("{subject_prefix}.{}.{}", self.role().token(), self.name())
    }

    /// `<subject_prefix>.<name>`: the subject before roles were split, answered while
    /// `serve.legacy_subjects` is on (CHANGELOG.md).
    pub fn legacy_subject(self, subject_prefix: &str) -> String {
        format!("{subject_prefix}.{}", self.name())
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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

/// A request about one persona, which it names in its body as well as in its subject: the
/// handler checks the two agree once the body is parsed (a client held to one persona's
/// subjects by NATS permissions must not reach another through the body).
pub trait NamesPersona {
    fn persona_id(&self) -> &str;
}

macro_rules! names_persona {
    ($($request:ty),* $(,)?) => {
        $(impl NamesPersona for $request {
            fn persona_id(&self) -> &str {
                &self.persona_id
            }
        })*
    };
}

names_persona!(
    InjectRequest,
    AddRequest,
    PreferenceRef,
    EvolveRequest,
    RetractRequest,
    SetBasesRequest,
    RestoreRequest,
    ConsolidateRequest,
    ListRequest,
    PersonaRequest,
    SearchRequest,
    PurgeUserRequest,
    DeletePersonaRequest,
    CheckRequest,
);

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectRequest {
    pub persona_id: String,
    /// The conversational context as text; embedded by the service (cached for repeats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// A precomputed embedding with the index's dimensions: the fast path. A JSON list of
    /// numbers, or the same floats as base64 of their little-endian bytes (a string), which
    /// skips parsing a few hundred JSON numbers.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "embedding_list_or_base64"
    )]
    pub query_embedding: Option<Vec<f32>>,
    #[serde(default)]
    pub active_user_ids: Vec<String>,
    #[serde(default = "default_max_count")]
    pub max_count: usize,
    #[serde(default = "default_max_chars")]
    pub max_chars: usize,
    #[serde(default)]
    pub format: Format,
    /// Also return the persona's strongest preferences regardless of the query; they count
    /// against `max_count` and `max_chars`.
    #[serde(default)]
    pub resident: bool,
    /// Say in the rendered block why each preference was chosen.
    #[serde(default)]
    pub explain: bool,
}

/// `query_embedding` as a JSON list of numbers or as base64 (standard alphabet, padded) of
/// little-endian f32 bytes.
fn embedding_list_or_base64<'de, D>(deserializer: D) -> Result<Option<Vec<f32>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Embedding;
    impl<'de> serde::de::Visitor<'de> for Embedding {
        type Value = Option<Vec<f32>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of numbers, or base64 of little-endian f32 bytes")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(value) = seq.next_element::<f32>()? {
                values.push(value);
            }
            Ok(Some(values))
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| E::custom(format!("query_embedding is not base64: {e}")))?;
            if bytes.len() % 4 != 0 {
                return Err(E::custom(format!(
                    "query_embedding is {} bytes, not a whole number of 4-byte floats",
                    bytes.len()
                )));
            }
            Ok(Some(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ))
        }
    }
    deserializer.deserialize_any(Embedding)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InjectReply {
    pub persona_id: String,
    /// Query results first (ranked), then resident ones (`matched_by: ["resident"]`).
    pub preferences: Vec<InjectedPreference>,
    pub rendered: String,
    /// Why the semantic pass did not run (a short or empty query); absent when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic_skipped: Option<String>,
    pub took_ms: f64,
}

/// A preference added by hand. `Default` leaves the provenance empty, as a curator's addition
/// (the CLI, the inspector) has no conversation behind it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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

/// `personas`: a page of the registry of personas, most recently active first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonasRequest {
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default)]
    pub offset: usize,
}

/// `set_bases`: the persona's base personas, nearest first (empty removes them).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetBasesRequest {
    pub persona_id: String,
    pub bases: Vec<String>,
}

/// `restore`: bring back an earlier version of a preference from its history.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    pub persona_id: String,
    pub preference_id: String,
    pub version: u64,
    #[serde(default)]
    pub reason: String,
}

/// `consolidate`: find near-duplicate active preferences; merge them only with `apply`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsolidateRequest {
    pub persona_id: String,
    /// Topic similarity at or above which two preferences are the same topic; the service's
    /// match threshold (what ingest decides "same topic" by) when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// Merge what was found. Without it, a dry run: the report only.
    #[serde(default)]
    pub apply: bool,
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

/// `purge_user_everywhere`: `purge_user` without a persona, one page of the registry of
/// personas per request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeUserEverywhereRequest {
    pub user_id: String,
    /// Empty (or absent) starts the erasure, recording it for every persona; a reply's
    /// `cursor` continues it. The number 0 is read as empty: cursors were numbers once.
    #[serde(default, deserialize_with = "walk_cursor")]
    pub cursor: String,
    /// Personas visited per request, at most (1..=1000).
    #[serde(default = "default_personas_per_page")]
    pub max_personas: usize,
}

fn default_personas_per_page() -> usize {
    100
}

/// A walk's cursor: a text as a reply gave it, or the number 0 (start) that earlier clients
/// send; any other number names no page of this walk.
fn walk_cursor<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Cursor {
        Text(String),
        Number(u64),
    }
    match Cursor::deserialize(deserializer)? {
        Cursor::Text(text) => Ok(text),
        Cursor::Number(0) => Ok(String::new()),
        Cursor::Number(other) => Err(serde::de::Error::custom(format!(
            "cursor {other} is not a cursor a reply gave (a text; empty or 0 to start)"
        ))),
    }
}

/// The reply to `purge_user_everywhere`: what this page changed, and where the next starts.
pub type PurgeUserEverywhereReply = crate::erasure::EverywhereReport;

/// `delete_persona`: every key of the persona, its stored events and its registry entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletePersonaRequest {
    pub persona_id: String,
    /// The persona id again: a deletion cannot be undone, so a client must mean this one.
    pub confirm: String,
}

/// `check`: what a draft persona message would do to memory, decided as ingest decides and
/// written nowhere.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    pub persona_id: String,
    /// The persona message about to go out.
    pub draft: String,
    /// The conversation before it, oldest first (context for the extractor: "that film" in
    /// the draft takes its name from it; nothing in it is checked).
    #[serde(default)]
    pub conversation: Vec<CheckTurn>,
}

/// One earlier turn of the conversation a draft answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckTurn {
    pub role: crate::ingest::event::Role,
    #[serde(default)]
    pub user_id: String,
    pub content: String,
}

/// What the draft would do: preferences it contradicts, preferences it restates, opinions that
/// would be new.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckReply {
    pub persona_id: String,
    pub contradicts: Vec<CheckFinding>,
    pub restates: Vec<CheckFinding>,
    pub new: Vec<DraftOpinion>,
    pub took_ms: f64,
}

/// A stored preference the draft's opinion meets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckFinding {
    pub preference_id: String,
    pub name: String,
    pub stored_opinion: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_stance: Option<Stance>,
    /// The base persona the stored view is from; absent for the persona's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited_from: Option<String>,
    /// Cosine similarity of the two topics.
    pub similarity: f64,
    pub draft: DraftOpinion,
}

/// An opinion read in the draft.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DraftOpinion {
    pub topic: String,
    pub opinion: String,
    pub stance: Stance,
    /// The words of the draft that say it.
    pub evidence: String,
}

/// The body of every error reply, beside the `Nats-Service-Error` headers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorReply {
    pub error: ErrorBody,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// HTTP-like status: 400, 404, 500, 503 ([`ErrorKind::status`]).
    pub code: u16,
    pub kind: ErrorKind,
    pub message: String,
}

/// What went wrong with a request, stable and machine-readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Not JSON, not UTF-8, an unknown field, or a combination of fields that cannot be.
    Malformed,
    /// Over `nats.max_payload_bytes`.
    Oversize,
    /// An embedding of the wrong dimensions.
    WrongDims,
    /// A value breaks a limit or a format rule.
    Invalid,
    /// The reply would be over what the NATS server carries.
    ReplyTooLarge,
    NotFound,
    /// Try again later (Redis or the embedder unreachable, the persona busy).
    Unavailable,
    Internal,
}

impl ErrorKind {
    /// The HTTP-like status sent in `Nats-Service-Error-Code`.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::Malformed
            | ErrorKind::Oversize
            | ErrorKind::WrongDims
            | ErrorKind::Invalid
            | ErrorKind::ReplyTooLarge => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_value(self)
            .ok()
            .and_then(|value| value.as_str().map(str::to_string))
            .unwrap_or_default();
        f.write_str(&text)
    }
}

/// The reply to `purge_user`: what changed in the memory, and in the streams.
pub type PurgeUserReply = crate::erasure::ErasureReport;
