//! Fixed phrases that carry a stance on their own, whatever the topic: "I have a soft spot for
//! X", "I could live without X", "I'm all for X", "X deserves more love", "X never appealed to
//! me", "X has so much charm", "nothing is more relaxing than X", "X is not for me", "X, not so
//! much". Each gives a topic (still raw: `make` cleans it) and a stance.

use super::engine::*;
use super::lexicon::polarity;
use crate::model::Stance;

/// The rule, topic (raw) and stance, when `clause` is one of the fixed phrases. `clause` is
/// normalised and stripped of leading filler. The rules of `data/phrases.toml` are tried in
/// their order there: most are read by the engine from their data alone
/// ([`Rule::read`]); the few marked `read_in_code` are read below.
pub(super) fn read_phrase(clause: &str) -> Option<(Rule, String, Stance)> {
    for rule in Rule::in_file("phrases.toml").filter(|rule| rule.def().kind == Kind::Reads) {
        let read = match rule.read(clause) {
            Some(read) => read,
            None => read_in_code(rule, clause),
        };
        match read {
            Read::Opinion(topic, stance) => return Some((rule, topic, stance)),
            Read::Nothing => continue,
            Read::Claimed => return None,
        }
    }
    None
}

/// The phrases whose reading needs more than their data says: a word list, the lexicon, a
/// rewritten clause.
fn read_in_code(rule: Rule, clause: &str) -> Read {
    let short = |subject: &str, words: usize| {
        let n = subject.split_whitespace().count();
        // "espresso over drip coffee, always" is a comparative, read elsewhere.
        let comparative = [" over ", " than ", " beats ", " rather "]
            .iter()
            .any(|w| subject.contains(w));
        (n >= 1 && n <= words && !comparative).then(|| subject.trim().to_string())
    };
    let opinion = |topic: String, against: bool| {
        Read::Opinion(
            topic,
            if against {
                Stance::Against
            } else {
                Stance::For
            },
        )
    };
    match rule {
        EXTRAPOSED => {
            let Some(c) = EXTRAPOSED.captures(clause) else {
                return Read::Nothing;
            };
            // "It's nice to meet you", "it's good to know": the conversation, not a verdict.
            const CONVERSATION: &[&str] = &[
                "meet", "hear", "know", "see", "talk", "chat", "be", "have", "say", "finally",
                "get", "think", "imagine",
            ];
            let rest = &c["topic"];
            let first = rest.split_whitespace().next().unwrap_or("");
            // "to be back", "to be here": the conversation; "to be lazy": a way of living.
            let second = rest.split_whitespace().nth(1).unwrap_or("");
            let conversation =
                CONVERSATION.contains(&first) && !(first == "be" && polarity(second).is_some());
            // "It is very friendly to my wallet": "to" leads a thing, not a doing.
            let not_a_doing = matches!(
                first,
                "my" | "your"
                    | "our"
                    | "his"
                    | "her"
                    | "their"
                    | "the"
                    | "a"
                    | "an"
                    | "me"
                    | "us"
                    | "you"
                    | "him"
                    | "them"
            );
            // "It is really fun to use": the doing's object is the "it", named earlier.
            const TAKES_AN_OBJECT: &[&str] = &[
                "use", "watch", "play", "eat", "read", "make", "drive", "wear", "handle", "cook",
                "ride", "drink", "build", "learn",
            ];
            let object_left_out = second.is_empty() && TAKES_AN_OBJECT.contains(&first);
            match polarity(&c["judgement"]) {
                Some(stance) if !conversation && !not_a_doing && !object_left_out => opinion(
                    rest.to_string(),
                    (stance == Stance::Against) ^ c.name("negation").is_some(),
                ),
                _ => Read::Nothing,
            }
        }
        I_IDIOM_AGAINST => {
            let Some(c) = I_IDIOM_AGAINST.captures(clause) else {
                return Read::Nothing;
            };
            let rest = &c["topic"];
            // "I'm over the moon", "I'm over here": not a dislike.
            const NOT_A_DISLIKE: &[&str] = &[
                "the moon", "here", "there", "at", "to", "in", "it", "that", "this",
            ];
            // "I'm over 18 years of age": an age, not a dislike.
            if rest.starts_with(|c: char| c.is_ascii_digit())
                || NOT_A_DISLIKE
                    .iter()
                    .any(|w| rest == *w || rest.starts_with(&format!("{w} ")))
            {
                return Read::Nothing;
            }
            opinion(rest.to_string(), true)
        }
        KIND_OF_PERSON => {
            // "I've never been a morning person" is "I'm never a morning person" here.
            let as_now = clause
                .replacen("i've never been ", "i'm never ", 1)
                .replacen("i have never been ", "i'm never ", 1)
                .replacen("i was never ", "i'm never ", 1)
                .replacen("i've always been ", "i'm always ", 1)
                .replacen("i have always been ", "i'm always ", 1);
            match KIND_OF_PERSON.captures(&as_now) {
                Some(c) if is_a_thing_not_a_trait(&c["topic"]) => {
                    opinion(c["topic"].to_string(), c.name("negation").is_some())
                }
                _ => Read::Nothing,
            }
        }
        CONSIDER => {
            let Some(c) = CONSIDER.captures(clause) else {
                return Read::Nothing;
            };
            let rest = &c["topic"];
            let read = |found: Option<(String, Stance)>| match found {
                Some((topic, stance)) => Read::Opinion(topic, stance),
                None => Read::Claimed,
            };
            if let Some((topic, judgement)) = rest.split_once(" as ") {
                return read(polarity(judgement).map(|stance| (topic.to_string(), stance)));
            }
            match &c["verb"] {
                // British "I rate X": a compliment, unless it is "I rate X poorly".
                "rate" => read(
                    (!rest.contains(" poorly") && !rest.contains(" low"))
                        .then(|| (rest.trim_end_matches(" highly").to_string(), Stance::For)),
                ),
                "consider" | "call" | "deem" => read(super::split_topic_judgement(rest)),
                _ => Read::Claimed,
            }
        }
        RATHER_NOT => match RATHER_NOT.captures(clause) {
            // "I'd rather not say", "I'd rather not get into it": declining to talk.
            Some(c)
                if !super::is_speech_act(&format!("to {}", &c["topic"]))
                    && ![
                        "talk", "discuss", "comment", "share", "get into", "answer", "go into",
                    ]
                    .iter()
                    .any(|act| c["topic"].starts_with(act)) =>
            {
                opinion(c["topic"].to_string(), true)
            }
            _ => Read::Nothing,
        },
        LEANING => {
            let Some(c) = LEANING.captures(clause) else {
                return Read::Nothing;
            };
            if let Some(object) = c.name("topic") {
                return opinion(object.as_str().to_string(), false);
            }
            // "I wish, writing is one of my passions": the subject follows the last comma.
            let subject = c["topic2"].rsplit(", ").next().unwrap_or(&c["topic2"]);
            match short(subject, 4) {
                Some(subject) => opinion(subject, false),
                None => Read::Nothing,
            }
        }
        VERDICT_AFTER_TOPIC => {
            let Some(c) = VERDICT_AFTER_TOPIC.captures(clause) else {
                return Read::Nothing;
            };
            let Some(subject) = short(&c["topic"], 4) else {
                return Read::Nothing;
            };
            // "I'll be there, always", "got rejected every time": a clause of its own, not a
            // topic (pronouns, verbs and words of conversation are the named-topic test's).
            let a_clause = subject
                .split_whitespace()
                .any(|w| w.contains('\'') || w == "be" || NOT_A_TOPIC_WORD.contains(&w));
            // "Ironic for sure", "true, always": agreement with a description, not a topic.
            let a_description =
                subject.split_whitespace().count() == 1 && is_a_description(&subject);
            // "but then running not so much": a turn of the talk, not a topic. (A topic led by
            // a preposition, "during the summer semester", no rule takes: `not_a_first_word`.)
            let a_circumstance = subject.split_whitespace().next() == Some("then");
            if a_clause || a_description || a_circumstance {
                return Read::Nothing;
            }
            opinion(subject, c.name("disliked").is_some())
        }
        // Every other reading rule of phrases.toml is read from its data (build.rs holds
        // that a rule without a reading in data says `read_in_code`; its examples, tested,
        // show it is read here).
        _ => Read::Nothing,
    }
}

/// "a beach person" names a liking; "a shy person" or "a patient person" describes the persona
/// and names no topic. Adjectives are told apart by the lexicon and by their endings.
fn is_a_thing_not_a_trait(words: &str) -> bool {
    const TRAITS: &[&str] = &[
        "shy",
        "private",
        "quiet",
        "patient",
        "curious",
        "simple",
        "early",
        "late",
        "lucky",
        "good",
        "nice",
        "kind",
        "real",
        "normal",
        "different",
        "busy",
        "old",
        "young",
        "people",
        "practical",
        "visual",
        "social",
        "creative",
        "sensitive",
        "logical",
        "emotional",
        "spiritual",
        "religious",
        "sporty",
        "outdoorsy",
        "indoorsy",
        "lazy",
        "tidy",
        "messy",
        "organised",
        "organized",
        "introverted",
        "extroverted",
        "open",
        "honest",
        "big-picture",
        "detail-oriented",
        "glass-half-full",
        "glass-half-empty",
        "hands-on",
        "certain",
        "better",
        "different",
        "regular",
        "typical",
        "total",
        "bigger",
        "smaller",
        // "I'm a huge fan": how big a fan, not of what.
        "big",
        "huge",
        "massive",
        "great",
        "true",
        "proper",
        "major",
        "die-hard",
        "diehard",
    ];
    let last = words.split_whitespace().last().unwrap_or(words);
    let adjective_ending = [
        "ous", "ive", "ful", "ish", "ic", "ical", "ent", "ant", "ble", "less",
    ]
    .iter()
    .any(|end| last.ends_with(end));
    !TRAITS.contains(&last) && !adjective_ending && polarity(last).is_none()
}

/// Whether one word describes rather than names: a judgement ("lovely"), a word of agreement
/// ("true", "ironic") or an adjective by its ending ("obvious", "hilarious", "excited").
fn is_a_description(word: &str) -> bool {
    polarity(word).is_some()
        || matches!(
            word,
            "true"
                | "false"
                | "right"
                | "wrong"
                | "same"
                | "real"
                | "crazy"
                | "funny"
                | "ironic"
                | "weird"
                | "scary"
                | "easy"
                | "hard"
                | "likely"
                | "possible"
                | "probably"
        )
        || ["ous", "ive", "ful", "able", "ible", "ical", "ed"]
            .iter()
            .any(|end| word.len() > 3 && word.ends_with(end))
}

/// The verdict a short reply gives to a topic just named as a question: "Sailing? Love it.",
/// "Horror movies? Not for me.", "Ramen at 2am? Perfection." `reply` is normalised, without
/// its final punctuation.
pub(super) fn verdict_on_named_topic(reply: &str) -> Option<Stance> {
    if let Some(c) = REPLY.captures(reply) {
        return Some(
            if ["disliked", "disliked2", "disliked3"]
                .iter()
                .any(|role| c.name(role).is_some())
            {
                Stance::Against
            } else {
                Stance::For
            },
        );
    }
    // "Seven hour drive? Wow.": surprise, not a verdict.
    if reply.split_whitespace().next().is_some_and(|w| {
        matches!(
            w.trim_matches(|c: char| !c.is_alphanumeric()),
            "wow" | "whoa" | "woah" | "omg" | "geez" | "jeez"
        )
    }) {
        return None;
    }
    // "Pure magic.", "Overrated.", "Total waste of time.": a bare judgement of a few words.
    (reply.split_whitespace().count() <= 4)
        .then(|| polarity(reply))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_phrases_give_their_topic_and_stance() {
        use Stance::{Against, For};
        let cases = [
            (
                "i have a soft spot for old cameras",
                Some(("old cameras", For)),
            ),
            ("i've got no time for gossip", Some(("gossip", Against))),
            (
                "i hold good manners in high esteem",
                Some(("good manners", For)),
            ),
            (
                "i regard astrology as nonsense",
                Some(("astrology", Against)),
            ),
            (
                "i could easily live without smartwatches",
                Some(("smartwatches", Against)),
            ),
            ("i can't live without coffee", Some(("coffee", For))),
            ("i'm all for four-day weeks", Some(("four-day weeks", For))),
            ("i'm not against spicy food", Some(("spicy food", For))),
            (
                "i'm against daylight saving",
                Some(("daylight saving", Against)),
            ),
            (
                "nothing is more annoying than a dripping tap",
                Some(("a dripping tap", Against)),
            ),
            (
                "there's nothing i love more than a long bath",
                Some(("a long bath", For)),
            ),
            (
                "jazz fusion is just not for me",
                Some(("jazz fusion", Against)),
            ),
            ("rom-coms, not so much", Some(("rom-coms", Against))),
            (
                "local bakeries deserve more love",
                Some(("local bakeries", For)),
            ),
            ("old trams have so much charm", Some(("old trams", For))),
            (
                "chain restaurants have no soul",
                Some(("chain restaurants", Against)),
            ),
            (
                "team sports never appealed to me",
                Some(("team sports", Against)),
            ),
            ("bad puns cheer me up", Some(("bad puns", For))),
            ("autotune ruins good voices", Some(("autotune", Against))),
            ("i'd love to help", None),
            ("i'll be there, always", None),
            ("you are right, absolutely", None),
            ("the meeting has a new agenda", None),
            ("i see what you mean", None),
        ];
        for (clause, expected) in cases {
            let found = read_phrase(clause);
            assert_eq!(
                found.as_ref().map(|(_, t, s)| (t.as_str(), *s)),
                expected,
                "{clause:?}"
            );
        }
    }

    #[test]
    fn a_short_reply_judges_the_topic_named_before_it() {
        use Stance::{Against, For};
        let cases = [
            ("love it", Some(For)),
            ("honestly, i adore them", Some(For)),
            ("not for me, thanks", Some(Against)),
            ("hard pass", Some(Against)),
            ("pure magic", Some(For)),
            ("total waste of time", Some(Against)),
            ("it depends on the day", None),
            ("i went there last year with my cousin", None),
        ];
        for (reply, expected) in cases {
            assert_eq!(verdict_on_named_topic(reply), expected, "{reply:?}");
        }
    }
}
