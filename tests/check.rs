//! `check`: what a draft persona message would do to memory, decided as ingest decides and
//! written nowhere. Against a real service (NATS, Redis), with the default extractor.

mod common;

use common::{Running, test_config};
use persona_prefs::client::{Client, ClientError};
use persona_prefs::serve::protocol::{
    AddRequest, CheckReply, CheckRequest, CheckTurn, ErrorKind, ListRequest, SetBasesRequest,
};
use persona_prefs::store::Stance;

struct Persona {
    running: Running,
    client: Client,
    _cleanup: common::Cleanup,
}

/// A service with ada, who loves green tea and can't stand crowds, and kid, whose base elder
/// loves jazz.
async fn service(label: &str) -> Persona {
    let config = test_config(label);
    let cleanup = common::Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    for (persona, name, opinion, stance) in [
        ("ada", "green tea", "I love green tea.", Stance::For),
        ("ada", "crowds", "I can't stand crowds.", Stance::Against),
        ("elder", "jazz", "I love jazz.", Stance::For),
    ] {
        client
            .add(&AddRequest {
                persona_id: persona.into(),
                name: name.into(),
                opinion: opinion.into(),
                stance: Some(stance),
                ..AddRequest::default()
            })
            .await
            .unwrap();
    }
    client
        .set_bases(&SetBasesRequest {
            persona_id: "kid".into(),
            bases: vec!["elder".into()],
        })
        .await
        .unwrap();
    Persona {
        running,
        client,
        _cleanup: cleanup,
    }
}

fn draft(persona: &str, text: &str) -> CheckRequest {
    CheckRequest {
        persona_id: persona.into(),
        draft: text.into(),
        conversation: Vec::new(),
    }
}

/// A draft and the topics it should contradict, restate and add.
type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);

fn names(reply: &CheckReply) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
    (
        reply.contradicts.iter().map(|f| f.name.as_str()).collect(),
        reply.restates.iter().map(|f| f.name.as_str()).collect(),
        reply.new.iter().map(|o| o.topic.as_str()).collect(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_is_told_what_it_contradicts_restates_and_adds() {
    let p = service("checkdraft").await;
    let before = p
        .client
        .list(&ListRequest {
            persona_id: "ada".into(),
            category: None,
            include_retracted: false,
            limit: 50,
        })
        .await
        .unwrap();

    // (draft, contradicts, restates, new)
    let cases: [Case; 5] = [
        (
            "Honestly, green tea is disgusting.",
            &["green tea"],
            &[],
            &[],
        ),
        ("I really do love green tea.", &[], &["green tea"], &[]),
        ("I adore thunderstorms.", &[], &[], &["thunderstorms"]),
        (
            "I love crowds, and thunderstorms are wonderful.",
            &["crowds"],
            &[],
            &["thunderstorms"],
        ),
        ("Hello! How was your day?", &[], &[], &[]),
    ];
    for (text, contradicts, restates, new) in cases {
        let reply = p.client.check(&draft("ada", text)).await.unwrap();
        let (c, r, n) = names(&reply);
        assert_eq!(
            (c.as_slice(), r.as_slice(), n.as_slice()),
            (contradicts, restates, new),
            "{text:?}"
        );
    }

    // A contradiction carries the stored opinion, the draft's own words and the similarity.
    let reply = p
        .client
        .check(&draft("ada", "Honestly, green tea is disgusting."))
        .await
        .unwrap();
    let found = &reply.contradicts[0];
    assert_eq!(found.stored_opinion, "I love green tea.");
    assert_eq!(found.stored_stance, Some(Stance::For));
    assert_eq!(found.draft.stance, Stance::Against);
    assert_eq!(found.draft.evidence, "Honestly, green tea is disgusting.");
    assert!(found.similarity > 0.9, "{}", found.similarity);
    assert_eq!(found.inherited_from, None);

    // Nothing was written: the same preferences, none reinforced or evolved.
    let after = p
        .client
        .list(&ListRequest {
            persona_id: "ada".into(),
            category: None,
            include_retracted: false,
            limit: 50,
        })
        .await
        .unwrap();
    let shape = |list: &[persona_prefs::store::Preference]| {
        list.iter()
            .map(|p| {
                (
                    p.id.clone(),
                    p.reinforcement_count,
                    p.evolution_history.len(),
                    p.opinion.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&before), shape(&after));
    p.running.stop().await;
}

/// The conversation is context: the user's opinions in it and the persona's earlier turns are
/// not the draft's, so only the draft is checked.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_draft_is_checked_not_the_conversation_before_it() {
    let p = service("checkcontext").await;
    let turn = |role, content: &str| CheckTurn {
        role,
        user_id: if role == persona_prefs::ingest::event::Role::User {
            "u1".into()
        } else {
            String::new()
        },
        content: content.into(),
    };
    use persona_prefs::ingest::event::Role;
    let mut request = draft("ada", "I adore thunderstorms.");
    request.conversation = vec![
        turn(Role::User, "I hate green tea, and I love crowds."),
        turn(Role::Persona, "Honestly, green tea is disgusting."),
        turn(Role::User, "What about the weather?"),
    ];
    let reply = p.client.check(&request).await.unwrap();
    assert_eq!(
        names(&reply),
        (vec![], vec![], vec!["thunderstorms"]),
        "{reply:?}"
    );
    p.running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_layered_persona_is_checked_against_its_bases() {
    let p = service("checklayers").await;
    let reply = p
        .client
        .check(&draft("kid", "Honestly, jazz is awful."))
        .await
        .unwrap();
    assert_eq!(names(&reply).0, vec!["jazz"]);
    assert_eq!(
        reply.contradicts[0].inherited_from.as_deref(),
        Some("elder")
    );
    let agrees = p.client.check(&draft("kid", "I love jazz.")).await.unwrap();
    assert_eq!(names(&agrees).1, vec!["jazz"]);
    assert_eq!(agrees.restates[0].inherited_from.as_deref(), Some("elder"));
    p.running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_drafts_are_refused_with_the_field_at_fault() {
    let p = service("checkbad").await;
    let long = "a".repeat(p.running.app.config.ingest.max_message_chars + 1);
    let many: Vec<CheckTurn> = (0..p.running.app.config.ingest.max_messages_per_event)
        .map(|n| CheckTurn {
            role: persona_prefs::ingest::event::Role::User,
            user_id: "u1".into(),
            content: format!("message {n}"),
        })
        .collect();
    let mut too_many = draft("ada", "I love tea.");
    too_many.conversation = many;
    for (request, says) in [
        (draft("ada", "   "), "draft"),
        (draft("ada", &long), "chars"),
        (too_many, "messages"),
    ] {
        match p.client.check(&request).await {
            Err(ClientError::Service { error, .. }) => {
                assert_eq!(error.kind, ErrorKind::Invalid, "{error:?}");
                assert!(error.message.contains(says), "{says}: {}", error.message);
            }
            other => panic!("{says}: expected an invalid-request error, got {other:?}"),
        }
    }
    // A persona id that is no subject token has no subject: the client refuses it.
    match p
        .client
        .check(&draft("no such persona!", "I love tea."))
        .await
    {
        Err(ClientError::InvalidPersona { reason, .. }) => {
            assert!(reason.contains("persona_id"), "{reason}")
        }
        other => panic!("expected the client to refuse the persona id, got {other:?}"),
    }
    // A body the protocol does not know is refused too.
    let raw = p
        .running
        .app
        .nats
        .request(
            persona_prefs::serve::Endpoint::Check.subject(
                &p.running.app.config.serve.subject_prefix,
                &p.running.app.config.serve.tenant,
                "ada",
            ),
            r#"{"persona_id": "ada", "draft": "I love tea.", "persona": "bob"}"#.into(),
        )
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&raw.payload).unwrap();
    assert_eq!(body["error"]["kind"], "malformed", "{body}");
    p.running.stop().await;
}
