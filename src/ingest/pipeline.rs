//! What one valid event does to the store. It reads as three steps per opinion, after the
//! slow part:
//! - **read** (parallel, no lock): extract opinions from each persona message, redact secrets,
//!   embed each opinion's topic;
//! - then, holding the persona's lock (`store::lock`, a scoped guard) in the persona's turn
//!   within this worker (`turns.rs`), for each opinion in turn:
//!   - **gather** what the rules need: the erasures in force, the persona's nearest
//!     preferences, the LLM's verdict on a grey-zone one;
//!   - **plan** with the pure rules: `model::decide::plan` (erased, echo, add, or one more
//!     voicing of a preference) and, for a voicing, `model::timeline::voice` over the
//!     preference's timeline (which is read here) — where it lands, and what the preference
//!     becomes;
//!   - **apply** the plan: the one place an effect is written, under an effect id and fenced by
//!     the lock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::event::{ConversationEvent, Role};
use super::turns::Turn;
use crate::embed::{EmbedError, Embedder};
use crate::extract::{
    ExtractError, ExtractedOpinion, ExtractionInput, Extractor, TurnText, people, redact,
};
use crate::model::decide::{self, OpinionFacts, Plan};
use crate::model::timeline::{self, Change, Placement, Voiced, Voicing};
use crate::store::{
    Erasure, InheritedView, LockToken, MessageEffects, PersonaLock, PreferenceStore, Provenance,
    ScoredPreference, Stance, StoreError, StoredTimeline, WriteGuard,
};
use crate::telemetry;
use crate::timestamp::Timestamp;

/// How many earlier turns the extractor sees as context.
const CONTEXT_TURNS: usize = 12;

/// A failure to process an event that a later delivery may not have.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("extraction: {0}")]
    Extract(#[from] ExtractError),
    #[error("embedding: {0}")]
    Embed(#[from] EmbedError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("persona {0} stayed locked by another worker past store.lock_patience_ms")]
    LockBusy(String),
}

impl PipelineError {
    /// Retryable errors nak the message; the rest dead-letter it at once.
    pub fn is_retryable(&self) -> bool {
        match self {
            PipelineError::Extract(e) => e.is_retryable(),
            PipelineError::Embed(e) => e.is_retryable(),
            PipelineError::Store(e) => e.is_retryable(),
            PipelineError::LockBusy(_) => true,
        }
    }

    /// Bounded label for metrics.
    pub fn stage(&self) -> &'static str {
        match self {
            PipelineError::Extract(_) => "extract",
            PipelineError::Embed(_) => "embed",
            PipelineError::Store(_) => "store",
            PipelineError::LockBusy(_) => "lock",
        }
    }
}

/// The decision taken for one opinion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Reinforce,
    Evolve,
    Add,
    /// Said while an earlier stance was in force (its event arrived late): it lands in the
    /// past at its own time (a past version's reinforcement, or a contradiction that became a
    /// past version of its own) and the newer stance stays in force. Nothing is written only
    /// when it is older than the preference's fixed past (`store.max_voicings`, or a
    /// curation since).
    Stale,
    /// The persona restated a preference that was injected into its prompt for that very
    /// message: a reminder repeated, not new evidence, so nothing is written. Without this,
    /// injection would feed reinforcement and the strongest opinions would only grow stronger.
    Echo,
    /// Voiced in reply to a user since erased (`purge_user`), in a conversation from before
    /// the erasure: no longer evidence, so nothing is written. Such events can still arrive
    /// after an erasure (waiting in the backlog, redelivered, or replayed from the dead
    /// letters); without this they would bring the erased id back.
    Erased,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Reinforce => "reinforce",
            Action::Evolve => "evolve",
            Action::Add => "add",
            Action::Stale => "stale",
            Action::Echo => "echo",
            Action::Erased => "erased",
        }
    }

    /// Whether the action writes to the store (and so can be a duplicate of an earlier write).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Action::Reinforce | Action::Evolve | Action::Add | Action::Stale
        )
    }

    /// What a voicing's place in the preference's past is called.
    fn of(placement: Placement) -> Action {
        match placement {
            Placement::Created => Action::Add,
            Placement::Reinforced => Action::Reinforce,
            Placement::ChangedMind => Action::Evolve,
            Placement::Past => Action::Stale,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    pub action: Action,
    pub preference_id: String,
    pub name: String,
    /// False when this effect had been applied by an earlier delivery; always false for the
    /// actions that write nothing (`echo`, `erased`, and a `stale` older than the fixed past).
    pub applied: bool,
    pub best_similarity: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct EventOutcome {
    pub opinions: usize,
    pub dropped_redacted: usize,
    pub decisions: Vec<Decision>,
    /// The event names a user erased after some of its messages were written: once settled,
    /// it is erased from the events stream.
    pub predates_an_erasure: bool,
    /// The event's persona was deleted (`delete_persona`) after some of its messages were
    /// written: nothing was decided or written, and once acked it is erased from the stream.
    pub predates_the_personas_deletion: bool,
}

pub struct PipelineSettings {
    pub match_threshold: f64,
    /// Grey-zone adjudication by the LLM (`extract::adjudicate`), when configured.
    pub adjudicator: Option<Arc<dyn crate::extract::adjudicate::Adjudicator>>,
    pub max_redacted_share: f64,
    pub lock_patience: Duration,
}

#[derive(Clone)]
pub struct Pipeline {
    store: PreferenceStore,
    extractor: Arc<dyn Extractor>,
    embedder: Arc<dyn Embedder>,
    locks: PersonaLock,
    settings: Arc<PipelineSettings>,
}

/// One opinion of a draft persona message and what it would do to memory (`Pipeline::check`).
#[derive(Debug, Clone)]
pub struct DraftFinding {
    pub opinion: ExtractedOpinion,
    pub verdict: DraftVerdict,
}

/// What a draft's opinion would do.
#[derive(Debug, Clone)]
pub enum DraftVerdict {
    /// It contradicts this stored preference (its own or a base's).
    Contradicts(ScoredPreference),
    /// It says again what this stored preference holds.
    Restates(ScoredPreference),
    /// Nothing stored is on its topic: it would be a new preference.
    New,
}

/// What the rules need to know about one candidate besides the erasures (`Pipeline::gather`).
#[derive(Default)]
struct Gathered {
    /// The persona's preferences nearest to the candidate's topic, nearest first.
    neighbours: Vec<ScoredPreference>,
    /// The LLM's verdict on a grey-zone neighbour.
    adjudication: Option<decide::Adjudication>,
}

impl Gathered {
    fn best_similarity(&self) -> Option<f64> {
        self.neighbours.first().map(ScoredPreference::similarity)
    }

    /// The topic of neighbour `id` ("" when it is not one).
    fn name_of(&self, id: &str) -> String {
        self.neighbours
            .iter()
            .find(|hit| hit.preference.id == id)
            .map(|hit| hit.preference.name.clone())
            .unwrap_or_default()
    }
}

/// What one candidate comes to, decided by the pure rules (`decide::plan`, `model::timeline`)
/// and ready to write (`Pipeline::apply`).
enum Planned {
    /// Nothing to write: erased, an echo, a contradiction older than a preference's fixed past,
    /// or a repeat of a persona message the preference already holds.
    Nothing {
        action: Action,
        preference_id: String,
        name: String,
    },
    /// The candidate voices a preference again: what its record and timeline become.
    Voice {
        preference_id: String,
        stored: Box<StoredTimeline>,
        change: Box<Change>,
        /// The new vector, when another voicing now opens the current version.
        vector: Option<Vec<f32>>,
    },
    /// A new preference from its first voicing (taking over a base's view, if `inherited`).
    Add {
        persona_id: String,
        voicing: Box<Voicing>,
        inherited: Option<Box<InheritedView>>,
    },
}

/// One opinion ready to be decided on.
struct Candidate {
    opinion: ExtractedOpinion,
    /// The persona message's timestamp.
    expressed_at: Timestamp,
    /// The effects of the persona message that voiced it.
    message: MessageEffects,
    provenance: Provenance,
    embedding: Vec<f32>,
    /// Preferences that were in the prompt of the message that voiced it.
    injected_preference_ids: Vec<String>,
    /// Knowledge-graph entities of its message it is about (`extract::people`).
    related_kg_uuids: Vec<String>,
}

impl Candidate {
    /// What `decide::plan` knows of it.
    fn facts<'a>(&'a self, event: &'a ConversationEvent) -> OpinionFacts<'a> {
        OpinionFacts {
            persona_id: &event.persona_id,
            stance: self.opinion.stance,
            expressed_at: self.expressed_at,
            received_at: event.received_at,
            provenance: &self.provenance,
            related_user_ids: &self.opinion.related_user_ids,
            injected_preference_ids: &self.injected_preference_ids,
        }
    }
}

impl Pipeline {
    pub fn new(
        store: PreferenceStore,
        extractor: Arc<dyn Extractor>,
        embedder: Arc<dyn Embedder>,
        locks: PersonaLock,
        settings: PipelineSettings,
    ) -> Pipeline {
        Pipeline {
            store,
            extractor,
            embedder,
            locks,
            settings: Arc::new(settings),
        }
    }

    /// Applies `event`. Safe to call again for the same event: every effect is keyed, so a
    /// repeat changes nothing and reports `applied: false`.
    pub async fn process(&self, event: &ConversationEvent) -> Result<EventOutcome, PipelineError> {
        self.process_in_turn(event, None).await
    }

    /// [`Pipeline::process`], deciding and writing only once `turn` (the persona's place in
    /// the worker's stream order: `turns.rs`) has come; extraction and embedding run before.
    /// The turn ends when this returns.
    pub async fn process_in_turn(
        &self,
        event: &ConversationEvent,
        mut turn: Option<Turn>,
    ) -> Result<EventOutcome, PipelineError> {
        let mut outcome = EventOutcome::default();
        let mut candidates = self.extract_all(event, &mut outcome).await?;
        if candidates.is_empty() {
            let (erasures, deleted_at) = self.erasures(event, &candidates).await?;
            outcome.predates_an_erasure = predates_an_erasure(event, &erasures);
            outcome.predates_the_personas_deletion = predates_deletion(event, deleted_at);
            return Ok(outcome);
        }
        let topics: Vec<String> = candidates.iter().map(|c| c.opinion.name.clone()).collect();
        let vectors = self.embedder.embed(&topics).await?;
        for (candidate, vector) in candidates.iter_mut().zip(vectors) {
            candidate.embedding = vector;
        }
        if let Some(turn) = turn.as_mut() {
            turn.wait().await;
        }

        let lock = self
            .locks
            .hold(&event.persona_id, self.settings.lock_patience)
            .await?
            .ok_or_else(|| PipelineError::LockBusy(event.persona_id.clone()))?;
        let decided = self.decide_all(event, &candidates, &lock).await;
        // Released after a failure too (and, should this be cancelled, by the guard's drop).
        lock.release().await;
        let (decisions, erasures, deleted) = decided?;
        if deleted {
            // The lock's counter is the only key taking the lock gave a deleted persona.
            self.store.forget_lock_counter(&event.persona_id).await?;
        }
        outcome.decisions = decisions;
        outcome.predates_an_erasure = predates_an_erasure(event, &erasures);
        outcome.predates_the_personas_deletion = deleted;
        Ok(outcome)
    }

    /// What the persona message `draft_message_id` of `event` would do to memory, decided as
    /// ingest decides (the configured extractor, redaction, the nearest preferences, the LLM's
    /// grey-zone verdict, `decide::plan`) and written nowhere: a prompt builder or a guard can
    /// ask before the words go out. No lock is taken; what it reads may change a moment later.
    pub async fn check(
        &self,
        event: &ConversationEvent,
        draft_message_id: &str,
    ) -> Result<Vec<DraftFinding>, PipelineError> {
        let mut outcome = EventOutcome::default();
        let mut candidates: Vec<Candidate> = self
            .extract_all(event, &mut outcome)
            .await?
            .into_iter()
            .filter(|c| c.provenance.persona_message_id == draft_message_id)
            .collect();
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let topics: Vec<String> = candidates.iter().map(|c| c.opinion.name.clone()).collect();
        let vectors = self.embedder.embed(&topics).await?;
        for (candidate, vector) in candidates.iter_mut().zip(vectors) {
            candidate.embedding = vector;
        }
        let (erasures, _) = self.erasures(event, &candidates).await?;
        let mut findings = Vec::with_capacity(candidates.len());
        for candidate in &candidates {
            let gathered = self.gather(event, candidate, &erasures).await?;
            let plan = decide::plan(
                &candidate.facts(event),
                &gathered.neighbours,
                &erasures,
                self.settings.match_threshold,
                gathered.adjudication.as_ref(),
            );
            let neighbour = |id: &str| {
                gathered
                    .neighbours
                    .iter()
                    .find(|hit| hit.preference.id == id)
                    .cloned()
            };
            let verdict = match plan {
                Plan::Erased => continue,
                Plan::Echo { preference_id } => {
                    neighbour(&preference_id).map(DraftVerdict::Restates)
                }
                Plan::Voice {
                    preference_id,
                    stance,
                } => neighbour(&preference_id).map(|hit| {
                    if hit.preference.stance.is_none_or(|held| held == stance) {
                        DraftVerdict::Restates(hit)
                    } else {
                        DraftVerdict::Contradicts(hit)
                    }
                }),
                // A base's view the draft voices: the same stance restates it, the opposite
                // contradicts it (ingest would give the persona its own preference either way).
                Plan::Add {
                    inherited: Some(view),
                    ..
                } => neighbour(&view.preference_id).map(|hit| {
                    if view
                        .stance
                        .is_none_or(|held| held == candidate.opinion.stance)
                    {
                        DraftVerdict::Restates(hit)
                    } else {
                        DraftVerdict::Contradicts(hit)
                    }
                }),
                Plan::Add {
                    inherited: None, ..
                } => Some(DraftVerdict::New),
            }
            .unwrap_or(DraftVerdict::New);
            findings.push(DraftFinding {
                opinion: candidate.opinion.clone(),
                verdict,
            });
        }
        Ok(findings)
    }

    /// Records the event at `stream_sequence` as settled (its effects are stored) and says
    /// whether it holds words, from before the erasure, of a user erased meanwhile: then the
    /// caller erases it from the stream once acked.
    pub async fn settle(
        &self,
        event: &ConversationEvent,
        stream_sequence: u64,
        keep_secs: u64,
    ) -> Result<bool, PipelineError> {
        let user_ids: Vec<&str> = event_user_ids(event).collect();
        let erasures = self
            .store
            .settle_event(&event.persona_id, stream_sequence, &user_ids, keep_secs)
            .await?;
        if predates_an_erasure(event, &erasures) {
            return Ok(true);
        }
        // Read after settling: a deletion records itself before it reads which events are
        // settled, so either it saw this one settled and erased it, or this sees the deletion.
        let deleted_at = self.store.deleted_at(&event.persona_id).await?;
        if predates_deletion(event, deleted_at) {
            self.store
                .unsettle_event(&event.persona_id, stream_sequence)
                .await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Records a dead-lettered event of `persona_id` as settled, for erasure.
    pub async fn settle_dead_letter(
        &self,
        persona_id: &str,
        stream_sequence: u64,
        keep_secs: u64,
    ) -> Result<(), PipelineError> {
        // A deleted persona gets no key back; its letter is the operator's (`dlq discard`).
        if self.store.deleted_at(persona_id).await?.is_some() {
            return Ok(());
        }
        self.store
            .settle_event(persona_id, stream_sequence, &[], keep_secs)
            .await?;
        Ok(())
    }

    async fn extract_all(
        &self,
        event: &ConversationEvent,
        outcome: &mut EventOutcome,
    ) -> Result<Vec<Candidate>, PipelineError> {
        let participants: Vec<String> = if event.participant_user_ids.is_empty() {
            let mut users: Vec<String> = event
                .messages
                .iter()
                .filter(|m| m.role == Role::User && !m.user_id.is_empty())
                .map(|m| m.user_id.clone())
                .collect();
            users.sort();
            users.dedup();
            users
        } else {
            event.participant_user_ids.clone()
        };
        let inputs: Vec<(usize, ExtractionInput<'_>)> = event
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Persona)
            .map(|(index, message)| {
                let context = event.messages[index.saturating_sub(CONTEXT_TURNS)..index]
                    .iter()
                    .map(|m| TurnText {
                        role: m.role.as_str(),
                        user_id: &m.user_id,
                        content: &m.content,
                    })
                    .collect();
                (
                    index,
                    ExtractionInput {
                        persona_message: &message.content,
                        context,
                        participants: &participants,
                    },
                )
            })
            .collect();
        let extracted = futures::future::try_join_all(
            inputs
                .iter()
                .map(|(_, input)| self.extractor.extract(input)),
        )
        .await?;

        let mut candidates = Vec::new();
        for ((index, _), opinions) in inputs.iter().zip(extracted) {
            let persona_message = &event.messages[*index];
            // Provenance: the latest user message before the persona message that voiced it.
            let trigger = event.messages[..*index]
                .iter()
                .rev()
                .find(|m| m.role == Role::User);
            telemetry::opinions_extracted(opinions.len());
            outcome.opinions += opinions.len();
            let message = MessageEffects::of(
                &event.platform,
                &event.channel_id,
                &persona_message.message_id,
            );
            for opinion in opinions {
                let Some(mut opinion) = self.redacted(opinion) else {
                    outcome.dropped_redacted += 1;
                    continue;
                };
                // What found it (the rule, or the extractor), never what was said.
                tracing::debug!(
                    persona_id = %event.persona_id,
                    message_id = %persona_message.message_id,
                    stance = ?opinion.stance,
                    found_by = opinion.found_by.as_deref().unwrap_or("unknown"),
                    "opinion extracted"
                );
                // Whom and what it is about: the participants its topic names, the entities
                // the producer says its message mentions.
                people::related_participants(&mut opinion, &participants);
                let related_kg_uuids =
                    people::mentioned_entities(&opinion, &persona_message.mentions);
                candidates.push(Candidate {
                    expressed_at: persona_message.timestamp,
                    message: message.clone(),
                    provenance: Provenance {
                        triggering_user_id: trigger.map(|m| m.user_id.clone()).unwrap_or_default(),
                        triggering_message_id: trigger
                            .map(|m| m.message_id.clone())
                            .unwrap_or_default(),
                        persona_message_id: persona_message.message_id.clone(),
                        source_platform: event.platform.clone(),
                        source_channel_id: event.channel_id.clone(),
                    },
                    opinion,
                    embedding: Vec::new(),
                    injected_preference_ids: persona_message.injected_preference_ids.clone(),
                    related_kg_uuids,
                });
            }
        }
        Ok(candidates)
    }

    /// Redacts secrets from the stored texts; `None` when the opinion is mostly secret.
    fn redacted(&self, mut opinion: ExtractedOpinion) -> Option<ExtractedOpinion> {
        let (name, name_share) = redact::redact(&opinion.name);
        let (text, text_share) = redact::redact(&opinion.opinion);
        let (evidence, _) = redact::redact(&opinion.evidence);
        if name_share > self.settings.max_redacted_share
            || text_share > self.settings.max_redacted_share
            || name.contains(redact::MARK)
        {
            tracing::info!("dropping an opinion that is mostly redacted secrets");
            return None;
        }
        opinion.name = name;
        opinion.opinion = text;
        opinion.evidence = evidence;
        Some(opinion)
    }

    /// Decides and writes every candidate under the persona's lock, one after another: gather
    /// what is known about it, plan with the pure rules, apply the plan. Also returns the
    /// erasures read, for the caller's settling.
    async fn decide_all(
        &self,
        event: &ConversationEvent,
        candidates: &[Candidate],
        lock: &LockToken,
    ) -> Result<(Vec<Decision>, HashMap<String, Erasure>, bool), PipelineError> {
        // Registered before anything is read or written: an erasure everywhere walks the
        // registry after recording itself, so it either finds this persona or this reads it.
        self.store.register_persona(&event.persona_id).await?;
        // Read under the lock, which an erasure and a deletion hold too: either is wholly
        // before this event's decisions or wholly after them.
        let (erasures, deleted_at) = self.erasures(event, candidates).await?;
        if predates_deletion(event, deleted_at) {
            tracing::info!(persona_id = %event.persona_id, event_id = %event.event_id, "event refused: its persona was deleted after it was written");
            return Ok((Vec::new(), erasures, true));
        }
        let mut decisions = Vec::with_capacity(candidates.len());
        // Just taken: no renewal is due yet.
        let mut renewed = Some(std::time::Instant::now());
        for candidate in candidates {
            // A large event on a slow Redis can outlast the lock: renew it as it goes, so its
            // writes are not fenced halfway and the whole event retried.
            lock.keep_alive(&self.store, &mut renewed).await?;
            let gathered = self.gather(event, candidate, &erasures).await?;
            let planned = self.plan(event, candidate, &erasures, &gathered).await?;
            let decision = self
                .apply(planned, candidate, lock, gathered.best_similarity())
                .await?;
            telemetry::decision(decision.action.as_str());
            if decision.action.writes() && !decision.applied {
                telemetry::effect_duplicate();
            }
            tracing::debug!(
                persona_id = %event.persona_id,
                action = decision.action.as_str(),
                preference_id = %decision.preference_id,
                applied = decision.applied,
                similarity = ?decision.best_similarity,
                "decided"
            );
            decisions.push(decision);
        }
        Ok((decisions, erasures, false))
    }

    /// Erasures of the users the event names and the candidates would name (their triggering
    /// and related users), and when the event's persona was deleted, if it was.
    async fn erasures(
        &self,
        event: &ConversationEvent,
        candidates: &[Candidate],
    ) -> Result<(HashMap<String, Erasure>, Option<String>), PipelineError> {
        let mut user_ids: Vec<&str> = event_user_ids(event)
            .chain(
                candidates
                    .iter()
                    .flat_map(|c| c.opinion.related_user_ids.iter().map(String::as_str)),
            )
            .collect();
        user_ids.sort_unstable();
        user_ids.dedup();
        Ok(self
            .store
            .erasures_and_deletion(&event.persona_id, &user_ids)
            .await?)
    }

    /// What the rules need to know about one candidate: the persona's nearest preferences to
    /// its topic and, in the grey zone, the LLM's verdict. Nothing when an erasure already
    /// decides it (the search is skipped).
    async fn gather(
        &self,
        event: &ConversationEvent,
        candidate: &Candidate,
        erasures: &HashMap<String, Erasure>,
    ) -> Result<Gathered, PipelineError> {
        if decide::is_erased(&candidate.facts(event), erasures) {
            return Ok(Gathered::default());
        }
        let neighbours = self
            .store
            .nearest_topics(&event.persona_id, &candidate.embedding)
            .await?;
        if let Some(best) = neighbours.first() {
            telemetry::best_match_similarity(best.similarity());
        }
        let adjudication = self
            .adjudicate(&event.persona_id, candidate, &neighbours)
            .await?;
        Ok(Gathered {
            neighbours,
            adjudication,
        })
    }

    /// What the candidate comes to, by the pure rules: `decide::plan` says whether it is erased,
    /// an echo, a new preference or one more voicing of a preference; for a voicing, that
    /// preference's timeline is read and `model::timeline` places it there.
    async fn plan(
        &self,
        event: &ConversationEvent,
        candidate: &Candidate,
        erasures: &HashMap<String, Erasure>,
        gathered: &Gathered,
    ) -> Result<Planned, PipelineError> {
        let facts = candidate.facts(event);
        let nothing = |action, preference_id: String| Planned::Nothing {
            action,
            name: gathered.name_of(&preference_id),
            preference_id,
        };
        let voicing = |stance: Stance| Voicing {
            at: candidate.expressed_at,
            stance: Some(stance),
            strength: candidate.opinion.strength,
            topic: candidate.opinion.name.clone(),
            opinion: candidate.opinion.opinion.clone(),
            category: candidate.opinion.category.clone(),
            provenance: candidate.provenance.clone(),
            related_user_ids: decide::related_users_for_add(&facts, erasures),
            related_kg_uuids: candidate.related_kg_uuids.clone(),
        };
        let add = |inherited: Option<InheritedView>| Planned::Add {
            persona_id: event.persona_id.clone(),
            voicing: Box::new(voicing(candidate.opinion.stance)),
            inherited: inherited.map(Box::new),
        };
        let (preference_id, stance) = match decide::plan(
            &facts,
            &gathered.neighbours,
            erasures,
            self.settings.match_threshold,
            gathered.adjudication.as_ref(),
        ) {
            Plan::Erased => return Ok(nothing(Action::Erased, String::new())),
            Plan::Echo { preference_id } => return Ok(nothing(Action::Echo, preference_id)),
            Plan::Add { inherited, .. } => return Ok(add(inherited)),
            Plan::Voice {
                preference_id,
                stance,
            } => (preference_id, stance),
        };
        let persona_id = &event.persona_id;
        let Some(stored) = self.store.timeline(persona_id, &preference_id).await? else {
            // The match vanished between search and read (cannot happen under the lock unless
            // an operator deleted it): a new preference.
            return Ok(add(None));
        };
        let voicing = self.store.checked_voicing(voicing(stance))?;
        let topic = voicing.topic.clone();
        let change = match timeline::voice(
            &stored.identity,
            &stored.timeline,
            voicing,
            &self.store.timeline_rules(),
        ) {
            Voiced::BeforeFixedPast => {
                tracing::info!(
                    persona_id,
                    preference_id,
                    expressed_at = %candidate.expressed_at,
                    "opinion is older than the preference's fixed past and contradicts it; it changes nothing"
                );
                return Ok(nothing(Action::Stale, preference_id));
            }
            Voiced::Duplicate(placement) => {
                return Ok(nothing(Action::of(placement), preference_id));
            }
            Voiced::Changed(change) => change,
        };
        if change.placement == Placement::Past {
            tracing::info!(
                persona_id,
                preference_id,
                expressed_at = %candidate.expressed_at,
                "opinion was said while an earlier stance was in force; it joins that past"
            );
        }
        // The vector follows the voicing that opens the current version.
        let vector = match &change.new_vector_topic {
            None => None,
            Some(opener) if *opener == topic => Some(candidate.embedding.clone()),
            Some(opener) => self
                .embedder
                .embed(std::slice::from_ref(opener))
                .await?
                .pop(),
        };
        Ok(Planned::Voice {
            preference_id,
            stored: Box::new(stored),
            change,
            vector,
        })
    }

    /// Carries out what [`Pipeline::plan`] decided: the only place an opinion's effect is
    /// written, each write keyed by what it applies (`store::effects`: an add by the opinion's
    /// topic and stance, a voicing by the preference) and fenced by the persona's lock.
    async fn apply(
        &self,
        planned: Planned,
        candidate: &Candidate,
        lock: &LockToken,
        best_similarity: Option<f64>,
    ) -> Result<Decision, PipelineError> {
        let guard = |effect_id| WriteGuard {
            effect_id: Some(effect_id),
            message: Some(&candidate.message),
            lock: Some(lock),
        };
        match planned {
            Planned::Nothing {
                action,
                preference_id,
                name,
            } => Ok(Decision {
                action,
                preference_id,
                name: if name.is_empty() {
                    candidate.opinion.name.clone()
                } else {
                    name
                },
                applied: false,
                best_similarity,
            }),
            Planned::Voice {
                preference_id,
                stored,
                change,
                vector,
            } => {
                let effect_id = candidate.message.on_preference(&preference_id);
                let applied = self
                    .store
                    .write_voiced(&stored, &change, vector.as_deref(), guard(&effect_id))
                    .await?;
                match applied {
                    Some(applied) => Ok(Decision {
                        action: Action::of(change.placement),
                        preference_id,
                        name: change.preference.name.clone(),
                        applied,
                        best_similarity,
                    }),
                    // Gone between read and write (an operator deleted it under its own lock
                    // expiry): the event is tried again, and then finds no match.
                    None => Err(PipelineError::Store(StoreError::Conflict {
                        persona_id: stored.identity.persona_id.clone(),
                        preference_id,
                    })),
                }
            }
            Planned::Add {
                persona_id,
                voicing,
                inherited,
            } => {
                let adding = candidate
                    .message
                    .adding(&candidate.opinion.name, candidate.opinion.stance);
                let added = self
                    .store
                    .add_voiced(
                        &persona_id,
                        *voicing,
                        inherited.map(|view| *view),
                        &candidate.embedding,
                        guard(&adding),
                    )
                    .await?;
                Ok(Decision {
                    action: Action::Add,
                    preference_id: added.preference.id,
                    name: added.preference.name,
                    applied: added.applied,
                    best_similarity,
                })
            }
        }
    }
}

impl Pipeline {
    /// With an adjudicator and no neighbour at or above the match threshold, the LLM's verdict
    /// on the nearest of the persona's own preferences in the grey zone, if there is one.
    async fn adjudicate(
        &self,
        persona_id: &str,
        candidate: &Candidate,
        neighbours: &[crate::store::ScoredPreference],
    ) -> Result<Option<decide::Adjudication>, PipelineError> {
        use crate::extract::adjudicate::Statement;
        let Some(adjudicator) = &self.settings.adjudicator else {
            return Ok(None);
        };
        let threshold = self.settings.match_threshold;
        if neighbours.iter().any(|hit| hit.similarity() >= threshold) {
            return Ok(None);
        }
        let Some(grey) = neighbours.iter().find(|hit| {
            hit.preference.persona_id == persona_id
                && hit.similarity() >= adjudicator.grey_zone_low()
        }) else {
            return Ok(None);
        };
        let opinion = &candidate.opinion;
        let verdict = adjudicator
            .adjudicate(
                &Statement {
                    topic: opinion.name.clone(),
                    opinion: opinion.opinion.clone(),
                    stance: Some(opinion.stance),
                },
                &grey.preference.id,
                &Statement {
                    topic: grey.preference.name.clone(),
                    opinion: grey.preference.opinion.clone(),
                    stance: grey.preference.stance,
                },
            )
            .await?;
        tracing::debug!(
            persona_id,
            preference_id = %grey.preference.id,
            similarity = grey.similarity(),
            same_topic = verdict.same_topic,
            same_stance = verdict.same_stance,
            "grey-zone match adjudicated"
        );
        Ok(Some(decide::Adjudication {
            preference_id: grey.preference.id.clone(),
            verdict,
        }))
    }
}

/// The users an event names: the authors of its messages and its participants.
fn event_user_ids(event: &ConversationEvent) -> impl Iterator<Item = &str> {
    event
        .messages
        .iter()
        .map(|m| m.user_id.as_str())
        .chain(event.participant_user_ids.iter().map(String::as_str))
        .filter(|id| !id.is_empty())
}

/// Whether the event holds words from before the erasure of a user it names: then, once
/// processed, it is erased from the stream too (erasure leaves unprocessed events alone).
/// Whether any of the event's messages was written (or the event stored) before its persona
/// was deleted at `deleted_at`: such an event is refused whole, as an erased user's is.
fn predates_deletion(event: &ConversationEvent, deleted_at: Option<String>) -> bool {
    let Some(deleted_at) = deleted_at else {
        return false;
    };
    let deletion = Erasure {
        pseudonym: String::new(),
        erased_at: deleted_at,
    };
    event
        .messages
        .iter()
        .any(|message| decide::erased_before(&deletion, event.received_at, message.timestamp))
}

fn predates_an_erasure(event: &ConversationEvent, erasures: &HashMap<String, Erasure>) -> bool {
    event_user_ids(event).any(|user_id| {
        erasures.get(user_id).is_some_and(|erasure| {
            event
                .messages
                .iter()
                .any(|message| decide::erased_before(erasure, event.received_at, message.timestamp))
        })
    })
}
