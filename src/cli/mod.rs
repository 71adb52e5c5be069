//! Client commands of the binary and their human-readable output: the command tree and
//! dispatch here; `prefs.rs`, `dlq.rs` and `print.rs` hold the larger commands and the output.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use persona_prefs::app::{self};
use persona_prefs::client::{Client, ClientError, Endpoint, InjectRequest};
use persona_prefs::config::Config;
use persona_prefs::ingest::event::ConversationEvent;
use persona_prefs::migrate::{MigrateOptions, migrate};
use persona_prefs::serve::protocol::SearchMode;
use persona_prefs::serve::render::Format;
use persona_prefs::store::{PreferenceStore, Stance};

mod dlq;
mod prefs;
mod print;
mod rules_report;

use dlq::dlq;
use prefs::prefs;
pub use print::{print_demo, print_preferences};
use print::{print_status, truncate};

#[derive(Subcommand)]
pub enum ClientCommand {
    /// Publish conversation events (one JSON object per line) to JetStream.
    #[command(
        after_help = "Examples:\n  persona-prefs publish --file examples/sample_conversation.jsonl\n  cat events.jsonl | persona-prefs publish"
    )]
    Publish {
        /// A JSONL file; standard input when omitted.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Inspect or create the RediSearch index.
    #[command(subcommand)]
    Index(IndexCommand),
    /// Ask the service which preferences to put into a system prompt.
    #[command(
        after_help = "Examples:\n  persona-prefs inject --persona stargazer --query \"what should we drink?\" --users 42,43 --format xml\n  persona-prefs inject --persona stargazer --query tea --resident --json"
    )]
    Inject {
        #[arg(long)]
        persona: String,
        /// The conversational context, as text.
        #[arg(long)]
        query: String,
        /// Users in the conversation (comma-separated).
        #[arg(long, value_delimiter = ',')]
        users: Vec<String>,
        #[arg(long, default_value_t = 8)]
        max_count: usize,
        #[arg(long, default_value_t = 2000)]
        max_chars: usize,
        /// json, xml or markdown: the shape of the rendered block.
        #[arg(long, default_value = "markdown", value_parser = protocol_value::<Format>)]
        format: Format,
        /// Also include the persona's strongest preferences (they count against the caps).
        #[arg(long)]
        resident: bool,
        /// Say in the block why each preference was chosen.
        #[arg(long)]
        explain: bool,
        /// Print the whole reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Before a persona's message goes out: which stored preferences it contradicts, which it
    /// restates, what would be new. Decided as ingest decides; nothing is written.
    #[command(
        after_help = "Examples:\n  persona-prefs check --persona stargazer \"Honestly, cilantro tastes of soap.\"\n  persona-prefs check --persona stargazer --said \"Try my salsa!\" --user bob \"Cilantro is wonderful.\" --json"
    )]
    Check {
        #[arg(long)]
        persona: String,
        /// The draft persona message.
        draft: String,
        /// What the user said just before (context for the extractor).
        #[arg(long)]
        said: Option<String>,
        /// Who said it.
        #[arg(long, default_value = "")]
        user: String,
        /// Print the whole reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Inspect and correct a persona's preferences (through the running service).
    #[command(subcommand)]
    Prefs(PrefsCommand),
    /// Dead-lettered events: why they were given up on; replay them once fixed, or discard them.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// The deployment at a glance: index, event backlog, dead letters, answering replicas.
    /// Exits 1 when something stops the service from working.
    #[command(after_help = "Examples:\n  persona-prefs status\n  persona-prefs status --json")]
    Status {
        /// How long to wait for service replicas to answer the ping.
        #[arg(long, default_value_t = 500)]
        listen_ms: u64,
        #[arg(long)]
        json: bool,
    },
    /// The topic match threshold for the configured embedder, by measurement: embeds labelled
    /// topic pairs (the shipped set, or --pairs) and prints the threshold that separates them
    /// best, its accuracy, and the configured one's. Set embed.*_match_threshold from it.
    #[command(
        after_help = "Examples:\n  persona-prefs calibrate\n  PERSONA_PREFS__EMBED__KIND=openai persona-prefs calibrate --pairs my_topics.jsonl\n\nA pairs file holds JSON lines: {\"a\": \"green tea\", \"b\": \"green teas\", \"same\": true}"
    )]
    Calibrate {
        /// JSON lines of {"a", "b", "same"}; the shipped set when omitted.
        #[arg(long)]
        pairs: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Precision and recall of the configured extractor (rules, or the LLM with its prompt) on
    /// labelled persona utterances: the shipped sets, or --set files. Measures a real model
    /// when extract.kind = "llm" points at one; scripts/evaluate-extraction does that.
    #[command(
        after_help = "Examples:\n  persona-prefs evaluate-extraction\n  PERSONA_PREFS__EXTRACT__KIND=llm persona-prefs evaluate-extraction --show-misses\n  persona-prefs evaluate-extraction --held-out   (once a round, after the change)\n\nA set holds JSON lines: {\"text\": \"I love green tea.\", \"opinions\": [{\"topic\": \"green tea\", \"stance\": \"for\"}]}"
    )]
    EvaluateExtraction {
        /// Labelled JSON-lines files; the shipped tuning sets and the development set when
        /// omitted (with --held-out, the held-out sets too).
        #[arg(long = "set")]
        sets: Vec<std::path::PathBuf>,
        /// Read the shipped held-out sets too. Off by default: a held-out set is read once a
        /// round, after the change, and never tuned to; an ordinary run (choosing a value,
        /// trying a rule) reads the tuning sets and the development set only.
        #[arg(long, conflicts_with = "sets")]
        held_out: bool,
        /// Print every miss. Off by default: a held-out set's misses are not for tuning to.
        #[arg(long)]
        show_misses: bool,
        /// Utterances sent to the extractor at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Read only this many utterances of each set, spread evenly through it (a local
        /// model on a CPU takes seconds an utterance; the sets hold 5 600).
        #[arg(long)]
        sample: Option<usize>,
        /// Read each utterance as a reply to this participant, as ingest does when the
        /// persona answers someone ("your X" is theirs), and count what is related to them.
        #[arg(long)]
        addressee: Option<String>,
        /// Instead: measure the LLM extractor's gate (`extract.llm.gate_min_score`) at each
        /// threshold, tuning and held-out sets apart: the share of messages it keeps from the
        /// model, and the share of labelled opinions in them (the recall it can cost at most).
        /// Needs the local model, not an LLM.
        #[arg(long)]
        gate: bool,
        /// Instead: the rules extractor, rule by rule: how many findings each rule made on
        /// the labelled sets, right and wrong (tuning and held-out apart), and each finding
        /// of the tuning sets (or --set files) with the rules that found it.
        #[arg(long)]
        explain: bool,
        /// Instead: what the rules find now against the snapshot of what they found
        /// (tests/data/rules_findings.jsonl): per tuning set, findings gained and lost, right
        /// and wrong by the labels, and each changed utterance; of the held-out sets only how
        /// many utterances changed (--show-misses: their counts and cases). After a rule change.
        #[arg(long)]
        changes: bool,
        /// With --changes: write what the rules find now as the snapshot.
        #[arg(long, requires = "changes")]
        accept: bool,
        /// Instead: what the labelled sets lose and gain with this rule switched off (the
        /// same report as --changes, against the rules as they are).
        #[arg(long, value_name = "RULE")]
        without: Option<String>,
        /// In place of the configured extractor: score the findings in this file, made
        /// elsewhere (another build, a hosted model's batch, another system), as every
        /// extractor is scored. JSON lines in the labelled sets' format, one utterance's
        /// findings each; an utterance it does not name found nothing.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["gate", "explain", "changes", "without", "addressee"])]
        found: Option<std::path::PathBuf>,
        /// Also write what was found in each utterance to this file, in the format --found
        /// reads (the labelled sets' format, one line for each utterance something was found
        /// in; an utterance in two sets keeps its first reading): a slow extractor's reading
        /// (an LLM's) kept, to be scored again after a relabelling without asking it again.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["gate", "explain", "changes", "without"])]
        write_found: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum DlqCommand {
    /// Dead letters, oldest first, with their reasons.
    #[command(
        after_help = "Examples:\n  persona-prefs dlq list\n  persona-prefs dlq list --persona stargazer --code max_deliver --json"
    )]
    List {
        #[command(flatten)]
        filter: DlqFilter,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// One dead letter whole: where it came from, why, and its payload.
    Show {
        /// Its sequence in the dead-letter stream (the first column of `dlq list`).
        sequence: u64,
        #[arg(long)]
        json: bool,
    },
    /// Publish dead letters back to the events stream, then delete them. For letters whose
    /// cause is fixed (the LLM or Redis is back, the worker was upgraded); replaying an event
    /// twice changes nothing, since every effect is keyed by its persona message.
    #[command(
        after_help = "Examples:\n  persona-prefs dlq replay 17 18\n  persona-prefs dlq replay --all --code max_deliver"
    )]
    Replay {
        /// Sequences in the dead-letter stream.
        sequences: Vec<u64>,
        /// Every letter matching --persona/--code instead of listed sequences.
        #[arg(long, conflicts_with = "sequences")]
        all: bool,
        #[command(flatten)]
        filter: DlqFilter,
    },
    /// Delete dead letters for good.
    #[command(
        after_help = "Examples:\n  persona-prefs dlq discard 17\n  persona-prefs dlq discard --all --persona stargazer --code schema"
    )]
    Discard {
        sequences: Vec<u64>,
        #[arg(long, conflicts_with = "sequences")]
        all: bool,
        #[command(flatten)]
        filter: DlqFilter,
    },
}

#[derive(clap::Args)]
pub struct DlqFilter {
    /// Only letters for this persona ("unknown" for events that named none).
    #[arg(long)]
    persona: Option<String>,
    /// Only letters with this reason code (max_deliver, permanent, schema, limit, oversize,
    /// invalid_json, invalid_utf8).
    #[arg(long)]
    code: Option<String>,
}

#[derive(Subcommand)]
pub enum PrefsCommand {
    /// Strongest first.
    #[command(
        after_help = "Example:\n  persona-prefs prefs list --persona stargazer --category culinary --all"
    )]
    List {
        #[arg(long)]
        persona: String,
        #[arg(long)]
        category: Option<String>,
        /// Include retracted preferences.
        #[arg(long)]
        all: bool,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// One preference with its provenance and history.
    Get {
        #[arg(long)]
        persona: String,
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Totals and categories.
    Stats {
        #[arg(long)]
        persona: String,
        #[arg(long)]
        json: bool,
    },
    /// Add a preference by hand.
    #[command(
        after_help = "Example:\n  persona-prefs prefs add --persona stargazer --name \"green tea\" --opinion \"I love green tea.\" --category culinary --stance for"
    )]
    Add {
        #[arg(long)]
        persona: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        opinion: String,
        #[arg(long, default_value = "")]
        category: String,
        /// for or against.
        #[arg(long, value_parser = protocol_value::<Stance>)]
        stance: Option<Stance>,
        #[arg(long)]
        strength: Option<f64>,
        #[arg(long)]
        json: bool,
    },
    /// Reinforce a preference once.
    Reinforce {
        #[arg(long)]
        persona: String,
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Record a change of mind.
    Evolve {
        #[arg(long)]
        persona: String,
        id: String,
        #[arg(long)]
        opinion: String,
        #[arg(long, default_value = "")]
        reason: String,
        /// for or against.
        #[arg(long, value_parser = protocol_value::<Stance>)]
        stance: Option<Stance>,
        #[arg(long)]
        json: bool,
    },
    /// Every persona with memory, most recently active first: counts and strongest topics.
    Personas {
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long, default_value_t = 0)]
        offset: usize,
        #[arg(long)]
        json: bool,
    },
    /// A persona's base personas: show them, or name them with --set (nearest first) or
    /// remove them with --clear. The persona shares its bases' views until it voices its own.
    #[command(
        after_help = "Examples:\n  persona-prefs prefs bases --persona stargazer-kids\n  persona-prefs prefs bases --persona stargazer-kids --set stargazer,house-style\n  persona-prefs prefs bases --persona stargazer-kids --clear"
    )]
    Bases {
        #[arg(long)]
        persona: String,
        /// Comma-separated persona ids, nearest first.
        #[arg(long, value_delimiter = ',', conflicts_with = "clear")]
        set: Option<Vec<String>>,
        #[arg(long)]
        clear: bool,
        #[arg(long)]
        json: bool,
    },
    /// Bring back an earlier version of a preference (see `prefs get` for its history); the
    /// restore is a new version, so it can be undone the same way.
    #[command(
        after_help = "Example:\n  persona-prefs prefs restore --persona stargazer 3f2c… 2 --reason \"the change was a test\""
    )]
    Restore {
        #[arg(long)]
        persona: String,
        id: String,
        version: u64,
        #[arg(long, default_value = "")]
        reason: String,
        #[arg(long)]
        json: bool,
    },
    /// Find near-duplicate preferences of a persona and, with --apply, merge each group into
    /// its strongest member (counts, evidence and history kept). A dry run by default.
    #[command(
        after_help = "Examples:\n  persona-prefs prefs consolidate --persona stargazer\n  persona-prefs prefs consolidate --persona stargazer --threshold 0.85 --apply"
    )]
    Consolidate {
        #[arg(long)]
        persona: String,
        /// Topic similarity at or above which two preferences are one topic (default: the
        /// service's match threshold).
        #[arg(long)]
        threshold: Option<f64>,
        /// Merge; without it nothing is written.
        #[arg(long)]
        apply: bool,
        #[arg(long)]
        json: bool,
    },
    /// Soft-delete a preference (kept for provenance).
    Retract {
        #[arg(long)]
        persona: String,
        id: String,
        #[arg(long, default_value = "")]
        reason: String,
        #[arg(long)]
        json: bool,
    },
    /// Search by text: semantic (nearest topics), keyword (words in topics and opinions), or
    /// hybrid (both, blended).
    #[command(
        after_help = "Examples:\n  persona-prefs prefs search --persona stargazer tea\n  persona-prefs prefs search --persona stargazer --mode hybrid \"the new Zorblax album\""
    )]
    Search {
        #[arg(long)]
        persona: String,
        query: String,
        #[arg(long, default_value_t = 10)]
        top_k: usize,
        /// semantic, keyword or hybrid.
        #[arg(long, default_value = "semantic", value_parser = protocol_value::<SearchMode>)]
        mode: SearchMode,
        #[arg(long)]
        json: bool,
    },
    /// Erase a user from a persona's memory (pseudonymise; retract what only they evidenced),
    /// or, without --persona, from every persona's, with progress as it goes.
    #[command(
        name = "purge-user",
        after_help = "Examples:\n  persona-prefs prefs purge-user --persona stargazer --user 42\n  persona-prefs prefs purge-user --user 42          # every persona"
    )]
    PurgeUser {
        /// The persona; without it, every persona (through the registry).
        #[arg(long)]
        persona: Option<String>,
        #[arg(long)]
        user: String,
        /// What replaces the id (one persona only; every persona gets a random one).
        #[arg(long)]
        pseudonym: Option<String>,
        /// Personas visited per request, when erasing from every persona.
        #[arg(long, default_value_t = 100)]
        page: usize,
        #[arg(long)]
        json: bool,
    },
    /// Delete a persona whole: its memory, stored events, dead letters and registry entry.
    /// Its events from before now are refused if they arrive later. Cannot be undone.
    #[command(
        name = "delete-persona",
        after_help = "Example:\n  persona-prefs prefs delete-persona --persona old-bot --confirm old-bot"
    )]
    DeletePersona {
        #[arg(long)]
        persona: String,
        /// The persona id again.
        #[arg(long)]
        confirm: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum IndexCommand {
    /// Show the index's schema, dimensions and document count.
    Info {
        #[arg(long)]
        json: bool,
    },
    /// Create the index if missing; fail if it exists with another schema.
    Ensure,
    /// Bring existing preferences up to this build: rebuild an index whose schema does not
    /// fit (hashes are kept) and re-embed every preference whose vector has the wrong size,
    /// from its topic. For data of the original system, or after changing the embedder. Stop
    /// the workers first; running it again finds nothing to do.
    #[command(
        after_help = "Examples:\n  persona-prefs index migrate --dry-run\n  persona-prefs index migrate\n  persona-prefs index migrate --reembed-all   # new embedder, same dimensions"
    )]
    Migrate {
        /// Re-embed every preference, not only those whose vector has the wrong size.
        #[arg(long)]
        reembed_all: bool,
        /// Report what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Stop after moving this many preferences of an earlier layout (a migration in
        /// steps; run again to go on).
        #[arg(long, value_name = "N")]
        max_moves: Option<usize>,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: ClientCommand, config: Config) -> anyhow::Result<ExitCode> {
    match command {
        ClientCommand::Check {
            persona,
            draft,
            said,
            user,
            json,
        } => {
            use persona_prefs::serve::protocol::{CheckRequest, CheckTurn};
            let request = CheckRequest {
                persona_id: persona,
                draft,
                conversation: said
                    .map(|content| CheckTurn {
                        role: persona_prefs::ingest::event::Role::User,
                        user_id: user,
                        content,
                    })
                    .into_iter()
                    .collect(),
            };
            let client = match service_client(&config).await {
                Ok(client) => client,
                Err(code) => return Ok(code),
            };
            if json {
                return print_json(client.request_json(Endpoint::Check, &request).await);
            }
            let reply = match answered(client.check(&request).await) {
                Ok(reply) => reply,
                Err(code) => return Ok(code),
            };
            for finding in &reply.contradicts {
                println!(
                    "contradicts  {} ({}): stored {:?}, draft {:?} [similarity {:.2}]",
                    finding.name,
                    finding.preference_id,
                    finding.stored_opinion,
                    finding.draft.evidence,
                    finding.similarity
                );
            }
            for finding in &reply.restates {
                println!(
                    "restates     {} ({}): {:?} [similarity {:.2}]",
                    finding.name, finding.preference_id, finding.draft.evidence, finding.similarity
                );
            }
            for opinion in &reply.new {
                println!(
                    "new          {} ({}): {:?}",
                    opinion.topic,
                    opinion.stance.as_str(),
                    opinion.evidence
                );
            }
            if reply.contradicts.is_empty() && reply.restates.is_empty() && reply.new.is_empty() {
                println!("no opinion in the draft");
            }
            eprintln!("checked in {:.1} ms", reply.took_ms);
            Ok(ExitCode::SUCCESS)
        }
        ClientCommand::Inject {
            persona,
            query,
            users,
            max_count,
            max_chars,
            format,
            resident,
            explain,
            json,
        } => {
            let request = InjectRequest {
                persona_id: persona,
                query: Some(query),
                query_embedding: None,
                active_user_ids: users,
                max_count,
                max_chars,
                format,
                resident,
                explain,
            };
            let client = match service_client(&config).await {
                Ok(client) => client,
                Err(code) => return Ok(code),
            };
            if json {
                return print_json(client.request_json(Endpoint::Inject, &request).await);
            }
            let reply = match answered(client.inject(&request).await) {
                Ok(reply) => reply,
                Err(code) => return Ok(code),
            };
            println!("{}", reply.rendered);
            if let Some(reason) = &reply.semantic_skipped {
                eprintln!("semantic pass skipped: {reason}");
            }
            eprintln!(
                "{} preferences in {:.1} ms",
                reply.preferences.len(),
                reply.took_ms
            );
            Ok(ExitCode::SUCCESS)
        }
        ClientCommand::Prefs(command) => prefs(command, &config).await,
        ClientCommand::Dlq(command) => dlq(command, &config).await,
        ClientCommand::Calibrate { pairs, json } => {
            let text = match &pairs {
                Some(path) => std::fs::read_to_string(path)
                    .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?,
                None => persona_prefs::calibrate::TOPIC_PAIRS.to_string(),
            };
            let pairs = persona_prefs::calibrate::parse_pairs(&text).map_err(|error| {
                anyhow::anyhow!(
                    "{}: {error}",
                    pairs
                        .as_deref()
                        .map_or("the shipped pairs".into(), |p| p.display().to_string())
                )
            })?;
            let embedder = persona_prefs::embed::from_config(&config.embed)?;
            let key = match config.embed.kind {
                persona_prefs::embed::EmbedderKind::Local => "embed.local_match_threshold",
                persona_prefs::embed::EmbedderKind::Openai => "embed.openai_match_threshold",
            };
            let found = persona_prefs::calibrate::calibrate(
                embedder.as_ref(),
                &pairs,
                config.embed.match_threshold(),
            )
            .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&found)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{} topic pairs, embedded with the configured embedder ({:?}).",
                found.pairs, config.embed.kind
            );
            println!(
                "same topic: lowest similarity {:.3}; different topics: highest {:.3} ({})",
                found.lowest_same,
                found.highest_different,
                if found.lowest_same > found.highest_different {
                    "separated"
                } else {
                    "overlapping"
                }
            );
            println!(
                "best threshold  {:.3}  accuracy {:.1}%",
                found.threshold,
                found.accuracy * 100.0
            );
            println!(
                "configured      {:.3}  accuracy {:.1}%  ({key})",
                found.configured,
                found.configured_accuracy * 100.0
            );
            for (a, b, similarity, same) in &found.misclassified {
                println!(
                    "  wrong at the best threshold: {a:?} / {b:?} {similarity:.3} ({})",
                    if *same {
                        "same topic"
                    } else {
                        "different topics"
                    }
                );
            }
            println!("\nTo use it: {key} = {:.2}", found.threshold);
            Ok(ExitCode::SUCCESS)
        }
        ClientCommand::EvaluateExtraction {
            sets,
            held_out,
            show_misses,
            concurrency,
            sample,
            addressee,
            gate,
            explain,
            changes,
            accept,
            without,
            found,
            write_found,
            json,
        } => {
            if gate {
                return measure_gate(&config).await;
            }
            if explain {
                return rules_report::explain(&config, &sets, show_misses);
            }
            if changes {
                return rules_report::changes(show_misses, accept);
            }
            if let Some(rule) = without {
                return rules_report::without(&rule, show_misses);
            }
            let found = match found {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
                    let found = persona_prefs::extract::evaluate::FoundElsewhere::parse(&text)
                        .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
                    Some((path, found))
                }
                None => None,
            };
            evaluate_extraction(
                &config,
                labelled_sets(&sets, held_out)?,
                Reading {
                    show_misses,
                    concurrency,
                    sample,
                    addressee: addressee.as_deref(),
                    json,
                },
                Elsewhere {
                    found,
                    write_found: write_found.as_deref(),
                },
            )
            .await
        }
        ClientCommand::Status { listen_ms, json } => {
            let status = persona_prefs::status::collect(
                &config,
                std::time::Duration::from_millis(listen_ms),
            )
            .await;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_status(&status);
            }
            Ok(if status.healthy {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_ERROR_REPLY)
            })
        }
        ClientCommand::Publish { file } => publish(file, &config).await,
        ClientCommand::Index(IndexCommand::Info { json }) => {
            let store = PreferenceStore::connect(&config.redis, &config.store).await?;
            if !store.has_text_index() {
                // Saying "0 documents" of an index that does not exist would mislead.
                let reason = if store.connection().is_cluster() {
                    "a Redis Cluster has no shared index (RediSearch 2.10 has no \
                     coordinator): every path reads the personas' own structures, and \
                     keyword search ranks in the service"
                } else {
                    "redis.text_index is off: every path reads the personas' own structures, \
                     and keyword search ranks a persona's records in the service"
                };
                if json {
                    let report = IndexReport {
                        name: &config.redis.index_name,
                        shared_index: false,
                        reason: Some(reason),
                        prefixes: &[],
                        num_docs: None,
                        attributes: &[],
                    };
                    println!("{}", serde_json::to_string_pretty(&report)?);
                } else {
                    println!("index      none: {reason}");
                }
                return Ok(ExitCode::SUCCESS);
            }
            match store.index_info().await? {
                None => {
                    eprintln!(
                        "index {} does not exist (persona-prefs index ensure creates it)",
                        config.redis.index_name
                    );
                    Ok(ExitCode::from(1))
                }
                Some(info) if json => {
                    let report = IndexReport {
                        name: &info.name,
                        shared_index: true,
                        reason: None,
                        prefixes: &info.prefixes,
                        num_docs: Some(info.num_docs),
                        attributes: &info.attributes,
                    };
                    println!("{}", serde_json::to_string_pretty(&report)?);
                    Ok(ExitCode::SUCCESS)
                }
                Some(info) => {
                    println!("index      {}", info.name);
                    println!("prefixes   {}", info.prefixes.join(", "));
                    println!("documents  {}", info.num_docs);
                    for (name, kind) in info.attributes {
                        println!("  {name:<24} {kind}");
                    }
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        ClientCommand::Index(IndexCommand::Migrate {
            reembed_all,
            dry_run,
            max_moves,
            json,
        }) => {
            let store = PreferenceStore::connect(&config.redis, &config.store).await?;
            let embedder = persona_prefs::embed::from_config(&config.embed)?;
            let options = MigrateOptions {
                reembed_all,
                dry_run,
                max_moves,
                ..MigrateOptions::default()
            };
            let report = migrate(&store, embedder.as_ref(), options).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(ExitCode::SUCCESS);
            }
            let would = if report.dry_run { " (dry run)" } else { "" };
            println!(
                "index        {} {}{would}",
                report.index, report.index_action
            );
            for problem in &report.index_problems {
                println!("  because    {problem}");
            }
            let found = if report.dry_run { " found" } else { "" };
            println!(
                "moved        {} preferences, {} effect records, {} erasure records{found} \
                 (earlier layouts into persona slots)",
                report.moved, report.effects_moved, report.erasures_moved
            );
            println!(
                "preferences  {} of {} personas",
                report.preferences, report.personas
            );
            if report.vector_sets_rebuilt > 0 {
                println!(
                    "vector sets  {} rebuilt (another quantisation or size)",
                    report.vector_sets_rebuilt
                );
            }
            if !report.complete {
                println!("incomplete   stopped early: run it again to finish");
            }
            println!(
                "re-embedded  {}{}",
                report.reembedded,
                if report.dry_run { " would be" } else { "" }
            );
            if !report.redacted.is_empty() {
                println!(
                    "redacted     {} held secrets, replaced as ingest replaces them{} (e.g. {})",
                    report.redacted.len(),
                    if report.dry_run { " would be" } else { "" },
                    report.redacted[0]
                );
            }
            if !report.without_topic.is_empty() {
                println!(
                    "no topic     {} left as they are (e.g. {})",
                    report.without_topic.len(),
                    report.without_topic[0]
                );
            }
            if !report.dry_run {
                println!(
                    "indexed      {} ({} could not be indexed)",
                    report.indexed, report.indexing_failures
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ClientCommand::Index(IndexCommand::Ensure) => {
            let store = PreferenceStore::connect(&config.redis, &config.store).await?;
            let info = store.ensure_index().await?;
            store.ensure_layout().await?;
            if store.has_text_index() {
                println!("index {} ready ({} documents)", info.name, info.num_docs);
            } else {
                println!("memory ready (no full-text index: redis.text_index is off or a cluster)");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// What `index info --json` prints.
#[derive(serde::Serialize)]
struct IndexReport<'a> {
    name: &'a str,
    /// False on a Redis Cluster, which has none (`reason` says why).
    shared_index: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    prefixes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    num_docs: Option<u64>,
    attributes: &'a [(String, String)],
}

/// Exit codes of client commands: 0 success, 1 the service answered with an error, 3 no
/// service answered (not running, or NATS unreachable). 2 is clap's, for usage errors.
const EXIT_ERROR_REPLY: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_UNAVAILABLE: u8 = 3;

/// A typed client of the running service; `Err(exit code)` after saying why there is none.
async fn service_client(config: &Config) -> Result<Client, ExitCode> {
    match app::connect_nats(config).await {
        Ok(nats) => Ok(Client::new(nats, config)),
        Err(error) => {
            eprintln!("persona-prefs: {error}");
            Err(ExitCode::from(EXIT_UNAVAILABLE))
        }
    }
}

/// A reply, or the exit code after printing why there is none: 3 when no service answered,
/// 1 for an error reply (or a reply this build cannot read).
fn answered<T>(reply: Result<T, ClientError>) -> Result<T, ExitCode> {
    reply.map_err(|error| {
        eprintln!("persona-prefs: {error}");
        ExitCode::from(if error.is_unavailable() {
            EXIT_UNAVAILABLE
        } else {
            EXIT_ERROR_REPLY
        })
    })
}

/// Prints a reply whole, as JSON.
fn print_json(reply: Result<serde_json::Value, ClientError>) -> anyhow::Result<ExitCode> {
    match answered(reply) {
        Ok(value) => {
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(code) => Ok(code),
    }
}

/// Parses a command-line value the way the protocol reads it (`for`, `hybrid`, `xml`), so the
/// CLI accepts exactly what the service does.
fn protocol_value<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(text.to_string()))
        .map_err(|error| error.to_string())
}

async fn publish(file: Option<PathBuf>, config: &Config) -> anyhow::Result<ExitCode> {
    let reader: Box<dyn BufRead> = match &file {
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| path.display().to_string())?,
        )),
        None => Box::new(std::io::BufReader::new(std::io::stdin())),
    };
    let client = Client::new(app::connect_nats(config).await?, config);
    let mut published = 0usize;
    for (number, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let event: ConversationEvent =
            serde_json::from_str(&line).with_context(|| format!("line {}", number + 1))?;
        // JetStream drops a re-published id within its duplicate window.
        let ack = client
            .publish_event(&event.persona_id, line.into_bytes(), Some(&event.event_id))
            .await;
        match ack {
            Ok(ack) if ack.duplicate => eprintln!(
                "line {}: event {} already published (duplicate)",
                number + 1,
                event.event_id
            ),
            Ok(_) => published += 1,
            Err(error) => bail!("line {}: {error}", number + 1),
        }
    }
    println!("published {published} events");
    Ok(ExitCode::SUCCESS)
}

/// The gate's measurement (`evaluate-extraction --gate`): rules and the learned sentence
/// score over every shipped set, then per threshold the messages kept from the model and the
/// labelled opinions they hold.
#[cfg(feature = "local-embedder")]
async fn measure_gate(config: &Config) -> anyhow::Result<ExitCode> {
    use persona_prefs::extract::evaluate::{
        DEVELOPMENT_SET, SHIPPED_SETS, parse_labelled, wilson_interval,
    };
    // The gate reads with the configured reader, over its own encoder when it has one.
    let model =
        match persona_prefs::extract::own_encoder(&config.extract, config.embed.max_input_chars)? {
            Some(encoder) => encoder,
            None => persona_prefs::extract::reader_view(
                &config.extract,
                persona_prefs::embed::load_local(&config.embed)?,
            ),
        };
    let rules = persona_prefs::extract::rules::RulesExtractor::new(8);
    let learned = persona_prefs::extract::learned::LearnedExtractor::from_file(
        model,
        8,
        &config.extract.learned_reader_bytes()?,
        persona_prefs::extract::learned::Reads::Alone,
    )?;
    // Per message: which group, read by the rules, sentence score, labelled opinions. The
    // tuning sets split as the learned head's training did: what it was trained on, and what
    // it was not (the development sixth, the sets it leaves out), with the development set
    // (the honest place to choose a threshold).
    let mut rows: Vec<(usize, bool, f32, usize)> = Vec::new();
    for (name, text) in SHIPPED_SETS.iter().chain([&DEVELOPMENT_SET]) {
        for row in parse_labelled(text).map_err(|e| anyhow::anyhow!("{name}: {e}"))? {
            let group = if rules_report::is_held_out(name) {
                2
            } else if *name == DEVELOPMENT_SET.0
                || !persona_prefs::extract::learned::training::trained_on(name)
                || persona_prefs::extract::learned::training::in_development(&row.text)
            {
                1
            } else {
                0
            };
            let ruled = !rules.extract_text(&row.text).is_empty();
            let score = learned.read(&row.text).await?.sentence_score;
            rows.push((group, ruled, score, row.opinions.len()));
        }
    }
    println!(
        "the LLM extractor's gate: a message goes to the model when the rules read an opinion in it, or its learned sentence score reaches the threshold"
    );
    for (group, title) in [
        (0, "tuning sets, the part the learned head was trained on"),
        (
            1,
            "what it was not trained on: the tuning sets' development sixth, the tuning sets it leaves out and the development set",
        ),
        (2, "held-out sets"),
    ] {
        let set: Vec<_> = rows.iter().filter(|r| r.0 == group).collect();
        let opinions: usize = set.iter().map(|r| r.3).sum();
        println!(
            "{title}: {} messages, {} labelled opinions",
            set.len(),
            opinions
        );
        for threshold in [
            0.0005f32, 0.001, 0.0015, 0.002, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2,
            0.3, 0.5, 0.7,
        ] {
            let kept_from_model: Vec<_> = set.iter().filter(|r| !r.1 && r.2 < threshold).collect();
            let lost: usize = kept_from_model.iter().map(|r| r.3).sum();
            let (low, high) = wilson_interval(lost, opinions);
            println!(
                "  threshold {threshold}: {:.1}% of messages kept from the model ({}), holding {:.1}% of the labelled opinions ({lost}) [{:.1}-{:.1}%]",
                100.0 * kept_from_model.len() as f64 / set.len().max(1) as f64,
                kept_from_model.len(),
                100.0 * lost as f64 / opinions.max(1) as f64,
                100.0 * low,
                100.0 * high
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Without the local model there is no learned sentence score to measure the gate by.
#[cfg(not(feature = "local-embedder"))]
async fn measure_gate(_config: &Config) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "evaluate-extraction --gate needs the learned sentence score, which this build leaves out (built without the `local-embedder` feature)"
    )
}

/// The labelled sets `evaluate-extraction` reads, by name, with their text: `--set` files, or
/// the shipped tuning sets and the development set, and the held-out sets only when asked
/// (once a round, after the change). Also how many held-out sets were left out.
fn labelled_sets(
    files: &[std::path::PathBuf],
    held_out: bool,
) -> anyhow::Result<(Vec<(String, String)>, usize)> {
    use persona_prefs::extract::evaluate::{DEVELOPMENT_SET, SHIPPED_SETS};
    if !files.is_empty() {
        let named = files
            .iter()
            .map(|path| {
                std::fs::read_to_string(path)
                    .map(|text| (path.display().to_string(), text))
                    .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))
            })
            .collect::<anyhow::Result<_>>()?;
        return Ok((named, 0));
    }
    let left_out = |name: &str| !held_out && rules_report::is_held_out(name);
    let named = SHIPPED_SETS
        .iter()
        .chain([&DEVELOPMENT_SET])
        .filter(|(name, _)| !left_out(name))
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .collect();
    let left_out = SHIPPED_SETS
        .iter()
        .filter(|(name, _)| left_out(name))
        .count();
    Ok((named, left_out))
}

/// How `evaluate-extraction` reads the sets and what it prints.
struct Reading<'a> {
    show_misses: bool,
    concurrency: usize,
    sample: Option<usize>,
    addressee: Option<&'a str>,
    json: bool,
}

/// Findings kept outside the service: read in place of the extractor's (`--found`), and
/// written out for later (`--write-found`).
struct Elsewhere<'a> {
    found: Option<(
        std::path::PathBuf,
        persona_prefs::extract::evaluate::FoundElsewhere,
    )>,
    write_found: Option<&'a std::path::Path>,
}

/// `evaluate-extraction`: scores the configured extractor on each labelled set (`named`,
/// from [`labelled_sets`], with how many held-out sets it left out).
async fn evaluate_extraction(
    config: &Config,
    (named, left_out): (Vec<(String, String)>, usize),
    Reading {
        show_misses,
        concurrency,
        sample,
        addressee,
        json,
    }: Reading<'_>,
    Elsewhere {
        found: found_elsewhere,
        write_found,
    }: Elsewhere<'_>,
) -> anyhow::Result<ExitCode> {
    use persona_prefs::extract::evaluate::{
        DEVELOPMENT_SET, Score, evaluate_addressed as evaluate, evenly_spaced, find_addressed,
        found_line, parse_labelled, register_of, score as score_of, wilson_interval,
    };
    let found_from = found_elsewhere
        .as_ref()
        .map(|(path, _)| path.display().to_string());
    let extractor: std::sync::Arc<dyn persona_prefs::extract::Extractor> = match found_elsewhere {
        Some((_, found)) => std::sync::Arc::new(found),
        None => {
            let local_model = if config.extract.reads_with_local_model() {
                persona_prefs::embed::from_config_sharing(&config.embed)?.local
            } else {
                None
            };
            persona_prefs::extract::from_config(
                &config.extract,
                &config.store.categories,
                local_model,
            )?
        }
    };
    // An LLM is measured beside the rules, on the same utterances.
    let measures_llm =
        found_from.is_none() && config.extract.kind == persona_prefs::extract::ExtractorKind::Llm;
    let rules = measures_llm.then(|| {
        persona_prefs::extract::rules::RulesExtractor::new(config.extract.max_opinions_per_message)
    });
    // A proportion of nothing is no figure: "-" rather than the 1.0 `Score` reports for it.
    let proportion = |part: usize, whole: usize| {
        if whole == 0 {
            format!("- ({part}/{whole})")
        } else {
            let (low, high) = wilson_interval(part, whole);
            format!(
                "{:.3} [{low:.2}-{high:.2}] ({part}/{whole})",
                part as f64 / whole as f64
            )
        }
    };
    let figures = |score: &Score| {
        format!(
            "precision {}, recall {}",
            proportion(score.matched, score.found),
            proportion(score.recalled, score.expected)
        )
    };
    // Per register: (utterances, matched, found, recalled, expected) of the extractor, and of
    // the rules beside it.
    let mut pooled: std::collections::BTreeMap<(&str, &str), [usize; 10]> = Default::default();
    // `--write-found`: each utterance's first reading, in the order read.
    let (mut written, mut written_texts) = (String::new(), std::collections::HashSet::new());
    let mut scores = serde_json::Map::new();
    if !json {
        let extractor_name = match &found_from {
            Some(path) => format!("the findings in {path}"),
            None => format!("{:?}", config.extract.kind),
        };
        println!(
            "extractor: {extractor_name}{}",
            sample.map_or(String::new(), |n| format!(
                " (a sample of at most {n} utterances a set, spread through it)"
            ))
        );
        println!("precision and recall with their 95% Wilson intervals and counts");
        if left_out > 0 {
            println!(
                "the {left_out} held-out sets are not read: --held-out reads them (once a round, after the change)"
            );
        }
    }
    for (name, text) in named {
        let labelled = parse_labelled(&text).map_err(|error| anyhow::anyhow!("{name}: {error}"))?;
        let labelled = match sample {
            Some(count) => evenly_spaced(&labelled, count),
            None => labelled,
        };
        let started = std::time::Instant::now();
        let found = find_addressed(extractor.as_ref(), &labelled, concurrency, addressee).await?;
        let seconds_each = started.elapsed().as_secs_f64() / labelled.len().max(1) as f64;
        let score = score_of(&labelled, &found);
        if write_found.is_some() {
            for (row, found) in labelled.iter().zip(&found) {
                if !found.is_empty() && written_texts.insert(row.text.clone()) {
                    written.push_str(&found_line(&row.text, found));
                    written.push('\n');
                }
            }
        }
        let beside = match &rules {
            Some(rules) => Some(evaluate(rules, &labelled, 4, addressee).await?),
            None => None,
        };
        let register = register_of(&name);
        // Tuning sets, the development set and held-out ones pool apart: only the held-out
        // ones say how the extractor does on text nothing was chosen by.
        let kind = if rules_report::is_held_out(&name) {
            "held-out"
        } else if name == DEVELOPMENT_SET.0 {
            "development"
        } else {
            "tuning"
        };
        let totals = pooled.entry((kind, register)).or_default();
        for (slot, value) in [
            score.utterances,
            score.matched,
            score.found,
            score.recalled,
            score.expected,
        ]
        .into_iter()
        .enumerate()
        {
            totals[slot] += value;
        }
        if let Some(beside) = &beside {
            for (slot, value) in [
                beside.utterances,
                beside.matched,
                beside.found,
                beside.recalled,
                beside.expected,
            ]
            .into_iter()
            .enumerate()
            {
                totals[5 + slot] += value;
            }
        }
        if json {
            let mut entry = serde_json::to_value(&score)?;
            entry["seconds_per_utterance"] = serde_json::json!(seconds_each);
            entry["register"] = serde_json::json!(register);
            if let Some(beside) = &beside {
                entry["rules"] = serde_json::to_value(beside)?;
            }
            scores.insert(name, entry);
            continue;
        }
        // A model call takes seconds, the rules and the learned reader milliseconds.
        let time_each = if seconds_each >= 1.0 {
            format!("{seconds_each:.2} s")
        } else {
            format!("{:.1} ms", seconds_each * 1000.0)
        };
        println!(
            "{name}: {} utterances, {}; {time_each} an utterance{}",
            score.utterances,
            figures(&score),
            addressee.map_or(String::new(), |who| format!(
                "; {} found about {who}",
                score.related
            ))
        );
        if let Some(beside) = &beside {
            println!("  rules on the same: {}", figures(beside));
        }
        if show_misses {
            for miss in &score.misses {
                println!("  {miss}");
            }
        }
    }
    if let Some(path) = write_found {
        std::fs::write(path, &written)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        if !json {
            println!(
                "what was found in {} utterances written to {}",
                written_texts.len(),
                path.display()
            );
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&scores)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("pooled by register:");
    for ((kind, register), totals) in pooled {
        let pooled_score = |t: &[usize]| Score {
            utterances: t[0],
            expected: t[4],
            found: t[2],
            matched: t[1],
            recalled: t[3],
            related: 0,
            precision: if t[2] == 0 {
                1.0
            } else {
                t[1] as f64 / t[2] as f64
            },
            recall: if t[4] == 0 {
                1.0
            } else {
                t[3] as f64 / t[4] as f64
            },
            misses: Vec::new(),
        };
        println!(
            "  {kind}, {register}: {} utterances, {}",
            totals[0],
            figures(&pooled_score(&totals[..5]))
        );
        if rules.is_some() {
            println!(
                "    rules on the same: {}",
                figures(&pooled_score(&totals[5..]))
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
