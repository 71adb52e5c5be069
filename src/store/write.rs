//! Writes: add, reinforce, evolve and retract, each one Lua script under a [`WriteGuard`]
//! (effect id and lock fencing) that keeps the persona's structures in step.

use std::time::Instant;

use redis::Value;

use super::query::{self, vector_to_bytes};
use super::record::field;
use super::{
    AddOutcome, Evolution, EvolveOutcome, HistoryEntry, LockToken, NewPreference, Preference,
    PreferenceStore, Provenance, ReinforceOutcome, Reinforcement, RetractOutcome, Stance,
    StoreError, WriteGuard, format_float, now_iso, script_error, script_reply, scripts, validate,
};
use crate::telemetry;

impl PreferenceStore {
    /// Adds a preference and returns it (without the embedding).
    pub async fn add_preference(&self, new: NewPreference) -> Result<Preference, StoreError> {
        Ok(self
            .add_preference_guarded(new, WriteGuard::default())
            .await?
            .preference)
    }

    /// Adds a preference under a [`WriteGuard`]: with an effect id, a repeat returns the
    /// preference the first call created instead of a twin.
    pub async fn add_preference_guarded(
        &self,
        new: NewPreference,
        guard: WriteGuard<'_>,
    ) -> Result<AddOutcome, StoreError> {
        let started = Instant::now();
        let config = &self.settings.store;
        validate::persona_id(&new.persona_id)?;
        validate::embedding(&new.embedding, config.embedding_dims)?;
        validate::related_ids(
            "related_user_ids",
            &new.related_user_ids,
            config.max_related_ids,
            validate::user_id,
        )?;
        validate::related_ids(
            "related_kg_uuids",
            &new.related_kg_uuids,
            config.max_related_ids,
            validate::short_id,
        )?;
        validate::provenance(&new.provenance)?;
        let strength = match new.strength {
            None => config.default_strength,
            Some(value) if value.is_nan() => return Err(StoreError::invalid("strength", "is NaN")),
            Some(value) => value.clamp(0.0, 1.0),
        };
        let name = validate::truncate_chars(new.name.trim(), config.max_name_chars);
        let opinion = validate::truncate_chars(new.opinion.trim(), config.max_opinion_chars);
        if name.is_empty() {
            return Err(StoreError::invalid("name", "is empty"));
        }
        if opinion.is_empty() {
            return Err(StoreError::invalid("opinion", "is empty"));
        }
        let category = self.coerce_category(&new.category);
        let now = now_iso();
        let preference = Preference {
            id: uuid::Uuid::new_v4().simple().to_string(),
            persona_id: new.persona_id,
            name,
            opinion,
            category,
            strength,
            stance: new.stance,
            stance_at: new.stance_at.unwrap_or_else(|| now.clone()),
            provenance: new.provenance,
            related_user_ids: new.related_user_ids,
            related_kg_uuids: new.related_kg_uuids,
            evidence_user_ids: Vec::new(),
            evidence_users_dropped: 0,
            evolution_history: Vec::new(),
            history_entries_dropped: 0,
            version: 1,
            inherited_from: String::new(),
            decayed_strength: None,
            active: true,
            created_at: now.clone(),
            last_reinforced: now.clone(),
            reinforcement_count: 0,
            reinforcements: Vec::new(),
        };
        let mut preference = preference;
        if let Some(base) = &new.inherited_from {
            validate::persona_id(&base.persona_id)?;
            validate::preference_id(&base.preference_id)?;
            preference.inherited_from = format!("{}/{}", base.persona_id, base.preference_id);
            if base.stance.is_some() && base.stance != preference.stance {
                preference.evolution_history.push(HistoryEntry {
                    action: Some("override".into()),
                    version: Some(1),
                    old_opinion: Some(base.opinion.clone()),
                    old_stance: Some(base.stance.map(Stance::as_str).unwrap_or("").into()),
                    old_strength: Some(base.strength),
                    old_active: Some(true),
                    restored: None,
                    merged: None,
                    merged_into: None,
                    new_opinion: Some(preference.opinion.clone()),
                    timestamp: now.clone(),
                    reason: format!(
                        "overrides the view of base persona {} (preference {})",
                        base.persona_id, base.preference_id
                    ),
                });
                preference.version = 2;
            }
        }
        if !preference.provenance.triggering_user_id.is_empty() {
            preference
                .evidence_user_ids
                .push(preference.provenance.triggering_user_id.clone());
        }
        let json = |value: &Vec<String>| serde_json::to_string(value).expect("strings serialise");
        let fields: Vec<(&str, Vec<u8>)> = vec![
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
                preference
                    .provenance
                    .triggering_user_id
                    .clone()
                    .into_bytes(),
            ),
            (
                field::TRIGGERING_MESSAGE_ID,
                preference
                    .provenance
                    .triggering_message_id
                    .clone()
                    .into_bytes(),
            ),
            (
                field::PERSONA_MESSAGE_ID,
                preference
                    .provenance
                    .persona_message_id
                    .clone()
                    .into_bytes(),
            ),
            (
                field::SOURCE_PLATFORM,
                preference.provenance.source_platform.clone().into_bytes(),
            ),
            (
                field::SOURCE_CHANNEL_ID,
                preference.provenance.source_channel_id.clone().into_bytes(),
            ),
            (
                field::RELATED_USER_IDS,
                json(&preference.related_user_ids).into_bytes(),
            ),
            (
                field::RELATED_USER_IDS_INDEX,
                preference.related_user_ids.join(",").into_bytes(),
            ),
            (
                field::RELATED_KG_UUIDS,
                json(&preference.related_kg_uuids).into_bytes(),
            ),
            (
                field::EVIDENCE_USER_IDS,
                json(&preference.evidence_user_ids).into_bytes(),
            ),
            (
                field::EVOLUTION_HISTORY,
                if preference.evolution_history.is_empty() {
                    b"[]".to_vec()
                } else {
                    serde_json::to_vec(&preference.evolution_history).map_err(|e| {
                        StoreError::UnexpectedReply(format!("encoding history: {e}"))
                    })?
                },
            ),
            (field::VERSION, preference.version.to_string().into_bytes()),
            (
                field::INHERITED_FROM,
                preference.inherited_from.clone().into_bytes(),
            ),
            (field::EMBEDDING, vector_to_bytes(&new.embedding)),
            (field::ACTIVE, b"1".to_vec()),
            (
                field::CREATED_AT,
                preference.created_at.clone().into_bytes(),
            ),
            (
                field::LAST_REINFORCED,
                preference.last_reinforced.clone().into_bytes(),
            ),
            (field::REINFORCEMENT_COUNT, b"0".to_vec()),
        ];
        let mut invocation =
            self.invocation(&scripts::ADD, &preference.persona_id, &preference.id, guard)?;
        invocation.arg(
            guard
                .message
                .map(|message| message.on_preference(&preference.id))
                .unwrap_or_default(),
        );
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

    /// Raises strength on the diminishing-returns curve `s' = s + rate·(1 − s)`, counts the
    /// reinforcement and stamps `last_reinforced`, atomically. `None` when not found.
    pub async fn reinforce_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        guard: WriteGuard<'_>,
    ) -> Result<Option<ReinforceOutcome>, StoreError> {
        self.reinforce_preference_from(persona_id, preference_id, &Provenance::default(), guard)
            .await
    }

    /// [`PreferenceStore::reinforce_preference`] from a conversation turn: its user joins the
    /// preference's evidence, and the reinforcement log records the turn (`provenance`).
    pub async fn reinforce_preference_from(
        &self,
        persona_id: &str,
        preference_id: &str,
        provenance: &Provenance,
        guard: WriteGuard<'_>,
    ) -> Result<Option<ReinforceOutcome>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        validate::provenance(provenance)?;
        let now = now_iso();
        let entry = serde_json::to_string(&Reinforcement {
            timestamp: now.clone(),
            provenance: provenance.clone(),
        })
        .map_err(|e| StoreError::UnexpectedReply(format!("encoding a reinforcement: {e}")))?;
        let mut invocation =
            self.invocation(&scripts::REINFORCE, persona_id, preference_id, guard)?;
        invocation
            .arg(format_float(self.settings.store.reinforce_rate))
            .arg(now)
            .arg(&provenance.triggering_user_id)
            .arg(entry)
            .arg(self.settings.store.max_reinforcement_log)
            .arg(self.settings.store.max_evidence_users);
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("reinforce", started.elapsed());
        let Some(items) = script_reply(reply, 5)? else {
            return Ok(None);
        };
        Ok(Some(ReinforceOutcome {
            applied: items[0] == "1",
            id: items[1].clone(),
            name: items[2].clone(),
            strength: items[3].parse().unwrap_or(0.0),
            reinforcement_count: items[4].parse().unwrap_or(0),
        }))
    }

    /// A change of mind: logs {old_opinion, new_opinion, timestamp, reason}, stores the new
    /// opinion and its embedding, resets strength to `store.evolved_strength`. Atomic.
    pub async fn evolve_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        evolution: &Evolution<'_>,
        guard: WriteGuard<'_>,
    ) -> Result<Option<EvolveOutcome>, StoreError> {
        let started = Instant::now();
        let config = &self.settings.store;
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        validate::embedding(evolution.new_embedding, config.embedding_dims)?;
        if let Some(user) = evolution.evidence_user_id {
            validate::external_text("evidence_user_id", user)?;
        }
        let opinion =
            validate::truncate_chars(evolution.new_opinion.trim(), config.max_opinion_chars);
        if opinion.is_empty() {
            return Err(StoreError::invalid("new_opinion", "is empty"));
        }
        let reason = validate::truncate_chars(evolution.reason, config.max_opinion_chars);
        let now = now_iso();
        let mut invocation = self.invocation(&scripts::EVOLVE, persona_id, preference_id, guard)?;
        invocation
            .arg(opinion.as_str())
            .arg(vector_to_bytes(evolution.new_embedding))
            .arg(format_float(config.evolved_strength))
            .arg(now.as_str())
            .arg(reason.as_str())
            .arg(evolution.new_stance.map(Stance::as_str).unwrap_or(""))
            .arg(evolution.expressed_at.unwrap_or(now.as_str()))
            .arg(evolution.evidence_user_id.unwrap_or(""))
            .arg(config.max_evidence_users)
            .arg(config.max_evolution_history);
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("evolve", started.elapsed());
        let Some(items) = script_reply(reply, 6)? else {
            return Ok(None);
        };
        Ok(Some(EvolveOutcome {
            applied: items[0] == "1",
            id: items[1].clone(),
            name: items[2].clone(),
            new_opinion: items[3].clone(),
            strength: items[4].parse().unwrap_or(0.0),
            evolutions: items[5].parse().unwrap_or(0),
        }))
    }

    /// Soft delete: `active` becomes "0", the record stays; a non-empty reason is logged as a
    /// "retraction" history entry. `None` when not found.
    pub async fn retract_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        reason: &str,
        guard: WriteGuard<'_>,
    ) -> Result<Option<RetractOutcome>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        let reason = validate::truncate_chars(reason.trim(), self.settings.store.max_opinion_chars);
        let mut invocation =
            self.invocation(&scripts::RETRACT, persona_id, preference_id, guard)?;
        invocation
            .arg(reason.as_str())
            .arg(now_iso())
            .arg(self.settings.store.max_evolution_history);
        let reply: Value = self.write(invocation, persona_id).await?;
        telemetry::store_op("retract", started.elapsed());
        let Some(items) = script_reply(reply, 3)? else {
            return Ok(None);
        };
        Ok(Some(RetractOutcome {
            id: items[1].clone(),
            name: items[2].clone(),
            active: false,
        }))
    }

    /// Runs a write script. A refusal for a lost lock becomes [`StoreError::Fenced`]. With
    /// `redis.min_replicas_acked` set, the write counts only once that many replicas have it
    /// (`WAIT`): a failover must not lose an effect whose event was acked. Fewer replicas in
    /// time is a retryable error; the event is redelivered and its effect record keeps the
    /// retry from applying twice.
    pub(super) async fn write(
        &self,
        invocation: redis::ScriptInvocation<'_>,
        persona_id: &str,
    ) -> Result<Value, StoreError> {
        let mut connection = self.connection.clone();
        let reply: Value = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(script_error(persona_id))?;
        let replicas = self.settings.min_replicas_acked;
        if replicas > 0 {
            let mut wait = redis::cmd("WAIT");
            wait.arg(replicas).arg(self.settings.replica_wait_ms);
            let acked: u64 = connection
                .query_for_key(&self.route_key(persona_id), &wait)
                .await?;
            if acked < replicas {
                return Err(StoreError::NotReplicated {
                    persona_id: persona_id.to_string(),
                    acked,
                    wanted: replicas,
                });
            }
        }
        self.touch_registry(persona_id).await;
        Ok(reply)
    }

    /// A write script's invocation with the shared keys and arguments (see `scripts.rs`).
    pub(super) fn invocation<'s>(
        &self,
        script: &'s redis::Script,
        persona_id: &str,
        preference_id: &str,
        guard: WriteGuard<'_>,
    ) -> Result<redis::ScriptInvocation<'s>, StoreError> {
        if let Some(effect_id) = guard.effect_id {
            validate::effect_id(effect_id)?;
        }
        if let Some(lock) = guard.lock
            && lock.persona_id() != persona_id
        {
            return Err(StoreError::invalid(
                "lock",
                format!(
                    "lock is for persona {}, write is for {persona_id}",
                    lock.persona_id()
                ),
            ));
        }
        let config = &self.settings.store;
        let mut invocation = script.prepare_invoke();
        for key in self
            .settings
            .keys
            .write_script_keys(persona_id, preference_id)
        {
            invocation.key(key);
        }
        invocation
            .arg(guard.effect_id.unwrap_or_default())
            // How long an idempotency record outlives its write (`store.effect_ttl_hours`,
            // at least as long as events and dead letters are kept; 0 = for ever).
            .arg(config.effect_ttl_hours * 3600)
            .arg(guard.lock.map(LockToken::token).unwrap_or_default())
            .arg(config.vector_quantisation.vadd_option())
            .arg(config.embedding_dims * 4);
        Ok(invocation)
    }

    fn coerce_category(&self, category: &str) -> String {
        let lowered = category.trim().to_ascii_lowercase();
        if self.settings.store.categories.contains(&lowered) {
            lowered
        } else {
            self.settings.store.fallback_category.clone()
        }
    }
}
