//! The typed client of a running service, for the CLI, the tests, the benches and any Rust
//! caller. Requests and replies are the protocol types (`serve::protocol`), so a renamed or
//! missing reply field is an error here rather than a blank on someone's screen; endpoints are
//! [`Endpoint`]s, never spelled out. Also the one way to publish a conversation event
//! ([`publish_event`]) and the one place subjects are built.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::service::NATS_SERVICE_ERROR_CODE;
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::Config;
pub use crate::erasure::DeletionReport;
pub use crate::serve::protocol::{
    AddRequest, ConsolidateRequest, DeletePersonaRequest, Endpoint, ErrorBody, ErrorKind,
    EvolveRequest, InjectReply, InjectRequest, ListRequest, PersonaRequest, PersonasRequest,
    PreferenceRef, PurgeUserEverywhereReply, PurgeUserEverywhereRequest, PurgeUserReply,
    PurgeUserRequest, RestoreRequest, RetractRequest, SearchHit, SearchRequest, SetBasesRequest,
};
pub use crate::store::{Bases, ConsolidationReport, PersonaDirectory, RestoreOutcome};
use crate::store::{EvolveOutcome, Preference, PreferenceStats, ReinforceOutcome, RetractOutcome};
pub use crate::subjects::{all_under, dead_letter_subject, event_subject};

/// How long a request waits for its reply.

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers on the subject: no service is running, or NATS is unreachable.
    #[error("no service answered on {subject} ({reason}); is `persona-prefs serve` running?")]
    NoService { subject: String, reason: String },
    #[error("no reply on {subject} within {} s", .patience.as_secs())]
    Timeout { subject: String, patience: Duration },
    /// The service answered with an error.
    #[error("{endpoint} failed ({} {}): {}", .error.code, .error.kind, .error.message)]
    Service {
        endpoint: Endpoint,
        error: ErrorBody,
    },
    /// The reply is not what this build's protocol says (a field renamed or missing).
    #[error("the {endpoint} reply does not have the expected shape: {source}")]
    BadReply {
        endpoint: Endpoint,
        source: serde_json::Error,
    },
    /// The request's persona_id is no persona id, so it has no subject to go to.
    #[error("{endpoint}: {reason}")]
    InvalidPersona { endpoint: Endpoint, reason: String },
    #[error("encoding the request: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("publishing to {subject}: {reason}")]
    Publish { subject: String, reason: String },
}

impl ClientError {
    /// No service answered (as opposed to one answering with an error).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            ClientError::NoService { .. } | ClientError::Timeout { .. }
        )
    }

    /// The service's error kind, when it answered with one.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Service { error, .. } => Some(error.kind),
            _ => None,
        }
    }
}

/// What JetStream said to a published event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    pub sequence: u64,
    /// JetStream already held an event with this message id (within its duplicate window)
    /// and stored nothing.
    pub duplicate: bool,
}

/// Publishes one conversation event (its JSON, byte for byte) to its persona's subject and
/// waits until JetStream has stored it. `message_id` (the `Nats-Msg-Id` header) makes a
/// re-publish within the duplicate window a no-op.
pub async fn publish_event(
    js: &jetstream::Context,
    events_prefix: &str,
    persona_id: &str,
    payload: impl Into<Bytes>,
    message_id: Option<&str>,
) -> Result<Published, ClientError> {
    let subject = event_subject(events_prefix, persona_id);
    let failed = |reason: String| ClientError::Publish {
        subject: subject.clone(),
        reason,
    };
    let mut headers = async_nats::HeaderMap::new();
    if let Some(id) = message_id {
        headers.insert("Nats-Msg-Id", id);
    }
    let ack = js
        .publish_with_headers(subject.clone(), headers, payload.into())
        .await
        .map_err(|error| failed(error.to_string()))?
        .await
        .map_err(|error| failed(error.to_string()))?;
    Ok(Published {
        sequence: ack.sequence,
        duplicate: ack.duplicate,
    })
}

/// A client of one deployment: its service subjects and its events stream.
#[derive(Clone)]
pub struct Client {
    nats: async_nats::Client,
    js: jetstream::Context,
    serve_prefix: String,
    tenant: String,
    events_prefix: String,
    /// How long a request waits for its reply (`nats.request_timeout_ms`).
    patience: Duration,
}

impl Client {
    /// A client over an open NATS connection (`app::connect_nats` opens one from the
    /// configuration), addressing the subjects `config` names.
    pub fn new(nats: async_nats::Client, config: &Config) -> Client {
        Client {
            js: jetstream::new(nats.clone()),
            nats,
            serve_prefix: config.serve.subject_prefix.clone(),
            tenant: config.serve.tenant.clone(),
            events_prefix: config.ingest.subject_prefix.clone(),
            patience: Duration::from_millis(config.nats.request_timeout_ms),
        }
    }

    /// One request, its reply decoded as `Reply`.
    pub async fn request<Request: Serialize, Reply: DeserializeOwned>(
        &self,
        endpoint: Endpoint,
        request: &Request,
    ) -> Result<Reply, ClientError> {
        let payload = self.request_bytes(endpoint, request).await?;
        serde_json::from_slice(&payload)
            .map_err(|source| ClientError::BadReply { endpoint, source })
    }

    /// One request, its reply as JSON (for printing it whole).
    pub async fn request_json<Request: Serialize>(
        &self,
        endpoint: Endpoint,
        request: &Request,
    ) -> Result<serde_json::Value, ClientError> {
        self.request(endpoint, request).await
    }

    async fn request_bytes<Request: Serialize>(
        &self,
        endpoint: Endpoint,
        request: &Request,
    ) -> Result<Bytes, ClientError> {
        // The subject names the persona the body does (`persona_id`), so NATS permissions
        // scoped to a persona or a tenant apply to this client as to any other.
        let body = serde_json::to_value(request).map_err(ClientError::Encode)?;
        let persona = body
            .get("persona_id")
            .and_then(|persona| persona.as_str())
            .unwrap_or_default();
        // A persona id that is no subject token cannot be sent to its subject at all.
        if endpoint.touches_one_persona()
            && let Err(error) = crate::store::validate::persona_id(persona)
        {
            return Err(ClientError::InvalidPersona {
                endpoint,
                reason: error.to_string(),
            });
        }
        let subject = endpoint.subject(&self.serve_prefix, &self.tenant, persona);
        let body = serde_json::to_vec(&body).map_err(ClientError::Encode)?;
        // The patience is the request's own: the client's default (10 s) would cut a long
        // request short whatever was configured.
        let request = async_nats::Request::new()
            .payload(body.into())
            .timeout(Some(self.patience));
        let reply = match self.nats.send_request(subject.clone(), request).await {
            Ok(reply) => reply,
            Err(error) if error.kind() == async_nats::client::RequestErrorKind::TimedOut => {
                return Err(ClientError::Timeout {
                    subject,
                    patience: self.patience,
                });
            }
            Err(error) => {
                return Err(ClientError::NoService {
                    subject,
                    reason: error.to_string(),
                });
            }
        };
        let failed = reply
            .headers
            .as_ref()
            .is_some_and(|headers| headers.get(NATS_SERVICE_ERROR_CODE).is_some());
        if failed {
            #[derive(serde::Deserialize)]
            struct ErrorReply {
                error: ErrorBody,
            }
            let error: ErrorReply = serde_json::from_slice(&reply.payload)
                .map_err(|source| ClientError::BadReply { endpoint, source })?;
            return Err(ClientError::Service {
                endpoint,
                error: error.error,
            });
        }
        Ok(reply.payload)
    }

    pub async fn inject(&self, request: &InjectRequest) -> Result<InjectReply, ClientError> {
        self.request(Endpoint::Inject, request).await
    }

    /// What a draft persona message would do to memory (contradicts, restates, new), decided
    /// as ingest decides and written nowhere.
    pub async fn check(
        &self,
        request: &crate::serve::protocol::CheckRequest,
    ) -> Result<crate::serve::protocol::CheckReply, ClientError> {
        self.request(Endpoint::Check, request).await
    }

    pub async fn add(&self, request: &AddRequest) -> Result<Preference, ClientError> {
        self.request(Endpoint::Add, request).await
    }

    pub async fn get(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<Preference, ClientError> {
        self.request(Endpoint::Get, &preference_ref(persona_id, preference_id))
            .await
    }

    pub async fn list(&self, request: &ListRequest) -> Result<Vec<Preference>, ClientError> {
        self.request(Endpoint::List, request).await
    }

    pub async fn stats(&self, persona_id: &str) -> Result<PreferenceStats, ClientError> {
        let request = PersonaRequest {
            persona_id: persona_id.to_string(),
        };
        self.request(Endpoint::Stats, &request).await
    }

    pub async fn reinforce(
        &self,
        persona_id: &str,
        preference_id: &str,
    ) -> Result<ReinforceOutcome, ClientError> {
        self.request(
            Endpoint::Reinforce,
            &preference_ref(persona_id, preference_id),
        )
        .await
    }

    pub async fn evolve(&self, request: &EvolveRequest) -> Result<EvolveOutcome, ClientError> {
        self.request(Endpoint::Evolve, request).await
    }

    pub async fn retract(&self, request: &RetractRequest) -> Result<RetractOutcome, ClientError> {
        self.request(Endpoint::Retract, request).await
    }

    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, ClientError> {
        self.request(Endpoint::Search, request).await
    }

    pub async fn purge_user(
        &self,
        request: &PurgeUserRequest,
    ) -> Result<PurgeUserReply, ClientError> {
        self.request(Endpoint::PurgeUser, request).await
    }

    /// One page of an erasure of a user from every persona (`purge_user_everywhere`); see
    /// [`Client::purge_user_everywhere_all`] for the whole walk.
    pub async fn purge_user_everywhere(
        &self,
        request: &PurgeUserEverywhereRequest,
    ) -> Result<PurgeUserEverywhereReply, ClientError> {
        self.request(Endpoint::PurgeUserEverywhere, request).await
    }

    /// Erases `user_id` from every persona, page after page until every persona has been
    /// visited, calling `progress` after each page; returns the pages summed (the touched
    /// personas' reports together). A failed page is the error; calling this again starts
    /// the walk again, which is harmless.
    pub async fn purge_user_everywhere_all(
        &self,
        user_id: &str,
        max_personas: usize,
        mut progress: impl FnMut(&PurgeUserEverywhereReply),
    ) -> Result<PurgeUserEverywhereReply, ClientError> {
        // The sum's cursor is the last page's (empty before the first: a new walk).
        let mut total = PurgeUserEverywhereReply::default();
        loop {
            let page = self
                .purge_user_everywhere(&PurgeUserEverywhereRequest {
                    user_id: user_id.to_string(),
                    cursor: total.cursor.clone(),
                    max_personas,
                })
                .await?;
            progress(&page);
            total.absorb(page);
            if total.done {
                return Ok(total);
            }
        }
    }

    /// Deletes a persona whole (`delete_persona`); `persona_id` is sent as its own
    /// confirmation, so callers that take it from a person should ask them to type it.
    pub async fn delete_persona(&self, persona_id: &str) -> Result<DeletionReport, ClientError> {
        self.request(
            Endpoint::DeletePersona,
            &DeletePersonaRequest {
                persona_id: persona_id.to_string(),
                confirm: persona_id.to_string(),
            },
        )
        .await
    }

    /// A page of the registry of personas, most recently active first.
    pub async fn personas(
        &self,
        request: &PersonasRequest,
    ) -> Result<PersonaDirectory, ClientError> {
        self.request(Endpoint::Personas, request).await
    }

    /// The persona's bases and the layers they resolve to.
    pub async fn bases(&self, persona_id: &str) -> Result<Bases, ClientError> {
        let request = PersonaRequest {
            persona_id: persona_id.to_string(),
        };
        self.request(Endpoint::Bases, &request).await
    }

    pub async fn set_bases(&self, request: &SetBasesRequest) -> Result<Bases, ClientError> {
        self.request(Endpoint::SetBases, request).await
    }

    pub async fn restore(&self, request: &RestoreRequest) -> Result<RestoreOutcome, ClientError> {
        self.request(Endpoint::Restore, request).await
    }

    pub async fn consolidate(
        &self,
        request: &ConsolidateRequest,
    ) -> Result<ConsolidationReport, ClientError> {
        self.request(Endpoint::Consolidate, request).await
    }

    /// [`publish_event`] to this deployment's events stream.
    pub async fn publish_event(
        &self,
        persona_id: &str,
        payload: impl Into<Bytes>,
        message_id: Option<&str>,
    ) -> Result<Published, ClientError> {
        publish_event(
            &self.js,
            &self.events_prefix,
            persona_id,
            payload,
            message_id,
        )
        .await
    }
}

fn preference_ref(persona_id: &str, preference_id: &str) -> PreferenceRef {
    PreferenceRef {
        persona_id: persona_id.to_string(),
        preference_id: preference_id.to_string(),
    }
}
