//! Input limits, enforced at the store boundary so every entry point (ingest, serve, CLI)
//! gets the same rules and the same error messages.

use super::error::StoreError;
use super::record::Provenance;

/// Persona ids become NATS subject tokens and key segments: `[A-Za-z0-9_-]`, 1..=64 chars.
pub const MAX_PERSONA_ID_CHARS: usize = 64;
/// Preference ids are minted by the store (32 hex chars); older data may differ, so allow a
/// little room with the same character set as persona ids.
pub const MAX_PREFERENCE_ID_CHARS: usize = 64;
/// User, message and channel ids come from chat platforms: any printable text up to this.
pub const MAX_EXTERNAL_ID_CHARS: usize = 256;
/// Idempotency ids are built from message ids plus a suffix.
pub const MAX_EFFECT_ID_CHARS: usize = 512;
/// FT.SEARCH returns at most 10 000 results by default (MAXSEARCHRESULTS).
pub const MAX_LIST_LIMIT: usize = 10_000;

pub fn persona_id(value: &str) -> Result<(), StoreError> {
    simple_id("persona_id", value, MAX_PERSONA_ID_CHARS)
}

pub fn preference_id(value: &str) -> Result<(), StoreError> {
    simple_id("preference_id", value, MAX_PREFERENCE_ID_CHARS)
}

fn simple_id(field: &'static str, value: &str, max: usize) -> Result<(), StoreError> {
    if value.is_empty() {
        return Err(StoreError::invalid(field, "is empty"));
    }
    if value.len() > max {
        return Err(StoreError::invalid(
            field,
            format!("is {} chars, the limit is {max}", value.chars().count()),
        ));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(StoreError::invalid(
            field,
            format!("contains {bad:?}; allowed are A-Z a-z 0-9 _ -"),
        ));
    }
    Ok(())
}

/// A user id: non-empty, at most 256 chars, no control characters, no `,` (the TAG separator
/// of `related_user_ids_index`: a comma would split one id into two in the index).
pub fn user_id(field: &'static str, value: &str) -> Result<(), StoreError> {
    if value.is_empty() {
        return Err(StoreError::invalid(field, "contains an empty id"));
    }
    external_text(field, value)?;
    if value.contains(',') {
        return Err(StoreError::invalid(
            field,
            format!("{value:?} contains ',', which ids may not"),
        ));
    }
    Ok(())
}

/// A knowledge-graph id or similar: non-empty printable text within the id limit.
pub fn short_id(field: &'static str, value: &str) -> Result<(), StoreError> {
    if value.is_empty() {
        return Err(StoreError::invalid(field, "contains an empty id"));
    }
    external_text(field, value)
}

/// Optional platform text (message ids, channel ids): may be empty.
pub fn external_text(field: &'static str, value: &str) -> Result<(), StoreError> {
    let chars = value.chars().count();
    if chars > MAX_EXTERNAL_ID_CHARS {
        return Err(StoreError::invalid(
            field,
            format!("is {chars} chars, the limit is {MAX_EXTERNAL_ID_CHARS}"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(StoreError::invalid(field, "contains control characters"));
    }
    Ok(())
}

pub fn related_ids(
    field: &'static str,
    values: &[String],
    max_count: usize,
    check: fn(&'static str, &str) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    if values.len() > max_count {
        return Err(StoreError::invalid(
            field,
            format!("has {} ids, the limit is {max_count}", values.len()),
        ));
    }
    values.iter().try_for_each(|value| check(field, value))
}

pub fn provenance(provenance: &Provenance) -> Result<(), StoreError> {
    external_text("triggering_user_id", &provenance.triggering_user_id)?;
    external_text("triggering_message_id", &provenance.triggering_message_id)?;
    external_text("persona_message_id", &provenance.persona_message_id)?;
    external_text("source_platform", &provenance.source_platform)?;
    external_text("source_channel_id", &provenance.source_channel_id)
}

pub fn effect_id(value: &str) -> Result<(), StoreError> {
    if value.is_empty() || value.len() > MAX_EFFECT_ID_CHARS {
        return Err(StoreError::invalid(
            "effect_id",
            format!("must be 1..={MAX_EFFECT_ID_CHARS} bytes"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(StoreError::invalid(
            "effect_id",
            "contains control characters",
        ));
    }
    Ok(())
}

/// The vector must have exactly the index's dimensions and only finite values.
pub fn embedding(vector: &[f32], dims: usize) -> Result<(), StoreError> {
    if vector.len() != dims {
        return Err(StoreError::invalid(
            "embedding",
            format!("has {} dimensions, the index has {dims}", vector.len()),
        ));
    }
    if vector.iter().any(|v| !v.is_finite()) {
        return Err(StoreError::invalid(
            "embedding",
            "contains NaN or infinite values",
        ));
    }
    Ok(())
}

pub fn top_k(value: usize, max: usize) -> Result<usize, StoreError> {
    if value == 0 || value > max {
        return Err(StoreError::invalid(
            "top_k",
            format!("must be within 1..={max}, got {value}"),
        ));
    }
    Ok(value)
}

pub use crate::text::truncate_chars;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("🐈🐈🐈", 2), "🐈🐈");
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(truncate_chars("", 3), "");
    }

    #[test]
    fn persona_ids_are_subject_safe() {
        for good in ["stargazer", "persona_1", "a-b"] {
            assert!(persona_id(good).is_ok(), "{good}");
        }
        for bad in ["", "a.b", "a b", "a*", "a>", "a:b", "é", &"x".repeat(65)] {
            assert!(persona_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn user_ids_reject_separator_and_control_chars() {
        assert!(user_id("u", "u-1}|@persona_id:{other").is_ok());
        assert!(user_id("u", "a,b").is_err());
        assert!(user_id("u", "a\nb").is_err());
        assert!(user_id("u", "").is_err());
        assert!(user_id("u", &"x".repeat(257)).is_err());
    }

    #[test]
    fn embeddings_must_match_dims_and_be_finite() {
        assert!(embedding(&[0.0; 4], 4).is_ok());
        assert!(embedding(&[0.0; 3], 4).is_err());
        assert!(embedding(&[0.0, f32::NAN, 0.0, 0.0], 4).is_err());
    }
}
