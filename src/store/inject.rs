//! Injection: what goes into a system prompt, from one script over the persona's own
//! structures, ranked by a pure function.

use std::collections::HashMap;
use std::time::Instant;

use redis::Value;

use super::query::{self, vector_to_bytes};
use super::{
    InjectedPreference, InjectionQuery, MatchReason, PreferenceStore, ScoredPreference, StoreError,
    validate,
};
use crate::config::StoreConfig;
use crate::telemetry;

impl PreferenceStore {
    /// The preferences worth putting into a system prompt: a semantic pass (the persona's
    /// `max_count·2` nearest active preferences) and a user pass (its preferences about the
    /// present users, nearest first), in one round trip; merged by id, ranked by relevance ×
    /// strength, capped by count and by total opinion characters. Each result says why it was
    /// chosen.
    pub async fn get_preferences_for_injection(
        &self,
        query: &InjectionQuery<'_>,
    ) -> Result<Vec<InjectedPreference>, StoreError> {
        Ok(self
            .get_preferences_for_injection_with_resident(query, 0)
            .await?
            .0)
    }

    /// [`PreferenceStore::get_preferences_for_injection`] plus up to `resident_count` of the
    /// persona's strongest active preferences regardless of the query ("always-on" context),
    /// deduplicated against the query's results. All three passes are one script over the
    /// persona's own structures (`scripts::INJECT`): one round trip, one node.
    pub async fn get_preferences_for_injection_with_resident(
        &self,
        query: &InjectionQuery<'_>,
        resident_count: usize,
    ) -> Result<(Vec<InjectedPreference>, Vec<InjectedPreference>), StoreError> {
        let started = Instant::now();
        let config = &self.settings.store;
        validate::persona_id(query.persona_id)?;
        validate::embedding(query.query_embedding, config.embedding_dims)?;
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
        // Fetch a few extra strongest: some may already be among the query's results.
        let strongest = if resident_count > 0 {
            resident_count + query.max_count
        } else {
            0
        };
        let mut connection = self.connection.clone();
        let reply: Value = query::injection_invocation(
            self.keys(),
            query.persona_id,
            &vector_to_bytes(query.query_embedding),
            top_k,
            strongest,
            query.active_user_ids,
        )
        .invoke_async(&mut connection)
        .await?;
        let passes = query::parse_injection_reply(reply)?;
        let to_scored = |hits: Vec<query::VectorHit>| -> Vec<ScoredPreference> {
            hits.into_iter()
                .map(|hit| ScoredPreference {
                    score: 1.0 - hit.similarity,
                    preference: hit.attributes.into_preference(hit.id, query.persona_id),
                })
                .collect()
        };
        let selected = rank_for_injection(
            query,
            to_scored(passes.semantic),
            to_scored(passes.about_users),
            config,
        );
        let mut resident = Vec::new();
        for (id, attributes) in passes.strongest {
            if resident.len() == resident_count {
                break;
            }
            if selected.iter().any(|s| s.id == id) {
                continue;
            }
            let preference = attributes.into_preference(id, query.persona_id);
            resident.push(InjectedPreference {
                score: preference.strength,
                relevance: 0.0,
                strength: preference.strength,
                id: preference.id,
                name: preference.name,
                opinion: preference.opinion,
                category: preference.category,
                matched_by: vec![MatchReason::Resident],
            });
        }
        telemetry::store_op("inject", started.elapsed());
        Ok((selected, resident))
    }
}

/// Merges the two passes, ranks by relevance × strength and applies the caps. Pure, so the
/// ranking rules are testable without Redis.
pub fn rank_for_injection(
    query: &InjectionQuery<'_>,
    semantic: Vec<ScoredPreference>,
    by_user: Vec<ScoredPreference>,
    config: &StoreConfig,
) -> Vec<InjectedPreference> {
    let user_relevance_floor = config.user_relevance_floor;
    let mut merged: Vec<InjectedPreference> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    let passes = semantic
        .into_iter()
        .map(|hit| (hit, false))
        .chain(by_user.into_iter().map(|hit| (hit, true)));
    for (hit, from_user_pass) in passes {
        if hit.preference.persona_id != query.persona_id || !hit.preference.active {
            continue;
        }
        let mut relevance = hit.similarity().clamp(0.0, 1.0);
        if !from_user_pass && relevance < config.min_semantic_relevance {
            continue;
        }
        let mut reasons = Vec::new();
        if from_user_pass {
            relevance = relevance.max(user_relevance_floor);
            for user in &hit.preference.related_user_ids {
                if query.active_user_ids.contains(user) {
                    reasons.push(MatchReason::User(user.clone()));
                }
            }
        } else {
            reasons.push(MatchReason::Semantic);
        }
        match position.get(&hit.preference.id) {
            Some(&at) => {
                let existing = &mut merged[at];
                existing.relevance = existing.relevance.max(relevance);
                existing.score = existing.relevance * existing.strength;
                for reason in reasons {
                    if !existing.matched_by.contains(&reason) {
                        existing.matched_by.push(reason);
                    }
                }
            }
            None => {
                position.insert(hit.preference.id.clone(), merged.len());
                let strength = hit.preference.strength;
                merged.push(InjectedPreference {
                    id: hit.preference.id,
                    name: hit.preference.name,
                    opinion: hit.preference.opinion,
                    category: hit.preference.category,
                    strength,
                    relevance,
                    score: relevance * strength,
                    matched_by: reasons,
                });
            }
        }
    }
    // Highest score first; ties by id so the order is stable across calls.
    merged.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    let mut chosen = Vec::new();
    let mut chars = 0usize;
    for candidate in merged {
        if chosen.len() == query.max_count {
            break;
        }
        let length = candidate.opinion.chars().count();
        // A long opinion that does not fit is skipped so shorter, lower-ranked ones can still
        // use the budget.
        if chars + length > query.max_chars {
            continue;
        }
        chars += length;
        chosen.push(candidate);
    }
    chosen
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
        let users = vec!["u1".to_string()];
        let query = InjectionQuery {
            persona_id: "ada",
            query_embedding: &[],
            max_count,
            max_chars,
            active_user_ids: &users,
        };
        let mut config = crate::config::Config::defaults().store;
        config.min_semantic_relevance = 0.25;
        config.user_relevance_floor = 0.5;
        rank_for_injection(&query, semantic, by_user, &config)
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
}
