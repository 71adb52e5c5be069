//! An instant read from RFC 3339 text once, at the boundary (an event's message timestamps,
//! JetStream's receive time), and compared as an instant from then on: no layer re-parses a
//! validated time from a string.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl Timestamp {
    pub fn now() -> Timestamp {
        Timestamp(OffsetDateTime::now_utc())
    }

    pub fn parse(text: &str) -> Result<Timestamp, time::error::Parse> {
        OffsetDateTime::parse(text, &Rfc3339).map(Timestamp)
    }

    pub fn instant(self) -> OffsetDateTime {
        self.0
    }

    /// The same instant in UTC: what the store keeps, so stored times compare as text too.
    pub fn to_utc(self) -> Timestamp {
        Timestamp(self.0.to_offset(time::UtcOffset::UTC))
    }

    /// RFC 3339, as stored in Redis (`stance_at`, history entries).
    pub fn to_rfc3339(self) -> String {
        // Formatting fails only for years outside 0..=9999, which parsing RFC 3339 cannot give.
        self.0
            .format(&Rfc3339)
            .unwrap_or_else(|_| self.0.unix_timestamp().to_string())
    }
}

impl From<OffsetDateTime> for Timestamp {
    fn from(instant: OffsetDateTime) -> Timestamp {
        Timestamp(instant)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(|error| {
            serde::de::Error::custom(format!("timestamp {text:?} is not RFC 3339: {error}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_compare_across_offsets_and_round_trip_as_rfc3339() {
        let utc: Timestamp = serde_json::from_str("\"2026-11-20T09:00:00Z\"").unwrap();
        let paris: Timestamp = serde_json::from_str("\"2026-11-20T10:00:01+01:00\"").unwrap();
        assert!(utc < paris, "an offset is honoured");
        assert_eq!(
            serde_json::to_string(&paris).unwrap(),
            "\"2026-11-20T10:00:01+01:00\""
        );
        let error = serde_json::from_str::<Timestamp>("\"yesterday\"").unwrap_err();
        assert!(
            error.to_string().contains("\"yesterday\" is not RFC 3339"),
            "{error}"
        );
    }
}
