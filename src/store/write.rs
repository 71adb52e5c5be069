//! Writes: add, reinforce, evolve and retract, each one Lua script under a [`WriteGuard`]
//! (effect id and lock fencing) that keeps the persona's structures in step.

use std::time::Instant;

use redis::Value;

use super::query::vector_to_bytes;
use super::record::field;
use super::timeline::record_fields;
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
            // Added through the service or the CLI: an administrator wrote it.
            curated: true,
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
                    old_reinforcement_count: None,
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
        let mut fields = record_fields(&preference)?;
        fields.push((field::EMBEDDING, vector_to_bytes(&new.embedding)));
        fields.push((field::REV, b"1".to_vec()));
        self.run_add(preference, fields, guard).await
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
        self.register_persona(persona_id).await?;
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
        Ok(reply)
    }

    /// `ARGV[4]` of a write script: the vector set's quantisation and build effort (`VADD`'s
    /// `EF`), and " hash" when every record keeps its hash (the full-text index reads hashes;
    /// `scripts/record.lua`).
    pub(super) fn record_placement(&self) -> String {
        let store = &self.settings.store;
        let quantisation = store.vector_quantisation.vadd_option();
        let build_ef = store.vector_build_ef;
        if self.has_text_index() {
            format!("{quantisation} {build_ef} hash")
        } else {
            format!("{quantisation} {build_ef}")
        }
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
            .arg(self.record_placement())
            .arg(config.embedding_dims * 4);
        Ok(invocation)
    }
}
