//! Injection: what goes into a system prompt, from one script over each layer's own
//! structures (the persona, then its bases), chosen by a pure function.

use std::collections::HashSet;
use std::time::Instant;

use redis::Value;

use super::config::StoreConfig;
use super::query::{self, InjectionPasses};
use super::record::VectorAttributes;
use super::scripts;
use super::{
    InjectedPreference, InjectionQuery, MatchReason, Preference, PreferenceStore, ScoredPreference,
    StoreError, validate,
};
use crate::telemetry;
use crate::timestamp::Timestamp;

/// One layer of a (possibly layered) persona: the persona itself first, then its bases.
struct Layer {
    persona_id: String,
    passes: InjectionPasses,
}

/// What the passes found over every layer, decoded; each preference's `persona_id` names
/// its layer.
#[derive(Debug, Clone, Default)]
pub struct InjectionCandidates {
    pub semantic: Vec<ScoredPreference>,
    pub by_user: Vec<ScoredPreference>,
    /// Strongest first within each layer.
    pub strongest: Vec<Preference>,
}

/// What injection chose: the query's results (ranked) and the resident ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InjectionSelection {
    pub chosen: Vec<InjectedPreference>,
    pub resident: Vec<InjectedPreference>,
}

impl PreferenceStore {
    /// The preferences worth putting into a system prompt: a semantic pass (the persona's
    /// `max_count·2` nearest active preferences) and a user pass (its preferences about the
    /// present users, nearest first), in one round trip; merged by id, ranked by relevance ×
    /// decayed strength, capped by count and by total opinion characters. Each result says
    /// why it was chosen.
    pub async fn get_preferences_for_injection(
        &self,
        query: &InjectionQuery<'_>,
    ) -> Result<Vec<InjectedPreference>, StoreError> {
        Ok(self
            .get_preferences_for_injection_with_resident(query, 0)
            .await?
            .chosen)
    }

    /// [`PreferenceStore::get_preferences_for_injection`] plus up to `resident_count` of the
    /// persona's strongest active preferences regardless of the query ("always-on" context).
    /// Residents come first and count against `max_count` and `max_chars`; a resident the
    /// query also found is listed once, with every reason.
    ///
    /// An empty `query_embedding` skips the semantic pass (a short or empty query).
    ///
    /// One pipeline per layer over that persona's own structures (the semantic VSIM beside
    /// `scripts::INJECT`, [`query::injection_pipeline`]): a persona without bases costs one
    /// round trip; the script also names the persona's bases, whose
    /// passes run next, concurrently (they may live in other hash slots), one depth at a time;
    /// then one more round trip checks which base views a nearer layer overrides.
    pub async fn get_preferences_for_injection_with_resident(
        &self,
        query: &InjectionQuery<'_>,
        resident_count: usize,
    ) -> Result<InjectionSelection, StoreError> {
        let started = Instant::now();
        let config = &self.settings.store;
        validate::persona_id(query.persona_id)?;
        if !query.query_embedding.is_empty() {
            validate::embedding(query.query_embedding, config.embedding_dims)?;
        }
        if query.max_count == 0 || query.max_count > config.max_injection_count {
            return Err(StoreError::invalid(
                "max_count",
                format!("must be within 1..={}", config.max_injection_count),
            ));
        }
        if query.max_chars == 0 || query.max_chars > config.max_injection_chars {
            return Err(StoreError::invalid(
                "max_chars",
                format!("must be within 1..={}", config.max_injection_chars),
            ));
        }
        validate::related_ids(
            "active_user_ids",
            query.active_user_ids,
            config.max_related_ids,
            validate::user_id,
        )?;
        if resident_count > config.max_injection_count {
            return Err(StoreError::invalid(
                "resident_count",
                format!("must be at most {}", config.max_injection_count),
            ));
        }
        let top_k = (query.max_count * 2).min(config.max_top_k);
        // The strongest by decayed strength, exactly (the script walks past those whose
        // stored strength cannot beat them), with a few extra: some may be overridden.
        let strongest = if resident_count > 0 {
            resident_count * 2 + query.max_count
        } else {
            0
        };
        let passes = |persona_id: String, with_vectors: bool| async move {
            let sizes = query::PassSizes {
                top_k,
                strongest,
                search_ef: self.settings.store.vector_search_ef,
                half_life_days: config.strength_half_life_days,
                now_days: crate::timestamp::Timestamp::now()
                    .instant()
                    .unix_timestamp_nanos() as f64
                    / 86_400e9,
                min_semantic_relevance: config.min_semantic_relevance,
            };
            let route = self.route_key(&persona_id);
            let mut connection = self.connection.clone();
            // Without the script where plain commands say all it would (every present user's
            // set whole); otherwise, or when they say a user needs it, with it.
            let plain = match query::plain_injection_pipeline(
                self.keys(),
                &persona_id,
                query.query_embedding,
                sizes,
                query.active_user_ids,
                with_vectors,
            ) {
                Some(pipe) => query::parse_plain_injection_replies(
                    connection.pipeline_for_key(&route, &pipe).await?,
                    query.query_embedding,
                    top_k,
                    query.active_user_ids,
                    config.min_semantic_relevance,
                )?,
                None => None,
            };
            let mut passes = match plain {
                Some(passes) => passes,
                None => {
                    let pipe = query::injection_pipeline(
                        self.keys(),
                        &persona_id,
                        query.query_embedding,
                        sizes,
                        query.active_user_ids,
                        with_vectors,
                    );
                    let replies = connection
                        .pipeline_with_script_for_key(&route, &pipe, &scripts::INJECT)
                        .await?;
                    query::parse_injection_replies(
                        replies,
                        query.query_embedding,
                        top_k,
                        with_vectors,
                        query.active_user_ids,
                        config.min_semantic_relevance,
                    )?
                }
            };
            if !passes.unread_attributes.is_empty() {
                self.read_user_hits_attributes(&persona_id, &mut passes)
                    .await?;
            }
            Ok::<_, StoreError>(Layer { passes, persona_id })
        };
        let mut layers = vec![passes(query.persona_id.to_string(), false).await?];
        let mut seen: HashSet<String> = HashSet::from([query.persona_id.to_string()]);
        let mut frontier = layers[0].passes.bases.clone();
        for _depth in 0..config.max_base_depth {
            let next: Vec<String> = frontier
                .into_iter()
                .filter(|base| validate::persona_id(base).is_ok() && seen.insert(base.clone()))
                .collect();
            if next.is_empty() {
                break;
            }
            let fetched =
                futures::future::try_join_all(next.into_iter().map(|base| passes(base, true)))
                    .await?;
            frontier = fetched
                .iter()
                .flat_map(|layer| layer.passes.bases.clone())
                .collect();
            layers.extend(fetched);
        }
        let overridden = self.overridden_by_nearer_layers(&layers).await?;
        let candidates = candidates_of(layers, &overridden);
        let layer_ids: Vec<String> = seen.into_iter().collect();
        let selection = select_for_injection(
            query,
            &layer_ids,
            candidates,
            resident_count,
            Timestamp::now(),
            config,
            self.settings.min_evidence,
        );
        telemetry::store_op("inject", started.elapsed());
        Ok(selection)
    }

    /// The attributes of the user pass's hits whose user set did not carry them (a set built
    /// before it kept them, until `index migrate` rebuilds it): read from the persona's set,
    /// in one more round trip.
    async fn read_user_hits_attributes(
        &self,
        persona_id: &str,
        passes: &mut InjectionPasses,
    ) -> Result<(), StoreError> {
        let ids = std::mem::take(&mut passes.unread_attributes);
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("VGETATTR")
                .arg(self.keys().vectors(persona_id))
                .arg(id);
        }
        let mut connection = self.connection.clone();
        let replies = connection
            .pipeline_for_key(&self.route_key(persona_id), &pipe)
            .await?;
        let mut gone = HashSet::new();
        for (id, reply) in ids.iter().zip(replies) {
            if reply == redis::Value::Nil {
                // The preference left the persona's set meanwhile: nothing to show.
                gone.insert(id.clone());
                continue;
            }
            let attributes = VectorAttributes::parse(&query::value_to_string(&reply))?;
            for hit in passes.about_users.iter_mut().filter(|hit| &hit.id == id) {
                hit.attributes = attributes.clone();
            }
        }
        passes.about_users.retain(|hit| !gone.contains(&hit.id));
        Ok(())
    }

    /// The base views a nearer layer overrides: (base persona, preference id) of each hit of a
    /// base whose nearest preference in an earlier layer is the same topic (similarity at or
    /// above the topic match threshold ingest decides by). One pipelined `VSIM … COUNT 1` per
    /// nearer layer, concurrently.
    async fn overridden_by_nearer_layers(
        &self,
        layers: &[Layer],
    ) -> Result<HashSet<(String, String)>, StoreError> {
        let mut overridden = HashSet::new();
        if layers.len() < 2 {
            return Ok(overridden);
        }
        let threshold = self.settings.topic_match_threshold;
        let checks = layers[..layers.len() - 1]
            .iter()
            .enumerate()
            .map(|(nearer, layer)| {
                // Every hit of a later layer, checked against this one.
                let farther: Vec<(&str, &str, &Vec<f32>)> = layers[nearer + 1..]
                    .iter()
                    .flat_map(|far| {
                        far.passes
                            .vectors
                            .iter()
                            .map(|(id, vector)| (far.persona_id.as_str(), id.as_str(), vector))
                    })
                    .collect();
                async move {
                    if farther.is_empty() {
                        return Ok::<_, StoreError>(Vec::new());
                    }
                    let mut pipe = redis::pipe();
                    for (_, _, vector) in &farther {
                        pipe.add_command(query::vsim_command(
                            self.keys().vectors(&layer.persona_id),
                            vector,
                            1,
                            self.settings.store.vector_search_ef,
                            false,
                        ));
                    }
                    let mut connection = self.connection.clone();
                    let replies = connection
                        .pipeline_for_key(&self.route_key(&layer.persona_id), &pipe)
                        .await?;
                    let mut found = Vec::new();
                    for ((persona_id, id, _), reply) in farther.iter().zip(replies) {
                        let nearest = nearest_similarity(reply)?;
                        if nearest.is_some_and(|similarity| similarity >= threshold) {
                            found.push((persona_id.to_string(), id.to_string()));
                        }
                    }
                    Ok(found)
                }
            });
        for found in futures::future::try_join_all(checks).await? {
            overridden.extend(found);
        }
        Ok(overridden)
    }
}

/// The cosine similarity of a `VSIM … WITHSCORES COUNT 1` reply's hit, if any.
fn nearest_similarity(reply: Value) -> Result<Option<f64>, StoreError> {
    let score = match reply {
        Value::Nil => return Ok(None),
        Value::Array(items) => items.get(1).cloned(),
        Value::Map(entries) => entries.into_iter().next().map(|(_, score)| score),
        other => {
            return Err(StoreError::UnexpectedReply(format!(
                "VSIM returned {other:?}"
            )));
        }
    };
    let Some(score) = score else { return Ok(None) };
    let value = match score {
        Value::Double(value) => value,
        other => query::value_to_string(&other)
            .parse::<f64>()
            .map_err(|_| StoreError::UnexpectedReply(format!("VSIM score {other:?}")))?,
    };
    Ok(Some(2.0 * value - 1.0))
}

/// Every layer's hits as preferences of that layer, without the overridden ones.
fn candidates_of(
    layers: Vec<Layer>,
    overridden: &HashSet<(String, String)>,
) -> InjectionCandidates {
    let mut candidates = InjectionCandidates::default();
    for layer in layers {
        let persona_id = layer.persona_id;
        // Most injections have no bases, hence nothing overridden: no pair built to look up.
        let keep = |id: &String| {
            overridden.is_empty() || !overridden.contains(&(persona_id.clone(), id.clone()))
        };
        let scored = |hits: Vec<query::VectorHit>| -> Vec<ScoredPreference> {
            hits.into_iter()
                .filter(|hit| keep(&hit.id))
                .map(|hit| ScoredPreference {
                    score: 1.0 - hit.similarity,
                    preference: hit.attributes.into_preference(hit.id, &persona_id),
                })
                .collect()
        };
        candidates.semantic.extend(scored(layer.passes.semantic));
        candidates.by_user.extend(scored(layer.passes.about_users));
        candidates.strongest.extend(
            layer
                .passes
                .strongest
                .into_iter()
                .filter(|(id, _)| keep(id))
                .map(|(id, attributes)| attributes.into_preference(id, &persona_id)),
        );
    }
    candidates
}

/// Strength after decay: halved every `half_life_days` since the persona last voiced the
/// preference (`last_voiced`, RFC 3339). Without decay, or without a readable time (records
/// of the original system), the strength itself.
pub fn decayed_strength(
    strength: f64,
    last_voiced: &str,
    now: Timestamp,
    half_life_days: f64,
) -> f64 {
    if half_life_days <= 0.0 {
        return strength;
    }
    let Ok(voiced) = Timestamp::parse(last_voiced) else {
        return strength;
    };
    let age_days = (now.instant() - voiced.instant()).as_seconds_f64().max(0.0) / 86_400.0;
    strength * 0.5f64.powf(age_days / half_life_days)
}

/// The decayed strength of a preference: counted from its last reinforcement, else from
/// when its stance was voiced.
pub fn decayed_strength_of(preference: &Preference, now: Timestamp, half_life_days: f64) -> f64 {
    let voiced = if preference.last_reinforced.is_empty() {
        &preference.stance_at
    } else {
        &preference.last_reinforced
    };
    decayed_strength(preference.strength, voiced, now, half_life_days)
}

/// Chooses what goes into the prompt. Pure, so the rules are tested by tables:
/// - only active preferences of the persona's layers (`layers`: the persona and its bases)
///   count; a base's view that a nearer layer overrides was removed before; with
///   `min_evidence` above 1, only those whose current version was voiced that many times or
///   written by an administrator (`inject.min_evidence`);
/// - residents first: the `resident_count` strongest by decayed strength, within the caps;
/// - then the query's candidates by relevance × decayed strength (relevance: cosine
///   similarity, at least `min_semantic_relevance` for the semantic pass, raised to
///   `user_relevance_floor` for a preference about a present user), merged by id with every
///   reason; a long opinion that does not fit the character budget is skipped so shorter ones
///   can still use it; `max_count` caps residents and results together.
pub fn select_for_injection(
    query: &InjectionQuery<'_>,
    layers: &[String],
    candidates: InjectionCandidates,
    resident_count: usize,
    now: Timestamp,
    config: &StoreConfig,
    min_evidence: u64,
) -> InjectionSelection {
    let half_life = config.strength_half_life_days;
    // The confirmation gate (`inject.min_evidence`): voiced often enough, or written by an
    // administrator.
    let confirmed = |preference: &Preference| {
        min_evidence <= 1
            || preference.curated
            || preference.reinforcement_count + 1 >= min_evidence
    };
    let belongs = |preference: &Preference| {
        preference.active && layers.contains(&preference.persona_id) && confirmed(preference)
    };
    let injected = |preference: Preference, relevance: f64, reasons: Vec<MatchReason>| {
        let decayed = decayed_strength_of(&preference, now, half_life);
        InjectedPreference {
            inherited_from: (preference.persona_id != query.persona_id)
                .then(|| preference.persona_id.clone()),
            id: preference.id,
            name: preference.name,
            opinion: preference.opinion,
            category: preference.category,
            strength: preference.strength,
            decayed_strength: decayed,
            relevance,
            score: relevance * decayed,
            matched_by: reasons,
        }
    };
    let same = |a: &InjectedPreference, b: &InjectedPreference| {
        a.id == b.id && a.inherited_from == b.inherited_from
    };

    let mut merged: Vec<InjectedPreference> =
        Vec::with_capacity(candidates.semantic.len() + candidates.by_user.len());
    let passes = candidates
        .semantic
        .into_iter()
        .map(|hit| (hit, false))
        .chain(candidates.by_user.into_iter().map(|hit| (hit, true)));
    for (hit, from_user_pass) in passes {
        if !belongs(&hit.preference) {
            continue;
        }
        if !from_user_pass
            && !query::semantically_relevant(hit.similarity(), config.min_semantic_relevance)
        {
            continue;
        }
        let mut relevance = hit.similarity().clamp(0.0, 1.0);
        let mut reasons = Vec::new();
        if from_user_pass {
            relevance = relevance.max(config.user_relevance_floor);
            for user in &hit.preference.related_user_ids {
                if query.active_user_ids.contains(user) {
                    reasons.push(MatchReason::User(user.clone()));
                }
            }
        } else {
            reasons.push(MatchReason::Semantic);
        }
        let candidate = injected(hit.preference, relevance, reasons);
        match merged
            .iter_mut()
            .find(|existing| same(existing, &candidate))
        {
            Some(existing) => {
                existing.relevance = existing.relevance.max(candidate.relevance);
                existing.score = existing.relevance * existing.decayed_strength;
                for reason in candidate.matched_by {
                    if !existing.matched_by.contains(&reason) {
                        existing.matched_by.push(reason);
                    }
                }
            }
            None => merged.push(candidate),
        }
    }
    // Highest score first; ties by id so the order is stable across calls.
    merged.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));

    let mut strongest: Vec<InjectedPreference> = candidates
        .strongest
        .into_iter()
        .filter(|preference| belongs(preference))
        .map(|preference| {
            let mut resident = injected(preference, 0.0, vec![MatchReason::Resident]);
            resident.score = resident.decayed_strength;
            resident
        })
        .collect();
    strongest.sort_by(|a, b| {
        b.decayed_strength
            .total_cmp(&a.decayed_strength)
            .then_with(|| a.inherited_from.is_some().cmp(&b.inherited_from.is_some()))
            .then_with(|| a.id.cmp(&b.id))
    });

    let mut chars = 0usize;
    let mut fits = |candidate: &InjectedPreference| {
        let length = candidate.opinion.chars().count();
        if chars + length > query.max_chars {
            return false;
        }
        chars += length;
        true
    };
    let mut selection = InjectionSelection::default();
    for candidate in strongest {
        if selection.resident.len() == resident_count.min(query.max_count) {
            break;
        }
        if selection.resident.iter().any(|r| same(r, &candidate)) || !fits(&candidate) {
            continue;
        }
        selection.resident.push(candidate);
    }
    for candidate in merged {
        // A resident the query found too gains its reasons, even when the list is full.
        if let Some(resident) = selection.resident.iter_mut().find(|r| same(r, &candidate)) {
            resident.relevance = candidate.relevance;
            for reason in candidate.matched_by {
                if !resident.matched_by.contains(&reason) {
                    resident.matched_by.push(reason);
                }
            }
            continue;
        }
        if selection.chosen.len() + selection.resident.len() == query.max_count {
            continue;
        }
        if fits(&candidate) {
            selection.chosen.push(candidate);
        }
    }
    selection
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Preference;

    fn preference(id: &str, strength: f64, opinion: &str, users: &[&str]) -> Preference {
        Preference {
            strength,
            opinion: opinion.into(),
            related_user_ids: users.iter().map(|u| u.to_string()).collect(),
            ..Preference::for_tests(id)
        }
    }

    fn hit(preference: Preference, similarity: f64) -> ScoredPreference {
        ScoredPreference {
            preference,
            score: 1.0 - similarity,
        }
    }

    fn rank(
        semantic: Vec<ScoredPreference>,
        by_user: Vec<ScoredPreference>,
        max_count: usize,
        max_chars: usize,
    ) -> Vec<InjectedPreference> {
        select(semantic, by_user, Vec::new(), 0, max_count, max_chars).chosen
    }

    fn select(
        semantic: Vec<ScoredPreference>,
        by_user: Vec<ScoredPreference>,
        strongest: Vec<Preference>,
        resident_count: usize,
        max_count: usize,
        max_chars: usize,
    ) -> InjectionSelection {
        select_gated(
            semantic,
            by_user,
            strongest,
            resident_count,
            max_count,
            max_chars,
            1,
        )
    }

    fn select_gated(
        semantic: Vec<ScoredPreference>,
        by_user: Vec<ScoredPreference>,
        strongest: Vec<Preference>,
        resident_count: usize,
        max_count: usize,
        max_chars: usize,
        min_evidence: u64,
    ) -> InjectionSelection {
        let users = vec!["u1".to_string()];
        let query = InjectionQuery {
            persona_id: "ada",
            query_embedding: &[],
            max_count,
            max_chars,
            active_user_ids: &users,
        };
        let mut config = StoreConfig::defaults();
        config.min_semantic_relevance = 0.25;
        config.user_relevance_floor = 0.5;
        config.strength_half_life_days = 30.0;
        let candidates = InjectionCandidates {
            semantic,
            by_user,
            strongest,
        };
        let layers = ["ada".to_string(), "base".to_string()];
        select_for_injection(
            &query,
            &layers,
            candidates,
            resident_count,
            now(),
            &config,
            min_evidence,
        )
    }

    /// `inject.min_evidence`: at 1 every preference is injected at once; at 2 only those the
    /// persona voiced twice (in their current version) or an administrator wrote, residents
    /// too. Stored either way: the gate is on what reaches a prompt.
    #[test]
    fn the_confirmation_gate_waits_for_a_second_voicing_or_an_administrator() {
        let once = preference("once", 0.9, "Once.", &[]);
        let twice = Preference {
            reinforcement_count: 1,
            ..preference("twice", 0.8, "Twice.", &[])
        };
        let curated = Preference {
            curated: true,
            ..preference("curated", 0.7, "Curated.", &[])
        };
        let all = || vec![once.clone(), twice.clone(), curated.clone()];
        let hits = || all().into_iter().map(|p| hit(p, 0.9)).collect::<Vec<_>>();
        let ids = |selection: &InjectionSelection| {
            let mut ids: Vec<String> = selection
                .resident
                .iter()
                .chain(&selection.chosen)
                .map(|p| p.id.clone())
                .collect();
            ids.sort();
            ids
        };
        for (min_evidence, residents, expected) in [
            (1, 0, vec!["curated", "once", "twice"]),
            (2, 0, vec!["curated", "twice"]),
            (2, 3, vec!["curated", "twice"]),
            (3, 0, vec!["curated"]),
        ] {
            let selection = select_gated(hits(), vec![], all(), residents, 10, 1000, min_evidence);
            assert_eq!(
                ids(&selection),
                expected,
                "min_evidence {min_evidence}, {residents} residents"
            );
        }
    }

    fn now() -> Timestamp {
        Timestamp::parse("2026-11-23T00:00:00Z").unwrap()
    }

    /// A rule, the semantic and user passes' hits, max count, max chars, and the ids chosen.
    type Row = (
        &'static str,
        Vec<ScoredPreference>,
        Vec<ScoredPreference>,
        usize,
        usize,
        Vec<&'static str>,
    );

    fn ids(chosen: &[InjectedPreference]) -> Vec<&str> {
        chosen.iter().map(|p| p.id.as_str()).collect()
    }

    #[test]
    fn ranking_rules() {
        let tea = || preference("tea", 0.9, "I love tea.", &[]);
        let jazz = || preference("jazz", 0.5, "Jazz is underrated.", &[]);
        let chess = || preference("chess", 0.8, "Chess with u1 is fun.", &["u1", "u2"]);
        let long = || preference("long", 1.0, &"x".repeat(40), &[]);
        let mut other_persona = tea();
        other_persona.id = "stranger".into();
        other_persona.persona_id = "bob".into();
        let mut retracted = jazz();
        retracted.id = "old".into();
        retracted.active = false;
        let table: Vec<Row> = vec![
            (
                "relevance x strength decides: 0.6x0.9 = 0.54 beats 0.9x0.5 = 0.45",
                vec![hit(jazz(), 0.9), hit(tea(), 0.6)],
                vec![],
                5,
                1000,
                vec!["tea", "jazz"],
            ),
            (
                "equal scores fall back to the id, so the order is stable",
                vec![
                    hit(preference("b", 0.5, "B.", &[]), 0.8),
                    hit(preference("a", 0.5, "A.", &[]), 0.8),
                ],
                vec![],
                5,
                1000,
                vec!["a", "b"],
            ),
            (
                "a semantic hit below min_semantic_relevance is noise",
                vec![hit(tea(), 0.2), hit(jazz(), 0.3)],
                vec![],
                5,
                1000,
                vec!["jazz"],
            ),
            (
                "a preference about a present user is kept however far from the query",
                vec![],
                vec![hit(chess(), 0.0)],
                5,
                1000,
                vec!["chess"],
            ),
            (
                "another persona's hit and a retracted one are never chosen",
                vec![
                    hit(other_persona.clone(), 0.99),
                    hit(retracted.clone(), 0.99),
                    hit(jazz(), 0.5),
                ],
                vec![],
                5,
                1000,
                vec!["jazz"],
            ),
            (
                "max_count caps the list",
                vec![hit(tea(), 0.9), hit(chess(), 0.9), hit(jazz(), 0.9)],
                vec![],
                2,
                1000,
                vec!["tea", "chess"],
            ),
            (
                "an opinion over the character budget is skipped; a shorter one still fits",
                vec![hit(long(), 0.9), hit(tea(), 0.5)],
                vec![],
                5,
                30,
                vec!["tea"],
            ),
        ];
        for (rule, semantic, by_user, max_count, max_chars, expected) in table {
            let chosen = rank(semantic, by_user, max_count, max_chars);
            assert_eq!(ids(&chosen), expected, "{rule}");
        }
    }

    #[test]
    fn a_preference_found_by_both_passes_is_listed_once_with_both_reasons() {
        let chess = preference("chess", 0.8, "Chess with u1 is fun.", &["u1", "u2"]);
        let chosen = rank(
            vec![hit(chess.clone(), 0.3)],
            vec![hit(chess, 0.3)],
            5,
            1000,
        );
        assert_eq!(chosen.len(), 1);
        // u2 is not in the conversation: only present users are given as the reason.
        assert_eq!(
            chosen[0].matched_by,
            vec![MatchReason::Semantic, MatchReason::User("u1".into())]
        );
        // The user pass lifts relevance to its floor; the score follows.
        assert_eq!(chosen[0].relevance, 0.5);
        assert!((chosen[0].score - 0.4).abs() < 1e-9);
    }

    /// A preference last voiced `days_ago` days before [`now`].
    fn voiced(id: &str, strength: f64, days_ago: i64) -> Preference {
        let at = now().instant() - time::Duration::days(days_ago);
        Preference {
            last_reinforced: Timestamp::from(at).to_rfc3339(),
            ..preference(id, strength, id, &[])
        }
    }

    #[test]
    fn decay_halves_strength_every_half_life_and_ranks_by_what_is_still_voiced() {
        let config_half_life = 30.0;
        let fresh = voiced("fresh", 0.6, 0);
        let old = voiced("old", 0.9, 60);
        assert_eq!(decayed_strength_of(&fresh, now(), config_half_life), 0.6);
        assert!((decayed_strength_of(&old, now(), config_half_life) - 0.225).abs() < 1e-9);
        assert_eq!(
            decayed_strength_of(&old, now(), 0.0),
            0.9,
            "0 turns decay off"
        );
        // A record without a readable time (the original system's) does not decay.
        let timeless = preference("timeless", 0.9, "x", &[]);
        assert_eq!(decayed_strength_of(&timeless, now(), config_half_life), 0.9);
        // Equal relevance: the stronger raw strength loses to the one still voiced.
        let chosen = rank(vec![hit(old, 0.8), hit(fresh, 0.8)], vec![], 5, 1000);
        assert_eq!(ids(&chosen), vec!["fresh", "old"]);
        assert_eq!(
            chosen[1].strength, 0.9,
            "the stored strength is reported unchanged"
        );
        assert!((chosen[1].decayed_strength - 0.225).abs() < 1e-9);
    }

    #[test]
    fn residents_count_against_the_caps() {
        let strongest = || {
            vec![
                voiced("core", 0.95, 0),
                voiced("faded", 0.99, 90),
                voiced("second", 0.9, 0),
            ]
        };
        let query_hits = || {
            vec![
                hit(voiced("tea", 0.5, 0), 0.9),
                hit(voiced("jazz", 0.5, 0), 0.8),
            ]
        };
        // Two residents by decayed strength ("faded" fell behind), then the query's results
        // fill what is left of max_count = 3.
        let selection = select(query_hits(), vec![], strongest(), 2, 3, 1000);
        assert_eq!(ids(&selection.resident), vec!["core", "second"]);
        assert_eq!(ids(&selection.chosen), vec!["tea"]);
        // The character budget is shared too: "core" (4) and "second" (6) leave 3 for the rest.
        let selection = select(query_hits(), vec![], strongest(), 2, 5, 13);
        assert_eq!(ids(&selection.resident), vec!["core", "second"]);
        assert_eq!(ids(&selection.chosen), vec!["tea"]);
        // max_count below resident_count: residents only, never more than asked.
        let selection = select(query_hits(), vec![], strongest(), 3, 1, 1000);
        assert_eq!(ids(&selection.resident), vec!["core"]);
        assert!(selection.chosen.is_empty());
    }

    #[test]
    fn a_resident_the_query_also_found_is_listed_once_with_both_reasons() {
        let selection = select(
            vec![
                hit(voiced("core", 0.95, 0), 0.9),
                hit(voiced("tea", 0.5, 0), 0.8),
            ],
            vec![],
            vec![voiced("core", 0.95, 0)],
            1,
            5,
            1000,
        );
        assert_eq!(ids(&selection.resident), vec!["core"]);
        assert_eq!(
            selection.resident[0].matched_by,
            vec![MatchReason::Resident, MatchReason::Semantic]
        );
        assert_eq!(ids(&selection.chosen), vec!["tea"]);
    }

    #[test]
    fn base_views_are_chosen_and_marked_and_strangers_never() {
        let mut shared = voiced("shared", 0.8, 0);
        shared.persona_id = "base".into();
        let mut stranger = voiced("stranger", 0.9, 0);
        stranger.persona_id = "someone-else".into();
        let chosen = rank(vec![hit(shared, 0.9), hit(stranger, 0.95)], vec![], 5, 1000);
        assert_eq!(ids(&chosen), vec!["shared"]);
        assert_eq!(chosen[0].inherited_from.as_deref(), Some("base"));
    }
}
