//! The rules' engine: the table build.rs compiles from `data/*.toml` (each rule's name,
//! pattern with its word classes expanded, roles and examples), and the one way the readers
//! ask a rule about a text. Each pattern is compiled the first time a reader asks for it.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::OnceLock;

use regex::{Captures, Regex};

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
