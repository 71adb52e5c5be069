//! What each endpoint does. Handlers parse and validate the request, call the store (and the
//! embedder for text), and always produce a reply: success JSON or a typed error.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ServeContext;
use super::micro::{ErrorReply as MicroErrorReply, Request};
use super::protocol::*;
use super::render;
use crate::embed::{EmbedError, Embedder};
use crate::erasure::{Eraser, ErasureError};
use crate::store::{
    Evolution, InjectionQuery, ListOptions, NewPreference, PreferenceStore, Provenance, StoreError,
    WriteGuard, validate,
};
use crate::telemetry;

/// Longest text query accepted for embedding.
const MAX_QUERY_CHARS: usize = 4096;
/// Room left in a reply for the service's headers and protocol framing.
const REPLY_HEADROOM: usize = 4096;
/// Share of the keyword score in a hybrid search's relevance (the vector/keyword 0.7/0.3 split
/// the "Soul & Memory" design found to work).
const HYBRID_KEYWORD_WEIGHT: f64 = 0.3;

/// An error reply.
#[derive(Debug, Clone)]
pub struct ServiceError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ServiceError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> ServiceError {
        ServiceError {
            kind,
            message: message.into(),
        }
    }
    fn not_found(what: &str) -> ServiceError {
        ServiceError::new(ErrorKind::NotFound, format!("{what} not found"))
    }
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> ServiceError {
        match &error {
            StoreError::InvalidInput {
                field: "embedding", ..
            } => ServiceError::new(ErrorKind::WrongDims, error.to_string()),
            StoreError::InvalidInput { .. } => {
                ServiceError::new(ErrorKind::Invalid, error.to_string())
            }
            e if e.is_retryable() => ServiceError::new(ErrorKind::Unavailable, error.to_string()),
            _ => ServiceError::new(ErrorKind::Internal, error.to_string()),
        }
    }
}

impl From<ErasureError> for ServiceError {
    fn from(error: ErasureError) -> ServiceError {
        match error {
            ErasureError::Store(error) => error.into(),
            other => ServiceError::new(ErrorKind::Unavailable, other.to_string()),
        }
    }
}

impl From<EmbedError> for ServiceError {
    fn from(error: EmbedError) -> ServiceError {
        if error.is_retryable() {
            ServiceError::new(ErrorKind::Unavailable, error.to_string())
        } else {
            ServiceError::new(ErrorKind::Internal, error.to_string())
        }
    }
}

type Reply = Result<Vec<u8>, ServiceError>;

/// A curation write: no effect id (an operator's request is its own effect), fenced by `lock`.
fn fenced(lock: &crate::store::LockToken) -> WriteGuard<'_> {
    WriteGuard {
        effect_id: None,
        message: None,
        lock: Some(lock),
    }
}

pub struct Handlers {
    store: PreferenceStore,
    embedder: Arc<dyn Embedder>,
    query_embedder: Arc<dyn Embedder>,
    max_payload_bytes: usize,
    /// Largest reply body the NATS server accepts (its max_payload, less room for headers).
    max_reply_bytes: usize,
    resident_count: usize,
    min_query_chars: usize,
    eraser: Eraser,
    locks: crate::store::PersonaLock,
    lock_patience: std::time::Duration,
    max_redacted_share: f64,
    pipeline: crate::ingest::pipeline::Pipeline,
    event_limits: crate::ingest::event::EventLimits,
    subject_prefix: String,
    tenant: String,
}

impl Handlers {
    pub fn new(context: &ServeContext) -> Handlers {
        Handlers {
            store: context.store.clone(),
            embedder: context.embedder.clone(),
            query_embedder: context.query_embedder.clone(),
            max_payload_bytes: context.max_payload_bytes,
            max_reply_bytes: context
                .nats
                .server_info()
                .max_payload
                .saturating_sub(REPLY_HEADROOM),
            resident_count: context.config.resident_count,
            min_query_chars: context.config.min_query_chars,
            eraser: context.eraser.clone(),
            locks: context.locks.clone(),
            lock_patience: context.lock_patience,
            max_redacted_share: context.max_redacted_share,
            pipeline: context.pipeline.clone(),
            event_limits: context.event_limits.clone(),
            subject_prefix: context.config.subject_prefix.clone(),
            tenant: context.config.tenant.clone(),
        }
    }

    /// Answers one request; never returns without replying (unless the requester is gone).
    pub async fn handle(&self, endpoint: Endpoint, request: Request) {
        let started = Instant::now();
        let payload = request.message.payload.clone();
        let reply = if payload.len() > self.max_payload_bytes {
            Err(ServiceError::new(
                ErrorKind::Oversize,
                format!(
                    "request is {} bytes, the limit is {}",
                    payload.len(),
                    self.max_payload_bytes
                ),
            ))
        } else {
            let subject_persona = endpoint.persona_in_subject(
                &self.subject_prefix,
                &self.tenant,
                request.message.subject.as_str(),
            );
            self.dispatch(endpoint, &payload, subject_persona).await
        };
        // A reply the server would refuse never arrives: say so instead.
        let reply = match reply {
            Ok(body) if body.len() > self.max_reply_bytes => Err(ServiceError::new(
                ErrorKind::ReplyTooLarge,
                format!(
                    "the reply would be {} bytes, over the {} the NATS server accepts; ask for fewer (limit, top_k, max_count)",
                    body.len(),
                    self.max_reply_bytes
                ),
            )),
            other => other,
        };
        let status = reply
            .as_ref()
            .map(|_| 200)
            .unwrap_or_else(|e| e.kind.status());
        telemetry::request(endpoint.name(), status, started.elapsed());
        tracing::debug!(
            endpoint = endpoint.name(),
            status,
            took_ms = started.elapsed().as_secs_f64() * 1000.0,
            "request answered"
        );
        let sent = match reply {
            Ok(body) => request.respond(Ok(Bytes::from(body))).await,
            Err(error) => {
                if error.kind.status() >= 500 {
                    tracing::warn!(endpoint = endpoint.name(), kind = %error.kind, message = %error.message, "request failed");
                }
                let description = single_line(&error.message);
                let body = serde_json::to_vec(&ErrorReply {
                    error: ErrorBody {
                        code: error.kind.status(),
                        kind: error.kind,
                        message: error.message,
                    },
                })
                .unwrap_or_default();
                request
                    .respond(Err(MicroErrorReply {
                        code: error.kind.status(),
                        description,
                        body: Bytes::from(body),
                    }))
                    .await
            }
        };
        if let Err(error) = sent {
            tracing::debug!(endpoint = endpoint.name(), %error, "reply not delivered");
        }
    }

    /// `subject_persona`: the persona the request's subject names, checked against the one its
    /// body names as the body is parsed ([`Body::parse`]), before anything is read or written.
    async fn dispatch(
        &self,
        endpoint: Endpoint,
        payload: &[u8],
        subject_persona: Option<&str>,
    ) -> Reply {
        let body = Body {
            payload,
            subject_persona,
        };
        match endpoint {
            Endpoint::Inject => self.inject(body.parse()?).await.and_then(json),
            Endpoint::Check => self.check(body.parse()?).await.and_then(json),
            Endpoint::Add => self.add(body.parse()?).await.and_then(json),
            Endpoint::Reinforce => {
                let r: PreferenceRef = body.parse()?;
                validate::persona_id(&r.persona_id)?;
                let outcome = self
                    .locked(&r.persona_id, async |guard| {
                        self.store
                            .reinforce_preference(&r.persona_id, &r.preference_id, guard)
                            .await
                    })
                    .await?;
                json(outcome.ok_or_else(|| ServiceError::not_found("preference"))?)
            }
            Endpoint::Evolve => self.evolve(body.parse()?).await.and_then(json),
            Endpoint::Retract => {
                let r: RetractRequest = body.parse()?;
                validate::persona_id(&r.persona_id)?;
                let reason = self.without_secrets("reason", &r.reason)?;
                let outcome = self
                    .locked(&r.persona_id, async |guard| {
                        self.store
                            .retract_preference(&r.persona_id, &r.preference_id, &reason, guard)
                            .await
                    })
                    .await?;
                json(outcome.ok_or_else(|| ServiceError::not_found("preference"))?)
            }
            Endpoint::Get => {
                let r: PreferenceRef = body.parse()?;
                json(
                    self.store
                        .get_preference(&r.persona_id, &r.preference_id)
                        .await?
                        .ok_or_else(|| ServiceError::not_found("preference"))?,
                )
            }
            Endpoint::List => {
                let r: ListRequest = body.parse()?;
                if r.limit == 0 || r.limit > validate::MAX_LIST_LIMIT {
                    return Err(ServiceError::new(
                        ErrorKind::Invalid,
                        format!("limit must be within 1..={}", validate::MAX_LIST_LIMIT),
                    ));
                }
                let options = ListOptions {
                    category: r.category,
                    include_retracted: r.include_retracted,
                    limit: r.limit,
                };
                json(self.store.list_preferences(&r.persona_id, &options).await?)
            }
            Endpoint::Stats => {
                let r: PersonaRequest = body.parse()?;
                json(self.store.stats(&r.persona_id).await?)
            }
            Endpoint::Search => self.search(body.parse()?).await.and_then(json),
            Endpoint::PurgeUser => self.purge_user(body.parse()?).await.and_then(json),
            Endpoint::PurgeUserEverywhere => {
                let r: PurgeUserEverywhereRequest = body.parse_unnamed()?;
                if r.max_personas == 0 || r.max_personas > MAX_PERSONAS_PER_PAGE {
                    return Err(ServiceError::new(
                        ErrorKind::Invalid,
                        format!("max_personas must be within 1..={MAX_PERSONAS_PER_PAGE}"),
                    ));
                }
                json(
                    self.eraser
                        .erase_everywhere(&r.user_id, &r.cursor, r.max_personas)
                        .await?,
                )
            }
            Endpoint::DeletePersona => {
                let r: DeletePersonaRequest = body.parse()?;
                validate::persona_id(&r.persona_id)?;
                if r.confirm != r.persona_id {
                    return Err(ServiceError::new(
                        ErrorKind::Invalid,
                        format!(
                            "confirm must repeat the persona id ({:?}): a deletion cannot be undone",
                            r.persona_id
                        ),
                    ));
                }
                json(self.eraser.delete_persona(&r.persona_id).await?)
            }
            Endpoint::Personas => {
                let r: PersonasRequest = body.parse_unnamed()?;
                json(self.store.personas(r.offset, r.limit).await?)
            }
            Endpoint::Bases => {
                let r: PersonaRequest = body.parse()?;
                json(self.store.bases(&r.persona_id).await?)
            }
            Endpoint::SetBases => {
                let r: SetBasesRequest = body.parse()?;
                validate::persona_id(&r.persona_id)?;
                json(
                    self.locked(&r.persona_id, async |_guard| {
                        self.store.set_bases(&r.persona_id, &r.bases).await
                    })
                    .await?,
                )
            }
            Endpoint::Restore => {
                let r: RestoreRequest = body.parse()?;
                validate::persona_id(&r.persona_id)?;
                let reason = self.without_secrets("reason", &r.reason)?;
                let outcome = self
                    .locked(&r.persona_id, async |guard| {
                        self.store
                            .restore_preference(
                                &r.persona_id,
                                &r.preference_id,
                                r.version,
                                &reason,
                                guard,
                            )
                            .await
                    })
                    .await?;
                json(outcome.ok_or_else(|| ServiceError::not_found("preference"))?)
            }
            Endpoint::Consolidate => {
                let r: ConsolidateRequest = body.parse()?;
                validate::persona_id(&r.persona_id)?;
                let threshold = r
                    .threshold
                    .unwrap_or_else(|| self.store.topic_match_threshold());
                let report = if r.apply {
                    self.locked(&r.persona_id, async |guard| {
                        self.store
                            .consolidate(&r.persona_id, threshold, false, guard)
                            .await
                    })
                    .await?
                } else {
                    self.store
                        .consolidate(&r.persona_id, threshold, true, WriteGuard::default())
                        .await?
                };
                json(report)
            }
        }
    }

    async fn inject(&self, request: InjectRequest) -> Result<InjectReply, ServiceError> {
        let started = Instant::now();
        validate::persona_id(&request.persona_id)?;
        let mut semantic_skipped = None;
        let embedding = match (&request.query, &request.query_embedding) {
            (Some(_), Some(_)) => {
                return Err(ServiceError::new(
                    ErrorKind::Malformed,
                    "give either query or query_embedding, not both",
                ));
            }
            (None, None) => {
                return Err(ServiceError::new(
                    ErrorKind::Malformed,
                    "query or query_embedding is required",
                ));
            }
            (None, Some(vector)) => {
                if vector.is_empty() {
                    return Err(ServiceError::new(
                        ErrorKind::WrongDims,
                        "query_embedding is empty",
                    ));
                }
                vector.clone()
            }
            (Some(text), None) => match too_short_to_search(text, self.min_query_chars) {
                Some(reason) => {
                    semantic_skipped = Some(reason);
                    Vec::new()
                }
                None => self.embed_query(text).await?,
            },
        };
        let query = InjectionQuery {
            persona_id: &request.persona_id,
            query_embedding: &embedding,
            max_count: request.max_count,
            max_chars: request.max_chars,
            active_user_ids: &request.active_user_ids,
        };
        let resident_count = if request.resident {
            self.resident_count
        } else {
            0
        };
        let selection = self
            .store
            .get_preferences_for_injection_with_resident(&query, resident_count)
            .await?;
        let rendered = render::render(
            request.format,
            &selection.chosen,
            &selection.resident,
            request.explain,
        );
        let preferences = selection
            .chosen
            .into_iter()
            .chain(selection.resident)
            .collect();
        let query_kind = if request.query.is_some() {
            "text"
        } else {
            "embedding"
        };
        telemetry::injection(query_kind, started.elapsed());
        Ok(InjectReply {
            persona_id: request.persona_id,
            preferences,
            rendered,
            semantic_skipped,
            took_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    }

    /// Embeds search text (injection's and search's queries) with the query embedder, whose
    /// vectors are never stored.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, ServiceError> {
        self.embed_with(&self.query_embedder, text).await
    }

    /// Embeds a topic to be stored with the exact embedder, as ingest does.
    async fn embed_topic(&self, text: &str) -> Result<Vec<f32>, ServiceError> {
        self.embed_with(&self.embedder, text).await
    }

    /// Embeds `text` (the embedder answers repeats from its cache).
    async fn embed_with(
        &self,
        embedder: &Arc<dyn Embedder>,
        text: &str,
    ) -> Result<Vec<f32>, ServiceError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ServiceError::new(ErrorKind::Invalid, "query is empty"));
        }
        if text.chars().count() > MAX_QUERY_CHARS {
            return Err(ServiceError::new(
                ErrorKind::Invalid,
                format!("query is longer than {MAX_QUERY_CHARS} characters"),
            ));
        }
        let mut vectors = embedder.embed(&[text.to_string()]).await?;
        vectors
            .pop()
            .ok_or_else(|| ServiceError::new(ErrorKind::Internal, "embedder returned nothing"))
    }

    async fn add(&self, r: AddRequest) -> Result<crate::store::Preference, ServiceError> {
        validate::persona_id(&r.persona_id)?;
        if r.name.trim().is_empty() {
            return Err(ServiceError::new(ErrorKind::Invalid, "name is empty"));
        }
        // The same secret redaction as ingest: a curator's paste must not store a key.
        let name = self.without_secrets("name", &r.name)?;
        let opinion = self.without_secrets("opinion", &r.opinion)?;
        // Preferences are matched by topic, so the stored vector is the name's.
        let embedding = self.embed_topic(&name).await?;
        let persona_id = r.persona_id.clone();
        let new = NewPreference {
            persona_id: r.persona_id,
            name,
            opinion,
            category: r.category,
            stance: r.stance,
            stance_at: None,
            strength: r.strength,
            provenance: Provenance {
                triggering_user_id: r.triggering_user_id,
                triggering_message_id: r.triggering_message_id,
                persona_message_id: String::new(),
                source_platform: r.source_platform,
                source_channel_id: r.source_channel_id,
            },
            related_user_ids: r.related_user_ids,
            related_kg_uuids: r.related_kg_uuids,
            embedding,
            inherited_from: None,
        };
        let added = self
            .locked(&persona_id, async |guard| {
                self.store.add_preference_guarded(new, guard).await
            })
            .await?;
        Ok(added.preference)
    }

    /// `check`: the draft as the last persona message of a conversation, through ingest's own
    /// reading and decision, nothing written.
    async fn check(
        &self,
        request: crate::serve::protocol::CheckRequest,
    ) -> Result<crate::serve::protocol::CheckReply, ServiceError> {
        use crate::ingest::event::{ChatMessage, ConversationEvent, Role, parse_event};
        use crate::ingest::pipeline::DraftVerdict;
        use crate::serve::protocol::{CheckFinding, CheckReply, DraftOpinion};
        let started = Instant::now();
        validate::persona_id(&request.persona_id)?;
        if request.draft.trim().is_empty() {
            return Err(ServiceError::new(ErrorKind::Invalid, "draft is empty"));
        }
        let now = crate::timestamp::Timestamp::now();
        let draft_id = "check-draft";
        let mut messages: Vec<ChatMessage> = request
            .conversation
            .iter()
            .enumerate()
            .map(|(n, turn)| ChatMessage {
                message_id: format!("check-{n}"),
                role: turn.role,
                user_id: turn.user_id.clone(),
                content: turn.content.clone(),
                timestamp: now,
                injected_preference_ids: Vec::new(),
                mentions: Vec::new(),
            })
            .collect();
        messages.push(ChatMessage {
            message_id: draft_id.into(),
            role: Role::Persona,
            user_id: String::new(),
            content: request.draft.clone(),
            timestamp: now,
            injected_preference_ids: Vec::new(),
            mentions: Vec::new(),
        });
        let event = ConversationEvent {
            event_id: "check".into(),
            persona_id: request.persona_id.clone(),
            platform: "check".into(),
            channel_id: "check".into(),
            messages,
            participant_user_ids: Vec::new(),
            received_at: None,
        };
        // The limits an event is held to (message count and length, ids), by its own parser.
        let payload = serde_json::to_vec(&event)
            .map_err(|e| ServiceError::new(ErrorKind::Internal, e.to_string()))?;
        let subject = format!("check.{}", request.persona_id);
        parse_event(&subject, "check", &payload, &self.event_limits)
            .map_err(|invalid| ServiceError::new(ErrorKind::Invalid, invalid.message))?;
        let findings = self
            .pipeline
            .check(&event, draft_id)
            .await
            .map_err(|error| {
                if error.is_retryable() {
                    ServiceError::new(ErrorKind::Unavailable, error.to_string())
                } else {
                    ServiceError::new(ErrorKind::Internal, error.to_string())
                }
            })?;
        let mut reply = CheckReply {
            persona_id: request.persona_id.clone(),
            contradicts: Vec::new(),
            restates: Vec::new(),
            new: Vec::new(),
            took_ms: 0.0,
        };
        for finding in findings {
            let draft = DraftOpinion {
                topic: finding.opinion.name.clone(),
                opinion: finding.opinion.opinion.clone(),
                stance: finding.opinion.stance,
                evidence: finding.opinion.evidence.clone(),
            };
            let stored = |hit: crate::store::ScoredPreference| CheckFinding {
                similarity: hit.similarity(),
                inherited_from: (hit.preference.persona_id != request.persona_id)
                    .then(|| hit.preference.persona_id.clone()),
                preference_id: hit.preference.id,
                name: hit.preference.name,
                stored_opinion: hit.preference.opinion,
                stored_stance: hit.preference.stance,
                draft: draft.clone(),
            };
            match finding.verdict {
                DraftVerdict::Contradicts(hit) => reply.contradicts.push(stored(hit)),
                DraftVerdict::Restates(hit) => reply.restates.push(stored(hit)),
                DraftVerdict::New => reply.new.push(draft),
            }
        }
        reply.took_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(reply)
    }

    /// Runs a curation write under the persona's lock, as ingest and erasure take it: curation
    /// is serialised with them, and the write is fenced (refused if the lock has passed to
    /// another holder). The lock is released whatever the write's outcome.
    async fn locked<T>(
        &self,
        persona_id: &str,
        write: impl AsyncFnOnce(WriteGuard<'_>) -> Result<T, StoreError>,
    ) -> Result<T, ServiceError> {
        let lock = self
            .locks
            .hold(persona_id, self.lock_patience)
            .await?
            .ok_or_else(|| {
                ServiceError::new(
                    ErrorKind::Unavailable,
                    format!("persona {persona_id} is busy; try again"),
                )
            })?;
        let written = write(fenced(&lock)).await;
        lock.release().await;
        Ok(written?)
    }

    /// `text` with secrets redacted as ingest does; refused when it is mostly secrets.
    fn without_secrets(&self, field: &str, text: &str) -> Result<String, ServiceError> {
        let (redacted, share) = crate::extract::redact::redact(text);
        if share > self.max_redacted_share {
            return Err(ServiceError::new(
                ErrorKind::Invalid,
                format!("{field} is mostly secrets (keys, tokens, passwords); not stored"),
            ));
        }
        Ok(redacted)
    }

    async fn evolve(&self, r: EvolveRequest) -> Result<crate::store::EvolveOutcome, ServiceError> {
        let existing = self
            .store
            .get_preference(&r.persona_id, &r.preference_id)
            .await?
            .ok_or_else(|| ServiceError::not_found("preference"))?;
        // The topic is unchanged by a change of mind; its vector is recomputed in case the
        // stored one came from another embedder.
        let embedding = self.embed_topic(&existing.name).await?;
        let new_opinion = self.without_secrets("new_opinion", &r.new_opinion)?;
        let reason = if r.reason.trim().is_empty() {
            "changed by an operator".to_string()
        } else {
            self.without_secrets("reason", &r.reason)?
        };
        let evolution = Evolution {
            new_opinion: &new_opinion,
            new_embedding: &embedding,
            reason: &reason,
            new_stance: r.new_stance,
            expressed_at: None,
            evidence_user_id: None,
        };
        self.locked(&r.persona_id, async |guard| {
            self.store
                .evolve_preference(&r.persona_id, &r.preference_id, &evolution, guard)
                .await
        })
        .await?
        .ok_or_else(|| ServiceError::not_found("preference"))
    }

    async fn search(&self, r: SearchRequest) -> Result<Vec<SearchHit>, ServiceError> {
        validate::persona_id(&r.persona_id)?;
        let embedding = self.embed_query(&r.query).await?;
        let semantic = async {
            if r.mode == SearchMode::Keyword {
                return Ok(Vec::new());
            }
            self.store
                .search_preferences(&r.persona_id, &embedding, r.top_k, r.include_retracted)
                .await
        };
        let keyword = async {
            if r.mode == SearchMode::Semantic {
                return Ok(Vec::new());
            }
            self.store
                .keyword_search(
                    &r.persona_id,
                    &r.query,
                    &embedding,
                    r.top_k,
                    r.include_retracted,
                )
                .await
        };
        let (semantic, keyword) = tokio::try_join!(semantic, keyword)?;
        let best_bm25 = keyword
            .iter()
            .map(|(_, bm25, _)| *bm25)
            .fold(0.0f64, f64::max);
        let mut hits: Vec<SearchHit> = semantic
            .into_iter()
            .map(|hit| SearchHit {
                similarity: hit.similarity(),
                score: hit.score,
                keyword: None,
                relevance: hit.similarity(),
                preference: hit.preference,
            })
            .collect();
        for (preference, bm25, similarity) in keyword {
            let normalised = if best_bm25 > 0.0 {
                bm25 / best_bm25
            } else {
                0.0
            };
            match hits.iter_mut().find(|h| h.preference.id == preference.id) {
                Some(hit) => hit.keyword = Some(normalised),
                None => hits.push(SearchHit {
                    similarity,
                    score: 1.0 - similarity,
                    keyword: Some(normalised),
                    relevance: 0.0,
                    preference,
                }),
            }
        }
        for hit in &mut hits {
            hit.relevance = match r.mode {
                SearchMode::Semantic => hit.similarity,
                SearchMode::Keyword => hit.keyword.unwrap_or(0.0),
                SearchMode::Hybrid => {
                    (1.0 - HYBRID_KEYWORD_WEIGHT) * hit.similarity
                        + HYBRID_KEYWORD_WEIGHT * hit.keyword.unwrap_or(0.0)
                }
            };
        }
        hits.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
        hits.truncate(r.top_k);
        Ok(hits)
    }

    async fn purge_user(&self, r: PurgeUserRequest) -> Result<PurgeUserReply, ServiceError> {
        Ok(self
            .eraser
            .erase_user(&r.persona_id, &r.user_id, r.pseudonym)
            .await?)
    }
}

/// Personas one `purge_user_everywhere` request visits at most: each is an erasure of its own
/// (a lock, a rewrite, a scan of its stream), and a reply must come within a client's patience.
pub const MAX_PERSONAS_PER_PAGE: usize = 1000;

/// Words that say nothing about what the conversation is about: a query of only these has no
/// nearest preferences worth injecting.
const FILLER_WORDS: &[&str] = &[
    "a", "ah", "alright", "and", "bye", "cool", "eh", "good", "great", "haha", "hello", "hey",
    "hi", "hm", "hmm", "huh", "k", "lol", "mhm", "nice", "no", "nope", "ok", "okay", "oh", "so",
    "sure", "thank", "thanks", "thx", "uh", "um", "well", "wow", "ya", "yeah", "yep", "yes", "you",
];

/// Why a text query is too short to search by meaning, if it is: fewer than `min_chars`
/// letters and digits, or only filler words. Its nearest preferences would be noise.
pub fn too_short_to_search(text: &str, min_chars: usize) -> Option<String> {
    let meaningful = text.chars().filter(|c| c.is_alphanumeric()).count();
    if meaningful < min_chars {
        return Some(format!(
            "the query has {meaningful} letters or digits, fewer than {min_chars}"
        ));
    }
    let lowered = text.to_lowercase();
    let mut words = lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty());
    if words.all(|word| FILLER_WORDS.contains(&word)) {
        return Some("the query holds only filler words".to_string());
    }
    None
}

/// A request's body and the persona its subject names, if any.
struct Body<'a> {
    payload: &'a [u8],
    subject_persona: Option<&'a str>,
}

impl Body<'_> {
    /// A request about one persona, parsed, refused when its body names another persona than
    /// its subject: a client held to one persona's subjects by NATS permissions must not reach
    /// another through the body. One parse, the check right after it, before any effect.
    fn parse<T: DeserializeOwned + NamesPersona>(&self) -> Result<T, ServiceError> {
        let request: T = self.parse_unnamed()?;
        match self.subject_persona {
            Some(subject_persona) if request.persona_id() != subject_persona => {
                Err(ServiceError::new(
                    ErrorKind::Invalid,
                    format!(
                        "persona_id {:?} is not the persona the subject names ({subject_persona:?}); send it to that persona's subject",
                        request.persona_id()
                    ),
                ))
            }
            _ => Ok(request),
        }
    }

    /// A request about no one persona (the persona list, erasure everywhere).
    fn parse_unnamed<T: DeserializeOwned>(&self) -> Result<T, ServiceError> {
        let text = std::str::from_utf8(self.payload).map_err(|e| {
            ServiceError::new(ErrorKind::Malformed, format!("request is not UTF-8: {e}"))
        })?;
        serde_json::from_str(text)
            .map_err(|e| ServiceError::new(ErrorKind::Malformed, format!("request JSON: {e}")))
    }
}

fn json(value: impl Serialize) -> Reply {
    serde_json::to_vec(&value).map_err(|e| ServiceError::new(ErrorKind::Internal, e.to_string()))
}

fn single_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    validate::truncate_chars(&line, 512)
}
