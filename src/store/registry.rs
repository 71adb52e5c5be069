//! The registry of personas: which personas have memory, and when each last changed. One
//! sorted set (`keys.rs`: member the persona id, score its last write in milliseconds), so the
//! inspector and operators list personas without a SCAN, on one node or a cluster alike.
//!
//! A write marks its persona after the write script succeeded; a process marks each persona at
//! most once a minute (the score says when it was last written, to the minute), so the hot
//! path pays one extra command per persona per minute. `index migrate` registers the personas
//! of data written before the registry existed.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{PreferenceStore, StoreError, validate};

/// How often one process refreshes a persona's last activity.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// One persona, as the registry and its own structures describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonaSummary {
    pub persona_id: String,
    /// Active preferences.
    pub active: u64,
    /// All preferences, retracted too.
    pub total: u64,
    /// Topics of its strongest active preferences (by stored strength), strongest first.
    pub strongest: Vec<String>,
    /// When it was last written (RFC 3339, to the minute); empty when unknown (registered by
    /// a migration).
    pub last_activity: String,
}

/// A page of the registry, most recently active first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonaDirectory {
    /// Personas registered in all.
    pub total: u64,
    pub personas: Vec<PersonaSummary>,
}

/// Topics shown per persona.
const STRONGEST_SHOWN: usize = 3;

impl PreferenceStore {
    /// Marks `persona_id` as written now (at most once a minute per process), before its
    /// write: an erasure of a user everywhere walks the registry, and a persona must be in it
    /// before anything of its memory can name the user (`erasure::Eraser::erase_everywhere`).
    /// A failure is the write's failure, retried with it.
    pub async fn register_persona(&self, persona_id: &str) -> Result<(), StoreError> {
        {
            let mut touched = self
                .registry_touched
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if touched
                .get(persona_id)
                .is_some_and(|at| at.elapsed() < TOUCH_EVERY)
            {
                return Ok(());
            }
        }
        let now_ms = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        let registry = self.settings.keys.registry();
        let mut connection = self.connection.clone();
        let _: () = connection
            .query_for_key(
                &registry,
                redis::cmd("ZADD")
                    .arg(&registry)
                    .arg(now_ms as i64)
                    .arg(persona_id),
            )
            .await?;
        self.registry_touched
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .put(persona_id.to_string(), Instant::now());
        Ok(())
    }

    /// One page of the registry's persona ids in no particular order, from `cursor` (0 to
    /// start; the next cursor is 0 when the walk is done). Redis's `ZSCAN`: a persona
    /// registered for the whole walk is returned at least once (some may come twice).
    pub async fn scan_personas(
        &self,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<String>), StoreError> {
        let registry = self.settings.keys.registry();
        let mut connection = self.connection.clone();
        let (next, members): (u64, Vec<String>) = connection
            .query_for_key(
                &registry,
                redis::cmd("ZSCAN")
                    .arg(&registry)
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(count),
            )
            .await?;
        // ZSCAN answers member, score, member, score, ...
        let persona_ids = members.into_iter().step_by(2).collect();
        Ok((next, persona_ids))
    }

    /// Registers personas found in the memory (a migration), without a known last activity
    /// (score 0); a persona already registered keeps its time.
    pub async fn register_personas(&self, persona_ids: &[String]) -> Result<u64, StoreError> {
        let registry = self.settings.keys.registry();
        let mut added = 0;
        for chunk in persona_ids.chunks(1000) {
            let mut command = redis::cmd("ZADD");
            command.arg(&registry).arg("NX");
            for persona_id in chunk {
                validate::persona_id(persona_id)?;
                command.arg(0).arg(persona_id);
            }
            let mut connection = self.connection.clone();
            let count: u64 = connection.query_for_key(&registry, &command).await?;
            added += count;
        }
        Ok(added)
    }

    /// Removes a persona from the registry (its memory was deleted).
    pub(super) async fn unregister(&self, persona_id: &str) -> Result<(), StoreError> {
        let registry = self.settings.keys.registry();
        let mut connection = self.connection.clone();
        let _: () = connection
            .query_for_key(&registry, redis::cmd("ZREM").arg(&registry).arg(persona_id))
            .await?;
        self.registry_touched
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop(persona_id);
        Ok(())
    }

    /// A page of personas, most recently active first, each with its counts and strongest
    /// topics (read from its own structures, concurrently: personas live in many slots).
    pub async fn personas(
        &self,
        offset: usize,
        limit: usize,
    ) -> Result<PersonaDirectory, StoreError> {
        if limit == 0 || limit > validate::MAX_LIST_LIMIT {
            return Err(StoreError::invalid(
                "limit",
                format!("must be within 1..={}", validate::MAX_LIST_LIMIT),
            ));
        }
        let registry = self.settings.keys.registry();
        let mut connection = self.connection.clone();
        let total: u64 = connection
            .query_for_key(&registry, redis::cmd("ZCARD").arg(&registry))
            .await?;
        let page: Vec<(String, f64)> = connection
            .query_for_key(
                &registry,
                redis::cmd("ZREVRANGE")
                    .arg(&registry)
                    .arg(offset)
                    .arg(offset + limit - 1)
                    .arg("WITHSCORES"),
            )
            .await?;
        let summaries = page.into_iter().map(|(persona_id, score)| async move {
            let keys = &self.settings.keys;
            let mut pipe = redis::pipe();
            pipe.cmd("SCARD").arg(keys.ids(&persona_id));
            pipe.cmd("ZCARD").arg(keys.strongest(&persona_id));
            pipe.cmd("ZREVRANGE")
                .arg(keys.strongest(&persona_id))
                .arg(0)
                .arg(STRONGEST_SHOWN - 1);
            let mut connection = self.connection.clone();
            let replies = connection
                .pipeline_for_key(&self.route_key(&persona_id), &pipe)
                .await?;
            let [total, active, strongest]: [redis::Value; 3] =
                replies.try_into().map_err(|replies| {
                    StoreError::UnexpectedReply(format!("persona summary: {replies:?}"))
                })?;
            let total: u64 = redis::from_redis_value(total).map_err(redis::RedisError::from)?;
            let active: u64 = redis::from_redis_value(active).map_err(redis::RedisError::from)?;
            let strongest_ids: Vec<String> =
                redis::from_redis_value(strongest).map_err(redis::RedisError::from)?;
            let mut strongest = Vec::new();
            if !strongest_ids.is_empty() {
                let mut pipe = redis::pipe();
                for id in &strongest_ids {
                    pipe.cmd("VGETATTR").arg(keys.vectors(&persona_id)).arg(id);
                }
                for attributes in connection
                    .pipeline_for_key(&self.route_key(&persona_id), &pipe)
                    .await?
                {
                    let text = super::query::value_to_string(&attributes);
                    strongest.push(super::record::VectorAttributes::parse(&text)?.n);
                }
            }
            let last_activity = if score > 0.0 {
                time::OffsetDateTime::from_unix_timestamp_nanos(score as i128 * 1_000_000)
                    .ok()
                    .and_then(|at| {
                        at.format(&time::format_description::well_known::Rfc3339)
                            .ok()
                    })
                    .unwrap_or_default()
            } else {
                String::new()
            };
            Ok::<_, StoreError>(PersonaSummary {
                persona_id,
                active,
                total,
                strongest,
                last_activity,
            })
        });
        Ok(PersonaDirectory {
            total,
            personas: futures::future::try_join_all(summaries).await?,
        })
    }
}
