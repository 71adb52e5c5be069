//! Curation over time: restoring an earlier version of a preference, and consolidating a
//! persona's near-duplicate preferences (seed 004).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use redis::Value;
use serde::{Deserialize, Serialize};

use super::query::{self, VectorScore};
use super::record::VectorAttributes;
use super::{PreferenceStore, StoreError, WriteGuard, now_iso, script_reply, scripts, validate};
use crate::telemetry;

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestoreOutcome {
    pub id: String,
    pub name: String,
    /// The opinion now held (the restored version's).
    pub opinion: String,
    /// The preference's version after the restore (the restore is itself a new version).
    pub version: u64,
    pub active: bool,
    /// False when the preference was at that version already.
    pub applied: bool,
}

/// Near-duplicates of one preference, as found (and, unless a dry run, merged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Consolidation {
    /// The preference that stays: the strongest of the group.
    pub survivor_id: String,
    pub survivor_name: String,
    pub merged: Vec<MergedPreference>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedPreference {
    pub id: String,
    pub name: String,
    pub opinion: String,
    /// Cosine similarity of its topic to the survivor's.
    pub similarity: f64,
}

/// What `consolidate` found and did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsolidationReport {
    pub persona_id: String,
    pub threshold: f64,
    /// True for a dry run: nothing was written.
    pub dry_run: bool,
    /// Active preferences looked at.
    pub examined: usize,
    pub groups: Vec<Consolidation>,
    /// Pairs at or above the threshold left apart because their stances differ: a
    /// contradiction for a person to look at, not a duplicate.
    pub contradictions: Vec<(String, String)>,
}

/// Neighbours looked at per preference when looking for near-duplicates.
const NEIGHBOURS_PER_PREFERENCE: usize = 10;

impl PreferenceStore {
    /// Restores version `version` of a preference from its history (opinion, stance, strength,
    /// active). The restore is a new version, so it can be undone the same way. `None` when
    /// the preference is not found; an invalid-input error naming the kept versions when
    /// that one is not kept.
    pub async fn restore_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        version: u64,
        reason: &str,
        guard: WriteGuard<'_>,
    ) -> Result<Option<RestoreOutcome>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        if version == 0 {
            return Err(StoreError::invalid("version", "versions count from 1"));
        }
        let config = &self.settings.store;
        let reason = validate::truncate_chars(reason.trim(), config.max_opinion_chars);
        let mut invocation =
            self.invocation(&scripts::RESTORE, persona_id, preference_id, guard)?;
        invocation
            .arg(version)
            .arg(now_iso())
            .arg(reason.as_str())
            .arg(config.max_evolution_history);
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("restore", started.elapsed());
        if let Value::Array(items) = &reply
            && items.len() == 2
            && matches!(items[0], Value::Int(-1))
        {
            let kept = query::value_to_string(&items[1]);
            return Err(StoreError::invalid(
                "version",
                format!(
                    "version {version} is not kept (restorable: {})",
                    if kept.is_empty() {
                        "none"
                    } else {
                        kept.as_str()
                    }
                ),
            ));
        }
        let Some(items) = script_reply(reply, 6)? else {
            return Ok(None);
        };
        Ok(Some(RestoreOutcome {
            applied: items[0] == "1",
            id: items[1].clone(),
            name: items[2].clone(),
            opinion: items[3].clone(),
            version: items[4].parse().unwrap_or(0),
            active: items[5] == "1" || items[5] == "true",
        }))
    }

    /// Finds groups of near-duplicate active preferences of a persona (topics at or above
    /// `threshold`, the same stance or none) and, unless `dry_run`, merges each group into its
    /// strongest member (`scripts::MERGE`: counts, evidence, related users and reinforcements
    /// kept; the duplicates retracted with a history entry naming the survivor). Groups are
    /// formed greedily, strongest first: a preference joins the first survivor it is close to.
    /// Every active preference is searched once (`VSIM … ELE`, pipelined): proportional to the
    /// persona's size, an administrative command.
    pub async fn consolidate(
        &self,
        persona_id: &str,
        threshold: f64,
        dry_run: bool,
        guard: WriteGuard<'_>,
    ) -> Result<ConsolidationReport, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        if !(0.5..=1.0).contains(&threshold) {
            return Err(StoreError::invalid(
                "threshold",
                "must be within [0.5, 1]: below, unrelated topics would merge",
            ));
        }
        let keys = &self.settings.keys;
        let mut connection = self.connection.clone();
        // Active preferences, strongest first: the order survivors are chosen in.
        let ranked: Vec<String> = connection
            .query_for_key(
                &self.route_key(persona_id),
                redis::cmd("ZREVRANGE")
                    .arg(keys.strongest(persona_id))
                    .arg(0)
                    .arg(-1),
            )
            .await?;
        let mut neighbours: HashMap<String, Vec<query::VectorHit>> = HashMap::new();
        let mut attributes: HashMap<String, VectorAttributes> = HashMap::new();
        for chunk in ranked.chunks(200) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("VSIM")
                    .arg(keys.vectors(persona_id))
                    .arg("ELE")
                    .arg(id)
                    .arg("WITHSCORES")
                    .arg("WITHATTRIBS")
                    .arg("COUNT")
                    .arg(NEIGHBOURS_PER_PREFERENCE + 1);
            }
            let replies = connection
                .pipeline_for_key(&self.route_key(persona_id), &pipe)
                .await?;
            for (id, reply) in chunk.iter().zip(replies) {
                let hits = query::parse_vector_hits(reply, VectorScore::VsimScore)?;
                for hit in &hits {
                    attributes
                        .entry(hit.id.clone())
                        .or_insert_with(|| hit.attributes.clone());
                }
                neighbours.insert(id.clone(), hits);
            }
        }
        let mut absorbed: HashSet<String> = HashSet::new();
        let mut groups = Vec::new();
        let mut contradictions = Vec::new();
        for id in &ranked {
            if absorbed.contains(id) {
                continue;
            }
            let Some(own) = attributes.get(id) else {
                continue;
            };
            let mut merged = Vec::new();
            for hit in neighbours.get(id).into_iter().flatten() {
                if hit.id == *id || absorbed.contains(&hit.id) || hit.similarity < threshold {
                    continue;
                }
                let stances_agree = own.st.is_empty()
                    || hit.attributes.st.is_empty()
                    || own.st == hit.attributes.st;
                if !stances_agree {
                    let pair = if *id < hit.id {
                        (id.clone(), hit.id.clone())
                    } else {
                        (hit.id.clone(), id.clone())
                    };
                    if !contradictions.contains(&pair) {
                        contradictions.push(pair);
                    }
                    continue;
                }
                merged.push(MergedPreference {
                    id: hit.id.clone(),
                    name: hit.attributes.n.clone(),
                    opinion: hit.attributes.o.clone(),
                    similarity: hit.similarity,
                });
            }
            if merged.is_empty() {
                continue;
            }
            absorbed.insert(id.clone());
            absorbed.extend(merged.iter().map(|m| m.id.clone()));
            groups.push(Consolidation {
                survivor_id: id.clone(),
                survivor_name: own.n.clone(),
                merged,
            });
        }
        if !dry_run {
            let config = &self.settings.store;
            for group in &groups {
                for duplicate in &group.merged {
                    let mut invocation =
                        self.invocation(&scripts::MERGE, persona_id, &group.survivor_id, guard)?;
                    invocation
                        .key(keys.preference(persona_id, &duplicate.id))
                        .arg(now_iso())
                        .arg(config.max_evolution_history)
                        .arg(config.max_evidence_users)
                        .arg(config.max_reinforcement_log);
                    let reply: Value = self.write(invocation, persona_id).await?;
                    script_reply(reply, 4)?;
                }
            }
        }
        telemetry::store_op("consolidate", started.elapsed());
        Ok(ConsolidationReport {
            persona_id: persona_id.to_string(),
            threshold,
            dry_run,
            examined: ranked.len(),
            groups,
            contradictions,
        })
    }
}
