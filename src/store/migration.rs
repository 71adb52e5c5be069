//! What `index migrate` needs from the store: finding keys of earlier layouts on every
//! master, moving them into persona slots, and re-embedding topics. The service itself never
//! scans.

use redis::Value;

use super::query::{self};
use super::record::field;
use super::{PreferenceStore, StoreError, WriteGuard, scripts, validate};

/// Before a vector set that does not fit is dropped: each member's record and vector go to its
/// hash (KEYS[i + 1], ARGV[i + 1]), where the resync that rebuilds the set finds them. A record
/// kept in the set (`scripts/record.lua`) is written to the hash whole; a hash that holds a
/// vector keeps it. ARGV[1] "1" to copy vectors ("0": a binary set's, not worth keeping).
/// Returns how many vectors were copied.
static PARK_VECTORS: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("scripts/record.lua"),
        r"
local copied = 0
for i = 2, #ARGV do
  local id, key = ARGV[i], KEYS[i]
  local record = load_record(key, KEYS[1])
  if record then
    if redis.call('EXISTS', key) == 0 then
      local flat = {}
      for name, value in pairs(record) do flat[#flat + 1] = name; flat[#flat + 1] = value end
      redis.call('HSET', key, unpack(flat))
    end
    if not record.embedding and ARGV[1] == '1' then
      local values = redis.call('VEMB', KEYS[1], id)
      if values then
        local parts = {}
        for j, value in ipairs(values) do parts[j] = struct.pack('<f', tonumber(value)) end
        redis.call('HSET', key, 'embedding', table.concat(parts))
        copied = copied + 1
      end
    end
  end
end
return copied
"
    ))
});

/// A stored preference's topic and whether its vector fits the index (migration).
#[derive(Debug, Clone)]
pub struct EmbeddingStatus {
    pub persona_id: String,
    pub preference_id: String,
    pub key: String,
    pub topic: String,
    /// The stored vector has `store.embedding_dims` FLOAT32 values.
    pub fits: bool,
}

impl PreferenceStore {
    /// Every key matching `pattern` on every master, by SCAN so Redis is never blocked.
    /// For migration only: the service itself never scans.
    pub async fn scan_every_master(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        self.scan_every_master_until(pattern, |key| {
            found.push(key.to_string());
            false
        })
        .await?;
        found.sort();
        found.dedup();
        Ok(found)
    }

    /// Walks the keys matching `pattern` on every master until `stop` says so; returns the key
    /// it stopped at.
    pub(crate) async fn scan_every_master_until(
        &self,
        pattern: &str,
        mut stop: impl FnMut(&str) -> bool,
    ) -> Result<Option<String>, StoreError> {
        let mut connection = self.connection.clone();
        for node in connection.masters().await? {
            let mut cursor: u64 = 0;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let (next, keys): (u64, Vec<String>) =
                    connection.query_at_node(&node, &scan).await?;
                if let Some(key) = keys.into_iter().find(|key| stop(key)) {
                    return Ok(Some(key));
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(None)
    }

    /// The ids of every preference of one persona, retracted too.
    pub async fn preference_ids(&self, persona_id: &str) -> Result<Vec<String>, StoreError> {
        validate::persona_id(persona_id)?;
        let mut connection = self.connection.clone();
        let mut ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.settings.keys.ids(persona_id))
            .query_async(&mut connection)
            .await?;
        ids.sort();
        Ok(ids)
    }

    /// For each preference of one persona, its topic (`name`) and whether its stored vector has
    /// the configured size, in one pipelined round trip.
    pub async fn embedding_status(
        &self,
        persona_id: &str,
        preference_ids: &[String],
    ) -> Result<Vec<EmbeddingStatus>, StoreError> {
        if preference_ids.is_empty() {
            return Ok(Vec::new());
        }
        // A vector is in the persona's vector set (active) or parked in the hash (retracted,
        // or an earlier layout's copy); the set's size is checked by `drop_misfit_vector_set`
        // and by every write.
        let vectors = self.settings.keys.vectors(persona_id);
        let mut connection = self.connection.clone();
        // VDIM of a persona without a vector set is an error reply, which would fail a whole
        // pipeline: asked on its own (migration only).
        let set_dims = match connection
            .query_for_key(
                &self.route_key(persona_id),
                redis::cmd("VDIM").arg(&vectors),
            )
            .await
        {
            Ok(Value::Int(dims)) => Some(dims as usize),
            _ => None,
        };
        let mut pipe = redis::pipe();
        for id in preference_ids {
            let key = self.preference_key(persona_id, id);
            pipe.cmd("HSTRLEN").arg(&key).arg(field::EMBEDDING);
            pipe.cmd("VISMEMBER").arg(&vectors).arg(id);
        }
        let replies = connection
            .pipeline_for_key(&self.route_key(persona_id), &pipe)
            .await?;
        let ids: Vec<&str> = preference_ids.iter().map(String::as_str).collect();
        let records = self.record_fields(persona_id, &ids).await?;
        let dims = self.settings.store.embedding_dims;
        let set_fits = set_dims == Some(dims);
        let expected = (dims * 4) as i64;
        Ok(preference_ids
            .iter()
            .zip(replies.chunks(2))
            .zip(records)
            .map(|((id, pair), record)| EmbeddingStatus {
                persona_id: persona_id.to_string(),
                preference_id: id.clone(),
                key: self.preference_key(persona_id, id),
                topic: record
                    .and_then(|mut fields| fields.remove(field::NAME))
                    .unwrap_or_default(),
                fits: matches!(pair[0], Value::Int(length) if length == expected)
                    || (set_fits && matches!(pair[1], Value::Int(1))),
            })
            .collect())
    }

    /// Stores new vectors for existing preferences of one persona (a preference deleted
    /// meanwhile stays deleted) and puts them in the persona's vector set. Returns how many
    /// were written.
    pub async fn set_embeddings(
        &self,
        persona_id: &str,
        updates: &[(String, Vec<f32>)],
    ) -> Result<u64, StoreError> {
        let dims = self.settings.store.embedding_dims;
        let mut written = 0;
        for (preference_id, vector) in updates {
            validate::embedding(vector, dims)?;
            let mut invocation = self.invocation(
                &scripts::SET_EMBEDDING,
                persona_id,
                preference_id,
                WriteGuard::default(),
            )?;
            invocation
                .arg(query::vector_to_bytes(vector))
                .arg(preference_id.as_str());
            let mut connection = self.connection.clone();
            let done: u64 = invocation.invoke_async(&mut connection).await?;
            written += done;
        }
        Ok(written)
    }

    /// Migration: every field of a hash, as bytes (the embedding is binary).
    pub async fn raw_hash(&self, key: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut connection = self.connection.clone();
        let fields: Vec<(String, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut connection)
            .await?;
        Ok(fields)
    }

    /// Migration: writes a preference read from an earlier layout into this one, with its
    /// structures, unless an earlier run already did. True when written.
    pub async fn import_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
        fields: &[(String, Vec<u8>)],
    ) -> Result<bool, StoreError> {
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        let mut invocation = self.invocation(
            &scripts::IMPORT,
            persona_id,
            preference_id,
            WriteGuard::default(),
        )?;
        // The id first: the script reads it from ARGV[7]. The key's id is the truth, as the
        // original system wrote it to both.
        invocation.arg(field::ID).arg(preference_id);
        for (name, value) in fields {
            if name != field::ID {
                invocation.arg(name.as_str()).arg(value.as_slice());
            }
        }
        let mut connection = self.connection.clone();
        let written: u64 = invocation.invoke_async(&mut connection).await?;
        Ok(written == 1)
    }

    /// Migration: brings a preference's structures in step with its hash.
    pub async fn resync_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<bool, StoreError> {
        let mut invocation = self.invocation(
            &scripts::RESYNC,
            persona_id,
            preference_id,
            WriteGuard::default(),
        )?;
        invocation.arg(preference_id);
        let mut connection = self.connection.clone();
        let done: u64 = invocation.invoke_async(&mut connection).await?;
        Ok(done == 1)
    }

    /// Migration: a persona's vector set, when its quantisation or size no longer fits the
    /// configuration, is deleted (a resync of every preference rebuilds it). True when deleted.
    pub async fn drop_misfit_vector_set(&self, persona_id: &str) -> Result<bool, StoreError> {
        let key = self.settings.keys.vectors(persona_id);
        let mut connection = self.connection.clone();
        let info: Value = match redis::cmd("VINFO")
            .arg(&key)
            .query_async(&mut connection)
            .await
        {
            Ok(info) => info,
            Err(_) => return Ok(false),
        };
        let pairs: Vec<String> = match &info {
            Value::Array(items) => items.iter().map(query::value_to_string).collect(),
            Value::Map(items) => items
                .iter()
                .flat_map(|(k, v)| [query::value_to_string(k), query::value_to_string(v)])
                .collect(),
            _ => return Ok(false),
        };
        let get = |name: &str| {
            pairs
                .chunks(2)
                .find(|pair| pair[0] == name)
                .map(|pair| pair[1].clone())
        };
        let quantisation = self.settings.store.vector_quantisation.vinfo_name();
        let fits = get("quant-type").as_deref() == Some(quantisation)
            && get("vector-dim").and_then(|d| d.parse().ok())
                == Some(self.settings.store.embedding_dims);
        if fits {
            return Ok(false);
        }
        // The set holds the only copy of its members' vectors, and of active preferences'
        // records: each goes to its hash first, where the resync that rebuilds the set finds
        // it (a vector of another size is re-embedded from its topic instead). A binary set's
        // copies are signs only, not worth keeping: those preferences are re-embedded too.
        let keep_vectors = if get("quant-type").as_deref() == Some("bin") {
            "0"
        } else {
            "1"
        };
        let ids = self.preference_ids(persona_id).await?;
        for chunk in ids.chunks(200) {
            let mut invocation = PARK_VECTORS.prepare_invoke();
            invocation.key(&key);
            for id in chunk {
                invocation.key(self.preference_key(persona_id, id));
            }
            let _: i64 = invocation
                .arg(keep_vectors)
                .arg(chunk)
                .invoke_async(&mut connection)
                .await?;
        }
        // The users' vector sets were made under the same misfit configuration: the resync
        // rebuilds them with the persona's set.
        let mut doomed = self.about_vector_sets(persona_id).await?;
        doomed.push(key);
        for chunk in doomed.chunks(1000) {
            let _: i64 = redis::cmd("DEL")
                .arg(chunk)
                .query_async(&mut connection)
                .await?;
        }
        Ok(true)
    }

    /// Migration, after every preference of the persona is resynced: every user's own vector
    /// set whole, or gone when the user has too few preferences for one (a write does not
    /// rebuild a set that is not whole: during a migration the persona's set is still filling).
    /// Returns how many users were settled.
    pub async fn settle_user_vector_sets(&self, persona_id: &str) -> Result<usize, StoreError> {
        let users = self.about_users(persona_id).await?;
        let mut connection = self.connection.clone();
        let mut settled = 0;
        for chunk in users.chunks(100) {
            // No preference is written: the preference key names none ("-" is no id).
            let mut invocation = self.invocation(
                &scripts::SETTLE_USERS,
                persona_id,
                "-",
                WriteGuard::default(),
            )?;
            for user in chunk {
                invocation.arg(user.as_str());
            }
            let done: usize = invocation.invoke_async(&mut connection).await?;
            settled += done;
        }
        Ok(settled)
    }

    /// The vector set of every user the persona's about-set names
    /// ([`super::keys::Keys::about_vectors`]).
    pub async fn about_vector_sets(&self, persona_id: &str) -> Result<Vec<String>, StoreError> {
        let keys = &self.settings.keys;
        Ok(self
            .about_users(persona_id)
            .await?
            .into_iter()
            .map(|user| keys.about_vectors(persona_id, &user))
            .collect())
    }

    /// Every user the persona's about-set names, read in pages.
    async fn about_users(&self, persona_id: &str) -> Result<Vec<String>, StoreError> {
        const PAGE: usize = 10_000;
        let about = self.settings.keys.about(persona_id);
        let mut connection = self.connection.clone();
        let mut users = std::collections::BTreeSet::new();
        let mut start = 0usize;
        loop {
            let members: Vec<String> = redis::cmd("ZRANGE")
                .arg(&about)
                .arg(start)
                .arg(start + PAGE - 1)
                .query_async(&mut connection)
                .await?;
            for member in &members {
                if let Some((user, _)) = member.split_once(super::keys::ABOUT_SEPARATOR) {
                    users.insert(user.to_string());
                }
            }
            if members.len() < PAGE {
                break;
            }
            start += PAGE;
        }
        Ok(users.into_iter().collect())
    }

    /// Deletes one key (migration: a legacy key once its data is in this layout).
    pub async fn delete_key(&self, key: &str) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    /// Migration: an effect record of the earlier layout (one key each) becomes a field of the
    /// persona's effect hash, keeping its remaining lifetime; then the old key goes.
    pub async fn import_effect(
        &self,
        legacy_key: &str,
        persona_id: &str,
        effect_id: &str,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let value: Option<String> = redis::cmd("GET")
            .arg(legacy_key)
            .query_async(&mut connection)
            .await?;
        let ttl_ms: i64 = redis::cmd("PTTL")
            .arg(legacy_key)
            .query_async(&mut connection)
            .await?;
        if let Some(value) = value {
            let effects = self.settings.keys.effects(persona_id);
            let mut pipe = redis::pipe();
            pipe.cmd("HSET")
                .arg(&effects)
                .arg(effect_id)
                .arg(value)
                .ignore();
            if ttl_ms > 0 {
                pipe.cmd("HPEXPIRE")
                    .arg(&effects)
                    .arg(ttl_ms)
                    .arg("FIELDS")
                    .arg(1)
                    .arg(effect_id)
                    .ignore();
            }
            let _: () = pipe.atomic().query_async(&mut connection).await?;
        }
        self.delete_key(legacy_key).await
    }

    /// Migration: the erasure records of the earlier layout join the persona's erasure hash
    /// (records already there win); then the old key goes.
    pub async fn import_erasures(
        &self,
        legacy_key: &str,
        persona_id: &str,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let records: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(legacy_key)
            .query_async(&mut connection)
            .await?;
        let erasures = self.settings.keys.erasures(persona_id);
        for (digest, record) in records {
            let _: i64 = redis::cmd("HSETNX")
                .arg(&erasures)
                .arg(digest)
                .arg(record)
                .query_async(&mut connection)
                .await?;
        }
        self.delete_key(legacy_key).await
    }
}
