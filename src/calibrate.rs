//! `persona-prefs calibrate`: the topic match threshold for the configured embedder, by
//! measurement. Ingest decides "same topic" (reinforce or evolve, rather than add) by the
//! cosine similarity of two topics against `embed.*_match_threshold`; each embedding model
//! spreads similarities differently, so a threshold right for one model makes silent twins
//! (too high) or silent merges (too low) with another. This embeds labelled topic pairs
//! (`data/topic_pairs.jsonl`, or the operator's own) and reports the threshold that separates
//! them best, with its accuracy.

use serde::{Deserialize, Serialize};

use crate::embed::{EmbedError, Embedder};

/// The labelled topic pairs shipped with the service: the same topic worded differently, and
/// different topics (some close: green tea / coffee, apple pie / apple computers).
pub const TOPIC_PAIRS: &str = include_str!("../data/topic_pairs.jsonl");

#[derive(Debug, Clone, Deserialize)]
pub struct TopicPair {
    pub a: String,
    pub b: String,
    /// True when both name the same topic.
    pub same: bool,
}

/// Reads JSON lines of [`TopicPair`]; the line number of a bad line is in the error.
pub fn parse_pairs(text: &str) -> Result<Vec<TopicPair>, String> {
    crate::json_lines::parse(text)
}

/// What calibration found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// The threshold that classifies the most pairs right (the middle of the best gap).
    pub threshold: f64,
    /// Share of pairs it classifies right.
    pub accuracy: f64,
    pub pairs: usize,
    /// The lowest similarity of a same-topic pair and the highest of a different-topic pair:
    /// separated when the first is above the second.
    pub lowest_same: f64,
    pub highest_different: f64,
    /// The accuracy of the threshold configured now, for comparison.
    pub configured: f64,
    pub configured_accuracy: f64,
    /// Pairs the best threshold gets wrong: (a, b, similarity, same).
    pub misclassified: Vec<(String, String, f64, bool)>,
}

/// The threshold that best separates `scored` (similarity, same topic?): every gap between
/// consecutive similarities is a candidate, its middle the threshold ("same" when at or
/// above); the most accurate wins, and among equals the widest gap (the safest margin).
/// Pure, so it is tested by tables.
pub fn best_threshold(scored: &[(f64, bool)]) -> (f64, f64) {
    if scored.is_empty() {
        return (0.0, 0.0);
    }
    let mut sorted: Vec<(f64, bool)> = scored.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = sorted.len() as f64;
    let same_total = sorted.iter().filter(|(_, same)| *same).count();
    // Threshold below everything: every pair "same".
    let mut best = (sorted[0].0 - 0.01, same_total as f64 / total, 0.0f64);
    let mut different_below = 0usize;
    let mut same_below = 0usize;
    for i in 0..sorted.len() {
        if sorted[i].1 {
            same_below += 1;
        } else {
            different_below += 1;
        }
        let upper = sorted.get(i + 1).map(|next| next.0);
        let (threshold, gap) = match upper {
            Some(next) if next > sorted[i].0 => ((sorted[i].0 + next) / 2.0, next - sorted[i].0),
            Some(_) => continue,
            None => (sorted[i].0 + 0.01, 0.0),
        };
        let correct = different_below + (same_total - same_below);
        let accuracy = correct as f64 / total;
        if accuracy > best.1 + 1e-12 || ((accuracy - best.1).abs() <= 1e-12 && gap > best.2) {
            best = (threshold, accuracy, gap);
        }
    }
    (best.0, best.1)
}

/// Accuracy of `threshold` on `scored`.
pub fn accuracy_at(scored: &[(f64, bool)], threshold: f64) -> f64 {
    if scored.is_empty() {
        return 0.0;
    }
    let correct = scored
        .iter()
        .filter(|(similarity, same)| (*similarity >= threshold) == *same)
        .count();
    correct as f64 / scored.len() as f64
}

/// Embeds every pair with `embedder` and calibrates; `configured` is the threshold in force.
pub async fn calibrate(
    embedder: &dyn Embedder,
    pairs: &[TopicPair],
    configured: f64,
) -> Result<Calibration, EmbedError> {
    let texts: Vec<String> = pairs
        .iter()
        .flat_map(|pair| [pair.a.clone(), pair.b.clone()])
        .collect();
    let mut vectors = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(32) {
        vectors.extend(embedder.embed(chunk).await?);
    }
    let scored: Vec<(f64, bool)> = pairs
        .iter()
        .enumerate()
        .map(|(n, pair)| (cosine(&vectors[2 * n], &vectors[2 * n + 1]), pair.same))
        .collect();
    let (threshold, accuracy) = best_threshold(&scored);
    let misclassified = pairs
        .iter()
        .zip(&scored)
        .filter(|(_, (similarity, same))| (*similarity >= threshold) != *same)
        .map(|(pair, (similarity, same))| (pair.a.clone(), pair.b.clone(), *similarity, *same))
        .collect();
    let extreme = |same: bool, pick: fn(f64, f64) -> f64, start: f64| {
        scored
            .iter()
            .filter(|(_, s)| *s == same)
            .map(|(similarity, _)| *similarity)
            .fold(start, pick)
    };
    Ok(Calibration {
        threshold,
        accuracy,
        pairs: pairs.len(),
        lowest_same: extreme(true, f64::min, f64::INFINITY),
        highest_different: extreme(false, f64::max, f64::NEG_INFINITY),
        configured,
        configured_accuracy: accuracy_at(&scored, configured),
        misclassified,
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let norms = norm(a) * norm(b);
    if norms == 0.0 { 0.0 } else { dot / norms }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_threshold_sits_in_the_widest_gap_that_separates() {
        /// A rule, the scored pairs, the threshold and accuracy expected.
        type Row = (&'static str, Vec<(f64, bool)>, f64, f64);
        let table: Vec<Row> = vec![
            (
                "separable: the middle of the gap between them",
                vec![(0.9, true), (0.8, true), (0.4, false), (0.6, false)],
                0.7,
                1.0,
            ),
            (
                "one outlier: the threshold that gets the rest right",
                vec![
                    (0.9, true),
                    (0.85, true),
                    (0.3, true),
                    (0.5, false),
                    (0.6, false),
                ],
                0.725,
                0.8,
            ),
            (
                "all the same topic: below everything",
                vec![(0.7, true), (0.8, true)],
                0.69,
                1.0,
            ),
            (
                "all different: above everything",
                vec![(0.2, false), (0.3, false)],
                0.31,
                1.0,
            ),
        ];
        for (rule, scored, threshold, accuracy) in table {
            let (found, found_accuracy) = best_threshold(&scored);
            assert!((found - threshold).abs() < 1e-9, "{rule}: {found}");
            assert!(
                (found_accuracy - accuracy).abs() < 1e-9,
                "{rule}: {found_accuracy}"
            );
            assert!(
                (accuracy_at(&scored, found) - accuracy).abs() < 1e-9,
                "{rule}"
            );
        }
    }

    #[test]
    fn the_shipped_pairs_parse_and_are_balanced() {
        let pairs = parse_pairs(TOPIC_PAIRS).unwrap();
        let same = pairs.iter().filter(|p| p.same).count();
        assert!(pairs.len() >= 90, "{}", pairs.len());
        assert!(same * 3 >= pairs.len() && same * 3 <= pairs.len() * 2);
        assert!(
            parse_pairs("{\"a\": \"x\"}\n")
                .unwrap_err()
                .starts_with("line 1")
        );
    }
}
