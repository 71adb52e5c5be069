//! The persona inspector (`persona-prefs ui`) in a real browser: Debian's chromium driven
//! through its WebDriver (chromedriver), against the real service with real Redis and NATS.
//! Every page visited is saved as a screenshot under `target/inspector-screenshots/` and
//! checked not to be blank.
//!
//! `scripts/services tools` installs chromium and chromium-driver; these tests fail, saying
//! so, where they are missing.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Children, Cleanup, Running, free_port, test_config};
use fantoccini::{ClientBuilder, Locator};
use persona_prefs::client::{AddRequest, Client};
use persona_prefs::store::Stance;
use persona_prefs::ui::{Inspector, router};
use serde_json::{Value, json};

/// What a hostile curator or a manipulated persona could have stored.
const HOSTILE_TOPIC: &str = "<script>window.pwned = 1</script>";
const HOSTILE_OPINION: &str = "<img src=x onerror=\"window.pwned = 2\"> <a href=\"javascript:window.pwned = 3\">click me</a> I love \u{202E}evil\u{202C} tea\u{200B}.";

/// chromedriver on a free port, killed with the test.
async fn chromedriver() -> (Children, String) {
    let port = free_port();
    let child = std::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromedriver (Debian's chromium-driver; `scripts/services tools` installs it)");
    // Killed and reaped on drop, however the test ends.
    let children = Children(vec![child]);
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if reqwest::get(format!("{url}/status")).await.is_ok() {
            return (children, url);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not answer on {url}");
}

async fn browser(webdriver: &str) -> fantoccini::Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1100,900", "--force-device-scale-factor=1"],
        }),
    );
    // A browser process can fail to come up on a loaded machine (its first start on a fresh
    // one builds font caches); a few tries, then the last error.
    let mut last_error = None;
    for _ in 0..3 {
        match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities.clone())
            .connect(webdriver)
            .await
        {
            Ok(client) => return client,
            Err(error) => last_error = Some(error),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("no chromium session: {last_error:?}")
}

/// An inspector on a free port over the running service.
async fn inspector(running: &Running, writable: bool) -> String {
    let config = &running.app.config;
    let inspector = Inspector {
        client: Client::new(running.app.nats.clone(), config),
        dead_letters: persona_prefs::ingest::dead_letters::DeadLetters::new(
            running.app.js.clone(),
            config.ingest.clone(),
        ),
        writable,
        categories: config.store.categories.clone(),
        reinforce_rate: config.store.reinforce_rate,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(inspector)).await });
    format!("http://{address}")
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/inspector-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves the page as `<name>.png` and checks it shows something: many colours, not one. A
/// page still being painted is captured again until it shows or patience runs out.
async fn capture(browser: &fantoccini::Client, name: &str) -> PathBuf {
    let path = screenshots().join(format!("{name}.png"));
    let started = std::time::Instant::now();
    loop {
        let png = browser.screenshot().await.unwrap();
        std::fs::write(&path, &png).unwrap();
        let (colours, background_percent) = colours_of(&png);
        if colours > 20 && background_percent < 99 {
            return path;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{name}: a blank page ({colours} colours, {background_percent}% background)"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How many colours the picture has, and what share of it is the top-left pixel's colour.
fn colours_of(png: &[u8]) -> (usize, usize) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    let bytes = &pixels[..frame.buffer_size()];
    let step = frame.color_type.samples();
    let rgb = 3.min(step);
    let mut colours = std::collections::HashSet::new();
    let mut background = 0usize;
    for pixel in bytes.chunks(step) {
        colours.insert(pixel[..rgb].to_vec());
        if pixel[..rgb] == bytes[..rgb] {
            background += 1;
        }
    }
    (colours.len(), background * 100 / (bytes.len() / step))
}

/// The checks every page passes: landmarks, labels, the skip link first, nothing stored run
/// as markup, no invisible or bidi-control character on screen.
async fn every_page_holds_up(browser: &fantoccini::Client, name: &str) {
    let report = browser
        .execute(
            r#"
            const focusable = document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea');
            const unlabelled = Array.from(document.querySelectorAll('input:not([type=hidden]), select, textarea, meter'))
              .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.outerHTML);
            return {
              landmarks: ['header', 'nav', 'main', 'footer'].map(t => document.querySelectorAll(t).length),
              h1: document.querySelectorAll('h1').length,
              unlabelled: unlabelled,
              firstFocusable: focusable.length ? focusable[0].className : '',
              scripts: document.scripts.length,
              images: document.images.length,
              javascriptLinks: document.querySelectorAll('a[href^="javascript:"]').length,
              handlers: document.querySelectorAll('[onerror], [onclick], [onload]').length,
              pwned: window.pwned === undefined ? null : window.pwned,
              invisible: /[\u202A-\u202E\u2066-\u2069\u200B-\u200F\uFEFF]/.test(document.body.innerText),
              lang: document.documentElement.lang,
            };
            "#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(report["landmarks"], json!([1, 1, 1, 1]), "{name}: {report}");
    assert_eq!(report["h1"], 1, "{name}: one main heading");
    assert_eq!(
        report["unlabelled"],
        json!([]),
        "{name}: every control has a label"
    );
    assert_eq!(
        report["firstFocusable"], "skip",
        "{name}: the skip link comes first"
    );
    assert_eq!(report["scripts"], 0, "{name}: no script on the page");
    assert_eq!(
        report["images"], 0,
        "{name}: no stored <img> became an image"
    );
    assert_eq!(report["javascriptLinks"], 0, "{name}");
    assert_eq!(report["handlers"], 0, "{name}: no stored event handler");
    assert_eq!(report["pwned"], Value::Null, "{name}");
    assert_eq!(
        report["invisible"], false,
        "{name}: bidi and invisible characters stripped"
    );
    assert_eq!(report["lang"], "en");
}

/// How long the browser may take for anything. Generous: CI runs chromium beside the rest
/// of the suite on two shared cores, where a page can take seconds to load and paint.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits for the element, then clicks it.
async fn click(browser: &fantoccini::Client, locator: Locator<'_>) {
    shows(browser, locator).await.click().await.unwrap();
}

/// Waits until the element is on the page.
async fn shows(
    browser: &fantoccini::Client,
    locator: Locator<'_>,
) -> fantoccini::elements::Element {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        match browser.wait().at_most(PATIENCE).for_element(locator).await {
            Ok(element) => return element,
            // A lookup made while the page is navigating is aborted by Chromium ("aborted by
            // navigation"); the page being loaded is the one to look in, so look again.
            Err(error)
                if error.to_string().contains("aborted by navigation")
                    && std::time::Instant::now() < deadline =>
            {
                continue;
            }
            Err(error) => panic!("waiting for {locator:?}: {error}"),
        }
    }
}

/// Waits until the page's path ends with `suffix`: a click that navigates may return before
/// the new page has arrived.
async fn arrives_at(browser: &fantoccini::Client, suffix: &str) {
    let started = std::time::Instant::now();
    loop {
        let url = browser.current_url().await.unwrap();
        if url.path().ends_with(suffix) {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "still at {url}, not …{suffix}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The page's text. Asked again if the page was replaced between finding the body and reading it.
async fn body_text(browser: &fantoccini::Client) -> String {
    let started = std::time::Instant::now();
    loop {
        let text = match browser.find(Locator::Css("body")).await {
            Ok(body) => body.text().await,
            Err(error) => Err(error),
        };
        match text {
            Ok(text) => return text,
            Err(error) => assert!(started.elapsed() < PATIENCE, "the page's text: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn add(persona: &str, name: &str, opinion: &str, strength: f64) -> AddRequest {
    AddRequest {
        persona_id: persona.into(),
        name: name.into(),
        opinion: opinion.into(),
        category: "culinary".into(),
        stance: Some(Stance::For),
        strength: Some(strength),
        triggering_user_id: "carol".into(),
        triggering_message_id: "m1".into(),
        source_platform: "discord".into(),
        source_channel_id: "c1".into(),
        related_user_ids: vec!["carol".into()],
        related_kg_uuids: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn designers_read_search_preview_and_curate_in_a_real_browser() {
    let config = test_config("inspector");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let client = Client::new(running.app.nats.clone(), &running.app.config);
    let tea = client
        .add(&add(
            "ada",
            "green tea",
            "I love green tea in the morning.",
            0.8,
        ))
        .await
        .unwrap();
    client
        .evolve(&persona_prefs::client::EvolveRequest {
            persona_id: "ada".into(),
            preference_id: tea.id.clone(),
            new_opinion: "Green tea, but only sencha.".into(),
            reason: "a trip to Shizuoka".into(),
            new_stance: None,
        })
        .await
        .unwrap();
    client.reinforce("ada", &tea.id).await.unwrap();
    let hostile = client
        .add(&add("ada", HOSTILE_TOPIC, HOSTILE_OPINION, 0.6))
        .await
        .unwrap();
    let storms = client
        .add(&add("ada", "thunderstorms", "I adore thunderstorms.", 0.7))
        .await
        .unwrap();
    let opera = client
        .add(&AddRequest {
            triggering_user_id: "erin".into(),
            related_user_ids: vec!["erin".into()],
            ..add("ada", "opera", "Opera moves me.", 0.5)
        })
        .await
        .unwrap();
    client
        .add(&add(
            "bob",
            "marmite",
            "Bob's secret: marmite on everything.",
            0.9,
        ))
        .await
        .unwrap();

    let writer = inspector(&running, true).await;
    let reader = inspector(&running, false).await;
    let (_driver, webdriver) = chromedriver().await;
    let browser = browser(&webdriver).await;

    // The personas, from the registry.
    browser.goto(&format!("{writer}/")).await.unwrap();
    every_page_holds_up(&browser, "personas").await;
    capture(&browser, "personas").await;
    let text = body_text(&browser).await;
    assert!(text.contains("ada") && text.contains("bob"), "{text}");

    // Open ada: beliefs by category, strength drawn, nothing of bob's.
    click(&browser, Locator::LinkText("ada")).await;
    arrives_at(&browser, "/personas/ada").await;
    shows(&browser, Locator::Css("form.filters")).await;
    every_page_holds_up(&browser, "persona").await;
    capture(&browser, "persona").await;
    let text = body_text(&browser).await;
    assert!(text.contains("Green tea, but only sencha."), "{text}");
    assert!(
        text.contains(HOSTILE_TOPIC),
        "stored markup is shown as text: {text}"
    );
    assert!(
        !text.contains("marmite"),
        "no persona's data on another's page"
    );
    assert_eq!(
        browser.find_all(Locator::Css("meter")).await.unwrap().len(),
        4,
        "a strength bar per belief"
    );

    // Search by words.
    let form = browser.form(Locator::Css("form.filters")).await.unwrap();
    form.set_by_name("q", "sencha").await.unwrap();
    browser
        .find(Locator::Css("#mode"))
        .await
        .unwrap()
        .select_by_value("keyword")
        .await
        .unwrap();
    form.submit().await.unwrap();
    let results = shows(&browser, Locator::Id("results")).await;
    assert!(results.text().await.unwrap().contains("sencha"));
    let found = browser
        .find_all(Locator::Css("section[aria-labelledby=results] li.belief"))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    every_page_holds_up(&browser, "search").await;
    capture(&browser, "search").await;

    // One preference: provenance, timeline, chart.
    browser
        .goto(&format!("{writer}/personas/ada/prefs/{}", tea.id))
        .await
        .unwrap();
    every_page_holds_up(&browser, "preference").await;
    capture(&browser, "preference").await;
    let text = body_text(&browser).await;
    assert!(
        text.contains("a trip to Shizuoka"),
        "the reason is on the timeline: {text}"
    );
    assert!(
        text.contains("I love green tea in the morning."),
        "the old opinion too"
    );
    assert!(text.contains("carol"), "provenance");
    let chart = browser.find(Locator::Css("svg.chart")).await.unwrap();
    assert_eq!(chart.attr("role").await.unwrap().as_deref(), Some("img"));
    assert!(
        browser
            .find_all(Locator::Css("svg.chart circle"))
            .await
            .unwrap()
            .len()
            >= 3
    );

    // The hostile one: its page holds up too.
    browser
        .goto(&format!("{writer}/personas/ada/prefs/{}", hostile.id))
        .await
        .unwrap();
    every_page_holds_up(&browser, "hostile").await;
    capture(&browser, "hostile").await;

    // Injection preview: the block a prompt builder would get, and why.
    browser
        .goto(&format!("{writer}/personas/ada/inject"))
        .await
        .unwrap();
    let form = browser.form(Locator::Css("main form")).await.unwrap();
    form.set_by_name("message", "Which tea should I brew?")
        .await
        .unwrap();
    form.set_by_name("users", "carol").await.unwrap();
    form.submit().await.unwrap();
    let rendered = shows(&browser, Locator::Id("rendered")).await;
    let block = rendered.text().await.unwrap();
    assert!(block.starts_with("<persona_preferences>"), "{block}");
    assert!(block.contains("Green tea, but only sencha."), "{block}");
    assert!(
        block.contains("why=\""),
        "the reasons are in the block: {block}"
    );
    every_page_holds_up(&browser, "inject").await;
    capture(&browser, "inject").await;

    // Dead letters: an event without messages is given up on, with the reason; discard it.
    running
        .publish_event(&json!({"event_id": "broken", "persona_id": "ada", "platform": "discord", "channel_id": "c1"}))
        .await;
    running.drain().await;
    browser
        .goto(&format!("{writer}/dead-letters"))
        .await
        .unwrap();
    every_page_holds_up(&browser, "dead-letters").await;
    capture(&browser, "dead-letters").await;
    let text = body_text(&browser).await;
    assert!(
        text.contains("ada") && text.contains("messages"),
        "the reason: {text}"
    );
    click(&browser, Locator::XPath("//button[.='Discard']")).await;
    shows(
        &browser,
        Locator::XPath("//p[contains(., 'every event was processed')]"),
    )
    .await;

    // Restore the first version from the timeline.
    browser
        .goto(&format!("{writer}/personas/ada/prefs/{}", tea.id))
        .await
        .unwrap();
    click(&browser, Locator::XPath("//button[.='Restore version 1']")).await;
    shows(
        &browser,
        Locator::XPath(
            "//p[contains(@class, 'lead') and contains(., 'I love green tea in the morning.')]",
        ),
    )
    .await;
    assert_eq!(client.get("ada", &tea.id).await.unwrap().version, 3);

    // Erase a user, behind a confirmation page.
    browser
        .goto(&format!("{writer}/personas/ada"))
        .await
        .unwrap();
    let form = browser
        .form(Locator::Css("form[action$='/purge']"))
        .await
        .unwrap();
    form.set_by_name("user_id", "erin").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, Locator::XPath("//h1[contains(., 'Erase user')]")).await;
    every_page_holds_up(&browser, "confirm-purge").await;
    capture(&browser, "confirm-purge").await;
    click(&browser, Locator::Css("input[name=confirm]")).await;
    click(&browser, Locator::XPath("//button[.='Erase']")).await;
    shows(&browser, Locator::XPath("//h1[.='User erased']")).await;
    let erased = client.get("ada", &opera.id).await.unwrap();
    assert!(!erased.related_user_ids.contains(&"erin".to_string()));
    assert!(
        !erased.active,
        "erin's conversations were its only evidence"
    );

    // Retract with the write role: confirm, then it is gone from every prompt.
    browser
        .goto(&format!("{writer}/personas/ada/prefs/{}", storms.id))
        .await
        .unwrap();
    click(&browser, Locator::Css("input[name=confirm]")).await;
    click(&browser, Locator::Id("retract")).await;
    shows(
        &browser,
        Locator::XPath("//*[contains(., 'retracted · version')]"),
    )
    .await;
    assert!(!client.get("ada", &storms.id).await.unwrap().active);
    capture(&browser, "retracted").await;

    // Delete a whole persona: the id must be typed again; a wrong one deletes nothing.
    let doomed = client
        .add(&add("doomed", "fog", "I like fog.", 0.5))
        .await
        .unwrap();
    browser
        .goto(&format!("{writer}/personas/doomed"))
        .await
        .unwrap();
    click(&browser, Locator::LinkText("Delete this persona…")).await;
    shows(
        &browser,
        Locator::XPath("//h1[contains(., 'Delete persona doomed')]"),
    )
    .await;
    every_page_holds_up(&browser, "confirm-delete").await;
    capture(&browser, "confirm-delete").await;
    let form = browser
        .form(Locator::Css("form[action$='/delete']"))
        .await
        .unwrap();
    form.set_by_name("confirm", "doomd").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, Locator::XPath("//h1[.='Not confirmed']")).await;
    assert!(
        client.get("doomed", &doomed.id).await.is_ok(),
        "nothing deleted"
    );
    browser
        .goto(&format!("{writer}/personas/doomed/delete"))
        .await
        .unwrap();
    let form = browser
        .form(Locator::Css("form[action$='/delete']"))
        .await
        .unwrap();
    form.set_by_name("confirm", "doomed").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, Locator::XPath("//h1[.='Persona deleted']")).await;
    assert!(
        client.get("doomed", &doomed.id).await.is_err(),
        "its preference is gone"
    );

    // Without the write role: no curation on the page, and a forged post is refused.
    browser
        .goto(&format!("{reader}/personas/ada/prefs/{}", tea.id))
        .await
        .unwrap();
    every_page_holds_up(&browser, "read-only").await;
    capture(&browser, "read-only").await;
    assert!(
        browser
            .find_all(Locator::Css("main form"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(body_text(&browser).await.contains("read-only"));
    let browser_token = "0123456789abcdef0123456789abcdef";
    let retract_tea = |base: &str, token: &str, origin: Option<&str>| {
        let mut post = reqwest::Client::new()
            .post(format!("{base}/personas/ada/prefs/{}/retract", tea.id))
            .header("cookie", format!("pp_csrf={browser_token}"))
            .form(&[("csrf", token), ("confirm", "yes")]);
        if let Some(origin) = origin {
            post = post.header("origin", origin);
        }
        async move { post.send().await.unwrap().status() }
    };
    // A forged post without the write role: refused.
    assert_eq!(retract_tea(&reader, browser_token, None).await, 403);
    // With the write role but a token that is not the browser's: refused too.
    assert_eq!(
        retract_tea(&writer, "fedcba9876543210fedcba9876543210", None).await,
        403
    );
    // And a matching token from another origin.
    assert_eq!(
        retract_tea(&writer, browser_token, Some("http://evil.example")).await,
        403
    );
    assert!(client.get("ada", &tea.id).await.unwrap().active);
    // Every response forbids scripts outright.
    let page = reqwest::get(format!("{reader}/")).await.unwrap();
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(policy.contains("default-src 'none'"), "{policy}");

    browser.close().await.unwrap();
    running.stop().await;
}

/// The README's picture: the demo persona (the sample conversation `scripts/demo` publishes)
/// on its inspector page. Saved under target/ always; copied to docs/inspector.png when
/// `PERSONA_PREFS_README_SCREENSHOT=1`.
#[tokio::test(flavor = "multi_thread")]
async fn the_demo_persona_as_the_readme_shows_it() {
    let config = test_config("inspector-demo");
    let _cleanup = Cleanup(config.clone());
    let running = Running::worker_and_service(config.clone()).await;
    let sample = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample_conversation.jsonl"),
    )
    .unwrap();
    for line in sample.lines().filter(|line| !line.trim().is_empty()) {
        running
            .publish_event(&serde_json::from_str::<Value>(line).unwrap())
            .await;
    }
    running.drain().await;
    let writer = inspector(&running, false).await;
    let (_driver, webdriver) = chromedriver().await;
    let browser = browser(&webdriver).await;
    browser.set_window_size(1000, 900).await.unwrap();
    browser
        .goto(&format!("{writer}/personas/demo_stargazer"))
        .await
        .unwrap();
    every_page_holds_up(&browser, "demo").await;
    let path = capture(&browser, "demo-persona").await;
    if std::env::var("PERSONA_PREFS_README_SCREENSHOT").as_deref() == Ok("1") {
        std::fs::copy(
            &path,
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/inspector.png"),
        )
        .unwrap();
    }
    browser.close().await.unwrap();
    running.stop().await;
}
