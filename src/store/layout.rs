//! Which layout the memory is in, checked at start-up.
//!
//! Keys of an earlier layout (the original system's, or this service's before persona slots)
//! are invisible to this build: a worker started on them would add twins of preferences it
//! cannot see. On a single node the old RediSearch index gives that away; on a cluster there
//! is no shared index, so the memory records its layout in one key ([`Keys::layout`]). It is
//! written once the memory is known to hold no earlier key: on the first start-up against an
//! empty (or already migrated) memory, after one SCAN of every master, and by a migration
//! that finished. From then on start-up reads one key.

use super::keys::LAYOUT;
use super::{PreferenceStore, StoreError};

impl PreferenceStore {
    /// Refuses memory in another layout, naming what to do. Cheap after the first call on a
    /// memory: one GET.
    pub async fn ensure_layout(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let recorded: Option<String> = redis::cmd("GET")
            .arg(self.keys().layout())
            .query_async(&mut connection)
            .await?;
        match recorded.as_deref() {
            Some(LAYOUT) => return Ok(()),
            Some(other) => {
                return Err(StoreError::LayoutMismatch {
                    reason: format!(
                        "the memory under key prefix {:?} is in layout {other:?}, and this build \
                         reads {LAYOUT:?}: run the build that wrote it, or migrate it with that build",
                        self.key_prefix()
                    ),
                });
            }
            None => {}
        }
        tracing::info!(
            "no layout recorded for this key prefix: looking for keys of earlier layouts (once)"
        );
        if let Some(example) = self.first_legacy_key().await? {
            return Err(StoreError::LayoutMismatch {
                reason: format!(
                    "the memory holds keys of an earlier layout (for example {example:?}), which \
                     this build cannot read. Run `persona-prefs index migrate` (it moves them into \
                     persona slots; add --dry-run to see what it would do)"
                ),
            });
        }
        self.record_layout().await
    }

    /// Records that the memory is in this build's layout. `index migrate` calls it once every
    /// key has moved.
    pub async fn record_layout(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let _: () = redis::cmd("SET")
            .arg(self.keys().layout())
            .arg(LAYOUT)
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    /// A key of an earlier layout, if any master holds one. Walks every master's keyspace
    /// with patterns that match earlier keys only, stopping at the first.
    async fn first_legacy_key(&self) -> Result<Option<String>, StoreError> {
        let keys = self.keys().clone();
        let patterns = keys.legacy_patterns();
        for pattern in [
            &patterns.preferences,
            &patterns.effects,
            &patterns.erasures,
            &patterns.locks,
        ] {
            let found = self
                .scan_every_master_until(pattern, |key| {
                    keys.parse_legacy_preference(key).is_some()
                        || keys.parse_legacy_effect(key).is_some()
                        || keys.parse_legacy_erasures(key).is_some()
                        || keys.is_legacy_lock(key)
                })
                .await?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}
