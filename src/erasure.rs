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
use crate::ingest::erasure::{StoredEventsReport, erase_stored_events};
use crate::store::{PersonaLock, PreferenceStore, PurgeReport, StoreError, WriteGuard, validate};

/// What an erasure changed: in the memory, and in the streams.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasureReport {
    #[serde(flatten)]
    pub memory: PurgeReport,
    pub stored_events: StoredEventsReport,
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
}

impl ErasureError {
    pub fn is_retryable(&self) -> bool {
        match self {
            ErasureError::Store(error) => error.is_retryable(),
            ErasureError::Busy(_) | ErasureError::StreamsNotYet { .. } => true,
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
        let pseudonym = pseudonym.unwrap_or_else(|| {
            format!(
                "erased-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            )
        });
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
                &pseudonym,
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
