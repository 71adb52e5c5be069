//! Ingest throughput (events/s) through JetStream, the pipeline and Redis, beside its floor.
//!
//! 1. The embedder's raw batched throughput: texts/s when the local model embeds batches of
//!    `embed.max_batch` distinct topic texts back to back. Each bench event carries one
//!    persona message with one opinion, so this is also the embedder-bound limit in events/s.
//! 2. The pipeline with the rules extractor and the local embedder on events whose topics are
//!    all distinct ("I love green wooden chairs."), so neither the embedding cache nor the
//!    batcher's de-duplication can help: N events published, then the time until the worker
//!    has acked them all. Target ≥ 0.9 × the embedder-bound limit.
//! 3. The pipeline with the `llm` extractor against a local OpenAI-format server answering
//!    after a fixed 50 ms. Target ≥ 300 events/s (in-flight concurrency must hide latency).
//! 4. The rules pipeline on events that repeat 24 topics over 16 personas, as conversations
//!    do, with the embedding cache on (the default): what repetition saves.
//! 6. Run 2 with the rules checked by the learned sentence score
//!    (`extract.rules_min_sentence_score`, `BENCH_CHECK`, default 0.08): each event's message
//!    holds a find, so each is read by the model once more, the check's worst case. A default
//!    extractor keeps at least 0.8 × the rules' throughput (issue 29). Its messages are
//!    plain views ("I love green wooden chairs."), which the check's word score is sure of, so the model
//!    reads almost none of them (`extract.rules_check_keeps_at_word_score`); 6b runs it again
//!    with the model reading every finding, as on chat the word score is unsure of. Both are
//!    compared with run 2 repeated just before 6 and just after 6b, not with run 2 itself,
//!    minutes earlier: the machine's speed drifts more than the bar's margin in that time.
//!
//! 7. `rules_then_learned` on plain chat that voices no view in any phrasing the rules read
//!    ("the train left at 412 so I walked the rest of the way"), as most of a persona's
//!    messages are: the learned reader then reads each whole message, one pass of the model an
//!    event, gathered into batches across events. Its floor is the model's raw rate on the
//!    same lines (one text an event, in batches of `embed.max_batch`); the worker's CPU an
//!    event is printed beside the model's a line. 7b, with `BENCH_READER` and
//!    `BENCH_READER_ENCODER` set: `learned` over a reader's own encoder (the MPNet reader,
//!    `data/learned_reader_mpnet.safetensors` over `scripts/services fetch-encoder`'s folder) on
//!    the same lines.
//!
//! 8. Real chat: the development set's 8 000 lines of people's chat (a tuning set), one a
//!    persona event, in the default configuration with each extractor in turn (the rules; the
//!    rules checked at 0.6 and `rules_then_learned`, each in F32 and in 8 bits,
//!    `extract.learned_int8`; `rules_then_learned` in 8 bits behind the word gate at each of
//!    `BENCH_WORD_GATES`, default 0.2 and 0.4, `extract.learned_word_gate`; with `BENCH_READER` and
//!    `BENCH_READER_ENCODER`, the reader over its own encoder, in F32 and in 8 bits, behind
//!    the gate at `BENCH_READER_GATE`, default 0.0015, and ungated), beside the rules on the same lines run
//!    first and last. Most lines voice no view, so the rules pay little there, and whatever
//!    reads every line with a model pays the model's pass on each: the ratio a default
//!    extractor is held to (≥ 0.8 × the rules', issue 29) is the one taken here. Last, a
//!    perfect gate: `rules_then_learned` in 8 bits (and, with `BENCH_READER`, the reader over
//!    its own encoder in 8 bits) on the lines that hold a labelled view only, the rules on the
//!    rest, the two runs' times added: the least any reader can cost on real chat for its
//!    recall, whatever gate is put in front of it.
//!
//! 5. A hot persona: the time from publishing a quiet persona's event to its effect being
//!    stored, on an idle worker and behind `BENCH_FLOOD` (default 10 000) queued events of one
//!    other persona, with the pull window raised past the flood (`ingest.max_in_flight`) and
//!    the default per-persona limit; and how many of the flood were done first.
//!
//! Beside runs 2 and 4, where the cores went, per event: this process (the worker; in run 2
//! the model's share at the raw run's CPU per text, and the rest), Redis (the server's CPU and
//! its time inside scripts), the NATS servers, and how busy the cores were. The pipeline shares
//! the cores with Redis and NATS, so what the model does not get is the gap to the limit.
//! From the same figures it prints the most the pipeline could reach here were the worker to do
//! nothing but the model (the model's CPU an event over the model's, Redis's and NATS's), and
//! the pipeline's share of that, which is what the worker's own work costs.
//!
//! `BENCH_ONLY=real-chat` runs run 8 alone. `scripts/bench ingest`, or `cargo bench --bench ingest` with REDIS_URL, NATS_URL and
//! PERSONA_PREFS_MODEL_DIR set.

#[path = "../tests/common/fake_openai.rs"]
mod fake_openai;
mod support;

use std::time::{Duration, Instant};

use fake_openai::{FakeOpenAi, Reply, persona_message};
use persona_prefs::app::{App, wait_until_drained};
use persona_prefs::config::Config;
use persona_prefs::embed::Embedder;
use persona_prefs::embed::local::LocalEmbedder;
use persona_prefs::extract::ExtractorKind;
use serde_json::json;
use support::{distinct_topic, plain_chat, real_chat, repeated_topic};

#[tokio::main]
async fn main() {
    let events: usize = std::env::var("BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let mut base = Config::load(None).expect("config");
    // "The rules" here are the rules unchecked, as every run measured them before the check
    // became the default (stop 85): the runs that check say so, and run 8 prints the default
    // (checked at 0.6) beside them.
    base.extract.rules_min_sentence_score = Some(0.0);
    // `BENCH_ONLY=real-chat`: run 8 alone (the others take minutes and do not change with
    // the extractor).
    if std::env::var("BENCH_ONLY").as_deref() == Ok("real-chat") {
        print_real_chat(&real_chat_runs(&base, events).await);
        return;
    }

    // 1. Raw embedder throughput, batched the way the batcher batches.
    let embedder = LocalEmbedder::load(
        std::path::Path::new(&base.embed.model_dir),
        base.embed.max_input_chars,
    )
    .expect("model");
    let batch = base.embed.max_batch;
    let rounds = (events / batch).max(20);
    // Measured before and after run 2 and averaged: this machine's speed drifts by more than
    // the margin the target allows, and a floor taken once can land on either side of it.
    let (before, model_cpu_before) =
        raw_embedder_rate(&embedder, batch, rounds, distinct_topic).await;

    // 2. Rules extractor + local embedder, every topic embedded.
    let (rules_rate, rules_cpu) = rules_on_distinct_topics(&base, "rules", events).await;
    let (after, model_cpu_after) =
        raw_embedder_rate(&embedder, batch, rounds, distinct_topic).await;
    let embedder_rate = (before + after) / 2.0;
    let model_cpu = ModelCpu {
        per_text_ms: (model_cpu_before.per_text_ms + model_cpu_after.per_text_ms) / 2.0,
        busy: (model_cpu_before.busy + model_cpu_after.busy) / 2.0,
    };
    // The floor of run 7: the same model on its plain chat lines, longer than run 2's topics.
    let (plain_model_rate, plain_model_cpu) =
        raw_embedder_rate(&embedder, batch, rounds, plain_chat).await;
    drop(embedder);

    // 3. LLM extractor at 50 ms per request.
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, body| {
        let message = persona_message(body);
        let topic = message
            .trim_start_matches("I love ")
            .trim_end_matches('.')
            .to_string();
        Reply::Delay(
            Duration::from_millis(50),
            Box::new(Reply::opinions(
                json!([{"name": topic, "opinion": message, "category": "personal", "stance": "for",
                "strength": 0.6, "related_user_ids": [], "evidence": message}]),
            )),
        )
    });
    let llm_events = events.min(2000);
    let base_url = fake.base_url.clone();
    let (llm_rate, _) = run_pipeline(
        &base,
        "llm",
        llm_events,
        Messages::Opinions(|n| repeated_topic(n, 16)),
        move |config| {
            config.extract.kind = ExtractorKind::Llm;
            config.extract.llm.base_url = base_url.clone();
            config.embed.cache_size = 0;
        },
    )
    .await;

    // 4. Rules extractor + local embedder behind the cache.
    let (cached_rate, cached_cpu) = run_pipeline(
        &base,
        "cached",
        events,
        Messages::Opinions(|n| repeated_topic(n, 16)),
        |_| {},
    )
    .await;

    // 6. Run 2 with the check on the rules: every message read once more by the model.
    let check: f64 = std::env::var("BENCH_CHECK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.08);
    // The check's ratio is taken against rules runs on either side of it, not run 2: this
    // machine's speed drifts over the minutes between (one run read the check at 1.31 x the
    // rules that way, its worker CPU an event below the rules' own).
    let (rules_before_check, _) =
        rules_on_distinct_topics(&base, "rules-before-check", events).await;
    let (checked_rate, checked_cpu) = run_pipeline(
        &base,
        "checked",
        events,
        Messages::Opinions(distinct_topic),
        |config| {
            config.embed.cache_size = 0;
            config.extract.rules_min_sentence_score = Some(check);
        },
    )
    .await;
    // 6b. The same with the model reading every finding, the word score not asked
    // (`extract.rules_check_keeps_at_word_score` = 1): what the word score saves.
    let (model_checked_rate, model_checked_cpu) = run_pipeline(
        &base,
        "checked-by-model",
        events,
        Messages::Opinions(distinct_topic),
        |config| {
            config.embed.cache_size = 0;
            config.extract.rules_min_sentence_score = Some(check);
            config.extract.rules_check_keeps_at_word_score = 1.0;
        },
    )
    .await;
    let (rules_after_check, _) = rules_on_distinct_topics(&base, "rules-after-check", events).await;
    let rules_beside_check = (rules_before_check + rules_after_check) / 2.0;

    // 7. Rules then learned on plain chat: each message read whole by the learned reader.
    let (plain_rate, plain_cpu) = run_pipeline(
        &base,
        "learned-on-plain-chat",
        events,
        Messages::Chat(plain_chat),
        |config| {
            config.embed.cache_size = 0;
            config.extract.kind = ExtractorKind::RulesThenLearned;
            config.extract.rules_min_sentence_score = Some(check);
        },
    )
    .await;

    // 7b. The same with a reader over its own encoder (`BENCH_READER` and
    // `BENCH_READER_ENCODER`: the MPNet reader, `data/learned_reader_mpnet.safetensors` over
    // `scripts/services fetch-encoder`'s folder), alone: one pass of that encoder an event.
    let own_encoder = match (
        std::env::var("BENCH_READER"),
        std::env::var("BENCH_READER_ENCODER"),
    ) {
        (Ok(reader), Ok(encoder)) => Some(
            run_pipeline(
                &base,
                "learned-own-encoder-on-plain-chat",
                events,
                Messages::Chat(plain_chat),
                |config| {
                    config.embed.cache_size = 0;
                    config.extract.kind = ExtractorKind::Learned;
                    config.extract.learned_reader = reader.clone();
                    config.extract.learned_encoder_dir = encoder.clone();
                },
            )
            .await,
        ),
        _ => None,
    };

    // 8. Real chat: each extractor on the development set's lines, beside the rules on the
    // same lines run on either side of them (the machine's speed drifts over minutes).
    let real_chat_runs = real_chat_runs(&base, events).await;

    // 5. A quiet persona behind a flood, beside an idle worker.
    let flood: usize = std::env::var("BENCH_FLOOD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let (idle_latency, _) = quiet_behind(&base, 0).await;
    let (flooded_latency, done_first) = quiet_behind(&base, flood).await;

    let limit = embedder_rate;
    println!();
    println!(
        "quiet persona, event to effect: idle {:.1} ms; behind {flood} queued events of one persona {:.1} ms ({:.1}x; {done_first} of the flood done first)",
        idle_latency.as_secs_f64() * 1e3,
        flooded_latency.as_secs_f64() * 1e3,
        flooded_latency.as_secs_f64() / idle_latency.as_secs_f64()
    );
    println!("{:<52} {:>12}", "", "events/s");
    println!(
        "{:<52} {:>12.0}",
        format!("floor: local embedder, raw batches of {batch} (texts/s)"),
        embedder_rate
    );
    println!(
        "{:<52} {:>12}",
        "  (before / after run 2)",
        format!("{before:.0} / {after:.0}")
    );
    println!(
        "{:<52} {:>12.0}",
        "pipeline, rules + local embedder, distinct topics", rules_rate
    );
    println!(
        "{:<52} {:>12.0}",
        format!("pipeline, rules checked at {check} + local embedder"),
        checked_rate
    );
    println!(
        "{:<52} {:>12.0}",
        format!("  the same, the model reading every finding"),
        model_checked_rate
    );
    println!(
        "{:<52} {:>12.0}",
        "pipeline, rules then learned, plain chat", plain_rate
    );
    if let Some((rate, _)) = &own_encoder {
        println!(
            "{:<52} {:>12.0}",
            "pipeline, learned over its own encoder, plain chat", rate
        );
    }
    println!(
        "{:<52} {:>12.0}",
        "pipeline, LLM extractor at 50 ms + local embedder", llm_rate
    );
    println!(
        "{:<52} {:>12.0}",
        "pipeline, rules + local embedder, repeated topics", cached_rate
    );
    println!();
    // Where the cores went: the pipeline shares them with Redis and NATS, so what the model does
    // not use is the gap to the embedder-bound limit.
    println!(
        "CPU per event (ms): {:<20} {:>8} {:>10} {:>8} {:>10} {:>8} {:>6} {:>11}",
        "", "worker", "the model", "the rest", "Redis", "scripts", "NATS", "cores busy"
    );
    let model_share = model_cpu.per_text_ms;
    for (label, cpu, model) in [
        ("distinct topics", &rules_cpu, Some(model_share)),
        ("repeated topics", &cached_cpu, None),
        ("distinct topics, rules checked", &checked_cpu, None),
        (
            "  the model reading every finding",
            &model_checked_cpu,
            None,
        ),
        ("plain chat, rules then learned", &plain_cpu, None),
    ]
    .into_iter()
    .chain(
        own_encoder
            .as_ref()
            .map(|(_, cpu)| ("plain chat, learned, own encoder", cpu, None)),
    ) {
        let model_column = model.map_or("n/a".to_string(), |ms| format!("{ms:.2}"));
        let rest = model.map_or("n/a".to_string(), |ms| {
            format!("{:.2}", cpu.per_event(cpu.worker) - ms)
        });
        println!(
            "  {label:<37} {:>8.2} {model_column:>10} {rest:>8} {:>10.2} {:>8.2} {:>6.2} {:>10.0}%",
            cpu.per_event(cpu.worker),
            cpu.per_event(cpu.redis),
            cpu.scripts_us / 1000.0 / cpu.events as f64,
            cpu.per_event(cpu.nats),
            100.0 * cpu.busy()
        );
    }
    println!(
        "  the model alone (raw batches): {:.2} ms CPU a text, cores busy {:.0}%; \
         the worker's own column holds it, at the raw run's cost, one text a distinct event",
        model_share,
        100.0 * model_cpu.busy
    );
    println!(
        "  scripts: Redis's time inside Lua scripts per event, the commands they call included \
         (INFO commandstats); Redis: the server's whole CPU"
    );
    let rules_ratio = rules_rate / limit;
    println!("rules pipeline / embedder-bound limit = {rules_ratio:.2} (target >= 0.9)");
    // What the target leaves out: Redis and the NATS servers share these two cores with the
    // model. Were the worker to do nothing but the model, at the raw run's CPU a text, an
    // event would still cost the model's CPU and theirs, so the pipeline could reach at most
    // this share of the model's rate here (a deployment gives them machines of their own).
    let shared = rules_cpu.per_event(rules_cpu.redis) + rules_cpu.per_event(rules_cpu.nats);
    let colocated = model_share / (model_share + shared);
    println!(
        "  with Redis and NATS on the same cores ({shared:.2} ms CPU an event beside the model's \
         {model_share:.2}), the most the pipeline can reach here is {colocated:.2} x the model's \
         rate ({:.0} events/s); the pipeline reaches {:.2} of that: the rest is the worker's own",
        limit * colocated,
        rules_ratio / colocated
    );
    println!(
        "rules checked / rules = {:.2} (a default extractor's bar: >= 0.8); the model reading every finding {:.2}; \
         against the rules run on either side of the two ({rules_before_check:.0} / {rules_after_check:.0} events/s)",
        checked_rate / rules_beside_check,
        model_checked_rate / rules_beside_check
    );
    println!(
        "rules then learned on plain chat = {plain_rate:.0} events/s, {:.2} x the model's raw rate \
         on the same lines ({plain_model_rate:.0} texts/s, one pass an event); the worker's CPU \
         an event {:.2} ms against the model's {:.2} a line (cores busy {:.0}%)",
        plain_rate / plain_model_rate,
        plain_cpu.per_event(plain_cpu.worker),
        plain_model_cpu.per_text_ms,
        100.0 * plain_model_cpu.busy
    );
    println!("LLM pipeline = {llm_rate:.0} events/s (target >= 300)");
    print_real_chat(&real_chat_runs);
    let ok = rules_ratio >= 0.9 && llm_rate >= 300.0;
    println!(
        "result: {}",
        if ok { "within target" } else { "BELOW TARGET" }
    );
}

/// The bare local model's CPU: per text, and the share of the cores it kept busy.
#[derive(Clone, Copy)]
struct ModelCpu {
    per_text_ms: f64,
    busy: f64,
}

/// CPU the pipeline's parts used over one run (seconds), for per-event figures.
struct PipelineCpu {
    events: usize,
    wall: f64,
    /// This process: the worker, the model included.
    worker: f64,
    redis: f64,
    nats: f64,
    /// Redis's time inside scripts (`INFO commandstats`, microseconds).
    scripts_us: f64,
}

impl PipelineCpu {
    /// Two runs' CPU taken together, as one run of both runs' events.
    fn plus(&self, other: &PipelineCpu) -> PipelineCpu {
        PipelineCpu {
            events: self.events + other.events,
            wall: self.wall + other.wall,
            worker: self.worker + other.worker,
            redis: self.redis + other.redis,
            nats: self.nats + other.nats,
            scripts_us: self.scripts_us + other.scripts_us,
        }
    }

    fn per_event(&self, seconds: f64) -> f64 {
        seconds * 1000.0 / self.events as f64
    }

    fn busy(&self) -> f64 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        (self.worker + self.redis + self.nats) / (self.wall * cores)
    }
}

/// Texts/s of the bare local model on batches of `batch` distinct topics (exactly the texts
/// run 2 embeds), after a short warm-up, and its CPU.
async fn raw_embedder_rate(
    embedder: &LocalEmbedder,
    batch: usize,
    rounds: usize,
    text_of: fn(usize) -> String,
) -> (f64, ModelCpu) {
    let texts =
        |round: usize| -> Vec<String> { (0..batch).map(|i| text_of(round * batch + i)).collect() };
    for round in 0..5 {
        embedder.embed(&texts(round)).await.unwrap();
    }
    let cpu_before = support::cpu_seconds(std::process::id());
    let started = Instant::now();
    for round in 0..rounds {
        embedder.embed(&texts(round)).await.unwrap();
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = support::cpu_seconds(std::process::id()) - cpu_before;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let texts = (rounds * batch) as f64;
    (
        texts / wall,
        ModelCpu {
            per_text_ms: cpu * 1000.0 / texts,
            busy: cpu / (wall * cores),
        },
    )
}

/// Publishes `events` events over 16 personas and returns events/s until all are acked, and
/// the CPU each part used meanwhile.
/// What a run's events say.
enum Messages {
    /// "I love <topic>.": one opinion each, so one add or reinforcement each.
    Opinions(fn(usize) -> String),
    /// Lines of chat, some voicing a view and most not: [`plain_chat`] (no view in any
    /// phrasing the rules read), [`real_chat`] (the development set's lines) or a part of them.
    Chat(fn(usize) -> String),
}

/// Run 2's pipeline: the rules and the local embedder on all-new topics, the embedding cache
/// off. Also run on either side of the check (run 6) for its ratio.
async fn rules_on_distinct_topics(base: &Config, label: &str, events: usize) -> (f64, PipelineCpu) {
    run_pipeline(
        base,
        label,
        events,
        Messages::Opinions(distinct_topic),
        |config| {
            config.embed.cache_size = 0;
        },
    )
    .await
}

async fn run_pipeline(
    base: &Config,
    label: &str,
    events: usize,
    messages: Messages,
    adjust: impl Fn(&mut Config),
) -> (f64, PipelineCpu) {
    let mut config = base.clone();
    let name = format!("benchingest{label}{}", std::process::id());
    config.redis.key_prefix = name.clone();
    config.redis.index_name = format!("idx:{name}");
    config.ingest.stream = format!("{name}_events");
    config.ingest.consumer = format!("{name}_worker");
    config.ingest.subject_prefix = format!("{name}.messages");
    config.ingest.dlq_stream = format!("{name}_dlq");
    config.ingest.dlq_subject_prefix = format!("{name}.dlq");
    config.metrics.listen = String::new();
    config.ingest.max_in_flight = 128;
    adjust(&mut config);
    let app = App::start(config.clone())
        .await
        .expect("services (run scripts/bench ingest)");
    let consumer = app.consumer().await.unwrap();

    // Publish first, then start the worker: the clock measures processing, not publishing.
    match &messages {
        Messages::Opinions(topic_of) => {
            support::publish_opinion_events(&app, &name, events, 16, *topic_of).await
        }
        Messages::Chat(line_of) => {
            support::publish_messages(&app, &name, events, 16, *line_of).await
        }
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let nats_pids = support::pids_named("nats-server");
    let nats_cpu = || {
        nats_pids
            .iter()
            .map(|pid| support::cpu_seconds(*pid))
            .sum::<f64>()
    };
    support::reset_command_times(&app.store).await;
    let (worker_before, redis_before, nats_before) = (
        support::cpu_seconds(std::process::id()),
        support::redis_cpu_seconds(&app.store).await,
        nats_cpu(),
    );
    let started = Instant::now();
    let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped));
    wait_until_drained(&app.js, consumer, Duration::from_secs(600))
        .await
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    let rate = events as f64 / wall;
    let cpu = PipelineCpu {
        events,
        wall,
        worker: support::cpu_seconds(std::process::id()) - worker_before,
        redis: support::redis_cpu_seconds(&app.store).await - redis_before,
        nats: nats_cpu() - nats_before,
        scripts_us: support::command_times(&app.store)
            .await
            .iter()
            .filter(|(name, _, _)| name == "evalsha" || name == "eval")
            .map(|(_, _, usec)| *usec as f64)
            .sum(),
    };
    let _ = stop.send(true);
    let _ = worker.await;
    println!("{label}: {events} events in {:.2}s", events as f64 / rate);

    // Every event must have done its work (one add or one reinforcement), or the rate lies.
    let effects = support::effects_stored(&app.store, 16).await;
    match messages {
        Messages::Opinions(_) => assert_eq!(
            effects, events as u64,
            "{label}: each event adds or reinforces exactly one preference"
        ),
        // Whatever the learned reader made of them: what matters here is that each was read.
        Messages::Chat(_) => {
            println!("{label}: {effects} adds or reinforcements stored")
        }
    }

    // Preferences, idempotency records and locks of every bench persona, then the index.
    for persona in 0..16 {
        let _ = app.store.delete_persona(&format!("p{persona}")).await;
    }
    let mut connection = app.store.connection();
    let _: redis::RedisResult<redis::Value> = redis::cmd("FT.DROPINDEX")
        .arg(&config.redis.index_name)
        .arg("DD")
        .query_async(&mut connection)
        .await;
    for stream in [&config.ingest.stream, &config.ingest.dlq_stream] {
        let _ = app.js.delete_stream(stream).await;
    }
    (rate, cpu)
}

/// One run of run 8: what ran, its events/s and where the cores went.
struct RealChatRun {
    label: String,
    rate: f64,
    cpu: PipelineCpu,
}

/// Run 8: the default configuration on real chat ([`real_chat`]) with each extractor in turn,
/// and the rules on the same lines first and last, for the ratio a default extractor is held
/// to (at least 0.8 × the rules', issue 29). With `BENCH_READER` and `BENCH_READER_ENCODER`
/// set, the reader over its own encoder too, in F32 and in 8 bits (`extract.learned_int8`):
/// behind the gate at `BENCH_READER_GATE` (default 0.0015, the LLM's value), and ungated.
async fn real_chat_runs(base: &Config, events: usize) -> Vec<RealChatRun> {
    let mut runs = Vec::new();
    let mut run = async |label: &str, adjust: &dyn Fn(&mut Config)| {
        let (rate, cpu) =
            run_pipeline(base, label, events, Messages::Chat(real_chat), adjust).await;
        runs.push(RealChatRun {
            label: label.to_string(),
            rate,
            cpu,
        });
    };
    run("real-chat-rules", &|_| {}).await;
    run("real-chat-rules-checked-at-60-default", &|config| {
        config.extract.rules_min_sentence_score = Some(0.6);
    })
    .await;
    run("real-chat-rules-checked-at-60-int8", &|config| {
        config.extract.rules_min_sentence_score = Some(0.6);
        config.extract.learned_int8 = true;
    })
    .await;
    run("real-chat-rules-then-learned", &|config| {
        config.extract.kind = ExtractorKind::RulesThenLearned;
        config.extract.rules_min_sentence_score = Some(0.6);
    })
    .await;
    // The shipped reader after the checked rules, in 8 bits: what the word gates and the
    // perfect gate below stand in front of.
    let rules_then_learned_int8 = |config: &mut Config| {
        config.extract.kind = ExtractorKind::RulesThenLearned;
        config.extract.rules_min_sentence_score = Some(0.6);
        config.extract.learned_int8 = true;
    };
    run(
        "real-chat-rules-then-learned-int8",
        &rules_then_learned_int8,
    )
    .await;
    // The same behind the word gate (`extract.learned_word_gate`): the reader reads a message
    // the rules find nothing in only when one of its sentences' word score reaches the gate.
    let word_gates: Vec<f64> = std::env::var("BENCH_WORD_GATES")
        .unwrap_or_else(|_| "0.2,0.4".into())
        .split(',')
        .filter_map(|gate| gate.trim().parse().ok())
        .collect();
    for gate in word_gates {
        let label = format!(
            "real-chat-rules-then-learned-int8-word-gate-{}",
            gate.to_string().replace('.', "-")
        );
        run(&label, &|config| {
            rules_then_learned_int8(config);
            config.extract.learned_word_gate = gate;
        })
        .await;
    }
    // A reader over its own encoder (`BENCH_READER`, `BENCH_READER_ENCODER`), alone.
    let own_encoder = std::env::var("BENCH_READER")
        .ok()
        .zip(std::env::var("BENCH_READER_ENCODER").ok());
    let own = |int8: bool| {
        let (reader, encoder) = own_encoder.clone().unwrap_or_default();
        move |config: &mut Config| {
            config.extract.kind = ExtractorKind::Learned;
            config.extract.learned_reader = reader.clone();
            config.extract.learned_encoder_dir = encoder.clone();
            config.extract.learned_int8 = int8;
        }
    };
    if own_encoder.is_some() {
        let gate: f64 = std::env::var("BENCH_READER_GATE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0015);
        for int8 in [false, true] {
            let own = own(int8);
            let precision = if int8 { "int8" } else { "f32" };
            let gated = format!(
                "real-chat-own-encoder-{precision}-gated-at-{}",
                gate.to_string().replace('.', "-")
            );
            run(&gated, &|config| {
                own(config);
                config.extract.learned_gate_min_score = gate;
            })
            .await;
            run(&format!("real-chat-own-encoder-{precision}-ungated"), &own).await;
        }
    }

    // A perfect gate: a reader passed exactly the lines that hold a labelled view (of which
    // `rules_then_learned` reads those the rules find nothing in), every other line kept from
    // it. No gate recalls more or costs less, so this is the cheapest any reader can be on
    // real chat at its recall. Timed as two runs with the events in the lines' proportions:
    // the lines that hold a view in the reader's configuration, the others through the
    // rules; their times added, as the stream would take them in one.
    let holding = support::real_chat_holding_share();
    let events_holding = ((events as f64 * holding).round() as usize).max(1);
    let events_without = events.saturating_sub(events_holding).max(1);
    let (without_rate, without_cpu) = run_pipeline(
        base,
        "real-chat-rules-on-the-lines-without-a-view",
        events_without,
        Messages::Chat(support::real_chat_without_a_view),
        |_| {},
    )
    .await;
    let mut perfect_gates = Vec::new();
    let mut perfect_gate = async |label: &str, adjust: &dyn Fn(&mut Config)| {
        let (rate, cpu) = run_pipeline(
            base,
            label,
            events_holding,
            Messages::Chat(support::real_chat_holding_a_view),
            adjust,
        )
        .await;
        perfect_gates.push(RealChatRun {
            label: label.to_string(),
            rate: (events_holding + events_without) as f64
                / (events_holding as f64 / rate + events_without as f64 / without_rate),
            cpu: cpu.plus(&without_cpu),
        });
    };
    perfect_gate(
        "real-chat-rules-then-learned-int8-perfect-gate",
        &rules_then_learned_int8,
    )
    .await;
    if own_encoder.is_some() {
        perfect_gate("real-chat-own-encoder-int8-perfect-gate", &own(true)).await;
    }
    println!(
        "real chat: {:.1} % of the lines hold a labelled view ({events_holding} of {} events \
         in the perfect gate's runs)",
        holding * 100.0,
        events_holding + events_without
    );

    run("real-chat-rules-again", &|_| {}).await;
    // The rules' second run stays the table's last row.
    let again = runs.pop();
    runs.extend(perfect_gates);
    runs.extend(again);
    runs
}

/// Run 8's table: each extractor beside the mean of the two rules runs around it.
fn print_real_chat(runs: &[RealChatRun]) {
    let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
        return;
    };
    let rules = (first.rate + last.rate) / 2.0;
    println!();
    println!(
        "real chat (the development set's lines, the default configuration but the extractor): \
         the rules {:.0} / {:.0} events/s first and last",
        first.rate, last.rate
    );
    println!(
        "  {:<44} {:>9} {:>9} {:>13} {:>12}",
        "", "events/s", "x rules", "worker ms/ev", "Redis ms/ev"
    );
    for run in runs {
        println!(
            "  {:<44} {:>9.0} {:>9.2} {:>13.2} {:>12.2}",
            run.label,
            run.rate,
            run.rate / rules,
            run.cpu.per_event(run.cpu.worker),
            run.cpu.per_event(run.cpu.redis)
        );
    }
    println!("  a default extractor's bar: >= 0.8 x the rules (issue 29)");
}

/// Publishes `flood` events of persona `hot`, then one of `quiet`, starts a worker and returns
/// the time from the quiet event's publication to its stored effect, and how many of the flood
/// had taken effect by then.
async fn quiet_behind(base: &Config, flood: usize) -> (Duration, usize) {
    let mut config = base.clone();
    let name = format!("benchquiet{flood}x{}", std::process::id());
    config.redis.key_prefix = name.clone();
    config.redis.index_name = format!("idx:{name}");
    config.ingest.stream = format!("{name}_events");
    config.ingest.consumer = format!("{name}_worker");
    config.ingest.subject_prefix = format!("{name}.messages");
    config.ingest.dlq_stream = format!("{name}_dlq");
    config.ingest.dlq_subject_prefix = format!("{name}.dlq");
    config.metrics.listen = String::new();
    config.ingest.max_in_flight = flood + 128;
    let app = App::start(config.clone()).await.expect("services");
    let consumer = app.consumer().await.unwrap();
    let event = |persona: &str, n: usize, said: &str| {
        json!({"event_id": format!("{name}-{persona}-{n}"), "persona_id": persona, "platform": "bench",
            "channel_id": "c", "messages": [{"message_id": format!("{name}-{persona}-{n}-m"),
            "role": "persona", "content": said,
            "timestamp": format!("2026-11-20T{:02}:{:02}:{:02}Z", 8 + n / 3600, (n / 60) % 60, n % 60)}]})
    };
    let mut acks = Vec::new();
    for n in 0..flood {
        let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "hot");
        acks.push(
            app.js
                .publish(
                    subject,
                    serde_json::to_vec(&event("hot", n, "I love green tea."))
                        .unwrap()
                        .into(),
                )
                .await
                .unwrap(),
        );
        if acks.len() == 1000 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped));
    // The flood is queued and being worked on; now the quiet persona speaks.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "quiet");
    let published = Instant::now();
    app.js
        .publish(
            subject,
            serde_json::to_vec(&event("quiet", 0, "Honestly, jazz is underrated."))
                .unwrap()
                .into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let options = persona_prefs::store::ListOptions::default();
    while app
        .store
        .list_preferences("quiet", &options)
        .await
        .unwrap()
        .is_empty()
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let latency = published.elapsed();
    let done_first = app
        .store
        .list_preferences("hot", &options)
        .await
        .unwrap()
        .first()
        .map_or(0, |tea| 1 + tea.reinforcement_count as usize);
    wait_until_drained(&app.js, consumer, Duration::from_secs(600))
        .await
        .unwrap();
    let _ = stop.send(true);
    let _ = worker.await;
    for persona in ["hot", "quiet"] {
        let _ = app.store.delete_persona(persona).await;
    }
    let mut connection = app.store.connection();
    let _: redis::RedisResult<redis::Value> = redis::cmd("FT.DROPINDEX")
        .arg(&config.redis.index_name)
        .arg("DD")
        .query_async(&mut connection)
        .await;
    for stream in [&config.ingest.stream, &config.ingest.dlq_stream] {
        let _ = app.js.delete_stream(stream).await;
    }
    (latency, done_first)
}
