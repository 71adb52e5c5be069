//! Serve stage: injection and administration over NATS request-reply, as a NATS "service"
//! (discoverable with `$SRV.PING`, `$SRV.INFO`, `$SRV.STATS`; replicas share a queue group).
//!
//! Endpoints under `serve.subject_prefix` (default `persona.prefs`), one subject token per role
//! so NATS permissions can tell callers apart: `read.{inject,get,list,stats,search}`,
//! `write.{add,reinforce,evolve,retract}`, `erase.purge_user` (docs/PERMISSIONS.md).
//! Every request gets a reply: a JSON body, or an error as `Nats-Service-Error` /
//! `Nats-Service-Error-Code` headers plus `{"error": {"code", "kind", "message"}}`.

pub mod handlers;
pub mod micro;
pub mod protocol;
pub mod render;

use std::sync::Arc;

use serde::Deserialize;
use tokio::sync::{Semaphore, watch};

use crate::embed::Embedder;
use crate::erasure::Eraser;
use crate::settings::ConfigError;
use crate::store::PreferenceStore;
use crate::trace_context::TraceContext;
use handlers::Handlers;
pub use protocol::Endpoint;

/// Requests handled at once per process; more wait in NATS (backpressure, bounded memory).
const MAX_CONCURRENT_REQUESTS: usize = 256;

#[derive(Debug, thiserror::Error)]
#[error("starting the NATS service: {0}")]
pub struct ServeError(String);

/// The running service; [`Services::stop`] unregisters it and waits for its loops.
pub struct Services {
    service: micro::MicroService,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    permits: Arc<Semaphore>,
}

/// How long [`Services::stop`] waits for requests already being handled.
const DRAIN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

impl Services {
    /// Unsubscribes first, so NATS routes new requests to the other replicas (or answers "no
    /// responders" at once) instead of queueing them here; then lets the requests already
    /// being handled finish and reply.
    pub async fn stop(self) {
        // Aborting the endpoint loops drops their subscriptions (unsubscribing them); stopping
        // the service flushes those unsubscriptions to the server.
        for task in self.tasks {
            task.abort();
        }
        self.service.stop().await;
        let all = MAX_CONCURRENT_REQUESTS as u32;
        if tokio::time::timeout(DRAIN_PATIENCE, self.permits.acquire_many(all))
            .await
            .is_err()
        {
            tracing::warn!("requests still in flight after the drain period");
        }
    }
}

/// What the service needs, connected (`App::serve_context` builds it).
pub struct ServeContext {
    pub nats: async_nats::Client,
    pub store: PreferenceStore,
    /// For what is stored (an operator's add and evolve).
    pub embedder: Arc<dyn Embedder>,
    /// For search text (injection and search): `embed::Embedders::queries`.
    pub query_embedder: Arc<dyn Embedder>,
    pub eraser: Eraser,
    pub config: ServeConfig,
    /// Requests over this many bytes are refused (`nats.max_payload_bytes`).
    pub max_payload_bytes: usize,
    /// The persona lock ingest takes: curation writes take it too, and are fenced by it.
    pub locks: crate::store::PersonaLock,
    pub lock_patience: std::time::Duration,
    /// Curated text that is more than this share secrets is refused (`ingest.max_redacted_share`).
    pub max_redacted_share: f64,
    /// Ingest's pipeline: `check` decides a draft exactly as ingest would, writing nothing.
    pub pipeline: crate::ingest::pipeline::Pipeline,
    /// The limits events are held to (`check`'s draft and conversation are held to them too).
    pub event_limits: crate::ingest::event::EventLimits,
}

/// Registers the service and its endpoints and starts answering until `shutdown`.
pub async fn start(
    context: ServeContext,
    shutdown: watch::Receiver<bool>,
) -> Result<Services, ServeError> {
    let config = &context.config;
    let service = micro::MicroService::start(
        context.nats.clone(),
        micro::Identity {
            name: config.service_name.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Durable memory of a persona's own opinions: injection and administration"
                .into(),
            queue_group: config.queue_group.clone(),
        },
    )
    .await
    .map_err(|e| ServeError(e.to_string()))?;
    let handlers = Arc::new(Handlers::new(&context));
    let permits = Arc::new(Semaphore::new(MAX_CONCURRENT_REQUESTS));
    let mut tasks = Vec::new();
    let mut registrations: Vec<(Endpoint, String, String)> = Endpoint::ALL
        .into_iter()
        .map(|e| {
            (
                e,
                e.name().to_string(),
                e.subscription(&config.subject_prefix, &config.tenant),
            )
        })
        .collect();
    if config.legacy_subjects {
        registrations.extend(
            Endpoint::ALL
                .into_iter()
                .filter(|e| e.has_legacy_subjects())
                .flat_map(|e| {
                    [
                        (
                            e,
                            format!("{}_unscoped", e.name()),
                            e.role_subject(&config.subject_prefix),
                        ),
                        (
                            e,
                            format!("{}_legacy", e.name()),
                            e.legacy_subject(&config.subject_prefix),
                        ),
                    ]
                }),
        );
    }
    for (name, registered_as, subject) in registrations {
        let mut endpoint = service
            .endpoint(&registered_as, subject)
            .await
            .map_err(|e| ServeError(format!("endpoint {registered_as}: {e}")))?;
        let handlers = handlers.clone();
        let permits = permits.clone();
        let mut shutdown = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let request = tokio::select! {
                    request = endpoint.next() => request,
                    _ = crate::ingest::worker::stopped(&mut shutdown) => break,
                };
                let Some(request) = request else { break };
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    break;
                };
                let handlers = handlers.clone();
                tokio::spawn(async move {
                    let trace = TraceContext::from_headers(request.message.headers.as_ref());
                    crate::trace_context::in_span(
                        crate::trace_context::Work::Request(name.name()),
                        trace,
                        handlers.handle(name, request),
                    )
                    .await;
                    drop(permit);
                });
            }
        }));
    }
    Ok(Services {
        service,
        tasks,
        permits,
    })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    pub service_name: String,
    pub subject_prefix: String,
    pub queue_group: String,
    pub resident_count: usize,
    /// Text queries shorter than this (letters and digits), or only filler words, skip the
    /// semantic pass.
    pub min_query_chars: usize,
    /// The tenant token of this deployment's subjects (`<prefix>.<role>.<endpoint>.<tenant>.<persona>`).
    pub tenant: String,
    /// Also answer the subjects of earlier releases (`<prefix>.<role>.<endpoint>`, and
    /// `<prefix>.<endpoint>` from before the role split), which name no persona.
    pub legacy_subjects: bool,
}

impl ServeConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.service_name.is_empty()
            || !self
                .service_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(ConfigError::Invalid {
                key: "serve.service_name".into(),
                message: "must be [A-Za-z0-9_-]+".into(),
            });
        }
        if self.tenant.is_empty()
            || self.tenant.len() > 64
            || !self
                .tenant
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(ConfigError::Invalid {
                key: "serve.tenant".into(),
                message: "must be 1 to 64 of [A-Za-z0-9_-] (one subject token)".into(),
            });
        }
        if self.subject_prefix.is_empty() || self.subject_prefix.contains(['*', '>', ' ']) {
            return Err(ConfigError::Invalid {
                key: "serve.subject_prefix".into(),
                message: "must be a plain subject prefix".into(),
            });
        }
        Ok(())
    }
}
