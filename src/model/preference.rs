//! A preference as the domain knows it: the persona's stance on a topic, where it came from,
//! its versions and reinforcements. No storage here: `store::record` encodes these in Redis
//! hashes, `model::timeline` derives them from what the persona said and when.

use serde::{Deserialize, Serialize};

/// Whether the persona is for or against the thing the preference is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stance {
    For,
    Against,
}

impl Stance {
    pub fn as_str(self) -> &'static str {
        match self {
            Stance::For => "for",
            Stance::Against => "against",
        }
    }

    pub fn parse(text: &str) -> Option<Stance> {
        match text {
            "for" => Some(Stance::For),
            "against" => Some(Stance::Against),
            _ => None,
        }
    }
}

/// Where a preference came from: the conversation turn that made the persona say it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub triggering_user_id: String,
    pub triggering_message_id: String,
    /// The persona's own message the opinion was mined from (empty for manual adds).
    #[serde(default)]
    pub persona_message_id: String,
    pub source_platform: String,
    pub source_channel_id: String,
}

/// A base persona's view on a topic, as the persona's own new preference takes it over: the
/// same stance (the persona now voices it itself) or the opposite (the persona overrides it;
/// the base's view becomes version 1 of the new preference's history).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InheritedView {
    pub persona_id: String,
    pub preference_id: String,
    pub opinion: String,
    pub stance: Option<Stance>,
    pub strength: f64,
}

/// One entry of a preference's `evolution_history`: a change of mind, a retraction, a
/// restore, a consolidation or an override of a base's view. Each entry keeps the version it
/// replaced (opinion, stance, strength, whether active), so that version can be restored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// `"evolution"`, `"retraction"`, `"restore"`, `"consolidation"` or `"override"`; absent
    /// in entries written by the original system, which logged only evolutions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The version this entry replaced (versions count from 1); absent in entries written
    /// before versions were kept, which are numbered by position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_opinion: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_stance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_strength: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_active: Option<bool>,
    /// How often the version it replaced was voiced again after it was first voiced: its
    /// reinforcements, which count towards it and not towards the version that followed.
    /// Absent in entries written before versions kept their own count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_reinforcement_count: Option<u64>,
    /// A restore: the version it brought back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<u64>,
    /// A consolidation: the near-duplicate merged into this preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<String>,
    /// A consolidation: the preference this one was merged into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_into: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_opinion: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(default)]
    pub reason: String,
}

/// One reinforcement and where it came from (the turn that made the persona say it again).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reinforcement {
    #[serde(default)]
    pub timestamp: String,
    /// Empty fields for a manual reinforcement (through the service).
    #[serde(flatten)]
    pub provenance: Provenance,
}

/// A stored preference, decoded, without its embedding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preference {
    pub id: String,
    pub persona_id: String,
    pub name: String,
    pub opinion: String,
    pub category: String,
    pub strength: f64,
    pub stance: Option<Stance>,
    /// When the current stance was expressed (RFC 3339); empty for records of the original system.
    #[serde(default)]
    pub stance_at: String,
    #[serde(flatten)]
    pub provenance: Provenance,
    pub related_user_ids: Vec<String>,
    pub related_kg_uuids: Vec<String>,
    /// Users whose conversations voiced or reinforced this preference (for erasure): the most
    /// recent `store.max_evidence_users`, oldest first.
    #[serde(default)]
    pub evidence_user_ids: Vec<String>,
    /// Evidence users left out of `evidence_user_ids` by its cap (so the preference has more
    /// evidence than the list shows).
    #[serde(default)]
    pub evidence_users_dropped: u64,
    /// Changes of mind and retractions, oldest first: the newest `store.max_evolution_history`.
    pub evolution_history: Vec<HistoryEntry>,
    /// Older history entries dropped by that cap.
    #[serde(default)]
    pub history_entries_dropped: u64,
    /// The current version: 1 for a new preference, one more with each history entry.
    #[serde(default)]
    pub version: u64,
    /// `<base persona>/<preference id>` when the persona voiced a view its base holds (the same
    /// or the opposite stance): this preference now speaks for it on that topic.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub inherited_from: String,
    /// An administrator wrote the current version (added, reinforced, changed or restored it
    /// through the service): it counts as confirmed for injection (`inject.min_evidence`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub curated: bool,
    /// Strength after decay since the persona last voiced it (`store.strength_half_life_days`),
    /// computed when read; absent where nothing computed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decayed_strength: Option<f64>,
    pub active: bool,
    /// When the record was made (the store's clock).
    pub created_at: String,
    /// When the persona last voiced the current version (the message's time for what ingest
    /// read; the store's clock for a curation): what decay counts from.
    pub last_reinforced: String,
    /// How often the current version was voiced again after it was first voiced. A change of
    /// mind starts the count again; the version it replaced keeps its own in the history
    /// (`old_reinforcement_count`).
    pub reinforcement_count: u64,
    /// The most recent reinforcements of any version, oldest first, each with its provenance;
    /// at most `store.max_reinforcement_log`.
    #[serde(default)]
    pub reinforcements: Vec<Reinforcement>,
}

impl Preference {
    /// A bare active preference of persona `ada` for the core rules' table tests: strength
    /// 0.5, no stance, no users, the id as topic and opinion.
    #[cfg(test)]
    pub(crate) fn for_tests(id: &str) -> Preference {
        Preference {
            id: id.into(),
            persona_id: "ada".into(),
            name: id.into(),
            opinion: id.into(),
            category: "culinary".into(),
            strength: 0.5,
            stance: None,
            stance_at: String::new(),
            provenance: Provenance::default(),
            related_user_ids: Vec::new(),
            related_kg_uuids: Vec::new(),
            evidence_user_ids: Vec::new(),
            evidence_users_dropped: 0,
            evolution_history: Vec::new(),
            history_entries_dropped: 0,
            version: 1,
            inherited_from: String::new(),
            curated: false,
            decayed_strength: None,
            active: true,
            created_at: String::new(),
            last_reinforced: String::new(),
            reinforcement_count: 0,
            reinforcements: Vec::new(),
        }
    }
}

/// A preference found by a vector search, with its cosine distance to the query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredPreference {
    #[serde(flatten)]
    pub preference: Preference,
    /// Cosine distance (1 − cosine similarity): 0 = same direction, 2 = opposite.
    pub score: f64,
}

impl ScoredPreference {
    /// `1 - distance`: cosine similarity.
    pub fn similarity(&self) -> f64 {
        1.0 - self.score
    }
}
