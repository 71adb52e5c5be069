//! Reads: one preference, lists, stats, keyword and vector search, and `find_conflicts`.

use std::collections::HashMap;
use std::time::Instant;

use redis::Value;

use super::element_record;
use super::query::{self, persona_filter};
use super::record::field;
use super::{
    ListOptions, Preference, PreferenceStats, PreferenceStore, ScoredPreference, StoreError,
    cosine, scripts, validate,
};
use crate::telemetry;

impl PreferenceStore {
    /// One preference, or `None`. A record that says it belongs to another persona is
    /// treated as not found.
    pub async fn get_preference(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<Option<Preference>, StoreError> {
        validate::persona_id(persona_id)?;
        validate::preference_id(preference_id)?;
        let Some(fields) = self.record(persona_id, preference_id).await? else {
            return Ok(None);
        };
        let preference = self.with_decay(Preference::from_fields(&fields)?);
        Ok((preference.persona_id == persona_id).then_some(preference))
    }

    /// The preference with its decayed strength (active ones; see
    /// `store.strength_half_life_days`).
    pub(super) fn with_decay(&self, mut preference: Preference) -> Preference {
        if preference.active {
            preference.decayed_strength = Some(super::decayed_strength_of(
                &preference,
                crate::timestamp::Timestamp::now(),
                self.settings.store.strength_half_life_days,
            ));
        }
        preference
    }

    /// A persona's preferences, strongest first by decayed strength (ties by id), read from the persona's own
    /// records: its id set names them all, and all live in its slot, so this works the same on
    /// one node and on a cluster (where RediSearch 2.10 cannot answer for every shard).
    pub async fn list_preferences(
        &self,
        persona_id: &str,
        options: &ListOptions,
    ) -> Result<Vec<Preference>, StoreError> {
        validate::persona_id(persona_id)?;
        if let Some(category) = &options.category
            && category.trim().is_empty()
        {
            return Err(StoreError::invalid("category", "is empty"));
        }
        let limit = options.limit.clamp(1, validate::MAX_LIST_LIMIT);
        let mut listed: Vec<Preference> = self
            .all_records(persona_id)
            .await?
            .into_iter()
            .filter(|p| options.include_retracted || p.active)
            .filter(|p| {
                options
                    .category
                    .as_ref()
                    .is_none_or(|category| &p.category == category)
            })
            .collect();
        let current = |p: &Preference| p.decayed_strength.unwrap_or(p.strength);
        listed.sort_by(|a, b| {
            current(b)
                .total_cmp(&current(a))
                .then_with(|| a.id.cmp(&b.id))
        });
        listed.truncate(limit);
        Ok(listed)
    }

    /// Totals, active/retracted split and active preferences per category.
    pub async fn stats(&self, persona_id: &str) -> Result<PreferenceStats, StoreError> {
        validate::persona_id(persona_id)?;
        let records = self.all_records(persona_id).await?;
        let total = records.len() as u64;
        let mut by_category = std::collections::BTreeMap::new();
        let mut active = 0;
        for preference in records.iter().filter(|p| p.active) {
            active += 1;
            *by_category.entry(preference.category.clone()).or_insert(0) += 1;
        }
        Ok(PreferenceStats {
            persona_id: persona_id.to_string(),
            total,
            active,
            retracted: total - active,
            by_category,
        })
    }

    /// Every record of one persona (without embeddings), by its id set, pipelined in chunks.
    async fn all_records(&self, persona_id: &str) -> Result<Vec<Preference>, StoreError> {
        let ids = self.preference_ids(persona_id).await?;
        let mut records = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(1000) {
            records.extend(
                self.preferences_by_id(persona_id, chunk)
                    .await?
                    .into_iter()
                    .flatten(),
            );
        }
        Ok(records)
    }

    /// KNN over one persona's preferences; `score` is the cosine distance, nearest first.
    /// Active preferences come from the persona's vector set; with `include_retracted`, every
    /// preference of the persona is scored exactly from its stored vector instead (an
    /// administrative search, proportional to the persona's size). A failed search is an error,
    /// never an empty list.
    pub async fn search_preferences(
        &self,
        persona_id: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::embedding(query_embedding, self.settings.store.embedding_dims)?;
        let top_k = validate::top_k(top_k, self.settings.store.max_top_k)?;
        let scored: Vec<(String, f64)> = if include_retracted {
            self.exact_neighbours(persona_id, query_embedding, top_k)
                .await?
        } else {
            self.vector_neighbours(persona_id, query_embedding, top_k)
                .await?
                .into_iter()
                .map(|hit| (hit.id, hit.similarity))
                .collect()
        };
        let records = self
            .preferences_by_id(
                persona_id,
                &scored.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
            )
            .await?;
        telemetry::store_op("search", started.elapsed());
        Ok(scored
            .into_iter()
            .zip(records)
            .filter_map(|((_, similarity), preference)| {
                preference.map(|preference| ScoredPreference {
                    preference,
                    score: 1.0 - similarity,
                })
            })
            .collect())
    }

    /// Full-text search of one persona's topics and opinions (BM25 over the TEXT fields),
    /// best first, with each hit's cosine similarity to `query_embedding` computed from its
    /// stored vector, so callers can blend the two. No word to search: no hits.
    pub async fn keyword_search(
        &self,
        persona_id: &str,
        text: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
    ) -> Result<Vec<(Preference, f64, f64)>, StoreError> {
        validate::persona_id(persona_id)?;
        validate::embedding(query_embedding, self.settings.store.embedding_dims)?;
        let top_k = validate::top_k(top_k, self.settings.store.max_top_k)?;
        if !self.has_text_index() {
            // No index to ask: `redis.text_index` is off, or this is a cluster (RediSearch 2.10
            // routes an index by its name's slot and has no coordinator, so one index would
            // see one shard's preferences only). The persona's records all live in its slot,
            // so BM25 over them gives the same answer.
            return self
                .keyword_search_in_records(
                    persona_id,
                    text,
                    query_embedding,
                    top_k,
                    include_retracted,
                )
                .await;
        }
        let Some(words) = query::keyword_clause(text) else {
            return Ok(Vec::new());
        };
        let filter = persona_filter(persona_id, include_retracted);
        let returned: Vec<&str> = field::ALL_BUT_EMBEDDING.to_vec();
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("FT.SEARCH");
        command
            .arg(&self.settings.index_name)
            .arg(format!("{filter} {words}"))
            .arg("WITHSCORES")
            .arg("SCORER")
            .arg("BM25")
            .arg("LIMIT")
            .arg(0)
            .arg(top_k)
            .arg("RETURN")
            .arg(returned.len())
            .arg(&returned[..])
            .arg("DIALECT")
            .arg(2);
        let reply: Value = connection
            .query_for_key(&self.route_key(persona_id), &command)
            .await?;
        let hits: Vec<query::KeywordHit> = query::parse_keyword_reply(reply)?
            .into_iter()
            .filter(|hit| hit.preference.persona_id == persona_id)
            .collect();
        let ids: Vec<&str> = hits.iter().map(|hit| hit.preference.id.as_str()).collect();
        let vectors = self.stored_vectors(persona_id, &ids).await?;
        Ok(hits
            .into_iter()
            .zip(vectors)
            .map(|(hit, vector)| {
                let similarity = vector.map_or(0.0, |v| cosine(&v, query_embedding));
                (hit.preference, hit.bm25, similarity)
            })
            .collect())
    }

    /// [`PreferenceStore::keyword_search`] over the persona's own records (BM25, k1 1.2,
    /// b 0.75, as RediSearch scores; no stemming), for a cluster, where no index sees them all.
    async fn keyword_search_in_records(
        &self,
        persona_id: &str,
        text: &str,
        query_embedding: &[f32],
        top_k: usize,
        include_retracted: bool,
    ) -> Result<Vec<(Preference, f64, f64)>, StoreError> {
        let words = query::keyword_words(text);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let records: Vec<Preference> = self
            .all_records(persona_id)
            .await?
            .into_iter()
            .filter(|p| include_retracted || p.active)
            .collect();
        let documents: Vec<Vec<String>> = records
            .iter()
            .map(|p| query::document_words(&format!("{} {}", p.name, p.opinion)))
            .collect();
        let scores = query::bm25(&words, &documents);
        let mut hits: Vec<(usize, f64)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, score)| *score > 0.0)
            .collect();
        hits.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(records[a.0].id.cmp(&records[b.0].id))
        });
        hits.truncate(top_k);
        let ids: Vec<&str> = hits
            .iter()
            .map(|(at, _)| records[*at].id.as_str())
            .collect();
        let vectors = self.stored_vectors(persona_id, &ids).await?;
        let mut records: Vec<Option<Preference>> = records.into_iter().map(Some).collect();
        Ok(hits
            .into_iter()
            .zip(vectors)
            .filter_map(|((at, score), vector)| {
                let similarity = vector.map_or(0.0, |v| cosine(&v, query_embedding));
                records[at].take().map(|p| (p, score, similarity))
            })
            .collect())
    }

    /// `VSIM` over the persona's vector set: the nearest active preferences with their cosine
    /// similarity and attributes.
    async fn vector_neighbours(
        &self,
        persona_id: &str,
        embedding: &[f32],
        top_k: usize,
    ) -> Result<Vec<query::VectorHit>, StoreError> {
        let mut connection = self.connection.clone();
        let reply: Value = query::vsim_command(
            self.settings.keys.vectors(persona_id),
            embedding,
            top_k,
            self.settings.store.vector_search_ef,
            true,
        )
        .query_async(&mut connection)
        .await?;
        query::parse_vector_hits(reply, query::VectorScore::VsimScore)
    }

    /// Every preference of the persona (retracted too) scored exactly against `embedding`
    /// from its stored vector: (id, cosine similarity), nearest first, at most `top_k`.
    async fn exact_neighbours(
        &self,
        persona_id: &str,
        embedding: &[f32],
        top_k: usize,
    ) -> Result<Vec<(String, f64)>, StoreError> {
        let ids = self.preference_ids(persona_id).await?;
        let mut scored = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let vectors = self.stored_vectors(persona_id, &chunk).await?;
            for (id, vector) in chunk.into_iter().zip(vectors) {
                if let Some(vector) = vector {
                    scored.push((id.to_string(), cosine(&vector, embedding)));
                }
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(top_k);
        Ok(scored)
    }

    /// The stored vector of each preference, in order, in one pipelined round trip: the vector
    /// set's copy of an active one (dequantised), the hash's of one out of the set (retracted;
    /// `sync` in guard.lua parks it there). `None` for a preference with neither.
    pub(crate) async fn stored_vectors(
        &self,
        persona_id: &str,
        preference_ids: &[&str],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        if preference_ids.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.settings.keys.vectors(persona_id);
        let mut pipe = redis::pipe();
        for id in preference_ids {
            pipe.cmd("VEMB").arg(&vectors).arg(*id);
            pipe.cmd("HGET")
                .arg(self.preference_key(persona_id, id))
                .arg(field::EMBEDDING);
        }
        let mut connection = self.connection.clone();
        let replies = connection
            .pipeline_for_key(&self.route_key(persona_id), &pipe)
            .await?;
        Ok(replies
            .chunks(2)
            .map(|pair| match pair {
                [Value::Array(values), _] => Some(
                    values
                        .iter()
                        .map(|v| match v {
                            Value::Double(x) => *x as f32,
                            other => query::value_to_string(other).parse().unwrap_or(0.0),
                        })
                        .collect(),
                ),
                [_, Value::BulkString(bytes)] => Some(query::bytes_to_vector(bytes)),
                _ => None,
            })
            .collect())
    }

    /// The whole records of `ids` (one persona), in order, wherever each lives
    /// ([`scripts::READ`]), as field -> text; `None` for an id with none. One round trip per
    /// 500 ids, so no one script holds Redis long.
    pub async fn record_fields(
        &self,
        persona_id: &str,
        ids: &[&str],
    ) -> Result<Vec<Option<HashMap<String, String>>>, StoreError> {
        let mut records = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut invocation = scripts::READ.prepare_invoke();
            invocation.key(self.settings.keys.vectors(persona_id));
            for id in chunk {
                invocation.key(self.preference_key(persona_id, id));
                invocation.arg(*id);
            }
            let mut connection = self.connection.clone();
            let replies: Vec<Vec<Vec<u8>>> = invocation.invoke_async(&mut connection).await?;
            if replies.len() != chunk.len() {
                return Err(StoreError::UnexpectedReply(format!(
                    "read script returned {} records for {} ids",
                    replies.len(),
                    chunk.len()
                )));
            }
            records.extend(replies.into_iter().zip(chunk).map(|(flat, id)| {
                match &flat[..] {
                    [] => None,
                    [attributes] => {
                        element_record::record_from_whole_attributes(attributes, id, persona_id)
                    }
                    _ => Some(
                        flat.chunks(2)
                            .filter_map(|pair| match pair {
                                [name, value] => Some((
                                    String::from_utf8_lossy(name).into_owned(),
                                    String::from_utf8_lossy(value).into_owned(),
                                )),
                                _ => None,
                            })
                            .collect(),
                    ),
                }
            }));
        }
        Ok(records)
    }

    /// One record by id ([`PreferenceStore::record_fields`]).
    pub(super) async fn record(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<Option<HashMap<String, String>>, StoreError> {
        Ok(self
            .record_fields(persona_id, &[preference_id])
            .await?
            .pop()
            .flatten())
    }

    /// Whole records of one persona by id, in order; `None` for an id with no record.
    async fn preferences_by_id(
        &self,
        persona_id: &str,
        ids: &[String],
    ) -> Result<Vec<Option<Preference>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.record_fields(persona_id, &ids)
            .await?
            .into_iter()
            .map(|fields| {
                let Some(fields) = fields else {
                    return Ok(None);
                };
                let preference = self.with_decay(Preference::from_fields(&fields)?);
                Ok((preference.persona_id == persona_id).then_some(preference))
            })
            .collect()
    }

    /// Active preferences whose similarity (1 − distance) to `embedding` is at least
    /// `threshold` (default `store.conflict_threshold`), among the nearest `conflict_top_k`:
    /// the persona's own; when it has none, those of the first of its base layers that has
    /// any (its own view on a topic overrides a base's; each hit's `persona_id` says whose).
    pub async fn find_conflicts(
        &self,
        persona_id: &str,
        embedding: &[f32],
        threshold: Option<f64>,
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        let threshold = threshold.unwrap_or(self.settings.store.conflict_threshold);
        let conflicts_of = |persona_id: String| async move {
            let hits = self
                .search_preferences(
                    &persona_id,
                    embedding,
                    self.settings.store.conflict_top_k,
                    false,
                )
                .await?;
            Ok::<_, StoreError>(
                hits.into_iter()
                    .filter(|hit| hit.similarity() >= threshold)
                    .collect::<Vec<_>>(),
            )
        };
        let own = conflicts_of(persona_id.to_string()).await?;
        if !own.is_empty() {
            return Ok(own);
        }
        for layer in self.bases(persona_id).await?.layers {
            let found = conflicts_of(layer.persona_id).await?;
            if !found.is_empty() {
                return Ok(found);
            }
        }
        Ok(Vec::new())
    }
}
