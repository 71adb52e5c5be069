//! How well the offline `rules` extractor reads opinions, measured on labelled persona
//! utterances (opinions, and non-opinions that must yield nothing): `rules_extraction.jsonl`,
//! written alongside the rules, and `rules_extraction_heldout.jsonl`, written apart from them.
//! Prints precision and recall; fails if either drops below its floor.

use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::store::Stance;
use serde::Deserialize;

#[derive(Deserialize)]
struct Labelled {
    text: String,
    opinions: Vec<Expected>,
}

#[derive(Deserialize)]
struct Expected {
    topic: String,
    stance: Stance,
}

/// Whether `measure` names each miss, or only counts them.
#[derive(PartialEq)]
enum Misses {
    /// Sets the rules are tuned against: every miss is printed, to learn from.
    Shown,
    /// The held-out set: misses are counted, never shown, so nobody tunes the rules to them.
    Counted,
}

/// Precision and recall of the rules extractor on one labelled file.
fn measure(file: &str, min_rows: usize, show: Misses) -> (f64, f64) {
    let data = std::fs::read_to_string(format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap();
    let labelled: Vec<Labelled> = data
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        labelled.len() >= min_rows,
        "{file} has at least {min_rows} utterances"
    );
    let extractor = RulesExtractor::new(8);
    let (mut predicted, mut expected, mut matched) = (0usize, 0usize, 0usize);
    let mut misses = Vec::new();
    for row in &labelled {
        let found = extractor.extract_text(&row.text);
        predicted += found.len();
        expected += row.opinions.len();
        let same_topic =
            |name: &str, topic: &str| name == topic || name.contains(topic) || topic.contains(name);
        for opinion in &found {
            if row
                .opinions
                .iter()
                .any(|e| e.stance == opinion.stance && same_topic(&opinion.name, &e.topic))
            {
                matched += 1;
            } else {
                misses.push(format!(
                    "false positive: {:?} -> {:?} {:?}",
                    row.text, opinion.name, opinion.stance
                ));
            }
        }
        for e in &row.opinions {
            if !found
                .iter()
                .any(|o| o.stance == e.stance && same_topic(&o.name, &e.topic))
            {
                misses.push(format!(
                    "missed: {:?} ({} {:?})",
                    row.text, e.topic, e.stance
                ));
            }
        }
    }
    let precision = if predicted == 0 {
        1.0
    } else {
        matched as f64 / predicted as f64
    };
    let recall = matched as f64 / expected as f64;
    println!(
        "rules extractor on {file}, {} utterances ({expected} labelled opinions): precision {precision:.3}, recall {recall:.3}",
        labelled.len()
    );
    if show == Misses::Shown {
        for miss in &misses {
            println!("  {miss}");
        }
    }
    (precision, recall)
}

/// The set written alongside the rules (measured precision 1.000, recall 0.988). Floors under
/// those figures: a change that makes the extractor noticeably worse fails here.
#[test]
fn rules_extractor_precision_and_recall() {
    let (precision, recall) = measure("rules_extraction.jsonl", 100, Misses::Shown);
    assert!(precision >= 0.90, "precision {precision:.3} < 0.90");
    assert!(recall >= 0.85, "recall {recall:.3} < 0.85");
}

/// Persona-style utterances written apart from the rules, in two batches, each measured once
/// before the rules saw it: the first 60 rows scored precision 0.923, recall 0.800; the next
/// 30, written after rules were added for the first batch's misses, scored 0.94 and 0.80. Those
/// are the figures to expect on fresh text. The rules have since learnt from both batches
/// (0.985 / 0.970 now), so the floors below guard against regressions, not for generality.
#[test]
fn rules_extractor_on_held_out_utterances() {
    let (precision, recall) = measure("rules_extraction_heldout.jsonl", 90, Misses::Shown);
    assert!(precision >= 0.90, "precision {precision:.3} < 0.90");
    assert!(recall >= 0.85, "recall {recall:.3} < 0.85");
}

/// The second held-out set (188 utterances in every register the extraction-quality issue
/// names, non-opinions that look like opinions among them), written before the rules changed
/// for it and never tuned against: the figure to expect on fresh text. Before any change:
/// precision 0.841, recall 0.320. After the rules learnt comparatives, perspective markers,
/// prescriptions, "I love how X…", discourse openers and reported speech from the tuning set
/// (never from this one): 0.868 / 0.547. The target is 0.90 / 0.75, not yet met; the
/// floors sit under the figure measured now, so a regression fails. Its misses are counted,
/// not printed: a printed miss is an invitation to write a rule for that very sentence.
#[test]
fn rules_extractor_on_the_second_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_2.jsonl", 180, Misses::Counted);
    assert!(precision >= 0.85, "precision {precision:.3} < 0.85");
    assert!(recall >= 0.52, "recall {recall:.3} < 0.52");
}
