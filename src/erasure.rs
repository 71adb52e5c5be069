//! Erasing a user from a persona's memory: the one use case behind `purge_user`, whoever calls
//! it (the service, and through it the CLI).
//!
//! 1. Under the persona lock, which ingest takes to decide too: the store records the erasure
//!    and rewrites every preference that names the user (`store::erasure`). From then on ingest
//!    treats the user's earlier conversations as erased, so an event still in flight cannot
//!    bring the id back.
//! 2. Then the user's settled events and dead letters are erased from JetStream
//!    (`ingest::erasure`); events not yet settled are left to the worker, which erases them
//!    once it has settled them.

use std::time::Duration;

use async_nats::jetstream;
use serde::{Deserialize, Serialize};

use crate::ingest::IngestConfig;
use crate::ingest::erasure::{StoredEventsReport, erase_persona_events, erase_stored_events};
use crate::store::{PersonaLock, PreferenceStore, PurgeReport, StoreError, WriteGuard, validate};

/// What an erasure changed: in the memory, and in the streams.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasureReport {
    #[serde(flatten)]
    pub memory: PurgeReport,
    pub stored_events: StoredEventsReport,
}

/// What a deletion of a persona removed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeletionReport {
    pub persona_id: String,
    /// From when its events are refused (those written before it).
    pub deleted_at: String,
    /// Preferences removed, retracted ones too.
    pub preferences_deleted: u64,
    /// Redis keys removed (preferences and the persona's structures).
    pub keys_deleted: u64,
    /// Its events and dead letters erased from the streams, and those left to the worker.
    pub stored_events: StoredEventsReport,
}

/// What one page of an erasure everywhere changed, and where the next page starts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EverywhereReport {
    /// What the user id was replaced with, in every persona.
    pub pseudonym: String,
    /// Where the next page starts (opaque); empty once every persona has been visited.
    pub cursor: String,
    /// Every persona has been visited.
    pub done: bool,
    /// Personas visited on this page (a persona may be visited twice in one walk).
    pub personas_visited: u64,
    /// Of those, personas whose memory or streams named the user.
    pub personas_touched: u64,
    /// Preferences whose related users, evidence, provenance or texts named the user.
    pub preferences_rewritten: u64,
    /// Preferences retracted because that user's conversations were their only evidence.
    pub preferences_retracted: u64,
    /// Settled events and dead letters naming the user, erased.
    pub events_erased: u64,
    pub dead_letters_erased: u64,
    /// Events naming the user not settled yet: the worker erases them once settled.
    pub events_pending: u64,
    /// Each touched persona's own report.
    pub personas: Vec<ErasureReport>,
}

impl EverywhereReport {
    /// Adds a later page of the same walk: its counts and touched personas; where the walk
    /// stands is the page's.
    pub fn absorb(&mut self, page: EverywhereReport) {
        self.pseudonym = page.pseudonym;
        self.cursor = page.cursor;
        self.done = page.done;
        self.personas_visited += page.personas_visited;
        self.personas_touched += page.personas_touched;
        self.preferences_rewritten += page.preferences_rewritten;
        self.preferences_retracted += page.preferences_retracted;
        self.events_erased += page.events_erased;
        self.dead_letters_erased += page.dead_letters_erased;
        self.events_pending += page.events_pending;
        self.personas.extend(page.personas);
    }

    fn add(&mut self, erased: ErasureReport) {
        self.personas_visited += 1;
        let memory = &erased.memory;
        let events = &erased.stored_events;
        let touched = !memory.rewritten.is_empty()
            || !memory.retracted.is_empty()
            || events.events_erased > 0
            || events.dead_letters_erased > 0
            || events.events_pending > 0;
        if touched {
            self.personas_touched += 1;
            self.preferences_rewritten += memory.rewritten.len() as u64;
            self.preferences_retracted += memory.retracted.len() as u64;
            self.events_erased += events.events_erased;
            self.dead_letters_erased += events.dead_letters_erased;
            self.events_pending += events.events_pending;
            self.personas.push(erased);
        }
    }
}

fn random_pseudonym() -> String {
    format!(
        "erased-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

#[derive(Debug, thiserror::Error)]
pub enum ErasureError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another worker held the persona's lock past `store.lock_patience_ms`; try again.
    #[error("persona {0} is busy; try again")]
    Busy(String),
    /// The memory is erased, the streams not yet (NATS unreachable); running it again
    /// finishes the job.
    #[error(
        "the memory is erased (pseudonym {pseudonym}), but not yet the stored events: {reason}; run purge_user again"
    )]
    StreamsNotYet { pseudonym: String, reason: String },
    /// The deletion is recorded (the persona's late events are refused), but its stored events
    /// or memory are not yet erased; running it again finishes the job.
    #[error(
        "persona {persona_id} is deleted, but its stored events and memory not yet: {reason}; run delete_persona again"
    )]
    DeletionNotFinished { persona_id: String, reason: String },
}

impl ErasureError {
    pub fn is_retryable(&self) -> bool {
        match self {
            ErasureError::Store(error) => error.is_retryable(),
            ErasureError::Busy(_)
            | ErasureError::StreamsNotYet { .. }
            | ErasureError::DeletionNotFinished { .. } => true,
        }
    }
}

#[derive(Clone)]
pub struct Eraser {
    store: PreferenceStore,
    locks: PersonaLock,
    lock_patience: Duration,
    js: jetstream::Context,
    streams: IngestConfig,
}

impl Eraser {
    /// An eraser over `store`, taking the persona lock as `store.lock_*` say, and erasing
    /// stored events from the streams `streams` names.
    pub fn new(store: PreferenceStore, js: jetstream::Context, streams: &IngestConfig) -> Eraser {
        let config = store.config();
        Eraser {
            locks: PersonaLock::new(store.clone(), Duration::from_millis(config.lock_ttl_ms)),
            lock_patience: Duration::from_millis(config.lock_patience_ms),
            store,
            js,
            streams: streams.clone(),
        }
    }

    /// Erases `user_id` from `persona_id`'s memory and streams, replacing the id with
    /// `pseudonym` (a random `erased-…` one when `None`). Safe to repeat.
    pub async fn erase_user(
        &self,
        persona_id: &str,
        user_id: &str,
        pseudonym: Option<String>,
    ) -> Result<ErasureReport, ErasureError> {
        validate::persona_id(persona_id)?;
        if let Some(chosen) = &pseudonym
            && self.store.knows_user(persona_id, chosen).await?
        {
            return Err(ErasureError::Store(StoreError::InvalidInput {
                field: "pseudonym",
                reason: format!(
                    "{chosen:?} is a user this persona knows; choose another (or none, for a random one)"
                ),
            }));
        }
        let pseudonym = pseudonym.unwrap_or_else(random_pseudonym);
        self.erase_in(persona_id, user_id, &pseudonym).await
    }

    /// Erases `user_id` from every persona's memory and streams, one page of the registry of
    /// personas per call (`max_personas`), from `cursor` (empty starts the erasure; the
    /// reply's `cursor` continues it, and is empty once every persona has been visited).
    ///
    /// The erasure is recorded for every persona before the first is visited, under one
    /// random pseudonym (kept by later pages; a chosen one could name a user of some persona).
    /// A persona registered before that is visited by the walk (it returns every persona
    /// present for the whole walk: `store::PreferenceStore::scan_personas`) and erased as
    /// [`Eraser::erase_user`] erases it; a persona registered after it takes the erasure over
    /// the first time ingest meets the user there (`store::PreferenceStore::erasures`), and
    /// every write registers its persona first, so none is missed. Safe to repeat, page by
    /// page.
    pub async fn erase_everywhere(
        &self,
        user_id: &str,
        cursor: &str,
        max_personas: usize,
    ) -> Result<EverywhereReport, ErasureError> {
        validate::user_id("user_id", user_id)?;
        let recorded = self.store.erasure_everywhere(user_id).await?;
        let pseudonym = match (cursor.is_empty(), recorded) {
            (true, recorded) => {
                // A new walk: the same pseudonym as an earlier erasure of this user, so that
                // the personas it reached keep one name for them; the time is now.
                let pseudonym = recorded
                    .map(|erasure| erasure.pseudonym)
                    .unwrap_or_else(random_pseudonym);
                self.store
                    .record_erasure_everywhere(user_id, &pseudonym, &crate::store::now_iso())
                    .await?;
                pseudonym
            }
            (_, Some(recorded)) => recorded.pseudonym,
            (_, None) => {
                return Err(ErasureError::Store(StoreError::InvalidInput {
                    field: "cursor",
                    reason: "no erasure of this user everywhere was started; start with no cursor"
                        .into(),
                }));
            }
        };
        let (next, persona_ids) = self
            .store
            .scan_personas(cursor, max_personas.max(1))
            .await?;
        let mut report = EverywhereReport {
            pseudonym: pseudonym.clone(),
            done: next.is_empty(),
            cursor: next,
            ..Default::default()
        };
        for persona_id in persona_ids {
            let erased = self.erase_in(&persona_id, user_id, &pseudonym).await?;
            report.add(erased);
        }
        Ok(report)
    }

    /// Deletes `persona_id` whole: every key of its memory, its stored events and dead
    /// letters, and its registry entry. The deletion is recorded first, so that its events
    /// from before now are refused when they arrive later (redelivered, from the backlog,
    /// replayed), as an erased user's are; events after it start the persona afresh. The
    /// streams are erased before the keys (which events are settled is in the persona's
    /// keys), so a deletion cut short is simply run again.
    pub async fn delete_persona(&self, persona_id: &str) -> Result<DeletionReport, ErasureError> {
        validate::persona_id(persona_id)?;
        let deleted_at = crate::store::now_iso();
        self.store.record_deletion(persona_id, &deleted_at).await?;
        let stored_events = erase_persona_events(&self.js, &self.store, &self.streams, persona_id)
            .await
            .map_err(|error| ErasureError::DeletionNotFinished {
                persona_id: persona_id.to_string(),
                reason: error.to_string(),
            })?;
        let lock = self
            .locks
            .hold(persona_id, self.lock_patience)
            .await?
            .ok_or_else(|| ErasureError::Busy(persona_id.to_string()))?;
        let preferences = self.store.preference_ids(persona_id).await;
        let deleted = match preferences {
            Ok(preferences) => self
                .store
                .delete_persona(persona_id)
                .await
                .map(|keys| (preferences.len() as u64, keys)),
            Err(error) => Err(error),
        };
        lock.release().await;
        let (preferences_deleted, keys_deleted) = deleted?;
        Ok(DeletionReport {
            persona_id: persona_id.to_string(),
            deleted_at,
            preferences_deleted,
            keys_deleted,
            stored_events,
        })
    }

    /// Erases `user_id` from one persona as `pseudonym`, under the persona's lock.
    async fn erase_in(
        &self,
        persona_id: &str,
        user_id: &str,
        pseudonym: &str,
    ) -> Result<ErasureReport, ErasureError> {
        let lock = self
            .locks
            .hold(persona_id, self.lock_patience)
            .await?
            .ok_or_else(|| ErasureError::Busy(persona_id.to_string()))?;
        let purged = self
            .store
            .purge_user(
                persona_id,
                user_id,
                pseudonym,
                WriteGuard {
                    effect_id: None,
                    message: None,
                    lock: Some(&lock),
                },
            )
            .await;
        lock.release().await;
        let memory = purged?;
        let stored_events =
            erase_stored_events(&self.js, &self.store, &self.streams, persona_id, user_id)
                .await
                .map_err(|error| ErasureError::StreamsNotYet {
                    pseudonym: memory.pseudonym.clone(),
                    reason: error.to_string(),
                })?;
        Ok(ErasureReport {
            memory,
            stored_events,
        })
    }
}
