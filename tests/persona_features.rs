//! Layered personas, preferences over time (decay, versions and restore, consolidation) and
//! explained injection, end to end: events through the worker, requests through the service
//! (typed client and the CLI), real Redis and NATS.

mod common;

use std::time::Duration;

use common::cli::{stderr, stdout};
use common::{Cleanup, Running, test_config};
use persona_prefs::client::{
    AddRequest, Client, ConsolidateRequest, ErrorKind, EvolveRequest, InjectRequest,
    RestoreRequest, RetractRequest, SetBasesRequest,
};
use persona_prefs::serve::render::Format;
use persona_prefs::store::{InjectedPreference, Preference, Stance};
use serde_json::{Value, json};

/// An event of one persona turn answering one user turn, `minute` minutes into the test day.
fn said(persona: &str, event_id: &str, minute: u32, text: &str) -> Value {
    let at = |second: u32| {
        format!(
            "2026-11-20T{:02}:{:02}:{second:02}Z",
            8 + minute / 60,
            minute % 60
        )
    };
    json!({
        "event_id": event_id,
        "persona_id": persona,
        "platform": "discord",
        "channel_id": "c1",
        "messages": [
            {"message_id": format!("{event_id}-0"), "role": "user", "user_id": "u1", "content": "Tell me what you think.", "timestamp": at(0)},
            {"message_id": format!("{event_id}-1"), "role": "persona", "content": text, "timestamp": at(1)},
        ],
    })
}

fn inject_request(persona: &str, query: &str) -> InjectRequest {
    InjectRequest {
        persona_id: persona.into(),
        query: Some(query.into()),
        query_embedding: None,
        active_user_ids: Vec::new(),
        max_count: 8,
        max_chars: 2000,
        format: Format::Xml,
        resident: false,
        explain: true,
    }
}

fn named<'a>(preferences: &'a [InjectedPreference], topic: &str) -> Vec<&'a InjectedPreference> {
    preferences.iter().filter(|p| p.name == topic).collect()
}

/// A curator's add for persona `ada`: a culinary preference, for, of that strength.
fn ada_add(name: &str, opinion: &str, strength: f64) -> AddRequest {
    AddRequest {
        persona_id: "ada".into(),
        name: name.into(),
        opinion: opinion.into(),
        category: "culinary".into(),
        stance: Some(Stance::For),
        strength: Some(strength),
        ..AddRequest::default()
    }
}

async fn active(client: &Client, persona: &str) -> Vec<Preference> {
    client
        .list(&persona_prefs::client::ListRequest {
            persona_id: persona.into(),
            category: None,
            include_retracted: false,
            limit: 100,
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_layered_persona_shares_its_bases_views_until_it_voices_its_own() {
    let config = test_config("layers");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);

    running
        .publish_event(&said("elder", "e1", 0, "I love jazz."))
        .await;
    running
        .publish_event(&said("elder", "e2", 1, "I hate okra."))
        .await;
    running.drain().await;
    assert_eq!(active(&client, "elder").await.len(), 2);

    // Naming bases: itself, a repeat and a cycle are refused, and say why.
    let set = |persona: &str, bases: &[&str]| SetBasesRequest {
        persona_id: persona.into(),
        bases: bases.iter().map(|b| b.to_string()).collect(),
    };
    let bases = client.set_bases(&set("kid", &["elder"])).await.unwrap();
    assert_eq!(bases.bases, vec!["elder"]);
    assert_eq!(bases.layers.len(), 1);
    for (persona, refused, why) in [
        ("kid", vec!["kid"], "its own base"),
        ("kid", vec!["elder", "elder"], "named twice"),
        ("elder", vec!["kid"], "a cycle: elder -> kid -> elder"),
    ] {
        let error = client.set_bases(&set(persona, &refused)).await.unwrap_err();
        assert_eq!(error.kind(), Some(ErrorKind::Invalid), "{error}");
        assert!(error.to_string().contains(why), "{error}");
    }
    assert!(client.bases("elder").await.unwrap().bases.is_empty());

    // Injection: the kid has no view of its own yet, so the elder's is injected and says so.
    let reply = client
        .inject(&inject_request("kid", "what music do you like, jazz?"))
        .await
        .unwrap();
    let jazz = named(&reply.preferences, "jazz");
    assert_eq!(jazz.len(), 1, "{:?}", reply.preferences);
    assert_eq!(jazz[0].inherited_from.as_deref(), Some("elder"));
    assert!(
        reply.rendered.contains("shared from base persona elder"),
        "{}",
        reply.rendered
    );
    // The CLI shows the layers, and its injection explains itself the same way.
    let output = common::cli::run(&config, &["prefs", "bases", "--persona", "kid"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("layer 1  elder"),
        "{}",
        stdout(&output)
    );
    let output = common::cli::run(
        &config,
        &[
            "inject",
            "--persona",
            "kid",
            "--query",
            "what music do you like, jazz?",
            "--explain",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output)
            .contains("(why: close to the conversation; shared from base persona elder)"),
        "{}",
        stdout(&output)
    );
    // A persona without bases sees none of the elder's views.
    let stranger = client
        .inject(&inject_request("stranger", "what music do you like, jazz?"))
        .await
        .unwrap();
    assert!(
        stranger.preferences.is_empty(),
        "{:?}",
        stranger.preferences
    );

    // The kid voices the opposite: its own preference overrides the elder's, which is untouched.
    running
        .publish_event(&said("kid", "k1", 2, "I hate jazz."))
        .await;
    running.drain().await;
    let own = active(&client, "kid").await;
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(own[0].stance, Some(Stance::Against));
    assert!(own[0].inherited_from.starts_with("elder/"), "{:?}", own[0]);
    assert_eq!(own[0].version, 2, "the elder's view is kept as version 1");
    assert_eq!(
        own[0].evolution_history[0].action.as_deref(),
        Some("override")
    );
    assert_eq!(
        own[0].evolution_history[0].old_opinion.as_deref(),
        Some("I love jazz.")
    );
    let elder = active(&client, "elder").await;
    let elder_jazz = elder.iter().find(|p| p.name == "jazz").unwrap();
    assert_eq!(
        elder_jazz.stance,
        Some(Stance::For),
        "writes never reach a base"
    );
    let reply = client
        .inject(&inject_request("kid", "what music do you like, jazz?"))
        .await
        .unwrap();
    let jazz = named(&reply.preferences, "jazz");
    assert_eq!(
        jazz.len(),
        1,
        "only the kid's own view: {:?}",
        reply.preferences
    );
    assert_eq!(jazz[0].inherited_from, None);
    assert_eq!(jazz[0].opinion, "I hate jazz.");

    // The elder changes its mind on okra: the kid, with no view of its own, follows.
    running
        .publish_event(&said("elder", "e3", 3, "I love okra."))
        .await;
    running.drain().await;
    let reply = client
        .inject(&inject_request("kid", "do you like okra?"))
        .await
        .unwrap();
    let okra = named(&reply.preferences, "okra");
    assert_eq!(okra.len(), 1, "{:?}", reply.preferences);
    assert_eq!(okra[0].opinion, "I love okra.");
    assert_eq!(okra[0].inherited_from.as_deref(), Some("elder"));

    // The kid agrees with the elder out loud: its own preference, the same stance.
    running
        .publish_event(&said("kid", "k2", 4, "I love okra."))
        .await;
    running.drain().await;
    let own = active(&client, "kid").await;
    let own_okra = own
        .iter()
        .find(|p| p.name == "okra")
        .expect("the kid's own okra");
    assert!(own_okra.inherited_from.starts_with("elder/"));
    assert_eq!(own_okra.version, 1, "agreeing overrides nothing");

    // Removing the bases isolates the kid again.
    client.set_bases(&set("kid", &[])).await.unwrap();
    let reply = client
        .inject(&inject_request("kid", "what music do you like, jazz?"))
        .await
        .unwrap();
    assert!(reply.preferences.iter().all(|p| p.inherited_from.is_none()));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bases_of_bases_are_followed_to_the_depth_limit() {
    let mut config = test_config("basedepth");
    config.store.max_base_depth = 2;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    running
        .publish_event(&said("grandparent", "g1", 0, "I love chess."))
        .await;
    running.drain().await;
    let set = |persona: &str, base: &str| SetBasesRequest {
        persona_id: persona.into(),
        bases: vec![base.into()],
    };
    client
        .set_bases(&set("parent", "grandparent"))
        .await
        .unwrap();
    let bases = client.set_bases(&set("child", "parent")).await.unwrap();
    assert_eq!(
        bases
            .layers
            .iter()
            .map(|l| (l.persona_id.as_str(), l.depth))
            .collect::<Vec<_>>(),
        vec![("parent", 1), ("grandparent", 2)]
    );
    let reply = client
        .inject(&inject_request("child", "do you play chess?"))
        .await
        .unwrap();
    assert_eq!(
        named(&reply.preferences, "chess").len(),
        1,
        "two layers down"
    );
    assert_eq!(
        named(&reply.preferences, "chess")[0]
            .inherited_from
            .as_deref(),
        Some("grandparent")
    );
    // A third layer is over the limit.
    let error = client
        .set_bases(&set("grandchild", "child"))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("deeper than store.max_base_depth"),
        "{error}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn versions_are_kept_and_restored_through_the_service_and_the_cli() {
    let config = test_config("restore");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    let added = client
        .add(&ada_add("green tea", "I love green tea.", 0.8))
        .await
        .unwrap();
    assert_eq!(added.version, 1);
    client
        .evolve(&EvolveRequest {
            persona_id: "ada".into(),
            preference_id: added.id.clone(),
            new_opinion: "Green tea tastes of grass to me now.".into(),
            reason: "tried a bad batch".into(),
            new_stance: Some(Stance::Against),
        })
        .await
        .unwrap();
    client
        .retract(&RetractRequest {
            persona_id: "ada".into(),
            preference_id: added.id.clone(),
            reason: "off topic for this persona".into(),
        })
        .await
        .unwrap();
    let stored = client.get("ada", &added.id).await.unwrap();
    assert_eq!(stored.version, 3);
    /// A kept version: its number, opinion, stance and whether it was active.
    type Version<'a> = (Option<u64>, Option<&'a str>, Option<&'a str>, Option<bool>);
    let versions: Vec<Version> = stored
        .evolution_history
        .iter()
        .map(|e| {
            (
                e.version,
                e.old_opinion.as_deref(),
                e.old_stance.as_deref(),
                e.old_active,
            )
        })
        .collect();
    assert_eq!(
        versions,
        vec![
            (Some(1), Some("I love green tea."), Some("for"), Some(true)),
            (
                Some(2),
                Some("Green tea tastes of grass to me now."),
                Some("against"),
                Some(true)
            ),
        ]
    );
    assert_eq!(stored.evolution_history[0].old_strength, Some(0.8));

    // Version 1 back, through the CLI: opinion, stance, strength and activity.
    let output = common::cli::run(
        &config,
        &[
            "prefs",
            "restore",
            "--persona",
            "ada",
            &added.id,
            "1",
            "--reason",
            "the batch was bad, not the tea",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("I love green tea."),
        "{}",
        stdout(&output)
    );
    let restored = client.get("ada", &added.id).await.unwrap();
    assert!(restored.active);
    assert_eq!(restored.opinion, "I love green tea.");
    assert_eq!(restored.stance, Some(Stance::For));
    assert_eq!(restored.strength, 0.8);
    assert_eq!(restored.version, 4);
    let last = restored.evolution_history.last().unwrap();
    assert_eq!(last.action.as_deref(), Some("restore"));
    assert_eq!(last.restored, Some(1));
    assert_eq!(last.reason, "the batch was bad, not the tea");
    // It is injected again.
    let reply = client
        .inject(&inject_request("ada", "what tea do you drink?"))
        .await
        .unwrap();
    assert_eq!(named(&reply.preferences, "green tea").len(), 1);
    // The restore is a version too: undo it by restoring version 3 (the retracted state).
    let undone = client
        .restore(&RestoreRequest {
            persona_id: "ada".into(),
            preference_id: added.id.clone(),
            version: 3,
            reason: String::new(),
        })
        .await
        .unwrap();
    assert!(!undone.active);
    assert_eq!(undone.version, 5);
    // A version that was never kept is refused with the ones that are.
    let error = client
        .restore(&RestoreRequest {
            persona_id: "ada".into(),
            preference_id: added.id.clone(),
            version: 99,
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.kind(), Some(ErrorKind::Invalid));
    assert!(error.to_string().contains("restorable: 1,2,3,4"), "{error}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn consolidation_reports_first_and_merges_only_when_asked() {
    let config = test_config("consolidate");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    let add = |name: &str, opinion: &str, strength: f64, user: &str| AddRequest {
        triggering_user_id: user.into(),
        related_user_ids: vec![user.into()],
        ..ada_add(name, opinion, strength)
    };
    let strong = client
        .add(&add("green tea", "I love green tea.", 0.9, "u1"))
        .await
        .unwrap();
    let twin = client
        .add(&add("green teas", "Green teas are lovely.", 0.6, "u2"))
        .await
        .unwrap();
    let other = client
        .add(&add("thunderstorms", "I adore thunderstorms.", 0.7, "u3"))
        .await
        .unwrap();
    client.reinforce("ada", &twin.id).await.unwrap();

    // The CLI's default is a dry run: a report, nothing written.
    let output = common::cli::run(
        &config,
        &[
            "prefs",
            "consolidate",
            "--persona",
            "ada",
            "--threshold",
            "0.8",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = stdout(&output);
    assert!(printed.contains("dry run"), "{printed}");
    assert!(
        printed.contains(&format!("keep {}", strong.id)),
        "{printed}"
    );
    assert!(printed.contains(&format!("merge {}", twin.id)), "{printed}");
    assert_eq!(
        active(&client, "ada").await.len(),
        3,
        "a dry run writes nothing"
    );

    let report = client
        .consolidate(&ConsolidateRequest {
            persona_id: "ada".into(),
            threshold: Some(0.8),
            apply: true,
        })
        .await
        .unwrap();
    assert!(!report.dry_run);
    assert_eq!(report.groups.len(), 1);
    assert_eq!(report.groups[0].survivor_id, strong.id);
    assert_eq!(report.groups[0].merged.len(), 1);
    let survivor = client.get("ada", &strong.id).await.unwrap();
    // Counts add up: the twin's reinforcement and its own first voicing.
    assert_eq!(survivor.reinforcement_count, 2);
    assert_eq!(survivor.strength, 0.9);
    assert!(
        survivor.evidence_user_ids.contains(&"u2".to_string()),
        "{survivor:?}"
    );
    assert!(survivor.related_user_ids.contains(&"u2".to_string()));
    let entry = survivor.evolution_history.last().unwrap();
    assert_eq!(entry.action.as_deref(), Some("consolidation"));
    assert_eq!(entry.merged.as_deref(), Some(twin.id.as_str()));
    let merged = client.get("ada", &twin.id).await.unwrap();
    assert!(!merged.active);
    assert_eq!(
        merged
            .evolution_history
            .last()
            .unwrap()
            .merged_into
            .as_deref(),
        Some(strong.id.as_str())
    );
    assert!(client.get("ada", &other.id).await.unwrap().active);
    // The merged preference's related user now finds the survivor.
    let mut about = inject_request("ada", "ok");
    about.active_user_ids = vec!["u2".into()];
    let reply = client.inject(&about).await.unwrap();
    assert_eq!(
        reply
            .preferences
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>(),
        vec![strong.id.as_str()]
    );
    // Nothing left to merge.
    let again = client
        .consolidate(&ConsolidateRequest {
            persona_id: "ada".into(),
            threshold: Some(0.8),
            apply: true,
        })
        .await
        .unwrap();
    assert!(again.groups.is_empty(), "{again:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strength_decays_while_unvoiced_and_injection_prefers_what_is_still_said() {
    let mut config = test_config("decay");
    // A half-life of under a second, so the test can watch it: 0.00001 days = 0.864 s.
    config.store.strength_half_life_days = 0.00001;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    let add = |name: &str, strength: f64| ada_add(name, &format!("I love {name}."), strength);
    let faded = client.add(&add("okra", 0.9)).await.unwrap();
    let voiced = client.add(&add("thunderstorms", 0.5)).await.unwrap();
    // Several half-lives pass; then the persona voices one of them again.
    tokio::time::sleep(Duration::from_millis(4000)).await;
    client.reinforce("ada", &voiced.id).await.unwrap();

    let stored = client.get("ada", &faded.id).await.unwrap();
    assert_eq!(stored.strength, 0.9, "decay is never written");
    let decayed = stored.decayed_strength.unwrap();
    assert!(decayed < 0.9 / 8.0, "three half-lives and more: {decayed}");
    let mut residents = inject_request("ada", "ok");
    residents.resident = true;
    residents.max_count = 1;
    let reply = client.inject(&residents).await.unwrap();
    assert_eq!(
        reply
            .preferences
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>(),
        vec![voiced.id.as_str()],
        "the one still voiced is the strongest now"
    );
    assert!(reply.preferences[0].decayed_strength > reply.preferences[0].strength * 0.5);
    // The list puts it first too, and the CLI shows both strengths.
    let listed = active(&client, "ada").await;
    assert_eq!(listed[0].id, voiced.id);
    let output = common::cli::run(&config, &["prefs", "get", "--persona", "ada", &faded.id]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("strength      0.900 (0 reinforcements), 0.0"),
        "{}",
        stdout(&output)
    );
    running.stop().await;
}

/// Residents are the strongest by decayed strength, exactly, even behind more faded views
/// than the injection script reads at first: with one resident and one preference asked for,
/// it used to read the three strongest by stored strength, all faded here, and chose one.
#[tokio::test(flavor = "multi_thread")]
async fn residents_are_the_strongest_after_decay_even_behind_many_faded_views() {
    let mut config = test_config("decay-walk");
    // 0.00001 days = 0.864 s: five half-lives pass while the test sleeps.
    config.store.strength_half_life_days = 0.00001;
    config.serve.resident_count = 1;
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    for name in ["okra", "opera", "jazz", "chess", "tea", "rain"] {
        let opinion = format!("I love {name}.");
        client.add(&ada_add(name, &opinion, 0.9)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let voiced = client
        .add(&ada_add("thunderstorms", "I love thunderstorms.", 0.4))
        .await
        .unwrap();

    let mut residents = inject_request("ada", "ok");
    residents.resident = true;
    residents.max_count = 1;
    let reply = client.inject(&residents).await.unwrap();
    let chosen: Vec<&str> = reply.preferences.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        chosen,
        vec![voiced.id.as_str()],
        "0.4 still voiced outweighs 0.9 faded five half-lives (0.03)"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_registry_lists_every_persona_with_memory_without_a_scan() {
    let config = test_config("registry");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    running
        .publish_event(&said("ada", "a1", 0, "I love jazz."))
        .await;
    running
        .publish_event(&said("ada", "a2", 1, "I hate okra."))
        .await;
    running
        .publish_event(&said("bob", "b1", 2, "I love chess."))
        .await;
    running.drain().await;
    let directory = client
        .personas(&persona_prefs::client::PersonasRequest {
            limit: 10,
            offset: 0,
        })
        .await
        .unwrap();
    assert_eq!(directory.total, 2);
    let ada = directory
        .personas
        .iter()
        .find(|p| p.persona_id == "ada")
        .expect("ada is registered");
    assert_eq!((ada.active, ada.total), (2, 2));
    let mut topics = ada.strongest.clone();
    topics.sort();
    assert_eq!(topics, vec!["jazz", "okra"]);
    assert!(ada.last_activity.starts_with("20"), "{ada:?}");
    // Pages: one at a time, most recently active first.
    let first = client
        .personas(&persona_prefs::client::PersonasRequest {
            limit: 1,
            offset: 0,
        })
        .await
        .unwrap();
    let second = client
        .personas(&persona_prefs::client::PersonasRequest {
            limit: 1,
            offset: 1,
        })
        .await
        .unwrap();
    assert_eq!(first.personas.len(), 1);
    assert_ne!(first.personas[0].persona_id, second.personas[0].persona_id);
    // The CLI lists them too.
    let output = common::cli::run(&config, &["prefs", "personas"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("2 personas in all"),
        "{}",
        stdout(&output)
    );
    running.stop().await;
}
