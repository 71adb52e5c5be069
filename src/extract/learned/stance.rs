//! The stance the words around a tagged span give it. The reader tags a topic and its stance
//! together, and it reads most views as held for: four in five of the labelled opinions are.
//! A denied liking ("I am not that big of a fan of American football"), the least of a
//! favourite ("my least favorite would have to be peaches") or the one thing excepted from a
//! liking ("I like everything except for country") it tagged for on the fifth chat tuning
//! set, which it never trained on; each such find counts twice, a wrong find and a miss.
//! These cues are plain words the rules read too, so where one stands beside the span the
//! stance is against whatever the head tagged. Measured with `rules_then_learned`: on the
//! fifth chat set, whose finds they were written from, six wrong finds became right and no
//! right one changed; on the development set no find changed (the long tail again).

use crate::model::Stance;

/// Words that deny a liking when one of [`LIKINGS`] follows them before the span.
const NEGATORS: &[&str] = &[
    "not", "never", "don't", "dont", "doesn't", "didn't", "isn't", "aren't", "wasn't", "can't",
    "cant", "won't",
];

/// Words that may stand between a negator and the liking it denies without starting another
/// clause: "not (that big of a) fan", "don't (really) like"; "don't know why I like" is not
/// denied.
const BETWEEN: &[&str] = &[
    "really",
    "that",
    "very",
    "so",
    "a",
    "an",
    "the",
    "big",
    "huge",
    "massive",
    "particularly",
    "exactly",
    "actually",
    "of",
    "too",
    "all",
    "ever",
    "even",
    "much",
    "super",
    "such",
    "been",
    "be",
    "honestly",
    "truly",
    "quite",
    "as",
    "personally",
    "always",
    "usually",
    "generally",
    "totally",
    "entirely",
    "completely",
    "my",
];

/// Words of liking a negator can deny: "not a fan of", "not into", "don't like".
const LIKINGS: &[&str] = &[
    "fan",
    "into",
    "like",
    "love",
    "enjoy",
    "keen",
    "fond",
    "favorite",
    "favourite",
    "care",
    "liking",
    "loving",
];

/// Words of a fault named before or after the topic: "the biggest disappointment … was X",
/// "X are my biggest qualms".
const FAULTS: &[&str] = &[
    "disappointment",
    "disappointments",
    "qualm",
    "qualms",
    "peeve",
    "worst",
];

/// "least" is a fault only before a liking: "my least favorite", not "at least".
fn least_liked(words: &[&str]) -> bool {
    words
        .windows(2)
        .any(|pair| pair[0] == "least" && (pair[1] == "liked" || LIKINGS.contains(&pair[1])))
}

/// How far, in words, a cue may stand before the span.
const REACH: usize = 8;

/// The stance the words around `span` (a byte range of `text`, a message or one of its
/// sentences) give it: against where a denied liking, a fault or an exception from a liking
/// stands beside it; `None` where no cue does (the head's stance stands). Only the clause the
/// span is in is read: in "I love the beach, but I don't like sand" a cue after "but" says
/// nothing of the beach.
pub fn cued_stance(text: &str, span: std::ops::Range<usize>) -> Option<Stance> {
    let lower = text.to_ascii_lowercase();
    let (start, end) = (span.start.min(lower.len()), span.end.min(lower.len()));
    let (Some(before), Some(after)) = (lower.get(..start), lower.get(end..)) else {
        return None;
    };
    let before = clause_tail(before);
    let after = clause_head(after);
    let before_words = words(before);
    let after_words: Vec<&str> = words(after).into_iter().take(5).collect();
    let near: Vec<&str> = before_words
        .iter()
        .rev()
        .take(REACH)
        .rev()
        .copied()
        .collect();
    // "not that big of a fan of X", "not into X", "don't really like X".
    let denied_liking = near.iter().enumerate().any(|(at, w)| {
        (NEGATORS.contains(w) || w.ends_with("n't"))
            && near[at + 1..]
                .iter()
                .position(|w| LIKINGS.contains(w))
                .is_some_and(|liking| {
                    near[at + 1..at + 1 + liking]
                        .iter()
                        .all(|w| BETWEEN.contains(w))
                })
    });
    // "my least favorite would have to be X", "the biggest disappointment … was X".
    let fault_before =
        before_words.iter().any(|w| FAULTS.contains(w)) || least_liked(&before_words);
    // "X is my least favorite", "X are my biggest qualms", "X isn't my favorite".
    let fault_after = after_words.iter().any(|w| FAULTS.contains(w))
        || least_liked(&after_words)
        || (after_words
            .iter()
            .take(2)
            .any(|w| matches!(*w, "isn't" | "aren't" | "wasn't" | "not"))
            && after_words
                .iter()
                .any(|w| matches!(*w, "favorite" | "favourite" | "thing")));
    // "I like everything except for X": the one thing a liking leaves out.
    let excepted = near
        .iter()
        .rev()
        .take(3)
        .any(|w| matches!(*w, "except" | "besides"))
        && before_words.iter().any(|w| LIKINGS.contains(w));
    (denied_liking || fault_before || fault_after || excepted).then_some(Stance::Against)
}

/// The part of `before` in the span's own clause: after the last "but", "though", ";" or
/// sentence end.
fn clause_tail(before: &str) -> &str {
    [" but ", ";", " though ", " although ", ". ", "! ", "? "]
        .iter()
        .filter_map(|cut| before.rfind(cut).map(|at| at + cut.len()))
        .max()
        .map_or(before, |at| &before[at..])
}

/// The part of `after` in the span's own clause: up to the first "but", "though", ";" or
/// sentence end.
fn clause_head(after: &str) -> &str {
    [" but ", ";", " though ", " although ", ". ", "! "]
        .iter()
        .filter_map(|cut| after.find(cut))
        .min()
        .map_or(after, |at| &after[..at])
}

fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stance_of(sentence: &str, topic: &str) -> Option<Stance> {
        let at = sentence.find(topic).expect("the topic is in the sentence");
        cued_stance(sentence, at..at + topic.len())
    }

    #[test]
    fn a_denied_liking_an_exception_or_a_fault_beside_the_span_reads_against() {
        let cases = [
            // Against: a cue beside the span.
            (
                "I am actually not that big of a fan of American football.",
                "American football",
                Some(Stance::Against),
            ),
            (
                "see im not that into snow and utah has some of the nicest snow",
                "snow",
                Some(Stance::Against),
            ),
            (
                "I don't really like olives",
                "olives",
                Some(Stance::Against),
            ),
            (
                "Kiwi is my favorite and my least favorite would have to be peaches",
                "peaches",
                Some(Stance::Against),
            ),
            (
                "I honestly like everything except for country and rock metal",
                "country",
                Some(Stance::Against),
            ),
            (
                "The biggest disappointment I've had with movies was Percy Jackson.",
                "Percy Jackson",
                Some(Stance::Against),
            ),
            (
                "I think grades are my biggest qualms about college",
                "grades",
                Some(Stance::Against),
            ),
            (
                "soccer isn't my favorite sport to watch",
                "soccer",
                Some(Stance::Against),
            ),
            // No cue: the head's stance stands.
            ("I love hiking in the fall", "hiking", None),
            (
                "Kiwi and watermelon always will be my favorite",
                "watermelon",
                None,
            ),
            ("I don't know much about it, but I love jazz", "jazz", None),
            (
                "I never thought I would say it but sushi is great",
                "sushi",
                None,
            ),
            ("No way, I really like choco chip", "choco chip", None),
            ("I love the beach, but I don't like sand", "beach", None),
            ("I don't know why I like pickles so much", "pickles", None),
            ("At least the pizza was good", "pizza", None),
        ];
        for (sentence, topic, expected) in cases {
            assert_eq!(
                stance_of(sentence, topic),
                expected,
                "{sentence:?} / {topic:?}"
            );
        }
    }
}
