//! Ingest stage: JetStream events → extract → embed → decide → store, acked only on success.
//!
//! - [`event`]: the event format and its validation;
//! - [`pipeline`]: what a valid event does to the store (exactly-once effects);
//! - [`turns`]: one persona's events take effect in stream order within a worker;
//! - [`worker`]: the JetStream consumer loop, acks, retries, dead letters, shutdown;
//! - [`dead_letters`]: listing, replaying and discarding dead letters (the operator's side);
//! - [`erasure`]: erasing an erased user's stored events and dead letters (`purge_user`).

pub mod dead_letters;
pub mod erasure;
pub mod event;
pub mod gates;
pub mod pipeline;
pub mod scan;
pub mod turns;
pub mod worker;

use serde::Deserialize;

use crate::settings::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    pub stream: String,
    pub subject_prefix: String,
    pub consumer: String,
    pub dlq_subject_prefix: String,
    pub dlq_stream: String,
    pub max_deliver: i64,
    pub ack_wait_ms: u64,
    pub max_in_flight: usize,
    /// Events of one persona worked on at once by a worker (0: no limit); the persona's others
    /// wait, pulled, so a hot persona leaves the other slots to everyone else (`gates.rs`).
    pub max_in_flight_per_persona: usize,
    pub max_messages_per_event: usize,
    pub max_message_chars: usize,
    pub duplicate_window_secs: u64,
    pub retry_delay_ms: u64,
    pub grace_period_ms: u64,
    pub max_redacted_share: f64,
    /// How long JetStream keeps events and dead letters (0 = for ever).
    pub events_max_age_hours: u64,
    pub dlq_max_age_hours: u64,
    /// Copies JetStream keeps of each stream: 1 on a single server, 3 on a cluster.
    pub stream_replicas: usize,
    /// Size limits of the event and dead-letter streams, in bytes (0 = none). A full stream
    /// refuses new messages rather than dropping stored ones.
    pub stream_max_bytes: i64,
    pub dlq_max_bytes: i64,
    /// How many worker processes may share the consumer; its max ack pending is
    /// `max_in_flight × max_workers`, so each of them can have `max_in_flight` events at once.
    pub max_workers: usize,
}

impl IngestConfig {
    /// The consumer-wide cap on unacknowledged events (JetStream's max ack pending): every one
    /// of `max_workers` workers can fill its own `max_in_flight`.
    pub fn max_ack_pending(&self) -> i64 {
        (self.max_in_flight * self.max_workers) as i64
    }
}

impl IngestConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.into(),
            message,
        };
        let token = |key: &str, value: &str| {
            if value.is_empty()
                || value.contains(|c: char| c.is_whitespace() || c == '.' || c == '*' || c == '>')
            {
                Err(invalid(
                    key,
                    format!(
                        "{value:?} must be a non-empty name without whitespace, '.', '*' or '>'"
                    ),
                ))
            } else {
                Ok(())
            }
        };
        token("ingest.stream", &self.stream)?;
        token("ingest.consumer", &self.consumer)?;
        token("ingest.dlq_stream", &self.dlq_stream)?;
        if self.subject_prefix.is_empty()
            || self.subject_prefix.contains(['*', '>', ' '])
            || self.subject_prefix.ends_with('.')
        {
            return Err(invalid(
                "ingest.subject_prefix",
                "must be a plain subject prefix such as persona.messages".into(),
            ));
        }
        if self.dlq_subject_prefix.is_empty() || self.dlq_subject_prefix.contains(['*', '>', ' ']) {
            return Err(invalid(
                "ingest.dlq_subject_prefix",
                "must be a plain subject prefix".into(),
            ));
        }
        if self.max_deliver < 1 {
            return Err(invalid("ingest.max_deliver", "must be at least 1".into()));
        }
        if !(1..=50).contains(&self.max_messages_per_event) {
            return Err(invalid(
                "ingest.max_messages_per_event",
                "must be within 1..=50".into(),
            ));
        }
        for (key, value) in [
            ("ingest.max_in_flight", self.max_in_flight as u64),
            ("ingest.max_message_chars", self.max_message_chars as u64),
            ("ingest.ack_wait_ms", self.ack_wait_ms),
            ("ingest.duplicate_window_secs", self.duplicate_window_secs),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be positive".into()));
            }
        }
        // JetStream refuses a duplicate window longer than the stream's retention.
        if self.events_max_age_hours > 0
            && self.duplicate_window_secs > self.events_max_age_hours * 3600
        {
            return Err(invalid(
                "ingest.duplicate_window_secs",
                "must not exceed ingest.events_max_age_hours".into(),
            ));
        }
        if !(1..=5).contains(&self.stream_replicas) {
            return Err(invalid(
                "ingest.stream_replicas",
                format!("must be within 1..=5, got {}", self.stream_replicas),
            ));
        }
        for (key, value) in [
            ("ingest.stream_max_bytes", self.stream_max_bytes),
            ("ingest.dlq_max_bytes", self.dlq_max_bytes),
        ] {
            if value < 0 {
                return Err(invalid(key, "must be 0 (no limit) or positive".into()));
            }
        }
        if self.max_workers == 0 {
            return Err(invalid("ingest.max_workers", "must be positive".into()));
        }
        if !(0.0..=1.0).contains(&self.max_redacted_share) {
            return Err(invalid(
                "ingest.max_redacted_share",
                "must be within [0, 1]".into(),
            ));
        }
        Ok(())
    }
}
