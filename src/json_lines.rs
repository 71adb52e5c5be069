//! JSON lines, as the labelled sets (topic pairs, extraction utterances) and operators' own
//! sets are written: one value a line, blank lines skipped.

use serde::de::DeserializeOwned;

/// Every line's value; a bad line is named by its number (from 1).
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|error| format!("line {}: {error}", n + 1))
        })
        .collect()
}
