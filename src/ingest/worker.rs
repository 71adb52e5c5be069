//! The JetStream side of ingest: streams and the durable pull consumer, the bounded
//! processing loop, and what happens to each message.
//!
//! **Invariant:** a message is acked only after its effects are stored. Outcomes:
//! - processed → ack (double ack: the server confirms it);
//! - transient failure → nak with a delay growing per delivery; after `max_deliver` deliveries
//!   it is dead-lettered with the last error as reason;
//! - invalid input → published to `<dlq_subject_prefix>.<persona_id>` with the reason in
//!   headers, then terminated. If the dead-letter publish fails, the message is nak'ed instead:
//!   it is never dropped silently.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind, consumer::PullConsumer, consumer::pull, stream};
use futures::StreamExt;
use tokio::sync::{Semaphore, watch};

use super::IngestConfig;
use super::event::{ConversationEvent, EventLimits, InvalidEvent, parse_event, subject_persona};
use super::pipeline::Pipeline;
use crate::retry::RetryPolicy;
use crate::store::validate;
use crate::telemetry;
use crate::timestamp::Timestamp;
use crate::trace_context::{self, TraceContext};

/// Dead-letter headers.
pub const HEADER_REASON: &str = "Persona-Prefs-Reason";
pub const HEADER_REASON_CODE: &str = "Persona-Prefs-Reason-Code";
pub const HEADER_ORIGINAL_SUBJECT: &str = "Persona-Prefs-Original-Subject";
pub const HEADER_STREAM_SEQUENCE: &str = "Persona-Prefs-Stream-Sequence";
pub const HEADER_DELIVERIES: &str = "Persona-Prefs-Deliveries";
/// On a dead letter whose payload had to be cut to fit beside its headers: the original size.
pub const HEADER_TRUNCATED_FROM: &str = "Persona-Prefs-Truncated-From";

/// Why an event is dead-lettered. Its [`DeadLetterReason::code`] goes into the reason-code
/// header and the `reason` label of the dead-letter metric; operators filter by it.
#[derive(Debug, Clone, PartialEq)]
pub enum DeadLetterReason {
    /// Bad input: it can never be processed as it is.
    Invalid(InvalidEvent),
    /// Delivered `ingest.max_deliver` times without success (a worker crashed on it each time,
    /// or a retryable failure outlasted the retries); the last error.
    MaxDeliver(String),
    /// Failed with an error no retry can fix.
    Permanent(String),
}

impl DeadLetterReason {
    pub fn code(&self) -> &'static str {
        match self {
            DeadLetterReason::Invalid(invalid) => invalid.code.as_str(),
            DeadLetterReason::MaxDeliver(_) => "max_deliver",
            DeadLetterReason::Permanent(_) => "permanent",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            DeadLetterReason::Invalid(invalid) => &invalid.message,
            DeadLetterReason::MaxDeliver(message) | DeadLetterReason::Permanent(message) => message,
        }
    }
}

/// How long one pull request waits for messages before the worker asks again (with the slots
/// freed meanwhile).
const PULL_WAIT: Duration = Duration::from_secs(2);

/// How long a saturated worker waits for more slots to free before it pulls.
const GATHER_WAIT: Duration = Duration::from_millis(10);

/// Room kept for a dead letter's headers (the reason is cut to 1 KiB).
const DLQ_HEADER_ROOM: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("jetstream setup: {0}")]
    Setup(String),
    #[error("consuming: {0}")]
    Consume(String),
}

/// Creates the stream, or brings an existing one's retention (`max_age`), replicas and size
/// limit to the configured values: conversations hold users' words and must not be kept longer
/// than configured, and a deployment that grows to a JetStream cluster raises its replicas.
async fn ensure_stream(
    js: &jetstream::Context,
    wanted: stream::Config,
) -> Result<stream::Stream, String> {
    let mut stream = js
        .get_or_create_stream(wanted.clone())
        .await
        .map_err(|e| e.to_string())?;
    let current = stream
        .info()
        .await
        .map_err(|e| e.to_string())?
        .config
        .clone();
    if current.max_age != wanted.max_age
        || current.num_replicas != wanted.num_replicas
        || current.max_bytes != wanted.max_bytes
    {
        js.update_stream(stream::Config {
            max_age: wanted.max_age,
            num_replicas: wanted.num_replicas,
            max_bytes: wanted.max_bytes,
            ..current
        })
        .await
        .map_err(|e| format!("updating its retention, replicas or size limit: {e}"))?;
    }
    Ok(stream)
}

/// 0 (no limit) is -1 to JetStream.
fn size_limit(bytes: i64) -> i64 {
    if bytes == 0 { -1 } else { bytes }
}

/// Creates (or reuses) the event stream, the dead-letter stream and the durable consumer.
pub async fn ensure_jetstream(
    js: &jetstream::Context,
    config: &IngestConfig,
) -> Result<PullConsumer, WorkerError> {
    let hours = |h: u64| Duration::from_secs(h * 3600);
    let events = ensure_stream(
        js,
        stream::Config {
            name: config.stream.clone(),
            subjects: vec![crate::subjects::all_under(&config.subject_prefix)],
            duplicate_window: Duration::from_secs(config.duplicate_window_secs),
            max_age: hours(config.events_max_age_hours),
            storage: stream::StorageType::File,
            num_replicas: config.stream_replicas,
            max_bytes: size_limit(config.stream_max_bytes),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| WorkerError::Setup(format!("stream {}: {e}", config.stream)))?;
    ensure_stream(
        js,
        stream::Config {
            name: config.dlq_stream.clone(),
            subjects: vec![crate::subjects::all_under(&config.dlq_subject_prefix)],
            max_age: hours(config.dlq_max_age_hours),
            storage: stream::StorageType::File,
            num_replicas: config.stream_replicas,
            max_bytes: size_limit(config.dlq_max_bytes),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| WorkerError::Setup(format!("dead-letter stream {}: {e}", config.dlq_stream)))?;
    let wanted = pull::Config {
        durable_name: Some(config.consumer.clone()),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_millis(config.ack_wait_ms),
        // The worker counts deliveries itself so that the last one is dead-lettered
        // with its reason instead of vanishing when the server stops redelivering.
        max_deliver: -1,
        max_ack_pending: config.max_ack_pending(),
        ..Default::default()
    };
    let setup = |e: String| WorkerError::Setup(format!("consumer {}: {e}", config.consumer));
    let mut consumer: PullConsumer = events
        .get_or_create_consumer(&config.consumer, wanted.clone())
        .await
        .map_err(|e| setup(e.to_string()))?;
    // An existing consumer keeps the settings it was created with: bring the ones this
    // configuration owns to the configured values (a longer ack wait for a slower LLM, a
    // larger max ack pending for more workers).
    let current = consumer
        .info()
        .await
        .map_err(|e| setup(e.to_string()))?
        .config
        .clone();
    if current.ack_wait != wanted.ack_wait || current.max_ack_pending != wanted.max_ack_pending {
        tracing::info!(
            consumer = %config.consumer,
            ack_wait_ms = config.ack_wait_ms,
            max_ack_pending = wanted.max_ack_pending,
            "updating the consumer's settings"
        );
        let _: jetstream::consumer::Consumer<jetstream::consumer::Config> = events
            .update_consumer(jetstream::consumer::Config {
                ack_wait: wanted.ack_wait,
                max_ack_pending: wanted.max_ack_pending,
                ..current
            })
            .await
            .map_err(|e| setup(format!("updating its settings: {e}")))?;
        consumer = events
            .get_consumer(&config.consumer)
            .await
            .map_err(|e| setup(e.to_string()))?;
    }
    Ok(consumer)
}

/// Runs until `shutdown` turns true, then stops pulling and gives in-flight events
/// `grace_period_ms` to finish; whatever is still running is nak'ed for redelivery.
pub struct Worker {
    pub pipeline: Pipeline,
    pub js: jetstream::Context,
    pub config: IngestConfig,
    pub limits: EventLimits,
}

/// What the worker did before it stopped.
#[derive(Debug, Default, Clone)]
pub struct WorkerReport {
    pub finished_in_grace: usize,
    pub returned_for_redelivery: usize,
}

impl Worker {
    pub async fn run(
        self,
        consumer: PullConsumer,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<WorkerReport, WorkerError> {
        let worker = Arc::new(self);
        let permits = Arc::new(Semaphore::new(worker.config.max_in_flight));
        let in_flight = Arc::new(AtomicUsize::new(0));
        // Hard stop: tells in-flight tasks that the grace period is over.
        let (hard_stop, hard_stop_rx) = watch::channel(false);
        let dead_letters =
            super::dead_letters::DeadLetters::new(worker.js.clone(), worker.config.clone());
        let pending_task = tokio::spawn(report_pending(
            consumer.clone(),
            dead_letters,
            shutdown.clone(),
        ));
        let mut tasks = tokio::task::JoinSet::new();
        // Handed out here, as messages are pulled, so each persona's turns follow the stream.
        let turns = super::turns::PersonaTurns::default();
        // Entered here too, in the same order: at most `max_in_flight_per_persona` of one
        // persona's events are worked on at once, and the rest wait their turn at the gate.
        let gates = super::gates::PersonaGates::new(worker.config.max_in_flight_per_persona);
        'intake: loop {
            // Backpressure: wait for a free slot, then ask JetStream for as many messages as
            // there are free slots, never more. A message pulled ahead of a free slot would
            // wait in the client's buffer with nothing extending its ack wait: behind a slow
            // stage (a one-slot LLM) it came back as a second delivery, and again, until it
            // was dead-lettered for being delivered too often.
            let first = tokio::select! {
                permit = permits.clone().acquire_owned() => permit.expect("semaphore is never closed"),
                _ = stopped(&mut shutdown) => break,
            };
            let mut free = vec![first];
            while let Ok(permit) = permits.clone().try_acquire_owned() {
                free.push(permit);
            }
            // Saturated, slots free one at a time: gather a few before asking (each pull is a
            // request and a subscription of its own), waiting a moment at most.
            let enough = (worker.config.max_in_flight / 8).max(1);
            if free.len() < enough {
                let gathered = tokio::time::timeout(GATHER_WAIT, async {
                    while free.len() < enough {
                        match permits.clone().acquire_owned().await {
                            Ok(permit) => free.push(permit),
                            Err(_) => break,
                        }
                    }
                });
                let _ = gathered.await;
            }
            let batch = consumer
                .batch()
                .max_messages(free.len())
                .expires(PULL_WAIT)
                .messages()
                .await;
            let mut batch = match batch {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "pulling from JetStream failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            loop {
                let next = tokio::select! {
                    next = batch.next() => next,
                    _ = stopped(&mut shutdown) => break 'intake,
                };
                let message = match next {
                    Some(Ok(message)) => message,
                    Some(Err(error)) => {
                        tracing::warn!(%error, "pulling from JetStream failed; retrying");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        break;
                    }
                    // The batch is over: its messages came, or its wait ran out.
                    None => break,
                };
                let Some(permit) = free.pop() else {
                    // Cannot happen: the batch asked for as many as there are free slots.
                    let _ = message.ack_with(AckKind::Nak(None)).await;
                    continue;
                };
                while tasks.try_join_next().is_some() {}
                let persona = subject_persona(&message.subject, &worker.config.subject_prefix);
                let turn = persona.map(|persona_id| turns.take(persona_id));
                let mut entry = persona.map(|persona_id| gates.enter(persona_id));
                let worker = worker.clone();
                let in_flight = in_flight.clone();
                let hard_stop = hard_stop_rx.clone();
                let mut stopping = shutdown.clone();
                tasks.spawn(async move {
                    telemetry::in_flight(in_flight.fetch_add(1, Ordering::Relaxed) + 1);
                    let finished = async {
                        if let Some(entry) = entry.as_mut()
                            && !entry.has_passed()
                            && !worker.wait_at_gate(entry, &message, &mut stopping).await
                        {
                            // Stopped before it began: back to JetStream at once.
                            let _ = message.ack_with(AckKind::Nak(None)).await;
                            return false;
                        }
                        // The publisher's trace (a `traceparent` header) continues through the event.
                        let trace = TraceContext::from_headers(message.headers.as_ref());
                        trace_context::in_span(
                            trace_context::Work::Event,
                            trace,
                            worker.handle(message, turn, hard_stop),
                        )
                        .await
                    }
                    .await;
                    // Done: the next of its persona's events may go.
                    drop(entry);
                    telemetry::in_flight(in_flight.fetch_sub(1, Ordering::Relaxed) - 1);
                    drop(permit);
                    finished
                });
            }
        }
        let running = tasks.len();
        tracing::info!(
            in_flight = running,
            grace_ms = worker.config.grace_period_ms,
            "stopping intake; finishing in-flight events"
        );
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(worker.config.grace_period_ms);
        let mut report = WorkerReport::default();
        loop {
            match tokio::time::timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(Ok(true))) => report.finished_in_grace += 1,
                Ok(Some(Ok(false))) => report.returned_for_redelivery += 1,
                Ok(Some(Err(error))) => tracing::error!(%error, "an ingest task failed"),
                Ok(None) => break,
                Err(_) => {
                    // Grace is over: in-flight tasks nak their messages and return.
                    let _ = hard_stop.send(true);
                    while let Some(result) = tasks.join_next().await {
                        match result {
                            Ok(true) => report.finished_in_grace += 1,
                            _ => report.returned_for_redelivery += 1,
                        }
                    }
                    break;
                }
            }
        }
        pending_task.abort();
        tracing::info!(
            finished = report.finished_in_grace,
            returned = report.returned_for_redelivery,
            "ingest worker stopped"
        );
        Ok(report)
    }

    /// Waits until `entry` may pass its persona's gate, keeping the message from being
    /// delivered again meanwhile (progress acks). False when the worker is stopping first.
    async fn wait_at_gate(
        &self,
        entry: &mut super::gates::Entry,
        message: &jetstream::Message,
        stopping: &mut watch::Receiver<bool>,
    ) -> bool {
        let progress_every = Duration::from_millis((self.config.ack_wait_ms / 3).max(100));
        let pass = entry.pass();
        tokio::pin!(pass);
        loop {
            tokio::select! {
                _ = &mut pass => return true,
                _ = tokio::time::sleep(progress_every) => {
                    let _ = message.ack_with(AckKind::Progress).await;
                }
                _ = stopped(stopping) => return false,
            }
        }
    }

    /// Handles one message to its end. Returns false when it was returned for redelivery
    /// because the grace period ran out.
    async fn handle(
        &self,
        message: jetstream::Message,
        turn: Option<super::turns::Turn>,
        mut hard_stop: watch::Receiver<bool>,
    ) -> bool {
        telemetry::event_consumed();
        let started = Instant::now();
        let (stream_sequence, delivered, received_at) = message
            .info()
            .map(|info| {
                (
                    info.stream_sequence,
                    info.delivered,
                    Some(Timestamp::from(info.published)),
                )
            })
            .unwrap_or((0, 1, None));
        let subject = message.subject.to_string();

        if delivered > self.config.max_deliver {
            // Already delivered max_deliver times without an ack (e.g. the worker crashed on
            // it each time): give up before trying again.
            let reason = DeadLetterReason::MaxDeliver(format!(
                "delivered {delivered} times without success"
            ));
            self.dead_letter(&message, &subject, stream_sequence, delivered, &reason)
                .await;
            return true;
        }
        let event = match parse_event(
            &subject,
            &self.config.subject_prefix,
            &message.payload,
            &self.limits,
        ) {
            Ok(event) => ConversationEvent {
                received_at,
                ..event
            },
            Err(invalid) => {
                tracing::warn!(%subject, code = invalid.code.as_str(), reason = %invalid.message, "invalid event");
                let reason = DeadLetterReason::Invalid(invalid);
                self.dead_letter(&message, &subject, stream_sequence, delivered, &reason)
                    .await;
                return true;
            }
        };

        // Keep the message from being redelivered while slow work (LLM retries) goes on.
        let progress_every = Duration::from_millis((self.config.ack_wait_ms / 3).max(100));
        let work = self.pipeline.process_in_turn(&event, turn);
        tokio::pin!(work);
        let result = loop {
            tokio::select! {
                result = &mut work => break Some(result),
                _ = tokio::time::sleep(progress_every) => {
                    let _ = message.ack_with(AckKind::Progress).await;
                }
                _ = stopped(&mut hard_stop) => break None,
            }
        };
        let Some(result) = result else {
            let _ = message.ack_with(AckKind::Nak(None)).await;
            tracing::info!(event_id = %event.event_id, "grace period over; event returned for redelivery");
            return false;
        };
        match result {
            Ok(outcome) if outcome.predates_the_personas_deletion => {
                // Refused whole: its persona was deleted after it was written. Nothing was
                // written, and nothing is recorded (the persona keeps no key); its words
                // leave the stream as the deletion's did.
                if let Err(error) = message.double_ack().await {
                    tracing::warn!(event_id = %event.event_id, %error, "ack not confirmed; a redelivery is refused again");
                }
                telemetry::event_processed(started.elapsed());
                match super::erasure::erase(&self.js, &self.config.stream, stream_sequence).await {
                    Ok(()) => {
                        tracing::info!(event_id = %event.event_id, stream_sequence, "event erased: its persona was deleted")
                    }
                    Err(error) => {
                        tracing::warn!(event_id = %event.event_id, %error, "erasing an event of a deleted persona failed; delete_persona again erases it")
                    }
                }
            }
            Ok(outcome) => {
                // Settled: recorded for erasure, which reads it, in one atomic step with a
                // last look at the erasures of the users the event names (store::erasure).
                let erased_since = match self
                    .pipeline
                    .settle(
                        &event,
                        stream_sequence,
                        self.config.events_max_age_hours * 3600,
                    )
                    .await
                {
                    Ok(erased) => erased,
                    Err(error) => {
                        // The effects are stored; a redelivery is a no-op that settles again.
                        let delay = self.retry_delay(delivered);
                        tracing::warn!(event_id = %event.event_id, %error, "recording the event as settled failed; will retry");
                        let _ = message.ack_with(AckKind::Nak(Some(delay))).await;
                        return true;
                    }
                };
                if let Err(error) = message.double_ack().await {
                    // Effects are stored under idempotency keys, so a redelivery is harmless.
                    tracing::warn!(event_id = %event.event_id, %error, "ack not confirmed; a redelivery will be a no-op");
                }
                telemetry::event_processed(started.elapsed());
                tracing::debug!(event_id = %event.event_id, persona_id = %event.persona_id, opinions = outcome.opinions, decisions = outcome.decisions.len(), "event processed");
                if outcome.predates_an_erasure || erased_since {
                    // It was still pending when a user it names was erased: now that it is
                    // settled, their words leave the stream as the erasure's did.
                    match super::erasure::erase(&self.js, &self.config.stream, stream_sequence)
                        .await
                    {
                        Ok(()) => {
                            tracing::info!(event_id = %event.event_id, stream_sequence, "event erased: it names an erased user, or its persona was deleted")
                        }
                        Err(error) => {
                            tracing::warn!(event_id = %event.event_id, %error, "erasing a settled event that names an erased user failed; purge_user again erases it")
                        }
                    }
                }
            }
            Err(error) if error.is_retryable() && delivered < self.config.max_deliver => {
                let delay = self.retry_delay(delivered);
                telemetry::event_retried(error.stage());
                tracing::warn!(event_id = %event.event_id, delivered, delay_ms = delay.as_millis() as u64, %error, "transient failure; will retry");
                let _ = message.ack_with(AckKind::Nak(Some(delay))).await;
            }
            Err(error) => {
                let reason = if error.is_retryable() {
                    DeadLetterReason::MaxDeliver(error.to_string())
                } else {
                    DeadLetterReason::Permanent(error.to_string())
                };
                tracing::error!(event_id = %event.event_id, delivered, %error, "giving up on event");
                self.dead_letter(&message, &subject, stream_sequence, delivered, &reason)
                    .await;
            }
        }
        true
    }

    /// How long a failed event waits in JetStream before its next delivery: the same policy
    /// as every other retry (`retry.rs`), from `ingest.retry_delay_ms` up to a minute.
    fn retry_delay(&self, delivered: i64) -> Duration {
        RetryPolicy {
            first: Duration::from_millis(self.config.retry_delay_ms),
            max: Duration::from_secs(60),
        }
        .delay(u32::try_from(delivered).unwrap_or(u32::MAX))
    }

    /// Publishes the original payload with its reason to the dead-letter subject, then
    /// terminates the message. A failed publish naks instead, so nothing is lost.
    async fn dead_letter(
        &self,
        message: &jetstream::Message,
        subject: &str,
        stream_sequence: u64,
        delivered: i64,
        reason: &DeadLetterReason,
    ) {
        let persona = subject_persona(subject, &self.config.subject_prefix)
            .filter(|token| validate::persona_id(token).is_ok())
            .unwrap_or("unknown");
        let dlq_subject =
            crate::subjects::dead_letter_subject(&self.config.dlq_subject_prefix, persona);
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_REASON, single_line(reason.message()).as_str());
        headers.insert(HEADER_REASON_CODE, reason.code());
        headers.insert(HEADER_ORIGINAL_SUBJECT, subject);
        headers.insert(HEADER_STREAM_SEQUENCE, stream_sequence.to_string().as_str());
        headers.insert(HEADER_DELIVERIES, delivered.to_string().as_str());
        // Same id on a repeat, so the dead-letter stream keeps one copy.
        headers.insert(
            "Nats-Msg-Id",
            format!("dlq-{}-{stream_sequence}", self.config.stream).as_str(),
        );
        // An event that only just fitted cannot carry the reason headers as well: keep its
        // head and say how long it was, rather than nak it forever.
        let mut payload = message.payload.clone();
        let room = self
            .js
            .client()
            .server_info()
            .max_payload
            .saturating_sub(DLQ_HEADER_ROOM);
        if payload.len() > room {
            headers.insert(HEADER_TRUNCATED_FROM, payload.len().to_string().as_str());
            payload.truncate(room);
        }
        let published = match self
            .js
            .publish_with_headers(dlq_subject.clone(), headers, payload)
            .await
        {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        match published {
            Ok(()) => {
                // Settled, as far as erasure is concerned: the stream's copy may go with a
                // user's erasure even above the ack floor. The persona is the subject's, or the
                // payload's for an event that came on an odd subject.
                let valid = |persona: &String| validate::persona_id(persona).is_ok();
                let owner = subject_persona(subject, &self.config.subject_prefix)
                    .map(str::to_string)
                    .filter(valid)
                    .or_else(|| payload_persona(&message.payload).filter(valid));
                if let Some(owner) = owner {
                    let keep = self.config.events_max_age_hours * 3600;
                    if let Err(error) = self
                        .pipeline
                        .settle_dead_letter(&owner, stream_sequence, keep)
                        .await
                    {
                        tracing::warn!(%error, stream_sequence, "recording a dead-lettered event as settled failed; erasure will report it as pending");
                    }
                }
                telemetry::event_dead_lettered(reason.code());
                if let Err(error) = message.double_ack_with(AckKind::Term).await {
                    tracing::warn!(%error, "terminating a dead-lettered message was not confirmed");
                }
                tracing::warn!(%dlq_subject, code = reason.code(), reason = %reason.message(), "event dead-lettered");
            }
            Err(error) => {
                tracing::error!(%dlq_subject, %error, "dead-letter publish failed; returning the event for redelivery");
                let _ = message
                    .ack_with(AckKind::Nak(Some(self.retry_delay(delivered))))
                    .await;
            }
        }
    }
}

/// Resolves once the flag turns true (or its sender is gone). Returns nothing, so no watch guard
/// is held across an await point.
pub(crate) async fn stopped(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|stop| *stop).await.map(|_| ());
}

/// The `persona_id` an event payload names, if it is readable JSON that names one.
fn payload_persona(payload: &[u8]) -> Option<String> {
    let event: serde_json::Value = serde_json::from_slice(payload).ok()?;
    event["persona_id"].as_str().map(str::to_string)
}

/// Header values are single lines.
fn single_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    crate::store::validate::truncate_chars(&line, 1024)
}

/// Keeps the backlog gauges current: events waiting for the consumer, letters waiting for an
/// operator.
async fn report_pending(
    mut consumer: PullConsumer,
    dead_letters: super::dead_letters::DeadLetters,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        if let Ok(info) = consumer.info().await {
            telemetry::consumer_pending(info.num_pending + info.num_ack_pending as u64);
        }
        if let Ok(stored) = dead_letters.stored().await {
            telemetry::dead_letters_stored(stored);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            _ = stopped(&mut shutdown) => return,
        }
    }
}
