//! What the labelled sets say of each rule: which labelled cases it fires on, which rules
//! fire on none, and which cases more than one rule would find (with the rule that found it
//! switched off, another still finds it). The coverage test holds both lists to what the
//! rules' data explains (`unfired`, `also_found_by`); `evaluate-extraction --explain` prints
//! them.

use std::collections::{BTreeMap, BTreeSet};

use super::RulesExtractor;
use super::engine::{Kind, Rule};
use crate::extract::ExtractedOpinion;
use crate::extract::evaluate::{Labelled, same_topic};

/// One finding of the rules on a labelled utterance, and whether a label names it.
#[derive(Debug, Clone)]
pub struct Finding {
    pub opinion: ExtractedOpinion,
    /// The rules that found it, outermost first (`found_by` split at `>`).
    pub rules: Vec<&'static str>,
    pub right: bool,
}

/// The rules' findings on each utterance (`findings[i]` for `labelled[i]`).
pub fn findings(extractor: &RulesExtractor, labelled: &[Labelled]) -> Vec<Vec<Finding>> {
    labelled
        .iter()
        .map(|row| {
            extractor
                .extract_text(&row.text)
                .into_iter()
                .map(|opinion| Finding {
                    rules: rules_of(&opinion),
                    right: row.labels(&opinion),
                    opinion,
                })
                .collect()
        })
        .collect()
}

/// The rules an opinion's provenance names, outermost first.
pub fn rules_of(opinion: &ExtractedOpinion) -> Vec<&'static str> {
    opinion
        .found_by
        .as_deref()
        .unwrap_or_default()
        .split(" > ")
        .filter_map(|name| Rule::named(name.trim()).map(Rule::name))
        .collect()
}

/// Per reading rule, how many findings it took part in: (right, wrong).
pub fn tally(findings: &[Vec<Finding>]) -> BTreeMap<&'static str, (usize, usize)> {
    let mut tally: BTreeMap<&'static str, (usize, usize)> = Rule::all()
        .filter(|rule| rule.def().kind == Kind::Reads)
        .map(|rule| (rule.name(), (0, 0)))
        .collect();
    for finding in findings.iter().flatten() {
        for rule in &finding.rules {
            let entry = tally.entry(rule).or_default();
            if finding.right {
                entry.0 += 1;
            } else {
                entry.1 += 1;
            }
        }
    }
    tally
}

/// A labelled case two rules find: `found_by` found it, and with that rule switched off
/// `also` still does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Overlap {
    pub found_by: &'static str,
    pub also: &'static str,
    pub text: String,
}

/// Every right finding whose rule, switched off, leaves another rule to find it. Only the
/// rule that read the topic (the innermost) is switched off: a list or "both X and Y" is a
/// reader of its parts, not a rival of the rule that reads each.
pub fn overlaps(
    extractor: &RulesExtractor,
    labelled: &[Labelled],
    findings: &[Vec<Finding>],
) -> Vec<Overlap> {
    let mut found = BTreeSet::new();
    for (row, row_findings) in labelled.iter().zip(findings) {
        for finding in row_findings.iter().filter(|f| f.right) {
            let Some(innermost) = finding.rules.last().and_then(|name| Rule::named(name)) else {
                continue;
            };
            let without = innermost.switched_off(|| extractor.extract_text(&row.text));
            for other in without.iter().filter(|o| {
                o.stance == finding.opinion.stance && same_topic(&o.name, &finding.opinion.name)
            }) {
                if let Some(also) = rules_of(other).last() {
                    found.insert(Overlap {
                        found_by: innermost.name(),
                        also,
                        text: row.text.clone(),
                    });
                }
            }
        }
    }
    found.into_iter().collect()
}

/// What the rules found on one shipped utterance, as the snapshot keeps it
/// (`tests/data/rules_findings.jsonl`, one line per utterance with findings).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotLine {
    pub set: String,
    /// The utterance's place in its set, from 0.
    pub line: usize,
    pub found: Vec<SnapshotFinding>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotFinding {
    pub topic: String,
    pub stance: crate::model::Stance,
    pub by: String,
}

/// The rules' findings on every utterance of `sets` (name, labelled utterances), as the
/// snapshot keeps them.
pub fn snapshot(extractor: &RulesExtractor, sets: &[(String, Vec<Labelled>)]) -> Vec<SnapshotLine> {
    let mut lines = Vec::new();
    for (set, labelled) in sets {
        for (line, row) in labelled.iter().enumerate() {
            let found: Vec<SnapshotFinding> = extractor
                .extract_text(&row.text)
                .into_iter()
                .map(|opinion| SnapshotFinding {
                    topic: opinion.name,
                    stance: opinion.stance,
                    by: opinion.found_by.unwrap_or_default(),
                })
                .collect();
            if !found.is_empty() {
                lines.push(SnapshotLine {
                    set: set.clone(),
                    line,
                    found,
                });
            }
        }
    }
    lines
}

/// A finding and whether a label names it.
pub type Judged<'a> = (&'a SnapshotFinding, bool);

/// One utterance whose findings changed.
#[derive(Debug, Clone)]
pub struct Change {
    pub set: String,
    pub line: usize,
    pub text: String,
    pub labels: Vec<crate::extract::evaluate::Expected>,
    pub before: Vec<SnapshotFinding>,
    pub after: Vec<SnapshotFinding>,
}

/// Per set, what changed between two snapshots, judged by the labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeCounts {
    pub utterances: usize,
    pub right_gained: usize,
    pub right_lost: usize,
    pub wrong_gained: usize,
    pub wrong_lost: usize,
}

impl Change {
    fn is_right(&self, finding: &SnapshotFinding) -> bool {
        self.labels
            .iter()
            .any(|label| label.stance == finding.stance && same_topic(&finding.topic, &label.topic))
    }

    /// Findings gained and lost, each marked right or wrong by the labels. A finding whose
    /// rule alone changed is neither.
    pub fn gained_and_lost(&self) -> (Vec<Judged<'_>>, Vec<Judged<'_>>) {
        let same =
            |a: &SnapshotFinding, b: &SnapshotFinding| a.topic == b.topic && a.stance == b.stance;
        let gained = self
            .after
            .iter()
            .filter(|a| !self.before.iter().any(|b| same(a, b)))
            .map(|a| (a, self.is_right(a)))
            .collect();
        let lost = self
            .before
            .iter()
            .filter(|b| !self.after.iter().any(|a| same(a, b)))
            .map(|b| (b, self.is_right(b)))
            .collect();
        (gained, lost)
    }
}

/// The utterances of `sets` whose findings differ between `before` and `after`, and the
/// counts per set (in the order of `sets`).
pub fn changes(
    sets: &[(String, Vec<Labelled>)],
    before: &[SnapshotLine],
    after: &[SnapshotLine],
) -> (Vec<Change>, Vec<(String, ChangeCounts)>) {
    let index = |lines: &[SnapshotLine]| -> BTreeMap<(String, usize), Vec<SnapshotFinding>> {
        lines
            .iter()
            .map(|l| ((l.set.clone(), l.line), l.found.clone()))
            .collect()
    };
    let (before, after) = (index(before), index(after));
    let mut changes = Vec::new();
    let mut counts = Vec::new();
    for (set, labelled) in sets {
        let mut count = ChangeCounts::default();
        for (line, row) in labelled.iter().enumerate() {
            let key = (set.clone(), line);
            let was = before.get(&key).cloned().unwrap_or_default();
            let now = after.get(&key).cloned().unwrap_or_default();
            if was == now {
                continue;
            }
            let change = Change {
                set: set.clone(),
                line,
                text: row.text.clone(),
                labels: row.opinions.clone(),
                before: was,
                after: now,
            };
            let (gained, lost) = change.gained_and_lost();
            count.utterances += 1;
            count.right_gained += gained.iter().filter(|(_, right)| *right).count();
            count.wrong_gained += gained.iter().filter(|(_, right)| !*right).count();
            count.right_lost += lost.iter().filter(|(_, right)| *right).count();
            count.wrong_lost += lost.iter().filter(|(_, right)| !*right).count();
            changes.push(change);
        }
        counts.push((set.clone(), count));
    }
    (changes, counts)
}

/// Every shipped labelled set, parsed.
pub fn shipped_sets() -> Result<Vec<(String, Vec<Labelled>)>, String> {
    crate::extract::evaluate::SHIPPED_SETS
        .iter()
        .map(|(name, text)| {
            crate::extract::evaluate::parse_labelled(text)
                .map(|labelled| (name.to_string(), labelled))
                .map_err(|e| format!("{name}: {e}"))
        })
        .collect()
}
