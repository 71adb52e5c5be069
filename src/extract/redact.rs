//! Secret redaction before anything is stored: API keys, tokens, passwords, emails, phone
//! numbers and card numbers become `[redacted]`. A persona repeating a user's secret must not
//! turn it into a durable "opinion".

use std::sync::LazyLock;

use regex::Regex;

pub const MARK: &str = "[redacted]";

static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // Provider API keys and tokens with well-known shapes.
        r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}",
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
        r"\bAKIA[0-9A-Z]{16}\b",
        r"\bAIza[0-9A-Za-z_\-]{30,}",
        // JSON web tokens.
        r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        // "password: hunter2", "api key is abc123", "token=…".
        r"(?i)\b(?:password|passwd|passphrase|pwd|api[ _-]?key|secret|token|pin)\b\s*(?:is|:|=)\s*\S+",
        // Bearer credentials.
        r"(?i)\bbearer\s+[A-Za-z0-9_\-\.=]{12,}",
        // Emails.
        r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b",
        // Card-like digit runs (13–19 digits, optional separators).
        r"\b(?:\d[ \-]?){13,19}\b",
        // Phone numbers: optional +country, 9+ digits with common separators.
        r"(?:\+\d{1,3}[ \-.]?)?(?:\(\d{2,4}\)[ \-.]?)?\d{2,4}[ \-.]\d{3,4}[ \-.]\d{3,4}\b",
        // Long opaque tokens (hex or base64-ish, 32+ chars with digits in them).
        r"\b(?:[A-Fa-f0-9]{32,}|[A-Za-z0-9+/_\-]*\d[A-Za-z0-9+/_\-]*[A-Za-z][A-Za-z0-9+/_\-]{30,})\b",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("redaction pattern compiles"))
    .collect()
});

/// The text with every secret replaced, and the share of the original characters redacted.
pub fn redact(text: &str) -> (String, f64) {
    let original = text.chars().count().max(1);
    let mut redacted = text.to_string();
    let mut removed = 0usize;
    for pattern in PATTERNS.iter() {
        let mut next = String::with_capacity(redacted.len());
        let mut last = 0;
        for found in pattern.find_iter(&redacted) {
            next.push_str(&redacted[last..found.start()]);
            if found.as_str() != MARK {
                removed += found.as_str().chars().count();
            }
            next.push_str(MARK);
            last = found.end();
        }
        next.push_str(&redacted[last..]);
        redacted = next;
    }
    (redacted, (removed as f64 / original as f64).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_plain_opinions_are_not() {
        let cases = [
            ("I love rainy days.", "I love rainy days.", 0.0),
            (
                "My key is sk-abcdefghijklmnopqrstuvwx and I like it",
                "My key is [redacted] and I like it",
                -1.0,
            ),
            (
                "I think password: hunter2 is a bad password",
                "I think [redacted] is a bad password",
                -1.0,
            ),
            (
                "Write to ada@example.com, I love mail",
                "Write to [redacted], I love mail",
                -1.0,
            ),
            (
                "Call +1 415-555-0100 anytime",
                "Call [redacted] anytime",
                -1.0,
            ),
            (
                "token ghp_abcdefghijklmnopqrstuvwxyz0123",
                "token [redacted]",
                -1.0,
            ),
        ];
        for (input, expected, share) in cases {
            let (output, redacted_share) = redact(input);
            assert_eq!(output, expected, "{input}");
            if share == 0.0 {
                assert_eq!(redacted_share, 0.0);
            } else {
                assert!(redacted_share > 0.0);
            }
        }
    }

    #[test]
    fn a_mostly_secret_text_reports_a_high_share() {
        let (_, share) = redact("sk-abcdefghijklmnopqrstuvwxyz012345");
        assert!(share > 0.9, "{share}");
    }
}
