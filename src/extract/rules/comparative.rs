//! The comparatives: "X over Y", "I prefer X to Y", "X is warmer than Y", "team X": the
//! preferred side `for`, the other `against`.

use super::*;

/// The comparatives: (preferred `for`, other `against`); a pronoun side is left out.
pub(super) fn comparative(clause: &str, sentence: &str) -> Option<Vec<ExtractedOpinion>> {
    let pair = |rule: Rule, preferred: &str, other: &str, flipped: bool| {
        let (winner, loser) = if flipped {
            (other, preferred)
        } else {
            (preferred, other)
        };
        let mut out = Vec::new();
        if let Some(o) = make(rule, winner, Stance::For, sentence, clause) {
            out.push(o);
        }
        // "which is better than other ghosts": a relative pronoun wins nothing, so nothing
        // loses to it. ("I prefer it over coffee" still sets coffee against.)
        let relative = winner.split_whitespace().any(|word| {
            matches!(
                Some(word),
                Some(
                    "which"
                        | "that"
                        | "what"
                        | "who"
                        | "this"
                        | "these"
                        | "those"
                        | "he"
                        | "she"
                        | "they"
                        | "him"
                        | "her"
                        | "them"
                        // "some are better than others": no one thing wins.
                        | "some"
                        | "others"
                        | "many"
                        | "most"
                        | "none"
                        | "all"
                        | "both"
                        | "mine"
                        | "yours"
                )
            )
        });
        if !relative && let Some(o) = make(rule, loser, Stance::Against, sentence, clause) {
            out.push(o);
        }
        out
    };
    let short = |text: &str, words: usize| {
        let n = text.split_whitespace().count();
        n >= 1 && n <= words
    };
    // "rainy days over sunny ones": the other side names the same kind of thing.
    let other_side = |preferred: &str, other: &str| -> String {
        let other = match TOPIC_CUT.find(other) {
            Some(cut) => &other[..cut.start()],
            None => other,
        };
        // "sourdough beats white bread for toast": what it is better for is not the topic.
        let other = other.split(" for ").next().unwrap_or(other).trim();
        match (
            other
                .strip_suffix(" ones")
                .or_else(|| other.strip_suffix(" one")),
            preferred.split_whitespace().last(),
        ) {
            (Some(head), Some(noun)) => format!("{head} {noun}"),
            _ => other.to_string(),
        }
    };
    if let Some(c) = PREFER_OVER.captures(clause)
        // "I prefer in person because it pushes me to express things": the "to" belongs to a
        // later clause.
        && !c["topic"].split_whitespace().any(|w| {
            matches!(
                w,
                "because" | "since" | "when" | "while" | "if" | "but" | "be" | "it'll" | "me" | "us"
            )
        })
        // "I like going to Lucy's", "I enjoy talking to new people": only a preference
        // ranks one thing "to" another.
        && (&c["than"] != "to"
            || matches!(
                c.name("verb").map(|v| v.as_str()),
                Some("prefer" | "preferred" | "rate" | "rank")
            ))
    {
        let found = pair(PREFER_OVER, c["topic"].trim(), c["other"].trim(), false);
        if !found.is_empty() {
            return Some(found);
        }
    }
    if let Some(c) = MATTERS_MORE.captures(clause) {
        let found = pair(MATTERS_MORE, c["topic"].trim(), c["other"].trim(), false);
        if found.len() == 2 {
            return Some(found);
        }
    }
    if let Some(c) = TEAM.captures(clause) {
        let chosen = c["topic"].trim();
        let found = match c.name("other") {
            Some(other) => pair(TEAM, chosen, other.as_str().trim(), false),
            None => make(TEAM, chosen, Stance::For, sentence, clause)
                .into_iter()
                .collect(),
        };
        if !found.is_empty() {
            return Some(found);
        }
    }
    if let Some(c) = RATHER_THAN.captures(clause) {
        const TEDIUM: &[&str] = &[
            "watch paint dry",
            "watch grass grow",
            "eat glass",
            "do anything",
            "do anything else",
            "be anywhere else",
            "do my taxes",
            "go to the dentist",
            "stare at a wall",
            "die",
        ];
        // What is put up with: "sit through golf" is about golf.
        let preferred = c["topic"].trim();
        // "I'd rather have honey sticks than pixie sticks": the things, not the having.
        let preferred_thing = ENDURED.replace(preferred, "").to_string();
        let other = ENDURED.replace(c["other"].trim(), "").to_string();
        let found = if TEDIUM.contains(&preferred) {
            make(RATHER_THAN, &other, Stance::Against, sentence, clause)
                .into_iter()
                .collect()
        } else {
            pair(RATHER_THAN, &preferred_thing, &other, false)
        };
        if !found.is_empty() {
            return Some(found);
        }
    }
    if let Some(c) = MOVES_ME_MORE.captures(clause) {
        let subject = c["topic"].trim();
        // "Few things delight me more than a good sandwich": the sandwich wins.
        if matches!(
            subject,
            "few things" | "nothing" | "not much" | "little" | "nothing else" | "not many things"
        ) && &c["degree"] != "less"
        {
            return Some(
                make(
                    MOVES_ME_MORE,
                    c["other"].trim(),
                    Stance::For,
                    sentence,
                    clause,
                )
                .into_iter()
                .collect(),
            );
        }
        if short(subject, 5) && !subject.starts_with("i ") && !subject.starts_with("it ") {
            let found = pair(
                MOVES_ME_MORE,
                subject,
                c["other"].trim(),
                &c["degree"] == "less",
            );
            if !found.is_empty() {
                return Some(found);
            }
        }
    }
    if let Some(c) = UNMATCHED_QUALITY.captures(clause) {
        let subject = c["topic"].trim();
        if short(subject, 5) && short(c["other"].trim(), 4) && !subject.starts_with("i ") {
            let found = pair(UNMATCHED_QUALITY, subject, c["other"].trim(), false);
            if found.len() == 2 {
                return Some(found);
            }
        }
    }
    if let Some(c) = MORE_OF_A.captures(clause) {
        let kind = |side: &str| {
            let side = side.trim();
            [" person", " people", " type", " kind of person", " fan"]
                .iter()
                .find_map(|suffix| side.strip_suffix(suffix))
                .unwrap_or(side)
                .to_string()
        };
        let found = pair(MORE_OF_A, &kind(&c["topic"]), &kind(&c["other"]), false);
        if found.len() == 2 {
            return Some(found);
        }
    }
    if let Some(c) = BETTER_THAN.captures(clause) {
        let subject = c["topic"].trim();
        let degree = c["judgement"].trim();
        let word = degree
            .strip_prefix("more ")
            .or_else(|| degree.strip_prefix("less "))
            .unwrap_or(degree);
        let positive = match polarity(word).or_else(|| comparative_polarity(word)) {
            Some(stance) => stance == Stance::For,
            None => return None,
        };
        let positive = if degree.starts_with("less ") {
            !positive
        } else {
            positive
        };
        if short(subject, 5) && !subject.starts_with("i ") {
            let found = pair(BETTER_THAN, subject, c["other"].trim(), !positive);
            if !found.is_empty() {
                return Some(found);
            }
        }
    }
    // "head over heels for her": in love, not ranking heads over heels.
    if let Some(c) = X_OVER_Y.captures(clause)
        && !clause.contains("head over heels")
    {
        let subject = c["topic"].trim();
        let verbish = |w: &str| {
            matches!(
                w,
                "i" | "is"
                    | "are"
                    | "was"
                    | "were"
                    | "went"
                    | "go"
                    | "all"
                    | "it"
                    | "we"
                    | "you"
                    | "they"
                    | "he"
                    | "she"
                    | "looked"
                    | "thought"
                    | "think"
                    | "read"
                    // "looking over 224", "take over people's lives", "cut the hair over
                    // my ears": a verb with "over", not a preference.
                    | "looking"
                    | "look"
                    | "take"
                    | "took"
                    | "taking"
                    | "cut"
                    | "get"
                    | "got"
                    | "getting"
                    | "come"
                    | "came"
                    | "hand"
                    | "turn"
                    | "fall"
                    | "fell"
                    | "run"
                    | "ran"
                    | "pass"
                    | "can"
                    | "could"
                    | "will"
                    | "would"
                    | "should"
                    // "can't beat a good burrito": a verdict on one thing, read elsewhere.
                    | "can't"
                    | "cannot"
                    | "couldn't"
                    | "won't"
                    | "don't"
                    | "doesn't"
                    | "didn't"
                    | "never"
                    // "a little over a week": a quantity, not a preference.
                    | "little"
                    | "bit"
                    | "slightly"
                    | "just"
                    | "well"
                    | "way"
            ) || (w.len() > 4 && w.ends_with("ed"))
                || ["i'", "you'", "we'", "they'", "it'", "that'", "he'", "she'"]
                    .iter()
                    .any(|pronoun| w.starts_with(pronoun))
        };
        // "over by the creamery", "over 80 pounds": a place or an amount, not a rival.
        let rival = c["other"].trim();
        let placed = rival.starts_with(|ch: char| ch.is_ascii_digit())
            || ["by ", "there", "here", "at ", "in ", "to ", "on "]
                .iter()
                .any(|lead| rival.starts_with(lead));
        if short(subject, 4) && !placed && !subject.split_whitespace().any(verbish) {
            let other = other_side(subject, &c["other"]);
            let found = pair(X_OVER_Y, subject, &other, false);
            if found.len() == 2 {
                return Some(found);
            }
        }
    }
    if let Some(c) = ANY_DAY.captures(clause)
        && is_a_named_topic(c["topic"].trim(), 4)
    {
        return Some(
            make(ANY_DAY, c["topic"].trim(), Stance::For, sentence, clause)
                .into_iter()
                .collect(),
        );
    }
    if let Some(c) = X_FOR_ME.captures(clause)
        && short(c["topic"].trim(), 3)
        // "hold up, wait for me", "pray for me": a verb that takes "for", not a choice.
        && !c["topic"].split_whitespace().last().is_some_and(|w| {
            matches!(
                w,
                "wait" | "look" | "pray" | "root" | "vote" | "cover" | "speak" | "answer" | "pay"
                    | "care" | "work" | "hold" | "save" | "ask" | "call" | "do" | "decide"
            )
        })
        && !c["topic"].split_whitespace().any(|w| {
            matches!(
                w,
                "it's"
                    | "that's"
                    | "is"
                    | "are"
                    | "too"
                    | "much"
                    | "enough"
                    | "not"
                    | "never"
                    | "no"
                    | "nothing"
            )
        })
        // "The biggest challenge for me was…": a superlative names a slot, not a choice.
        && !c["topic"]
            .trim_start_matches("the ")
            .split_whitespace()
            .next()
            .is_some_and(|w| matches!(w, "best" | "worst") || (w.ends_with("est") && w.len() > 5))
    {
        return Some(
            make(X_FOR_ME, c["topic"].trim(), Stance::For, sentence, clause)
                .into_iter()
                .collect(),
        );
    }
    None
}
