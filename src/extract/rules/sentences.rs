//! Readers that span a sentence or two: a question the persona answers itself ("Sailing?
//! Love it.", "Coffee or tea? Tea."), others' views and the persona's reaction to them, a topic
//! and "I" ("cilantro and I don't get along"), sarcasm, distaste, and the pronouns a later
//! clause uses for an earlier one's subject.

use super::*;

/// A topic named as a question and judged by the next sentence: "Sailing? Love it." Gives the
/// opinion and whether the reply was used (then it is not read again on its own).
pub(super) fn named_topic_and_reply(
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
pub(super) fn is_a_named_topic(words: &str, at_most: usize) -> bool {
    let words: Vec<&str> = words.split_whitespace().collect();
    if words.is_empty() || words.len() > at_most {
        return false;
    }
    let judgement = words.len() == 1 && polarity(words[0]).is_some();
    // "Oh man that's too bad!": a pronoun with its "is" ("that's", "it's") makes a clause
    // ("I'd choose the train" is a choice, read elsewhere).
    let clause = words.iter().any(|w| {
        w.split_once('\'').is_some_and(|(head, tail)| {
            matches!(tail, "s" | "re" | "m")
                && matches!(
                    head,
                    "that"
                        | "it"
                        | "there"
                        | "what"
                        | "who"
                        | "he"
                        | "she"
                        | "i"
                        | "you"
                        | "we"
                        | "they"
                )
        })
    });
    !judgement
        && !clause
        && !words
            .iter()
            .any(|w| NOT_A_TOPIC_WORD.contains(w) || is_interjection(w))
}

/// A question the persona answers itself in the next sentence: a topic named and judged
/// ("Sailing? Love it."), a choice between two ("Coffee or tea? Tea, obviously."), or a
/// favourite ("Favourite dessert? Mine's tiramisu."). Gives the opinions and whether the
/// reply was used.
pub(super) fn answered_question(
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
pub(super) fn choice_between(sentence: &str, reply: &str) -> Option<Vec<ExtractedOpinion>> {
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
pub(super) fn favourite_answered(sentence: &str, reply: &str) -> Option<ExtractedOpinion> {
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
pub(super) fn thing_and_i(sentence: &str) -> Option<ExtractedOpinion> {
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
pub(super) fn sarcasm(sentence: &str) -> Option<ExtractedOpinion> {
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
pub(super) fn exclamation_of_distaste(sentence: &str) -> Option<ExtractedOpinion> {
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
pub(super) struct OthersView {
    pub(super) topic: String,
    pub(super) stance: Stance,
    /// The sentence that reported it, for the opinion's evidence.
    pub(super) said: String,
    /// Any reaction after the report in the same sentence ("…, and they're right").
    pub(super) rest: Option<String>,
    /// How many more sentences a reaction may come in ("Not me; I love it").
    pub(super) sentences_left: usize,
}

impl OthersView {
    pub(super) fn read(sentence: &str) -> Option<OthersView> {
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
    pub(super) fn reaction_in_same_sentence(&self) -> Option<ExtractedOpinion> {
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
    pub(super) fn reaction(&self, sentence: &str) -> Option<ExtractedOpinion> {
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
pub(super) fn agreement(reaction: &str) -> Option<bool> {
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
pub(super) fn resolve_pronoun(clause: &str, previous_subject: Option<&str>) -> String {
    let Some(subject) = previous_subject else {
        return clause.to_string();
    };
    if let Some(c) = SUBJECT_PRONOUN.captures(clause) {
        let whole = c.get(0).expect("group 0 always matches");
        if c["pronoun"].starts_with("it") && is_dummy_it(&clause[whole.end()..]) {
            return clause.to_string();
        }
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

/// Whether what follows "it is" judges a doing named after it ("nice meeting you", "awesome
/// to see the people"), so the "it" stands for that doing (`dummy_it`). Not "worth seeing
/// again", nor "so boring to me", whose -ing word is the verdict, not a doing.
pub(super) fn is_dummy_it(rest: &str) -> bool {
    DUMMY_IT.captures(rest).is_some_and(|c| {
        c["judgement"] != *"worth"
            && c.name("verb")
                .is_none_or(|verb| polarity(verb.as_str()).is_none())
    })
}

/// "I used to hate olives, but now I adore them": a past view names the topic a later
/// pronoun stands for, though it is not read as a view itself.
pub(super) fn object_of_a_past_liking(clause: &str) -> Option<String> {
    let c = PAST_LIKING.captures(clause.trim())?;
    let object = make(PAST_LIKING, &c["topic"], Stance::For, clause, clause)?;
    Some(object.name)
}

/// "I tried sushi last week", "we went to Red House in SLC": what the persona met, which a
/// following "it was super good" judges.
pub(super) fn object_of_an_experience(clause: &str) -> Option<String> {
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

/// "Have you tried sushi?", "What are your thoughts on tattoos?": what a question asks about,
/// which a following "I love it" judges.
pub(super) fn object_of_a_question(sentence: &str) -> Option<String> {
    // Only a question can be one: the others are not normalised again.
    if !sentence.trim_end().ends_with('?') {
        return None;
    }
    let sentence = LEADING_FILLER
        .replace(&normalise(sentence), "")
        .into_owned();
    let c = ASKED_ABOUT.captures(sentence.trim())?;
    let object = make(ASKED_ABOUT, &c["topic"], Stance::For, &sentence, &sentence)?;
    Some(object.name)
}

/// The noun phrase a clause opens with, when it is about a thing ("mechanical keyboards are
/// loud" → "mechanical keyboards"): the words before its first verb, at most five.
pub(super) fn clause_subject(clause: &str) -> Option<String> {
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
