//! The conversation event producers publish (see docs/PROTOCOL.md and
//! docs/conversation_event.schema.json), and its validation. Every rejection says why, with a
//! stable reason code used in dead-letter headers and metrics.

use serde::{Deserialize, Serialize};

use crate::store::validate;
use crate::timestamp::Timestamp;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationEvent {
    pub event_id: String,
    pub persona_id: String,
    pub platform: String,
    pub channel_id: String,
    /// Oldest first, 1..=50.
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub participant_user_ids: Vec<String>,
    /// When JetStream stored the event (RFC 3339; set by the worker, never read from the
    /// payload). The server's clock: it places the conversation before or after an erasure
    /// even when the chat pipeline's clock, which wrote the message timestamps, runs fast.
    #[serde(skip)]
    pub received_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub message_id: String,
    pub role: Role,
    #[serde(default)]
    pub user_id: String,
    pub content: String,
    /// RFC 3339 on the wire; an event whose timestamp is not is refused (`schema`).
    pub timestamp: Timestamp,
    /// On a persona message: the preferences that were in its prompt (the `id`s an injection
    /// reply listed). The persona restating one of them is an echo of its reminder, not new
    /// evidence, so it does not reinforce it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injected_preference_ids: Vec<String>,
    /// On a persona message: the knowledge-graph entities it mentions, as the producer knows
    /// them. An opinion drawn from it keeps those it names (or all listed without a name) as
    /// `related_kg_uuids`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<crate::extract::people::Mention>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Persona,
    System,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Persona => "persona",
            Role::System => "system",
        }
    }
}

/// What kind of bad input an event is. Its text is stable and bounded: it goes into
/// dead-letter headers and metric labels, and operators filter by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidCode {
    /// Over `nats.max_payload_bytes`.
    Oversize,
    InvalidUtf8,
    InvalidJson,
    /// Valid JSON of the wrong shape, or a field of the wrong form.
    Schema,
    /// Over a count or length limit.
    Limit,
}

impl InvalidCode {
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidCode::Oversize => "oversize",
            InvalidCode::InvalidUtf8 => "invalid_utf8",
            InvalidCode::InvalidJson => "invalid_json",
            InvalidCode::Schema => "schema",
            InvalidCode::Limit => "limit",
        }
    }
}

impl std::fmt::Display for InvalidCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an event can never be processed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct InvalidEvent {
    pub code: InvalidCode,
    pub message: String,
}

impl InvalidEvent {
    fn new(code: InvalidCode, message: impl Into<String>) -> InvalidEvent {
        InvalidEvent {
            code,
            message: message.into(),
        }
    }
}

/// The limits an event is checked against.
#[derive(Debug, Clone)]
pub struct EventLimits {
    pub max_payload_bytes: usize,
    pub max_messages: usize,
    pub max_message_chars: usize,
    pub max_participants: usize,
    /// Most `injected_preference_ids` on one message.
    pub max_injected: usize,
}

/// Parses and validates one payload received on `subject` (`<subject_prefix>.<persona_id>`).
pub fn parse_event(
    subject: &str,
    subject_prefix: &str,
    payload: &[u8],
    limits: &EventLimits,
) -> Result<ConversationEvent, InvalidEvent> {
    if payload.len() > limits.max_payload_bytes {
        return Err(InvalidEvent::new(
            InvalidCode::Oversize,
            format!(
                "payload is {} bytes, the limit is {} (nats.max_payload_bytes)",
                payload.len(),
                limits.max_payload_bytes
            ),
        ));
    }
    let text = std::str::from_utf8(payload).map_err(|error| {
        InvalidEvent::new(
            InvalidCode::InvalidUtf8,
            format!("payload is not UTF-8: {error}"),
        )
    })?;
    let event: ConversationEvent = serde_json::from_str(text).map_err(|error| {
        let code = if error.is_data() {
            InvalidCode::Schema
        } else {
            InvalidCode::InvalidJson
        };
        InvalidEvent::new(code, error.to_string())
    })?;
    validate_event(&event, subject, subject_prefix, limits)?;
    Ok(event)
}

/// The persona id a subject names, if it is under `subject_prefix`.
pub fn subject_persona<'a>(subject: &'a str, subject_prefix: &str) -> Option<&'a str> {
    subject.strip_prefix(subject_prefix)?.strip_prefix('.')
}

fn validate_event(
    event: &ConversationEvent,
    subject: &str,
    subject_prefix: &str,
    limits: &EventLimits,
) -> Result<(), InvalidEvent> {
    let schema = |message: String| InvalidEvent::new(InvalidCode::Schema, message);
    let limit = |message: String| InvalidEvent::new(InvalidCode::Limit, message);
    validate::persona_id(&event.persona_id).map_err(|e| schema(e.to_string()))?;
    if let Some(token) = subject_persona(subject, subject_prefix)
        && token != event.persona_id
    {
        return Err(schema(format!(
            "published on {subject:?} but persona_id is {:?}",
            event.persona_id
        )));
    }
    if event.event_id.is_empty() {
        return Err(schema("event_id is empty".into()));
    }
    for (field, value) in [
        ("event_id", &event.event_id),
        ("platform", &event.platform),
        ("channel_id", &event.channel_id),
    ] {
        validate::external_text(field, value).map_err(|e| limit(e.to_string()))?;
    }
    if event.messages.is_empty() {
        return Err(schema("messages is empty".into()));
    }
    if event.messages.len() > limits.max_messages {
        return Err(limit(format!(
            "{} messages, the limit is {}",
            event.messages.len(),
            limits.max_messages
        )));
    }
    if event.participant_user_ids.len() > limits.max_participants {
        return Err(limit(format!(
            "{} participant_user_ids, the limit is {}",
            event.participant_user_ids.len(),
            limits.max_participants
        )));
    }
    for id in &event.participant_user_ids {
        validate::user_id("participant_user_ids", id).map_err(|e| limit(e.to_string()))?;
    }
    let mut seen = std::collections::HashSet::new();
    for (index, message) in event.messages.iter().enumerate() {
        if message.message_id.is_empty() {
            return Err(schema(format!("messages[{index}].message_id is empty")));
        }
        if !seen.insert(message.message_id.as_str()) {
            return Err(schema(format!(
                "messages[{index}].message_id {:?} repeats",
                message.message_id
            )));
        }
        validate::external_text("message_id", &message.message_id)
            .map_err(|e| limit(format!("messages[{index}]: {e}")))?;
        validate::external_text("user_id", &message.user_id)
            .map_err(|e| limit(format!("messages[{index}]: {e}")))?;
        if message.role == Role::User && message.user_id.contains(',') {
            return Err(schema(format!("messages[{index}].user_id contains ','")));
        }
        if message.injected_preference_ids.len() > limits.max_injected {
            return Err(limit(format!(
                "messages[{index}].injected_preference_ids has {} ids, the limit is {} (store.max_injection_count)",
                message.injected_preference_ids.len(),
                limits.max_injected
            )));
        }
        for id in &message.injected_preference_ids {
            validate::preference_id(id)
                .map_err(|e| schema(format!("messages[{index}].injected_preference_ids: {e}")))?;
        }
        // Each becomes a related_kg_uuid of an opinion: the same cap as related ids.
        if message.mentions.len() > limits.max_participants {
            return Err(limit(format!(
                "messages[{index}].mentions has {} entities, the limit is {} (store.max_related_ids)",
                message.mentions.len(),
                limits.max_participants
            )));
        }
        for mention in &message.mentions {
            validate::short_id("kg_uuid", &mention.kg_uuid)
                .map_err(|e| schema(format!("messages[{index}].mentions: {e}")))?;
            if let Some(name) = &mention.name {
                validate::external_text("name", name)
                    .map_err(|e| limit(format!("messages[{index}].mentions: {e}")))?;
            }
        }
        let chars = message.content.chars().count();
        if chars > limits.max_message_chars {
            return Err(limit(format!(
                "messages[{index}].content is {chars} chars, the limit is {} (ingest.max_message_chars)",
                limits.max_message_chars
            )));
        }
        // Timestamps were read as instants while parsing (`Timestamp`): nothing to check.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> EventLimits {
        EventLimits {
            max_payload_bytes: 4096,
            max_messages: 50,
            max_message_chars: 200,
            max_participants: 8,
            max_injected: 4,
        }
    }

    fn valid() -> serde_json::Value {
        serde_json::json!({
            "event_id": "e1", "persona_id": "ada", "platform": "discord", "channel_id": "c1",
            "messages": [
                {"message_id": "m1", "role": "user", "user_id": "u1", "content": "Do you like tea?", "timestamp": "2026-01-01T10:00:00Z"},
                {"message_id": "m2", "role": "persona", "content": "I love green tea.", "timestamp": "2026-01-01T10:00:05+01:00"}
            ]
        })
    }

    fn code_of(subject: &str, payload: &[u8]) -> Result<(), &'static str> {
        parse_event(subject, "persona.messages", payload, &limits())
            .map(|_| ())
            .map_err(|e| e.code.as_str())
    }

    #[test]
    fn each_kind_of_bad_input_has_its_reason_code() {
        let with = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = valid();
            edit(&mut v);
            serde_json::to_vec(&v).unwrap()
        };
        let cases: Vec<(&str, Vec<u8>, Result<(), &str>)> = vec![
            ("valid", serde_json::to_vec(&valid()).unwrap(), Ok(())),
            ("oversize", vec![b' '; 5000], Err("oversize")),
            ("invalid utf-8", vec![0xff, 0xfe, b'{'], Err("invalid_utf8")),
            ("not json", b"{not json".to_vec(), Err("invalid_json")),
            (
                "missing field",
                with(&|v| {
                    v.as_object_mut().unwrap().remove("messages");
                }),
                Err("schema"),
            ),
            (
                "bad role",
                with(&|v| v["messages"][0]["role"] = "bot".into()),
                Err("schema"),
            ),
            (
                "bad persona",
                with(&|v| v["persona_id"] = "a.b".into()),
                Err("schema"),
            ),
            (
                "no messages",
                with(&|v| v["messages"] = serde_json::json!([])),
                Err("schema"),
            ),
            (
                "bad timestamp",
                with(&|v| v["messages"][0]["timestamp"] = "yesterday".into()),
                Err("schema"),
            ),
            (
                "repeated id",
                with(&|v| v["messages"][1]["message_id"] = "m1".into()),
                Err("schema"),
            ),
            (
                "long content",
                with(&|v| v["messages"][1]["content"] = "x".repeat(201).into()),
                Err("limit"),
            ),
            (
                "injected ids",
                with(&|v| {
                    v["messages"][1]["injected_preference_ids"] = serde_json::json!(["a", "b-1"])
                }),
                Ok(()),
            ),
            (
                "too many injected ids",
                with(&|v| {
                    v["messages"][1]["injected_preference_ids"] =
                        serde_json::json!(["a", "b", "c", "d", "e"])
                }),
                Err("limit"),
            ),
            (
                "bad injected id",
                with(&|v| v["messages"][1]["injected_preference_ids"] = serde_json::json!(["a b"])),
                Err("schema"),
            ),
            (
                "long id",
                with(&|v| v["messages"][1]["message_id"] = "x".repeat(257).into()),
                Err("limit"),
            ),
            (
                "participants",
                with(&|v| {
                    v["participant_user_ids"] =
                        serde_json::json!(["a", "b", "c", "d", "e", "f", "g", "h", "i"])
                }),
                Err("limit"),
            ),
        ];
        for (label, payload, expected) in cases {
            assert_eq!(
                code_of("persona.messages.ada", &payload),
                expected,
                "{label}"
            );
        }
        let too_many = {
            let mut v = valid();
            let message = v["messages"][0].clone();
            v["messages"] = serde_json::Value::Array(
                (0..51)
                    .map(|i| {
                        let mut m = message.clone();
                        m["message_id"] = format!("m{i}").into();
                        m
                    })
                    .collect(),
            );
            serde_json::to_vec(&v).unwrap()
        };
        let big = EventLimits {
            max_payload_bytes: 1 << 20,
            ..limits()
        };
        assert_eq!(
            parse_event("persona.messages.ada", "persona.messages", &too_many, &big)
                .unwrap_err()
                .code,
            InvalidCode::Limit
        );
    }

    #[test]
    fn the_subject_must_name_the_events_persona() {
        let payload = serde_json::to_vec(&valid()).unwrap();
        assert_eq!(code_of("persona.messages.bob", &payload), Err("schema"));
    }
}
