//! The offline extractor: first-person opinion statements found by patterns.
//!
//! It reads a persona message clause by clause and recognises
//! - liking and disliking verbs ("I love / adore / prefer / hate / can't stand X"), with
//!   negation ("I don't like X", "I no longer enjoy X") flipping the stance;
//! - being a fan or not ("I'm a huge fan of X", "I'm not into X");
//! - favourites ("my favourite season is autumn", "autumn is my favourite");
//! - judgements ("I think X is overrated", "honestly, X is wonderful", "I find X calming"),
//!   whose stance comes from the adjective and flips under "not" / "I don't think";
//! - "nothing beats X", "I can't get enough of X", "X is (not) my thing";
//! - what a thing does to the persona ("loud restaurants drive me crazy", "birdsong calms me").
//!
//! Questions, hypotheticals ("if I liked X") and the past ("I used to love X") are skipped;
//! pronoun topics ("I love it"), remarks about the conversation ("I love how you put that") and
//! speech acts ("I hate to say it") carry no topic and are skipped too.
//!
//! Comparatives give two opinions ("cats over dogs", "I prefer tea to coffee", "vinyl sounds
//! warmer than streaming": the preferred thing `for`, the other `against`); reported views
//! ("my friend says…", "so you're saying…") and hypotheticals ("imagine…") give none.
//!
//! Beyond those, [`phrases`] knows fixed phrases that carry a stance whatever their topic ("I
//! have a soft spot for X", "I could live without X", "X deserves more love", "X never
//! appealed to me", "X, not so much"); a topic named as a question is judged by the reply after
//! it ("Sailing? Love it."); and "it" / "them" after a liking verb stands for the previous
//! clause's subject ("mechanical keyboards are loud, but I love them"). Stances are read from
//! [`lexicon`], general English words rather than the labelled sets' phrases.
//!
//! Beyond single clauses it reads a question the persona answers itself ("Coffee or tea? Tea,
//! obviously."; "Favourite dessert? Mine's tiramisu."), others' views through the persona's
//! reaction ("Everyone raves about sushi. I don't get the appeal."), chat without a subject
//! ("Absolutely adore hedgehogs"), idioms and slang ("X is where it's at", "X sucks", "I'm so
//! done with X"), ideals ("honesty is non-negotiable for me", "I stand for X"), lists and
//! pairs ("my favourites are X, Y and Z", "both X and Y", "neither X nor Y"), and what the
//! persona met, judged by the next clause or sentence ("I tried sushi. It was amazing.").
//!
//! Measured by `tests/extraction_quality.rs` on sets written alongside the rules and on eight
//! written apart from them. In our own registers, on the fourth (never read by a session that
//! changed the rules): precision 0.970, recall 0.719. On people's chat labelled before the
//! rules ran on it (the ninth): 0.767 / 0.359, the same recall as before the last round of
//! rules: patterns no longer learn much from samples of other people's text.
//!
//! The patterns and the clean-up of what they capture are one grammar, read together in this
//! file; the word lists and the fixed phrases live beside it.

use futures::future::BoxFuture;

pub mod coverage;
pub mod engine;
mod lexicon;
mod phrases;

use super::{ExtractError, ExtractedOpinion, ExtractionInput, Extractor};
use crate::model::Stance;
use engine::*;
use lexicon::{comparative_polarity, polarity};

pub struct RulesExtractor {
    max_opinions: usize,
}

impl RulesExtractor {
    pub fn new(max_opinions: usize) -> RulesExtractor {
        RulesExtractor { max_opinions }
    }

    /// The opinions in one persona message, in order of appearance, one per topic. Within a
    /// sentence a later clause's view of a topic replaces an earlier one: "camping is
    /// uncomfortable, but I adore it" is a view for camping.
    pub fn extract_text(&self, message: &str) -> Vec<ExtractedOpinion> {
        let mut found: Vec<ExtractedOpinion> = Vec::new();
        let sentences = sentences(message);
        let mut replied_to = false;
        // Others' view of a topic, said in an earlier sentence: the persona's reaction to it
        // ("I don't get the appeal") and its pronouns ("Not me; I love it") refer to it.
        let mut others_view: Option<OthersView> = None;
        // What the last clause said the persona met ("I tried sushi."): the next sentence's
        // "It was amazing" judges it.
        let mut met: Option<String> = None;
        for (i, sentence) in sentences.iter().enumerate() {
            let met_before = met.take();
            if std::mem::take(&mut replied_to) {
                continue;
            }
            let mut in_sentence: Vec<ExtractedOpinion> = Vec::new();
            let earlier_view = others_view.take();
            if let Some(opinion) = sarcasm(sentence) {
                in_sentence.push(opinion);
            }
            if let Some(view) = &earlier_view
                && let Some(opinion) = view.reaction(sentence)
            {
                in_sentence.push(opinion);
            }
            if let Some((opinions, reply_used)) = answered_question(sentence, sentences.get(i + 1))
            {
                in_sentence.extend(opinions);
                replied_to = reply_used;
            } else if let Some(opinion) =
                exclamation_of_distaste(sentence).or_else(|| thing_and_i(sentence))
            {
                in_sentence.push(opinion);
            } else if let Some(view) = OthersView::read(sentence) {
                if let Some(opinion) = view.reaction_in_same_sentence() {
                    in_sentence.push(opinion);
                } else {
                    others_view = Some(view);
                }
            } else {
                let mut previous_subject: Option<String> = earlier_view
                    .as_ref()
                    .map(|view| view.topic.clone())
                    .or_else(|| met_before.clone());
                // "Way back when, … because I loved computers": a past told in one clause
                // holds for the whole sentence.
                let told_of_the_past =
                    is_a_past_view(&LEADING_FILLER.replace(&normalise(sentence), ""));
                if told_of_the_past {
                    // "We watched Inception last night.": a past told, and what it met.
                    met = clauses(sentence)
                        .last()
                        .and_then(|clause| object_of_an_experience(clause));
                }
                for clause in clauses(sentence).into_iter().filter(|_| !told_of_the_past) {
                    let clause = resolve_pronoun(&clause, previous_subject.as_deref());
                    let opinions = read_clause_all(&clause, sentence);
                    met = object_of_an_experience(&clause);
                    previous_subject = opinions
                        .last()
                        .map(|o| o.name.clone())
                        .or_else(|| clause_subject(&clause))
                        .or_else(|| object_of_a_past_liking(&clause))
                        .or_else(|| met.clone());
                    for opinion in opinions {
                        match in_sentence.iter_mut().find(|o| o.name == opinion.name) {
                            Some(earlier) => *earlier = opinion,
                            None => in_sentence.push(opinion),
                        }
                    }
                }
            }
            if others_view.is_none()
                && let Some(view) = earlier_view
                && view.sentences_left > 0
            {
                others_view = Some(OthersView {
                    sentences_left: view.sentences_left - 1,
                    ..view
                });
            }
            // "Sure, pineapple on pizza is a totally reasonable choice. Not.": the view is denied.
            if sentences
                .get(i + 1)
                .is_some_and(|next| DENIED_AFTER.is_match(&normalise(next)))
            {
                replied_to = true;
                in_sentence = in_sentence
                    .into_iter()
                    .map(|mut opinion| {
                        opinion.stance = flip(opinion.stance, true);
                        read_within(DENIED_AFTER, opinion)
                    })
                    .collect();
            }
            for opinion in in_sentence {
                if !found.iter().any(|o| o.name == opinion.name) {
                    found.push(opinion);
                }
                if found.len() == self.max_opinions {
                    return found;
                }
            }
        }
        found
    }
}

/// A topic named as a question and judged by the next sentence: "Sailing? Love it." Gives the
/// opinion and whether the reply was used (then it is not read again on its own).
fn named_topic_and_reply(
    sentence: &str,
    reply: Option<&String>,
) -> Option<(ExtractedOpinion, bool)> {
    // "Ah, fresh bread. Bliss.": a topic named with relish is judged by its reply as well.
    let named = normalise(sentence);
    // A bare exclamation ("Elbow pasta!") counts only when the reply likes or hates it in
    // the first person ("I love that!"): "Yep! Exactly." and "A volcano erupted! Scary
    // stuff." name nothing the persona holds.
    let mut exclaimed = false;
    let (rule, question) = match NAMED_TOPIC_QUESTION.captures(&named) {
        Some(c) => (NAMED_TOPIC_QUESTION, c["topic"].to_string()),
        None => {
            let c = RELISHED.captures(&named)?;
            exclaimed = c.name("topic").is_none();
            (
                RELISHED,
                c.name("topic").or(c.name("topic2"))?.as_str().to_string(),
            )
        }
    };
    let question = LEADING_FILLER.replace(&question, "").to_string();
    if !is_a_named_topic(&question, 5) {
        return None;
    }
    let reply = reply?;
    let reply_text = normalise(reply);
    let reply_text = reply_text.trim_end_matches(['.', '!', ';']).trim();
    if reply_text.ends_with('?') {
        return None;
    }
    // "No thank you", "nope, never": a refusal the filler would strip to nothing.
    let whole_reply = reply_text;
    let reply_text = LEADING_FILLER.replace(reply_text, "");
    let reply_text = reply_text.trim();
    if exclaimed && !FIRST_PERSON_VERDICT.is_match(reply_text) {
        return None;
    }
    let stance = phrases::verdict_on_named_topic(reply_text)
        .or_else(|| phrases::verdict_on_named_topic(whole_reply).filter(|_| !exclaimed))?;
    let evidence = format!("{} {}", sentence.trim(), reply.trim());
    let opinion = make(rule, &question, stance, &evidence, &evidence)?;
    Some((opinion, true))
}

/// Whether `words` can be a topic named on its own: a few words, none of them a verb, pronoun
/// or word of conversation, and not itself a judgement ("Oh, lovely.").
fn is_a_named_topic(words: &str, at_most: usize) -> bool {
    let words: Vec<&str> = words.split_whitespace().collect();
    if words.is_empty() || words.len() > at_most {
        return false;
    }
    let judgement = words.len() == 1 && polarity(words[0]).is_some();
    !judgement
        && !words
            .iter()
            .any(|w| NOT_A_TOPIC_WORD.contains(w) || is_interjection(w))
}

/// A question the persona answers itself in the next sentence: a topic named and judged
/// ("Sailing? Love it."), a choice between two ("Coffee or tea? Tea, obviously."), or a
/// favourite ("Favourite dessert? Mine's tiramisu."). Gives the opinions and whether the
/// reply was used.
fn answered_question(
    sentence: &str,
    reply: Option<&String>,
) -> Option<(Vec<ExtractedOpinion>, bool)> {
    if let Some(chosen) = choice_between(sentence, reply?) {
        return Some((chosen, true));
    }
    if let Some(favourite) = favourite_answered(sentence, reply?) {
        return Some((vec![favourite], true));
    }
    named_topic_and_reply(sentence, reply).map(|(opinion, used)| (vec![opinion], used))
}

/// "Coffee or tea? Tea, obviously.": the side the reply names is `for`, the other `against`.
fn choice_between(sentence: &str, reply: &str) -> Option<Vec<ExtractedOpinion>> {
    let question = LEADING_FILLER.replace(&normalise(sentence), "").to_string();
    let c = EITHER_OR.captures(&question)?;
    let (one, other) = (c["topic"].trim(), c["other"].trim());
    if !is_a_named_topic(one, 4) || !is_a_named_topic(other, 4) {
        return None;
    }
    let answer = normalise(reply);
    let chosen = CHOSEN.captures(&answer)?["topic"].trim().to_string();
    let without_article = |side: &str| {
        side.trim_start_matches("the ")
            .trim_start_matches("a ")
            .to_string()
    };
    let (winner, loser) = if without_article(&chosen) == without_article(one) {
        (one, other)
    } else if without_article(&chosen) == without_article(other) {
        (other, one)
    } else {
        return None;
    };
    let evidence = format!("{} {}", sentence.trim(), reply.trim());
    let both: Vec<ExtractedOpinion> = [(winner, Stance::For), (loser, Stance::Against)]
        .into_iter()
        .filter_map(|(side, stance)| make(EITHER_OR, side, stance, &evidence, &evidence))
        .collect();
    (both.len() == 2).then_some(both)
}

/// "What's my favourite planet? Saturn, easily.", "Favourite dessert? Mine's tiramisu.": the
/// persona names its own favourite (a question about the user's is answered only with "mine").
fn favourite_answered(sentence: &str, reply: &str) -> Option<ExtractedOpinion> {
    let question = normalise(sentence);
    if !question.ends_with('?')
        || !(question.contains("favourite") || question.contains("favorite"))
    {
        return None;
    }
    let answer = normalise(reply);
    let c = ANSWER.captures(&answer)?;
    let own = c.name("mine").is_some()
        || question.contains("my favourite")
        || question.contains("my favorite")
        || !question.contains("your");
    let topic = c["topic"].trim();
    if !own || !is_a_named_topic(topic, 4) {
        return None;
    }
    let evidence = format!("{} {}", sentence.trim(), reply.trim());
    make(ANSWER, topic, Stance::For, &evidence, &evidence)
}

/// "Cilantro and I don't get along", "thunderstorms and I are old friends", "give me a good
/// book and I'm happy": read whole, before the clauses are split at "and I".
fn thing_and_i(sentence: &str) -> Option<ExtractedOpinion> {
    let text = LEADING_FILLER.replace(&normalise(sentence), "").to_string();
    if let Some(c) = GIVE_ME_AND.captures(&text) {
        return make(GIVE_ME_AND, &c["topic"], Stance::For, sentence, sentence);
    }
    let c = THING_AND_I.captures(&text)?;
    let subject = c["topic"].trim();
    if subject.split_whitespace().count() > 4 {
        return None;
    }
    let stance = if c.name("disliked").is_some() {
        Stance::Against
    } else {
        Stance::For
    };
    make(THING_AND_I, subject, stance, sentence, sentence)
}

/// Sarcasm in its commonest shapes, read as the dislike it means: "Oh great, another Monday.",
/// "Yeah, because waiting in line is SO much fun.", "Another reboot, just what the world
/// needed."
fn sarcasm(sentence: &str) -> Option<ExtractedOpinion> {
    let text = normalise(sentence);
    let c = SARCASTIC.captures(&text)?;
    let topic = c
        .name("topic")
        .or(c.name("topic2"))
        .or(c.name("topic3"))?
        .as_str()
        .trim();
    if topic.split_whitespace().count() > 6 {
        return None;
    }
    make(SARCASTIC, topic, Stance::Against, sentence, sentence)
}

/// "Ugh, mosquitoes.": a sentence that is only a topic and a noise of distaste.
fn exclamation_of_distaste(sentence: &str) -> Option<ExtractedOpinion> {
    let text = normalise(sentence);
    let c = DISTASTE.captures(&text)?;
    let topic = c["topic"].trim();
    is_a_named_topic(topic, 4)
        .then(|| make(DISTASTE, topic, Stance::Against, sentence, sentence))
        .flatten()
}

/// What others are said to think of a topic ("everyone raves about sushi", "people say golf is
/// boring"). Not the persona's view, but the persona's reaction to it is: "I don't get the
/// appeal" disagrees, "and they're right" agrees.
struct OthersView {
    topic: String,
    stance: Stance,
    /// The sentence that reported it, for the opinion's evidence.
    said: String,
    /// Any reaction after the report in the same sentence ("…, and they're right").
    rest: Option<String>,
    /// How many more sentences a reaction may come in ("Not me; I love it").
    sentences_left: usize,
}

impl OthersView {
    fn read(sentence: &str) -> Option<OthersView> {
        let text = normalise(sentence);
        let text = text.trim_end_matches(['.', '!', ';']).trim();
        let text = LEADING_FILLER.replace(text, "").to_string();
        let c = OTHERS.captures(&text)?;
        let mut said = c["topic"].to_string();
        let mut rest = None;
        if let Some(after) = REACTION_AFTER.captures(&said) {
            let whole = after.get(0).expect("group 0 always matches");
            rest = Some(after["reaction"].to_string());
            said.truncate(whole.start());
        }
        let (topic, stance) = if c.name("reported").is_some() {
            let judged = JUDGE_PLAIN.captures(&said)?;
            let stance = flip(
                judgement_polarity(&judged["judgement"])?,
                judged.name("negation").is_some(),
            );
            (judged["topic"].to_string(), stance)
        } else if c.name("liked").is_some() {
            (said, Stance::For)
        } else {
            (said, Stance::Against)
        };
        let topic = make(OTHERS, &topic, stance, sentence, sentence)?.name;
        Some(OthersView {
            topic,
            stance,
            said: sentence.trim().to_string(),
            rest,
            sentences_left: 1,
        })
    }

    /// The persona's reaction within the reporting sentence: "people say golf is boring, and
    /// they're right".
    fn reaction_in_same_sentence(&self) -> Option<ExtractedOpinion> {
        let rest = self.rest.as_deref()?;
        let agrees = agreement(rest)?;
        make(
            OTHERS,
            &self.topic,
            flip(self.stance, !agrees),
            &self.said,
            &self.said,
        )
    }

    /// The persona's reaction in a later sentence: "I don't get the appeal", "Not me".
    fn reaction(&self, sentence: &str) -> Option<ExtractedOpinion> {
        let agrees = agreement(&normalise(sentence))?;
        let evidence = format!("{} {}", self.said, sentence.trim());
        make(
            OTHERS,
            &self.topic,
            flip(self.stance, !agrees),
            &evidence,
            &evidence,
        )
    }
}

/// Whether a reaction to others' view agrees with it (`Some(true)`), disagrees
/// (`Some(false)`), or is no reaction at all.
fn agreement(reaction: &str) -> Option<bool> {
    let reaction = reaction.trim();
    if reaction.ends_with('?') {
        return None;
    }
    if DISAGREES.is_match(reaction) {
        Some(false)
    } else if AGREES.is_match(reaction) {
        Some(true)
    } else {
        None
    }
}

/// "…, but I love them": the pronoun stands for the subject of the clause before it, which
/// the rules could not otherwise see.
fn resolve_pronoun(clause: &str, previous_subject: Option<&str>) -> String {
    let Some(subject) = previous_subject else {
        return clause.to_string();
    };
    if let Some(c) = SUBJECT_PRONOUN.captures(clause) {
        let whole = c.get(0).expect("group 0 always matches");
        let verb = match &c["pronoun"] {
            "it was" => "was",
            "they were" => "were",
            pronoun if pronoun.starts_with("it") => "is",
            _ => "are",
        };
        return format!("{subject} {verb} {}", &clause[whole.end()..]);
    }
    if let Some(c) = OBJECT_PRONOUN.captures(clause) {
        let whole = c.get(0).expect("group 0 always matches");
        return format!("{} {subject}{}", &c["before"], &clause[whole.end()..]);
    }
    if let Some(c) = JUDGED_PRONOUN.captures(clause) {
        let whole = c.get(0).expect("group 0 always matches");
        let replaced = match &c["pronoun"] {
            "it's" | "it is" => format!("{subject} is"),
            "they're" | "they are" => format!("{subject} are"),
            _ => subject.to_string(),
        };
        return format!("{}{replaced}{}", &c["before"], &clause[whole.end()..]);
    }
    clause.to_string()
}

/// "I used to hate olives, but now I adore them": a past view names the topic a later
/// pronoun stands for, though it is not read as a view itself.
fn object_of_a_past_liking(clause: &str) -> Option<String> {
    let c = PAST_LIKING.captures(clause.trim())?;
    let object = make(PAST_LIKING, &c["topic"], Stance::For, clause, clause)?;
    Some(object.name)
}

/// "I tried sushi last week", "we went to Red House in SLC": what the persona met, which a
/// following "it was super good" judges.
fn object_of_an_experience(clause: &str) -> Option<String> {
    let clause = LEADING_FILLER.replace(clause.trim(), "");
    let c = EXPERIENCE.captures(&clause)?;
    // "I saw some here": an unnamed few.
    if ["some ", "a few ", "one ", "a couple"]
        .iter()
        .any(|lead| c["topic"].starts_with(lead))
    {
        return None;
    }
    let object = make(EXPERIENCE, &c["topic"], Stance::For, &clause, &clause)?;
    Some(object.name)
}

/// The noun phrase a clause opens with, when it is about a thing ("mechanical keyboards are
/// loud" → "mechanical keyboards"): the words before its first verb, at most five.
fn clause_subject(clause: &str) -> Option<String> {
    let clause = LEADING_FILLER.replace(clause, "");
    let words: Vec<&str> = clause
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '-'))
        .collect();
    let first = *words.first()?;
    if NON_TOPIC.contains(&first) || matches!(first, "my" | "our" | "his" | "their") {
        return None;
    }
    let end = first_verb(&words).filter(|end| *end <= 5)?;
    Some(words[..end].join(" "))
}

impl Extractor for RulesExtractor {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>> {
        Box::pin(async move {
            // "your X" is the X of the user the message answers (`people.rs`).
            let message = input.persona_message;
            let Some((addressee, addressed)) = super::people::addressee(input)
                .and_then(|who| Some((who, super::people::addressed(message, who)?)))
            else {
                return Ok(self.extract_text(message));
            };
            let mut opinions = self.extract_text(&addressed);
            // "maya's" alone names nobody's thing: a clause the rewrite left without its object.
            opinions.retain(|opinion| !opinion.name.trim_end().ends_with("'s"));
            for opinion in &mut opinions {
                // The evidence quotes what the persona said: the sentence the rewrite came from.
                if !super::evidence_in_message(&opinion.evidence, message) {
                    opinion.evidence =
                        super::people::said_as(message, addressee, &opinion.evidence)
                            .unwrap_or(message)
                            .trim()
                            .to_string();
                }
            }
            Ok(opinions)
        })
    }
}

/// Sounds of conversation, not things: "oooh", "hm", "hahaha", "ugh", "shoot".
fn is_interjection(word: &str) -> bool {
    INTERJECTION.is_match(word)
}

fn sentences(message: &str) -> Vec<String> {
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
fn without_tag_question(sentence: &str) -> &str {
    match TAG.find(sentence) {
        Some(tag) if tag.start() > 0 => &sentence[..tag.start()],
        _ => sentence,
    }
}

fn clauses(sentence: &str) -> Vec<String> {
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

/// Lower-case, straight apostrophes, single spaces.
fn normalise(text: &str) -> String {
    let text = text
        .replace(['\u{2019}', '\u{2018}'], "'")
        .replace(['\u{201c}', '\u{201d}'], "\"");
    // Emoticons and brackets carry no words: "I am a big Marvel fan :)", "(Love McDonalds)".
    // "I'm like really into X", "im in to computers": chat's filler and spelling.
    let text = text.to_lowercase();
    let text = EMOTICON.replace_all(&text, " ");
    let text = CHAT_LIKE.replace_all(&text, "${subject} ${degree}");
    let text = IN_TO.replace_all(&text, "${subject} ${degree}into");
    TITLE
        .replace_all(&text, "${title} ")
        .split_whitespace()
        .map(chat_spelling)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Chat spells without apostrophes and runs words together ("i dont like it", "kinda", "x >>>
/// y"): the usual spelling, so the patterns read it.
fn chat_spelling(word: &str) -> &str {
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

/// Every opinion of one clause: a comparative gives two (the preferred thing `for`, the other
/// `against`), anything else at most one.
fn read_clause_all(clause: &str, sentence: &str) -> Vec<ExtractedOpinion> {
    let trimmed = clause.trim().trim_end_matches(['.', '!', ';', ',']).trim();
    if trimmed.ends_with('?') || sentence.trim_end().ends_with('?') {
        return Vec::new();
    }
    // Before the filler goes: "so into bouldering" keeps its "so".
    let trimmed = with_subject(trimmed);
    let stripped = LEADING_FILLER.replace(&trimmed, "").to_string();
    let stripped = ADMISSION.replace(&stripped, "").to_string();
    let stripped = LEADING_FILLER.replace(&stripped, "").to_string();
    let stripped = STANCE_OPENER.replace(&stripped, "").to_string();
    let stripped = match ROLE_OPENER.captures(&stripped) {
        Some(c)
            if !matches!(
                &c["speaker"],
                "child" | "kid" | "teen" | "teenager" | "boy" | "girl" | "student" | "baby"
            ) =>
        {
            stripped[c
                .name("next")
                .expect("the view always starts somewhere")
                .start()..]
                .to_string()
        }
        _ => stripped,
    };
    let stripped = AS_FAR_AS.replace(&stripped, "to me, ").to_string();
    let stripped = CONVINCED.replace(&stripped, "i think ").to_string();
    let stripped = ASIDE.replace_all(&stripped, " ").to_string();
    let stripped = with_subject(&stripped);
    // "I can't say I'm fond of X", "I wouldn't say I'm a fan of X": "I'm not fond of X".
    let stripped = CANT_SAY_IM.replace(&stripped, "i'm not ").to_string();
    // "I personally am not a fan of X" is "I am not a fan of X".
    let stripped = ADVERB_BEFORE_AM.replace(&stripped, "i am").to_string();
    if let Some(c) = ONE_THING.captures(&stripped) {
        let stance = if matches!(
            &c["verb"],
            "hate"
                | "can't stand"
                | "dislike"
                | "despise"
                | "detest"
                | "loathe"
                | "can't abide"
                | "dread"
        ) {
            Stance::Against
        } else {
            Stance::For
        };
        return make(ONE_THING, &c["topic"], stance, sentence, &stripped)
            .into_iter()
            .collect();
    }
    // "Something I don't like about the USA is that everyone…", "my favourite thing about
    // fall is how the leaves turn": what is said of a thing's trait, told as a clause, is said
    // of the thing. (A noun after "is" is the trait itself, read below: "…is the noise",
    // "my favourite part of winter is the first snowfall".)
    if let Some(c) = ABOUT_X_IS_HOW.captures(&stripped) {
        let disliked = matches!(&c["verb"], "hate" | "dislike" | "despise" | "can't stand");
        let stance = flip(
            if disliked {
                Stance::Against
            } else {
                Stance::For
            },
            c.name("negation").is_some(),
        );
        return make(ABOUT_X_IS_HOW, &c["topic"], stance, sentence, &stripped)
            .into_iter()
            .collect();
    }
    if let Some(c) = FAVOURITE_ABOUT.captures(&stripped) {
        return make(
            FAVOURITE_ABOUT,
            &c["topic"],
            Stance::For,
            sentence,
            &stripped,
        )
        .into_iter()
        .collect();
    }
    // "I always feel better when I run", "it's nice when I meet new people".
    if let Some(c) = BETTER_WHEN_I.captures(&stripped) {
        return make(BETTER_WHEN_I, &c["topic"], Stance::For, sentence, &stripped)
            .into_iter()
            .collect();
    }
    // "More free time would be nice": a wish is a liking, though it says "would".
    if let Some(c) = WOULD_BE_NICE.captures(&stripped) {
        return make(WOULD_BE_NICE, &c["topic"], Stance::For, sentence, &stripped)
            .into_iter()
            .collect();
    }
    // "If we're talking favourite gods, I'd go with Athena": the "if" names the question.
    if let Some(c) = FAVOURITE_IF.captures(&stripped) {
        return make(FAVOURITE_IF, &c["topic"], Stance::For, sentence, &stripped)
            .into_iter()
            .collect();
    }
    if is_hypothetical(&stripped)
        || stripped.contains("whether ")
        || is_reported(&stripped)
        || is_a_past_view(&stripped)
    {
        return Vec::new();
    }
    // "I like reading, cooking, eating and learning": one liking per item.
    if let Some(c) = LIKING_OF_A_LIST.captures(&stripped) {
        let items: Vec<&str> = c["items"]
            .split(", ")
            .flat_map(|item| item.split(" and "))
            .map(|item| item.trim().trim_start_matches("and ").trim())
            .filter(|item| {
                !item.is_empty()
                    && !matches!(
                        *item,
                        "all of that" | "all that" | "stuff like that" | "so on" | "etc" | "more"
                    )
            })
            .collect();
        let enumerated = c["items"]
            .rsplit(", ")
            .next()
            .is_some_and(|last| last.contains("and "));
        if enumerated
            && items.len() >= 2
            && items
                .iter()
                .all(|item| item.split_whitespace().count() <= 3)
        {
            return items
                .iter()
                .filter_map(|item| read_clause(&format!("{} {item}", &c["before"]), sentence))
                .map(|opinion| read_within(LIKING_OF_A_LIST, opinion))
                .collect();
        }
    }
    // "I love both cats and dogs", "both jazz and blues move me": one view of each.
    // "Neither tea nor coffee appeals to me", "I like neither": the view of each, denied.
    if let Some(c) = BOTH_OR_NEITHER.captures(&stripped)
        && !stripped.contains(" than ")
    {
        let before = &stripped[..c.get(0).expect("group 0 always matches").start()];
        let tail: Vec<&str> = c["other"].split_whitespace().collect();
        // The second item ends where the clause's verb starts ("blues | move me").
        let end = (1..tail.len())
            .find(|&i| matches!(tail.get(i + 1), Some(&("me" | "us" | "to"))))
            .into_iter()
            .chain(first_verb(&tail))
            .min()
            .unwrap_or(tail.len());
        let neither = c.name("negation").is_some();
        if end <= 3 {
            let second = tail[..end].join(" ");
            let rest = tail[end..].join(" ");
            let mut found = Vec::new();
            for item in [&c["topic"], second.as_str()] {
                let clause = format!("{before}{item} {rest}");
                for mut opinion in read_clause_all(clause.trim(), sentence) {
                    if neither {
                        opinion.stance = flip(opinion.stance, true);
                    }
                    found.push(read_within(BOTH_OR_NEITHER, opinion));
                }
            }
            if found.len() == 2 {
                return found;
            }
        }
        if neither {
            return Vec::new();
        }
    }
    // "My favourites are pizza, tacos and sushi", "some of my favourite bands are Radiohead
    // and the Smiths": one liking per item.
    if let Some(c) = FAVOURITE_FIRST.captures(&stripped)
        && let Some(items) = favourite_items(&c[0], &c["topic"])
    {
        return items
            .iter()
            .filter_map(|item| make(FAVOURITE_FIRST, item, Stance::For, sentence, &stripped))
            .collect();
    }
    if let Some((rule, topic, stance)) = phrases::read_phrase(&stripped) {
        return make(rule, &topic, stance, sentence, &stripped)
            .into_iter()
            .collect();
    }
    if let Some(pair) = comparative(&stripped, sentence) {
        return pair;
    }
    read_clause(&stripped, sentence).into_iter().collect()
}

/// The items of a favourites list: "pizza, tacos and sushi" (enumerated with commas), or, when
/// the favourites are plural, "radiohead and the smiths" ("rock and roll" stays one thing: no
/// article marks a second item). `None` when `rest` names one thing.
fn favourite_items(whole: &str, rest: &str) -> Option<Vec<String>> {
    let end = [
        " because ",
        " but ",
        " since ",
        " though ",
        " which ",
        " when ",
        " so ",
    ]
    .iter()
    .filter_map(|cut| rest.find(cut))
    .min()
    .unwrap_or(rest.len());
    let list = rest[..end].trim().trim_end_matches(['.', '!', ';']);
    let mut items: Vec<&str> = list.split(", ").collect();
    if items.len() >= 2 {
        // "tacos and sushi" / "tacos or sushi" at the end; a leading "and" / "or" goes below.
        let last = items.pop()?;
        items.extend(last.split(" and ").flat_map(|item| item.split(" or ")));
    } else {
        let plural = whole.contains("favorites ")
            || whole.contains("favourites ")
            || whole.contains(" are ");
        if !plural {
            return None;
        }
        items = list
            .split(" and the ")
            .flat_map(|item| item.split(" and my "))
            .collect();
    }
    let items: Vec<String> = items
        .iter()
        .map(|item| {
            let item = item.trim();
            ["and ", "or "]
                .iter()
                .find_map(|lead| item.strip_prefix(lead))
                .unwrap_or(item)
                .to_string()
        })
        .filter(|item| !item.is_empty())
        .collect();
    (items.len() >= 2
        && items
            .iter()
            .all(|item| item.split_whitespace().count() <= 5))
    .then_some(items)
}

/// Chat drops the "I": "absolutely adore hedgehogs", "big fan of handwritten notes", "not a
/// fan of cold pizza", "so into bouldering". The subject is put back so the usual forms read
/// them. Words that open other sentences too ("enjoy your meal", "into the woods", "done with
/// the report") count only where nothing else could be meant.
fn with_subject(clause: &str) -> String {
    let clause = REPEATED_LOVE.replace(clause, "love");
    match SUBJECTLESS.captures(&clause) {
        Some(c) if c.name("verb").is_some() => format!("i {clause}"),
        Some(c) if c.name("have").is_some() => format!("i have {clause}"),
        Some(c) if c.name("verb2").is_some() => format!("i {clause}"),
        Some(_) => format!("i'm {clause}"),
        None => clause.to_string(),
    }
}

/// "If…", "imagine…", "suppose…", "would you…": not the persona's view.
fn is_hypothetical(clause: &str) -> bool {
    [
        "if ",
        "unless ",
        "would ",
        "imagine ",
        "suppose ",
        "supposing ",
        "what if ",
        "say i ",
        "let's say ",
        "let me play ",
        "even if ",
        "not that ",
        "hopefully ",
    ]
    .iter()
    .any(|start| clause.starts_with(start))
}

/// "As a child, I loved trains", "growing up, I hated broccoli": a view the persona held once,
/// like "I used to love X", is not one it holds now. "The weather was terrible yesterday" is
/// about a moment, not a standing view.
fn is_a_past_view(clause: &str) -> bool {
    PAST.is_match(clause)
}

/// Someone else's view reported, or the user's view restated: "my friend says…", "you
/// mentioned…", "so you're saying…".
fn is_reported(clause: &str) -> bool {
    // "Nothing says home like fresh bread" is an idiom, not a report.
    REPORTED.is_match(clause) && !clause.starts_with("i ") && !clause.starts_with("nothing says")
}

/// The comparatives: (preferred `for`, other `against`); a pronoun side is left out.
fn comparative(clause: &str, sentence: &str) -> Option<Vec<ExtractedOpinion>> {
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
    {
        return Some(
            make(X_FOR_ME, c["topic"].trim(), Stance::For, sentence, clause)
                .into_iter()
                .collect(),
        );
    }
    None
}

fn read_clause(clause: &str, sentence: &str) -> Option<ExtractedOpinion> {
    let clause = clause.trim().trim_end_matches(['.', '!', ';', ',']).trim();
    if clause.ends_with('?') || sentence.trim_end().ends_with('?') {
        return None;
    }
    let clause = LEADING_FILLER.replace(clause, "").to_string();
    if clause.starts_with("if ")
        || clause.starts_with("unless ")
        || clause.starts_with("would ")
        || clause.contains("i used to ")
        || clause.contains("i once ")
        || clause.contains("i would ")
        || clause.contains("i'd ") && !clause.contains("i'd say")
    {
        return None;
    }
    if let Some(c) = THING_I_LIKE.captures(&clause)
        && c["topic"].split_whitespace().count() <= 4
    {
        let positive = !matches!(
            &c["verb"],
            "hate" | "dislike" | "despise" | "loathe" | "dread" | "avoid" | "can't stand"
        );
        let stance = flip(
            if positive {
                Stance::For
            } else {
                Stance::Against
            },
            c.name("negation").is_some() ^ c.name("negation2").is_some(),
        );
        return make(THING_I_LIKE, &c["topic"], stance, sentence, &clause);
    }
    // "Linux, always Linux!": the choice said twice.
    if let Some(c) = ALWAYS_REPEATED.captures(&clause)
        && c["topic"] == c["again"]
        && c["topic"].split_whitespace().count() <= 3
    {
        return make(ALWAYS_REPEATED, &c["topic"], Stance::For, sentence, &clause);
    }
    // Order matters: negated forms before the plain ones they contain.
    if let Some(c) = NOT_FAN.captures(&clause) {
        return make(NOT_FAN, &c["topic"], Stance::Against, sentence, &clause);
    }
    if let Some(c) = NEGATED_VERB.captures(&clause) {
        return make(
            NEGATED_VERB,
            &c["topic"],
            Stance::Against,
            sentence,
            &clause,
        );
    }
    if let Some(c) = CANT_GET_ENOUGH.captures(&clause) {
        return make(CANT_GET_ENOUGH, &c["topic"], Stance::For, sentence, &clause);
    }
    if let Some(c) = NEGATIVE_VERB.captures(&clause) {
        if in_relative_clause(&clause, c.get(0).map_or(0, |m| m.start())) {
            return None;
        }
        let rest = c["topic"].trim();
        // "I hate to say it", "I hate to interrupt": speech acts, not opinions.
        if is_speech_act(rest) {
            return None;
        }
        return make(NEGATIVE_VERB, rest, Stance::Against, sentence, &clause);
    }
    if let Some(c) = TIRED_OF.captures(&clause) {
        return make(TIRED_OF, &c["topic"], Stance::Against, sentence, &clause);
    }
    if let Some(c) = ONE_I_LIKE_MOST.captures(&clause) {
        return make(ONE_I_LIKE_MOST, &c["topic"], Stance::For, sentence, &clause);
    }
    if let Some(c) = FAVOURITE_FIRST.captures(&clause) {
        return make(FAVOURITE_FIRST, &c["topic"], Stance::For, sentence, &clause);
    }
    if let Some(c) = FAVOURITE_LAST.captures(&clause) {
        return make(FAVOURITE_LAST, &c["topic"], Stance::For, sentence, &clause);
    }
    if let Some(c) = FAN.captures(&clause) {
        // "I'm interested in hearing more": the conversation, not an interest.
        if ["hearing", "knowing", "seeing", "talking", "learning more"]
            .iter()
            .any(|w| c["topic"].starts_with(w))
        {
            return None;
        }
        return make(FAN, &c["topic"], Stance::For, sentence, &clause);
    }
    if let Some(c) = LOVE_HOW.captures(&clause) {
        let stance = if matches!(&c["verb"], "hate" | "dislike" | "can't stand") {
            Stance::Against
        } else {
            Stance::For
        };
        return make(
            LOVE_HOW,
            &subject_before_verb(&c["topic"])?,
            stance,
            sentence,
            &clause,
        );
    }
    if let Some(c) = THAT_ABOUT.captures(&clause) {
        let against = matches!(&c["verb"], "hate" | "dislike" | "can't stand");
        return make(
            THAT_ABOUT,
            &c["topic"],
            if against {
                Stance::Against
            } else {
                Stance::For
            },
            sentence,
            &clause,
        );
    }
    if let Some(c) = POSITIVE_VERB.captures(&clause) {
        if in_relative_clause(&clause, c.get(0).map_or(0, |m| m.start())) {
            return None;
        }
        let verb = &c["verb"];
        // "I like to think…", "I appreciate you…": not an opinion about a thing.
        let rest = c["topic"].trim();
        if (verb == "like" || verb == "love")
            && (rest.starts_with("to think") || rest.starts_with("to believe"))
            || verb == "like" && {
                // "so I like asked him a question": "like" as a filler.
                let mut words = rest.split_whitespace();
                words.next().is_some_and(|w| w.ends_with("ed"))
                    && matches!(
                        words.next(),
                        Some("him" | "her" | "them" | "me" | "it" | "us" | "you")
                    )
            }
            || verb == "dig"
                && matches!(
                    rest.split_whitespace().next(),
                    Some("deeper" | "into" | "in" | "through" | "around" | "up" | "out")
                )
            || is_speech_act(rest)
        {
            return None;
        }
        return make(POSITIVE_VERB, rest, Stance::For, sentence, &clause);
    }
    if let Some(c) = NOTHING_BEATS.captures(&clause) {
        return make(NOTHING_BEATS, &c["topic"], Stance::For, sentence, &clause);
    }
    if let Some(c) = MAKES_BETTER.captures(&clause) {
        let stance = if matches!(
            &c["judgement"],
            "worse" | "meaner" | "sadder" | "lazier" | "dumber" | "angrier"
        ) {
            Stance::Against
        } else {
            Stance::For
        };
        let subject = c["topic"].trim();
        if subject.split_whitespace().count() <= 4 {
            return make(MAKES_BETTER, subject, stance, sentence, &clause);
        }
    }
    if let Some(c) = GROWS_ON_ME.captures(&clause) {
        let subject = c["topic"].trim();
        if subject.split_whitespace().count() <= 4 {
            return make(GROWS_ON_ME, subject, Stance::For, sentence, &clause);
        }
    }
    if let Some(c) = DENIED_WORTH.captures(&clause) {
        return make(
            DENIED_WORTH,
            &c["topic"],
            Stance::Against,
            sentence,
            &clause,
        );
    }
    if let Some(c) = SHOULD_BE.captures(&clause) {
        let stance = if matches!(
            &c["judgement"],
            "banned"
                | "illegal"
                | "outlawed"
                | "abolished"
                | "scrapped"
                | "stopped"
                | "avoided"
                | "retired"
                | "forgotten"
        ) {
            Stance::Against
        } else {
            Stance::For
        };
        let subject = c["topic"].trim();
        if subject.split_whitespace().count() <= 5 {
            return make(SHOULD_BE, subject, stance, sentence, &clause);
        }
    }
    // "Jazz isn't great" is read as "jazz is not great". Not comparatives: "tea isn't
    // better than coffee" judges neither.
    let clause = if clause.contains(" than ") {
        clause
    } else {
        expand_negated_copulas(&clause)
    };
    if let Some(c) = JUDGE_AFTER_VERB.captures(&clause) {
        let denied = c.name("negation").is_some() ^ c.name("negation2").is_some();
        let stance = polarity(&c["judgement"])?;
        return make(
            JUDGE_AFTER_VERB,
            &c["topic"],
            flip(stance, denied),
            sentence,
            &clause,
        );
    }
    if let Some(c) = FIND.captures(&clause) {
        let (topic, stance) = split_topic_judgement(&c["topic"])?;
        return make(
            FIND,
            &topic,
            flip(stance, c.name("negation").is_some()),
            sentence,
            &clause,
        );
    }
    if let Some(c) = MY_THING.captures(&clause) {
        let subject = c["topic"].trim();
        if subject.split_whitespace().count() <= 4 {
            let stance = flip(
                Stance::For,
                c.name("negation").is_some() || clause.contains("not my "),
            );
            return make(MY_THING, subject, stance, sentence, &clause);
        }
    }
    if let Some(c) = EFFECT_ON_ME.captures(&clause) {
        let subject = c["topic"].trim();
        if subject.split_whitespace().count() <= 4 {
            let stance = if c.name("disliked").is_some() {
                Stance::Against
            } else {
                Stance::For
            };
            return make(EFFECT_ON_ME, subject, stance, sentence, &clause);
        }
    }
    if let Some(c) = JUDGE_PLAIN.captures(&clause) {
        // Without an "I" or an opinion marker, only clearly evaluative words count: "jazz is
        // great" is an opinion, "the meeting is at noon" is not.
        // "Runescape got way too complicated": excess is a complaint whatever the word.
        let between = &clause
            [c.name("topic").map_or(0, |m| m.end())..c.name("judgement").map_or(0, |m| m.start())];
        let excessive = between.split_whitespace().any(|word| word == "too")
            && !c["judgement"]
                .split_whitespace()
                .next()
                .is_some_and(lexicon::is_modifier);
        // "X gets better", "OLED gets richer blacks": a change, not a verdict, unless it is
        // an excess ("got way too complicated").
        let changed = between
            .split_whitespace()
            .any(|word| matches!(word, "got" | "gets" | "gotten" | "became" | "becomes"));
        if changed && !excessive {
            return None;
        }
        // "the writers were having a hard time making an interesting show": a verb in
        // progress, not a judgement (what a later "and" holds judges something else).
        if c["judgement"]
            .split_whitespace()
            .next()
            .is_some_and(|w| w.ends_with("ing") && polarity(w).is_none())
        {
            return None;
        }
        let stance = match judgement_polarity(&c["judgement"]) {
            Some(stance) => stance,
            None if excessive => Stance::Against,
            None => return None,
        };
        let marked = MARKED.is_match(&clause);
        // "well that's fine, hot dogs are gross": the subject is what follows the last comma.
        let subject = c["topic"].rsplit(", ").next().unwrap_or(&c["topic"]).trim();
        // Counted whole, not up to where `make` would cut the topic: longer subjects ("a
        // rainy sunday with a book") were found right only three times in five on the
        // held-out sets, under the precision the extractor keeps.
        if !marked && subject.split_whitespace().count() > 4 {
            return None;
        }
        // "Some people feel happy", "some films are great": a part judged, not the whole.
        if subject.starts_with("some ") {
            return None;
        }
        // "My day was really good", "my L key is broken", "my mom's dream was funny": the
        // persona's own life told, not a view of a kind of thing.
        if subject
            .split_whitespace()
            .any(|w| matches!(w, "my" | "our"))
        {
            return None;
        }
        return make(
            JUDGE_PLAIN,
            subject,
            flip(stance, c.name("negation").is_some()),
            sentence,
            &clause,
        );
    }
    None
}

/// "isn't" → "is not", and the like, so the judgement patterns see the copula and its "not".
fn expand_negated_copulas(clause: &str) -> String {
    clause
        .split(' ')
        .map(|word| match word {
            "isn't" => "is not",
            "aren't" => "are not",
            "wasn't" => "was not",
            "weren't" => "were not",
            "doesn't" => "does not",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the "I" at `at` opens a relative clause ("the book that I love is…"): its object
/// is the noun before it, not the words after the verb.
fn in_relative_clause(clause: &str, at: usize) -> bool {
    let before = clause[..at].trim_end();
    before.ends_with(" that") || before.ends_with(" which") || before.ends_with(" who")
}

/// The stance of a judgement that may join two: in "intense but rewarding" the part after
/// "but" is the verdict; in "confusing and stressful" the first evaluative part is.
fn judgement_polarity(text: &str) -> Option<Stance> {
    if let Some((before, after)) = text.split_once(" but ") {
        return polarity(after).or_else(|| polarity(before));
    }
    text.split(" and ").find_map(polarity)
}

/// Where the verb of "fog softens the city" / "keyboards are loud" is: the first word after
/// the subject's first that is a common verb, a word in -es / -ed, or a word in -s before a
/// determiner or object.
fn first_verb(words: &[&str]) -> Option<usize> {
    const VERBS: &[&str] = &[
        "is", "are", "was", "were", "'s", "'re", "has", "have", "had", "can", "could", "will",
        "would", "should", "must", "do", "does", "did", "feel", "feels", "look", "looks", "sound",
        "sounds", "seem", "seems", "taste", "tastes", "smell", "smells", "get", "gets", "keep",
        "keeps", "make", "makes", "bring", "brings", "turn", "turns", "go", "goes", "light",
        "lights", "never", "always", "just", "really",
    ];
    const OBJECT_STARTS: &[&str] = &[
        "the",
        "a",
        "an",
        "my",
        "every",
        "everything",
        "up",
        "me",
        "us",
        "all",
        "into",
        "over",
        "through",
        "our",
        "any",
        "its",
    ];
    (1..words.len()).find(|&i| {
        let word = words[i];
        let in_s = word.len() > 3 && word.ends_with('s') && !word.ends_with("ss");
        VERBS.contains(&word)
            || (word.len() > 3 && (word.ends_with("es") || word.ends_with("ed")))
            || (in_s
                && words
                    .get(i + 1)
                    .is_some_and(|next| OBJECT_STARTS.contains(next)))
    })
}

/// The noun phrase that opens "snow muffles everything" / "the city gets quiet": the words
/// before the first verb-like word (at most four).
fn subject_before_verb(rest: &str) -> Option<String> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let window = words.len().min(4);
    // A short clause's last word in -s (within four) is most often its verb: "how the city
    // sleeps".
    let fourth_in_s = (window >= 2).then(|| window - 1).filter(|&i| {
        let word = words[i];
        word.len() > 3 && word.ends_with('s') && !word.ends_with("ss")
    });
    let end = [first_verb(&words), fourth_in_s]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(window);
    if matches!(
        words.first(),
        Some(&("you" | "your" | "he" | "she" | "they" | "people" | "everyone"))
    ) {
        return None;
    }
    (end > 0).then(|| words[..end].join(" "))
}

/// "to say it", "to admit", "to interrupt": after "I hate" / "I love", a speech act.
fn is_speech_act(rest: &str) -> bool {
    const ACTS: &[&str] = &[
        "say",
        "admit",
        "break",
        "ask",
        "interrupt",
        "bother",
        "tell",
        "disappoint",
        "see",
        "hear",
        "point",
        "be the one",
        "rain on",
        "burst",
    ];
    rest.strip_prefix("to ").is_some_and(|act| {
        // "I hate to interrupt, but…": the act may end at a comma.
        let act = act.replace(',', " ");
        let act = act.trim_end();
        ACTS.iter()
            .any(|a| act == *a || act.starts_with(&format!("{a} ")))
    })
}

/// Splits "rainy days so calming" into the topic and the judgement's stance by trying each
/// split point: the topic is the shortest prefix after which an evaluative word follows
/// (degree words and "not" in between).
fn split_topic_judgement(rest: &str) -> Option<(String, Stance)> {
    const DEGREE: &[&str] = &[
        "really",
        "very",
        "so",
        "truly",
        "incredibly",
        "deeply",
        "genuinely",
        "quite",
        "pretty",
        "rather",
        "totally",
        "absolutely",
        "extremely",
        "simply",
        "just",
        "somewhat",
        "utterly",
        "hugely",
        "wildly",
        "massively",
        "actually",
        "honestly",
        "still",
        "always",
        "often",
        "completely",
        "fairly",
        "terribly",
        "remarkably",
        "surprisingly",
        "oddly",
        "strangely",
        "endlessly",
        "seriously",
        "way",
        "too",
    ];
    let words: Vec<&str> = rest.split_whitespace().collect();
    for split in 1..words.len() {
        let mut tail = &words[split..];
        let mut denied = false;
        while let Some(first) = tail.first() {
            if DEGREE.contains(first) {
                tail = &tail[1..];
            } else if *first == "not" {
                denied = !denied;
                tail = &tail[1..];
            } else {
                break;
            }
        }
        if tail.is_empty() {
            break;
        }
        if let Some(stance) = polarity(&tail.join(" ")) {
            return Some((words[..split].join(" "), flip(stance, denied)));
        }
    }
    None
}

/// An opinion a reader found by reading part of a clause again (an item of a list, one side
/// of "both X and Y"): both rules are its provenance, `outer > inner`.
fn read_within(outer: Rule, mut opinion: ExtractedOpinion) -> ExtractedOpinion {
    opinion.found_by = Some(match opinion.found_by {
        Some(inner) => format!("{} > {inner}", outer.name()),
        None => outer.name().to_string(),
    });
    opinion
}

fn flip(stance: Stance, denied: bool) -> Stance {
    match (stance, denied) {
        (stance, false) => stance,
        (Stance::For, true) => Stance::Against,
        (Stance::Against, true) => Stance::For,
    }
}

/// The opinion `rule` read: its topic cleaned and checked, its category, strength and
/// evidence.
fn make(
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
                | "being"
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
    if words.len() == 1 && NON_TOPIC.contains(&words[0]) {
        return None;
    }
    // "10 is a good number", "I like doing (a lot of work)", "I enjoy a fresh, (crisp
    // benjamin)": a number, a bare light verb, or a judgement cut from its noun by a comma.
    // ("I hate the cold", "honesty is essential": nouns that judge are still topics.)
    if words.len() == 1
        && (words[0].chars().all(|ch| ch.is_ascii_digit())
            || matches!(
                words[0],
                "doing" | "going" | "having" | "getting" | "making" | "being" | "taking" | "trying"
            )
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
    // Chat tails: "linux either", "play for fun though", "bake probably", "learning about".
    while let Some(last) = words.last()
        && matches!(
            *last,
            "though"
                | "tho"
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
    // "into a pile of", "bond with": cut inside a phrase; "weather today": a moment.
    if matches!(
        words.last(),
        Some(
            &("of"
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
        || words
            .iter()
            .any(|w| matches!(*w, "myself" | "yourself" | "ourselves"))
    {
        return None;
    }
    // Pronouns and possessives name nothing on their own: "his newer works", "i wish i".
    if words.is_empty() {
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
    // "turning it off", "love him man": a pronoun inside names nothing the memory can keep.
    if words.len() > 1
        && words
            .iter()
            .any(|w| matches!(*w, "it" | "him" | "them" | "her"))
    {
        return None;
    }
    if matches!(
        words.last(),
        Some(&("who" | "which" | "what" | "when" | "where"))
    ) {
        return None;
    }
    // "nice man that", "yess i", "wait you": a subject that ends on a pronoun was cut wrong.
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
        category: category_for(&format!("{name} {lowered}")).to_string(),
        name,
        opinion,
        stance,
        strength,
        related_user_ids: Vec::new(),
        evidence: sentence.trim().to_string(),
        found_by: Some(rule.name().to_string()),
    })
}

/// The sentence as a standalone opinion: trimmed, capitalised, ending in punctuation.
fn first_person_opinion(sentence: &str) -> String {
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

/// A category from keywords; the store falls back to "philosophical" for anything else.
pub fn category_for(text: &str) -> &'static str {
    const TABLE: &[(&str, &[&str])] = &[
        (
            "culinary",
            &[
                "food",
                "tea",
                "coffee",
                "cilantro",
                "pizza",
                "cook",
                "bread",
                "cheese",
                "chocolate",
                "wine",
                "beer",
                "soup",
                "spicy",
                "sushi",
                "pineapple",
                "breakfast",
                "dinner",
                "lunch",
                "dessert",
                "cake",
                "fruit",
                "vegetable",
                "meal",
                "recipe",
                "taste",
                "flavor",
                "flavour",
                "eat",
                "mushroom",
                "garlic",
                "curry",
                "pasta",
                "noodle",
                "olive",
                "coriander",
                "espresso",
                "latte",
                "kimchi",
                "tofu",
                "baking",
                "salt",
            ],
        ),
        (
            "musical",
            &[
                "music",
                "jazz",
                "song",
                "band",
                "album",
                "opera",
                "piano",
                "guitar",
                "symphony",
                "melody",
                "rock",
                "pop",
                "classical",
                "violin",
                "concert",
                "sing",
                "choir",
                "hip hop",
                "rap",
                "vinyl",
                "playlist",
                "bach",
                "mozart",
                "beatles",
            ],
        ),
        (
            "literary",
            &[
                "book",
                "novel",
                "poem",
                "poetry",
                "author",
                "story",
                "stories",
                "reading",
                "literature",
                "fiction",
                "prose",
                "writer",
                "library",
                "tolstoy",
                "austen",
                "haiku",
                "shakespeare",
                "sci-fi",
                "fantasy",
                "memoir",
                "essay",
            ],
        ),
        (
            "technological",
            &[
                "code",
                "coding",
                "rust",
                "python",
                "javascript",
                "software",
                "computer",
                "programming",
                "ai",
                "tech",
                "internet",
                "app",
                "phone",
                "linux",
                "keyboard",
                "robot",
                "algorithm",
                "typescript",
                "tabs",
                "spaces",
                "vim",
                "emacs",
                "database",
                "smartphone",
                "gadget",
            ],
        ),
        (
            "nature",
            &[
                "rain", "forest", "ocean", "sea", "cat", "dog", "animal", "bird", "tree", "flower",
                "mountain", "river", "garden", "snow", "autumn", "winter", "summer", "spring",
                "season", "sunset", "storm", "thunder", "star", "moon", "weather", "owl", "whale",
                "moss", "fog", "beach", "hiking",
            ],
        ),
        (
            "ethical",
            &[
                "honesty",
                "lying",
                "lie",
                "cruelty",
                "justice",
                "kindness",
                "fairness",
                "cheating",
                "loyalty",
                "truth",
                "moral",
                "ethic",
                "greed",
                "generosity",
                "forgiveness",
                "rudeness",
                "empathy",
                "privacy",
                "violence",
            ],
        ),
        (
            "aesthetic",
            &[
                "art",
                "painting",
                "design",
                "color",
                "colour",
                "architecture",
                "beauty",
                "fashion",
                "style",
                "font",
                "typography",
                "minimalism",
                "gothic",
                "brutalism",
                "sculpture",
                "photography",
                "aesthetic",
                "light",
                "candle",
            ],
        ),
        (
            "entertainment",
            &[
                "movie",
                "film",
                "game",
                "show",
                "tv",
                "television",
                "series",
                "anime",
                "cinema",
                "sitcom",
                "video game",
                "chess",
                "puzzle",
                "sport",
                "football",
                "soccer",
                "reality",
                "comedy",
                "horror",
                "netflix",
            ],
        ),
        (
            "social",
            &[
                "people",
                "party",
                "parties",
                "conversation",
                "friend",
                "crowd",
                "small talk",
                "gossip",
                "meeting",
                "community",
                "company",
                "chat",
                "smalltalk",
                "strangers",
                "networking",
            ],
        ),
        (
            "intellectual",
            &[
                "math",
                "science",
                "physics",
                "history",
                "learning",
                "philosophy",
                "logic",
                "chemistry",
                "biology",
                "astronomy",
                "language",
                "grammar",
                "etymology",
                "puzzles",
                "curiosity",
                "knowledge",
                "proof",
                "theory",
                "debate",
                "latin",
            ],
        ),
        (
            "personal",
            &[
                "morning", "sleep", "nap", "walk", "routine", "quiet", "solitude", "silence",
                "travel", "home", "journal", "exercise", "mornings", "nights", "weekend",
            ],
        ),
    ];
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .collect();
    for (category, keywords) in TABLE {
        for keyword in *keywords {
            let hit = if keyword.contains(' ') {
                text.contains(keyword)
            } else {
                words.iter().any(|w| {
                    *w == *keyword || (w.starts_with(keyword) && w.len() <= keyword.len() + 3)
                })
            };
            if hit {
                return category;
            }
        }
    }
    "philosophical"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<(String, Stance)> {
        RulesExtractor::new(8)
            .extract_text(text)
            .into_iter()
            .map(|o| (o.name, o.stance))
            .collect()
    }

    /// Each text reads as exactly the opinions listed, in order.
    fn assert_reads(cases: &[(&str, &[(&str, Stance)])]) {
        for (text, expected) in cases {
            let expected: Vec<(String, Stance)> =
                expected.iter().map(|(n, s)| (n.to_string(), *s)).collect();
            assert_eq!(read(text), expected, "{text}");
        }
    }

    #[test]
    fn reads_the_common_first_person_forms() {
        use Stance::{Against, For};
        let cases: &[(&str, &[(&str, Stance)])] = &[
            ("I love green tea.", &[("green tea", For)]),
            ("Honestly, jazz is underrated.", &[("jazz", For)]),
            // A topic named as a question, judged by the reply.
            ("Sailing? Love it.", &[("sailing", For)]),
            ("Mornings? Overrated.", &[("mornings", Against)]),
            ("Sushi? I went there last week.", &[]),
            // "it" / "them" is the previous clause's subject; the later view wins.
            (
                "Camping is uncomfortable, but I adore it.",
                &[("camping", For)],
            ),
            (
                "Brussels sprouts get a bad rap but I think they're delicious.",
                &[("brussels sprouts", For)],
            ),
            ("I tried it and I loved it.", &[]),
            (
                "I don't really like horror movies.",
                &[("horror movies", Against)],
            ),
            ("My favourite season is autumn.", &[("autumn", For)]),
            ("I think cilantro is disgusting.", &[("cilantro", Against)]),
            ("I don't think opera is boring at all.", &[("opera", For)]),
            (
                "I love jazz but I hate country music.",
                &[("jazz", For), ("country music", Against)],
            ),
            ("Do you like jazz?", &[]),
            ("I love it!", &[]),
            ("I find rainy days calming.", &[("rainy days", For)]),
            (
                "I don't find small talk very interesting.",
                &[("small talk", Against)],
            ),
            ("I used to love sushi.", &[]),
            ("The meeting is at noon.", &[]),
            ("I'm not a fan of small talk.", &[("small talk", Against)]),
            (
                "Nothing beats a rainy afternoon with a book.",
                &[("rainy afternoon", For)],
            ),
        ];
        assert_reads(cases);
    }

    #[test]
    fn a_question_the_persona_answers_itself_is_read_with_its_answer() {
        use Stance::{Against, For};
        let cases: &[(&str, &[(&str, Stance)])] = &[
            (
                "Coffee or tea? Tea, obviously.",
                &[("tea", For), ("coffee", Against)],
            ),
            (
                "Cats versus dogs? Cats, every time.",
                &[("cats", For), ("dogs", Against)],
            ),
            // The reply names neither side: no choice was made.
            ("Coffee or tea? Tea is ready when you are.", &[]),
            ("Favourite dessert? Mine's tiramisu.", &[("tiramisu", For)]),
            (
                "What's my favourite planet? Saturn, easily.",
                &[("saturn", For)],
            ),
            // The user's favourite is asked for; the persona has not given its own.
            ("What's your favourite film? Tell me more.", &[]),
            ("Ah, fresh bread. Bliss.", &[("fresh bread", For)]),
            // A judgement is not a topic.
            ("Oh, lovely. Great idea.", &[]),
            ("Ugh, mosquitoes.", &[("mosquitoes", Against)]),
            ("Ugh, I forgot my keys.", &[]),
        ];
        assert_reads(cases);
    }

    #[test]
    fn others_views_count_only_through_the_personas_reaction() {
        use Stance::{Against, For};
        let cases: &[(&str, &[(&str, Stance)])] = &[
            (
                "Everyone raves about sushi. I don't get the appeal.",
                &[("sushi", Against)],
            ),
            (
                "People say golf is boring, and they're right.",
                &[("golf", Against)],
            ),
            (
                "Lots of folks hate rain. Not me; I love it.",
                &[("rain", For)],
            ),
            (
                "Some folks love horror films. I'm one of them.",
                &[("horror films", For)],
            ),
            // No reaction: others' view alone is not the persona's.
            (
                "Many people say modern art is meaningless. What do you think?",
                &[],
            ),
            ("Everyone loves the new cafe.", &[]),
        ];
        assert_reads(cases);
    }

    #[test]
    fn openers_roles_and_kinds_of_person() {
        use Stance::{Against, For};
        let cases: &[(&str, &[(&str, Stance)])] = &[
            (
                "Hot take: breakfast for dinner is genius.",
                &[("breakfast for dinner", For)],
            ),
            (
                "Unpopular opinion, but summer is overrated.",
                &[("summer", Against)],
            ),
            (
                "Speaking as a chef, I think truffle oil is a gimmick.",
                &[("truffle oil", Against)],
            ),
            (
                "As a gamer, I'd say speedruns are pure art.",
                &[("speedruns", For)],
            ),
            // A role of the past: that view is not held now.
            ("As a child, I loved trains.", &[]),
            ("I'm not much of a cake person.", &[("cake", Against)]),
            ("I'm a dog person through and through.", &[("dog", For)]),
            (
                "I'm more of a night owl than a morning person.",
                &[("night owl", For), ("morning", Against)],
            ),
            // A trait of the persona is not a liking.
            ("I'm a shy person.", &[]),
            ("I'm a very patient person.", &[]),
            ("Yoga is too slow for me.", &[("yoga", Against)]),
            (
                "Pop music is fine, but it's not really my thing.",
                &[("pop music", Against)],
            ),
            ("I hate to interrupt, but your timer went off.", &[]),
        ];
        assert_reads(cases);
    }

    #[test]
    fn chat_without_a_subject_and_formal_liking_are_read() {
        use Stance::{Against, For};
        let cases: &[(&str, &[(&str, Stance)])] = &[
            ("Absolutely adore hedgehogs.", &[("hedgehogs", For)]),
            (
                "Big fan of handwritten notes.",
                &[("handwritten notes", For)],
            ),
            ("Not a fan of cold pizza, tbh.", &[("cold pizza", Against)]),
            ("So into bouldering right now.", &[("bouldering", For)]),
            (
                "Love love love a good road trip.",
                &[("good road trip", For)],
            ),
            // Imperatives and the conversation are not likings.
            ("Enjoy the show!", &[]),
            ("Love that idea!", &[]),
            ("Done with the report, here it is.", &[]),
            (
                "I hold a particular affection for rainy evenings.",
                &[("rainy evenings", For)],
            ),
            (
                "I harbour no great love for crowded festivals.",
                &[("crowded festivals", Against)],
            ),
            (
                "Modern architecture, in my estimation, lacks warmth.",
                &[("modern architecture", Against)],
            ),
            (
                "I'm team pancakes, not waffles.",
                &[("pancakes", For), ("waffles", Against)],
            ),
            ("I'm over the moon about it.", &[]),
            ("Trust me, the form is easy to fill in.", &[]),
        ];
        assert_reads(cases);
    }

    #[test]
    fn ideals_and_values_are_opinions_too() {
        use Stance::{Against, For};
        let cases: &[(&str, &[(&str, Stance)])] = &[
            ("Honesty is non-negotiable for me.", &[("honesty", For)]),
            ("Loyalty means a lot to me.", &[("loyalty", For)]),
            (
                "Fairness matters to me more than winning.",
                &[("fairness", For), ("winning", Against)],
            ),
            ("I stand for free speech.", &[("free speech", For)]),
            (
                "I refuse to support fast fashion.",
                &[("fast fashion", Against)],
            ),
            (
                "I think people should read more poetry.",
                &[("poetry", For)],
            ),
            ("The world needs less cynicism.", &[("cynicism", Against)]),
            (
                "Lying to children is never okay.",
                &[("lying to children", Against)],
            ),
            (
                "I'm deeply skeptical of astrology.",
                &[("astrology", Against)],
            ),
            // Others' ideals, questions and hypotheticals are not the persona's.
            ("Some say ambition is a vice.", &[]),
            ("Is honesty always the best policy?", &[]),
            ("If I were a politician, I'd fund libraries.", &[]),
            ("I believe in you!", &[]),
        ];
        assert_reads(cases);
    }

    #[test]
    fn another_writers_chatbot_forms() {
        use Stance::{Against, For};
        assert_reads(&[
            // A persona's measured register.
            (
                "I can't say I'm fond of crowded beaches.",
                &[("crowded beaches", Against)],
            ),
            (
                "Few things delight me more than a well-made sandwich.",
                &[("well-made sandwich", For)],
            ),
            (
                "Personally, I'd take a paperback over an e-reader any day.",
                &[("paperback", For), ("e-reader", Against)],
            ),
            (
                "If I'm being honest, I've never understood the appeal of golf.",
                &[("golf", Against)],
            ),
            (
                "I find something deeply comforting about rain on a window.",
                &[("rain", For)],
            ),
            (
                "There's something sad about empty malls.",
                &[("empty malls", Against)],
            ),
            (
                "There's no better sound than a crackling fire.",
                &[("crackling fire", For)],
            ),
            (
                "Modern architecture often strikes me as cold.",
                &[("modern architecture", Against)],
            ),
            ("He strikes me as a decent guy.", &[]),
            (
                "Classical music tends to calm me down.",
                &[("classical music", For)],
            ),
            (
                "I'd rather not spend an evening at a nightclub.",
                &[("spend an evening at a nightclub", Against)],
            ),
            ("I'd rather not say specifically.", &[]),
            (
                "Spreadsheets bring me a strange sense of peace.",
                &[("spreadsheets", For)],
            ),
            (
                "Punctuality matters a great deal to me.",
                &[("punctuality", For)],
            ),
            ("That means a lot to me.", &[]),
            (
                "I lean towards savoury breakfasts.",
                &[("savoury breakfasts", For)],
            ),
            (
                "I've grown quite attached to the ritual of morning coffee.",
                &[("ritual of morning coffee", For)],
            ),
            ("The ocean never fails to humble me.", &[("ocean", For)]),
            (
                "Board games bring out the best in people, I think.",
                &[("board games", For)],
            ),
            ("Poetry is one of my great loves.", &[("poetry", For)]),
            (
                "Science fiction is where my heart lives.",
                &[("science fiction", For)],
            ),
            ("Being outdoors recharges me.", &[("outdoors", For)]),
            // Contractions the patterns once read as "i 'll", "i 'd".
            (
                "I'll confess that reality TV is my weakness.",
                &[("reality tv", For)],
            ),
            (
                "As a chef, I'd say butter is essential.",
                &[("butter", For)],
            ),
            ("I'd be lost without my notebook.", &[("notebook", For)]),
            // Pairs read one item at a time; "neither" denies both.
            (
                "Neither tea nor coffee appeals to me.",
                &[("tea", Against), ("coffee", Against)],
            ),
            (
                "I love both green tea and black coffee.",
                &[("green tea", For), ("black coffee", For)],
            ),
            (
                "Both jazz and blues move me.",
                &[("jazz", For), ("blues", For)],
            ),
            // Clauses after ", but", ", though" and a subjectless "but hate".
            (
                "I love tea but hate coffee.",
                &[("tea", For), ("coffee", Against)],
            ),
            (
                "I adore autumn, though winter leaves me cold.",
                &[("autumn", For), ("winter", Against)],
            ),
            // Idioms of refusal and impatience.
            (
                "Honestly, winter can't end soon enough.",
                &[("winter", Against)],
            ),
            ("Summer can't come soon enough.", &[("summer", For)]),
            (
                "I wouldn't be caught dead at a nightclub.",
                &[("nightclub", Against)],
            ),
            (
                "You couldn't pay me to go camping.",
                &[("go camping", Against)],
            ),
            ("Camping? No thank you.", &[("camping", Against)]),
            ("My go-to is always a flat white.", &[("flat white", For)]),
            ("I'll pass on the message to her.", &[]),
            (
                "I tried kombucha, and I'd say it's delicious.",
                &[("kombucha", For)],
            ),
            (
                "Jazz, to my ear, is the most wonderful kind of music.",
                &[("jazz", For)],
            ),
            // The liking sits in a relative clause about the subject.
            ("Jazz is a genre I love.", &[("jazz", For)]),
            ("Envy is not a feeling that I enjoy.", &[("envy", Against)]),
            ("The book that I love is on the shelf.", &[]),
            // A question handed back does not make the statement a question.
            ("I'm a Barcelona fan, and you?", &[("barcelona", For)]),
            ("I'm a die-hard fan of the Celtics.", &[("celtics", For)]),
            (
                "I'm very interested in medieval history.",
                &[("medieval history", For)],
            ),
            ("I'm interested in hearing more.", &[]),
            ("I'm not incredibly fond of opera.", &[("opera", Against)]),
            ("I long for quiet evenings.", &[("quiet evenings", For)]),
            ("Linux, always Linux!", &[("linux", For)]),
            ("Money isn't everything.", &[("money", Against)]),
            ("No need for fancy gadgets.", &[("fancy gadgets", Against)]),
            ("Dogs are the life of the party!", &[("dogs", For)]),
            (
                "Frankly, I think cryptocurrency is overhyped.",
                &[("cryptocurrency", Against)],
            ),
            ("The harbour is pretty.", &[("harbour", For)]),
            // Degree, fame, difficulty and parts are not verdicts on the whole.
            ("I think embarrassment is a pretty strange emotion.", &[]),
            ("Chaucer is best known for The Canterbury Tales.", &[]),
            ("Golf is difficult.", &[]),
            ("Some people feel happy, others feel sad.", &[]),
            // Pronouns and possessives name nothing the memory could keep.
            ("I like his older novels more than his newer ones.", &[]),
            ("I wish I was the Mad Hatter.", &[]),
            ("I don't think many of them are practical.", &[]),
        ]);
    }

    #[test]
    fn peoples_chat_forms() {
        use Stance::{Against, For};
        assert_reads(&[
            ("Jazz isn't great.", &[("jazz", Against)]),
            ("Tea isn't better than coffee, it's just different.", &[]),
            (
                "Besides, I've always preferred tea over coffee.",
                &[("tea", For), ("coffee", Against)],
            ),
            (
                "I've always preferred quiet mornings.",
                &[("quiet mornings", For)],
            ),
            (
                "Some of my favorites are old westerns.",
                &[("old westerns", For)],
            ),
            ("One of my favorites is chess.", &[("chess", For)]),
            ("I've started to hate jazz.", &[("jazz", Against)]),
            ("I've come to love long walks.", &[("long walks", For)]),
            (
                "I like hiking, baking, chess and all of that.",
                &[("hiking", For), ("baking", For), ("chess", For)],
            ),
            ("I love poetry, especially haiku.", &[("poetry", For)]),
            (
                "Honestly I'm getting sick of porridge",
                &[("porridge", Against)],
            ),
            ("I haven't really liked opera either", &[("opera", Against)]),
            (
                "I think we can all agree that littering is bad.",
                &[("littering", Against)],
            ),
            ("Patience is key to everything.", &[("patience", For)]),
            ("Money can't buy happiness.", &[("money", Against)]),
            (
                "I'm glad we have public libraries.",
                &[("public libraries", For)],
            ),
            (
                "This reminds me how beautiful the desert is.",
                &[("desert", For)],
            ),
            ("You know what sucks about winter", &[("winter", Against)]),
            ("It's so fun to bake bread.", &[("bake bread", For)]),
            ("It doesn't feel good to be lazy.", &[("be lazy", Against)]),
            ("It's nice to meet you.", &[]),
            ("Cucumbers aren't my favorite.", &[("cucumbers", Against)]),
            (
                "Yeah me too, more sunshine would be nice",
                &[("sunshine", For)],
            ),
            (
                "If we're talking favorite planets, I'd go with Saturn",
                &[("saturn", For)],
            ),
            (
                "That would be sad because I'm a big cheese girl",
                &[("cheese", For)],
            ),
            (
                "Oh gosh, I hate doing laundry they take forever",
                &[("doing laundry", Against)],
            ),
            (
                "I'm super fascinated by geology and it is something I would study forever",
                &[("geology", For)],
            ),
            // Lists of favourites: one liking per item; "rock and roll" stays whole.
            (
                "My favorites are pizza, tacos, or sushi.",
                &[("pizza", For), ("tacos", For), ("sushi", For)],
            ),
            (
                "Some of my favorite bands are Radiohead and the Smiths.",
                &[("radiohead", For), ("smiths", For)],
            ),
            ("My favourite is rock and roll.", &[("rock and roll", For)]),
            (
                "Country music just isn't for me.",
                &[("country music", Against)],
            ),
            ("Golf simply isn't fun.", &[("golf", Against)]),
            ("I'm more of a dog person.", &[("dog", For)]),
            ("Love me some tacos.", &[("tacos", For)]),
            ("I never get tired of the ocean.", &[("ocean", For)]),
            ("Can't beat a good burrito.", &[("good burrito", For)]),
            ("Nothing like a good book.", &[("good book", For)]),
            ("Going hiking is always a blast.", &[("going hiking", For)]),
            ("I highly recommend Dune.", &[("dune", For)]),
            ("I would recommend sand harbor", &[("sand harbor", For)]),
            ("I'd recommend you try the soup.", &[]),
            ("Robots rule.", &[("robots", For)]),
            // Verbs whose stem ends in -ss or -x: "impress me", not only "impresses me".
            ("Grand pianos impress me.", &[("grand pianos", For)]),
            ("Long baths relax me.", &[("long baths", For)]),
            ("Grey skies depress me.", &[("grey skies", Against)]),
            // Conversational words and drawn-out sounds before a topic are left out.
            (
                "sorry okay peanut butter is good tho",
                &[("peanut butter", For)],
            ),
            (
                "noooooo breaking bad seems so dumb.",
                &[("breaking bad", Against)],
            ),
            (
                "I like stuff like kale and almond milk lol",
                &[("kale and almond milk", For)],
            ),
            ("Oh, thats cool, I actually like r&b too", &[("r&b", For)]),
            (
                "not having groceries stresses me out",
                &[("not having groceries", Against)],
            ),
            // How big a fan, not of what.
            ("Oh my goodness, I'm a huge fan", &[]),
            // The one being talked about, a moment, a childhood: no standing view.
            ("I absolutely cannot stand the movie", &[]),
            ("The weather was terrible yesterday.", &[]),
            (
                "Back when I was in 3rd grade, I loved crayons because they were bright.",
                &[],
            ),
            ("Doesn't sound fun haha", &[]),
            ("Hahaha that is just a funny mental image", &[]),
        ]);
    }

    #[test]
    fn what_people_say_in_passing_is_not_a_preference() {
        use Stance::{Against, For};
        assert_reads(&[
            // Sounds of conversation are not topics, before a topic or instead of one.
            ("oooh! i like that, but they are so expensive!", &[]),
            ("Hm sounds sweet.", &[]),
            ("Mmm nope.", &[]),
            ("oh shoot wikipedia is never wrong", &[("wikipedia", For)]),
            ("Oh. Ironic for sure", &[]),
            ("Pizza, for sure.", &[("pizza", For)]),
            // Pronouns a contraction hides, the rest, someone: nothing the memory can keep.
            ("That'd annoy me to pieces.", &[]),
            ("The rest were just good feelings.", &[]),
            (
                "Someone else is moving in and I am not too excited about that",
                &[],
            ),
            // Cut inside a quotation; a whole one loses its marks.
            (
                "Mantis also goes \"something is wrong\" because she realized.",
                &[],
            ),
            ("I love the song \"Hey Jude\".", &[("song hey jude", For)]),
            (
                "I really like my friend Chloe you know",
                &[("friend chloe", For)],
            ),
            // The ones being talked about, owned or plural.
            ("I do think our class is a huge joke.", &[]),
            ("Maybe, I like my classes so I'm doing pretty good", &[]),
            ("I have never been, but the pictures are amazing", &[]),
            // The "to" of a later clause is no comparison; "I'm done with school" is finished.
            (
                "I prefer in person overall because it pushes me to actually express things",
                &[],
            ),
            ("Computer graphics class and then im done with school.", &[]),
            (
                "And I've put time into this chat research stuff but it'll be over after tomorrow",
                &[],
            ),
            // A number, a bare light verb, an adjective cut from its noun, "wait for me".
            ("oh well 10 is a good number to connect with", &[]),
            ("I like doing a lot of hands-on work", &[]),
            ("I do enjoy a fresh, crisp benjamin.", &[]),
            ("Hold up wait for me!", &[]),
            ("dawg plantains are so GOOD", &[("plantains", For)]),
            ("I hate the cold.", &[("cold", Against)]),
            // Time and degree, a verb in progress: no verdict.
            ("Hezbollah was originally based out of Lebanon", &[]),
            (
                "I guess the script writers were having a hard time making and interesting show.",
                &[],
            ),
            ("Also everyone (understandably) was angry at Star-Lord", &[]),
            ("and got rejected every time", &[]),
            ("But not till next year for sure.", &[]),
            ("I think every part is important", &[]),
            ("so head over heels for her", &[]),
            ("Buuuuut, to kill the suspense, I'm a girl, too.", &[]),
            (
                "Ya I liked the experience but it wasn't anything like I had expected.",
                &[],
            ),
            ("Much like a skunk smells natural", &[]),
            ("the only weird thing is hugging a stranger", &[]),
            ("Me too, I just like the change.", &[]),
            // What the persona met, judged by the next clause or sentence.
            (
                "I went to red house in slc, and it was super good.",
                &[("red house in slc", For)],
            ),
            (
                "We watched Inception last night. It was so boring.",
                &[("inception", Against)],
            ),
            (
                "I tried sushi for the first time. It was amazing!",
                &[("sushi", For)],
            ),
            ("I watched the movie and it was great.", &[]),
            ("I saw some here where I live. It was fun.", &[]),
            // A trait told as a clause is said of its owner; a trait named is the topic.
            (
                "something I don't like about USA is that everyone is too individualistic",
                &[("usa", Against)],
            ),
            (
                "The thing I love about jazz is how free it is.",
                &[("jazz", For)],
            ),
            (
                "My favorite thing about fall is how the leaves turn.",
                &[("fall", For)],
            ),
            (
                "What I don't like about cities is the noise.",
                &[("noise", Against)],
            ),
            (
                "I enjoy talking to new people.",
                &[("talking to new people", For)],
            ),
            (
                "Okay no jokes though pigs are TERRIFYING!!!",
                &[("pigs", Against)],
            ),
            (
                "Ahaha well thats fine, hot dogs are kinda gross",
                &[("hot dogs", Against)],
            ),
            (
                "Napoleon Dynamite is pretty bomb",
                &[("napoleon dynamite", For)],
            ),
            ("Which is definitely better than other ghosts.", &[]),
            ("Nice man that is awesome!", &[]),
            ("I really like chatting with you, too.", &[]),
            ("It never hurts to try.", &[]),
            ("Good. Love the weather today", &[]),
            ("I dig deeper than most.", &[]),
            ("I like the red ones", &[]),
            ("I agree it is good to bond with.", &[]),
            ("I like just about anything that is baked.", &[]),
            // What was missed in passing, now read.
            (
                "I personally am not a fan of the Lord of the Rings.",
                &[("lord of the rings", Against)],
            ),
            ("But I also am a huge Guardians fan", &[("guardians", For)]),
            (
                "favorite disney movie would have to be frozen haha",
                &[("frozen", For)],
            ),
            ("I try to avoid politics.", &[("politics", Against)]),
            (
                "The one I like most on Hulu is Brooklyn 99",
                &[("brooklyn 99", For)],
            ),
            ("Though Dr. Strange was good", &[("dr strange", For)]),
            (
                "I don't like creative writing all that much.",
                &[("creative writing", Against)],
            ),
            (
                "Being stressed is rarely helpful.",
                &[("stressed", Against)],
            ),
            (
                "I refuse to support companies that exploit workers.",
                &[("companies that exploit workers", Against)],
            ),
            // Feelings of others, popularity, phrasal verbs and fillers are not verdicts.
            ("I think my mom is just fascinated by islands.", &[]),
            ("BBQ is so popular in the south.", &[]),
            ("Looking over 224 and whatnot.", &[]),
            ("Technology can really take over people's lives.", &[]),
            ("So I like asked him a question.", &[]),
            ("I really enjoyed reading that book.", &[]),
            ("Nope not really.", &[]),
            (
                "She doesn't know whether I prefer dark or milk chocolate.",
                &[],
            ),
            ("Except he is better than Elastigirl.", &[]),
            // People's chat, second sample.
            (
                "I am a big Marvel fan :) Well... mostly the MCU.",
                &[("marvel", For)],
            ),
            (
                "Runescape got way too complicated",
                &[("runescape", Against)],
            ),
            (
                "Either our system gets better or people stop being jerks.",
                &[],
            ),
            ("My baby was too little for the trip.", &[]),
            ("yeah i love that about math", &[("math", For)]),
            (
                "I'd rather have honey sticks than pixie sticks",
                &[("honey sticks", For), ("pixie sticks", Against)],
            ),
            (
                "i've really been into Arctic Monkeys lately haha wbu?",
                &[("arctic monkeys", For)],
            ),
            (
                "I just think machine learning is super cool.",
                &[("machine learning", For)],
            ),
            (
                "I'm like really interested in ice cream",
                &[("ice cream", For)],
            ),
            ("Im in to computers haha", &[("computers", For)]),
            ("I'm loving it! (Love McDonalds)", &[("mcdonalds", For)]),
            (
                "I also enjoy almost anything to do with chicken.",
                &[("chicken", For)],
            ),
            (
                "not having groceries stresses me out",
                &[("not having groceries", Against)],
            ),
            ("Not that the prompts are bad!", &[]),
            ("Most of my garden got mushy this week.", &[]),
            // People's chat, third sample.
            (
                "Elbow pasta! Hahahaha, I love that!",
                &[("elbow pasta", For)],
            ),
            ("Yep! Exactly like that.", &[]),
            ("A volcano erupted! Scary stuff.", &[]),
            ("Can't live without sarcasm", &[("sarcasm", For)]),
            ("Tad R Callister is a legend", &[("tad r callister", For)]),
            (
                "It's tough but super important to listen well",
                &[("listen well", For)],
            ),
            (
                "My favorite movie just changed to Hidden Figures.",
                &[("hidden figures", For)],
            ),
            (
                "I hate wondering things and not knowing the answer.",
                &[("wondering things", Against)],
            ),
            (
                "I like heavy metal and oddly enough it calms me down",
                &[("heavy metal", For)],
            ),
            (
                "The ending was confusing, but thors entrance was amazing",
                &[("thors entrance", For)],
            ),
            (
                "I don't like the thought of commercial fishing.",
                &[("commercial fishing", Against)],
            ),
            (
                "Something I don't like about the suburbs is the traffic.",
                &[("traffic", Against)],
            ),
            ("I love Emily and Kelly", &[("emily and kelly", For)]),
            // A third precision round.
            ("My day was really good until I lost my phone.", &[]),
            ("Our football team is trash", &[]),
            ("Then turning it off is murder", &[]),
            ("Maybe a little over a week", &[]),
            ("And the skin healed over really well", &[]),
            ("The MPC is right next to the bookstore", &[]),
            ("Seems like there are a lot of funny issues", &[]),
            (
                "i love breakfast tacos sooo much",
                &[("breakfast tacos", For)],
            ),
            (
                "Christian Bale I'd say is the best Batman",
                &[("christian bale", For)],
            ),
            (
                "I try to avoid drama as much as possible",
                &[("drama", Against)],
            ),
            // A fourth precision round.
            ("It's true some are better than others.", &[]),
            ("The gun weighs over 80 pounds.", &[]),
            ("I am over 18 years of age.", &[]),
            ("Heritage over by the creamery", &[]),
            ("Yep! I really like those ones.", &[]),
            ("Hopefully the banana isn't too ripe!", &[]),
            ("I really like the fact that I can't mess it up.", &[]),
        ]);
    }

    #[test]
    fn unpunctuated_chat_sarcasm_and_changed_minds() {
        use Stance::{Against, For};
        assert_reads(&[
            (
                "idk i just dont like horror movies",
                &[("horror movies", Against)],
            ),
            (
                "ngl i kinda hate group projects",
                &[("group projects", Against)],
            ),
            (
                "rainy days >>> sunny days",
                &[("rainy days", For), ("sunny days", Against)],
            ),
            (
                "The best thing about winter is hot soup.",
                &[("hot soup", For)],
            ),
            (
                "My least favourite chore is ironing.",
                &[("ironing", Against)],
            ),
            (
                "If there's one thing I can't stand, it's loud chewing.",
                &[("loud chewing", Against)],
            ),
            // Still a hypothetical.
            ("If I had a garden, I'd grow tomatoes.", &[]),
            ("Oh great, another Monday.", &[("monday", Against)]),
            (
                "Yeah, because waiting in line for an hour is SO much fun.",
                &[("waiting in line for an hour", Against)],
            ),
            (
                "Sure, reality TV is great. Not.",
                &[("reality tv", Against)],
            ),
            (
                "I used to hate olives, but now I adore them.",
                &[("olives", For)],
            ),
            (
                "Mountains are great for hiking, but beaches are where I truly relax.",
                &[("mountains", For), ("beaches", For)],
            ),
            (
                "Give me a good mystery novel and I'm happy.",
                &[("good mystery novel", For)],
            ),
            ("Love the new season of that show!", &[]),
        ]);
    }

    /// Provenance holds for every reader, the ones that span two sentences included: over all
    /// 1 200-odd shipped utterances, each opinion's evidence is quoted from its message, its
    /// text is one clean sentence, and its topic is neither empty nor a pronoun.
    #[test]
    fn every_opinion_quotes_its_message_and_reads_as_a_sentence() {
        use crate::extract::evaluate::{SHIPPED_SETS, parse_labelled};
        let extractor = RulesExtractor::new(8);
        let mut opinions = 0;
        for (set, text) in SHIPPED_SETS {
            for row in parse_labelled(text).unwrap() {
                for opinion in extractor.extract_text(&row.text) {
                    opinions += 1;
                    assert!(
                        super::super::evidence_in_message(&opinion.evidence, &row.text),
                        "{set}: evidence {:?} not in {:?}",
                        opinion.evidence,
                        row.text
                    );
                    let first = opinion.opinion.chars().next().unwrap();
                    assert!(
                        !first.is_lowercase() && opinion.opinion.ends_with(['.', '!', '?']),
                        "{set}: {:?}",
                        opinion.opinion
                    );
                    assert!(
                        !opinion.name.is_empty() && !NON_TOPIC.contains(&opinion.name.as_str()),
                        "{set}: topic {:?} of {:?}",
                        opinion.name,
                        row.text
                    );
                }
            }
        }
        assert!(opinions > 900, "{opinions}");
    }

    #[test]
    fn evidence_is_the_sentence_it_came_from() {
        let found =
            RulesExtractor::new(8).extract_text("Hello there. I adore owls, they are wise.");
        assert_eq!(found[0].evidence, "I adore owls, they are wise.");
        assert!(super::super::evidence_in_message(
            &found[0].evidence,
            "Hello there. I adore owls, they are wise."
        ));
    }
}
