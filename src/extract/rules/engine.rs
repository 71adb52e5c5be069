//! The rules' engine: the table build.rs compiles from `data/*.toml` (each rule's name,
//! pattern with its word classes expanded, roles and examples), and the one way the readers
//! ask a rule about a text. Each pattern is compiled the first time a reader asks for it.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::OnceLock;

use regex::{Captures, Regex};

use super::lexicon::polarity;
use crate::model::Stance;

include!(concat!(env!("OUT_DIR"), "/rules_table.rs"));

/// One rule of the table, by its place in it. The readers name rules by the constants the
/// table defines (`NOT_FAN`), so a rule that does not exist is a compile error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rule(usize);

/// What a rule's match does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It gives an opinion: an opinion's provenance (`found_by`) names it.
    Reads,
    /// It gives a piece another rule's reading needs (the reply to a question, agreement
    /// with others' view, a pronoun's antecedent), or refuses a reading (a past view, a
    /// report).
    Helps,
    /// It rewrites or splits the text before the readers read it.
    Prepares,
}

/// What the data says of a rule (build.rs checked it).
#[derive(Debug)]
pub struct RuleDef {
    pub name: &'static str,
    pub kind: Kind,
    /// The data file it is written in.
    pub file: &'static str,
    pub about: &'static str,
    /// The pattern with its word classes expanded.
    pub pattern: &'static str,
    /// The roles its groups take, in the pattern's order.
    pub roles: &'static [&'static str],
    /// Texts it exists for: each fires it.
    pub examples: &'static [&'static str],
    /// Why no labelled case fires it, when none does (a reading rule).
    pub unfired: Option<&'static str>,
    /// Rules that still find what it finds when it is switched off, each with why both are
    /// kept.
    pub also_found_by: &'static [(&'static str, &'static str)],
    /// How the engine reads it from its data (phrases.toml's reading rules); `None` for a
    /// rule read in code.
    pub reading: Option<Reading>,
}

/// A reading rule the engine applies from its data alone: a newcomer adds a phrasing by
/// adding the rule, with no code.
///
/// The topic is the first group present among `topic`, `topic_for` and `topic_against` (and
/// their numbered alternatives). The stance starts from `stance`, or from the lexicon's
/// polarity of the `judgement` group; a `disliked` group present makes it against, else a
/// `liked` one makes it for; each `negation` group present flips it; a `topic_for` or
/// `topic_against` topic fixes it.
#[derive(Debug)]
pub struct Reading {
    pub stance: Option<Stance>,
    /// At most this many words in the topic, and no comparison in it (" over ", " than ":
    /// those are read as comparatives); the topic is trimmed.
    pub topic_words: Option<usize>,
    /// No reading when the clause holds one of these.
    pub refuse_if_clause_has: &'static [&'static str],
    /// No reading when the topic starts with one of these.
    pub refuse_if_topic_starts: &'static [&'static str],
    /// No reading when the topic's first word is one of these.
    pub refuse_first_words: &'static [&'static str],
    /// When the topic passes but no stance can be read, no later rule is tried either.
    pub claims_the_clause: bool,
}

/// What a rule read from its data makes of a clause.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// An opinion: the topic (raw; the topic clean-up follows) and its stance.
    Opinion(String, Stance),
    /// The pattern did not match, or a refusal held: the next rule is tried.
    Nothing,
    /// The rule claims the clause but reads no stance: no later rule is tried.
    Claimed,
}

thread_local! {
    /// A reading rule switched off on this thread (`Rule::switched_off`): it matches nothing.
    static SWITCHED_OFF: Cell<Option<Rule>> = const { Cell::new(None) };
}

static COMPILED: [OnceLock<Regex>; RULE_COUNT] = [const { OnceLock::new() }; RULE_COUNT];

impl Rule {
    /// Every rule, in the table's order.
    pub fn all() -> impl Iterator<Item = Rule> {
        (0..RULE_COUNT).map(Rule)
    }

    /// The rule of this name.
    pub fn named(name: &str) -> Option<Rule> {
        RULE_DEFS.iter().position(|def| def.name == name).map(Rule)
    }

    pub fn def(self) -> &'static RuleDef {
        &RULE_DEFS[self.0]
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Runs `read` with this rule matching nothing, on this thread: what the other rules
    /// find without it (the coverage test, `evaluate-extraction --without`). Only a reading
    /// rule can be switched off; the rules that prepare text always run.
    pub fn switched_off<T>(self, read: impl FnOnce() -> T) -> T {
        let before = SWITCHED_OFF.replace(Some(self));
        let result = read();
        SWITCHED_OFF.set(before);
        result
    }

    /// Every rule written in `file`, in its order there.
    pub fn in_file(file: &'static str) -> impl Iterator<Item = Rule> {
        Rule::all().filter(move |rule| rule.def().file == file)
    }

    /// What this rule, read from its data, makes of `clause`; `None` when it is read in
    /// code.
    pub fn read(self, clause: &str) -> Option<Read> {
        let reading = self.def().reading.as_ref()?;
        let Some(c) = self.captures(clause) else {
            return Some(Read::Nothing);
        };
        Some(self.read_match(reading, &c, clause))
    }

    fn read_match(self, reading: &Reading, c: &Captures<'_>, clause: &str) -> Read {
        let roles = self.def().roles;
        let present = |role: &str| {
            roles
                .iter()
                .filter(|group| group.trim_end_matches(|ch: char| ch.is_ascii_digit()) == role)
                .any(|group| c.name(group).is_some())
        };
        let Some((group, raw)) = roles
            .iter()
            .filter(|group| {
                matches!(
                    group.trim_end_matches(|ch: char| ch.is_ascii_digit()),
                    "topic" | "topic_for" | "topic_against"
                )
            })
            .find_map(|group| c.name(group).map(|m| (*group, m.as_str())))
        else {
            return Read::Nothing;
        };
        if reading
            .refuse_if_clause_has
            .iter()
            .any(|words| clause.contains(words))
            || reading
                .refuse_if_topic_starts
                .iter()
                .any(|start| raw.starts_with(start))
            || raw
                .split_whitespace()
                .next()
                .is_some_and(|first| reading.refuse_first_words.contains(&first))
        {
            return Read::Nothing;
        }
        let topic = match reading.topic_words {
            Some(at_most) => {
                let words = raw.split_whitespace().count();
                // "espresso over drip coffee, always" is a comparative, read elsewhere.
                let comparative = [" over ", " than ", " beats ", " rather "]
                    .iter()
                    .any(|w| raw.contains(w));
                if words == 0 || words > at_most || comparative {
                    return Read::Nothing;
                }
                raw.trim().to_string()
            }
            None => raw.to_string(),
        };
        if group.starts_with("topic_for") {
            return Read::Opinion(topic, Stance::For);
        }
        if group.starts_with("topic_against") {
            return Read::Opinion(topic, Stance::Against);
        }
        let judged = roles
            .iter()
            .filter(|g| g.trim_end_matches(|ch: char| ch.is_ascii_digit()) == "judgement")
            .find_map(|g| c.name(g))
            .map(|m| polarity(m.as_str()));
        let mut stance = match (reading.stance, judged) {
            (_, Some(Some(stance))) | (Some(stance), None) => stance,
            _ if reading.claims_the_clause => return Read::Claimed,
            _ => return Read::Nothing,
        };
        if present("disliked") {
            stance = Stance::Against;
        } else if present("liked") {
            stance = Stance::For;
        }
        let negations = roles
            .iter()
            .filter(|g| g.trim_end_matches(|ch: char| ch.is_ascii_digit()) == "negation")
            .filter(|g| c.name(g).is_some())
            .count();
        if negations % 2 == 1 {
            stance = match stance {
                Stance::For => Stance::Against,
                Stance::Against => Stance::For,
            };
        }
        Read::Opinion(topic, stance)
    }

    fn is_on(self) -> bool {
        SWITCHED_OFF.get() != Some(self)
    }

    fn regex(self) -> &'static Regex {
        COMPILED[self.0].get_or_init(|| {
            Regex::new(self.def().pattern).expect("build.rs compiled every pattern once")
        })
    }

    pub fn captures(self, text: &str) -> Option<Captures<'_>> {
        self.regex().captures(text).filter(|_| self.is_on())
    }

    pub fn captures_iter(self, text: &str) -> regex::CaptureMatches<'static, '_> {
        self.regex().captures_iter(text)
    }

    pub fn is_match(self, text: &str) -> bool {
        self.is_on() && self.regex().is_match(text)
    }

    pub fn find(self, text: &str) -> Option<regex::Match<'_>> {
        self.regex().find(text).filter(|_| self.is_on())
    }

    pub fn replace<'t>(self, text: &'t str, with: &str) -> Cow<'t, str> {
        self.regex().replace(text, with)
    }

    pub fn replace_all<'t>(self, text: &'t str, with: &str) -> Cow<'t, str> {
        self.regex().replace_all(text, with)
    }
}
