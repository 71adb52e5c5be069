//! Client commands of the binary and their human-readable output.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use persona_prefs::app::{self, DemoReport};
use persona_prefs::config::Config;
use persona_prefs::ingest::event::ConversationEvent;
use persona_prefs::store::{Preference, PreferenceStore};

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
}

pub async fn run(command: ClientCommand, config: Config) -> anyhow::Result<ExitCode> {
    match command {
        ClientCommand::Publish { file } => publish(file, &config).await,
        ClientCommand::Index(IndexCommand::Info { json }) => {
            let store = PreferenceStore::connect(&config.redis, &config.store).await?;
            match store.index_info().await? {
                None => {
                    eprintln!(
                        "index {} does not exist (persona-prefs index ensure creates it)",
                        config.redis.index_name
                    );
                    Ok(ExitCode::from(1))
                }
                Some(info) if json => {
                    let value = serde_json::json!({
                        "name": info.name, "prefixes": info.prefixes, "num_docs": info.num_docs,
                        "vector_dims": info.vector_dims, "vector_metric": info.vector_metric,
                        "attributes": info.attributes,
                    });
                    println!("{}", serde_json::to_string_pretty(&value)?);
                    Ok(ExitCode::SUCCESS)
                }
                Some(info) => {
                    println!("index      {}", info.name);
                    println!("prefixes   {}", info.prefixes.join(", "));
                    println!("documents  {}", info.num_docs);
                    println!(
                        "vector     {:?} dims, {:?}",
                        info.vector_dims, info.vector_metric
                    );
                    for (name, kind) in info.attributes {
                        println!("  {name:<24} {kind}");
                    }
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        ClientCommand::Index(IndexCommand::Ensure) => {
            let store = PreferenceStore::connect(&config.redis, &config.store).await?;
            let info = store.ensure_index().await?;
            println!(
                "index {} ready ({} documents, {:?} dims)",
                info.name, info.num_docs, info.vector_dims
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn publish(file: Option<PathBuf>, config: &Config) -> anyhow::Result<ExitCode> {
    let reader: Box<dyn BufRead> = match &file {
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| path.display().to_string())?,
        )),
        None => Box::new(std::io::BufReader::new(std::io::stdin())),
    };
    let client = app::connect_nats(config).await?;
    let js = async_nats::jetstream::new(client);
    let mut published = 0usize;
    for (number, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let event: ConversationEvent =
            serde_json::from_str(&line).with_context(|| format!("line {}", number + 1))?;
        let mut headers = async_nats::HeaderMap::new();
        // JetStream drops a re-published id within its duplicate window.
        headers.insert("Nats-Msg-Id", event.event_id.as_str());
        let subject = format!("{}.{}", config.ingest.subject_prefix, event.persona_id);
        let ack = js
            .publish_with_headers(subject, headers, line.into_bytes().into())
            .await?
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

pub fn print_demo(report: &DemoReport) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "Processed {} conversation events for persona {:?} in {:.1}s.\n",
        report.events_published,
        report.persona_id,
        report.took.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "What {} now believes (strongest first):\n",
        report.persona_id
    );
    print_preferences(&mut out, &report.preferences);
    let changed: Vec<&Preference> = report
        .preferences
        .iter()
        .filter(|p| !p.evolution_history.is_empty())
        .collect();
    if !changed.is_empty() {
        let _ = writeln!(out, "\nChanges of mind:");
        for preference in changed {
            for entry in &preference.evolution_history {
                let _ = writeln!(
                    out,
                    "  {}: {:?} -> {:?}\n    ({})",
                    preference.name,
                    entry.old_opinion.as_deref().unwrap_or(""),
                    entry.new_opinion.as_deref().unwrap_or("(retracted)"),
                    entry.reason
                );
            }
        }
    }
    if !report.decisions.is_empty() {
        let _ = writeln!(
            out,
            "\nDecisions (from the worker's metrics):\n{}",
            report.decisions
        );
    }
    match report.metrics_address {
        Some(address) => {
            let _ = writeln!(
                out,
                "\nMetrics were served at http://{address}/metrics while the demo ran; `persona-prefs serve` keeps them up."
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\nMetrics listener disabled (metrics.listen is empty)."
            );
        }
    }
}

pub fn print_preferences(out: &mut impl Write, preferences: &[Preference]) {
    let _ = writeln!(
        out,
        "  {:<22} {:<8} {:>8} {:>7} {:>7}  {:<14} opinion",
        "topic", "stance", "strength", "reinf.", "evolved", "category"
    );
    for p in preferences {
        let stance = p.stance.map(|s| s.as_str()).unwrap_or("-");
        let evolved = p
            .evolution_history
            .iter()
            .filter(|e| e.action.as_deref() != Some("retraction"))
            .count();
        let active = if p.active { "" } else { " [retracted]" };
        let opinion: String = p.opinion.chars().take(70).collect();
        let _ = writeln!(
            out,
            "  {:<22} {:<8} {:>8.3} {:>7} {:>7}  {:<14} {}{}",
            truncate(&p.name, 22),
            stance,
            p.strength,
            p.reinforcement_count,
            evolved,
            p.category,
            opinion,
            active
        );
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        text.chars().take(max - 1).collect::<String>() + "…"
    }
}
