//! Erasure's reach into JetStream: after `purge_user` has rewritten a persona's memory, the
//! conversation events and dead letters that hold the erased user's own words are erased too,
//! instead of waiting out the streams' retention.
//!
//! Only events the worker has settled (at or below the consumer's ack floor) are erased here:
//! one still to be processed also carries other users' and the persona's words, which must not
//! be lost. Those are counted as pending; the worker processes them under the erasure (what
//! the persona said to the erased user is decided `erased`) and then erases them itself.
//! Dead letters naming the user are erased whatever else they hold: they are failures kept for
//! an operator, not a backlog. JetStream overwrites an erased message (secure erase), not
//! only unlinks it.

use std::ops::ControlFlow;

use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::stream::{self, ConsumerErrorKind, DeleteMessageErrorKind};
use async_nats::jetstream::{self, ErrorCode, consumer};
use serde::{Deserialize, Serialize};

use super::IngestConfig;
use super::scan::scan_subject;

#[derive(Debug, thiserror::Error)]
#[error("stream {stream}: {message}")]
pub struct StoredEventsError {
    pub stream: String,
    pub message: String,
}

/// What an erasure did to the streams, and what it left there and why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StoredEventsReport {
    /// Settled events naming the user, erased.
    pub events_erased: u64,
    /// Events naming the user that the worker has not settled yet (`pending` lists them).
    pub events_pending: u64,
    /// Each event left in the events stream, with why.
    #[serde(default)]
    pub pending: Vec<PendingEvent>,
    /// Dead letters naming the user, erased: the persona's, and those kept under the unknown
    /// subject that belong to the persona or to no readable persona.
    pub dead_letters_erased: u64,
}

/// An event naming the erased user that stays in the events stream for now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingEvent {
    pub stream_sequence: u64,
    pub reason: String,
}

/// Why an unsettled event stays: it also holds others' words, and the worker erases it itself.
const NOT_YET_SETTLED: &str = "not processed yet: it also holds other users' and the persona's words; the worker processes it under the erasure, then erases it from the stream";

/// Erases the stored events and dead letters of `persona_id` that name `user_id` (see the
/// module documentation for which). An event is settled when it is at or below the
/// consumer's ack floor, or recorded as settled by the worker (an event above the floor is
/// settled when an earlier one waits out a retry). Safe to repeat.
pub async fn erase_stored_events(
    js: &jetstream::Context,
    store: &crate::store::PreferenceStore,
    config: &IngestConfig,
    persona_id: &str,
    user_id: &str,
) -> Result<StoredEventsReport, StoredEventsError> {
    let mut report = StoredEventsReport::default();
    // Under the persona's own subject every event is its; below it (odd subjects, dead-lettered
    // but kept in the stream), those that are its or nobody's readable.
    erase_settled_events(
        js,
        store,
        config,
        persona_id,
        |below, payload| names_user(payload, user_id) && (!below || may_be_of(payload, persona_id)),
        NOT_YET_SETTLED,
        &mut report,
    )
    .await?;
    // The persona's dead letters, then those kept under the unknown subject (an odd event
    // subject) that are this persona's or nobody's readable.
    erase_dead_letters(
        js,
        config,
        persona_id,
        |payload| names_user(payload, user_id),
        &mut report,
    )
    .await?;
    erase_dead_letters(
        js,
        config,
        "unknown",
        |payload| names_user(payload, user_id) && may_be_of(payload, persona_id),
        &mut report,
    )
    .await?;
    Ok(report)
}

/// Erases every stored event and dead letter of `persona_id` (a deleted persona): its settled
/// events (under its subject and any below it), its dead letters, and the letters under the
/// unknown subject that say they are its own. Events not yet settled are left, reported as
/// pending: the worker refuses them (the persona is deleted) and erases them once acked.
/// Safe to repeat.
pub async fn erase_persona_events(
    js: &jetstream::Context,
    store: &crate::store::PreferenceStore,
    config: &IngestConfig,
    persona_id: &str,
) -> Result<StoredEventsReport, StoredEventsError> {
    let mut report = StoredEventsReport::default();
    erase_settled_events(
        js,
        store,
        config,
        persona_id,
        |_, _| true,
        NOT_YET_SETTLED_OF_DELETED,
        &mut report,
    )
    .await?;
    erase_dead_letters(js, config, persona_id, |_| true, &mut report).await?;
    erase_dead_letters(
        js,
        config,
        "unknown",
        |payload| payload_says_persona(payload, persona_id),
        &mut report,
    )
    .await?;
    Ok(report)
}

/// Erases the events of `persona_id` that `wanted` picks (told whether the event sits below
/// the persona's subject rather than on it) and that the worker has settled: at or below the
/// consumer's ack floor, or recorded as settled. The others are listed as pending, with
/// `pending_reason`.
async fn erase_settled_events(
    js: &jetstream::Context,
    store: &crate::store::PreferenceStore,
    config: &IngestConfig,
    persona_id: &str,
    wanted: impl Fn(bool, &[u8]) -> bool,
    pending_reason: &str,
    report: &mut StoredEventsReport,
) -> Result<(), StoredEventsError> {
    let settled_through = settled_through(js, config).await?;
    let subject = crate::subjects::event_subject(&config.subject_prefix, persona_id);
    for (subject, below) in [(subject.clone(), false), (format!("{subject}.>"), true)] {
        let Some((stream, events)) = matching(js, &config.stream, &subject, |payload| {
            wanted(below, payload)
        })
        .await?
        else {
            break;
        };
        let above_floor: Vec<u64> = events
            .iter()
            .copied()
            .filter(|sequence| *sequence > settled_through)
            .collect();
        let settled_above = store
            .settled_events(persona_id, &above_floor)
            .await
            .map_err(|e| error(&config.stream, format!("reading settled events: {e}")))?;
        for sequence in events {
            if sequence <= settled_through || settled_above.contains(&sequence) {
                erase_from(&stream, &config.stream, sequence).await?;
                report.events_erased += 1;
            } else {
                report.pending.push(PendingEvent {
                    stream_sequence: sequence,
                    reason: pending_reason.into(),
                });
            }
        }
    }
    report.events_pending = report.pending.len() as u64;
    Ok(())
}

/// Erases the dead letters under `persona`'s dead-letter subject that `wanted` picks.
async fn erase_dead_letters(
    js: &jetstream::Context,
    config: &IngestConfig,
    persona: &str,
    wanted: impl FnMut(&[u8]) -> bool,
    report: &mut StoredEventsReport,
) -> Result<(), StoredEventsError> {
    let subject = crate::subjects::dead_letter_subject(&config.dlq_subject_prefix, persona);
    if let Some((stream, letters)) = matching(js, &config.dlq_stream, &subject, wanted).await? {
        for sequence in letters {
            erase_from(&stream, &config.dlq_stream, sequence).await?;
            report.dead_letters_erased += 1;
        }
    }
    Ok(())
}

/// Why an unsettled event of a deleted persona stays for now.
const NOT_YET_SETTLED_OF_DELETED: &str = "not processed yet: the worker refuses it (its persona is deleted) and erases it from the stream once acked";

/// Whether a payload says it is `persona_id`'s (its `persona_id` field).
fn payload_says_persona(payload: &[u8], persona_id: &str) -> bool {
    serde_json::from_slice::<serde_json::Value>(payload)
        .ok()
        .is_some_and(|value| value.get("persona_id").and_then(|p| p.as_str()) == Some(persona_id))
}

fn error(stream: &str, message: impl std::fmt::Display) -> StoredEventsError {
    StoredEventsError {
        stream: stream.into(),
        message: message.to_string(),
    }
}

/// The events stream sequence through which the worker's consumer has settled every event;
/// 0 when no worker has run (nothing is settled).
async fn settled_through(
    js: &jetstream::Context,
    config: &IngestConfig,
) -> Result<u64, StoredEventsError> {
    let mut consumer = match js
        .get_consumer_from_stream::<consumer::pull::Config, _, _>(&config.consumer, &config.stream)
        .await
    {
        Ok(consumer) => consumer,
        // No worker has run: nothing is settled. Any other failure is an error, not "none".
        Err(e)
            if matches!(e.kind(), ConsumerErrorKind::JetStream(ref j)
                if j.error_code() == ErrorCode::CONSUMER_NOT_FOUND
                    || j.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
        {
            return Ok(0);
        }
        Err(e) => {
            return Err(error(
                &config.stream,
                format!("consumer {}: {e}", config.consumer),
            ));
        }
    };
    let info = consumer
        .info()
        .await
        .map_err(|e| error(&config.stream, format!("consumer {}: {e}", config.consumer)))?;
    Ok(info.ack_floor.stream_sequence)
}

/// The stream and the sequences of its messages on `subject` whose payload `wanted` picks;
/// `None` when the stream does not exist (it holds nothing).
async fn matching(
    js: &jetstream::Context,
    stream_name: &str,
    subject: &str,
    mut wanted: impl FnMut(&[u8]) -> bool,
) -> Result<Option<(stream::Stream, Vec<u64>)>, StoredEventsError> {
    let stream = match js.get_stream(stream_name).await {
        Ok(stream) => stream,
        // A stream never created holds nothing; a failure to ask is an error, not "nothing".
        Err(e)
            if matches!(e.kind(), GetStreamErrorKind::JetStream(ref j)
                if j.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(error(stream_name, e)),
    };
    let mut found = Vec::new();
    scan_subject(&stream, subject, |scanned| {
        if wanted(&scanned.message.payload) {
            found.push(scanned.sequence);
        }
        ControlFlow::Continue(())
    })
    .await
    .map_err(|e| error(stream_name, e))?;
    Ok(Some((stream, found)))
}

/// Whether a payload may belong to `persona_id`: it says so, or it names no persona readably.
fn may_be_of(payload: &[u8], persona_id: &str) -> bool {
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(event) => match &event["persona_id"] {
            serde_json::Value::String(named) => named == persona_id,
            _ => true,
        },
        Err(_) => true,
    }
}

/// Whether an event payload names the user: as the author of a message or as a participant,
/// with the id as a string or as a number (a producer's bug must not keep the id from being
/// found). A payload that is not readable JSON (a malformed or truncated dead letter) names
/// them when it holds their id as a JSON string or as a bare number: erasure errs on the side
/// of forgetting.
pub fn names_user(payload: &[u8], user_id: &str) -> bool {
    match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(event) => {
            let is_user = |value: &serde_json::Value| match value {
                serde_json::Value::String(id) => id == user_id,
                serde_json::Value::Number(id) => id.to_string() == user_id,
                _ => false,
            };
            let authored = event["messages"]
                .as_array()
                .is_some_and(|messages| messages.iter().any(|m| is_user(&m["user_id"])));
            let participant = event["participant_user_ids"]
                .as_array()
                .is_some_and(|ids| ids.iter().any(is_user));
            authored || participant
        }
        Err(_) => {
            let quoted = serde_json::to_string(user_id).expect("a string serialises");
            let contains = |needle: &[u8]| payload.windows(needle.len()).any(|w| w == needle);
            // A number stands alone: not a digit, sign or point on either side.
            let bare_number = user_id.parse::<f64>().is_ok()
                && payload
                    .windows(user_id.len())
                    .enumerate()
                    .any(|(at, window)| {
                        let number_byte =
                            |b: &u8| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'e' | b'E');
                        window == user_id.as_bytes()
                            && !at
                                .checked_sub(1)
                                .and_then(|i| payload.get(i))
                                .is_some_and(number_byte)
                            && !payload.get(at + user_id.len()).is_some_and(number_byte)
                    });
            contains(quoted.as_bytes()) || bare_number
        }
    }
}

/// Erases one message of a stream (overwritten); a message already gone is no error.
pub(crate) async fn erase(
    js: &jetstream::Context,
    stream_name: &str,
    sequence: u64,
) -> Result<(), StoredEventsError> {
    let stream = js
        .get_stream(stream_name)
        .await
        .map_err(|e| error(stream_name, e))?;
    erase_from(&stream, stream_name, sequence).await
}

async fn erase_from(
    stream: &stream::Stream,
    stream_name: &str,
    sequence: u64,
) -> Result<(), StoredEventsError> {
    // A delete request without `no_erase` makes the server overwrite the message: a secure
    // erase, not only an unlink.
    match stream.delete_message(sequence).await {
        Ok(_) => Ok(()),
        // Gone already (expired, or erased by an earlier run): nothing to do.
        Err(e)
            if matches!(e.kind(), DeleteMessageErrorKind::JetStream(ref j)
                if j.error_code() == ErrorCode::NO_MESSAGE_FOUND) =>
        {
            Ok(())
        }
        Err(e) => Err(error(stream_name, format!("erasing {sequence}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::names_user;

    #[test]
    fn a_user_is_named_as_author_or_participant_and_in_unreadable_payloads() {
        let event = br#"{"participant_user_ids": ["p1"], "messages": [
            {"role": "user", "user_id": "u9", "content": "hi"},
            {"role": "persona", "content": "u7 is funny"}]}"#;
        assert!(names_user(event, "u9"));
        assert!(names_user(event, "p1"));
        assert!(
            !names_user(event, "u7"),
            "mentioned in words, not named as a user"
        );
        assert!(!names_user(event, "u"), "whole ids only");
        assert!(names_user(
            br#"{"messages": [{"user_id": "u9", "content": "trunc"#,
            "u9"
        ));
        assert!(!names_user(
            br#"{"messages": [{"user_id": "u99", "content": "trunc"#,
            "u9"
        ));
        // Ids as numbers, read or not.
        assert!(names_user(br#"{"messages": [{"user_id": 42}]}"#, "42"));
        assert!(names_user(br#"{"participant_user_ids": [7, 8]}"#, "8"));
        assert!(!names_user(br#"{"messages": [{"user_id": 421}]}"#, "42"));
        assert!(names_user(br#"{"messages": [{"user_id": 42, "con"#, "42"));
        assert!(!names_user(br#"{"messages": [{"user_id": 421, "con"#, "42"));
        assert!(!names_user(
            br#"{"messages": [{"user_id": 1.42, "con"#,
            "42"
        ));
    }
}
