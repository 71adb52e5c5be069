//! Fixed phrases that carry a stance on their own, whatever the topic: "I have a soft spot for
//! X", "I could live without X", "I'm all for X", "X deserves more love", "X never appealed to
//! me", "X has so much charm", "nothing is more relaxing than X", "X is not for me", "X, not so
//! much". Each gives a topic (still raw: `make` cleans it) and a stance.

use super::engine::*;
use super::lexicon::polarity;
use crate::model::Stance;

/// The rule, topic (raw) and stance, when `clause` is one of the fixed phrases. `clause` is normalised
/// and stripped of leading filler.
pub(super) fn read_phrase(clause: &str) -> Option<(Rule, String, Stance)> {
    let short = |subject: &str, words: usize| {
        let n = subject.split_whitespace().count();
        // "espresso over drip coffee, always" is a comparative, read elsewhere.
        let comparative = [" over ", " than ", " beats ", " rather "]
            .iter()
            .any(|w| subject.contains(w));
        (n >= 1 && n <= words && !comparative).then(|| subject.trim().to_string())
    };
    let stance_if = |against: bool| {
        if against {
            Stance::Against
        } else {
            Stance::For
        }
    };
    if let Some(c) = HAVE_NO_TIME_FOR.captures(clause) {
        return Some((HAVE_NO_TIME_FOR, c[1].to_string(), Stance::Against));
    }
    if let Some(c) = IDIOM_AFTER_COPULA.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((IDIOM_AFTER_COPULA, subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = SLANG_VERDICT.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((SLANG_VERDICT, subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = BEST_THING_ABOUT.captures(clause) {
        let against = c.get(2).is_some() || c.get(4).is_some() || clause.starts_with("my least");
        return Some((BEST_THING_ABOUT, c[5].to_string(), stance_if(against)));
    }
    if let Some(c) = VALUE_TO_ME.captures(clause)
        // "fairness matters to me more than winning" is a comparative, read elsewhere.
        && !clause.contains(" more than ")
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((VALUE_TO_ME, subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = STAND.captures(clause) {
        return Some((STAND, c[3].to_string(), stance_if(c.get(2).is_some())));
    }
    if let Some(c) = MORE_OF_IT.captures(clause) {
        let less = matches!(
            c.get(1).or(c.get(3)).map(|m| m.as_str()),
            Some("less" | "fewer")
        );
        return Some((
            MORE_OF_IT,
            c[4].to_string(),
            stance_if(less || c.get(2).is_some()),
        ));
    }
    if let Some((rule, c)) = NEVER_OKAY
        .captures(clause)
        .map(|c| (NEVER_OKAY, c))
        .or_else(|| ROOT_OF.captures(clause).map(|c| (ROOT_OF, c)))
        && let Some(subject) = short(&c[1], 6)
    {
        return Some((rule, subject, Stance::Against));
    }
    if let Some(c) = GLAD_WE_HAVE.captures(clause) {
        return Some((GLAD_WE_HAVE, c[1].to_string(), Stance::For));
    }
    if let Some(c) = NOT_FAVOURITE.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((NOT_FAVOURITE, subject, Stance::Against));
    }
    if let Some(c) = WHAT_SUCKS_ABOUT.captures(clause) {
        return Some((
            WHAT_SUCKS_ABOUT,
            c[3].to_string(),
            stance_if(c.get(1).is_some()),
        ));
    }
    if let Some(c) = REMINDS_ME_HOW.captures(clause)
        && let Some(stance) = polarity(&c[1])
    {
        return Some((REMINDS_ME_HOW, c[2].to_string(), stance));
    }
    if let Some(c) = EXTRAPOSED.captures(clause) {
        // "It's nice to meet you", "it's good to know": the conversation, not a verdict.
        const CONVERSATION: &[&str] = &[
            "meet", "hear", "know", "see", "talk", "chat", "be", "have", "say", "finally", "get",
            "think", "imagine",
        ];
        let rest = &c[3];
        let first = rest.split_whitespace().next().unwrap_or("");
        // "to be back", "to be here": the conversation; "to be lazy": a way of living.
        let second = rest.split_whitespace().nth(1).unwrap_or("");
        let conversation =
            CONVERSATION.contains(&first) && !(first == "be" && polarity(second).is_some());
        if !conversation && let Some(stance) = polarity(&c[2]) {
            return Some((
                EXTRAPOSED,
                rest.to_string(),
                stance_if((stance == Stance::Against) ^ c.get(1).is_some()),
            ));
        }
    }
    if let Some(c) = LACKS.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((LACKS, subject, Stance::Against));
    }
    if let Some(c) = NOT_WORTH.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((NOT_WORTH, subject, Stance::Against));
    }
    if let Some(c) = NOT_EVERYTHING.captures(clause)
        && let Some(subject) = short(c.get(1).or(c.get(2)).map_or("", |m| m.as_str()), 5)
    {
        return Some((NOT_EVERYTHING, subject, Stance::Against));
    }
    if let Some(c) = I_IDIOM_FOR.captures(clause) {
        let rest = &c[1];
        // "I look forward to hearing from you": the conversation, not a liking.
        const CONVERSATION: &[&str] = &[
            "hearing", "seeing", "meeting", "talking", "chatting", "speaking", "working",
            "helping", "your", "our", "it", "you", "that", "this",
        ];
        if !CONVERSATION
            .iter()
            .any(|w| rest.split_whitespace().next() == Some(*w))
        {
            return Some((I_IDIOM_FOR, rest.to_string(), Stance::For));
        }
    }
    if let Some(c) = I_IDIOM_AGAINST.captures(clause) {
        let rest = &c[1];
        // "I'm over the moon", "I'm over here": not a dislike.
        const NOT_A_DISLIKE: &[&str] = &[
            "the moon", "here", "there", "at", "to", "in", "it", "that", "this",
        ];
        // "I'm over 18 years of age": an age, not a dislike.
        if !rest.starts_with(|c: char| c.is_ascii_digit())
            && !NOT_A_DISLIKE
                .iter()
                .any(|w| rest == *w || rest.starts_with(&format!("{w} ")))
        {
            return Some((I_IDIOM_AGAINST, rest.to_string(), Stance::Against));
        }
    }
    if let Some(c) = NOTHING_BETTER.captures(clause) {
        return Some((NOTHING_BETTER, c[1].to_string(), Stance::For));
    }
    if let Some(c) = VERDICT_FROM_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((VERDICT_FROM_ME, subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = NEVER_FAILS.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((NEVER_FAILS, subject, stance_if(c.get(2).is_none())));
    }
    if let Some(c) = COULD_HAVE_FOREVER.captures(clause) {
        return Some((COULD_HAVE_FOREVER, c[1].to_string(), Stance::For));
    }
    if let Some(c) = NEVER_GIVE_UP.captures(clause)
        && !c[1].starts_with("on ")
        && !c[1].starts_with("hope")
    {
        return Some((NEVER_GIVE_UP, c[1].to_string(), Stance::For));
    }
    // "I've never been a morning person" is "I'm never a morning person" here.
    let as_now = clause
        .replacen("i've never been ", "i'm never ", 1)
        .replacen("i have never been ", "i'm never ", 1)
        .replacen("i was never ", "i'm never ", 1)
        .replacen("i've always been ", "i'm always ", 1)
        .replacen("i have always been ", "i'm always ", 1);
    if let Some(c) = KIND_OF_PERSON.captures(&as_now)
        && is_a_thing_not_a_trait(&c[2])
    {
        return Some((
            KIND_OF_PERSON,
            c[2].to_string(),
            stance_if(c.get(1).is_some()),
        ));
    }
    if let Some(c) = TOO_MUCH_FOR_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((TOO_MUCH_FOR_ME, subject, Stance::Against));
    }
    if let Some(c) = HAVE_A_LIKING_FOR.captures(clause) {
        return Some((HAVE_A_LIKING_FOR, c[1].to_string(), Stance::For));
    }
    if let Some(c) = HOLD_IN.captures(clause) {
        let low = matches!(&c[2], "low" | "lowest" | "contempt");
        return Some((HOLD_IN, c[1].to_string(), stance_if(low)));
    }
    if let Some(c) = CONSIDER.captures(clause) {
        let rest = &c[2];
        if let Some((topic, judgement)) = rest.split_once(" as ") {
            return Some((CONSIDER, topic.to_string(), polarity(judgement)?));
        }
        if !matches!(&c[1], "consider" | "call" | "deem" | "rate") {
            return None;
        }
        if &c[1] == "rate" {
            // British "I rate X": a compliment, unless it is "I rate X poorly".
            return (!rest.contains(" poorly") && !rest.contains(" low")).then(|| {
                (
                    CONSIDER,
                    rest.trim_end_matches(" highly").to_string(),
                    Stance::For,
                )
            });
        }
        return super::split_topic_judgement(rest).map(|(topic, stance)| (CONSIDER, topic, stance));
    }
    if let Some(c) = LIVE_WITHOUT.captures(clause) {
        return Some((
            LIVE_WITHOUT,
            c[3].to_string(),
            stance_if(c.get(1).is_some()),
        ));
    }
    if let Some(c) = POSITION.captures(clause) {
        let against = c.get(3).is_some() ^ c.get(1).is_some();
        return Some((POSITION, c[4].to_string(), stance_if(against)));
    }
    if let Some(c) = NOTHING_I_LOVE_MORE.captures(clause) {
        let against = matches!(
            &c[1],
            "hate"
                | "dislike"
                | "dread"
                | "despise"
                | "loathe"
                | "detest"
                | "fear"
                | "resent"
                | "can't stand"
        );
        return Some((NOTHING_I_LOVE_MORE, c[2].to_string(), stance_if(against)));
    }
    if let Some(c) = STRIKES_ME_AS.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((STRIKES_ME_AS, subject, polarity(&c[2])?));
    }
    if let Some(c) = RATHER_NOT.captures(clause)
        // "I'd rather not say", "I'd rather not get into it": declining to talk.
        && !super::is_speech_act(&format!("to {}", &c[1]))
        && !["talk", "discuss", "comment", "share", "get into", "answer", "go into"]
            .iter()
            .any(|act| c[1].starts_with(act))
    {
        return Some((RATHER_NOT, c[1].to_string(), Stance::Against));
    }
    if let Some(c) = MATTERS_TO_ME.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((MATTERS_TO_ME, subject, Stance::For));
    }
    if let Some(c) = LEANING.captures(clause) {
        if let Some(object) = c.get(1) {
            return Some((LEANING, object.as_str().to_string(), Stance::For));
        }
        // "I wish, writing is one of my passions": the subject follows the last comma.
        let subject = c[2].rsplit(", ").next().unwrap_or(&c[2]);
        if let Some(subject) = short(subject, 4) {
            return Some((LEANING, subject, Stance::For));
        }
    }
    if let Some(c) = SOMETHING_ABOUT.captures(clause) {
        return Some((SOMETHING_ABOUT, c[2].to_string(), polarity(&c[1])?));
    }
    if let Some(c) = IDIOM_OF_CHOICE.captures(clause) {
        for (group, stance) in [
            ("refused", Stance::Against),
            ("shunned", Stance::Against),
            ("endless", Stance::Against),
            ("awaited", Stance::For),
            ("goto", Stance::For),
        ] {
            if let Some(topic) = c.name(group) {
                return Some((IDIOM_OF_CHOICE, topic.as_str().to_string(), stance));
            }
        }
    }
    if let Some(c) = RECOMMEND.captures(clause)
        // "I'd recommend you try the soup", "I recommend that you go": advice, not a liking.
        && !c[1].starts_with("you")
        && !c[1].starts_with("that ")
        && !c[1].starts_with("it")
    {
        return Some((RECOMMEND, c[1].to_string(), Stance::For));
    }
    if let Some(c) = NEVER_TIRE_OF.captures(clause) {
        let topic = c.get(1).or_else(|| c.get(2))?;
        return Some((NEVER_TIRE_OF, topic.as_str().to_string(), Stance::For));
    }
    if let Some(c) = NOTHING_IS_MORE.captures(clause) {
        return Some((NOTHING_IS_MORE, c[2].to_string(), polarity(&c[1])?));
    }
    if let Some(c) = NOT_FOR_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((NOT_FOR_ME, subject, Stance::Against));
    }
    if let Some(c) = VERDICT_AFTER_TOPIC.captures(clause)
        && let Some(subject) = short(&c[1], 4)
        // "I'll be there, always", "got rejected every time": a clause of its own, not a
        // topic (pronouns, verbs and words of conversation are the named-topic test's).
        && !subject
            .split_whitespace()
            .any(|w| w.contains('\'') || w == "be" || super::NOT_A_TOPIC_WORD.contains(&w))
        // "Ironic for sure", "true, always": agreement with a description, not a topic.
        && !(subject.split_whitespace().count() == 1 && is_a_description(&subject))
    {
        return Some((VERDICT_AFTER_TOPIC, subject, stance_if(c.get(2).is_some())));
    }
    if let Some(c) = DESERVES.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((DESERVES, subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = HAS_QUALITY.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((HAS_QUALITY, subject, stance_if(c.get(2).is_some())));
    }
    if let Some(c) = DOES_TO_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((DOES_TO_ME, subject, stance_if(c.get(2).is_some())));
    }
    if let Some(c) = RUINS.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((RUINS, subject, Stance::Against));
    }
    None
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
            if c.get(2).is_some() || c.get(3).is_some() || c.get(5).is_some() {
                Stance::Against
            } else {
                Stance::For
            },
        );
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
