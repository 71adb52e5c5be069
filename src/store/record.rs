//! The preference record as stored in a Redis HASH, and its decoding.
//!
//! Field names are those of the original system (seed 000) so its data stays readable; fields
//! it did not have (`stance`, `persona_message_id`) are optional when decoding.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::error::StoreError;
pub use crate::model::{
    HistoryEntry, InheritedView, Preference, Provenance, Reinforcement, ScoredPreference, Stance,
};

/// Hash field names. One place, so the Lua scripts, queries and decoder agree.
pub mod field {
    pub const ID: &str = "id";
    pub const PERSONA_ID: &str = "persona_id";
    pub const NAME: &str = "name";
    pub const OPINION: &str = "opinion";
    pub const CATEGORY: &str = "category";
    pub const STRENGTH: &str = "strength";
    pub const STANCE: &str = "stance";
    pub const STANCE_AT: &str = "stance_at";
    pub const TRIGGERING_USER_ID: &str = "triggering_user_id";
    pub const TRIGGERING_MESSAGE_ID: &str = "triggering_message_id";
    pub const PERSONA_MESSAGE_ID: &str = "persona_message_id";
    pub const SOURCE_PLATFORM: &str = "source_platform";
    pub const SOURCE_CHANNEL_ID: &str = "source_channel_id";
    pub const RELATED_USER_IDS: &str = "related_user_ids";
    pub const RELATED_USER_IDS_INDEX: &str = "related_user_ids_index";
    pub const RELATED_KG_UUIDS: &str = "related_kg_uuids";
    pub const EVIDENCE_USER_IDS: &str = "evidence_user_ids";
    pub const EVOLUTION_HISTORY: &str = "evolution_history";
    pub const EMBEDDING: &str = "embedding";
    pub const ACTIVE: &str = "active";
    pub const CREATED_AT: &str = "created_at";
    pub const LAST_REINFORCED: &str = "last_reinforced";
    pub const REINFORCEMENT_COUNT: &str = "reinforcement_count";
    pub const REINFORCEMENTS: &str = "reinforcements";
    pub const EVIDENCE_USERS_DROPPED: &str = "evidence_users_dropped";
    pub const HISTORY_ENTRIES_DROPPED: &str = "history_entries_dropped";
    pub const VERSION: &str = "version";
    pub const INHERITED_FROM: &str = "inherited_from";
    /// "1" when an administrator wrote the current version (`Preference::curated`).
    pub const CURATED: &str = "curated";
    /// The preference's timeline (`model::timeline`): the voicings since `baseline`, JSON.
    pub const VOICINGS: &str = "voicings";
    /// Where the timeline starts (`model::timeline::Baseline`), JSON; empty when the voicings
    /// are the preference's whole past.
    pub const BASELINE: &str = "baseline";
    /// When a curation last fixed the preference's past (its voicings start from the record as
    /// that curation left it).
    pub const VOICED_FROM: &str = "voiced_from";
    /// Counts every write, so a replay written from an older read is refused.
    pub const REV: &str = "rev";

    /// Everything but the embedding: what searches RETURN.
    pub const ALL_BUT_EMBEDDING: [&str; 28] = [
        ID,
        PERSONA_ID,
        NAME,
        OPINION,
        CATEGORY,
        STRENGTH,
        STANCE,
        STANCE_AT,
        TRIGGERING_USER_ID,
        TRIGGERING_MESSAGE_ID,
        PERSONA_MESSAGE_ID,
        SOURCE_PLATFORM,
        SOURCE_CHANNEL_ID,
        RELATED_USER_IDS,
        RELATED_USER_IDS_INDEX,
        RELATED_KG_UUIDS,
        EVIDENCE_USER_IDS,
        EVOLUTION_HISTORY,
        ACTIVE,
        CREATED_AT,
        LAST_REINFORCED,
        REINFORCEMENT_COUNT,
        REINFORCEMENTS,
        EVIDENCE_USERS_DROPPED,
        HISTORY_ENTRIES_DROPPED,
        VERSION,
        INHERITED_FROM,
        CURATED,
    ];
}

/// What a caller supplies to add a preference; the store mints id and timestamps.
#[derive(Debug, Clone)]
pub struct NewPreference {
    pub persona_id: String,
    pub name: String,
    pub opinion: String,
    pub category: String,
    pub stance: Option<Stance>,
    /// When the persona expressed this stance (RFC 3339; the message timestamp). `None` means
    /// now. Lets a late, older contradiction be recognised as stale.
    pub stance_at: Option<String>,
    /// `None` means the configured default strength.
    pub strength: Option<f64>,
    pub provenance: Provenance,
    pub related_user_ids: Vec<String>,
    pub related_kg_uuids: Vec<String>,
    pub embedding: Vec<f32>,
    /// The base persona's view this preference takes over (the persona voiced the same topic).
    pub inherited_from: Option<InheritedView>,
}

impl Preference {
    /// Decodes a HASH (from HGETALL or a search's RETURN list). Missing optional fields take
    /// their defaults so records written by the original system decode.
    pub fn from_fields(fields: &HashMap<String, String>) -> Result<Preference, StoreError> {
        let text = |name: &str| fields.get(name).cloned().unwrap_or_default();
        let id = text(field::ID);
        if id.is_empty() {
            return Err(StoreError::UnexpectedReply(
                "preference hash without an id field".into(),
            ));
        }
        let json_list = |name: &str| -> Vec<String> {
            fields
                .get(name)
                .and_then(|raw| serde_json::from_str::<Vec<String>>(raw).ok())
                .unwrap_or_default()
        };
        let evolution_history = fields
            .get(field::EVOLUTION_HISTORY)
            .filter(|raw| !raw.is_empty())
            .map(|raw| serde_json::from_str::<Vec<HistoryEntry>>(raw))
            .transpose()
            .map_err(|error| {
                StoreError::UnexpectedReply(format!("preference {id}: evolution_history: {error}"))
            })?
            .unwrap_or_default();
        let reinforcements = fields
            .get(field::REINFORCEMENTS)
            .filter(|raw| !raw.is_empty() && raw.as_str() != "{}")
            .map(|raw| serde_json::from_str::<Vec<Reinforcement>>(raw))
            .transpose()
            .map_err(|error| {
                StoreError::UnexpectedReply(format!("preference {id}: reinforcements: {error}"))
            })?
            .unwrap_or_default();
        let history_entries_dropped: u64 = fields
            .get(field::HISTORY_ENTRIES_DROPPED)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let history_length = evolution_history.len() as u64;
        Ok(Preference {
            persona_id: text(field::PERSONA_ID),
            name: text(field::NAME),
            opinion: text(field::OPINION),
            category: text(field::CATEGORY),
            strength: fields
                .get(field::STRENGTH)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0.0),
            stance: fields.get(field::STANCE).and_then(|s| Stance::parse(s)),
            stance_at: text(field::STANCE_AT),
            provenance: Provenance {
                triggering_user_id: text(field::TRIGGERING_USER_ID),
                triggering_message_id: text(field::TRIGGERING_MESSAGE_ID),
                persona_message_id: text(field::PERSONA_MESSAGE_ID),
                source_platform: text(field::SOURCE_PLATFORM),
                source_channel_id: text(field::SOURCE_CHANNEL_ID),
            },
            related_user_ids: json_list(field::RELATED_USER_IDS),
            related_kg_uuids: json_list(field::RELATED_KG_UUIDS),
            evidence_user_ids: json_list(field::EVIDENCE_USER_IDS),
            evidence_users_dropped: fields
                .get(field::EVIDENCE_USERS_DROPPED)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            evolution_history,
            history_entries_dropped,
            // Records from before versions were kept: one version per history entry.
            version: fields
                .get(field::VERSION)
                .and_then(|n| n.parse().ok())
                .unwrap_or(1 + history_length + history_entries_dropped),
            inherited_from: text(field::INHERITED_FROM),
            curated: fields.get(field::CURATED).is_some_and(|v| v == "1"),
            decayed_strength: None,
            // The original system wrote "1"/"0"; accept "true" too.
            active: matches!(
                fields.get(field::ACTIVE).map(String::as_str),
                Some("1") | Some("true")
            ),
            created_at: text(field::CREATED_AT),
            last_reinforced: text(field::LAST_REINFORCED),
            reinforcement_count: fields
                .get(field::REINFORCEMENT_COUNT)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            reinforcements,
            id,
        })
    }
}

/// What a persona's vector set keeps beside each active preference's vector (`VSETATTR`,
/// written by the scripts' `sync`): everything injection ranks and renders and ingest decides
/// by, so neither reads the hash. Short names: this is stored once per preference.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct VectorAttributes {
    /// Topic.
    #[serde(default)]
    pub n: String,
    /// Opinion.
    #[serde(default)]
    pub o: String,
    /// Category.
    #[serde(default)]
    pub c: String,
    /// Strength: the record's own text of it (exact; `scripts/record.lua`), or a number
    /// (elements written before 2026-11-27).
    #[serde(default, deserialize_with = "number_or_text")]
    pub s: f64,
    /// Stance ("for", "against" or "").
    #[serde(default)]
    pub st: String,
    /// When the stance was expressed.
    #[serde(default)]
    pub sa: String,
    /// Related user ids, comma-separated (ids may not hold a comma).
    #[serde(default)]
    pub u: String,
    /// When the persona last voiced it (`last_reinforced`): what decay counts from. Left out
    /// while it is `sa` (not reinforced since the stance was voiced).
    #[serde(default)]
    pub lr: Option<String>,
    /// Reinforcements of the current version (`reinforcement_count`).
    #[serde(default)]
    pub rc: u64,
    /// An administrator wrote the current version (`curated`).
    #[serde(default)]
    pub cu: bool,
}

/// A JSON number, or a string holding one (an unreadable string reads as 0, as a missing
/// strength does). A visitor, not an untagged enum: that buffers every value first, which was
/// a third of an injection hit's decoding.
fn number_or_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    struct NumberOrText;
    impl serde::de::Visitor<'_> for NumberOrText {
        type Value = f64;
        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("a number, or a string holding one")
        }
        fn visit_f64<E>(self, value: f64) -> Result<f64, E> {
            Ok(value)
        }
        fn visit_i64<E>(self, value: i64) -> Result<f64, E> {
            Ok(value as f64)
        }
        fn visit_u64<E>(self, value: u64) -> Result<f64, E> {
            Ok(value as f64)
        }
        fn visit_str<E>(self, text: &str) -> Result<f64, E> {
            Ok(text.trim().parse().unwrap_or(0.0))
        }
    }
    deserializer.deserialize_any(NumberOrText)
}

impl VectorAttributes {
    /// Empty text (an element without attributes) decodes to the defaults.
    pub fn parse(text: &str) -> Result<VectorAttributes, StoreError> {
        VectorAttributes::parse_bytes(text.as_bytes())
    }

    /// [`VectorAttributes::parse`] from the bytes of a reply (no copy into a String first).
    pub fn parse_bytes(bytes: &[u8]) -> Result<VectorAttributes, StoreError> {
        if bytes.is_empty() {
            return Ok(VectorAttributes::default());
        }
        serde_json::from_slice(bytes)
            .map_err(|error| StoreError::UnexpectedReply(format!("vector attributes: {error}")))
    }

    /// A projection of the preference: the fields above, `active`, and defaults elsewhere.
    /// Fit for ranking, rendering and deciding only.
    pub fn into_preference(self, id: String, persona_id: &str) -> Preference {
        Preference {
            id,
            persona_id: persona_id.to_string(),
            name: self.n,
            opinion: self.o,
            category: self.c,
            strength: self.s,
            stance: Stance::parse(&self.st),
            last_reinforced: self.lr.unwrap_or_else(|| self.sa.clone()),
            stance_at: self.sa,
            provenance: Provenance::default(),
            related_user_ids: self
                .u
                .split(',')
                .filter(|user| !user.is_empty())
                .map(str::to_string)
                .collect(),
            related_kg_uuids: Vec::new(),
            evidence_user_ids: Vec::new(),
            evidence_users_dropped: 0,
            evolution_history: Vec::new(),
            history_entries_dropped: 0,
            version: 0,
            inherited_from: String::new(),
            curated: self.cu,
            decayed_strength: None,
            active: true,
            created_at: String::new(),
            reinforcement_count: self.rc,
            reinforcements: Vec::new(),
        }
    }
}

/// Counts over one persona's preferences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreferenceStats {
    pub persona_id: String,
    pub total: u64,
    pub active: u64,
    pub retracted: u64,
    /// Active preferences per category.
    pub by_category: std::collections::BTreeMap<String, u64>,
}

/// Why a preference was chosen for injection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum MatchReason {
    /// Close to the query in meaning.
    Semantic,
    /// About a user who is in the conversation.
    User(String),
    /// One of the persona's strongest preferences, always included when asked for.
    Resident,
}

impl From<MatchReason> for String {
    fn from(reason: MatchReason) -> String {
        match reason {
            MatchReason::Semantic => "semantic".into(),
            MatchReason::User(id) => format!("user:{id}"),
            MatchReason::Resident => "resident".into(),
        }
    }
}

impl TryFrom<String> for MatchReason {
    type Error = String;
    fn try_from(text: String) -> Result<MatchReason, String> {
        match text.as_str() {
            "semantic" => Ok(MatchReason::Semantic),
            "resident" => Ok(MatchReason::Resident),
            other => other
                .strip_prefix("user:")
                .map(|id| MatchReason::User(id.to_string()))
                .ok_or_else(|| format!("unknown match reason {other:?}")),
        }
    }
}

impl std::fmt::Display for MatchReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from(self.clone()))
    }
}

/// One preference selected for a system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectedPreference {
    pub id: String,
    pub name: String,
    pub opinion: String,
    pub category: String,
    pub strength: f64,
    /// Cosine similarity to the query, clamped to [0, 1], raised to the user floor for
    /// preferences about a present user.
    pub relevance: f64,
    /// What the ranking sorted by: relevance x decayed strength.
    pub score: f64,
    pub matched_by: Vec<MatchReason>,
    /// Strength after decay since the persona last voiced it (equal to `strength` without
    /// decay).
    #[serde(default)]
    pub decayed_strength: f64,
    /// The base persona this view comes from; absent for the persona's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited_from: Option<String>,
}

/// Options of [`super::PreferenceStore::get_preferences_for_injection`].
#[derive(Debug, Clone)]
pub struct InjectionQuery<'a> {
    pub persona_id: &'a str,
    pub query_embedding: &'a [f32],
    pub max_count: usize,
    pub max_chars: usize,
    pub active_user_ids: &'a [String],
}

/// A change of mind, for [`super::PreferenceStore::evolve_preference`].
#[derive(Debug, Clone)]
pub struct Evolution<'a> {
    pub new_opinion: &'a str,
    pub new_embedding: &'a [f32],
    pub reason: &'a str,
    /// The new stance; `None` keeps the stored one.
    pub new_stance: Option<Stance>,
    /// When the new opinion was expressed (RFC 3339); `None` means now.
    pub expressed_at: Option<&'a str>,
    /// The user whose conversation changed the persona's mind, recorded as evidence.
    pub evidence_user_id: Option<&'a str>,
}

/// What erasing a user changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PurgeReport {
    pub persona_id: String,
    /// What the user id was replaced with.
    pub pseudonym: String,
    /// Preferences whose related users, evidence or provenance named the user.
    pub rewritten: Vec<String>,
    /// Preferences retracted because that user's conversations were their only evidence.
    pub retracted: Vec<String>,
}

/// Effect of a reinforce, evolve or retract; `None` from the store means not found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReinforceOutcome {
    pub id: String,
    pub name: String,
    pub strength: f64,
    pub reinforcement_count: u64,
    /// False when the idempotency key had been applied before and nothing changed.
    pub applied: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvolveOutcome {
    pub id: String,
    pub name: String,
    pub new_opinion: String,
    pub strength: f64,
    pub evolutions: u64,
    pub applied: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetractOutcome {
    pub id: String,
    pub name: String,
    pub active: bool,
}

/// Result of an add under an idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddOutcome {
    pub preference: Preference,
    /// False when the key had been applied before; `preference` is then the one it created.
    pub applied: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector set leaves out what holds its default, and the last voicing while it is the
    /// stance's own: the projection reads them back as the record holds them.
    #[test]
    fn attributes_left_out_read_as_their_defaults() {
        let fresh = VectorAttributes::parse(
            r#"{"n":"tea","o":"I love tea.","c":"aesthetic","s":0.8,"st":"for","sa":"2026-11-20T09:09:00Z"}"#,
        )
        .unwrap()
        .into_preference("p1".into(), "ada");
        assert_eq!(fresh.last_reinforced, "2026-11-20T09:09:00Z");
        assert_eq!(fresh.reinforcement_count, 0);
        assert!(!fresh.curated);
        assert!(fresh.related_user_ids.is_empty());

        let reinforced = VectorAttributes::parse_bytes(
            br#"{"n":"tea","s":0.8,"sa":"2026-11-20T09:09:00Z","lr":"2026-11-25T10:00:00Z","rc":2,"cu":true,"u":"sam,kim"}"#,
        )
        .unwrap()
        .into_preference("p1".into(), "ada");
        assert_eq!(reinforced.last_reinforced, "2026-11-25T10:00:00Z");
        assert_eq!(reinforced.stance_at, "2026-11-20T09:09:00Z");
        assert_eq!(reinforced.reinforcement_count, 2);
        assert!(reinforced.curated);
        assert_eq!(reinforced.related_user_ids, vec!["sam", "kim"]);
    }

    /// The strength is the record's own text (exact to the last digit); elements written
    /// before held a number, and both read.
    #[test]
    fn a_strength_reads_from_its_text_or_a_number() {
        let strength = |json: &str| VectorAttributes::parse(json).unwrap().s;
        // 17 digits: a JSON number here would have carried 14.
        assert_eq!(strength(r#"{"s":"0.30000000000000004"}"#), 0.1 + 0.2);
        assert_eq!(strength(r#"{"s":0.8}"#), 0.8);
        assert_eq!(strength(r#"{"s":1}"#), 1.0);
        assert_eq!(strength(r#"{"s":"not a number"}"#), 0.0);
        assert_eq!(strength(r#"{"n":"tea"}"#), 0.0);
    }
}
