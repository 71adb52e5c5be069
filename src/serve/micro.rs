//! The NATS "micro" service protocol (v1): endpoints in a queue group, and discovery and
//! statistics on `$SRV.PING|INFO|STATS[.<name>[.<id>]]`, with the same JSON types async-nats
//! uses.
//!
//! Why not async-nats's own `service` module: its error replies carry the
//! `Nats-Service-Error` headers with an *empty* body, while ours carry the JSON error body
//! too (as the Go micro library's `Error(code, description, data)` does), and sending that
//! body down its success path left `$SRV.STATS` at zero errors. Here each request gets exactly
//! one reply, and an error reply counts as an error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::service::endpoint;
use async_nats::service::error::Error as ServiceErrorStatus;
use async_nats::service::{Info, NATS_SERVICE_ERROR, NATS_SERVICE_ERROR_CODE, PingResponse, Stats};
use async_nats::{HeaderMap, Message, Subscriber};
use bytes::Bytes;
use futures::StreamExt;

/// The service's identity, as discovery reports it.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub version: String,
    pub description: String,
    pub queue_group: String,
}

/// Counters of one endpoint, reported by `$SRV.STATS`.
#[derive(Debug, Clone, Default)]
struct EndpointCounters {
    requests: usize,
    errors: usize,
    processing_time: Duration,
    last_error: Option<ServiceErrorStatus>,
}

#[derive(Debug)]
struct EndpointState {
    name: String,
    subject: String,
    counters: EndpointCounters,
}

type Endpoints = Arc<Mutex<Vec<EndpointState>>>;

/// A registered service: its discovery task and its endpoints' statistics.
pub struct MicroService {
    client: async_nats::Client,
    identity: Identity,
    id: String,
    endpoints: Endpoints,
    discovery: tokio::task::JoinHandle<()>,
}

/// One request to an endpoint; [`Request::respond`] sends its one reply and counts it.
pub struct Request {
    pub message: Message,
    client: async_nats::Client,
    endpoints: Endpoints,
    index: usize,
    issued: Instant,
}

/// An error reply: the `Nats-Service-Error` / `-Code` headers and a body.
pub struct ErrorReply {
    pub code: u16,
    pub description: String,
    pub body: Bytes,
}

impl MicroService {
    /// Subscribes to the discovery subjects and answers them until [`MicroService::stop`].
    pub async fn start(
        client: async_nats::Client,
        identity: Identity,
    ) -> Result<MicroService, async_nats::SubscribeError> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let endpoints: Endpoints = Arc::new(Mutex::new(Vec::new()));
        let mut subscriptions = Vec::new();
        for verb in ["PING", "INFO", "STATS"] {
            for subject in [
                format!("$SRV.{verb}"),
                format!("$SRV.{verb}.{}", identity.name),
                format!("$SRV.{verb}.{}.{id}", identity.name),
            ] {
                subscriptions.push(client.subscribe(subject).await?);
            }
        }
        let discovery = tokio::spawn(answer_discovery(
            client.clone(),
            futures::stream::select_all(subscriptions),
            identity.clone(),
            id.clone(),
            endpoints.clone(),
            time::OffsetDateTime::now_utc(),
        ));
        Ok(MicroService {
            client,
            identity,
            id,
            endpoints,
            discovery,
        })
    }

    /// Subscribes `subject` in the service's queue group, as endpoint `name`.
    pub async fn endpoint(
        &self,
        name: &str,
        subject: String,
    ) -> Result<EndpointRequests, async_nats::SubscribeError> {
        let subscriber = self
            .client
            .queue_subscribe(subject.clone(), self.identity.queue_group.clone())
            .await?;
        let mut endpoints = self.endpoints.lock().unwrap();
        endpoints.push(EndpointState {
            name: name.to_string(),
            subject,
            counters: EndpointCounters::default(),
        });
        Ok(EndpointRequests {
            subscriber,
            client: self.client.clone(),
            endpoints: self.endpoints.clone(),
            index: endpoints.len() - 1,
        })
    }

    /// This instance's id, as `$SRV.PING` reports it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Stops answering discovery. Endpoints stop when their [`EndpointRequests`] is dropped
    /// (which unsubscribes); flushing sends those unsubscriptions to the server now.
    pub async fn stop(self) {
        self.discovery.abort();
        let _ = self.client.flush().await;
    }
}

/// The requests arriving at one endpoint.
pub struct EndpointRequests {
    subscriber: Subscriber,
    client: async_nats::Client,
    endpoints: Endpoints,
    index: usize,
}

impl EndpointRequests {
    /// The next request, or `None` once the subscription ends.
    pub async fn next(&mut self) -> Option<Request> {
        let message = self.subscriber.next().await?;
        Some(Request {
            message,
            client: self.client.clone(),
            endpoints: self.endpoints.clone(),
            index: self.index,
            issued: Instant::now(),
        })
    }
}

impl Request {
    /// Sends the one reply: `Ok(body)`, or an error with its headers and body. Counted in the
    /// endpoint's statistics either way (an error also as an error).
    pub async fn respond(
        self,
        reply: Result<Bytes, ErrorReply>,
    ) -> Result<(), async_nats::PublishError> {
        let Some(reply_subject) = self.message.reply.clone() else {
            // Published without a reply subject: there is no one to answer.
            return Ok(());
        };
        let sent = match reply {
            Ok(body) => self.client.publish(reply_subject, body).await,
            Err(error) => {
                let mut headers = HeaderMap::new();
                headers.insert(NATS_SERVICE_ERROR, error.description.as_str());
                headers.insert(NATS_SERVICE_ERROR_CODE, error.code.to_string().as_str());
                {
                    let mut endpoints = self.endpoints.lock().unwrap();
                    let counters = &mut endpoints[self.index].counters;
                    counters.errors += 1;
                    counters.last_error = Some(ServiceErrorStatus {
                        status: error.description,
                        code: error.code.into(),
                    });
                }
                self.client
                    .publish_with_headers(reply_subject, headers, error.body)
                    .await
            }
        };
        let mut endpoints = self.endpoints.lock().unwrap();
        let counters = &mut endpoints[self.index].counters;
        counters.requests += 1;
        counters.processing_time += self.issued.elapsed();
        sent
    }
}

async fn answer_discovery(
    client: async_nats::Client,
    mut requests: futures::stream::SelectAll<Subscriber>,
    identity: Identity,
    id: String,
    endpoints: Endpoints,
    started: time::OffsetDateTime,
) {
    while let Some(request) = requests.next().await {
        let Some(reply) = request.reply else { continue };
        let verb = request.subject.split('.').nth(1).unwrap_or_default();
        let body = match verb {
            "PING" => serde_json::to_vec(&PingResponse {
                kind: "io.nats.micro.v1.ping_response".into(),
                name: identity.name.clone(),
                id: id.clone(),
                version: identity.version.clone(),
                metadata: HashMap::new(),
            }),
            "INFO" => serde_json::to_vec(&Info {
                kind: "io.nats.micro.v1.info_response".into(),
                name: identity.name.clone(),
                id: id.clone(),
                description: identity.description.clone(),
                version: identity.version.clone(),
                metadata: HashMap::new(),
                endpoints: endpoints
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|endpoint| endpoint::Info {
                        name: endpoint.name.clone(),
                        subject: endpoint.subject.clone(),
                        queue_group: identity.queue_group.clone(),
                        metadata: HashMap::new(),
                    })
                    .collect(),
            }),
            "STATS" => serde_json::to_vec(&Stats {
                kind: "io.nats.micro.v1.stats_response".into(),
                name: identity.name.clone(),
                id: id.clone(),
                version: identity.version.clone(),
                started,
                endpoints: endpoints
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|endpoint| {
                        let counters = &endpoint.counters;
                        endpoint::Stats {
                            name: endpoint.name.clone(),
                            subject: endpoint.subject.clone(),
                            requests: counters.requests,
                            errors: counters.errors,
                            processing_time: counters.processing_time,
                            average_processing_time: Duration::from_nanos(
                                (counters.processing_time.as_nanos()
                                    / counters.requests.max(1) as u128)
                                    as u64,
                            ),
                            last_error: counters.last_error.clone(),
                            data: None,
                            queue_group: identity.queue_group.clone(),
                        }
                    })
                    .collect(),
            }),
            _ => continue,
        };
        let Ok(body) = body else { continue };
        if let Err(error) = client.publish(reply, body.into()).await {
            tracing::debug!(%error, "discovery reply not sent");
        }
    }
}
