//! What one opinion does to memory: a pure function of the opinion, the persona's nearest
//! preferences and the erasures in force. The pipeline gathers those facts (under the persona
//! lock), asks [`plan`], and applies the answer through the store; nothing here touches Redis,
//! so the rules are tested by tables below.
//!
//! The rules, in order:
//! 1. voiced to a user since erased, at or before the erasure → [`Plan::Erased`] (nothing is
//!    written: an erased user's words are no longer evidence);
//! 2. no preference at or above the match threshold → [`Plan::Add`];
//! 3. the nearest match has the same stance (or none recorded) and was in the prompt of the
//!    message that voiced it → [`Plan::Echo`] (a reminder repeated is not evidence);
//! 4. otherwise → [`Plan::Voice`]: the opinion voices the matched preference again, with its
//!    stance. Whether that reinforces it, changes its mind or lands in its past is decided by
//!    when it was said, against everything else said about it: `model::timeline`.
//!
//! A match in a base persona's layer (a layered persona with no view of its own on the topic)
//! is never written to: the base's view in the prompt repeated is an echo; otherwise the
//! persona gets its own preference ([`Plan::Add`] with the base's view), the same stance
//! taken over as its own, the opposite one overriding the base's view (kept as version 1).

use std::collections::HashMap;

use super::{Erasure, InheritedView, Provenance, ScoredPreference, Stance, Verdict};
use crate::timestamp::Timestamp;

/// The other stance.
fn opposite(stance: Stance) -> Stance {
    match stance {
        Stance::For => Stance::Against,
        Stance::Against => Stance::For,
    }
}

/// What is known about one opinion when deciding.
#[derive(Debug, Clone, Copy)]
pub struct OpinionFacts<'a> {
    /// The persona that voiced it: a neighbour of another persona is a base's view.
    pub persona_id: &'a str,
    pub stance: Stance,
    /// The persona message's timestamp.
    pub expressed_at: Timestamp,
    /// When JetStream stored the event (the server's clock), if known.
    pub received_at: Option<Timestamp>,
    pub provenance: &'a Provenance,
    pub related_user_ids: &'a [String],
    /// Preferences that were in the prompt of the message that voiced the opinion.
    pub injected_preference_ids: &'a [String],
}

/// The decision for one opinion; the pipeline carries it out.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Erased,
    Echo {
        preference_id: String,
    },
    /// The opinion voices this preference again, with `stance` (the opinion's own, or what the
    /// LLM's verdict says it is against the preference's).
    Voice {
        preference_id: String,
        stance: Stance,
    },
    /// A new preference, naming these related users (erased ones by their pseudonym); with
    /// the base view it takes over, if the match was a base's.
    Add {
        related_user_ids: Vec<String>,
        inherited: Option<InheritedView>,
    },
}

/// The LLM's verdict on the nearest preference in the grey zone below the match threshold
/// (`extract::adjudicate`).
#[derive(Debug, Clone, PartialEq)]
pub struct Adjudication {
    pub preference_id: String,
    pub verdict: Verdict,
}

/// Decides what the opinion does. `neighbours` are the persona's active preferences nearest
/// to the opinion's topic, nearest first. With no neighbour at or above the threshold, an
/// `adjudication` saying the grey-zone neighbour is the same topic makes it the match, and
/// its verdict on the stance replaces the comparison of stance fields.
pub fn plan(
    facts: &OpinionFacts<'_>,
    neighbours: &[ScoredPreference],
    erasures: &HashMap<String, Erasure>,
    match_threshold: f64,
    adjudication: Option<&Adjudication>,
) -> Plan {
    if is_erased(facts, erasures) {
        return Plan::Erased;
    }
    let add = || Plan::Add {
        related_user_ids: related_users_for_add(facts, erasures),
        inherited: None,
    };
    let (best, adjudicated_agreement) = match neighbours
        .iter()
        .find(|hit| hit.similarity() >= match_threshold)
    {
        Some(best) => (best, None),
        None => {
            let Some(adjudication) = adjudication.filter(|a| a.verdict.same_topic) else {
                return add();
            };
            let Some(best) = neighbours
                .iter()
                .find(|hit| hit.preference.id == adjudication.preference_id)
            else {
                return add();
            };
            (best, Some(adjudication.verdict.same_stance))
        }
    };
    let matched = &best.preference;
    let preference_id = matched.id.clone();
    if matched.persona_id != facts.persona_id {
        let agrees = matched.stance.is_none_or(|stance| stance == facts.stance);
        if agrees && facts.injected_preference_ids.contains(&matched.id) {
            return Plan::Echo { preference_id };
        }
        return Plan::Add {
            related_user_ids: related_users_for_add(facts, erasures),
            inherited: Some(InheritedView {
                persona_id: matched.persona_id.clone(),
                preference_id,
                opinion: matched.opinion.clone(),
                stance: matched.stance,
                strength: matched.strength,
            }),
        };
    }
    let agrees = adjudicated_agreement
        .unwrap_or_else(|| matched.stance.is_none_or(|stance| stance == facts.stance));
    if agrees && facts.injected_preference_ids.contains(&matched.id) {
        return Plan::Echo { preference_id };
    }
    // The LLM's verdict on the stance stands for the stance fields' comparison.
    let stance = match (adjudicated_agreement, matched.stance) {
        (Some(true), Some(held)) => held,
        (Some(false), Some(held)) => opposite(held),
        _ => facts.stance,
    };
    Plan::Voice {
        preference_id,
        stance,
    }
}

/// Rule 1 alone: the pipeline asks it before searching, to skip the search.
pub fn is_erased(facts: &OpinionFacts<'_>, erasures: &HashMap<String, Erasure>) -> bool {
    erasures
        .get(&facts.provenance.triggering_user_id)
        .is_some_and(|erasure| erased_before(erasure, facts.received_at, facts.expressed_at))
}

/// The related users a new preference names: an erased user mentioned in someone else's
/// conversation from before the erasure is named by their pseudonym, as the erasure left the
/// others. Also what the pipeline writes when a matched preference vanished before the write.
pub fn related_users_for_add(
    facts: &OpinionFacts<'_>,
    erasures: &HashMap<String, Erasure>,
) -> Vec<String> {
    facts
        .related_user_ids
        .iter()
        .map(|user_id| match erasures.get(user_id) {
            Some(erasure) if erased_before(erasure, facts.received_at, facts.expressed_at) => {
                erasure.pseudonym.clone()
            }
            _ => user_id.clone(),
        })
        .collect()
}

/// Whether words written at `written_at` come from before `erasure`: by the message's own
/// timestamp, or by when JetStream stored the event (the server's clock, right even when the
/// chat pipeline's clock runs fast). Either one suffices: erasure errs on the side of
/// forgetting.
pub fn erased_before(
    erasure: &Erasure,
    received_at: Option<Timestamp>,
    written_at: Timestamp,
) -> bool {
    erasure.covers(written_at) || received_at.is_some_and(|received_at| erasure.covers(received_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Preference;

    const THRESHOLD: f64 = 0.8;
    const ERASED_AT: &str = "2026-11-20T12:00:00Z";

    /// A neighbour: preference `id` at `similarity`, with a stance voiced at `stance_at`.
    fn neighbour(
        id: &str,
        similarity: f64,
        stance: Option<Stance>,
        stance_at: &str,
    ) -> ScoredPreference {
        ScoredPreference {
            preference: Preference {
                stance,
                stance_at: stance_at.into(),
                ..Preference::for_tests(id)
            },
            score: 1.0 - similarity,
        }
    }

    fn erasures() -> HashMap<String, Erasure> {
        HashMap::from([(
            "gone".to_string(),
            Erasure {
                pseudonym: "erased-7".into(),
                erased_at: ERASED_AT.into(),
            },
        )])
    }

    struct Case {
        rule: &'static str,
        stance: Stance,
        expressed_at: &'static str,
        received_at: Option<&'static str>,
        trigger: &'static str,
        related: &'static [&'static str],
        injected: &'static [&'static str],
        neighbours: Vec<ScoredPreference>,
        adjudication: Option<Adjudication>,
        expected: Plan,
    }

    fn case(rule: &'static str, neighbours: Vec<ScoredPreference>, expected: Plan) -> Case {
        Case {
            rule,
            stance: Stance::For,
            expressed_at: "2026-11-21T09:00:00Z",
            received_at: None,
            trigger: "u1",
            related: &[],
            injected: &[],
            neighbours,
            adjudication: None,
            expected,
        }
    }

    fn verdict(id: &str, same_topic: bool, same_stance: bool) -> Option<Adjudication> {
        Some(Adjudication {
            preference_id: id.into(),
            verdict: Verdict {
                same_topic,
                same_stance,
            },
        })
    }

    /// The opinion voices preference `id` again, as what it is (for).
    fn reinforce(id: &str) -> Plan {
        voice(id, Stance::For)
    }

    fn voice(id: &str, stance: Stance) -> Plan {
        Plan::Voice {
            preference_id: id.into(),
            stance,
        }
    }

    fn add(related: &[&str]) -> Plan {
        Plan::Add {
            related_user_ids: related.iter().map(|u| u.to_string()).collect(),
            inherited: None,
        }
    }

    /// A neighbour from base persona `base`.
    fn of_base(mut hit: ScoredPreference, base: &str) -> ScoredPreference {
        hit.preference.persona_id = base.into();
        hit
    }

    fn inherit(id: &str, stance: Option<Stance>) -> Plan {
        Plan::Add {
            related_user_ids: Vec::new(),
            inherited: Some(InheritedView {
                persona_id: "elder".into(),
                preference_id: id.into(),
                opinion: id.into(),
                stance,
                strength: 0.5,
            }),
        }
    }

    const EARLIER: &str = "2026-11-20T09:00:00Z";
    const LATER: &str = "2026-11-22T09:00:00Z";

    #[test]
    fn what_an_opinion_does_to_memory() {
        let table = vec![
            case("nothing near: a new preference", vec![], add(&[])),
            case(
                "the nearest is below the threshold: a new preference",
                vec![neighbour("tea", 0.79, Some(Stance::For), EARLIER)],
                add(&[]),
            ),
            case(
                "same stance at the threshold: reinforce",
                vec![neighbour("tea", 0.8, Some(Stance::For), EARLIER)],
                reinforce("tea"),
            ),
            case(
                "no recorded stance (the original system's records): reinforce",
                vec![neighbour("tea", 0.95, None, "")],
                reinforce("tea"),
            ),
            case(
                "the first neighbour at or above the threshold is the match",
                vec![
                    neighbour("tea", 0.97, Some(Stance::For), EARLIER),
                    neighbour("coffee", 0.9, Some(Stance::Against), EARLIER),
                ],
                reinforce("tea"),
            ),
            Case {
                injected: &["tea"],
                ..case(
                    "same stance, and it was in the prompt: an echo, not evidence",
                    vec![neighbour("tea", 0.95, Some(Stance::For), EARLIER)],
                    Plan::Echo {
                        preference_id: "tea".into(),
                    },
                )
            },
            Case {
                injected: &["coffee"],
                ..case(
                    "another preference in the prompt does not make an echo",
                    vec![neighbour("tea", 0.95, Some(Stance::For), EARLIER)],
                    reinforce("tea"),
                )
            },
            case(
                "opposite stance: voiced with its own stance (the timeline decides if it is a change of mind)",
                vec![neighbour("tea", 0.95, Some(Stance::Against), EARLIER)],
                voice("tea", Stance::For),
            ),
            Case {
                injected: &["tea"],
                ..case(
                    "opposite stance is voiced even when the old one was in the prompt",
                    vec![neighbour("tea", 0.95, Some(Stance::Against), EARLIER)],
                    voice("tea", Stance::For),
                )
            },
            case(
                "opposite stance, voiced before the stance it contradicts: voiced all the same (the timeline places it in the past)",
                vec![neighbour("tea", 0.95, Some(Stance::Against), LATER)],
                voice("tea", Stance::For),
            ),
            case(
                "opposite stance, no recorded stance time: voiced",
                vec![neighbour("tea", 0.95, Some(Stance::Against), "")],
                voice("tea", Stance::For),
            ),
            Case {
                trigger: "gone",
                expressed_at: "2026-11-20T11:00:00Z",
                ..case(
                    "in reply to a user erased since: nothing",
                    vec![neighbour("tea", 0.95, Some(Stance::For), EARLIER)],
                    Plan::Erased,
                )
            },
            Case {
                trigger: "gone",
                expressed_at: "2026-11-20T13:00:00Z",
                received_at: Some("2026-11-20T11:59:00Z"),
                ..case(
                    "a message clock running fast does not escape an erasure: the server's time counts",
                    vec![],
                    Plan::Erased,
                )
            },
            Case {
                trigger: "gone",
                expressed_at: "2026-11-20T13:00:00Z",
                ..case(
                    "in reply to the same user after the erasure: evidence again",
                    vec![neighbour("tea", 0.95, Some(Stance::For), EARLIER)],
                    reinforce("tea"),
                )
            },
            case(
                "a base's view, same stance: the persona's own preference takes it over",
                vec![of_base(
                    neighbour("tea", 0.95, Some(Stance::For), EARLIER),
                    "elder",
                )],
                inherit("tea", Some(Stance::For)),
            ),
            case(
                "a base's view, opposite stance: the persona's own overrides it, never stale",
                vec![of_base(
                    neighbour("tea", 0.95, Some(Stance::Against), LATER),
                    "elder",
                )],
                inherit("tea", Some(Stance::Against)),
            ),
            Case {
                injected: &["tea"],
                ..case(
                    "a base's view that was in the prompt, repeated: an echo",
                    vec![of_base(
                        neighbour("tea", 0.95, Some(Stance::For), EARLIER),
                        "elder",
                    )],
                    Plan::Echo {
                        preference_id: "tea".into(),
                    },
                )
            },
            case(
                "the persona's own view comes first (it is listed first when it matches)",
                vec![
                    neighbour("tea", 0.9, Some(Stance::For), EARLIER),
                    of_base(
                        neighbour("tea-base", 0.95, Some(Stance::For), EARLIER),
                        "elder",
                    ),
                ],
                reinforce("tea"),
            ),
            Case {
                adjudication: verdict("tea", true, true),
                ..case(
                    "grey zone, the LLM says same topic and stance: reinforce",
                    vec![neighbour("tea", 0.65, Some(Stance::For), EARLIER)],
                    reinforce("tea"),
                )
            },
            Case {
                adjudication: verdict("tea", true, false),
                ..case(
                    "grey zone, the LLM says it contradicts: voiced against the preference's stance, whatever the stance fields say",
                    vec![neighbour("tea", 0.65, Some(Stance::For), EARLIER)],
                    voice("tea", Stance::Against),
                )
            },
            Case {
                adjudication: verdict("tea", false, false),
                ..case(
                    "grey zone, the LLM says another topic: a new preference",
                    vec![neighbour("tea", 0.65, Some(Stance::For), EARLIER)],
                    add(&[]),
                )
            },
            Case {
                adjudication: verdict("coffee", true, true),
                ..case(
                    "at or above the threshold the threshold decides, whatever was adjudicated",
                    vec![
                        neighbour("tea", 0.9, Some(Stance::Against), ""),
                        neighbour("coffee", 0.6, Some(Stance::For), EARLIER),
                    ],
                    voice("tea", Stance::For),
                )
            },
            Case {
                related: &["u2", "gone"],
                expressed_at: "2026-11-20T11:00:00Z",
                ..case(
                    "an erased user named in another's conversation from before: the pseudonym",
                    vec![],
                    add(&["u2", "erased-7"]),
                )
            },
        ];
        for case in table {
            let provenance = Provenance {
                triggering_user_id: case.trigger.into(),
                triggering_message_id: "m1".into(),
                persona_message_id: "m2".into(),
                ..Provenance::default()
            };
            let related: Vec<String> = case.related.iter().map(|u| u.to_string()).collect();
            let injected: Vec<String> = case.injected.iter().map(|u| u.to_string()).collect();
            let facts = OpinionFacts {
                persona_id: "ada",
                stance: case.stance,
                expressed_at: at(case.expressed_at),
                received_at: case.received_at.map(at),
                provenance: &provenance,
                related_user_ids: &related,
                injected_preference_ids: &injected,
            };
            let planned = plan(
                &facts,
                &case.neighbours,
                &erasures(),
                THRESHOLD,
                case.adjudication.as_ref(),
            );
            assert_eq!(planned, case.expected, "{}", case.rule);
        }
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }
}
