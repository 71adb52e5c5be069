//! Property tests (proptest) of the pure edges where outside input meets the service: event
//! parsing and validation, ids and TAG escaping, the rendered prompt blocks, effect ids, and
//! the rules extractor on any text up to the size limit (request bodies: tests/request_properties.rs).
//! Each runs 10 000 generated cases; none may panic, and each holds its invariant.

use persona_prefs::ingest::event::{EventLimits, parse_event};
use persona_prefs::serve::render::{Format, is_invisible, render, visible};
use persona_prefs::store::effects::{EFFECT_ID_LEN, MessageEffects, normalised_topic};
use persona_prefs::store::query::escape_tag;
use persona_prefs::store::{InjectedPreference, Keys, MatchReason, Stance, validate};
use proptest::prelude::*;
use serde_json::{Value, json};

const CASES: u32 = 10_000;

/// Events the parser accepted in `accepted_events_honour_every_limit` (a property over only
/// refusals would hold vacuously).
static ACCEPTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn limits() -> EventLimits {
    EventLimits {
        max_payload_bytes: 64 * 1024,
        max_messages: 4,
        max_message_chars: 200,
        max_participants: 3,
        max_injected: 4,
    }
}

/// Text with what breaks parsers and prompts: markup, quotes, separators, control and bidi
/// characters, astral symbols.
fn hostile_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<char>(),
            2 => prop::sample::select(vec![
                '<', '>', '&', '"', '\'', '{', '}', '|', ':', ',', '.', '\\', '\n', '\r', '\t',
                '\0', '\u{202e}', '\u{2066}', '\u{200b}', '*', '#', '[', ']', '(', ')', '`', '-',
                ' ', '😀',
            ]),
            2 => prop::char::range('a', 'z'),
        ],
        0..40,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// A JSON value that is sometimes the right type and often not.
fn loose_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        hostile_text().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        prop::collection::vec(hostile_text().prop_map(Value::from), 0..3).prop_map(Value::from),
    ]
}

/// Mostly a plain id, sometimes anything at all.
fn mostly_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        19 => "[a-z0-9_-]{1,12}".prop_map(Value::from),
        1 => loose_value(),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    (
        prop_oneof![10 => Just("user"), 10 => Just("persona"), 1 => Just("system"), 1 => Just("")],
        hostile_text(),
        mostly_id(),
        prop_oneof![
            19 => Just(json!("2026-11-20T08:00:00Z")),
            1 => hostile_text().prop_map(Value::from)
        ],
        mostly_id(),
    )
        .prop_map(|(role, content, user_id, timestamp, message_id)| {
            json!({"role": role, "content": content, "user_id": user_id,
                "timestamp": timestamp, "message_id": message_id})
        })
}

fn event() -> impl Strategy<Value = Value> {
    (
        prop_oneof![9 => Just(json!("ada")), 1 => loose_value()],
        mostly_id(),
        mostly_id(),
        mostly_id(),
        // Up to one over the limit of messages (and participants).
        prop::collection::vec(message(), 0..6),
        prop::collection::vec(mostly_id(), 0..5),
    )
        .prop_map(
            |(persona, event_id, platform, channel, messages, participants)| {
                json!({"persona_id": persona, "event_id": event_id, "platform": platform,
                "channel_id": channel, "messages": messages,
                "participant_user_ids": participants})
            },
        )
}

fn preference(name: String, category: String, opinion: String) -> InjectedPreference {
    InjectedPreference {
        id: "p".into(),
        name,
        opinion,
        strength: 0.5,
        relevance: 0.5,
        score: 0.25,
        // A stored user id reaches the block through the explanation: as hostile as the rest.
        matched_by: vec![MatchReason::Semantic, MatchReason::User(category.clone())],
        decayed_strength: 0.5,
        inherited_from: Some(category.clone()),
        category,
    }
}

proptest! {
    // No failure files: a failing case is printed, and CI starts from a clean clone anyway.
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any bytes at all: a parsed event or a typed refusal, never a panic.
    #[test]
    fn any_payload_is_parsed_or_refused(payload in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_event("persona.messages.ada", "persona.messages", &payload, &limits());
    }

    /// Events of every shape: what is accepted honours every limit and names the subject's
    /// persona; nothing panics.
    #[test]
    fn accepted_events_honour_every_limit(event in event()) {
        let payload = serde_json::to_vec(&event).unwrap();
        let limits = limits();
        let parsed = parse_event("persona.messages.ada", "persona.messages", &payload, &limits);
        ACCEPTED.fetch_add(parsed.is_ok() as usize, std::sync::atomic::Ordering::Relaxed);
        if let Ok(parsed) = parsed {
            prop_assert_eq!(parsed.persona_id.as_str(), "ada");
            prop_assert!(!parsed.messages.is_empty() && parsed.messages.len() <= limits.max_messages);
            prop_assert!(parsed.participant_user_ids.len() <= limits.max_participants);
            for message in &parsed.messages {
                prop_assert!(message.content.chars().count() <= limits.max_message_chars);
                prop_assert!(validate::external_text("message_id", &message.message_id).is_ok());
            }
        }
    }

    /// An id the validators accept makes keys whose hash tag is exactly the persona id (so all
    /// of a persona's keys share one cluster slot), and TAG escaping is lossless and leaves no
    /// punctuation or whitespace that could end the clause.
    #[test]
    fn ids_and_tags_cannot_break_keys_or_queries(persona in hostile_text(), id in hostile_text(), tag in hostile_text()) {
        let _ = validate::user_id("user_id", &id);
        if validate::persona_id(&persona).is_ok() && validate::preference_id(&id).is_ok() {
            let key = Keys::new("prefix").preference(&persona, &id);
            let open = key.find('{').unwrap();
            let close = open + key[open..].find('}').unwrap();
            prop_assert_eq!(&key[open + 1..close], persona.as_str());
        }
        let escaped = escape_tag(&tag);
        let mut unescaped = String::new();
        let mut chars = escaped.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                unescaped.push(chars.next().expect("an escape escapes something"));
            } else {
                prop_assert!(!(c.is_ascii() && !c.is_ascii_alphanumeric() && c != '_'), "unescaped {:?} in {:?}", c, escaped);
                unescaped.push(c);
            }
        }
        prop_assert_eq!(unescaped, tag);
    }

    /// No stored text can close or break the prompt block: the XML keeps its elements, the
    /// Markdown one bullet per preference, the JSON every string exactly.
    #[test]
    fn rendered_blocks_hold_whatever_was_stored(
        items in prop::collection::vec((hostile_text(), hostile_text(), hostile_text()), 0..5)
    ) {
        let preferences: Vec<InjectedPreference> = items
            .iter()
            .map(|(name, category, opinion)| preference(name.clone(), category.clone(), opinion.clone()))
            .collect();
        let xml = render(Format::Xml, &preferences, &[], true);
        prop_assert!(xml.starts_with("<persona_preferences>\n"));
        prop_assert!(xml.ends_with("</persona_preferences>"));
        prop_assert_eq!(xml.matches("<preference ").count(), preferences.len());
        prop_assert_eq!(xml.matches("</preference>").count(), preferences.len());
        let tagless = xml
            .replace("<persona_preferences>", "")
            .replace("</persona_preferences>", "")
            .replace("</preference>", "")
            .replace("<preference ", "");
        // What remains holds no markup: the only '>' left close the opening tags.
        prop_assert!(!tagless.contains('<'));
        prop_assert_eq!(tagless.matches('>').count(), preferences.len());
        prop_assert_eq!(xml.lines().count(), preferences.len() + 2);
        prop_assert!(!xml.chars().any(is_invisible));

        let markdown = render(Format::Markdown, &preferences, &[], true);
        prop_assert_eq!(markdown.lines().count(), preferences.len() + 1);
        for line in markdown.lines().skip(1) {
            prop_assert!(line.starts_with("- **"), "{}", line);
        }
        prop_assert!(!markdown.chars().any(is_invisible));

        let parsed: Vec<Value> = serde_json::from_str(&render(Format::Json, &preferences, &[], true)).unwrap();
        prop_assert_eq!(parsed.len(), preferences.len());
        for (rendered, stored) in parsed.iter().zip(&preferences) {
            // Exactly what was stored, less what cannot be seen.
            let (opinion, topic) = (visible(&stored.opinion), visible(&stored.name));
            prop_assert_eq!(rendered["opinion"].as_str(), Some(opinion.as_str()));
            prop_assert_eq!(rendered["topic"].as_str(), Some(topic.as_str()));
        }
    }

    /// Effect ids are injective in what they name and bounded in length: two messages share
    /// ids only if they are the same message, two opinions only if their normalised topics and
    /// stances are the same.
    #[test]
    fn effect_ids_are_injective_and_bounded(
        a in (hostile_text(), hostile_text(), hostile_text()),
        b in (hostile_text(), hostile_text(), hostile_text()),
        topics in (hostile_text(), hostile_text()),
        stances in (any::<bool>(), any::<bool>()),
    ) {
        let first = MessageEffects::of(&a.0, &a.1, &a.2);
        let second = MessageEffects::of(&b.0, &b.1, &b.2);
        prop_assert_eq!(first == second, a == b);
        let stance = |for_it: bool| if for_it { Stance::For } else { Stance::Against };
        let (one, other) = (
            first.adding(&topics.0, stance(stances.0)),
            first.adding(&topics.1, stance(stances.1)),
        );
        let same = normalised_topic(&topics.0) == normalised_topic(&topics.1) && stances.0 == stances.1;
        prop_assert_eq!(one == other, same);
        prop_assert_ne!(first.on_preference(&topics.0), second.adding(&topics.0, Stance::For));
        for id in [one, other, first.on_preference(&a.0), second.on_preference(&b.2)] {
            prop_assert!(id.len() <= EFFECT_ID_LEN);
        }
    }
}

/// Words the rules read, among arbitrary characters: a text the extractor gets a grip on
/// often, so the property reaches its readers and not only its refusals.
fn chat_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => prop::sample::select(vec![
            "I love ", "I hate ", "I can't stand ", "honestly, ", "not ", "but ", "and ",
            "is the best", "is overrated", "tea", "jazz", "crowds", "your ", "Sam, ", "?", "!",
            ". ", ", ", " than ", "right up my alley", "I'd rather ", "never ", "so ", "really ",
            "\n", "\u{202e}", "😀", "(", ")", "\"", "…",
        ])
        .prop_map(str::to_string),
        2 => any::<char>().prop_map(String::from),
        1 => "[a-z]{1,12} ".prop_map(String::from),
    ];
    prop_oneof![
        9 => prop::collection::vec(piece.clone(), 0..120),
        // Up to the size limit of a message (ingest.max_message_chars, 8 000).
        1 => prop::collection::vec(piece, 0..2_000),
    ]
    .prop_map(|pieces| pieces.concat().chars().take(8_000).collect())
}

/// The rules extractor on any text up to the size limit: no panic, at most its cap of
/// opinions, each with a topic, a strength in range, an opinion and the rule that found it; and
/// the generated texts reach its readers (some hold opinions). Its time per KiB is measured by
/// `cargo bench --bench extractor`, not here: these machines are shared.
#[test]
fn the_rules_extractor_reads_any_text_up_to_the_limit() {
    use proptest::test_runner::{TestCaseError, TestRunner};
    let extractor = persona_prefs::extract::rules::RulesExtractor::new(8);
    let with_opinions = std::cell::Cell::new(0usize);
    let mut runner = TestRunner::new(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&chat_text(), |text| {
            let found = extractor.extract_text(&text);
            if found.len() > 8 {
                return Err(TestCaseError::fail(format!("{} opinions", found.len())));
            }
            with_opinions.set(with_opinions.get() + usize::from(!found.is_empty()));
            for opinion in &found {
                let fine = !opinion.name.trim().is_empty()
                    && opinion.name.chars().count() <= text.chars().count()
                    && (0.0..=1.0).contains(&opinion.strength)
                    && !opinion.opinion.trim().is_empty()
                    && opinion.found_by.is_some();
                if !fine {
                    return Err(TestCaseError::fail(format!("{opinion:?} from {text:?}")));
                }
            }
            Ok(())
        })
        .unwrap();
    let with_opinions = with_opinions.get();
    assert!(
        with_opinions >= CASES as usize / 20,
        "only {with_opinions} of {CASES} texts held an opinion: the property would be vacuous"
    );
    println!("{with_opinions} of {CASES} generated texts held opinions");
}

/// Runs after the property (nextest: its own process, so the count is this property's).
#[test]
fn the_event_property_sees_accepted_events_too() {
    accepted_events_honour_every_limit();
    let accepted = ACCEPTED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        accepted >= CASES as usize / 20,
        "only {accepted} of {CASES} generated events were valid: the property would be vacuous"
    );
    println!("{accepted} of {CASES} generated events accepted");
}
