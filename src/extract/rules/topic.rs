//! What a reading rule's topic becomes an opinion by: the topic cut and checked (`make`), the
//! opinion's wording and strength (its category: `category`).

use super::category::category_in_sentence;
use super::*;

/// The opinion `rule` read: its topic cleaned and checked, its category, strength and
/// evidence.
pub(super) fn make(
    rule: Rule,
    raw_topic: &str,
    stance: Stance,
    sentence: &str,
    clause: &str,
) -> Option<ExtractedOpinion> {
    // "I can't stand the movie", "I love the idea": the one being talked about, which only the
    // conversation can name.
    const INSTANCES: &[&str] = &[
        "movie",
        "film",
        "show",
        "book",
        "song",
        "game",
        "episode",
        "album",
        "series",
        "class",
        "lecture",
        "course",
        "trip",
        "ending",
        "plot",
        "story",
        "video",
        "picture",
        "photo",
        "concert",
        "meal",
        "party",
        "event",
        "place",
        "restaurant",
        "idea",
        "one",
        "ones",
        "guy",
        "person",
        "part",
        "topic",
        "question",
        "conversation",
        "chat",
        "option",
        "feature",
        "end",
        "color",
        "people",
        "fact",
        "experience",
        "offer",
        "change",
        "summary",
        // "the view is great", "the line was too long": the one where the speaker is.
        "view",
        "line",
    ];
    // "almost anything to do with chicken": chicken; "the thought of X": X.
    let raw_topic = [
        "almost anything to do with ",
        "anything to do with ",
        "anything with ",
        "the thought of ",
        "the idea of ",
        "stuff like ",
        "things like ",
    ]
    .iter()
    .find_map(|lead| raw_topic.trim().strip_prefix(lead))
    .unwrap_or(raw_topic);
    // "chatting with you", "talking to you": the conversation itself.
    let raw = raw_topic.trim();
    if raw.contains(" with you") || raw.contains(" to you") || raw.starts_with("just about ") {
        return None;
    }
    let mut topic = raw.to_string();
    if let Some(found) = TOPIC_CUT.find(&topic) {
        topic.truncate(found.start());
    }
    // "mantis also goes \"something": cut inside a quotation. A whole one ("the song \"hey
    // jude\"") loses its marks.
    if topic.matches('"').count() % 2 == 1 {
        return None;
    }
    let topic = topic.replace('"', "");
    let topic = topic
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_string();
    let topic = infinitive_as_gerund(&topic);
    let mut words: Vec<&str> = topic.split_whitespace().collect();
    while let Some(first) = words.first()
        && matches!(
            *first,
            "the"
                | "a"
                | "an"
                | "another"
                | "to"
                | "some"
                | "my"
                | "our"
                | "all"
                | "any"
                | "really"
                | "just"
                | "actually"
                | "apparently"
                | "probably"
                | "maybe"
                | "basically"
                | "literally"
                | "definitely"
                | "also"
                | "still"
                | "mostly"
                | "usually"
                | "both"
                | "even"
                | "unfortunately"
                | "though"
                | "although"
                | "especially"
                | "of"
                | "hopefully"
                | "sometimes"
        )
    {
        words.remove(0);
    }
    // "a ton of books", "a bunch of hikes in california", "all kinds of music": the amount
    // is not the thing liked.
    if words.len() > 2
        && words[1] == "of"
        && matches!(
            words[0],
            "ton"
                | "tons"
                | "bunch"
                | "lot"
                | "lots"
                | "couple"
                | "variety"
                | "kinds"
                | "sorts"
                | "plenty"
                | "more"
        )
    {
        words.drain(..2);
        while matches!(words.first(), Some(&("the" | "a" | "an" | "my" | "our"))) {
            words.remove(0);
        }
    }
    // "shoot wikipedia (is never wrong)", "hm (sounds sweet)", "noooooo (breaking bad)": a
    // sound of conversation before the topic is left out; a word drawn out inside one
    // ("freeeee") says the topic is no name.
    let drawn_out = |w: &str| {
        w.as_bytes()
            .windows(3)
            .any(|run| run[0] == run[1] && run[1] == run[2] && run[0].is_ascii_alphabetic())
    };
    while words.first().is_some_and(|w| {
        is_interjection(w)
            || drawn_out(w)
            || matches!(*w, "sorry" | "okay" | "ok" | "well" | "thanks" | "please")
    }) {
        words.remove(0);
    }
    if words.iter().any(|w| drawn_out(w)) {
        return None;
    }
    if words.is_empty() || words.len() > 6 {
        return None;
    }
    // "the new season of that show": a thing only the conversation can name.
    if words.windows(2).any(|pair| {
        pair[0] == "of"
            && matches!(
                pair[1],
                "that"
                    | "this"
                    | "these"
                    | "those"
                    | "your"
                    | "his"
                    | "her"
                    | "their"
                    | "them"
                    | "it"
                    | "us"
            )
    }) {
        return None;
    }
    // "10 is a good number", "I like doing (a lot of work)", "I enjoy a fresh, (crisp
    // benjamin)": a number, a bare light verb, or a judgement cut from its noun by a comma.
    // ("I hate the cold", "honesty is essential": nouns that judge are still topics.)
    if words.len() == 1
        && (words[0].chars().all(|ch| ch.is_ascii_digit())
            || LIGHT_VERBS.contains(&words[0])
            || polarity(words[0]).is_some() && (raw.starts_with("a ") || raw.starts_with("an ")))
    {
        return None;
    }
    // "i think cryptocurrency": an opinion verb the pattern took for part of its subject.
    // "i'd choose the train": a choice the pattern took for part of its subject.
    if words.len() > 2
        && matches!(words[0], "i'd" | "i'll" | "i")
        && matches!(words[1], "choose" | "pick" | "take" | "have")
    {
        words.drain(..2);
    }
    if words.len() > 2
        && words[0] == "i"
        && matches!(
            words[1],
            "think" | "believe" | "feel" | "reckon" | "find" | "guess" | "suppose" | "say"
        )
    {
        words.drain(..2);
        while matches!(words.first(), Some(&("that" | "the" | "a" | "an"))) {
            words.remove(0);
        }
    }
    // "turning it off", "love him man": a pronoun inside names nothing the memory can keep;
    // "having his dog on the wharf": nor does a thing someone in the conversation owns.
    if words.len() > 1
        && words
            .iter()
            .any(|w| matches!(*w, "it" | "him" | "them" | "her" | "his" | "their"))
    {
        return None;
    }
    // "I like to play both", "listening to almost anything": what is liked is left unnamed.
    if words.len() > 1 && matches!(words.last(), Some(&("both" | "anything"))) {
        return None;
    }
    // "anime I do have to admit", "the parts I saw": a subject pronoun starts a clause of
    // its own; the topic ends before it (and "the parts" is then one being talked about).
    // (One that ends the topic is a subject cut in the wrong place: "except he (is better)".)
    if let Some(at) = words
        .iter()
        .skip(1)
        .position(|w| matches!(*w, "i" | "they" | "he" | "she" | "we"))
        .map(|at| at + 1)
        && at + 1 < words.len()
    {
        words.truncate(at);
    }
    // "the mountains out here", "being there": the place is where the conversation is.
    if words.len() > 1 && matches!(words.last(), Some(&("here" | "there"))) {
        words.pop();
        if words.len() > 1 && matches!(words.last(), Some(&("out" | "over" | "up" | "down" | "in")))
        {
            words.pop();
        }
        if words.len() == 1 && LIGHT_VERBS.contains(&words[0]) {
            return None;
        }
    }
    // "thunder makes me (feel safe)": what it does to the speaker, cut from its subject.
    if words.len() > 2
        && matches!(words.last(), Some(&("me" | "us")))
        && matches!(
            words[words.len() - 2],
            "makes" | "make" | "made" | "gets" | "keeps"
        )
    {
        words.truncate(words.len() - 2);
    }
    // "the robot from interstellar the best", "harry potter growing up", "the mathy part of
    // cs far (more than …)": a ranking, a time of life or a degree after the thing.
    for tail in [
        &["the", "best"][..],
        &["the", "most"],
        &["growing", "up"],
        &["thus", "far"],
        &["so", "far"],
        &["far"],
    ] {
        if words.len() > tail.len() && words.ends_with(tail) {
            words.truncate(words.len() - tail.len());
        }
    }
    // Chat tails: "linux either", "play for fun though", "bake probably", "learning about".
    while let Some(last) = words.last()
        && matches!(
            *last,
            "though"
                | "tho"
                | "tbh"
                | "imo"
                | "itself"
                | "either"
                | "haha"
                | "hahaha"
                | "lol"
                | "xd"
                | "honestly"
                | "probably"
                | "actually"
                | "also"
                | "anyway"
                | "anyways"
                | "really"
                | "better"
                | "more"
                | "sure"
                | "dude"
                | "ok"
                | "okay"
                | "bro"
                | "guys"
                | "sometimes"
                // "golf simply (isn't fun)": the adverb before the copula.
                | "simply"
                | "too"
                | "definitely"
                | "totally"
                | "truly"
                | "genuinely"
                | "certainly"
                | "absolutely"
                | "seriously"
                | "literally"
                | "basically"
                | "just"
        )
    {
        words.pop();
    }
    // "into a pile of", "bond with", "the best of the": cut inside a phrase ("a" may end
    // a name: "chick fil a"); "weather today": a moment.
    if matches!(
        words.last(),
        Some(
            &("of"
                | "an"
                | "the"
                | "my"
                | "your"
                | "our"
                | "their"
                | "and"
                | "or"
                | "about"
                | "to"
                | "for"
                | "with"
                | "in"
                | "on"
                | "at"
                | "into"
                | "from"
                | "by"
                | "today"
                | "tonight"
                | "ones"
                | "one")
        )
    ) || words.first() == Some(&"one")
        || words.ends_with(&["be", "a"])
        || words
            .iter()
            .any(|w| matches!(*w, "myself" | "yourself" | "ourselves"))
    {
        return None;
    }
    // Pronouns and possessives name nothing on their own ("his newer works", "i wish i"),
    // nor does a placeholder, as given or as the cuts above left it: "the things (I was into
    // as a kid)". (Checked once, here: no cut turns one word into another.)
    if words.is_empty() || words.len() == 1 && NON_TOPIC.contains(&words[0]) {
        return None;
    }
    // A subject that starts or ends on an auxiliary was cut in the wrong place: "doesn't"
    // (from "doesn't sound fun"), "gosh that does" (from "that does sound painful").
    const AUXILIARIES: &[&str] = &[
        "does", "do", "did", "doesn't", "don't", "didn't", "isn't", "aren't", "wasn't", "is",
        "are", "was", "were", "will", "would", "can", "could", "should", "has", "have", "had",
    ];
    if AUXILIARIES.contains(&words[0]) || AUXILIARIES.contains(words.last().unwrap_or(&"")) {
        return None;
    }
    if NOT_A_FIRST_WORD.contains(&words[0]) {
        return None;
    }
    // "the only weird thing (is hugging a stranger)", "the best part": a slot the sentence
    // fills later, not a topic.
    if (2..=3).contains(&words.len())
        && matches!(words.last(), Some(&("thing" | "part")))
        && (matches!(
            words[words.len() - 2],
            "only"
                | "main"
                | "other"
                | "same"
                | "first"
                | "last"
                | "real"
                | "weird"
                | "strange"
                | "biggest"
                | "hardest"
                | "easiest"
                | "important"
        ) || polarity(words[words.len() - 2]).is_some())
    {
        return None;
    }
    // "the ankle break part", "the best bit": a moment of something watched or done
    // together, not a lasting taste.
    if raw.starts_with("the ")
        && words.len() >= 2
        && matches!(words.last(), Some(&("part" | "bit" | "moment" | "episode")))
    {
        return None;
    }
    // "good idea", "great point", "nice one": a reaction to what was just said, not a topic.
    if words.len() == 2
        && matches!(
            words[1],
            "idea" | "point" | "question" | "one" | "job" | "call" | "thought" | "plan"
        )
        && polarity(words[0]).is_some()
    {
        return None;
    }
    // "the day you're describing", "the place you mentioned": what the other person said,
    // which the conversation names and the topic cannot.
    if words.windows(2).any(|pair| {
        matches!(pair[0], "you" | "you're" | "you've" | "u")
            && matches!(
                pair[1],
                "describing"
                    | "described"
                    | "describe"
                    | "mentioned"
                    | "mention"
                    | "mentioning"
                    | "said"
                    | "say"
                    | "saying"
                    | "suggested"
                    | "suggesting"
                    | "recommended"
                    | "talking"
                    | "talked"
            )
    }) {
        return None;
    }
    // "the following show", "the next one": one that the conversation's order points at.
    if matches!(
        words[0],
        "following" | "next" | "previous" | "latter" | "former" | "aforementioned"
    ) {
        return None;
    }
    // "not till next year", "not everyone": a denial cut loose. ("Not having groceries" is a
    // thing done, or not.)
    if words[0] == "not" && !words.get(1).is_some_and(|w| w.ends_with("ing")) {
        return None;
    }
    // "most of my garden", "some of the songs": a part, not the thing.
    if raw.starts_with("most of ") || raw.starts_with("some of ") || raw.starts_with("many of ") {
        return None;
    }
    // "reading that book": the conversation names it, not the topic. ("Companies that
    // exploit workers" keeps its relative "that".)
    if words.len() > 1 && matches!(words[words.len() - 2], "that" | "this" | "these" | "those") {
        return None;
    }
    // "the end either", "the feature they added": the one being talked about.
    // "our class is a joke", "the pictures are amazing", "I like the colors": the same, owned
    // or plural. (In 40 000 messages of people's chat, five plurals after "the" named the
    // ones in the conversation for each that named a kind.)
    if words.len() == 1
        && ["the ", "our ", "my ", "your ", "his ", "her ", "their "]
            .iter()
            .any(|owner| raw.starts_with(owner))
        && [
            Some(words[0]),
            words[0].strip_suffix('s'),
            words[0].strip_suffix("es"),
        ]
        .into_iter()
        .flatten()
        .any(|one| INSTANCES.contains(&one))
    {
        return None;
    }
    // "vanilla, of course, and coconut": a discourse phrase among the items, not one of them.
    if raw == "of course" || raw.starts_with("of course ") {
        return None;
    }
    if matches!(
        words.last(),
        Some(&("who" | "which" | "what" | "when" | "where"))
    ) {
        return None;
    }
    // "nice man that", "yess i", "wait you", "let me": a subject that ends on a pronoun was
    // cut wrong.
    if words.len() > 1
        && matches!(
            words.last(),
            Some(
                &("that"
                    | "this"
                    | "it"
                    | "they"
                    | "you"
                    | "i"
                    | "he"
                    | "she"
                    | "we"
                    | "them"
                    | "me"
                    | "us"
                    | "and"
                    | "or"
                    | "but")
            )
        )
    {
        return None;
    }
    let name = words.join(" ");
    let lowered = normalise(sentence);
    let strength = if HEDGE.iter().any(|h| clause.contains(h)) {
        0.35
    } else if STRONG.iter().any(|s| clause.contains(s)) {
        0.7
    } else {
        0.5
    };
    let opinion = first_person_opinion(sentence);
    Some(ExtractedOpinion {
        category: category_in_sentence(&name, &lowered).to_string(),
        name,
        opinion,
        stance,
        strength,
        related_user_ids: Vec::new(),
        evidence: sentence.trim().to_string(),
        found_by: Some(rule.name().to_string()),
    })
}

/// Verbs that say nothing of what is liked on their own: "I like doing (a lot of work)", "I
/// loved being (there)".
const LIGHT_VERBS: &[&str] = &[
    "doing", "going", "having", "getting", "making", "being", "taking", "trying",
];

/// The sentence as a standalone opinion: trimmed, capitalised, ending in punctuation.
pub(super) fn first_person_opinion(sentence: &str) -> String {
    let trimmed = sentence.trim().trim_end_matches([';', ':', ',']).trim_end();
    let mut chars = trimmed.chars();
    let mut text = match chars.next() {
        Some(first) => first.to_uppercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    };
    if !text.ends_with(['.', '!', '?']) {
        text.push('.');
    }
    text
}

/// "I love to hike": the liking is of hiking. A doing liked "to" is named as the doing
/// ("to learn languages" is "learning languages"), as the labelled sets name it (30 of the 39
/// such topics in the tuning sets) and as "I love hiking" names it, so that both voicings are
/// one topic to the memory. What follows "to" that is no verb ("to the beach", "to school")
/// is left as it was.
pub(super) fn infinitive_as_gerund(topic: &str) -> String {
    let Some(rest) = topic.strip_prefix("to ") else {
        return topic.to_string();
    };
    let (verb, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    // "to seeing" is a doing already; "to sing", "to bring" are not.
    let is_gerund = |word: &str| {
        word.strip_suffix("ing")
            .is_some_and(|stem| stem.bytes().any(|b| b"aeiouy".contains(&b)))
    };
    let not_a_verb = verb.len() < 2
        || !verb.bytes().all(|b| b.is_ascii_lowercase())
        || is_gerund(verb)
        || matches!(
            verb,
            "the"
                | "a"
                | "an"
                | "my"
                | "your"
                | "our"
                | "their"
                | "his"
                | "her"
                | "its"
                | "this"
                | "that"
                | "these"
                | "those"
                | "me"
                | "you"
                | "him"
                | "them"
                | "us"
                | "it"
                | "school"
                | "work"
                | "church"
                | "bed"
                | "college"
                | "class"
                | "town"
                | "dinner"
                | "lunch"
                | "breakfast"
                | "music"
                | "everyone"
                | "anyone"
                | "people"
                | "some"
                | "all"
                | "any"
                | "each"
                | "every"
                | "no"
                | "both"
                | "new"
                | "other"
                | "more"
        );
    // "to go get food": two verbs, which no one "-ing" names.
    let (next, after_next) = tail.split_once(' ').unwrap_or((tail, ""));
    let two_verbs = matches!(verb, "go" | "come") && !next.is_empty() && !is_gerund(next);
    if not_a_verb || two_verbs {
        return topic.to_string();
    }
    let gerund = gerund_of(verb);
    // "to cook and bake": both doings are named so.
    let (second, rest) = after_next.split_once(' ').unwrap_or((after_next, ""));
    if next == "and"
        && !second.is_empty()
        && second.bytes().all(|b| b.is_ascii_lowercase())
        && !is_gerund(second)
    {
        let second = gerund_of(second);
        return format!("{gerund} and {second} {rest}")
            .trim_end()
            .to_string();
    }
    if tail.is_empty() {
        gerund
    } else {
        format!("{gerund} {tail}")
    }
}

/// The "-ing" form of a verb's base form: "hike" hiking, "run" running, "lie" lying, "see"
/// seeing, "be" being, "ski" skiing.
fn gerund_of(verb: &str) -> String {
    let bytes = verb.as_bytes();
    let vowel = |b: u8| matches!(b, b'a' | b'e' | b'i' | b'o' | b'u');
    if verb == "be" || verb.ends_with("ee") || verb.ends_with("oe") || verb.ends_with("ye") {
        return format!("{verb}ing");
    }
    if let Some(stem) = verb.strip_suffix("ie") {
        return format!("{stem}ying");
    }
    if let Some(stem) = verb.strip_suffix('e')
        && stem.len() >= 2
    {
        return format!("{stem}ing");
    }
    // One short syllable ending consonant, vowel, consonant doubles its consonant: "swim",
    // "shop", "chat", "quit" ("qu" is one consonant).
    let n = bytes.len();
    let vowel_groups = bytes
        .windows(2)
        .filter(|pair| !vowel(pair[0]) && vowel(pair[1]))
        .count()
        + usize::from(vowel(bytes[0]));
    if (3..=4).contains(&n)
        && vowel_groups == 1
        && !vowel(bytes[n - 1])
        && !matches!(bytes[n - 1], b'w' | b'x' | b'y')
        && vowel(bytes[n - 2])
        && (!vowel(bytes[n - 3]) || verb.starts_with("qu"))
    {
        return format!("{verb}{}ing", &verb[n - 1..]);
    }
    format!("{verb}ing")
}
