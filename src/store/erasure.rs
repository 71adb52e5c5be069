//! Erasure of a user from a persona's memory, the record that makes it stick, and deletion of
//! a whole persona.

use std::collections::HashMap;

use redis::Value;

use super::{
    PreferenceStore, PurgeReport, StoreError, WriteGuard, now_iso, script_reply, scripts, validate,
};
use crate::model::Erasure;

impl PreferenceStore {
    /// Erasure of one user from one persona's memory: the user id is replaced by `pseudonym`
    /// in related users, evidence and provenance of every preference, and preferences whose
    /// only evidence was that user's conversations are retracted (with a history entry).
    pub async fn purge_user(
        &self,
        persona_id: &str,
        user_id: &str,
        pseudonym: &str,
        guard: WriteGuard<'_>,
    ) -> Result<PurgeReport, StoreError> {
        validate::persona_id(persona_id)?;
        validate::user_id("user_id", user_id)?;
        validate::user_id("pseudonym", pseudonym)?;
        if user_id == pseudonym {
            return Err(StoreError::invalid(
                "pseudonym",
                "must differ from the user id",
            ));
        }
        let mut report = PurgeReport {
            persona_id: persona_id.into(),
            pseudonym: pseudonym.into(),
            ..Default::default()
        };
        let now = now_iso();
        // Recorded first, so that from now on ingest leaves this user's earlier conversations
        // alone (events still in the backlog, redelivered or replayed from dead letters would
        // otherwise bring the id back); a purge cut short is simply run again.
        self.record_erasure(persona_id, user_id, pseudonym, &now)
            .await?;
        // Every preference of the persona, without a cap: an erasure must not stop at a page
        // size. The script itself leaves preferences that do not name the user untouched.
        let preference_ids = self.preference_ids(persona_id).await?;
        // An erasure over a large persona can outlast the lock: renew it before starting and
        // whenever a third of its lifetime has passed.
        let mut renewed = None;
        for preference_id in preference_ids {
            if let Some(lock) = guard.lock {
                lock.keep_alive(self, &mut renewed).await?;
            }
            let mut invocation = self.invocation(
                &scripts::PURGE_USER,
                persona_id,
                &preference_id,
                WriteGuard {
                    effect_id: None,
                    message: None,
                    ..guard
                },
            )?;
            invocation
                .arg(user_id)
                .arg(pseudonym)
                .arg(now.as_str())
                .arg(self.settings.store.max_evolution_history);
            let reply: Value = self.write(invocation, persona_id).await?;
            if let Some(items) = script_reply(reply, 2)? {
                if items[0] == "1" {
                    report.rewritten.push(preference_id.clone());
                }
                if items[1] == "1" {
                    report.retracted.push(preference_id);
                }
            }
        }
        Ok(report)
    }

    async fn record_erasure(
        &self,
        persona_id: &str,
        user_id: &str,
        pseudonym: &str,
        erased_at: &str,
    ) -> Result<(), StoreError> {
        let erasure = Erasure {
            pseudonym: pseudonym.into(),
            erased_at: erased_at.into(),
        };
        let mut connection = self.connection.clone();
        let key = self.erasures_key(persona_id);
        let _: () = redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(&key)
            .arg(erasure_digest(
                &self.settings.erasure_key,
                persona_id,
                user_id,
            ))
            .arg(serde_json::to_string(&erasure).expect("an erasure serialises"))
            .ignore()
            .cmd("HDEL")
            .arg(&key)
            .arg(legacy_erasure_digest(persona_id, user_id))
            .ignore()
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    /// Records that `user_id` is erased from every persona, as `pseudonym`, at `erased_at`:
    /// before the personas are walked, so that a persona the walk does not find (first
    /// written after it began) takes the erasure over when ingest meets the user there
    /// ([`PreferenceStore::erasures`]).
    pub async fn record_erasure_everywhere(
        &self,
        user_id: &str,
        pseudonym: &str,
        erased_at: &str,
    ) -> Result<(), StoreError> {
        validate::user_id("user_id", user_id)?;
        validate::user_id("pseudonym", pseudonym)?;
        let erasure = Erasure {
            pseudonym: pseudonym.into(),
            erased_at: erased_at.into(),
        };
        let key = self.settings.keys.erased_everywhere();
        let mut connection = self.connection.clone();
        let _: () = connection
            .query_for_key(
                &key,
                redis::cmd("HSET")
                    .arg(&key)
                    .arg(everywhere_digest(&self.settings.erasure_key, user_id))
                    .arg(serde_json::to_string(&erasure).expect("an erasure serialises")),
            )
            .await?;
        Ok(())
    }

    /// The erasure of `user_id` from every persona, if one was recorded.
    pub async fn erasure_everywhere(&self, user_id: &str) -> Result<Option<Erasure>, StoreError> {
        validate::user_id("user_id", user_id)?;
        let key = self.settings.keys.erased_everywhere();
        let mut connection = self.connection.clone();
        let value: Option<String> = connection
            .query_for_key(
                &key,
                redis::cmd("HGET")
                    .arg(&key)
                    .arg(everywhere_digest(&self.settings.erasure_key, user_id)),
            )
            .await?;
        Ok(value.and_then(|v| serde_json::from_str(&v).ok()))
    }

    /// What the deployment-wide records say about an event of `persona_id` naming `user_ids`:
    /// the users erased everywhere, and when the persona was deleted (if it was). One round
    /// trip: both keys share a slot.
    async fn tenant_records(
        &self,
        persona_id: &str,
        user_ids: &[&str],
    ) -> Result<(HashMap<String, Erasure>, Option<String>), StoreError> {
        let keys = &self.settings.keys;
        let erased = keys.erased_everywhere();
        let mut pipe = redis::pipe();
        pipe.cmd("HGET")
            .arg(keys.deleted_personas())
            .arg(persona_id);
        if !user_ids.is_empty() {
            let hmget = pipe.cmd("HMGET").arg(&erased);
            for user_id in user_ids {
                hmget.arg(everywhere_digest(&self.settings.erasure_key, user_id));
            }
        }
        let mut connection = self.connection.clone();
        let mut replies = connection
            .pipeline_for_key(&erased, &pipe)
            .await?
            .into_iter();
        let deleted_at: Option<String> = match replies.next() {
            Some(value) => redis::from_redis_value(value).map_err(redis::RedisError::from)?,
            None => None,
        };
        let mut found = HashMap::new();
        if let Some(values) = replies.next() {
            let values: Vec<Option<String>> =
                redis::from_redis_value(values).map_err(redis::RedisError::from)?;
            for (user_id, value) in user_ids.iter().zip(values) {
                if let Some(erasure) = value.and_then(|v| serde_json::from_str::<Erasure>(&v).ok())
                {
                    found.insert(user_id.to_string(), erasure);
                }
            }
        }
        Ok((found, deleted_at))
    }

    /// The erasures recorded for any of `user_ids` in this persona, by user id: its own
    /// records, and erasures from every persona, which are first recorded as its own (so the
    /// worker's settling, which reads only the persona's records, sees them too).
    pub async fn erasures(
        &self,
        persona_id: &str,
        user_ids: &[&str],
    ) -> Result<HashMap<String, Erasure>, StoreError> {
        Ok(self.erasures_and_deletion(persona_id, user_ids).await?.0)
    }

    /// [`PreferenceStore::erasures`], and when the persona was deleted (`delete_persona`), if
    /// it was: what ingest must know before it writes. Two round trips, three when an erasure
    /// everywhere is taken over.
    pub async fn erasures_and_deletion(
        &self,
        persona_id: &str,
        user_ids: &[&str],
    ) -> Result<(HashMap<String, Erasure>, Option<String>), StoreError> {
        validate::persona_id(persona_id)?;
        let named: Vec<&str> = user_ids
            .iter()
            .copied()
            .filter(|id| !id.is_empty())
            .collect();
        // Two slots (the persona's and the deployment's): asked at once, one round trip's wait.
        let (own, tenant) = futures::future::join(
            self.erasures_of_persona(persona_id, user_ids),
            self.tenant_records(persona_id, &named),
        )
        .await;
        let mut found = own?;
        let (everywhere, deleted_at) = tenant?;
        for (user_id, everywhere) in everywhere {
            let newer = found
                .get(&user_id)
                .is_none_or(|own| own.erased_at < everywhere.erased_at);
            // A deleted persona's records are not written back: its events from before the
            // deletion are refused whole, and its keys must stay gone.
            if newer && deleted_at.is_none() {
                self.record_erasure(
                    persona_id,
                    &user_id,
                    &everywhere.pseudonym,
                    &everywhere.erased_at,
                )
                .await?;
            }
            if newer {
                found.insert(user_id, everywhere);
            }
        }
        Ok((found, deleted_at))
    }

    /// The erasures recorded in this persona's own records for any of `user_ids`. One round trip.
    async fn erasures_of_persona(
        &self,
        persona_id: &str,
        user_ids: &[&str],
    ) -> Result<HashMap<String, Erasure>, StoreError> {
        let user_ids: Vec<&str> = user_ids
            .iter()
            .copied()
            .filter(|id| !id.is_empty())
            .collect();
        if user_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut command = redis::cmd("HMGET");
        command.arg(self.erasures_key(persona_id));
        for user_id in &user_ids {
            self.erasure_fields(&mut command, persona_id, user_id);
        }
        let mut connection = self.connection.clone();
        let values: Vec<Option<String>> = command.query_async(&mut connection).await?;
        Ok(erasures_found(&user_ids, values))
    }

    /// Records that the worker has settled the persona's event at `stream_sequence`, and
    /// answers the erasures recorded for `user_ids`, in one atomic step. An erasure is
    /// recorded before it reads [`PreferenceStore::settled_events`], so for every event and
    /// erasure one of the two sees the other: the erasure finds the event settled and erases
    /// it, or the worker finds the erasure and erases the event once acked. Entries older than
    /// `keep_secs` (0: none expire) go, and at most [`MAX_SETTLED_RECORDS`] stay.
    pub async fn settle_event(
        &self,
        persona_id: &str,
        stream_sequence: u64,
        user_ids: &[&str],
        keep_secs: u64,
    ) -> Result<HashMap<String, Erasure>, StoreError> {
        validate::persona_id(persona_id)?;
        let key = self.settings.keys.settled(persona_id);
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let user_ids: Vec<&str> = user_ids
            .iter()
            .copied()
            .filter(|id| !id.is_empty())
            .collect();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .zadd(&key, stream_sequence, now)
            .ignore()
            .cmd("ZREMRANGEBYRANK")
            .arg(&key)
            .arg(0)
            .arg(-(MAX_SETTLED_RECORDS as i64) - 1)
            .ignore();
        if keep_secs > 0 {
            pipe.cmd("ZREMRANGEBYSCORE")
                .arg(&key)
                .arg("-inf")
                .arg(format!("({}", now - keep_secs as i64))
                .ignore();
        }
        let mut lookup = redis::cmd("HMGET");
        lookup.arg(self.erasures_key(persona_id)).arg("");
        for user_id in &user_ids {
            self.erasure_fields(&mut lookup, persona_id, user_id);
        }
        pipe.add_command(lookup);
        let mut connection = self.connection.clone();
        let (values,): (Vec<Option<String>>,) = pipe.query_async(&mut connection).await?;
        // The first field asked for is "" (HMGET needs one): skip its answer.
        Ok(erasures_found(
            &user_ids,
            values.into_iter().skip(1).collect(),
        ))
    }

    /// Which of `stream_sequences` the worker has recorded as settled for this persona.
    pub async fn settled_events(
        &self,
        persona_id: &str,
        stream_sequences: &[u64],
    ) -> Result<std::collections::HashSet<u64>, StoreError> {
        validate::persona_id(persona_id)?;
        if stream_sequences.is_empty() {
            return Ok(Default::default());
        }
        let mut connection = self.connection.clone();
        let mut settled = std::collections::HashSet::new();
        for chunk in stream_sequences.chunks(1000) {
            let scores: Vec<Option<f64>> = redis::cmd("ZMSCORE")
                .arg(self.settings.keys.settled(persona_id))
                .arg(chunk)
                .query_async(&mut connection)
                .await?;
            settled.extend(
                chunk
                    .iter()
                    .zip(scores)
                    .filter(|(_, score)| score.is_some())
                    .map(|(sequence, _)| *sequence),
            );
        }
        Ok(settled)
    }

    /// Records that `persona_id` is deleted as of `deleted_at`: from then on its events from
    /// before that time are refused by ingest. Recorded before anything is deleted.
    pub async fn record_deletion(
        &self,
        persona_id: &str,
        deleted_at: &str,
    ) -> Result<(), StoreError> {
        validate::persona_id(persona_id)?;
        let key = self.settings.keys.deleted_personas();
        let mut connection = self.connection.clone();
        let _: () = connection
            .query_for_key(
                &key,
                redis::cmd("HSET").arg(&key).arg(persona_id).arg(deleted_at),
            )
            .await?;
        Ok(())
    }

    /// When `persona_id` was deleted (`delete_persona`), if it was.
    pub async fn deleted_at(&self, persona_id: &str) -> Result<Option<String>, StoreError> {
        let key = self.settings.keys.deleted_personas();
        let mut connection = self.connection.clone();
        Ok(connection
            .query_for_key(&key, redis::cmd("HGET").arg(&key).arg(persona_id))
            .await?)
    }

    /// Deletes the persona's lock counter when no one holds its lock: after a deleted
    /// persona's late event took the lock to be refused, so no key of it is left. (Tokens
    /// carry the server's time, so a counter started again cannot repeat an old token.)
    pub async fn forget_lock_counter(&self, persona_id: &str) -> Result<(), StoreError> {
        let keys = &self.settings.keys;
        let mut connection = self.connection.clone();
        let _: i64 = redis::Script::new(
            "if redis.call('EXISTS', KEYS[1]) == 0 then return redis.call('DEL', KEYS[2]) else return 0 end",
        )
        .key(keys.lock(persona_id))
        .key(keys.fence(persona_id))
        .invoke_async(&mut connection)
        .await?;
        Ok(())
    }

    /// Forgets the record of the event at `stream_sequence` as settled: the event was of a
    /// deleted persona and leaves the stream, and the persona keeps no key for it.
    pub async fn unsettle_event(
        &self,
        persona_id: &str,
        stream_sequence: u64,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let _: () = redis::cmd("ZREM")
            .arg(self.settings.keys.settled(persona_id))
            .arg(stream_sequence)
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    /// Deletes every key of one persona (preferences, their structures, idempotency records,
    /// lock, erasure records); the persona's id set names every preference, so nothing is
    /// scanned. Returns how many keys went. For demos, tests and erasure of a whole persona;
    /// ordinary forgetting is [`PreferenceStore::retract_preference`].
    pub async fn delete_persona(&self, persona_id: &str) -> Result<u64, StoreError> {
        validate::persona_id(persona_id)?;
        let keys = &self.settings.keys;
        let ids = self.preference_ids(persona_id).await?;
        let mut connection = self.connection.clone();
        let mut deleted = 0u64;
        // Preference hashes first: the id set that lists them goes last, so a deletion cut
        // short can be run again.
        for chunk in ids.chunks(1000) {
            let hashes: Vec<String> = chunk
                .iter()
                .map(|id| keys.preference(persona_id, id))
                .collect();
            let removed: u64 = redis::cmd("UNLINK")
                .arg(&hashes)
                .query_async(&mut connection)
                .await?;
            deleted += removed;
        }
        // The users' vector sets before the about-set that names their users (see above).
        for chunk in self.about_vector_sets(persona_id).await?.chunks(1000) {
            let removed: u64 = redis::cmd("UNLINK")
                .arg(chunk)
                .query_async(&mut connection)
                .await?;
            deleted += removed;
        }
        let mut structures = keys.persona_structures(persona_id).to_vec();
        // The id set last (see above).
        structures.rotate_left(1);
        let removed: u64 = redis::cmd("UNLINK")
            .arg(&structures)
            .query_async(&mut connection)
            .await?;
        self.unregister(persona_id).await?;
        Ok(deleted + removed)
    }
}

impl PreferenceStore {
    /// Whether `user_id` is a user this persona's memory knows: among the related users of an
    /// active preference (the about-set), or erased before. A caller-chosen pseudonym must not
    /// be one, or an erasure would merge the erased user into a real one.
    pub async fn knows_user(&self, persona_id: &str, user_id: &str) -> Result<bool, StoreError> {
        validate::persona_id(persona_id)?;
        let mut connection = self.connection.clone();
        // About-set members are `<user>\0<preference id>`: one lexicographic range per user.
        let related: Vec<String> = redis::cmd("ZRANGEBYLEX")
            .arg(self.settings.keys.about(persona_id))
            .arg(format!("[{user_id}\0"))
            .arg(format!("[{user_id}\0\u{10FFFF}"))
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query_async(&mut connection)
            .await?;
        if !related.is_empty() {
            return Ok(true);
        }
        Ok(!self.erasures(persona_id, &[user_id]).await?.is_empty())
    }

    /// The two fields a user's erasure may be recorded under: keyed, then legacy.
    fn erasure_fields(&self, command: &mut redis::Cmd, persona_id: &str, user_id: &str) {
        command
            .arg(erasure_digest(
                &self.settings.erasure_key,
                persona_id,
                user_id,
            ))
            .arg(legacy_erasure_digest(persona_id, user_id));
    }
}

/// The erasures in an HMGET of [`PreferenceStore::erasure_fields`] pairs, by user id.
fn erasures_found(user_ids: &[&str], values: Vec<Option<String>>) -> HashMap<String, Erasure> {
    let mut found = HashMap::new();
    for (user_id, pair) in user_ids.iter().zip(values.chunks(2)) {
        let erasure = pair
            .iter()
            .flatten()
            .find_map(|value| serde_json::from_str::<Erasure>(value).ok());
        if let Some(erasure) = erasure {
            found.insert(user_id.to_string(), erasure);
        }
    }
    found
}

/// Settled-event records kept per persona at most (the newest): far more than a consumer's
/// ack-pending window, so every settled event above the ack floor is among them.
pub const MAX_SETTLED_RECORDS: usize = 100_000;

/// The field an erasure is recorded under: an HMAC-SHA256 of persona and user id under the
/// deployment's key, so the record neither keeps the erased id in the clear nor gives it up to
/// someone trying every likely id.
fn erasure_digest(key: &[u8], persona_id: &str, user_id: &str) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(persona_id.as_bytes());
    mac.update(&[0u8]);
    mac.update(user_id.as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// The field of an erasure from every persona: [`erasure_digest`] with no persona (persona ids
/// are never empty, so it is no persona's field).
fn everywhere_digest(key: &[u8], user_id: &str) -> String {
    erasure_digest(key, "", user_id)
}

/// The field of erasures recorded before digests were keyed (a bare SHA-256): still honoured
/// when read, and removed when the same user is erased again.
fn legacy_erasure_digest(persona_id: &str, user_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::new()
        .chain_update(persona_id.as_bytes())
        .chain_update([0u8])
        .chain_update(user_id.as_bytes())
        .finalize();
    hex(&digest)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
