//! How well an extractor reads opinions, on labelled persona utterances: precision (share of
//! the opinions it found that the label names) and recall (share of the labelled opinions it
//! found). The same scoring serves the rules extractor's quality tests, the LLM extractor's
//! replay test and `persona-prefs evaluate-extraction`, which measures whatever extractor is
//! configured, a real model included.

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::{ExtractError, ExtractedOpinion, ExtractionInput, Extractor};
use crate::model::Stance;

/// The labelled sets shipped with the service: written alongside the rules (tuning), the five
/// written apart from them (held out), and two corpora written by other people (a chatbot's
/// replies, people chatting), each split in two: one half tuned against, one held out (see
/// `tests/data/THIRD_PARTY.md`).
pub const SHIPPED_SETS: [(&str, &str); 29] = [
    (
        "tuning",
        include_str!("../../tests/data/rules_extraction.jsonl"),
    ),
    (
        "held-out 1",
        include_str!("../../tests/data/rules_extraction_heldout.jsonl"),
    ),
    (
        "held-out 2",
        include_str!("../../tests/data/extraction_heldout_2.jsonl"),
    ),
    (
        "held-out 3",
        include_str!("../../tests/data/extraction_heldout_3.jsonl"),
    ),
    (
        "held-out 4",
        include_str!("../../tests/data/extraction_heldout_4.jsonl"),
    ),
    (
        "held-out 5",
        include_str!("../../tests/data/extraction_heldout_5.jsonl"),
    ),
    (
        "other hand (tuning)",
        include_str!("../../tests/data/rules_extraction_other_hand.jsonl"),
    ),
    (
        "held-out 6 (other hand)",
        include_str!("../../tests/data/extraction_heldout_6.jsonl"),
    ),
    (
        "people's chat (tuning)",
        include_str!("../../tests/data/rules_extraction_chitchat.jsonl"),
    ),
    (
        "people's chat (tuning 2)",
        include_str!("../../tests/data/rules_extraction_chitchat_2.jsonl"),
    ),
    (
        "people's chat (tuning 3)",
        include_str!("../../tests/data/rules_extraction_chitchat_3.jsonl"),
    ),
    (
        "people's chat (tuning 4)",
        include_str!("../../tests/data/rules_extraction_chitchat_4.jsonl"),
    ),
    (
        "people's chat (tuning 5)",
        include_str!("../../tests/data/rules_extraction_chitchat_5.jsonl"),
    ),
    (
        "held-out 7 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_7.jsonl"),
    ),
    (
        "held-out 8 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_8.jsonl"),
    ),
    (
        "held-out 9 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_9.jsonl"),
    ),
    (
        "held-out 10 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_10.jsonl"),
    ),
    (
        "held-out 11 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_11.jsonl"),
    ),
    (
        "held-out 12 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_12.jsonl"),
    ),
    (
        "held-out 13 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_13.jsonl"),
    ),
    (
        "held-out 14 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_14.jsonl"),
    ),
    (
        "held-out 15 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_15.jsonl"),
    ),
    (
        "held-out 16 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_16.jsonl"),
    ),
    (
        "held-out 17 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_17.jsonl"),
    ),
    (
        "held-out 18 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_18.jsonl"),
    ),
    (
        "held-out 19 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_19.jsonl"),
    ),
    (
        "held-out 20 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_20.jsonl"),
    ),
    (
        "held-out 21 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_21.jsonl"),
    ),
    (
        "held-out 22 (people's chat)",
        include_str!("../../tests/data/extraction_heldout_22.jsonl"),
    ),
];

/// A labelled set kept for choosing between readers and their thresholds: never trained on,
/// no rule written against its misses, and not held out either (it is read as often as a
/// choice needs). 8 000 messages of people's chat, so that one finding moves its figures by
/// about a tenth of a point where a held-out set's 30–40 findings move them by three.
pub const DEVELOPMENT_SET: (&str, &str) = (
    "development (people's chat)",
    include_str!("../../tests/data/extraction_development.jsonl"),
);

/// Whether a shipped set is held out, by its name in [`SHIPPED_SETS`]: read once a round,
/// after the change, never trained or tuned on.
pub fn is_held_out(set: &str) -> bool {
    set.contains("held-out")
}

/// The register a shipped set's utterances are written in, by its name in [`SHIPPED_SETS`]:
/// figures pool by register, since one set's 30–40 findings move precision 3 points apiece.
pub fn register_of(set: &str) -> &'static str {
    if set.contains("people's chat") {
        "people's chat"
    } else if set.contains("other hand") {
        "chatbot corpus"
    } else {
        "persona"
    }
}

/// The 95% Wilson score interval of `successes` out of `trials`: what a proportion measured
/// on a few dozen findings can be said to lie between. `(0, 1)` for no trials.
pub fn wilson_interval(successes: usize, trials: usize) -> (f64, f64) {
    if trials == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let n = trials as f64;
    let p = successes as f64 / n;
    let centre = p + z * z / (2.0 * n);
    let margin = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    let denominator = 1.0 + z * z / n;
    (
        ((centre - margin) / denominator).max(0.0),
        ((centre + margin) / denominator).min(1.0),
    )
}

/// `count` of `rows` spread evenly through them (all of them when there are no more): a
/// sample that takes every part of a set, for extractors too slow to read it all.
pub fn evenly_spaced<T: Clone>(rows: &[T], count: usize) -> Vec<T> {
    if count >= rows.len() {
        return rows.to_vec();
    }
    (0..count)
        .map(|i| rows[i * rows.len() / count].clone())
        .collect()
}

/// One persona utterance and the opinions a careful reader finds in it (none for questions,
/// quotes of others, hypotheticals, a user's view).
#[derive(Debug, Clone, Deserialize)]
pub struct Labelled {
    pub text: String,
    pub opinions: Vec<Expected>,
}

impl Labelled {
    /// Whether `found` is one of the labelled opinions: the same stance on the same topic
    /// ([`same_topic`]). What every count of right and wrong findings goes by.
    pub fn labels(&self, found: &ExtractedOpinion) -> bool {
        self.opinions
            .iter()
            .any(|e| e.stance == found.stance && same_topic(&found.name, &e.topic))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Expected {
    pub topic: String,
    pub stance: Stance,
}

/// Reads JSON lines of [`Labelled`]; a bad line is named by its number.
pub fn parse_labelled(text: &str) -> Result<Vec<Labelled>, String> {
    crate::json_lines::parse(text)
}

/// One disagreement with the label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Miss {
    /// Found, but not labelled (wrong topic, wrong stance, or no opinion there at all).
    FalsePositive {
        text: String,
        topic: String,
        stance: Stance,
    },
    /// Labelled, not found.
    Missed {
        text: String,
        topic: String,
        stance: Stance,
    },
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Miss::FalsePositive {
                text,
                topic,
                stance,
            } => write!(f, "found, not labelled: {text:?} -> {topic:?} {stance:?}"),
            Miss::Missed {
                text,
                topic,
                stance,
            } => write!(f, "missed: {text:?} ({topic} {stance:?})"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    pub utterances: usize,
    /// Opinions the labels name.
    pub expected: usize,
    /// Opinions the extractor found.
    pub found: usize,
    /// Found opinions that match a labelled one.
    pub matched: usize,
    /// Labelled opinions found (two findings can recall one label).
    pub recalled: usize,
    /// Found opinions related to a participant (`related_user_ids`).
    pub related: usize,
    pub precision: f64,
    pub recall: f64,
    pub misses: Vec<Miss>,
}

/// A found topic matches a labelled one when both name the same topic once normalised
/// (`model::topic`: case, spacing, hyphens, a leading article and plural -s aside; "super man"
/// and "superman" alike), or when either is named inside the other, word for word ("green tea"
/// and "green tea in the morning"): topic wording is the embedder's business, not the label's.
pub fn same_topic(found: &str, labelled: &str) -> bool {
    crate::model::topic::overlaps(found, labelled)
}

/// Scores what was found for each utterance (`found[i]` for `labelled[i]`). Pure.
pub fn score(labelled: &[Labelled], found: &[Vec<ExtractedOpinion>]) -> Score {
    let (mut expected, mut found_total, mut matched) = (0usize, 0usize, 0usize);
    // Labelled opinions found: counted apart from `matched`, since two found opinions can
    // match one label ("tea" and "tea in the morning").
    let mut recalled = 0usize;
    let mut misses = Vec::new();
    for (row, opinions) in labelled.iter().zip(found) {
        expected += row.opinions.len();
        found_total += opinions.len();
        for opinion in opinions {
            if row.labels(opinion) {
                matched += 1;
            } else {
                misses.push(Miss::FalsePositive {
                    text: row.text.clone(),
                    topic: opinion.name.clone(),
                    stance: opinion.stance,
                });
            }
        }
        for e in &row.opinions {
            if opinions
                .iter()
                .any(|o| o.stance == e.stance && same_topic(&o.name, &e.topic))
            {
                recalled += 1;
            } else {
                misses.push(Miss::Missed {
                    text: row.text.clone(),
                    topic: e.topic.clone(),
                    stance: e.stance,
                });
            }
        }
    }
    Score {
        utterances: labelled.len(),
        expected,
        found: found_total,
        matched,
        recalled,
        related: found
            .iter()
            .flatten()
            .filter(|o| !o.related_user_ids.is_empty())
            .count(),
        // Nothing found claims nothing wrong.
        precision: if found_total == 0 {
            1.0
        } else {
            matched as f64 / found_total as f64
        },
        recall: if expected == 0 {
            1.0
        } else {
            recalled as f64 / expected as f64
        },
        misses,
    }
}

/// Runs `extractor` over every utterance, `concurrency` at a time, each as a persona message
/// with no context, then scores. An LLM that fails through its retries fails the evaluation:
/// a partial figure would flatter it.
pub async fn evaluate(
    extractor: &dyn Extractor,
    labelled: &[Labelled],
    concurrency: usize,
) -> Result<Score, ExtractError> {
    evaluate_addressed(extractor, labelled, concurrency, None).await
}

/// [`evaluate`], each utterance a reply to `addressee` (a participant) when given: what
/// ingest does when the persona answers someone, "your X" read as theirs and related to them
/// (`extract::people`). `Score::related` counts the findings related to them.
pub async fn evaluate_addressed(
    extractor: &dyn Extractor,
    labelled: &[Labelled],
    concurrency: usize,
    addressee: Option<&str>,
) -> Result<Score, ExtractError> {
    let found = find_addressed(extractor, labelled, concurrency, addressee).await?;
    Ok(score(labelled, &found))
}

/// What `extractor` finds in each utterance (`found[i]` for `labelled[i]`), read as
/// [`evaluate_addressed`] reads them, before scoring.
pub async fn find_addressed(
    extractor: &dyn Extractor,
    labelled: &[Labelled],
    concurrency: usize,
    addressee: Option<&str>,
) -> Result<Vec<Vec<ExtractedOpinion>>, ExtractError> {
    let participants: Vec<String> = addressee.into_iter().map(str::to_string).collect();
    let participants = &participants;
    let found: Vec<Vec<ExtractedOpinion>> = futures::stream::iter(labelled)
        .map(|row| async move {
            let context = addressee
                .map(|user_id| {
                    vec![super::TurnText {
                        role: "user",
                        user_id,
                        content: "",
                    }]
                })
                .unwrap_or_default();
            let input = ExtractionInput {
                persona_message: &row.text,
                context,
                participants,
            };
            let mut opinions = extractor.extract(&input).await?;
            for opinion in &mut opinions {
                super::people::related_participants(opinion, participants);
            }
            Ok::<_, ExtractError>(opinions)
        })
        .buffered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok(found)
}

/// What was found in one utterance, as a line [`FoundElsewhere::parse`] reads: the labelled
/// sets' format. `evaluate-extraction --write-found` writes one for each utterance something
/// was found in.
pub fn found_line(text: &str, found: &[ExtractedOpinion]) -> String {
    let opinions: Vec<serde_json::Value> = found
        .iter()
        .map(|opinion| serde_json::json!({"topic": opinion.name, "stance": opinion.stance}))
        .collect();
    serde_json::json!({"text": text, "opinions": opinions}).to_string()
}

/// What an extractor elsewhere found (another build of this service, a hosted model's batch,
/// another system), read back as an extractor so the sets are scored as every extractor is:
/// JSON lines in the labelled sets' own format, `{"text": …, "opinions": [{"topic": …,
/// "stance": …}]}`, each utterance's findings. An utterance it does not name found nothing.
/// `evaluate-extraction --found`.
pub struct FoundElsewhere {
    /// Each utterance's findings, and the line that named it first.
    by_text: std::collections::HashMap<String, (usize, Vec<ExtractedOpinion>)>,
}

impl FoundElsewhere {
    /// Reads the findings; a bad line is named by its number, and so is an utterance named
    /// twice with different findings (which of them was found cannot be told).
    pub fn parse(text: &str) -> Result<FoundElsewhere, String> {
        let same = |a: &[ExtractedOpinion], b: &[ExtractedOpinion]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(a, b)| a.name == b.name && a.stance == b.stance)
        };
        let mut by_text: std::collections::HashMap<String, (usize, Vec<ExtractedOpinion>)> =
            Default::default();
        let lines = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty());
        for (n, line) in lines {
            let row: Labelled =
                serde_json::from_str(line).map_err(|error| format!("line {}: {error}", n + 1))?;
            let found: Vec<ExtractedOpinion> = row
                .opinions
                .iter()
                .map(|opinion| ExtractedOpinion {
                    name: opinion.topic.clone(),
                    opinion: String::new(),
                    category: "other".into(),
                    stance: opinion.stance,
                    strength: 0.5,
                    related_user_ids: Vec::new(),
                    evidence: row.text.clone(),
                    found_by: Some("found elsewhere".into()),
                })
                .collect();
            match by_text.get(&row.text) {
                Some((first, earlier)) if !same(earlier, &found) => {
                    return Err(format!(
                        "line {}: the utterance of line {first} again, with other findings",
                        n + 1
                    ));
                }
                Some(_) => {}
                None => {
                    by_text.insert(row.text, (n + 1, found));
                }
            }
        }
        Ok(FoundElsewhere { by_text })
    }
}

impl Extractor for FoundElsewhere {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> futures::future::BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>> {
        let found = self
            .by_text
            .get(input.persona_message)
            .map(|(_, found)| found.clone())
            .unwrap_or_default();
        Box::pin(async move { Ok(found) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn findings_made_elsewhere_are_scored_as_the_extractors_are() {
        let labelled = parse_labelled(concat!(
            r#"{"text": "I love green tea.", "opinions": [{"topic": "green tea", "stance": "for"}]}"#,
            "\n",
            r#"{"text": "Jazz bores me, but blues is great.", "opinions": [{"topic": "jazz", "stance": "against"}, {"topic": "blues", "stance": "for"}]}"#,
            "\n",
            r#"{"text": "The train left at noon.", "opinions": []}"#,
        ))
        .unwrap();
        // Found elsewhere: tea (right, "the" and case aside), jazz with the wrong stance, a
        // view in the plain line; the blues line is named twice alike; nothing for the rest.
        let found = FoundElsewhere::parse(concat!(
            r#"{"text": "I love green tea.", "opinions": [{"topic": "The Green Tea", "stance": "for"}]}"#,
            "\n\n",
            r#"{"text": "Jazz bores me, but blues is great.", "opinions": [{"topic": "jazz", "stance": "for"}]}"#,
            "\n",
            r#"{"text": "Jazz bores me, but blues is great.", "opinions": [{"topic": "jazz", "stance": "for"}]}"#,
            "\n",
            r#"{"text": "The train left at noon.", "opinions": [{"topic": "trains", "stance": "for"}]}"#,
        ))
        .unwrap();
        let score = evaluate(&found, &labelled, 2).await.unwrap();
        assert_eq!(
            (score.found, score.matched, score.expected, score.recalled),
            (3, 1, 3, 1)
        );
        let unnamed = parse_labelled(
            r#"{"text": "I hate rain.", "opinions": [{"topic": "rain", "stance": "against"}]}"#,
        )
        .unwrap();
        let score = evaluate(&found, &unnamed, 1).await.unwrap();
        assert_eq!((score.found, score.recalled), (0, 0));
    }

    #[tokio::test]
    async fn what_an_extractor_found_written_out_and_read_back_scores_the_same() {
        let labelled = parse_labelled(concat!(
            r#"{"text": "I love green tea, and I hate rainy mornings.", "opinions": [{"topic": "green tea", "stance": "for"}, {"topic": "rainy mornings", "stance": "against"}]}"#,
            "\n",
            r#"{"text": "Jazz is wonderful.", "opinions": [{"topic": "jazz", "stance": "for"}]}"#,
            "\n",
            r#"{"text": "The train left at noon.", "opinions": []}"#,
        ))
        .unwrap();
        let rules = crate::extract::rules::RulesExtractor::new(8);
        let found = find_addressed(&rules, &labelled, 2, None).await.unwrap();
        let direct = score(&labelled, &found);
        assert!(
            direct.found >= 2,
            "the rules find something here: {direct:?}"
        );
        let lines: String = labelled
            .iter()
            .zip(&found)
            .filter(|(_, found)| !found.is_empty())
            .map(|(row, found)| found_line(&row.text, found) + "\n")
            .collect();
        // Only the utterances something was found in.
        assert_eq!(
            lines.lines().count(),
            found.iter().filter(|f| !f.is_empty()).count()
        );
        let read_back = evaluate(&FoundElsewhere::parse(&lines).unwrap(), &labelled, 2)
            .await
            .unwrap();
        assert_eq!(
            (read_back.found, read_back.matched, read_back.recalled),
            (direct.found, direct.matched, direct.recalled)
        );
    }

    #[test]
    fn findings_made_elsewhere_that_contradict_themselves_are_refused_by_line() {
        let error = FoundElsewhere::parse(concat!(
            r#"{"text": "I love tea.", "opinions": [{"topic": "tea", "stance": "for"}]}"#,
            "\n",
            r#"{"text": "I love tea.", "opinions": []}"#,
        ))
        .err()
        .unwrap();
        assert_eq!(
            error,
            "line 2: the utterance of line 1 again, with other findings"
        );
        let error = FoundElsewhere::parse(r#"{"text": "I love tea."}"#)
            .err()
            .unwrap();
        assert!(
            error.starts_with("line 1: missing field `opinions`"),
            "{error}"
        );
    }

    #[test]
    fn wilson_intervals_match_published_values() {
        // Newcombe (1998), table I: 81 of 263 → 0.2553 to 0.3662.
        let (low, high) = wilson_interval(81, 263);
        assert!(
            (low - 0.2553).abs() < 5e-4 && (high - 0.3662).abs() < 5e-4,
            "{low} {high}"
        );
        // 15 of 148 → 0.0624 to 0.1605.
        let (low, high) = wilson_interval(15, 148);
        assert!(
            (low - 0.0624).abs() < 5e-4 && (high - 0.1605).abs() < 5e-4,
            "{low} {high}"
        );
        assert_eq!(wilson_interval(0, 0), (0.0, 1.0));
        let (low, high) = wilson_interval(10, 10);
        assert!(
            (1.0 - high).abs() < 1e-9 && low > 0.69 && low < 0.73,
            "{low} {high}"
        );
    }

    #[test]
    fn a_sample_is_spread_through_the_set() {
        let rows: Vec<usize> = (0..10).collect();
        assert_eq!(evenly_spaced(&rows, 3), vec![0, 3, 6]);
        assert_eq!(evenly_spaced(&rows, 20), rows);
    }

    fn found(name: &str, stance: Stance) -> ExtractedOpinion {
        ExtractedOpinion {
            name: name.into(),
            opinion: String::new(),
            category: "other".into(),
            stance,
            strength: 0.5,
            related_user_ids: Vec::new(),
            evidence: String::new(),
            found_by: None,
        }
    }

    #[test]
    fn two_findings_of_one_labelled_opinion_recall_it_once() {
        let labelled = parse_labelled(
            r#"{"text": "Tea, tea in the morning, and jazz.", "opinions": [{"topic": "tea", "stance": "for"}, {"topic": "jazz", "stance": "for"}]}"#,
        )
        .unwrap();
        let score = score(
            &labelled,
            &[vec![
                found("tea", Stance::For),
                found("tea in the morning", Stance::For),
            ]],
        );
        assert_eq!(score.precision, 1.0);
        assert_eq!(score.recall, 0.5);
    }

    #[test]
    fn topics_match_by_whole_words_with_plurals_read_as_singulars() {
        let cases = [
            ("green tea in the morning", "green tea", true),
            ("a long train ride", "long train rides", true),
            ("berries", "berry", true),
            ("glass", "glas", false),
            ("steak", "tea", false),
            ("jazz", "jazz fusion", true),
            ("coffee", "tea", false),
        ];
        for (found, labelled, expected) in cases {
            assert_eq!(
                same_topic(found, labelled),
                expected,
                "{found:?} vs {labelled:?}"
            );
        }
    }

    #[test]
    fn precision_and_recall_count_topic_and_stance() {
        let labelled = parse_labelled(
            r#"{"text": "I love green tea but coffee is bitter.", "opinions": [{"topic": "green tea", "stance": "for"}, {"topic": "coffee", "stance": "against"}]}
{"text": "Do you like jazz?", "opinions": []}
{"text": "Opera moves me.", "opinions": [{"topic": "opera", "stance": "for"}]}"#,
        )
        .unwrap();
        let score = score(
            &labelled,
            &[
                // One right (wording differs), one with the wrong stance.
                vec![
                    found("Green tea in the morning", Stance::For),
                    found("coffee", Stance::For),
                ],
                // A question read as an opinion.
                vec![found("jazz", Stance::For)],
                vec![],
            ],
        );
        assert_eq!((score.expected, score.found, score.matched), (3, 3, 1));
        assert!((score.precision - 1.0 / 3.0).abs() < 1e-9);
        assert!((score.recall - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(score.misses.len(), 4, "{:?}", score.misses);
    }

    #[test]
    fn nothing_found_in_nothing_labelled_is_perfect() {
        let labelled = parse_labelled(r#"{"text": "Hello.", "opinions": []}"#).unwrap();
        let score = score(&labelled, &[vec![]]);
        assert_eq!((score.precision, score.recall), (1.0, 1.0));
    }

    #[test]
    fn a_bad_line_is_named() {
        let error = parse_labelled("{\"text\": \"a\", \"opinions\": []}\n{oops}").unwrap_err();
        assert!(error.starts_with("line 2:"), "{error}");
    }

    #[test]
    fn the_shipped_sets_parse_and_hold_over_400_utterances() {
        let total: usize = SHIPPED_SETS
            .iter()
            .map(|(name, text)| {
                parse_labelled(text)
                    .unwrap_or_else(|e| panic!("{name}: {e}"))
                    .len()
            })
            .sum();
        assert!(total >= 400, "{total}");
    }
}
