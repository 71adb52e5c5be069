//! Small text helpers every layer uses.

/// At most `max` characters (Unicode scalar values), never splitting one.
pub fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((byte_index, _)) => text[..byte_index].to_string(),
        None => text.to_string(),
    }
}
