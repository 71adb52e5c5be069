//! `dlq …`: dead letters, listed, shown, replayed and discarded.

use std::io::Write;
use std::process::ExitCode;

use persona_prefs::app::{self};
use persona_prefs::config::Config;
use persona_prefs::ingest::dead_letters::{
    DeadLetterError, DeadLetters, MAX_LIST_BYTES, MAX_LIST_LIMIT, Selection,
};

use super::{DlqCommand, DlqFilter, EXIT_ERROR_REPLY, EXIT_UNAVAILABLE, EXIT_USAGE, truncate};

pub(super) async fn dlq(command: DlqCommand, config: &Config) -> anyhow::Result<ExitCode> {
    let client = match app::connect_nats(config).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("persona-prefs: {error}");
            return Ok(ExitCode::from(EXIT_UNAVAILABLE));
        }
    };
    let letters = DeadLetters::new(async_nats::jetstream::new(client), config.ingest.clone());
    let selection = |filter: DlqFilter, limit: usize| Selection {
        persona_id: filter.persona,
        reason_code: filter.code,
        limit,
        max_bytes: 0,
    };
    let failed = |error: DeadLetterError| {
        eprintln!("persona-prefs: {error}");
        Ok(ExitCode::from(if error.is_retryable() {
            EXIT_UNAVAILABLE
        } else {
            EXIT_ERROR_REPLY
        }))
    };
    let mut out = std::io::stdout().lock();
    let replay = matches!(command, DlqCommand::Replay { .. });
    match command {
        DlqCommand::List {
            filter,
            limit,
            json,
        } => {
            let listing = match letters.list(&selection(filter, limit)).await {
                Ok(listing) => listing,
                Err(error) => return failed(error),
            };
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&listing)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(
                out,
                "  {:>6}  {:<20} {:<12} {:<20} {:<16} reason",
                "seq", "dead-lettered", "code", "persona", "event"
            )?;
            for letter in &listing.letters {
                let persona = letter
                    .subject
                    .rsplit_once('.')
                    .map(|(_, persona)| persona)
                    .unwrap_or_default();
                writeln!(
                    out,
                    "  {:>6}  {:<20} {:<12} {:<20} {:<16} {}",
                    letter.sequence,
                    truncate(&letter.dead_lettered_at, 20),
                    letter.reason_code,
                    truncate(persona, 20),
                    truncate(letter.event_id.as_deref().unwrap_or("-"), 16),
                    letter.reason
                )?;
            }
            writeln!(
                out,
                "{} shown, {} stored{}",
                listing.letters.len(),
                listing.stored,
                if listing.truncated {
                    " (more match: raise --limit or narrow with --persona / --code)"
                } else {
                    ""
                }
            )?;
            Ok(ExitCode::SUCCESS)
        }
        DlqCommand::Show { sequence, json } => {
            let letter = match letters.get(sequence).await {
                Ok(letter) => letter,
                Err(error) => return failed(error),
            };
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&letter)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(out, "sequence          {}", letter.sequence)?;
            writeln!(out, "dead-lettered     {}", letter.dead_lettered_at)?;
            writeln!(out, "code              {}", letter.reason_code)?;
            writeln!(out, "reason            {}", letter.reason)?;
            writeln!(out, "original subject  {}", letter.original_subject)?;
            writeln!(
                out,
                "original sequence {}",
                letter
                    .original_sequence
                    .map_or("-".to_string(), |s| s.to_string())
            )?;
            writeln!(
                out,
                "deliveries        {}",
                letter.deliveries.map_or("-".to_string(), |d| d.to_string())
            )?;
            if let Some(size) = letter.truncated_from {
                writeln!(
                    out,
                    "truncated         to {} of {size} bytes (too large to keep whole)",
                    letter.payload.len()
                )?;
            }
            writeln!(out, "payload\n{}", letter.payload_text)?;
            Ok(ExitCode::SUCCESS)
        }
        DlqCommand::Replay {
            sequences,
            all,
            filter,
        }
        | DlqCommand::Discard {
            sequences,
            all,
            filter,
        } => {
            bulk(
                &letters,
                sequences,
                all,
                selection(filter, MAX_LIST_LIMIT),
                replay,
            )
            .await
        }
    }
}

/// Replays or discards the listed letters, or with `all` every letter the selection matches.
async fn bulk(
    letters: &DeadLetters,
    mut sequences: Vec<u64>,
    all: bool,
    selection: Selection,
    replay: bool,
) -> anyhow::Result<ExitCode> {
    let verb = if replay { "replayed" } else { "discarded" };
    if all {
        match letters.list(&selection).await {
            Ok(listing) => {
                if listing.truncated {
                    eprintln!(
                        "persona-prefs: more letters match than one run takes ({MAX_LIST_LIMIT} letters or {} MiB); run again for the rest",
                        MAX_LIST_BYTES >> 20
                    );
                }
                sequences = listing.letters.iter().map(|l| l.sequence).collect();
            }
            Err(error) => {
                eprintln!("persona-prefs: {error}");
                return Ok(ExitCode::from(EXIT_ERROR_REPLY));
            }
        }
    } else if sequences.is_empty() {
        eprintln!(
            "persona-prefs: name the letters' sequences, or pass --all (see `persona-prefs dlq list`)"
        );
        return Ok(ExitCode::from(EXIT_USAGE));
    } else if selection.persona_id.is_some() || selection.reason_code.is_some() {
        eprintln!(
            "persona-prefs: --persona and --code select letters for --all; with sequences, leave them out"
        );
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let report = if replay {
        letters.replay_all(&sequences).await
    } else {
        letters.discard_all(&sequences).await
    };
    for (sequence, error) in &report.failed {
        eprintln!("persona-prefs: {sequence}: {error}");
    }
    println!("{verb} {} of {}", report.done.len(), sequences.len());
    Ok(if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_ERROR_REPLY)
    })
}
