//! Every NATS subject the service builds, in one place. Endpoint subjects are
//! [`crate::serve::Endpoint::subject`].

/// The subject a persona's conversation events are published on.
pub fn event_subject(events_prefix: &str, persona_id: &str) -> String {
    format!("{events_prefix}.{persona_id}")
}

/// The subject a persona's dead letters are kept under (`unknown` when the persona could not
/// be read from the event's subject).
pub fn dead_letter_subject(dead_letter_prefix: &str, persona: &str) -> String {
    format!("{dead_letter_prefix}.{persona}")
}

/// Every subject under a prefix (`<prefix>.>`).
pub fn all_under(prefix: &str) -> String {
    format!("{prefix}.>")
}
