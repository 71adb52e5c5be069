//! A preference's past as a function of what the persona said and when, not of the order its
//! words arrived in.
//!
//! Each time the persona voices a view on the preference's topic is a [`Voicing`], kept in the
//! preference's timeline in the order it was *said*. The preference itself (its stance,
//! opinion, strength, counts, versions and their times) is [`replay`]ed from the timeline:
//! - the first voicing creates it (taking over a base persona's view, if it is one's);
//! - a voicing that agrees with the stance in force at its time reinforces that version;
//! - a voicing that contradicts it is a change of mind: the version in force goes into the
//!   history, stamped with the time of the voicing that replaced it.
//!
//! So an opinion that arrives late lands where it was said: older than the stance it
//! contradicts, it enters the history at its own time and the newer stance stays in force; a
//! late reinforcement of a past stance counts towards that past version, not the current one.
//! Two workers applying the same voicings in any order end with the same preference.
//!
//! The timeline is bounded. Past `max_voicings`, the oldest voicings are folded into the
//! [`Baseline`], and the past before `Baseline::from` is fixed: its versions are no longer
//! kept voicing by voicing, only their spans (each history entry says when its version was
//! replaced). A voicing older than that still counts towards the version in force at its time
//! when it agrees with it, exactly as in order (reinforcements commute); one that contradicts
//! it would split a version only its voicings could split, and changes nothing
//! ([`Voiced::BeforeFixedPast`]). A curation (an operator's reinforce, change of mind,
//! retraction, restore, merge, or an erasure) fixes the past the same way: it replaces what
//! was replayed, so what came before it is no longer re-ordered.

use serde::{Deserialize, Serialize};

use super::preference::{
    HistoryEntry, InheritedView, Preference, Provenance, Reinforcement, Stance,
};
use crate::timestamp::Timestamp;

/// The numbers the rules use (`store.*` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelineRules {
    /// Reinforcement curve: `s' = s + rate·(1 − s)`.
    pub reinforce_rate: f64,
    /// Strength a changed mind starts at.
    pub evolved_strength: f64,
    pub max_reinforcement_log: usize,
    pub max_evidence_users: usize,
    pub max_evolution_history: usize,
    /// Voicings kept in the timeline; older ones are folded into the baseline.
    pub max_voicings: usize,
}

/// One time the persona voiced a view on the preference's topic: an opinion ingest read in
/// one persona message.
#[derive(Debug, Clone, PartialEq)]
pub struct Voicing {
    /// When it was said: the persona message's timestamp, in UTC.
    pub at: Timestamp,
    pub stance: Option<Stance>,
    /// How strongly it was put (the extractor's reading); the strength a preference starts at
    /// when this voicing creates it.
    pub strength: f64,
    pub topic: String,
    pub opinion: String,
    pub category: String,
    pub provenance: Provenance,
    /// Users the opinion is about (erased ones by their pseudonym).
    pub related_user_ids: Vec<String>,
    /// Knowledge-graph entities the opinion is about (the message's `mentions`).
    pub related_kg_uuids: Vec<String>,
}

/// A voicing as stored (a JSON list in the preference's hash): short names, because a
/// preference keeps up to `max_voicings` of them.
#[derive(Serialize, Deserialize)]
struct StoredVoicing {
    at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    st: Option<Stance>,
    s: f64,
    n: String,
    o: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    c: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    tu: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    tm: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pm: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    sp: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    sc: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ru: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    kg: Vec<String>,
}

impl Serialize for Voicing {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredVoicing {
            at: self.at,
            st: self.stance,
            s: self.strength,
            n: self.topic.clone(),
            o: self.opinion.clone(),
            c: self.category.clone(),
            tu: self.provenance.triggering_user_id.clone(),
            tm: self.provenance.triggering_message_id.clone(),
            pm: self.provenance.persona_message_id.clone(),
            sp: self.provenance.source_platform.clone(),
            sc: self.provenance.source_channel_id.clone(),
            ru: self.related_user_ids.clone(),
            kg: self.related_kg_uuids.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Voicing {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Voicing, D::Error> {
        let stored = StoredVoicing::deserialize(deserializer)?;
        Ok(Voicing {
            at: stored.at,
            stance: stored.st,
            strength: stored.s,
            topic: stored.n,
            opinion: stored.o,
            category: stored.c,
            provenance: Provenance {
                triggering_user_id: stored.tu,
                triggering_message_id: stored.tm,
                persona_message_id: stored.pm,
                source_platform: stored.sp,
                source_channel_id: stored.sc,
            },
            related_user_ids: stored.ru,
            related_kg_uuids: stored.kg,
        })
    }
}

impl Voicing {
    /// The order voicings are replayed in: when they were said, then (for the same instant) a
    /// fixed tie-break, so every replay of the same voicings agrees.
    fn order_key(&self) -> (Timestamp, &str, &str, &str, &str, u8) {
        (
            self.at,
            &self.provenance.source_platform,
            &self.provenance.source_channel_id,
            &self.provenance.persona_message_id,
            &self.topic,
            match self.stance {
                None => 0,
                Some(Stance::For) => 1,
                Some(Stance::Against) => 2,
            },
        )
    }

    /// Whether both come from the same persona message: one message is one piece of evidence
    /// for a preference, however many of its opinions land there.
    fn same_message(&self, other: &Voicing) -> bool {
        !self.provenance.persona_message_id.is_empty()
            && self.provenance.persona_message_id == other.provenance.persona_message_id
            && self.provenance.source_platform == other.provenance.source_platform
            && self.provenance.source_channel_id == other.provenance.source_channel_id
    }
}

/// Where the timeline starts: what came before its voicings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The past before this instant is fixed: voicings older than it land nowhere. `None`: the
    /// timeline holds the preference's whole past.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Timestamp>,
    /// The preference as it stood at `from`; `None`: it begins with its first voicing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Preference>,
    /// A base persona's view the first voicing takes over (a layered persona voicing a topic
    /// its base holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited: Option<InheritedView>,
}

impl Baseline {
    /// Nothing to store: the timeline is the preference's whole past.
    pub fn is_empty(&self) -> bool {
        self.from.is_none() && self.state.is_none() && self.inherited.is_none()
    }
}

/// A preference's past: where it starts and what was said since, in the order it was said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub baseline: Baseline,
    /// Sorted by [`Voicing::order_key`].
    pub voicings: Vec<Voicing>,
}

/// What the store keeps of a preference that replay does not derive.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub id: String,
    pub persona_id: String,
    pub created_at: String,
}

/// Where a voicing landed in the preference's past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// It created the preference: the first voicing of version 1.
    Created,
    /// It agrees with the stance in force now and was said while it was: a reinforcement of
    /// the current version.
    Reinforced,
    /// It opened the current version: a change of mind.
    ChangedMind,
    /// It was said while an earlier version was in force: that version's reinforcement, or a
    /// contradiction that became a past version of its own. The stance in force now stays.
    Past,
}

/// The preference replayed from its timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub preference: Preference,
    /// The voicing that opened the current version (whose topic the preference's vector is
    /// the embedding of); `None` when the baseline did.
    pub opener: Option<usize>,
    /// For each voicing, the version it landed in and whether it opened it.
    pub landed: Vec<(u64, bool)>,
}

/// Replays the preference from `baseline` and `voicings` (in the order they were said).
pub fn replay(
    identity: &Identity,
    baseline: &Baseline,
    voicings: &[Voicing],
    rules: &TimelineRules,
) -> Option<Replayed> {
    let mut state = baseline.state.clone();
    let mut opener = None;
    let mut landed = Vec::with_capacity(voicings.len());
    for (index, voicing) in voicings.iter().enumerate() {
        match &mut state {
            None => {
                let created = create(identity, baseline.inherited.as_ref(), voicing);
                landed.push((created.version, true));
                state = Some(created);
                opener = Some(index);
            }
            Some(preference) if agrees(preference.stance, voicing.stance) => {
                reinforce(preference, voicing, rules);
                landed.push((preference.version, false));
            }
            Some(preference) => {
                change_mind(preference, voicing, rules);
                landed.push((preference.version, true));
                opener = Some(index);
            }
        }
    }
    let mut preference = state?;
    preference.id = identity.id.clone();
    preference.persona_id = identity.persona_id.clone();
    preference.created_at = identity.created_at.clone();
    Some(Replayed {
        preference,
        opener,
        landed,
    })
}

/// What voicing one more time did to a preference.
#[derive(Debug, Clone, PartialEq)]
pub enum Voiced {
    /// Older than the fixed past ([`Baseline::from`]) and contradicting the version in force
    /// at its time (or said before any version kept): it changes nothing.
    BeforeFixedPast,
    /// Its persona message had voiced this preference already (one message is one piece of
    /// evidence): nothing changes. Where that earlier voicing stands.
    Duplicate(Placement),
    Changed(Box<Change>),
}

/// A preference changed by a voicing: what to store.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub placement: Placement,
    /// The timeline with the voicing in its place (the oldest folded into the baseline past
    /// `max_voicings`).
    pub timeline: Timeline,
    pub preference: Preference,
    /// When another voicing now opens the current version: its topic, whose embedding becomes
    /// the preference's vector. `None`: the vector stays.
    pub new_vector_topic: Option<String>,
}

/// Places `voicing` in the preference's `timeline` and replays it.
pub fn voice(
    identity: &Identity,
    timeline: &Timeline,
    voicing: Voicing,
    rules: &TimelineRules,
) -> Voiced {
    if timeline.baseline.from.is_some_and(|from| voicing.at < from) {
        return into_fixed_past(identity, timeline, voicing, rules);
    }
    let before = replay(identity, &timeline.baseline, &timeline.voicings, rules);
    if let Some(index) = timeline
        .voicings
        .iter()
        .position(|v| v.same_message(&voicing))
        && let Some(before) = &before
    {
        return Voiced::Duplicate(placement_of(&timeline.baseline, before, index, true));
    }
    let opener_before = before
        .as_ref()
        .and_then(|replayed| replayed.opener)
        .map(|index| timeline.voicings[index].clone());

    let mut voicings = timeline.voicings.clone();
    let at = voicings.partition_point(|v| v.order_key() <= voicing.order_key());
    voicings.insert(at, voicing);
    let after = replay(identity, &timeline.baseline, &voicings, rules)
        .expect("a timeline with a voicing replays to a preference");
    let placement = placement_of(&timeline.baseline, &after, at, before.is_some());
    let opener_after = after.opener.map(|index| &voicings[index]);
    let new_vector_topic = match (opener_before.as_ref(), opener_after) {
        (Some(old), Some(new)) if old.order_key() == new.order_key() => None,
        (_, Some(new)) => Some(new.topic.clone()),
        (_, None) => None,
    };
    let timeline = compacted(
        identity,
        Timeline {
            baseline: timeline.baseline.clone(),
            voicings,
        },
        rules,
    );
    Voiced::Changed(Box::new(Change {
        placement,
        timeline,
        preference: after.preference,
        new_vector_topic,
    }))
}

/// A voicing older than the fixed past: it counts towards the version in force at its time when
/// it agrees with it (the current version of the baseline since its `stance_at`, or the history
/// entry replaced after it). Reinforcements commute (`n` of them take a strength `s` to
/// `1 − (1 − s)(1 − rate)^n` in any order), so strength and counts come out as in order.
fn into_fixed_past(
    identity: &Identity,
    timeline: &Timeline,
    voicing: Voicing,
    rules: &TimelineRules,
) -> Voiced {
    let Some(mut state) = timeline.baseline.state.clone() else {
        return Voiced::BeforeFixedPast;
    };
    let current_since = Timestamp::parse(&state.stance_at).ok();
    let landed = if current_since.is_none_or(|since| voicing.at >= since) {
        if !agrees(state.stance, voicing.stance) {
            return Voiced::BeforeFixedPast;
        }
        reinforce(&mut state, &voicing, rules);
        state.version
    } else {
        let replaced_after = |entry: &HistoryEntry| {
            Timestamp::parse(&entry.timestamp).is_ok_and(|replaced| voicing.at < replaced)
        };
        let Some(index) = state.evolution_history.iter().position(replaced_after) else {
            return Voiced::BeforeFixedPast;
        };
        if index == 0 && state.history_entries_dropped > 0 {
            // When the oldest kept version began is not known: it may not have been in force.
            return Voiced::BeforeFixedPast;
        }
        let entry = &mut state.evolution_history[index];
        let held = entry.old_stance.as_deref().and_then(Stance::parse);
        if !agrees(held, voicing.stance) {
            return Voiced::BeforeFixedPast;
        }
        entry.old_reinforcement_count = Some(entry.old_reinforcement_count.unwrap_or(0) + 1);
        entry.old_strength = entry
            .old_strength
            .map(|s| clamp_strength(s + rules.reinforce_rate * (1.0 - s)));
        let version = entry.version.unwrap_or(0);
        add_evidence(&mut state, &voicing.provenance.triggering_user_id, rules);
        version
    };
    let baseline = Baseline {
        from: timeline.baseline.from,
        state: Some(state),
        inherited: None,
    };
    let after = replay(identity, &baseline, &timeline.voicings, rules)
        .expect("a baseline with a state replays to a preference");
    Voiced::Changed(Box::new(Change {
        placement: if landed == after.preference.version {
            Placement::Reinforced
        } else {
            Placement::Past
        },
        timeline: Timeline {
            baseline,
            voicings: timeline.voicings.clone(),
        },
        preference: after.preference,
        new_vector_topic: None,
    }))
}

/// Where the voicing at `index` of a replay stands; `existed`: the preference existed before it.
fn placement_of(
    baseline: &Baseline,
    replayed: &Replayed,
    index: usize,
    existed: bool,
) -> Placement {
    let (version, opened) = replayed.landed[index];
    if version != replayed.preference.version {
        Placement::Past
    } else if !opened {
        Placement::Reinforced
    } else if index == 0 && baseline.state.is_none() {
        // The preference begins with it. Arriving after later words of the same stance, it is
        // their first voicing: still no change of mind.
        if existed {
            Placement::Reinforced
        } else {
            Placement::Created
        }
    } else {
        Placement::ChangedMind
    }
}

/// The timeline with its oldest voicings folded into the baseline until at most
/// `max_voicings` remain; the past before the last one folded is fixed from then on.
fn compacted(identity: &Identity, mut timeline: Timeline, rules: &TimelineRules) -> Timeline {
    let keep = rules.max_voicings.max(1);
    if timeline.voicings.len() <= keep {
        return timeline;
    }
    let fold = timeline.voicings.len() - keep;
    let folded: Vec<Voicing> = timeline.voicings.drain(..fold).collect();
    let state = replay(identity, &timeline.baseline, &folded, rules).map(|r| r.preference);
    timeline.baseline = Baseline {
        from: folded.last().map(|v| v.at),
        state,
        inherited: None,
    };
    timeline
}

/// Whether a voicing with `voiced` agrees with a version holding `held`: a stance unknown on
/// either side (the original system's records) agrees.
fn agrees(held: Option<Stance>, voiced: Option<Stance>) -> bool {
    match (held, voiced) {
        (Some(held), Some(voiced)) => held == voiced,
        _ => true,
    }
}

fn create(identity: &Identity, inherited: Option<&InheritedView>, voicing: &Voicing) -> Preference {
    let at = voicing.at.to_rfc3339();
    let mut preference = Preference {
        id: identity.id.clone(),
        persona_id: identity.persona_id.clone(),
        name: voicing.topic.clone(),
        opinion: voicing.opinion.clone(),
        category: voicing.category.clone(),
        strength: clamp_strength(voicing.strength),
        stance: voicing.stance,
        stance_at: at.clone(),
        provenance: voicing.provenance.clone(),
        related_user_ids: voicing.related_user_ids.clone(),
        related_kg_uuids: voicing.related_kg_uuids.clone(),
        evidence_user_ids: Vec::new(),
        evidence_users_dropped: 0,
        evolution_history: Vec::new(),
        history_entries_dropped: 0,
        version: 1,
        inherited_from: String::new(),
        curated: false,
        decayed_strength: None,
        active: true,
        created_at: identity.created_at.clone(),
        last_reinforced: at.clone(),
        reinforcement_count: 0,
        reinforcements: Vec::new(),
    };
    if !voicing.provenance.triggering_user_id.is_empty() {
        preference
            .evidence_user_ids
            .push(voicing.provenance.triggering_user_id.clone());
    }
    if let Some(base) = inherited {
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
                timestamp: at,
                reason: format!(
                    "overrides the view of base persona {} (preference {})",
                    base.persona_id, base.preference_id
                ),
            });
            preference.version = 2;
        }
    }
    preference
}

/// Counts `voicing` towards the preference's current version. In a replay voicings come in
/// the order said; one older than the fixed past comes after later ones, so the latest time
/// and the log are kept in the order said, not in the order of arrival.
fn reinforce(preference: &mut Preference, voicing: &Voicing, rules: &TimelineRules) {
    let strength = preference.strength;
    preference.strength = clamp_strength(strength + rules.reinforce_rate * (1.0 - strength));
    preference.reinforcement_count += 1;
    let at = voicing.at.to_rfc3339();
    let later_than_last =
        Timestamp::parse(&preference.last_reinforced).map_or(true, |last| last <= voicing.at);
    if later_than_last {
        preference.last_reinforced = at.clone();
    }
    add_evidence(preference, &voicing.provenance.triggering_user_id, rules);
    if rules.max_reinforcement_log > 0 {
        let position = preference.reinforcements.partition_point(|logged| {
            Timestamp::parse(&logged.timestamp).map_or(true, |logged| logged <= voicing.at)
        });
        preference.reinforcements.insert(
            position,
            Reinforcement {
                timestamp: at,
                provenance: voicing.provenance.clone(),
            },
        );
        let excess = preference
            .reinforcements
            .len()
            .saturating_sub(rules.max_reinforcement_log);
        preference.reinforcements.drain(..excess);
    }
}

fn change_mind(preference: &mut Preference, voicing: &Voicing, rules: &TimelineRules) {
    let at = voicing.at.to_rfc3339();
    preference.evolution_history.push(HistoryEntry {
        action: Some("evolution".into()),
        version: Some(preference.version),
        old_opinion: Some(preference.opinion.clone()),
        old_stance: Some(preference.stance.map(Stance::as_str).unwrap_or("").into()),
        old_strength: Some(preference.strength),
        old_active: Some(preference.active),
        old_reinforcement_count: Some(preference.reinforcement_count),
        restored: None,
        merged: None,
        merged_into: None,
        new_opinion: Some(voicing.opinion.clone()),
        timestamp: at.clone(),
        reason: evolution_reason(&voicing.provenance),
    });
    let excess = preference
        .evolution_history
        .len()
        .saturating_sub(rules.max_evolution_history.max(1));
    preference.evolution_history.drain(..excess);
    preference.history_entries_dropped += excess as u64;
    preference.version += 1;
    // A version the persona voiced, not one an administrator wrote.
    preference.curated = false;
    preference.opinion = voicing.opinion.clone();
    preference.stance = voicing.stance;
    preference.stance_at = at.clone();
    preference.strength = clamp_strength(rules.evolved_strength);
    preference.reinforcement_count = 0;
    preference.last_reinforced = at;
    add_evidence(preference, &voicing.provenance.triggering_user_id, rules);
}

/// Adds `user` to the evidence (once), keeping the newest `max_evidence_users`.
fn add_evidence(preference: &mut Preference, user: &str, rules: &TimelineRules) {
    if user.is_empty() || preference.evidence_user_ids.iter().any(|u| u == user) {
        return;
    }
    preference.evidence_user_ids.push(user.to_string());
    let excess = preference
        .evidence_user_ids
        .len()
        .saturating_sub(rules.max_evidence_users.max(1));
    preference.evidence_user_ids.drain(..excess);
    preference.evidence_users_dropped += excess as u64;
}

fn clamp_strength(strength: f64) -> f64 {
    if strength.is_nan() {
        0.0
    } else {
        strength.clamp(0.0, 1.0)
    }
}

/// The history entry's reason for a change of mind: where it happened.
pub fn evolution_reason(provenance: &Provenance) -> String {
    let or = |text: &str, fallback: &'static str| -> String {
        if text.is_empty() {
            fallback.to_string()
        } else {
            text.to_string()
        }
    };
    format!(
        "changed mind in persona message {} (replying to {} from user {})",
        provenance.persona_message_id,
        or(&provenance.triggering_message_id, "nothing"),
        or(&provenance.triggering_user_id, "unknown"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: TimelineRules = TimelineRules {
        reinforce_rate: 0.15,
        evolved_strength: 0.6,
        max_reinforcement_log: 20,
        max_evidence_users: 200,
        max_evolution_history: 10,
        max_voicings: 32,
    };

    fn identity() -> Identity {
        Identity {
            id: "p1".into(),
            persona_id: "ada".into(),
            created_at: "2026-11-25T00:00:00Z".into(),
        }
    }

    /// A voicing at minute `minute` of 2026-11-20 08:00, from persona message `m<minute>`.
    fn said(minute: u32, stance: Stance, opinion: &str) -> Voicing {
        Voicing {
            at: Timestamp::parse(&format!("2026-11-20T08:{minute:02}:00Z")).unwrap(),
            stance: Some(stance),
            strength: 0.7,
            topic: "cilantro".into(),
            opinion: opinion.into(),
            category: "culinary".into(),
            provenance: Provenance {
                triggering_user_id: format!("u{minute}"),
                triggering_message_id: format!("q{minute}"),
                persona_message_id: format!("m{minute}"),
                source_platform: "discord".into(),
                source_channel_id: "c1".into(),
            },
            related_user_ids: Vec::new(),
            related_kg_uuids: Vec::new(),
        }
    }

    use Stance::{Against, For};

    /// Voices each in the given order, as the store would one delivery at a time.
    fn voice_all(
        voicings: &[Voicing],
        rules: &TimelineRules,
    ) -> (Timeline, Preference, Vec<Placement>) {
        let mut timeline = Timeline::default();
        let mut preference = None;
        let mut placements = Vec::new();
        for voicing in voicings {
            match voice(&identity(), &timeline, voicing.clone(), rules) {
                Voiced::BeforeFixedPast => panic!("nothing is folded in these"),
                Voiced::Duplicate(placement) => placements.push(placement),
                Voiced::Changed(change) => {
                    placements.push(change.placement);
                    timeline = change.timeline;
                    preference = Some(change.preference);
                }
            }
        }
        (
            timeline,
            preference.expect("something was voiced"),
            placements,
        )
    }

    /// The seven voicings of a persona that changes its mind twice about cilantro.
    fn story() -> Vec<Voicing> {
        vec![
            said(1, Against, "cilantro tastes of soap"),
            said(5, Against, "still soap"),
            said(9, For, "cilantro is wonderful now"),
            said(12, For, "love it in salsa"),
            said(20, For, "more cilantro please"),
            said(30, Against, "off cilantro again"),
            said(41, Against, "no cilantro for me"),
        ]
    }

    #[test]
    fn in_order_the_story_reads_as_three_versions() {
        let (_, preference, placements) = voice_all(&story(), &RULES);
        use Placement::*;
        assert_eq!(
            placements,
            vec![
                Created,
                Reinforced,
                ChangedMind,
                Reinforced,
                Reinforced,
                ChangedMind,
                Reinforced
            ]
        );
        assert_eq!(preference.stance, Some(Against));
        assert_eq!(preference.opinion, "off cilantro again");
        assert_eq!(preference.version, 3);
        assert_eq!(preference.stance_at, "2026-11-20T08:30:00Z");
        assert_eq!(preference.last_reinforced, "2026-11-20T08:41:00Z");
        assert_eq!(
            preference.reinforcement_count, 1,
            "the current version's own"
        );
        assert!((preference.strength - (0.6 + 0.15 * 0.4)).abs() < 1e-12);
        type Entry<'a> = (Option<u64>, Option<&'a str>, Option<u64>, &'a str);
        let history: Vec<Entry> = preference
            .evolution_history
            .iter()
            .map(|h| {
                (
                    h.version,
                    h.old_stance.as_deref(),
                    h.old_reinforcement_count,
                    h.timestamp.as_str(),
                )
            })
            .collect();
        assert_eq!(
            history,
            vec![
                (Some(1), Some("against"), Some(1), "2026-11-20T08:09:00Z"),
                (Some(2), Some("for"), Some(2), "2026-11-20T08:30:00Z"),
            ]
        );
        let v1 = &preference.evolution_history[0];
        assert!((v1.old_strength.unwrap() - (0.7 + 0.15 * 0.3)).abs() < 1e-12);
        assert_eq!(
            v1.reason,
            "changed mind in persona message m9 (replying to q9 from user u9)"
        );
        assert_eq!(
            preference.evidence_user_ids,
            ["u1", "u5", "u9", "u12", "u20", "u30", "u41"]
        );
        assert_eq!(preference.reinforcements.len(), 4);
    }

    /// Every arrival order of the story ends as in-order delivery does: the memory is a
    /// function of what was said and when.
    #[test]
    fn any_arrival_order_ends_with_the_same_preference() {
        let story = story();
        let (_, in_order, _) = voice_all(&story, &RULES);
        let mut orders = 0;
        permutations(story.len(), &mut |order| {
            let shuffled: Vec<Voicing> = order.iter().map(|&i| story[i].clone()).collect();
            let (timeline, preference, _) = voice_all(&shuffled, &RULES);
            assert_eq!(preference, in_order, "arrival order {order:?}");
            assert_eq!(
                timeline.voicings, story,
                "the timeline is in the order said"
            );
            orders += 1;
        });
        assert_eq!(orders, 5040);
    }

    /// Heap's algorithm: calls `visit` with every permutation of `0..n`.
    fn permutations(n: usize, visit: &mut dyn FnMut(&[usize])) {
        let mut items: Vec<usize> = (0..n).collect();
        let mut counters = vec![0; n];
        visit(&items);
        let mut i = 0;
        while i < n {
            if counters[i] < i {
                if i % 2 == 0 {
                    items.swap(0, i);
                } else {
                    items.swap(counters[i], i);
                }
                visit(&items);
                counters[i] += 1;
                i = 0;
            } else {
                counters[i] = 0;
                i += 1;
            }
        }
    }

    struct Late {
        rule: &'static str,
        first: Vec<Voicing>,
        late: Voicing,
        placement: Placement,
        stance: Stance,
        version: u64,
        reinforcement_count: u64,
        /// (version, old stance, its reinforcements, replaced at) per history entry.
        history: Vec<(u64, &'static str, u64, &'static str)>,
    }

    #[test]
    fn where_a_late_voicing_lands() {
        let table = vec![
            Late {
                rule: "older than the stance it contradicts: a past version at its own time",
                first: vec![said(30, For, "wonderful")],
                late: said(5, Against, "disgusting"),
                placement: Placement::Past,
                stance: For,
                version: 2,
                reinforcement_count: 0,
                history: vec![(1, "against", 0, "2026-11-20T08:30:00Z")],
            },
            Late {
                rule: "a late reinforcement of a past stance counts towards that version",
                first: vec![said(1, Against, "soap"), said(30, For, "wonderful")],
                late: said(5, Against, "still soap"),
                placement: Placement::Past,
                stance: For,
                version: 2,
                reinforcement_count: 0,
                history: vec![(1, "against", 1, "2026-11-20T08:30:00Z")],
            },
            Late {
                rule: "a contradiction inside the current version splits it: the stance after it is a change of mind",
                first: vec![said(1, For, "fine"), said(30, For, "lovely")],
                late: said(10, Against, "awful"),
                placement: Placement::Past,
                stance: For,
                version: 3,
                reinforcement_count: 0,
                history: vec![
                    (1, "for", 0, "2026-11-20T08:10:00Z"),
                    (2, "against", 0, "2026-11-20T08:30:00Z"),
                ],
            },
            Late {
                rule: "newer than the stance it contradicts: a change of mind",
                first: vec![said(1, For, "fine")],
                late: said(10, Against, "awful"),
                placement: Placement::ChangedMind,
                stance: Against,
                version: 2,
                reinforcement_count: 0,
                history: vec![(1, "for", 0, "2026-11-20T08:10:00Z")],
            },
            Late {
                rule: "the current stance said earlier than first heard: the change of mind moves back",
                first: vec![said(1, For, "fine"), said(30, Against, "awful")],
                late: said(10, Against, "bad"),
                placement: Placement::ChangedMind,
                stance: Against,
                version: 2,
                reinforcement_count: 1,
                history: vec![(1, "for", 0, "2026-11-20T08:10:00Z")],
            },
            Late {
                rule: "the first stance said earlier than first heard: a reinforcement, no change of mind",
                first: vec![said(30, For, "fine")],
                late: said(10, For, "good"),
                placement: Placement::Reinforced,
                stance: For,
                version: 1,
                reinforcement_count: 1,
                history: vec![],
            },
            Late {
                rule: "a repeat of the same persona message changes nothing",
                first: vec![said(1, For, "fine"), said(5, For, "good")],
                late: Voicing {
                    opinion: "reworded".into(),
                    ..said(5, For, "good")
                },
                placement: Placement::Reinforced,
                stance: For,
                version: 1,
                reinforcement_count: 1,
                history: vec![],
            },
        ];
        for case in table {
            let mut all = case.first.clone();
            all.push(case.late.clone());
            let (_, preference, placements) = voice_all(&all, &RULES);
            assert_eq!(placements.last(), Some(&case.placement), "{}", case.rule);
            assert_eq!(preference.stance, Some(case.stance), "{}", case.rule);
            assert_eq!(preference.version, case.version, "{}", case.rule);
            assert_eq!(
                preference.reinforcement_count, case.reinforcement_count,
                "{}",
                case.rule
            );
            let history: Vec<(u64, &str, u64, &str)> = preference
                .evolution_history
                .iter()
                .map(|h| {
                    (
                        h.version.unwrap(),
                        h.old_stance.as_deref().unwrap(),
                        h.old_reinforcement_count.unwrap(),
                        h.timestamp.as_str(),
                    )
                })
                .collect();
            assert_eq!(history, case.history, "{}", case.rule);
        }
    }

    #[test]
    fn the_timeline_is_bounded_and_the_past_before_it_fixed() {
        let rules = TimelineRules {
            max_voicings: 3,
            ..RULES
        };
        let story = story();
        let (timeline, bounded, _) = voice_all(&story, &rules);
        let (_, whole, _) = voice_all(&story, &RULES);
        assert_eq!(bounded, whole, "in order, folding changes nothing");
        assert_eq!(timeline.voicings, story[4..], "the newest three are kept");
        assert_eq!(
            timeline.baseline.from,
            Some(story[3].at),
            "the past is fixed up to the last one folded"
        );
        match voice(&identity(), &timeline, said(2, For, "too late"), &rules) {
            Voiced::BeforeFixedPast => {}
            other => {
                panic!("a contradiction older than the fixed past would split a version: {other:?}")
            }
        }
        // Agreeing with the version in force at its time, it counts towards that version as in
        // order: here the first version (against), replaced at minute 9.
        let Voiced::Changed(change) =
            voice(&identity(), &timeline, said(3, Against, "soap"), &rules)
        else {
            panic!("an agreeing voicing older than the fixed past counts");
        };
        let mut with_it = story.clone();
        with_it.insert(1, said(3, Against, "soap"));
        let (_, in_order, _) = voice_all(&with_it, &RULES);
        assert_eq!(change.placement, Placement::Past);
        assert_eq!(
            change.preference.evolution_history,
            in_order.evolution_history
        );
        assert_eq!(change.preference.strength, in_order.strength);
        assert_eq!(
            change.preference.reinforcement_count,
            in_order.reinforcement_count
        );
        // Inside the kept window, a late voicing still lands in its place.
        let Voiced::Changed(change) =
            voice(&identity(), &timeline, said(25, Against, "meh"), &rules)
        else {
            panic!("a voicing inside the window must land");
        };
        assert_eq!(
            change.placement,
            Placement::ChangedMind,
            "said before the change of mind was first heard: the change of mind moves back"
        );
        assert_eq!(change.preference.stance_at, "2026-11-20T08:25:00Z");
    }

    #[test]
    fn a_base_view_is_taken_over_or_overridden_by_the_first_voicing() {
        let base = InheritedView {
            persona_id: "elder".into(),
            preference_id: "b1".into(),
            opinion: "cilantro is great".into(),
            stance: Some(For),
            strength: 0.9,
        };
        let timeline = Timeline {
            baseline: Baseline {
                inherited: Some(base.clone()),
                ..Baseline::default()
            },
            voicings: Vec::new(),
        };
        let Voiced::Changed(change) =
            voice(&identity(), &timeline, said(5, Against, "soap"), &RULES)
        else {
            panic!("the first voicing creates");
        };
        assert_eq!(change.placement, Placement::Created);
        let preference = &change.preference;
        assert_eq!(preference.inherited_from, "elder/b1");
        assert_eq!(preference.version, 2, "the base's view is version 1");
        assert_eq!(
            preference.evolution_history[0].action.as_deref(),
            Some("override")
        );
        // An earlier voicing arriving later is the one that overrode the base.
        let Voiced::Changed(change) = voice(
            &identity(),
            &change.timeline,
            said(2, Against, "soapy"),
            &RULES,
        ) else {
            panic!("lands");
        };
        assert_eq!(change.placement, Placement::Reinforced);
        assert_eq!(change.preference.opinion, "soapy");
        assert_eq!(change.preference.evolution_history.len(), 1);
        assert_eq!(change.preference.reinforcement_count, 1);
    }

    #[test]
    fn the_vector_follows_the_voicing_that_opened_the_current_version() {
        let mut first = said(1, For, "fine");
        first.topic = "coriander".into();
        let mut second = said(30, Against, "awful");
        second.topic = "cilantro leaves".into();
        let (timeline, _, _) = voice_all(&[first.clone()], &RULES);
        let Voiced::Changed(change) = voice(&identity(), &timeline, second, &RULES) else {
            panic!()
        };
        assert_eq!(change.new_vector_topic.as_deref(), Some("cilantro leaves"));
        // A reinforcement of the current version leaves the vector as it is.
        let Voiced::Changed(change) = voice(
            &identity(),
            &change.timeline,
            said(40, Against, "still awful"),
            &RULES,
        ) else {
            panic!()
        };
        assert_eq!(change.new_vector_topic, None);
        // A late contradiction splitting the current version: the voicing after it opens it now.
        let Voiced::Changed(change) = voice(
            &identity(),
            &change.timeline,
            said(35, For, "fine again"),
            &RULES,
        ) else {
            panic!()
        };
        assert_eq!(change.placement, Placement::Past);
        assert_eq!(change.new_vector_topic.as_deref(), Some("cilantro"));
        assert_eq!(change.preference.opinion, "still awful");
    }

    #[test]
    fn voicings_round_trip_in_their_short_stored_form() {
        let voicing = said(7, Against, "soap");
        let text = serde_json::to_string(&voicing).unwrap();
        assert_eq!(
            text,
            r#"{"at":"2026-11-20T08:07:00Z","st":"against","s":0.7,"n":"cilantro","o":"soap","c":"culinary","tu":"u7","tm":"q7","pm":"m7","sp":"discord","sc":"c1"}"#
        );
        assert_eq!(serde_json::from_str::<Voicing>(&text).unwrap(), voicing);
    }
}
