//! Effect ids: what an ingest write applied, so a redelivered event changes nothing.
//!
//! An id names the *content* of an effect, not its position in an extraction (an extractor may
//! reorder, drop or add opinions between deliveries):
//! - adding a preference: the persona message plus a digest of the opinion's normalised topic
//!   and stance (`<message>:add:<digest>`);
//! - writing to an existing preference (reinforce, evolve): the persona message plus a digest
//!   of the preference id (`<message>:pref:<digest>`). An add records this one too, so a
//!   message never reinforces the preference it created, however its opinion was worded the
//!   second time.
//!
//! Every part is a fixed-length digest of length-prefixed fields: ids of any allowed length fit
//! (at most [`EFFECT_ID_LEN`] bytes), and no two different inputs share an encoding (a `:` in a
//! channel id cannot shift a boundary).

use sha2::{Digest, Sha256};

use super::Stance;

/// Hex digits kept of each SHA-256 digest (128 bits).
const DIGEST_HEX: usize = 32;
/// The length of every effect id this module makes.
pub const EFFECT_ID_LEN: usize = "fx1:".len() + DIGEST_HEX + ":pref:".len() + DIGEST_HEX;

/// The effects of one persona message (one platform, channel and message id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageEffects {
    message: String,
}

impl MessageEffects {
    pub fn of(platform: &str, channel_id: &str, message_id: &str) -> MessageEffects {
        MessageEffects {
            message: format!("fx1:{}", digest(&[platform, channel_id, message_id])),
        }
    }

    /// The id of adding an opinion on `topic` with `stance` from this message.
    pub fn adding(&self, topic: &str, stance: Stance) -> String {
        format!(
            "{}:add:{}",
            self.message,
            digest(&[&normalised_topic(topic), stance.as_str()])
        )
    }

    /// The id of this message's effect on preference `preference_id` (one per message and
    /// preference: a message is one piece of evidence).
    pub fn on_preference(&self, preference_id: &str) -> String {
        format!("{}:pref:{}", self.message, digest(&[preference_id]))
    }
}

/// A topic as the same opinion's topic would be worded again: case, spacing, hyphens,
/// surrounding punctuation, a leading article and plural endings do not matter
/// (`model::topic`, the normaliser the extractor's measurement uses too).
pub fn normalised_topic(topic: &str) -> String {
    crate::model::topic::normalised(topic)
}

/// Hex SHA-256 of the parts, each prefixed with its length, truncated to [`DIGEST_HEX`].
fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex.truncate(DIGEST_HEX);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_ids_name_what_was_applied() {
        let message = MessageEffects::of("discord", "general", "m1");
        // The same opinion worded with other case or spacing is the same effect.
        assert_eq!(
            message.adding("Green tea", Stance::For),
            message.adding("  green   TEA! ", Stance::For)
        );
        // Another topic, another stance, another message, another preference: another effect.
        let distinct = [
            message.adding("green tea", Stance::For),
            message.adding("green tea", Stance::Against),
            message.adding("coffee", Stance::For),
            MessageEffects::of("discord", "general", "m2").adding("green tea", Stance::For),
            message.on_preference("p1"),
            message.on_preference("p2"),
        ];
        for (i, a) in distinct.iter().enumerate() {
            for b in &distinct[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn effect_ids_are_unambiguous_and_bounded() {
        // A separator inside an id cannot make two messages one.
        assert_ne!(
            MessageEffects::of("c", "a:b", "m"),
            MessageEffects::of("c:a", "b", "m")
        );
        assert_ne!(
            MessageEffects::of("ab", "c", "m"),
            MessageEffects::of("a", "bc", "m")
        );
        // Ids of the largest allowed lengths make ids of the same fixed length.
        let long = "x".repeat(256);
        let message = MessageEffects::of(&long, &long, &long);
        for id in [
            message.adding(&"topic ".repeat(100), Stance::For),
            message.on_preference(&long),
        ] {
            assert!(id.len() <= EFFECT_ID_LEN, "{id}");
            assert!(id.len() <= super::super::validate::MAX_EFFECT_ID_CHARS);
        }
    }
}
