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

use super::{PreferenceStore, StoreError, scripts, validate};

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
                // GT: a score only grows (a process whose clock lags cannot move a persona
                // back behind a registry walk's cursor; see `scan_personas`).
                redis::cmd("ZADD")
                    .arg(&registry)
                    .arg("GT")
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

    /// One page of the registry's persona ids, from `cursor` (empty to start), in (last
    /// write, persona id) order; the next cursor is empty once the walk is done. A persona
    /// registered for the whole walk is returned at least once: its last write only grows
    /// and its id never changes, so it stays ahead of the cursor until a page returns it (one
    /// written during the walk may come twice). See `scripts/registry_page.lua`.
    ///
    /// Not `ZSCAN`: Redis answers a small sorted set (a listpack) in one reply whatever its
    /// `COUNT`, and the registry stays one at the listpack limit the memory budget sets
    /// (`scripts/services`), so a walk would not page.
    pub async fn scan_personas(
        &self,
        cursor: &str,
        count: usize,
    ) -> Result<(String, Vec<String>), StoreError> {
        let (after_score, after_id) = parse_registry_cursor(cursor)?;
        let count = count.max(1);
        let registry = self.settings.keys.registry();
        let mut invocation = scripts::REGISTRY_PAGE.prepare_invoke();
        invocation
            .key(&registry)
            .arg(after_score)
            .arg(after_id)
            .arg(count);
        let mut connection = self.connection.clone();
        // Persona id, score, persona id, score, ...: a full page names where the next starts.
        let flat: Vec<String> = invocation.invoke_async(&mut connection).await?;
        let next = match flat.as_slice() {
            [.., persona_id, score] if flat.len() == 2 * count => format!("{score}:{persona_id}"),
            _ => String::new(),
        };
        Ok((next, flat.into_iter().step_by(2).collect()))
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

/// A registry walk's cursor, `<score>:<persona id>` as [`PreferenceStore::scan_personas`]
/// returns it, read back into the script's arguments ("", "" to start).
fn parse_registry_cursor(cursor: &str) -> Result<(&str, &str), StoreError> {
    if cursor.is_empty() {
        return Ok(("", ""));
    }
    let invalid = || {
        StoreError::invalid(
            "cursor",
            "is not a cursor this walk returned (empty to start)",
        )
    };
    let (score, persona_id) = cursor.split_once(':').ok_or_else(invalid)?;
    if !score.parse::<f64>().is_ok_and(f64::is_finite) || validate::persona_id(persona_id).is_err()
    {
        return Err(invalid());
    }
    Ok((score, persona_id))
}

#[cfg(test)]
mod tests {
    use super::parse_registry_cursor;

    #[test]
    fn a_registry_cursor_reads_back_and_anything_else_is_refused() {
        assert_eq!(parse_registry_cursor("").unwrap(), ("", ""));
        assert_eq!(
            parse_registry_cursor("1764251234567:ada-2").unwrap(),
            ("1764251234567", "ada-2")
        );
        assert_eq!(parse_registry_cursor("0:idle-1").unwrap(), ("0", "idle-1"));
        for bad in ["12", "x:ada", "inf:ada", "1:", "1:ada b", ":ada", "nan:ada"] {
            let error = parse_registry_cursor(bad).expect_err(bad);
            assert!(error.to_string().contains("cursor"), "{bad}: {error}");
        }
    }
}
