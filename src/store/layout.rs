//! Which layout the memory is in, checked at start-up.
//!
//! Keys of an earlier layout (the original system's, or this service's before persona slots)
//! are invisible to this build: a worker started on them would add twins of preferences it
//! cannot see. On a single node the old RediSearch index gives that away; on a cluster there
//! is no shared index, so the memory records its layout in one key ([`Keys::layout`]). It is
//! written once the memory is known to hold no earlier key: on the first start-up against an
//! empty (or already migrated) memory, after one SCAN of every master, and by a migration
//! that finished. From then on start-up reads one key.

use super::keys::{LAYOUT, PREVIOUS_LAYOUT};
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
            Some(PREVIOUS_LAYOUT) => {
                return Err(StoreError::LayoutMismatch {
                    reason: format!(
                        "the memory under key prefix {:?} is in layout {PREVIOUS_LAYOUT:?}, which \
                         kept each active preference's record twice. Stop every worker of the \
                         earlier build, then run `persona-prefs index migrate` (it moves each \
                         record into {LAYOUT:?}; add --dry-run to see what it would do)",
                        self.key_prefix()
                    ),
                });
            }
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

/// The smallest `hash-max-listpack-value` that keeps a preference hash in Redis's compact
/// encoding: its timeline runs to a few hundred bytes. docs/CAPACITY.md.
pub const COMPACT_HASH_VALUE_BYTES: u64 = 512;

/// What to tell an operator about the server's `hash-max-listpack-value` (`None`: unknown, as
/// on a managed Redis that refuses CONFIG, or large enough).
pub fn listpack_advice(node: &str, value: Option<u64>) -> Option<String> {
    let value = value?;
    (value < COMPACT_HASH_VALUE_BYTES).then(|| {
        format!(
            "Redis {node} has hash-max-listpack-value {value}: with redis.text_index on, \
             preference hashes outgrow it and take about 1 200 bytes more each (about twice \
             the hash). Set it to 1024 in redis.conf (docs/CAPACITY.md)"
        )
    })
}

impl PreferenceStore {
    /// Advice on the masters' memory settings (see [`listpack_advice`]); empty when they are
    /// fine or cannot be read, and without the full-text index, where an active preference
    /// has no hash (`scripts/record.lua`) and a retracted one's holds its vector, over any
    /// sensible limit anyway.
    pub async fn memory_settings_advice(&self) -> Vec<String> {
        if !self.has_text_index() {
            return Vec::new();
        }
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("CONFIG");
        command.arg("GET").arg("hash-max-listpack-value");
        let Ok(replies) = connection.query_every_master(&command).await else {
            return Vec::new();
        };
        replies
            .into_iter()
            .filter_map(|(node, reply)| {
                let pair: Vec<String> = redis::from_redis_value(reply).ok()?;
                listpack_advice(&node, pair.get(1)?.parse().ok())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_listpack_limit_is_named_with_its_cost_and_the_fix() {
        let advice = listpack_advice("single", Some(64)).expect("64 is Redis's default, too small");
        assert!(advice.contains("hash-max-listpack-value 64"), "{advice}");
        assert!(advice.contains("1024"), "{advice}");
        assert_eq!(listpack_advice("single", Some(1024)), None);
        assert_eq!(listpack_advice("single", Some(512)), None);
        assert_eq!(
            listpack_advice("single", None),
            None,
            "unknown: nothing to say"
        );
    }
}
