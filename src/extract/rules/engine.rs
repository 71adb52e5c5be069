//! The rules' engine: the table build.rs compiles from `data/*.toml` (each rule's name,
//! pattern with its word classes expanded, roles and examples), and the one way the readers
//! ask a rule about a text. Each pattern is compiled the first time a reader asks for it.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::{Captures, Regex};

include!(concat!(env!("OUT_DIR"), "/rules_table.rs"));

/// One rule of the table, by its place in it. The readers name rules by the constants the
/// table defines (`NOT_FAN`), so a rule that does not exist is a compile error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rule(usize);

/// What the data says of a rule (build.rs checked it).
#[derive(Debug)]
pub struct RuleDef {
    pub name: &'static str,
    /// The data file it is written in.
    pub file: &'static str,
    pub about: &'static str,
    /// The pattern with its word classes expanded.
    pub pattern: &'static str,
    /// The roles its groups take, in the pattern's order.
    pub roles: &'static [&'static str],
    /// Texts it exists for: each fires it.
    pub examples: &'static [&'static str],
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

    fn regex(self) -> &'static Regex {
        COMPILED[self.0].get_or_init(|| {
            Regex::new(self.def().pattern).expect("build.rs compiled every pattern once")
        })
    }

    pub fn captures(self, text: &str) -> Option<Captures<'_>> {
        self.regex().captures(text)
    }

    pub fn captures_iter(self, text: &str) -> regex::CaptureMatches<'static, '_> {
        self.regex().captures_iter(text)
    }

    pub fn is_match(self, text: &str) -> bool {
        self.regex().is_match(text)
    }

    pub fn find(self, text: &str) -> Option<regex::Match<'_>> {
        self.regex().find(text)
    }

    pub fn replace<'t>(self, text: &'t str, with: &str) -> Cow<'t, str> {
        self.regex().replace(text, with)
    }

    pub fn replace_all<'t>(self, text: &'t str, with: &str) -> Cow<'t, str> {
        self.regex().replace_all(text, with)
    }
}
