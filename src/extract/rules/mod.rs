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
//! The rules are data (`data/`): each has a name, a pattern over the word classes of
//! `word_classes.toml`, groups named by their roles (`roles.toml`), and the examples it exists
//! for; build.rs checks and compiles them in (`engine.rs`). Every opinion says which rule found
//! it (`found_by`). The fixed phrases (`data/phrases.toml`) are read by the engine from their
//! data alone, in order; the grammar's rules are asked for by the readers here: `sentences.rs`
//! (what spans sentences), `clause.rs` (one clause, in order), `comparative.rs`, and
//! `topic.rs` (the topic cut and checked, strength, category). `coverage.rs` says what the
//! labelled sets say of each rule; `persona-prefs evaluate-extraction --explain | --changes |
//! --without RULE` prints it.

use futures::future::BoxFuture;

mod category;
mod clause;
mod comparative;
mod coordination;
pub mod coverage;
pub mod engine;
mod lexicon;
mod phrases;
mod sentences;
mod text;
mod topic;

use super::{ExtractError, ExtractedOpinion, ExtractionInput, Extractor};
use crate::model::Stance;
pub use category::category_for;
use clause::*;
use comparative::*;
use coordination::*;
use engine::*;
use lexicon::{comparative_polarity, polarity};
use sentences::*;
use text::*;
use topic::*;

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
                if let Some(asked) = object_of_a_question(sentence) {
                    met = Some(asked);
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
            for opinion in in_sentence.into_iter().flat_map(split_coordinated) {
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

#[cfg(test)]
mod tests;

/// The sentences of `message` as the rules cut them (after . ! ? ; a line break or an
/// emoticon, not after a title's full stop; a tag question handed back dropped): the
/// sentences their findings quote as evidence.
pub fn sentences(message: &str) -> Vec<String> {
    text::sentences(message)
}

/// Why a sentence voices no view of the speaker's own, whoever reads it: a question, someone
/// else's view reported, a hypothetical, or a view held once ("I used to love trains"). `None`
/// when none of these. The labels hold none of these as opinions (`evaluate::Labelled`); the
/// rules skip them clause by clause, and the learned extractor, whose head reads words, not
/// sentence forms, skips a span in such a sentence.
pub fn not_the_speakers_view(sentence: &str) -> Option<&'static str> {
    let trimmed = sentence.trim();
    if trimmed.ends_with('?') {
        return Some("question");
    }
    let clause = LEADING_FILLER.replace(&normalise(trimmed), "").into_owned();
    if OthersView::read(trimmed).is_some() || is_reported(&clause) {
        return Some("reported");
    }
    if is_hypothetical(&clause) {
        return Some("hypothetical");
    }
    if is_a_past_view(&clause) {
        return Some("past");
    }
    None
}
