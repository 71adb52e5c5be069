//! The operator's side of the dead-letter stream: list what was given up on and why, look at one
//! letter, replay letters to the events stream once their cause is fixed, or discard them.
//!
//! Replay publishes the letter's payload, unchanged, to the subject it was first published on,
//! waits for JetStream to store it, and only then deletes the letter. A crash in between leaves
//! the letter in place, and replaying it again is harmless: the replay carries a message id
//! derived from the letter (JetStream drops a repeat inside its duplicate window) and every
//! effect of an event is keyed by the persona message it came from.

use std::ops::ControlFlow;

use async_nats::HeaderMap;
use async_nats::jetstream::stream::{self, DeleteMessageErrorKind, RawMessageErrorKind};
use async_nats::jetstream::{self, ErrorCode, message::StreamMessage};
use bytes::Bytes;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;

use super::IngestConfig;
use super::scan::scan_subject;
use super::worker::{
    HEADER_DELIVERIES, HEADER_ORIGINAL_SUBJECT, HEADER_REASON, HEADER_REASON_CODE,
    HEADER_STREAM_SEQUENCE, HEADER_TRUNCATED_FROM,
};

/// Header a replayed event carries: which letter it came from (`<dlq stream>:<sequence>`).
pub const HEADER_REPLAYED_FROM: &str = "Persona-Prefs-Replayed-From";

/// Most letters one listing returns (all are held in memory at once).
pub const MAX_LIST_LIMIT: usize = 10_000;

/// Most payload bytes one listing holds: letters can be up to the server's max payload each,
/// and 10 000 of those would not fit in memory. A listing stops there and says it was cut.
pub const MAX_LIST_BYTES: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    #[error("dead letter {0} not found (replayed or discarded already?)")]
    NotFound(u64),
    #[error("dead-letter stream {stream}: {message}")]
    Stream { stream: String, message: String },
    #[error("dead letter {sequence}: {message}")]
    Unreplayable { sequence: u64, message: String },
    #[error("{0}")]
    Invalid(String),
}

impl DeadLetterError {
    /// Worth trying again as is (the server was slow or unreachable), as opposed to a letter
    /// that is gone or cannot be replayed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, DeadLetterError::Stream { .. })
    }
}

/// One dead letter, as the worker wrote it.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetter {
    /// Its sequence in the dead-letter stream: what `show`, `replay` and `discard` take.
    pub sequence: u64,
    pub subject: String,
    /// When it was dead-lettered (RFC 3339).
    pub dead_lettered_at: String,
    pub reason_code: String,
    pub reason: String,
    pub original_subject: String,
    pub original_sequence: Option<u64>,
    pub deliveries: Option<u64>,
    /// Set when only the head of the payload fits beside the headers: its original size.
    pub truncated_from: Option<u64>,
    /// The event's `event_id`, when the payload is JSON that has one.
    pub event_id: Option<String>,
    #[serde(skip)]
    pub payload: Bytes,
    /// The payload as text (lossy UTF-8), for reading.
    pub payload_text: String,
}

impl DeadLetter {
    fn from_stream_message(message: StreamMessage) -> DeadLetter {
        DeadLetter::from_parts(
            message.sequence,
            message.subject.to_string(),
            message.time,
            &message.headers,
            message.payload,
        )
    }

    fn from_parts(
        sequence: u64,
        subject: String,
        stored_at: time::OffsetDateTime,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> DeadLetter {
        let header = |name: &str| {
            headers
                .get(name)
                .map(|value| value.as_str().to_string())
                .unwrap_or_default()
        };
        let number = |name: &str| header(name).parse::<u64>().ok();
        let event_id = serde_json::from_slice::<serde_json::Value>(&payload)
            .ok()
            .and_then(|value| value.get("event_id")?.as_str().map(str::to_string));
        DeadLetter {
            sequence,
            subject,
            dead_lettered_at: stored_at.format(&Rfc3339).unwrap_or_default(),
            reason_code: header(HEADER_REASON_CODE),
            reason: header(HEADER_REASON),
            original_subject: header(HEADER_ORIGINAL_SUBJECT),
            original_sequence: number(HEADER_STREAM_SEQUENCE),
            deliveries: number(HEADER_DELIVERIES),
            truncated_from: number(HEADER_TRUNCATED_FROM),
            event_id,
            payload_text: String::from_utf8_lossy(&payload).into_owned(),
            payload,
        }
    }
}

/// Which letters a listing (or a bulk replay/discard) covers.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only letters for this persona (`unknown` for events that named none).
    pub persona_id: Option<String>,
    /// Only letters with this reason code (`max_deliver`, `schema`, …).
    pub reason_code: Option<String>,
    pub limit: usize,
    /// Payload bytes a listing may hold; 0 means [`MAX_LIST_BYTES`].
    pub max_bytes: usize,
}

/// A listing: the letters selected (oldest first) and how many the stream holds in all.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub letters: Vec<DeadLetter>,
    pub stored: u64,
    /// True when `limit` (or the byte cap) stopped the listing before the end of the stream.
    pub truncated: bool,
}

/// What a replay or discard did, letter by letter.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BulkReport {
    pub done: Vec<u64>,
    pub failed: Vec<(u64, String)>,
}

pub struct DeadLetters {
    js: jetstream::Context,
    config: IngestConfig,
}

impl DeadLetters {
    pub fn new(js: jetstream::Context, config: IngestConfig) -> DeadLetters {
        DeadLetters { js, config }
    }

    async fn stream(&self) -> Result<stream::Stream, DeadLetterError> {
        self.js
            .get_stream(&self.config.dlq_stream)
            .await
            .map_err(|e| self.stream_error(e))
    }

    fn stream_error(&self, error: impl std::fmt::Display) -> DeadLetterError {
        DeadLetterError::Stream {
            stream: self.config.dlq_stream.clone(),
            message: error.to_string(),
        }
    }

    /// How many letters the stream holds.
    pub async fn stored(&self) -> Result<u64, DeadLetterError> {
        let mut stream = self.stream().await?;
        let info = stream.info().await.map_err(|e| self.stream_error(e))?;
        Ok(info.state.messages)
    }

    /// Letters oldest first, filtered by persona (on the server, by subject) and reason code.
    pub async fn list(&self, selection: &Selection) -> Result<Listing, DeadLetterError> {
        if selection.limit == 0 || selection.limit > MAX_LIST_LIMIT {
            return Err(DeadLetterError::Invalid(format!(
                "limit must be within 1..={MAX_LIST_LIMIT}"
            )));
        }
        let subject = match &selection.persona_id {
            Some(persona) => {
                // Also the subject token, so it must be a valid persona id ("unknown" is one).
                crate::store::validate::persona_id(persona)
                    .map_err(|error| DeadLetterError::Invalid(error.to_string()))?;
                crate::subjects::dead_letter_subject(&self.config.dlq_subject_prefix, persona)
            }
            None => crate::subjects::all_under(&self.config.dlq_subject_prefix),
        };
        let mut stream = self.stream().await?;
        let stored = stream
            .info()
            .await
            .map_err(|e| self.stream_error(e))?
            .state
            .messages;
        let mut letters = Vec::new();
        let mut truncated = false;
        let max_bytes = match selection.max_bytes {
            0 => MAX_LIST_BYTES,
            bytes => bytes.min(MAX_LIST_BYTES),
        };
        let mut bytes = 0usize;
        scan_subject(&stream, &subject, |scanned| {
            let letter = DeadLetter::from_parts(
                scanned.sequence,
                scanned.message.subject.to_string(),
                scanned.stored_at,
                scanned
                    .message
                    .headers
                    .as_ref()
                    .unwrap_or(&HeaderMap::new()),
                scanned.message.payload.clone(),
            );
            let selected = selection
                .reason_code
                .as_ref()
                .is_none_or(|code| *code == letter.reason_code);
            if selected {
                bytes += letter.payload.len();
                if letters.len() == selection.limit || (bytes > max_bytes && !letters.is_empty()) {
                    truncated = true;
                    return ControlFlow::Break(());
                }
                letters.push(letter);
            }
            ControlFlow::Continue(())
        })
        .await
        .map_err(|e| self.stream_error(format!("listing: {e}")))?;
        Ok(Listing {
            letters,
            stored,
            truncated,
        })
    }

    pub async fn get(&self, sequence: u64) -> Result<DeadLetter, DeadLetterError> {
        let stream = self.stream().await?;
        match stream.get_raw_message(sequence).await {
            Ok(message) => Ok(DeadLetter::from_stream_message(message)),
            Err(error) if error.kind() == RawMessageErrorKind::NoMessageFound => {
                Err(DeadLetterError::NotFound(sequence))
            }
            Err(error) => Err(self.stream_error(error)),
        }
    }

    /// Publishes one letter's payload back to its original subject; deletes the letter once
    /// JetStream has stored the replay. Returns the replay's sequence in the events stream.
    pub async fn replay(&self, sequence: u64) -> Result<u64, DeadLetterError> {
        let letter = self.get(sequence).await?;
        if let Some(size) = letter.truncated_from {
            return Err(DeadLetterError::Unreplayable {
                sequence,
                message: format!(
                    "it holds only the first {} of the event's {size} bytes",
                    letter.payload.len()
                ),
            });
        }
        let prefix = format!("{}.", self.config.subject_prefix);
        // Only back into the events stream: a letter must not be able to send its payload
        // anywhere else, whatever its headers say.
        if !letter.original_subject.starts_with(&prefix)
            || letter.original_subject.len() == prefix.len()
        {
            return Err(DeadLetterError::Unreplayable {
                sequence,
                message: format!(
                    "its original subject {:?} is not under {}",
                    letter.original_subject, self.config.subject_prefix
                ),
            });
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Msg-Id",
            format!("replay-{}-{sequence}", self.config.dlq_stream).as_str(),
        );
        headers.insert(
            HEADER_REPLAYED_FROM,
            format!("{}:{sequence}", self.config.dlq_stream).as_str(),
        );
        let ack = self
            .js
            .publish_with_headers(letter.original_subject.clone(), headers, letter.payload)
            .await
            .map_err(|e| self.stream_error(format!("replaying {sequence}: {e}")))?
            .await
            .map_err(|e| self.stream_error(format!("replaying {sequence}: {e}")))?;
        self.discard(sequence).await?;
        Ok(ack.sequence)
    }

    /// Deletes one letter for good.
    pub async fn discard(&self, sequence: u64) -> Result<(), DeadLetterError> {
        let stream = self.stream().await?;
        match stream.delete_message(sequence).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(DeadLetterError::NotFound(sequence)),
            Err(error)
                if matches!(error.kind(), DeleteMessageErrorKind::JetStream(ref e)
                    if e.error_code() == ErrorCode::NO_MESSAGE_FOUND) =>
            {
                Err(DeadLetterError::NotFound(sequence))
            }
            Err(error) => Err(self.stream_error(error)),
        }
    }

    /// Replays (or discards) each of `sequences`, carrying on past failures.
    pub async fn replay_all(&self, sequences: &[u64]) -> BulkReport {
        let mut report = BulkReport::default();
        for &sequence in sequences {
            match self.replay(sequence).await {
                Ok(_) => report.done.push(sequence),
                Err(error) => report.failed.push((sequence, error.to_string())),
            }
        }
        report
    }

    pub async fn discard_all(&self, sequences: &[u64]) -> BulkReport {
        let mut report = BulkReport::default();
        for &sequence in sequences {
            match self.discard(sequence).await {
                Ok(()) => report.done.push(sequence),
                Err(error) => report.failed.push((sequence, error.to_string())),
            }
        }
        report
    }
}
