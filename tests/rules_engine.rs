//! The rules extractor as data (`src/extract/rules/data`): every rule fires on the examples it
//! exists for; every reading rule fires on a labelled case or says why not; a labelled case
//! two rules find is explained in the data; and what the rules find on every shipped
//! utterance is what `tests/data/rules_findings.jsonl` says, so a change to a rule shows
//! exactly which labelled cases it changed (`persona-prefs evaluate-extraction --changes`).
//! No services: the rules are pure.

use std::collections::{BTreeMap, BTreeSet};

use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::extract::rules::coverage::{self, SnapshotLine};
use persona_prefs::extract::rules::engine::{Kind, Rule};

fn extractor() -> RulesExtractor {
    RulesExtractor::new(8)
}

#[test]
fn every_rule_fires_on_its_examples() {
    let rules = extractor();
    let mut failures = Vec::new();
    for rule in Rule::all() {
        let def = rule.def();
        assert!(!def.examples.is_empty(), "{}: no examples", def.name);
        for example in def.examples {
            let fired = match def.kind {
                // A reading rule's example is a persona message: the rule is in the
                // provenance of what the extractor finds in it.
                Kind::Reads => rules
                    .extract_text(example)
                    .iter()
                    .any(|opinion| coverage::rules_of(opinion).contains(&def.name)),
                // The others' examples are text as the pattern sees it.
                Kind::Helps | Kind::Prepares => rule.is_match(example),
            };
            if !fired {
                failures.push(format!("{} ({}): {example:?}", def.name, def.file));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "rules that do not fire on their own examples:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_reading_rule_fires_on_a_labelled_case_or_says_why_not() {
    let rules = extractor();
    let sets = coverage::shipped_sets().unwrap();
    let all: Vec<_> = sets.iter().flat_map(|(_, rows)| rows.clone()).collect();
    let tally = coverage::tally(&coverage::findings(&rules, &all));
    let mut unexplained = Vec::new();
    let mut stale = Vec::new();
    for rule in Rule::all().filter(|r| r.def().kind == Kind::Reads) {
        let (right, wrong) = tally.get(rule.name()).copied().unwrap_or_default();
        match (right + wrong, rule.def().unfired) {
            (0, None) => unexplained.push(rule.name()),
            (fired, Some(_)) if fired > 0 => stale.push(format!("{} ({fired})", rule.name())),
            _ => {}
        }
    }
    assert!(
        unexplained.is_empty(),
        "reading rules no labelled case fires, with no `unfired` reason in the data: {unexplained:?}"
    );
    assert!(
        stale.is_empty(),
        "rules whose `unfired` reason is no longer true (they fire on labelled cases now): {stale:?}"
    );
}

#[test]
fn a_labelled_case_two_rules_find_is_explained_in_the_data() {
    let rules = extractor();
    let sets = coverage::shipped_sets().unwrap();
    let all: Vec<_> = sets.iter().flat_map(|(_, rows)| rows.clone()).collect();
    let findings = coverage::findings(&rules, &all);
    let overlaps = coverage::overlaps(&rules, &all, &findings);
    let found: BTreeSet<(&str, &str)> = overlaps.iter().map(|o| (o.found_by, o.also)).collect();
    let declared: BTreeSet<(&str, &str)> = Rule::all()
        .flat_map(|rule| {
            rule.def()
                .also_found_by
                .iter()
                .map(move |(other, _)| (rule.name(), *other))
        })
        .collect();
    let unexplained: Vec<String> = overlaps
        .iter()
        .filter(|o| !declared.contains(&(o.found_by, o.also)))
        .map(|o| format!("{} and {}: {:?}", o.found_by, o.also, o.text))
        .collect();
    assert!(
        unexplained.is_empty(),
        "labelled cases two rules find, with no reason in the first one's `also_found_by`:\n{}",
        unexplained.join("\n")
    );
    let stale: Vec<_> = declared.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "`also_found_by` reasons for rules that no longer find the same labelled case: {stale:?}"
    );
}

#[test]
fn a_rule_switched_off_finds_nothing_and_the_others_still_run() {
    let rules = extractor();
    let liking = Rule::named("positive_verb").unwrap();
    let text = "I love green tea. Jazz is wonderful.";
    let with = rules.extract_text(text);
    let without = liking.switched_off(|| rules.extract_text(text));
    let topics = |found: &[persona_prefs::extract::ExtractedOpinion]| {
        found.iter().map(|o| o.name.clone()).collect::<Vec<_>>()
    };
    assert_eq!(topics(&with), ["green tea", "jazz"]);
    assert_eq!(topics(&without), ["jazz"]);
    assert_eq!(
        with[0].found_by.as_deref(),
        Some("positive_verb"),
        "the rule is the opinion's provenance"
    );
    // Switched on again once the closure returns.
    assert_eq!(topics(&rules.extract_text(text)), ["green tea", "jazz"]);
}

#[test]
fn an_opinion_read_inside_a_list_names_both_rules() {
    let found = extractor().extract_text("I like reading, cooking and hiking.");
    assert!(!found.is_empty());
    for opinion in found {
        assert_eq!(
            opinion.found_by.as_deref(),
            Some("liking_of_a_list > positive_verb"),
            "{opinion:?}"
        );
    }
}

/// The snapshot of what the rules find on every shipped utterance. When a rule change is
/// meant, `persona-prefs evaluate-extraction --changes` shows which labelled cases it changed
/// (right and wrong, per set) and `--changes --accept` writes the new snapshot.
#[test]
fn the_rules_find_what_the_snapshot_says() {
    let sets = coverage::shipped_sets().unwrap();
    let now = coverage::snapshot(&extractor(), &sets);
    let kept: Vec<SnapshotLine> =
        persona_prefs::json_lines::parse(include_str!("data/rules_findings.jsonl")).unwrap();
    let (changed, counts) = coverage::changes(&sets, &kept, &now);
    let summary: BTreeMap<String, String> = counts
        .into_iter()
        .filter(|(_, c)| c.utterances > 0)
        .map(|(set, c)| {
            (
                set,
                format!(
                    "{} utterances: right +{} -{}, wrong +{} -{}",
                    c.utterances, c.right_gained, c.right_lost, c.wrong_gained, c.wrong_lost
                ),
            )
        })
        .collect();
    assert!(
        changed.is_empty(),
        "the rules' findings differ from tests/data/rules_findings.jsonl: {summary:#?}\n\
         `persona-prefs evaluate-extraction --changes` lists them; `--changes --accept` keeps them"
    );
}
