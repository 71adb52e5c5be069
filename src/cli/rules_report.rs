//! `evaluate-extraction --explain | --changes [--accept] | --without RULE`: the rules
//! extractor rule by rule, on the labelled sets.
//!
//! Held-out sets are reported in counts only: their utterances are not for tuning to, so a
//! changed held-out utterance is shown only with --show-misses.

use std::process::ExitCode;

use persona_prefs::config::Config;
use persona_prefs::extract::evaluate::{Labelled, parse_labelled};
use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::extract::rules::coverage::{self, Change, ChangeCounts, SnapshotLine};
use persona_prefs::extract::rules::engine::Rule;

/// Where the snapshot of the rules' findings is kept, from the repository's root.
const SNAPSHOT: &str = "tests/data/rules_findings.jsonl";

pub(super) use persona_prefs::extract::evaluate::is_held_out;

fn rules(config: &Config) -> RulesExtractor {
    RulesExtractor::new(config.extract.max_opinions_per_message)
}

fn sets_or_shipped(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<(String, Vec<Labelled>)>> {
    if paths.is_empty() {
        return coverage::shipped_sets().map_err(anyhow::Error::msg);
    }
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let labelled =
                parse_labelled(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Ok((path.display().to_string(), labelled))
        })
        .collect()
}

/// `--explain`.
pub fn explain(
    config: &Config,
    paths: &[std::path::PathBuf],
    show_held_out: bool,
) -> anyhow::Result<ExitCode> {
    let extractor = rules(config);
    let sets = sets_or_shipped(paths)?;
    let (mut tuning, mut held_out) = (Vec::new(), Vec::new());
    for (name, labelled) in &sets {
        let findings = coverage::findings(&extractor, labelled);
        let list = !is_held_out(name) || show_held_out;
        if list {
            println!("{name}:");
        }
        for (row, found) in labelled.iter().zip(&findings) {
            for finding in found.iter().filter(|_| list) {
                println!(
                    "  {} {:?} -> {:?} {:?}  [{}]",
                    if finding.right { "right" } else { "WRONG" },
                    row.text,
                    finding.opinion.name,
                    finding.opinion.stance,
                    finding.rules.join(" > ")
                );
            }
        }
        let pool = if is_held_out(name) {
            &mut held_out
        } else {
            &mut tuning
        };
        pool.extend(findings);
    }
    let tuning = coverage::tally(&tuning);
    let held_out = coverage::tally(&held_out);
    println!("\nrule by rule: findings right / wrong (tuning sets; held-out sets)");
    for rule in Rule::all() {
        let name = rule.name();
        let (Some(t), Some(h)) = (tuning.get(name), held_out.get(name)) else {
            continue;
        };
        println!(
            "  {name:<24} {:>4} / {:<4} {:>4} / {:<4} ({}){}",
            t.0,
            t.1,
            h.0,
            h.1,
            rule.def().file,
            rule.def()
                .unfired
                .map_or(String::new(), |why| format!("  unfired: {why}"))
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--changes [--accept]`.
pub fn changes(show_held_out: bool, accept: bool) -> anyhow::Result<ExitCode> {
    let sets = coverage::shipped_sets().map_err(anyhow::Error::msg)?;
    let text = std::fs::read_to_string(SNAPSHOT)
        .map_err(|e| anyhow::anyhow!("{SNAPSHOT}: {e} (run from the repository's root)"))?;
    let kept: Vec<SnapshotLine> =
        persona_prefs::json_lines::parse(&text).map_err(|e| anyhow::anyhow!("{SNAPSHOT}: {e}"))?;
    let now = coverage::snapshot(&RulesExtractor::new(8), &sets);
    let (changed, counts) = coverage::changes(&sets, &kept, &now);
    print!(
        "{}",
        report(&changed, &counts, show_held_out, "the snapshot", "now")
    );
    if accept {
        let mut out = String::new();
        for line in &now {
            out.push_str(&serde_json::to_string(line)?);
            out.push('\n');
        }
        std::fs::write(SNAPSHOT, out)?;
        println!("wrote {SNAPSHOT}: {} utterances with findings", now.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--without RULE`.
pub fn without(name: &str, show_held_out: bool) -> anyhow::Result<ExitCode> {
    let rule = Rule::named(name).ok_or_else(|| {
        anyhow::anyhow!(
            "no rule is named {name:?} (the names are in src/extract/rules/data; `--explain` lists them)"
        )
    })?;
    let sets = coverage::shipped_sets().map_err(anyhow::Error::msg)?;
    let extractor = RulesExtractor::new(8);
    let with = coverage::snapshot(&extractor, &sets);
    let without = rule.switched_off(|| coverage::snapshot(&extractor, &sets));
    let (changed, counts) = coverage::changes(&sets, &with, &without);
    print!(
        "{}",
        report(
            &changed,
            &counts,
            show_held_out,
            "with it",
            &format!("without {name}"),
        )
    );
    Ok(ExitCode::SUCCESS)
}

/// What changed, as text: per set, then each changed utterance. A held-out set's cases are
/// never listed without `show_held_out`, and neither are its counts: a count moved by a change
/// is already a reading of that set, and a held-out set is read once a round (a full
/// `evaluate-extraction`), after the changes. Only how many held-out utterances changed is
/// said, so nobody takes the tuning sets' figures for all of it.
fn report(
    changed: &[Change],
    counts: &[(String, ChangeCounts)],
    show_held_out: bool,
    before: &str,
    after: &str,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "labelled cases that changed, {before} -> {after} (right / wrong by the labels):"
    );
    let mut total = ChangeCounts::default();
    let mut hidden_utterances = 0;
    for (set, c) in counts {
        if is_held_out(set) && !show_held_out {
            hidden_utterances += c.utterances;
            continue;
        }
        total.utterances += c.utterances;
        total.right_gained += c.right_gained;
        total.right_lost += c.right_lost;
        total.wrong_gained += c.wrong_gained;
        total.wrong_lost += c.wrong_lost;
        if c.utterances > 0 {
            let _ = writeln!(
                out,
                "  {set}: {} utterances; right +{} -{}; wrong +{} -{}",
                c.utterances, c.right_gained, c.right_lost, c.wrong_gained, c.wrong_lost
            );
        }
    }
    let shown = if show_held_out {
        "in all"
    } else {
        "in the tuning sets"
    };
    let _ = writeln!(
        out,
        "  {shown}: {} utterances; right +{} -{}; wrong +{} -{}",
        total.utterances,
        total.right_gained,
        total.right_lost,
        total.wrong_gained,
        total.wrong_lost
    );
    for change in changed {
        if is_held_out(&change.set) && !show_held_out {
            continue;
        }
        let _ = writeln!(out, "\n{} #{}: {:?}", change.set, change.line, change.text);
        let labels: Vec<String> = change
            .labels
            .iter()
            .map(|l| format!("{} {:?}", l.topic, l.stance))
            .collect();
        let _ = writeln!(out, "  labelled: {}", labels.join("; "));
        let (gained, lost) = change.gained_and_lost();
        for (finding, right) in gained {
            let _ = writeln!(
                out,
                "  + {} {:?} [{}] {}",
                finding.topic,
                finding.stance,
                finding.by,
                if right { "right" } else { "WRONG" }
            );
        }
        for (finding, right) in lost {
            let _ = writeln!(
                out,
                "  - {} {:?} [{}] {}",
                finding.topic,
                finding.stance,
                finding.by,
                if right { "right" } else { "wrong" }
            );
        }
    }
    if hidden_utterances > 0 {
        let _ = writeln!(
            out,
            "\n{hidden_utterances} held-out utterances changed; neither listed nor counted here (--show-misses does both: a held-out set is read once a round, after the changes, not tuned to)"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(utterances: usize, wrong_lost: usize) -> ChangeCounts {
        ChangeCounts {
            utterances,
            wrong_lost,
            ..ChangeCounts::default()
        }
    }

    /// A held-out set's counts would let a rule be tuned to it: they are said only when asked
    /// for, and the total leaves them out too (else subtraction gives them back).
    #[test]
    fn held_out_counts_are_neither_listed_nor_summed_unless_asked_for() {
        let counts = vec![
            ("people's chat (tuning)".to_string(), counts(2, 1)),
            ("held-out 10 (people's chat)".to_string(), counts(3, 3)),
        ];
        let hidden = report(&[], &counts, false, "before", "after");
        assert!(!hidden.contains("held-out 10"), "{hidden}");
        assert!(
            hidden.contains("in the tuning sets: 2 utterances; right +0 -0; wrong +0 -1"),
            "{hidden}"
        );
        assert!(
            hidden.contains("3 held-out utterances changed; neither listed nor counted"),
            "{hidden}"
        );
        let shown = report(&[], &counts, true, "before", "after");
        assert!(
            shown.contains("held-out 10 (people's chat): 3 utterances; right +0 -0; wrong +0 -3"),
            "{shown}"
        );
        assert!(
            shown.contains("in all: 5 utterances; right +0 -0; wrong +0 -4"),
            "{shown}"
        );
    }
}
