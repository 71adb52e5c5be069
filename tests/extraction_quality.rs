//! How well the offline `rules` extractor reads opinions, measured on labelled persona
//! utterances (opinions, and non-opinions that must yield nothing): `rules_extraction.jsonl`,
//! written alongside the rules, and `rules_extraction_heldout.jsonl`, written apart from them.
//! Prints precision and recall; fails if either drops below its floor.

use persona_prefs::extract::evaluate::{parse_labelled, score};
use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::model::ExtractedOpinion;

/// Whether `measure` names each miss, or only counts them.
#[derive(PartialEq)]
enum Misses {
    /// Sets the rules are tuned against: every miss is printed, to learn from.
    Shown,
    /// The held-out set: misses are counted, never shown, so nobody tunes the rules to them.
    Counted,
}

/// One labelled file of `tests/data`, parsed.
fn labelled_set(file: &str) -> Vec<persona_prefs::extract::evaluate::Labelled> {
    let data = std::fs::read_to_string(format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap();
    parse_labelled(&data).unwrap_or_else(|error| panic!("{file}: {error}"))
}

/// Precision and recall of the rules extractor on one labelled file.
fn measure(file: &str, min_rows: usize, show: Misses) -> (f64, f64) {
    let labelled = labelled_set(file);
    assert!(
        labelled.len() >= min_rows,
        "{file} has at least {min_rows} utterances"
    );
    let extractor = RulesExtractor::new(8);
    let found: Vec<_> = labelled
        .iter()
        .map(|row| extractor.extract_text(&row.text))
        .collect();
    let score = score(&labelled, &found);
    println!(
        "rules extractor on {file}, {} utterances ({} labelled opinions): precision {:.3}, recall {:.3}",
        score.utterances, score.expected, score.precision, score.recall
    );
    if show == Misses::Shown {
        for miss in &score.misses {
            println!("  {miss}");
        }
    }
    (score.precision, score.recall)
}

/// The set written alongside the rules (590 utterances, in the registers of chat, formal
/// speech, slang, unpunctuated chat, sarcasm, hedges and ideals; measured precision 1.000,
/// recall 0.964). Floors under those figures: a change that makes the extractor noticeably
/// worse fails here.
#[test]
fn rules_extractor_precision_and_recall() {
    let (precision, recall) = measure("rules_extraction.jsonl", 580, Misses::Shown);
    assert!(precision >= 0.90, "precision {precision:.3} < 0.90");
    assert!(recall >= 0.85, "recall {recall:.3} < 0.85");
}

/// Persona-style utterances written apart from the rules, in two batches, each measured once
/// before the rules saw it: the first 60 rows scored precision 0.923, recall 0.800; the next
/// 30, written after rules were added for the first batch's misses, scored 0.94 and 0.80. Those
/// are the figures to expect on fresh text. The rules have since learnt from both batches
/// (0.986 / 1.000 now), so the floors below guard against regressions, not for generality.
#[test]
fn rules_extractor_on_held_out_utterances() {
    let (precision, recall) = measure("rules_extraction_heldout.jsonl", 90, Misses::Shown);
    assert!(precision >= 0.90, "precision {precision:.3} < 0.90");
    assert!(recall >= 0.85, "recall {recall:.3} < 0.85");
}

/// The second held-out set (188 utterances in every register the extraction-quality issue
/// names, non-opinions that look like opinions among them), written before the rules changed
/// for it and never tuned against. Before any change: precision 0.841, recall 0.320. After the
/// rules learnt comparatives, perspective markers, prescriptions and reported speech from the
/// tuning set: 0.868 / 0.547. Sixteen of its misses were printed once by an older version of
/// this test, so it is no longer wholly clean. With the word-level scorer (plurals as
/// singulars) 0.887 / 0.564; after the general lexicon, the fixed phrases, the named-topic
/// replies and pronoun resolution: 0.904 / 0.680; after answered questions, others' views,
/// idioms, subjectless chat and ideals: 0.898 / 0.735; after unpunctuated chat, "the best
/// thing about X is Y" and sarcasm: 0.901 / 0.762; after rules learnt from two corpora written
/// by other people: 0.919 / 0.762 (0.920 / 0.768 at one point between); after a session of general forms and precision rounds (favourites lists, pairs, what the persona met, a measured register's idioms, contractions the patterns misread, 40 000 unlabelled chat messages read for wrong topics): 0.921 /
/// 0.779. Floors under that.
#[test]
fn rules_extractor_on_the_second_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_2.jsonl", 180, Misses::Counted);
    assert!(precision >= 0.88, "precision {precision:.3} < 0.88");
    assert!(recall >= 0.74, "recall {recall:.3} < 0.74");
}

/// The third held-out set (156 utterances, 42 of them non-opinions that look like opinions),
/// written after the second had been partly seen and committed before any rule changed for
/// it. Before: precision 0.944, recall 0.535. After the same changes as above: 0.990 / 0.795,
/// then 0.990 / 0.811, then (after rules learnt from other people's text) 0.990 / 0.803, then
/// 1.000 / 0.811 after a session of general forms and precision rounds: the
/// issue's target (0.90 / 0.75), which the floors hold. Its misses are counted, never
/// printed. It was written by the same hand as the tuning rows, in the same session: it shows
/// the rules generalise across the registers it names, not yet to another writer's text.
#[test]
fn rules_extractor_on_the_third_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_3.jsonl", 150, Misses::Counted);
    assert!(precision >= 0.90, "precision {precision:.3} < 0.90");
    assert!(recall >= 0.75, "recall {recall:.3} < 0.75");
}

/// The fourth held-out set (113 utterances, 30 non-opinions), written in another session than
/// the rules' last changes, in the registers of a persona chatting (answers to a user, asides,
/// sarcasm, hedges), and committed before the rules ever read it. Measured twice, each time
/// after a session of rule changes made without sight of it: 0.919 / 0.640, then 0.939 /
/// 0.697 (after the tuning rows of three new registers, written by a session that never read
/// this set). The soberest figures the project has for text the rules were not written
/// against. A third measurement, after one more round (unpunctuated chat, sarcasm, "the best
/// thing about X") made without sight of it: 0.940 / 0.708. A fourth and fifth, after the rules
/// learnt from a chatbot corpus and from people's chat, both written by others: 0.955 / 0.708
/// each time; after precision rounds on unlabelled chat, 0.969 / 0.708; after a session of general forms and precision rounds (favourites lists, pairs, what the persona met, a measured register's idioms, contractions the patterns misread, 40 000 unlabelled chat messages read for wrong topics): 0.970 / 0.719.
/// Floors just under the latest;
/// misses counted, never printed.
#[test]
fn rules_extractor_on_the_fourth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_4.jsonl", 110, Misses::Counted);
    assert!(precision >= 0.93, "precision {precision:.3} < 0.93");
    assert!(recall >= 0.69, "recall {recall:.3} < 0.69");
}

/// The fifth held-out set (113 utterances, 28 non-opinions: multi-sentence replies, role
/// asides, slang, comparatives; help, feedback on the user's work, reported and fictional
/// views), committed before the rules read it and measured before any change: precision
/// 0.902, recall 0.539. Then the same session wrote tuning rows and rules, so its second
/// figure, 0.938 / 0.735, is flattered by the writer's memory of its forms, like the third
/// set's. Three of its sentences also stand word for word in the fourth set, written by
/// another session: sets written by the same model are not independent. After rules learnt
/// from other people's text: 0.949 / 0.735, then 0.962 / 0.735, then 0.961 / 0.725; after a session of general forms and precision rounds (favourites lists, pairs, what the persona met, a measured register's idioms, contractions the patterns misread, 40 000 unlabelled chat messages read for wrong topics):
/// 0.963 / 0.755, over the target but flattered as said. Floors under the earlier
/// figures; misses counted, never printed.
#[test]
fn rules_extractor_on_the_fifth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_5.jsonl", 110, Misses::Counted);
    assert!(precision >= 0.92, "precision {precision:.3} < 0.92");
    assert!(recall >= 0.72, "recall {recall:.3} < 0.72");
}

/// Replies of a chatbot written by other people (chatterbot-corpus, BSD; see
/// `tests/data/THIRD_PARTY.md`): the half tuned against. 385 replies, 44 opinions among
/// definitions, jokes, small talk and self-description. Before any rule changed for it:
/// precision 0.625, recall 0.595; after: 0.929 / 0.886, then 0.930 / 0.909 ("I'd recommend
/// X"). Misses shown.
#[test]
fn rules_extractor_on_text_from_another_hand_tuned_against() {
    let (precision, recall) = measure("rules_extraction_other_hand.jsonl", 380, Misses::Shown);
    assert!(precision >= 0.90, "precision {precision:.3} < 0.90");
    assert!(recall >= 0.85, "recall {recall:.3} < 0.85");
}

/// The other half of that corpus (393 replies, 34 opinions), labelled and committed before the
/// rules read either half: the only set the project has whose text no session of ours wrote.
/// Measured before any change: precision 0.667, recall 0.471. After rules learnt from the
/// tuned half (relative clauses, tag questions, "I'm a X fan", "interested in", possessive and
/// pronoun topics refused, "pretty" and "best known" no longer verdicts): 0.842 / 0.471; after
/// the rules learnt from people's chat too (below): unchanged; after a precision round on
/// 4 000 unlabelled chat messages: 0.889 / 0.471; after the third sample of people's chat,
/// 0.842 / 0.471 (one more wrong find); after a session of general forms and precision rounds (favourites lists, pairs, what the persona met, a measured register's idioms, contractions the patterns misread, 40 000 unlabelled chat messages read for wrong topics): 0.833 /
/// 0.441, one right find lost (not looked for: its text is never printed). With the topic
/// normaliser ("super man" = "superman"), unchanged; after its second reading
/// (`tests/data/RELABELLED.md`: 4 labels added, 1 removed, 37 opinions): 0.889 / 0.432.
/// After a precision round on the second people's-chat tuning set (moments, "a good topic",
/// superlative slots, "that's" inside a named topic, "Wow" as a reply): 0.882 / 0.405, one
/// right find lost (not looked for). Precision carried over; recall did not: another
/// writer's opinions come in forms the tuning half did not show. 37 opinions make a wide
/// interval ([0.26–0.57] on recall). Floors under the latest; misses counted, never printed.
#[test]
fn rules_extractor_on_text_from_another_hand_held_out() {
    let (precision, recall) = measure("extraction_heldout_6.jsonl", 390, Misses::Counted);
    assert!(precision >= 0.80, "precision {precision:.3} < 0.80");
    assert!(recall >= 0.39, "recall {recall:.3} < 0.39");
}

/// Chat messages written by people talking to strangers (chitchat-dataset, MIT; see
/// `tests/data/THIRD_PARTY.md`): the half tuned against, in three samples of 600. The first
/// (58 opinions) before any rule changed for it: precision 0.737, recall 0.500; after: 0.940 /
/// 0.828. The second (54 opinions), labelled after two precision rounds: 0.806 / 0.500 (0.900
/// / 0.685 with two labels it had forgotten); after the rules learnt from it: 0.929 / 0.741.
/// The third (59 opinions): 0.909 / 0.525 before, 0.929 / 0.695 after. All three: 0.932 /
/// 0.749, then 0.933 / 0.754 once "I've always preferred X over Y" was read; after a session of general forms and precision rounds (favourites lists, pairs, what the persona met, a measured register's idioms, contractions the patterns misread, 40 000 unlabelled chat messages read for wrong topics): 0.942 /
/// 0.778. Each fresh sample's recall before its round (0.50, 0.50, 0.53) is the honest figure
/// for people's chat. Misses shown.
#[test]
fn rules_extractor_on_peoples_chat_tuned_against() {
    let (precision, recall) = measure("rules_extraction_chitchat.jsonl", 1800, Misses::Shown);
    assert!(precision >= 0.90, "precision {precision:.3} < 0.90");
    assert!(recall >= 0.72, "recall {recall:.3} < 0.72");
}

/// A second tuning sample of people's chat (2 000 messages, 219 opinions; `THIRD_PARTY.md`),
/// labelled by two readers who had not seen the rules. Before any rule read it: precision
/// 0.752 [0.66–0.82], recall 0.397 [0.33–0.46], as on held-out 10: the first tuning sample's
/// 0.94 / 0.78 is what tuning to a sample buys on that sample. After the round it brought
/// (seven wrong finds of 27 gone, none right lost; one of the 450 finds on 8 000 other
/// unlabelled messages changed): 0.804 / 0.397. A second round (2026-11-26: a verb's `-ing`
/// and bare forms as one topic; chat's comma lists; "not X or Y"; a person of one's life
/// judged; "no one likes X"): 0.862 / 0.479, 9 finds gained on the 8 000 unlabelled messages
/// and none of them wrong by reading. A third round (2026-11-26: stretched words, "I have
/// enjoyed X", a question naming what the next sentence's pronoun judges, "who doesn't love
/// X?", reactions and shared moments refused): 0.891 / 0.507, which the held-out people's chat
/// did not follow (0.839 / 0.462 before, 0.834 / 0.462 after: the forms it taught are rare
/// there). Misses shown.
#[test]
fn rules_extractor_on_the_second_peoples_chat_tuning_set() {
    let (precision, recall) = measure("rules_extraction_chitchat_2.jsonl", 2000, Misses::Shown);
    assert!(precision >= 0.87, "precision {precision:.3} < 0.87");
    assert!(recall >= 0.49, "recall {recall:.3} < 0.49");
}

/// A third tuning sample of people's chat (3 000 messages, 345 opinions; `THIRD_PARTY.md`),
/// labelled by three readers who had not seen the extractor and committed before it ran. No
/// rule has been changed against it (it joined the learned head's training): precision 0.847
/// [0.78–0.90], recall 0.362 [0.31–0.41], what the rules do on fresh people's chat. Floors
/// under that; misses shown (a tuning set).
#[test]
fn rules_extractor_on_the_third_peoples_chat_tuning_set() {
    let (precision, recall) = measure("rules_extraction_chitchat_3.jsonl", 3000, Misses::Shown);
    assert!(precision >= 0.82, "precision {precision:.3} < 0.82");
    assert!(recall >= 0.34, "recall {recall:.3} < 0.34");
}

/// A fourth tuning sample of people's chat (8 000 messages, 941 opinions; `THIRD_PARTY.md`),
/// the next 8 000 of the development set's shuffle, labelled by eight readers who had not seen
/// the extractor and committed before it ran. No rule has been changed against it (the
/// last-layer learned reader was not trained on it; the every-layer reader is): precision
/// 0.790 [0.75–0.82], recall 0.404 [0.37–0.44], what the rules do on fresh people's chat,
/// beside the development set's 0.823 / 0.472. Floors under that; misses shown (a tuning set).
#[test]
fn rules_extractor_on_the_fourth_peoples_chat_tuning_set() {
    let (precision, recall) = measure("rules_extraction_chitchat_4.jsonl", 8000, Misses::Shown);
    assert!(precision >= 0.76, "precision {precision:.3} < 0.76");
    assert!(recall >= 0.38, "recall {recall:.3} < 0.38");
}

/// A fifth tuning sample of people's chat (16 000 messages, 2 377 opinions; `THIRD_PARTY.md`),
/// labelled by sixteen readers who had not seen the extractor and committed before it ran,
/// drawn for the learned reader to train on. Its readers marked more messages (12.4 %) than
/// the fourth set's (9.4 %), so the rules' recall reads lower: precision 0.860 [0.84–0.88],
/// recall 0.340 [0.32–0.36] when first run. Floors under that; misses shown (a tuning set).
#[test]
fn rules_extractor_on_the_fifth_peoples_chat_tuning_set() {
    let (precision, recall) = measure("rules_extraction_chitchat_5.jsonl", 16000, Misses::Shown);
    assert!(precision >= 0.83, "precision {precision:.3} < 0.83");
    assert!(recall >= 0.32, "recall {recall:.3} < 0.32");
}

/// How far apart two readings of the same people's chat are: the fourth tuning set's first
/// 2 000 messages read again by two more readers with the same instructions, who had not seen
/// the first labels (`THIRD_PARTY.md`). Scored as the extractors are, the second reading as
/// the finds: precision 0.934 (185/198), recall 0.911 (185/203). The chat target (precision
/// 0.90) sits under what a second reading reaches. Floors under the measurement, so a label
/// changed in one reading and not weighed against the other shows here.
#[test]
fn a_second_reading_of_peoples_chat_agrees_with_the_first() {
    let second = labelled_set("rules_extraction_chitchat_4_second_reading.jsonl");
    let first: Vec<_> = labelled_set("rules_extraction_chitchat_4.jsonl")
        .into_iter()
        .take(second.len())
        .collect();
    assert_eq!(second.len(), 2000);
    let as_found: Vec<Vec<ExtractedOpinion>> = first
        .iter()
        .zip(&second)
        .map(|(labelled, again)| {
            assert_eq!(
                labelled.text, again.text,
                "the same messages in the same order"
            );
            again
                .opinions
                .iter()
                .map(|opinion| ExtractedOpinion {
                    name: opinion.topic.clone(),
                    opinion: String::new(),
                    category: String::new(),
                    stance: opinion.stance,
                    strength: 1.0,
                    related_user_ids: vec![],
                    evidence: again.text.clone(),
                    found_by: None,
                })
                .collect()
        })
        .collect();
    let agreement = score(&first, &as_found);
    println!(
        "the second reading against the first: precision {:.3} ({}/{}), recall {:.3} ({}/{})",
        agreement.precision,
        agreement.matched,
        agreement.found,
        agreement.recall,
        agreement.recalled,
        agreement.expected
    );
    assert!(agreement.precision >= 0.90, "{}", agreement.precision);
    assert!(agreement.recall >= 0.88, "{}", agreement.recall);
}

/// The other half (600 messages, 53 opinions), labelled and committed before the rules read
/// either half. Measured before any change for this corpus (after the chatbot round): precision
/// 0.649, recall 0.453. After the rules learnt from the tuned half (negated copulas, lists of
/// likings, "it's fun to X", "X is key", "X aren't my favourite", wishes, the one being talked
/// about, moments and childhoods refused, chat filler): 0.694 / 0.472. The tuned half rose from
/// 0.737 / 0.500 to 0.940 / 0.828 on the same changes: people's chat has a tail of forms too
/// long for rules to learn from a sample. Then a precision round: the rules read 4 000 more
/// messages of the corpus (neither half), and what they found was read for wrong topics
/// (interjections, pronouns and stranded prepositions taken for subjects, "I like going to X"
/// read as a preference of one thing to another): 0.727 / 0.453. A recall pass over the same
/// 4 000 messages ("I personally am not a fan of X", "I'm a huge X nerd", "favourite X would
/// have to be Y", "I try to avoid X") left it there; a second precision round on another
/// 4 000 messages (feelings of others and popularity are not verdicts, phrasal verbs with
/// "over", "Dr." inside a clause, "all that much"): 0.750 / 0.453; after the second tuning
/// sample (negated and excessive judgements, emoticons and brackets, "I love that about X"):
/// 0.758 / 0.472; unchanged by the third; after a third precision round on 5 000 other
/// messages (the persona's own life told, "my day was good", is not a view; pronouns inside a
/// topic, quantities with "over"): 0.781 / 0.472; a fourth round on 5 000 more left it there;
/// after a session of general forms and precision rounds (favourites lists, pairs, what the persona met, a measured register's idioms, contractions the patterns misread, 40 000 unlabelled chat messages read for wrong topics): 0.839 / 0.491. Floors under the earlier figures; misses counted, never shown.
#[test]
fn rules_extractor_on_peoples_chat_held_out() {
    let (precision, recall) = measure("extraction_heldout_7.jsonl", 600, Misses::Counted);
    assert!(precision >= 0.66, "precision {precision:.3} < 0.66");
    assert!(recall >= 0.44, "recall {recall:.3} < 0.44");
}

/// 600 more messages of the same corpus (62 opinions), labelled after the rules' last change
/// for people's chat and measured then: 0.800 / 0.532, the cleanest figure here for people's
/// chat. The rules as this set's session found them scored 0.612 / 0.516 on it: that session's
/// work (two corpora by other people and a precision round) bought precision on fresh text,
/// little recall. After a second precision round on 4 000 other messages: 0.821 / 0.532;
/// after a second tuning sample of 600: 0.829 / 0.565; unchanged by a third sample and a third
/// precision round; after a session of general forms and precision rounds (favourites lists, pairs, what the persona met, a measured register's idioms, contractions the patterns misread, 40 000 unlabelled chat messages read for wrong topics): 0.872 / 0.565. Floors under the first measurement; misses counted,
/// never shown.
#[test]
fn rules_extractor_on_fresh_peoples_chat() {
    let (precision, recall) = measure("extraction_heldout_8.jsonl", 600, Misses::Counted);
    assert!(precision >= 0.76, "precision {precision:.3} < 0.76");
    assert!(recall >= 0.50, "recall {recall:.3} < 0.50");
}

/// 600 fresh messages of the same corpus (64 opinions; `tests/data/THIRD_PARTY.md`), labelled
/// and committed before the rules ever ran on them, after a round of general forms and a
/// precision pass over 40 000 other unlabelled messages. The rules scored precision 0.767,
/// recall 0.359 on it; the rules as they stood before that round scored 0.793 / 0.359. So the
/// round bought nothing measurable on fresh people's chat: the clearest figure here for what
/// the rules do with text they were not written against. Its labels count every item of a
/// list and every liking in a multi-opinion message, which the rules rarely split, so its
/// recall sits under the 0.50 of earlier fresh samples. Floors under the first measurement;
/// misses counted, never shown.
#[test]
fn rules_extractor_on_the_freshest_peoples_chat() {
    let (precision, recall) = measure("extraction_heldout_9.jsonl", 600, Misses::Counted);
    assert!(precision >= 0.70, "precision {precision:.3} < 0.70");
    assert!(recall >= 0.33, "recall {recall:.3} < 0.33");
}

/// 1 506 fresh messages of the same corpus (160 opinions; `tests/data/THIRD_PARTY.md`),
/// labelled by a reader who had not seen the rules and committed before any extractor ran on
/// them, drawn from the far end of a new shuffle of 187 808 messages. Measured once, after the
/// round that brought the topic normaliser and the second reading of sets 6–9: precision
/// 0.711 [0.61–0.80] (59/83), recall 0.388 [0.32–0.46] (62/160). Well under the earlier
/// people's-chat sets (0.77–0.92): on chat it was not written against, about three findings in
/// ten are wrong. Read again once after the second people's-chat round, which tuned on the
/// tuning samples only: 0.773 [0.67–0.85] (68/88), 0.438 [0.36–0.51] (70/160). A blind second
/// reading (2026-11-29, `RELABELLED.md`) added 7 missed opinions, two of which the rules had
/// found: 0.798 [0.70–0.87] (71/89), 0.437 [0.36–0.51] (73/167), where the same rules read
/// 0.775 / 0.444 before it. Floors under those measurements; misses counted, never shown.
#[test]
fn rules_extractor_on_the_tenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_10.jsonl", 1500, Misses::Counted);
    assert!(precision >= 0.75, "precision {precision:.3} < 0.75");
    assert!(recall >= 0.42, "recall {recall:.3} < 0.42");
}

/// 3 000 fresh messages of the same corpus (439 opinions in 354 messages;
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor
/// and committed before any extractor ran on them, drawn by `scripts/sample-chitchat` from a
/// new shuffle of the 165 302 messages no other set holds. Measured once (2026-12-03, stop
/// 72), with nothing changed for it: precision 0.850 [0.79-0.90] (136/160), recall 0.328
/// [0.29-0.37] (144/439). The precision is the development set's and held-out 7-10's; the
/// recall sits under theirs because its readers marked more messages as holding a view
/// (11-13 %, against the development set readers' 8-11 %). Floors under that measurement;
/// misses counted, never shown.
#[test]
fn rules_extractor_on_the_eleventh_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_11.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.80, "precision {precision:.3} < 0.80");
    assert!(recall >= 0.30, "recall {recall:.3} < 0.30");
}

/// 3 000 more fresh messages of the same corpus (401 opinions in 342 messages;
/// `tests/data/THIRD_PARTY.md`), drawn by `scripts/sample-chitchat` from a new shuffle of the
/// 162 302 messages no other set holds, labelled by three readers who had not seen the
/// extractor and committed before any extractor ran on them. Measured once (2026-12-03, stop
/// 73, after the round that names a doing liked "to" as the doing and splits a pair liked
/// together; nothing changed for it): precision 0.855 [0.79-0.90] (147/172), recall 0.364
/// [0.32-0.41] (146/401), held-out 11's figures within their intervals. Floors under that
/// measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_twelfth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_12.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.80, "precision {precision:.3} < 0.80");
    assert!(recall >= 0.32, "recall {recall:.3} < 0.32");
}

/// 3 000 more fresh messages of the same corpus (422 opinions in 340 messages;
/// `tests/data/THIRD_PARTY.md`), drawn by `scripts/sample-chitchat` from a new shuffle of the
/// 159 302 messages no other set holds, labelled by three readers who had not seen the
/// extractor and committed before any extractor ran on them. Measured once (2026-12-03, stop
/// 74, the rules unchanged since set 12's round): precision 0.877 [0.82-0.92] (143/163),
/// recall 0.348 [0.30-0.39] (147/422), sets 11 and 12's figures within their intervals (0.883
/// (143/162) once a placeholder topic one of its lines showed was refused).
/// Floors under that measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_thirteenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_13.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.82, "precision {precision:.3} < 0.82");
    assert!(recall >= 0.31, "recall {recall:.3} < 0.31");
}

/// Held-out set 14: 3 000 more fresh messages of people's chat (447 opinions in 384 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-06,
/// stop 77): precision 0.791 [0.73–0.84] (159/201), recall 0.358 [0.31–0.40] (160/447), the
/// lowest precision of the people's-chat sets. Floors under that measurement; misses counted,
/// never shown.
#[test]
fn rules_extractor_on_the_fourteenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_14.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.75, "precision {precision:.3} < 0.75");
    assert!(recall >= 0.32, "recall {recall:.3} < 0.32");
}

/// Held-out set 15: 3 000 more fresh messages of people's chat (377 opinions in 323 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-06,
/// stop 78): precision 0.787 [0.72–0.84] (126/160), recall 0.337 [0.29–0.39] (127/377).
/// Floors under that measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_fifteenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_15.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.75, "precision {precision:.3} < 0.75");
    assert!(recall >= 0.30, "recall {recall:.3} < 0.30");
}

/// Held-out set 16: 3 000 more fresh messages of people's chat (470 opinions in 392 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-06,
/// stop 79): precision 0.824 [0.76–0.87] (154/187), recall 0.323 [0.28–0.37] (152/470).
/// Floors under that measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_sixteenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_16.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.78, "precision {precision:.3} < 0.78");
    assert!(recall >= 0.29, "recall {recall:.3} < 0.29");
}

/// Held-out set 17: 3 000 more fresh messages of people's chat (469 opinions in 375 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-06,
/// stop 79): precision 0.890 [0.83–0.93] (154/173), recall 0.328 [0.29–0.37] (154/469).
/// Floors under that measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_seventeenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_17.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.85, "precision {precision:.3} < 0.85");
    assert!(recall >= 0.29, "recall {recall:.3} < 0.29");
}

/// Held-out set 18: 3 000 more fresh messages of people's chat (433 opinions in 365 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-06,
/// stop 80): precision 0.851 [0.79–0.90] (143/168), recall 0.326 [0.28–0.37] (141/433).
/// Floors under that measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_eighteenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_18.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.80, "precision {precision:.3} < 0.80");
    assert!(recall >= 0.29, "recall {recall:.3} < 0.29");
}

/// Held-out set 19: 3 000 more fresh messages of people's chat (463 opinions in 383 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-06,
/// stop 81): precision 0.825 [0.77–0.87] (170/206), recall 0.371 [0.33–0.42] (172/463).
/// Floors under that measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_nineteenth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_19.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.77, "precision {precision:.3} < 0.77");
    assert!(recall >= 0.33, "recall {recall:.3} < 0.33");
}

/// Held-out set 20: 3 000 more fresh messages of people's chat (466 opinions in 382 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-06,
/// stop 83, the round of the MPNet reader): precision 0.861 [0.81–0.90] (179/208), recall
/// 0.388 [0.35–0.43] (181/466). Floors under that measurement; misses counted, never shown.
#[test]
fn rules_extractor_on_the_twentieth_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_20.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.81, "precision {precision:.3} < 0.81");
    assert!(recall >= 0.34, "recall {recall:.3} < 0.34");
}

/// Held-out set 21: 3 000 more fresh messages of people's chat (`tests/data/THIRD_PARTY.md`),
/// labelled by three readers who had not seen the extractor and committed before any extractor
/// ran on it. First read (2026-12-07, stop 85, the round the checked rules became the default):
/// the rules unchecked 0.876 (191/218) / 0.404. Floors under that measurement; misses counted,
/// never shown.
#[test]
fn rules_extractor_on_the_twenty_first_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_21.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.83, "precision {precision:.3} < 0.83");
    assert!(recall >= 0.36, "recall {recall:.3} < 0.36");
}

/// Held-out set 22: 3 000 more fresh messages of people's chat (432 opinions in 359 messages,
/// `tests/data/THIRD_PARTY.md`), labelled by three readers who had not seen the extractor and
/// committed before any extractor ran on it; no rule changed for it. First read (2026-12-07,
/// stop 86): the rules unchecked 0.889 [0.83–0.93] (152/171) / 0.356 (154/432); checked at 0.6
/// (the default) 0.929 (145/156) / 0.340. Floors under that measurement; misses counted, never
/// shown.
#[test]
fn rules_extractor_on_the_twenty_second_held_out_set() {
    let (precision, recall) = measure("extraction_heldout_22.jsonl", 3000, Misses::Counted);
    assert!(precision >= 0.84, "precision {precision:.3} < 0.84");
    assert!(recall >= 0.31, "recall {recall:.3} < 0.31");
}

/// The development set: 8 000 fresh messages of the same corpus (856 opinions in 694
/// messages; `tests/data/THIRD_PARTY.md`), labelled by eight readers who had not seen the
/// extractor and committed before any extractor ran on it. Never trained on and no rule
/// written against it; it chooses between learned readers and their thresholds. First read
/// (2026-11-29): precision 0.823 [0.79–0.85] (390/474), recall 0.472 [0.44–0.51] (404/856),
/// the held-out people's chat's figures (0.849 / 0.459) with a third of their interval. Floors
/// under it; misses counted, never shown (its misses are not for writing rules from).
#[test]
fn rules_extractor_on_the_development_set() {
    let (precision, recall) = measure("extraction_development.jsonl", 8000, Misses::Counted);
    assert!(precision >= 0.80, "precision {precision:.3} < 0.80");
    assert!(recall >= 0.45, "recall {recall:.3} < 0.45");
}
