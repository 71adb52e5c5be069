//! The text as the readers see it: sentences, clauses, lower case with chat spellings
//! mended, emoticons and tag questions gone.

use super::*;

/// Sounds of conversation, not things: "oooh", "hm", "hahaha", "ugh", "shoot".
pub(super) fn is_interjection(word: &str) -> bool {
    INTERJECTION.is_match(word)
}

pub(super) fn sentences(message: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = message.chars().collect();
    for (i, &ch) in chars.iter().enumerate() {
        current.push(ch);
        let boundary = matches!(ch, '.' | '!' | '?' | ';' | '\n')
            && chars
                .get(i + 1)
                .is_none_or(|next| next.is_whitespace() || *next == '"' || *next == ')')
            // "Dr. Strange", "Mr. Rogers": a title, not the sentence's end.
            && !(ch == '.' && {
                let word = current[..current.len() - 1]
                    .rsplit(|c: char| !c.is_alphabetic())
                    .next()
                    .unwrap_or("")
                    .to_lowercase();
                matches!(word.as_str(), "dr" | "mr" | "mrs" | "ms" | "st" | "vs" | "jr" | "sr")
            });
        // "I am a big Marvel fan :) Well…": an emoticon ends a sentence too.
        let emoticon = chars.get(i + 1).is_none_or(|next| next.is_whitespace())
            && [
                ":)", ":(", ":D", ";)", ":P", ":p", ":/", "XD", "<3", ":-)", "=)",
            ]
            .iter()
            .any(|face| current.ends_with(face));
        if boundary || emoticon {
            out.push(std::mem::take(&mut current));
        }
    }
    out.push(current);
    out.into_iter()
        .map(|s| without_tag_question(s.trim()).to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// "I'm a Real Madrid fan, and you?": the question handed back to the user does not make the
/// statement before it a question.
pub(super) fn without_tag_question(sentence: &str) -> &str {
    match TAG.find(sentence) {
        Some(tag) if tag.start() > 0 => &sentence[..tag.start()],
        _ => sentence,
    }
}

pub(super) fn clauses(sentence: &str) -> Vec<String> {
    let lowered = normalise(sentence);
    let mut out = Vec::new();
    let mut start = 0;
    for captures in CLAUSE_SPLIT.captures_iter(&lowered) {
        let whole = captures.get(0).expect("group 0 always matches");
        out.push(lowered[start..whole.start()].to_string());
        start = captures
            .name("next")
            .or_else(|| captures.name("next2"))
            .or_else(|| captures.name("next3"))
            .or_else(|| captures.name("next4"))
            .or_else(|| captures.name("next5"))
            .or_else(|| captures.name("next6"))
            .map(|m| m.start())
            .unwrap_or(whole.end());
    }
    out.push(lowered[start..].to_string());
    out.into_iter()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// Lower-case, straight apostrophes, single spaces. The readers normalise the same sentence
/// once per clause; the last few texts are kept, so a long sentence of many clauses is read
/// once rather than once per clause (which made the extractor quadratic in its length).
pub(super) fn normalise(text: &str) -> String {
    // Short texts cost less to normalise than to look up.
    const WORTH_KEEPING: usize = 256;
    const KEPT: usize = 4;
    thread_local! {
        static KEPT_TEXTS: std::cell::RefCell<std::collections::VecDeque<(String, String)>> =
            const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
    }
    if text.len() < WORTH_KEEPING {
        return normalise_now(text);
    }
    if let Some(kept) = KEPT_TEXTS.with(|kept| {
        kept.borrow()
            .iter()
            .find(|(input, _)| input == text)
            .map(|(_, output)| output.clone())
    }) {
        return kept;
    }
    let output = normalise_now(text);
    KEPT_TEXTS.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back((text.to_string(), output.clone()));
    });
    output
}

fn normalise_now(text: &str) -> String {
    let text = text
        .replace(['\u{2019}', '\u{2018}'], "'")
        .replace(['\u{201c}', '\u{201d}'], "\"");
    // Emoticons and brackets carry no words: "I am a big Marvel fan :)", "(Love McDonalds)".
    // "I'm like really into X", "im in to computers": chat's filler and spelling.
    let text = text.to_lowercase();
    let text = EMOTICON.replace_all(&text, " ");
    let text = CHAT_LIKE.replace_all(&text, "${subject} ${degree}");
    let text = IN_TO.replace_all(&text, "${subject} ${degree}into");
    let text = ITS_FOR_IT_IS.replace_all(&text, "it's ${judgement}");
    let text = NO_ONE_AS_NOBODY.replace_all(&text, "nobody");
    let text = HAVE_AS_VE.replace_all(&text, "i've ${verb}");
    TITLE
        .replace_all(&text, "${title} ")
        .split_whitespace()
        .map(|word| match without_stretching(word) {
            Some(word) => std::borrow::Cow::Owned(chat_spelling(&word).to_string()),
            None => std::borrow::Cow::Borrowed(chat_spelling(word)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Chat stretches words for emphasis ("sooooo goooood", "i loooove it"): the word as spelled,
/// or `None` when no letter runs three times or more. A run is read as two letters when that
/// makes a word the lexicons know ("goood" is "good", "tooo" is "too"), else as one ("sooo" is
/// "so", "loooove" is "love").
pub(super) fn without_stretching(word: &str) -> Option<String> {
    // Most words have no run of three: found without allocating.
    if !word
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_alphabetic() && w[0] == w[1] && w[1] == w[2])
    {
        return None;
    }
    // "mmm", "hmmm", "ooooh": sounds of conversation, which the readers know stretched.
    if is_interjection(word.trim_matches(|c: char| !c.is_alphabetic())) {
        return None;
    }
    // The word as runs of one character: ("g", 1), ("o", 5), ("d", 1).
    let mut runs: Vec<(char, usize)> = Vec::new();
    for ch in word.chars() {
        match runs.last_mut() {
            Some((last, count)) if *last == ch => *count += 1,
            _ => runs.push((ch, 1)),
        }
    }
    let spelled = |stretched_as: usize| -> String {
        runs.iter()
            .flat_map(|&(ch, count)| {
                let count = if ch.is_alphabetic() && count >= 3 {
                    stretched_as
                } else {
                    count
                };
                std::iter::repeat_n(ch, count)
            })
            .collect()
    };
    let doubled = spelled(2);
    let letters: String = doubled.chars().filter(|c| c.is_alphabetic()).collect();
    if lexicon::is_known_word(&letters) {
        return Some(doubled);
    }
    Some(spelled(1))
}

/// Chat spells without apostrophes and runs words together ("i dont like it", "kinda", "x >>>
/// y"): the usual spelling, so the patterns read it.
pub(super) fn chat_spelling(word: &str) -> &str {
    match word {
        "dont" => "don't",
        "doesnt" => "doesn't",
        "didnt" => "didn't",
        "cant" => "can't",
        "wont" => "won't",
        "isnt" => "isn't",
        "arent" => "aren't",
        "wasnt" => "wasn't",
        "werent" => "weren't",
        "couldnt" => "couldn't",
        "wouldnt" => "wouldn't",
        "shouldnt" => "shouldn't",
        "havent" => "haven't",
        "hasnt" => "hasn't",
        "im" => "i'm",
        "ive" => "i've",
        "theyre" => "they're",
        "youre" => "you're",
        "thats" => "that's",
        "whats" => "what's",
        "kinda" => "kind of",
        "sorta" => "sort of",
        ">" | ">>" | ">>>" | ">>>>" => "over",
        other => other,
    }
}
