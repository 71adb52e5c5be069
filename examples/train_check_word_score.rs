//! Trains the check's word score (`extract::learned::word_score`) on the tuning sets the
//! learned reader trains on (never the fourth people's-chat set, on which the check's values
//! are chosen, nor the held-out or development sets) and writes `data/check_word_score.bin`:
//! `scripts/train-check-word-score`. PERSONA_PREFS_TRAIN_OUT writes another file. Seconds;
//! no model needed.

use persona_prefs::extract::evaluate::{SHIPPED_SETS, parse_labelled};
use persona_prefs::extract::learned::{training, word_score};
use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::extract::{ExtractionInput, Extractor};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let rules = RulesExtractor::new(
        persona_prefs::config::Config::defaults()
            .extract
            .max_opinions_per_message,
    );
    let mut rows = Vec::new();
    for (name, text) in SHIPPED_SETS {
        // The sets the shipped word score was trained on: the tuning sets less the fourth
        // people's-chat one, which the learned reader left out when the word score was made
        // (the reader trains on it since; the word score's own training is kept as it was).
        if !training::trained_on(name) || name == "people's chat (tuning 4)" {
            continue;
        }
        let labelled = parse_labelled(text)?;
        let mut wrong = 0;
        let mut findings = 0;
        for row in labelled {
            let input = ExtractionInput {
                persona_message: &row.text,
                context: vec![],
                participants: &[],
            };
            let found = rules.extract(&input).await.map_err(|e| e.to_string())?;
            findings += found.len();
            wrong += found.iter().filter(|o| !row.labels(o)).count();
            rows.push((row, found));
        }
        println!("tuning set {name}: the rules find {findings}, {wrong} of them wrong");
    }
    let examples = word_score::examples(&rows);
    println!("{} sentences to learn from", examples.len());
    let score = word_score::train(&examples);
    let out = std::env::var("PERSONA_PREFS_TRAIN_OUT")
        .unwrap_or_else(|_| "data/check_word_score.bin".into());
    std::fs::write(&out, score.to_bytes()).map_err(|e| format!("{out}: {e}"))?;
    println!("wrote {out}");
    Ok(())
}
