//! Opinions about the people and things present: which participants and which knowledge-graph
//! entities an opinion is about, so the per-user injection pass has something to find.
//!
//! - **The person addressed.** A persona message answers the latest user message before it;
//!   its "your X" is that user's X. [`addressed`] writes it so ("your taste in films" →
//!   "maya's taste in films") before the rules read the message, and a leading or trailing
//!   vocative ("Sam, …", "…, Dave.") is left out, since it names the one addressed.
//! - **Participants named.** An opinion whose topic names a participant by their id ("carol's
//!   puns", "maya's taste in films") is about them ([`related_participants`]).
//! - **Entities mentioned.** A producer may list the knowledge-graph entities a message
//!   mentions (`messages[].mentions`): an opinion keeps those whose name its topic or evidence
//!   names, and those listed without a name ([`mentioned_entities`]).

use serde::{Deserialize, Serialize};

use super::{ExtractedOpinion, ExtractionInput};

/// A knowledge-graph entity a message mentions, as its producer lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mention {
    /// The entity's id in the producer's knowledge graph (`related_kg_uuids`).
    pub kg_uuid: String,
    /// How the message names it; without one, every opinion of the message is about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The user the persona message answers: the author of the latest user message before it.
pub fn addressee<'a>(input: &'a ExtractionInput<'a>) -> Option<&'a str> {
    input
        .context
        .iter()
        .rev()
        .find(|turn| turn.role == "user" && !turn.user_id.is_empty())
        .map(|turn| turn.user_id)
}

/// The message with the addressee's name where it says "your", and without a vocative naming
/// the one addressed. `None` when there is nobody to address, or nothing to write.
pub fn addressed(message: &str, addressee: &str) -> Option<String> {
    let sentences = addressed_sentences(message, addressee)?;
    let written = sentences
        .iter()
        .map(|(_, written)| written.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    (written != message).then_some(written)
}

/// The sentence of `message` that, addressed to `addressee`, reads as `written`: where a
/// finding in the rewritten message was said.
pub fn said_as<'a>(message: &'a str, addressee: &str, written: &str) -> Option<&'a str> {
    let written = written.trim();
    split_keeping_ends(message).into_iter().find(|sentence| {
        let rewritten = addressed_sentence(sentence, &possessive_of(addressee));
        rewritten.trim() == written || rewritten.contains(written)
    })
}

/// Each sentence of the message and how it reads addressed to `addressee`; `None` when there
/// is nobody to address or no "your" to write.
fn addressed_sentences(message: &str, addressee: &str) -> Option<Vec<(String, String)>> {
    if addressee.is_empty() || !message.to_lowercase().contains("your ") {
        return None;
    }
    let possessive = possessive_of(addressee);
    Some(
        split_keeping_ends(message)
            .into_iter()
            .map(|sentence| {
                (
                    sentence.to_string(),
                    addressed_sentence(sentence, &possessive),
                )
            })
            .collect(),
    )
}

fn possessive_of(addressee: &str) -> String {
    format!("{}'s ", addressee.to_lowercase())
}

/// One sentence with "your" written as the addressee's, its vocative left out.
fn addressed_sentence(sentence: &str, possessive: &str) -> String {
    let text = without_vocative(sentence);
    if !text.to_lowercase().contains("your ") {
        return text;
    }
    let mut rewritten = String::with_capacity(text.len() + 16);
    let mut rest = text.as_str();
    while let Some(at) = find_word(rest, "your ") {
        rewritten.push_str(&rest[..at]);
        // Only where "your X" is what the sentence judges: its subject, or what a liking
        // verb takes. Elsewhere it is an idiom or someone else's business ("you can keep your
        // energy drinks", "your roommates will think you are crazy, but it is worth it").
        let before = rewritten.trim_end().to_lowercase();
        let judged = before.is_empty()
            || JUDGING_VERBS.iter().any(|verb| {
                before.ends_with(verb)
                    && before[..before.len() - verb.len()]
                        .chars()
                        .next_back()
                        .is_none_or(|c| !c.is_alphanumeric())
            });
        rewritten.push_str(if judged {
            possessive
        } else {
            &rest[at..at + "your ".len()]
        });
        rest = &rest[at + "your ".len()..];
    }
    rewritten.push_str(rest);
    rewritten
}

/// Verbs after which "your X" is what the persona judges ("I love your cooking").
const JUDGING_VERBS: &[&str] = &[
    "love",
    "like",
    "adore",
    "admire",
    "enjoy",
    "hate",
    "dislike",
    "appreciate",
    "envy",
];

/// The sentence without a vocative at its start ("Sam, your …") or end ("…, Dave.") when it
/// addresses someone: a single capitalised word set off by a comma.
fn without_vocative(sentence: &str) -> String {
    let trimmed = sentence.trim();
    let mut text = trimmed.to_string();
    if let Some((head, rest)) = trimmed.split_once(", ")
        && is_a_name(head)
        && rest.to_lowercase().contains("your ")
    {
        text = rest.to_string();
    }
    if let Some((rest, tail)) = text.rsplit_once(", ") {
        let end = tail.trim_end_matches(['.', '!', '?']);
        let punctuation = &tail[end.len()..];
        if is_a_name(end) && rest.to_lowercase().contains("your ") {
            text = format!("{rest}{punctuation}");
        }
    }
    text
}

/// One capitalised word of letters: how a vocative names someone.
fn is_a_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase)
        && word.chars().all(char::is_alphabetic)
        && word.chars().count() <= 20
}

/// Where `word` (lower case, with its trailing space) starts in `text` as a whole word,
/// ignoring case.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let lowered = text.to_lowercase();
    let mut from = 0;
    while let Some(found) = lowered[from..].find(word) {
        let at = from + found;
        let starts_a_word = lowered[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '\'');
        // Lower-casing keeps these ASCII words at the same byte offsets.
        if starts_a_word && text.is_char_boundary(at) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The message's sentences, each with its closing punctuation.
fn split_keeping_ends(message: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let bytes = message.as_bytes();
    for (i, &byte) in bytes.iter().enumerate() {
        if matches!(byte, b'.' | b'!' | b'?')
            && bytes
                .get(i + 1)
                .is_none_or(|next| next.is_ascii_whitespace())
        {
            sentences.push(&message[start..=i]);
            start = i + 1;
        }
    }
    if start < message.len() && !message[start..].trim().is_empty() {
        sentences.push(&message[start..]);
    }
    sentences
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The participants an opinion's topic names by id ("carol's puns" with participant
/// `carol`), added to those it already has.
pub fn related_participants(opinion: &mut ExtractedOpinion, participants: &[String]) {
    let topic = opinion.name.to_lowercase();
    let words: Vec<&str> = topic
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|w| !w.is_empty())
        .collect();
    for participant in participants {
        let id = participant.to_lowercase();
        // "carol's" splits into "carol" and "s".
        if !id.is_empty()
            && words.contains(&id.as_str())
            && !opinion.related_user_ids.contains(participant)
        {
            opinion.related_user_ids.push(participant.clone());
        }
    }
}

/// The knowledge-graph entities an opinion is about: those of `mentions` whose name its topic
/// or evidence names (case aside), and those listed without a name.
pub fn mentioned_entities(opinion: &ExtractedOpinion, mentions: &[Mention]) -> Vec<String> {
    let topic = opinion.name.to_lowercase();
    let evidence = opinion.evidence.to_lowercase();
    let mut uuids: Vec<String> = Vec::new();
    for mention in mentions {
        let named = match &mention.name {
            None => true,
            Some(name) => {
                let name = name.trim().to_lowercase();
                !name.is_empty() && (topic.contains(&name) || evidence.contains(&name))
            }
        };
        if named && !uuids.contains(&mention.kg_uuid) {
            uuids.push(mention.kg_uuid.clone());
        }
    }
    uuids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Stance;

    #[test]
    fn your_is_the_addressees_and_a_vocative_names_them() {
        let table = [
            (
                "Sam, your taste in films is impeccable.",
                Some("maya's taste in films is impeccable."),
            ),
            ("I love your cooking, Dave.", Some("I love maya's cooking.")),
            (
                "Honestly? Your jokes are terrible.",
                Some("Honestly? maya's jokes are terrible."),
            ),
            ("I love green tea.", None),
            ("Dave, I love green tea.", None),
            ("You can keep your energy drinks.", None),
            (
                "Your roommates will think you are crazy, but it is worth it.",
                Some("maya's roommates will think you are crazy, but it is worth it."),
            ),
            ("Flavoured coffee is not for me.", None),
        ];
        for (message, expected) in table {
            assert_eq!(addressed(message, "Maya").as_deref(), expected, "{message}");
        }
        assert_eq!(
            addressed("I love your cooking.", ""),
            None,
            "nobody addressed"
        );
    }

    fn opinion(name: &str, evidence: &str) -> ExtractedOpinion {
        ExtractedOpinion {
            name: name.into(),
            opinion: String::new(),
            category: String::new(),
            stance: Stance::For,
            strength: 0.5,
            related_user_ids: Vec::new(),
            evidence: evidence.into(),
            found_by: None,
        }
    }

    #[test]
    fn a_topic_naming_a_participant_is_about_them() {
        let participants = vec!["carol".to_string(), "u7".to_string()];
        let mut puns = opinion("Carol's puns", "Carol's puns are the best");
        related_participants(&mut puns, &participants);
        assert_eq!(puns.related_user_ids, ["carol"]);
        let mut caroling = opinion("caroling", "I love caroling");
        related_participants(&mut caroling, &participants);
        assert!(
            caroling.related_user_ids.is_empty(),
            "a word, not a part of one"
        );
    }

    #[test]
    fn an_opinion_keeps_the_entities_it_names_and_those_listed_without_a_name() {
        let mentions = vec![
            Mention {
                kg_uuid: "kg-dune".into(),
                name: Some("Dune".into()),
            },
            Mention {
                kg_uuid: "kg-tea".into(),
                name: Some("green tea".into()),
            },
            Mention {
                kg_uuid: "kg-thread".into(),
                name: None,
            },
        ];
        assert_eq!(
            mentioned_entities(&opinion("dune", "Dune is a masterpiece"), &mentions),
            ["kg-dune", "kg-thread"]
        );
        assert_eq!(
            mentioned_entities(&opinion("jazz", "I love jazz"), &mentions),
            ["kg-thread"]
        );
    }
}
