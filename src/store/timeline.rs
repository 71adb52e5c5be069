//! A preference's timeline in Redis (`model::timeline` holds the rules): read it with the
//! record, write what ingest replayed from it, and create a preference from its first voicing.
//! The one place the replay meets Redis.
//!
//! The timeline lives in the preference's own hash (`voicings`, `baseline`), written in the
//! same script as the fields replayed from it, so the two never disagree. A record without
//! voicings (the original system's, one this service wrote before timelines, or one a curation
//! wrote since: `voiced_from`) is where its timeline starts.

use std::time::Instant;

use redis::Value;

use super::element_record;
use super::query::{self, vector_to_bytes};
use super::record::field;
use super::{
    AddOutcome, InheritedView, Preference, PreferenceStore, Stance, StoreError, WriteGuard,
    format_float, now_iso, scripts, validate,
};
use crate::model::timeline::{
    self, Baseline, Change, Identity, Timeline, TimelineRules, Voiced, Voicing,
};
use crate::telemetry;
use crate::timestamp::Timestamp;

/// A preference's record and timeline as read, for a replay and its write.
#[derive(Debug, Clone)]
pub struct StoredTimeline {
    pub identity: Identity,
    pub timeline: Timeline,
    /// The record's revision when read ("" for a record without one): the write of a replay is
    /// refused if it moved meanwhile.
    pub revision: String,
    /// The whole record as read, so a write at this revision can be encoded here
    /// ([`element_record`]) instead of by Redis's one thread.
    record: std::collections::HashMap<String, String>,
}

impl PreferenceStore {
    /// The rules' numbers, from `store.*`.
    pub fn timeline_rules(&self) -> TimelineRules {
        let config = &self.settings.store;
        TimelineRules {
            reinforce_rate: config.reinforce_rate,
            evolved_strength: config.evolved_strength,
            max_reinforcement_log: config.max_reinforcement_log,
            max_evidence_users: config.max_evidence_users,
            max_evolution_history: config.max_evolution_history,
            max_voicings: config.max_voicings,
        }
    }

    /// `voicing` fit to be stored: its time in UTC, topic and opinion trimmed and cut to
    /// `store.max_name_chars` / `max_opinion_chars`, its category one of `store.categories`,
    /// its strength in 0..=1; refused when its ids break a limit.
    pub fn checked_voicing(&self, mut voicing: Voicing) -> Result<Voicing, StoreError> {
        let config = &self.settings.store;
        validate::provenance(&voicing.provenance)?;
        validate::related_ids(
            "related_user_ids",
            &voicing.related_user_ids,
            config.max_related_ids,
            validate::user_id,
        )?;
        validate::related_ids(
            "related_kg_uuids",
            &voicing.related_kg_uuids,
            config.max_related_ids,
            validate::short_id,
        )?;
        if voicing.strength.is_nan() {
            return Err(StoreError::invalid("strength", "is NaN"));
        }
        voicing.strength = voicing.strength.clamp(0.0, 1.0);
        voicing.at = voicing.at.to_utc();
        voicing.topic = validate::truncate_chars(voicing.topic.trim(), config.max_name_chars);
        voicing.opinion =
            validate::truncate_chars(voicing.opinion.trim(), config.max_opinion_chars);
        if voicing.topic.is_empty() {
            return Err(StoreError::invalid("name", "is empty"));
        }
        if voicing.opinion.is_empty() {
            return Err(StoreError::invalid("opinion", "is empty"));
        }
        voicing.category = self.coerce_category(&voicing.category);
        Ok(voicing)
    }

    /// The preference's identity and timeline; `None` when it does not exist (or belongs to
    /// another persona).
    pub async fn timeline(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<Option<StoredTimeline>, StoreError> {
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        let Some(fields) = self.record(persona_id, preference_id).await? else {
            return Ok(None);
        };
        let record = Preference::from_fields(&fields)?;
        if record.persona_id != persona_id {
            return Ok(None);
        }
        let unreadable = |what: &str, error: serde_json::Error| {
            StoreError::UnexpectedReply(format!("preference {preference_id}: {what}: {error}"))
        };
        let text = |name: &str| fields.get(name).map(String::as_str).unwrap_or("");
        let voicings: Vec<Voicing> = match text(field::VOICINGS) {
            "" => Vec::new(),
            raw => serde_json::from_str(raw).map_err(|e| unreadable("voicings", e))?,
        };
        let baseline = match text(field::BASELINE) {
            "" if voicings.is_empty() => Baseline {
                from: fixed_past_of(&record, text(field::VOICED_FROM)),
                state: Some(record.clone()),
                inherited: None,
            },
            "" => Baseline::default(),
            raw => serde_json::from_str(raw).map_err(|e| unreadable("baseline", e))?,
        };
        Ok(Some(StoredTimeline {
            identity: Identity {
                id: record.id.clone(),
                persona_id: record.persona_id.clone(),
                created_at: record.created_at.clone(),
            },
            timeline: Timeline { baseline, voicings },
            revision: text(field::REV).to_string(),
            record: fields,
        }))
    }

    /// Writes `change` (replayed from `stored`) under `guard`; `vector` is the new embedding
    /// when the change says the vector follows another voicing. `None` when the preference
    /// is gone; else whether it was applied (false: this effect was applied before).
    pub async fn write_voiced(
        &self,
        stored: &StoredTimeline,
        change: &Change,
        vector: Option<&[f32]>,
        guard: WriteGuard<'_>,
    ) -> Result<Option<bool>, StoreError> {
        let started = Instant::now();
        let persona_id = &stored.identity.persona_id;
        let mut fields = record_fields(&change.preference)?;
        fields.extend(timeline_fields(&change.timeline)?);
        if let Some(vector) = vector {
            validate::embedding(vector, self.settings.store.embedding_dims)?;
            fields.push((field::EMBEDDING, vector_to_bytes(vector)));
        }
        // An active record is encoded here: the script places it as it is when the record
        // there is still the one read (no hash, the same revision), and encodes it itself
        // otherwise.
        let written = change
            .preference
            .active
            .then(|| element_record::record_written_over(&stored.record, &fields))
            .flatten();
        let old_users = stored
            .record
            .get(field::RELATED_USER_IDS)
            .map_or("[]", String::as_str);
        let mut invocation =
            self.invocation(&scripts::APPLY, persona_id, &stored.identity.id, guard)?;
        invocation.arg(&stored.revision);
        element_arguments(&mut invocation, written);
        invocation.arg(old_users);
        for (name, value) in &fields {
            invocation.arg(*name).arg(value.as_slice());
        }
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("voice", started.elapsed());
        match reply {
            Value::Nil => Ok(None),
            Value::Array(items) if items.len() == 2 => Ok(Some(matches!(items[0], Value::Int(1)))),
            other => Err(StoreError::UnexpectedReply(format!(
                "apply script returned {other:?}"
            ))),
        }
    }

    /// Creates a preference from its first voicing (taking over a base persona's view when
    /// `inherited` is one), with `embedding` as its vector. Under a [`WriteGuard`] with an
    /// effect id, a repeat returns the preference the first call created instead of a twin.
    pub async fn add_voiced(
        &self,
        persona_id: &str,
        voicing: Voicing,
        inherited: Option<InheritedView>,
        embedding: &[f32],
        guard: WriteGuard<'_>,
    ) -> Result<AddOutcome, StoreError> {
        validate::persona_id(persona_id)?;
        validate::embedding(embedding, self.settings.store.embedding_dims)?;
        if let Some(base) = &inherited {
            validate::persona_id(&base.persona_id)?;
            validate::preference_id(&base.preference_id)?;
        }
        let voicing = self.checked_voicing(voicing)?;
        let identity = Identity {
            id: uuid::Uuid::new_v4().simple().to_string(),
            persona_id: persona_id.to_string(),
            created_at: now_iso(),
        };
        let empty = Timeline {
            baseline: Baseline {
                inherited,
                ..Baseline::default()
            },
            voicings: Vec::new(),
        };
        let Voiced::Changed(change) =
            timeline::voice(&identity, &empty, voicing, &self.timeline_rules())
        else {
            return Err(StoreError::UnexpectedReply(
                "a first voicing created no preference".into(),
            ));
        };
        let mut fields = record_fields(&change.preference)?;
        fields.extend(timeline_fields(&change.timeline)?);
        fields.push((field::EMBEDDING, vector_to_bytes(embedding)));
        fields.push((field::REV, b"1".to_vec()));
        self.run_add(change.preference, fields, guard).await
    }

    /// Runs the add script with a new record's `fields` (the id first).
    pub(super) async fn run_add(
        &self,
        preference: Preference,
        fields: Vec<(&'static str, Vec<u8>)>,
        guard: WriteGuard<'_>,
    ) -> Result<AddOutcome, StoreError> {
        let started = Instant::now();
        debug_assert_eq!(fields.first().map(|(name, _)| *name), Some(field::ID));
        let mut invocation =
            self.invocation(&scripts::ADD, &preference.persona_id, &preference.id, guard)?;
        invocation.arg(
            guard
                .message
                .map(|message| message.on_preference(&preference.id))
                .unwrap_or_default(),
        );
        // Encoded here, placed as it is by the script where no record is there yet.
        let record = preference
            .active
            .then(|| element_record::new_record(&fields))
            .flatten();
        element_arguments(&mut invocation, record);
        for (name, value) in &fields {
            invocation.arg(*name).arg(value.as_slice());
        }
        let reply: Value = self.write(invocation, &preference.persona_id).await?;
        let (applied, id) = match reply {
            Value::Array(items) if items.len() == 2 => (
                matches!(items[0], Value::Int(1)),
                query::value_to_string(&items[1]),
            ),
            other => {
                return Err(StoreError::UnexpectedReply(format!(
                    "add script returned {other:?}"
                )));
            }
        };
        telemetry::store_op("add", started.elapsed());
        if applied {
            return Ok(AddOutcome {
                preference,
                applied,
            });
        }
        let existing = self
            .get_preference(&preference.persona_id, &id)
            .await?
            .ok_or_else(|| {
                StoreError::UnexpectedReply(format!(
                    "effect record points at preference {id}, which is gone"
                ))
            })?;
        Ok(AddOutcome {
            preference: existing,
            applied,
        })
    }

    pub(super) fn coerce_category(&self, category: &str) -> String {
        let lowered = category.trim().to_ascii_lowercase();
        if self.settings.store.categories.contains(&lowered) {
            lowered
        } else {
            self.settings.store.fallback_category.clone()
        }
    }
}

/// Where the past of a record without voicings is fixed: when a curation last wrote it, or
/// (a record from before timelines) the latest time it names for its stance.
fn fixed_past_of(record: &Preference, voiced_from: &str) -> Option<Timestamp> {
    if let Ok(at) = Timestamp::parse(voiced_from) {
        return Some(at);
    }
    [record.stance_at.as_str(), record.last_reinforced.as_str()]
        .iter()
        .filter_map(|text| Timestamp::parse(text).ok())
        .max()
}

/// The element's two arguments of `ADD` and `APPLY`: `record` as the service encodes it, its
/// whole attributes then injection's view, or "" both (none: the script encodes).
fn element_arguments(
    invocation: &mut redis::ScriptInvocation<'_>,
    record: Option<std::collections::HashMap<String, String>>,
) {
    match record.and_then(element_record::placeable_element) {
        Some(element) => invocation.arg(element.whole).arg(element.view),
        None => invocation.arg("").arg(""),
    };
}

/// The hash fields of a preference (all but its embedding and timeline), the id first.
pub(super) fn record_fields(
    preference: &Preference,
) -> Result<Vec<(&'static str, Vec<u8>)>, StoreError> {
    let json = |value: &Vec<String>| serde_json::to_vec(value).expect("strings serialise");
    let encode = |what: &str, value: Result<Vec<u8>, serde_json::Error>| {
        value.map_err(|e| StoreError::UnexpectedReply(format!("encoding {what}: {e}")))
    };
    let provenance = &preference.provenance;
    Ok(vec![
        (field::ID, preference.id.clone().into_bytes()),
        (
            field::PERSONA_ID,
            preference.persona_id.clone().into_bytes(),
        ),
        (field::NAME, preference.name.clone().into_bytes()),
        (field::OPINION, preference.opinion.clone().into_bytes()),
        (field::CATEGORY, preference.category.clone().into_bytes()),
        (
            field::STRENGTH,
            format_float(preference.strength).into_bytes(),
        ),
        (
            field::STANCE,
            preference
                .stance
                .map(Stance::as_str)
                .unwrap_or("")
                .as_bytes()
                .to_vec(),
        ),
        (field::STANCE_AT, preference.stance_at.clone().into_bytes()),
        (
            field::TRIGGERING_USER_ID,
            provenance.triggering_user_id.clone().into_bytes(),
        ),
        (
            field::TRIGGERING_MESSAGE_ID,
            provenance.triggering_message_id.clone().into_bytes(),
        ),
        (
            field::PERSONA_MESSAGE_ID,
            provenance.persona_message_id.clone().into_bytes(),
        ),
        (
            field::SOURCE_PLATFORM,
            provenance.source_platform.clone().into_bytes(),
        ),
        (
            field::SOURCE_CHANNEL_ID,
            provenance.source_channel_id.clone().into_bytes(),
        ),
        (field::RELATED_USER_IDS, json(&preference.related_user_ids)),
        (
            field::RELATED_USER_IDS_INDEX,
            preference.related_user_ids.join(",").into_bytes(),
        ),
        (field::RELATED_KG_UUIDS, json(&preference.related_kg_uuids)),
        (
            field::EVIDENCE_USER_IDS,
            json(&preference.evidence_user_ids),
        ),
        (
            field::EVIDENCE_USERS_DROPPED,
            preference.evidence_users_dropped.to_string().into_bytes(),
        ),
        (
            field::EVOLUTION_HISTORY,
            encode("history", serde_json::to_vec(&preference.evolution_history))?,
        ),
        (
            field::HISTORY_ENTRIES_DROPPED,
            preference.history_entries_dropped.to_string().into_bytes(),
        ),
        (field::VERSION, preference.version.to_string().into_bytes()),
        (
            field::INHERITED_FROM,
            preference.inherited_from.clone().into_bytes(),
        ),
        (
            field::CURATED,
            if preference.curated {
                b"1".to_vec()
            } else {
                b"0".to_vec()
            },
        ),
        (
            field::ACTIVE,
            if preference.active {
                b"1".to_vec()
            } else {
                b"0".to_vec()
            },
        ),
        (
            field::CREATED_AT,
            preference.created_at.clone().into_bytes(),
        ),
        (
            field::LAST_REINFORCED,
            preference.last_reinforced.clone().into_bytes(),
        ),
        (
            field::REINFORCEMENT_COUNT,
            preference.reinforcement_count.to_string().into_bytes(),
        ),
        (
            field::REINFORCEMENTS,
            encode(
                "reinforcements",
                serde_json::to_vec(&preference.reinforcements),
            )?,
        ),
    ])
}

/// The timeline's own fields: its voicings and, when there is one to keep, its baseline.
fn timeline_fields(timeline: &Timeline) -> Result<Vec<(&'static str, Vec<u8>)>, StoreError> {
    let encode = |what: &str, value: Result<Vec<u8>, serde_json::Error>| {
        value.map_err(|e| StoreError::UnexpectedReply(format!("encoding {what}: {e}")))
    };
    let baseline = if timeline.baseline.is_empty() {
        Vec::new()
    } else {
        encode("baseline", serde_json::to_vec(&timeline.baseline))?
    };
    Ok(vec![
        (
            field::VOICINGS,
            encode("voicings", serde_json::to_vec(&timeline.voicings))?,
        ),
        (field::BASELINE, baseline),
    ])
}
