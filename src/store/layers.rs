//! Layered personas (seed 001): a persona may name base personas whose views it shares until
//! it voices its own. Bases are read, never written: every write goes to the persona itself.
//!
//! The bases of a persona are a string in its own slot (`keys.rs`), nearest first. Layers are
//! visited breadth first (the persona, its bases in order, their bases…) to
//! `store.max_base_depth`, each persona once; an earlier layer's view on a topic overrides a
//! later one's. A base may live in another hash slot, so each layer is its own round trip, the
//! layers of one depth concurrently.

use std::collections::HashSet;
use std::time::Instant;

use redis::Value;
use serde::{Deserialize, Serialize};

use super::query;
use super::{PreferenceStore, ScoredPreference, StoreError, validate};
use crate::telemetry;

/// A persona's bases as set, and every layer they resolve to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bases {
    pub persona_id: String,
    /// The bases the persona names, nearest first.
    pub bases: Vec<String>,
    /// Every layer below the persona, in the order views are consulted (breadth first, each
    /// once, to `store.max_base_depth`): (persona, depth).
    pub layers: Vec<BaseLayer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaseLayer {
    pub persona_id: String,
    /// 1 for a base, 2 for a base's base…
    pub depth: usize,
}

impl PreferenceStore {
    /// The bases a persona names ("" when none), nearest first.
    pub async fn bases_of(&self, persona_id: &str) -> Result<Vec<String>, StoreError> {
        validate::persona_id(persona_id)?;
        let mut connection = self.connection.clone();
        let raw: Option<String> = redis::cmd("GET")
            .arg(self.settings.keys.bases(persona_id))
            .query_async(&mut connection)
            .await?;
        Ok(query::parse_bases(raw.as_deref().unwrap_or("")))
    }

    /// The persona's bases and the layers they resolve to.
    pub async fn bases(&self, persona_id: &str) -> Result<Bases, StoreError> {
        let bases = self.bases_of(persona_id).await?;
        let layers = self.resolve_layers(persona_id, &bases).await?;
        Ok(Bases {
            persona_id: persona_id.to_string(),
            bases,
            layers,
        })
    }

    /// Names the persona's bases (an empty list removes them). Refused: the persona itself, a
    /// repeat, more than `store.max_bases`, and a list under which the persona would reach
    /// itself (a cycle) or whose layers go deeper than `store.max_base_depth`. The caller holds
    /// the persona's lock; two personas made each other's bases at the same moment by two
    /// callers would slip past the cycle check, which is why reading stops at the depth limit
    /// and visits each persona once whatever is stored.
    pub async fn set_bases(&self, persona_id: &str, bases: &[String]) -> Result<Bases, StoreError> {
        validate::persona_id(persona_id)?;
        let config = &self.settings.store;
        if bases.len() > config.max_bases {
            return Err(StoreError::invalid(
                "bases",
                format!("{} bases, the limit is {}", bases.len(), config.max_bases),
            ));
        }
        let mut seen = HashSet::new();
        for base in bases {
            validate::persona_id(base).map_err(|_| {
                StoreError::invalid("bases", format!("{base:?} is not a valid persona id"))
            })?;
            if base == persona_id {
                return Err(StoreError::invalid(
                    "bases",
                    "a persona cannot be its own base",
                ));
            }
            if !seen.insert(base) {
                return Err(StoreError::invalid(
                    "bases",
                    format!("{base} is named twice"),
                ));
            }
        }
        // Walk every path below the new bases: a cycle back to the persona, or a path longer
        // than the depth limit, is refused with the path that shows it.
        let mut paths: Vec<Vec<String>> = bases.iter().map(|base| vec![base.clone()]).collect();
        while !paths.is_empty() {
            let below = futures::future::try_join_all(
                paths
                    .iter()
                    .map(|path| self.bases_of(path.last().expect("paths are not empty"))),
            )
            .await?;
            let mut next = Vec::new();
            for (path, below) in paths.into_iter().zip(below) {
                for base in below {
                    let mut longer = path.clone();
                    longer.push(base.clone());
                    let shown = format!("{persona_id} -> {}", longer.join(" -> "));
                    if base == persona_id {
                        return Err(StoreError::invalid("bases", format!("a cycle: {shown}")));
                    }
                    if longer.len() > config.max_base_depth {
                        return Err(StoreError::invalid(
                            "bases",
                            format!(
                                "{shown} is deeper than store.max_base_depth ({})",
                                config.max_base_depth
                            ),
                        ));
                    }
                    // A cycle among the bases themselves (not through this persona) ends here.
                    if !path.contains(&base) {
                        next.push(longer);
                    }
                }
            }
            paths = next;
        }
        let mut connection = self.connection.clone();
        let key = self.settings.keys.bases(persona_id);
        if bases.is_empty() {
            let _: () = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut connection)
                .await?;
        } else {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(bases.join(","))
                .query_async(&mut connection)
                .await?;
        }
        self.bases(persona_id).await
    }

    /// The layers below a persona with these bases: breadth first, each persona once, to the
    /// depth limit.
    async fn resolve_layers(
        &self,
        persona_id: &str,
        bases: &[String],
    ) -> Result<Vec<BaseLayer>, StoreError> {
        let mut seen: HashSet<String> = HashSet::from([persona_id.to_string()]);
        let mut layers = Vec::new();
        let mut frontier = bases.to_vec();
        for depth in 1..=self.settings.store.max_base_depth {
            let next: Vec<String> = frontier
                .into_iter()
                .filter(|base| seen.insert(base.clone()))
                .collect();
            if next.is_empty() {
                break;
            }
            let below =
                futures::future::try_join_all(next.iter().map(|base| self.bases_of(base))).await?;
            layers.extend(
                next.into_iter()
                    .map(|persona_id| BaseLayer { persona_id, depth }),
            );
            frontier = below.into_iter().flatten().collect();
        }
        Ok(layers)
    }

    /// The ingest decision's search: the persona's active preferences nearest to a topic,
    /// `store.conflict_top_k` of them, carrying only what deciding reads (id, topic, stance and
    /// its time). One round trip (`VSIM` over the persona's vector set, whose attributes carry
    /// those fields, and its bases) for a persona without bases or with a view of its own on
    /// the topic. Otherwise its bases are searched, layer by layer, and the first layer with a
    /// preference at or above the topic match threshold adds its hits after the persona's
    /// own: a hit's `persona_id` says which layer it is from.
    pub async fn nearest_topics(
        &self,
        persona_id: &str,
        topic_embedding: &[f32],
    ) -> Result<Vec<ScoredPreference>, StoreError> {
        let started = Instant::now();
        validate::persona_id(persona_id)?;
        validate::embedding(topic_embedding, self.settings.store.embedding_dims)?;
        let threshold = self.settings.topic_match_threshold;
        let has_match =
            |hits: &[ScoredPreference]| hits.iter().any(|hit| hit.similarity() >= threshold);
        let (mut hits, bases) = self.layer_neighbours(persona_id, topic_embedding).await?;
        if !bases.is_empty() && !has_match(&hits) {
            let mut seen: HashSet<String> = HashSet::from([persona_id.to_string()]);
            let mut frontier = bases;
            for _depth in 0..self.settings.store.max_base_depth {
                let layer_ids: Vec<String> = frontier
                    .into_iter()
                    .filter(|base| validate::persona_id(base).is_ok() && seen.insert(base.clone()))
                    .collect();
                if layer_ids.is_empty() {
                    break;
                }
                let layers = futures::future::try_join_all(
                    layer_ids
                        .iter()
                        .map(|base| self.layer_neighbours(base, topic_embedding)),
                )
                .await?;
                if let Some((found, _)) = layers.iter().find(|(found, _)| has_match(found)) {
                    hits.extend(found.iter().cloned());
                    break;
                }
                frontier = layers.into_iter().flat_map(|(_, bases)| bases).collect();
            }
        }
        telemetry::store_op("search", started.elapsed());
        Ok(hits)
    }

    /// One layer's nearest preferences (as that persona's) and its bases, in one round trip.
    async fn layer_neighbours(
        &self,
        persona_id: &str,
        embedding: &[f32],
    ) -> Result<(Vec<ScoredPreference>, Vec<String>), StoreError> {
        let keys = &self.settings.keys;
        let mut pipe = redis::pipe();
        pipe.add_command(query::vsim_command(
            keys.vectors(persona_id),
            embedding,
            self.settings.store.conflict_top_k,
            self.settings.store.vector_search_ef,
            true,
        ));
        pipe.cmd("GET").arg(keys.bases(persona_id));
        let mut connection = self.connection.clone();
        let mut replies = connection
            .pipeline_for_key(&self.route_key(persona_id), &pipe)
            .await?
            .into_iter();
        let (Some(found), Some(bases)) = (replies.next(), replies.next()) else {
            return Err(StoreError::UnexpectedReply(
                "a VSIM and GET pipeline answered fewer than two replies".into(),
            ));
        };
        let hits = query::parse_vector_hits(found, query::VectorScore::VsimScore)?
            .into_iter()
            .map(|hit| ScoredPreference {
                score: 1.0 - hit.similarity,
                preference: hit.attributes.into_preference(hit.id, persona_id),
            })
            .collect();
        let bases = match bases {
            Value::Nil => Vec::new(),
            other => query::parse_bases(&query::value_to_string(&other)),
        };
        Ok((hits, bases))
    }
}
