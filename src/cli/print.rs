//! Human-readable output shared by the commands: status, the demo's report, preference tables.

use std::io::Write;

use persona_prefs::app::DemoReport;
use persona_prefs::store::Preference;

pub(super) fn print_status(status: &persona_prefs::status::Status) {
    let or_dash = |value: Option<u64>| value.map_or("-".to_string(), |v| v.to_string());
    match &status.redis {
        Some(redis) if redis.exists => println!(
            "index          {}: {} documents, {:.0}% indexed, {} failures",
            redis.index,
            redis.documents,
            redis.percent_indexed * 100.0,
            redis.indexing_failures
        ),
        Some(redis) => println!("index          {}: missing", redis.index),
        None => println!("redis          unreachable"),
    }
    match &status.nats {
        Some(nats) => {
            println!(
                "events         {} stored, {} waiting, {} in progress",
                or_dash(nats.events_stored),
                or_dash(nats.consumer_pending),
                or_dash(nats.consumer_ack_pending)
            );
            println!("dead letters   {}", or_dash(nats.dead_letters));
            println!(
                "replicas       {}{}",
                nats.replicas.len(),
                nats.replicas
                    .first()
                    .map(|r| format!(" (version {})", r.version))
                    .unwrap_or_default()
            );
        }
        None => println!("nats           unreachable"),
    }
    for problem in &status.problems {
        println!("PROBLEM  {problem}");
    }
    for warning in &status.warnings {
        println!("warning  {warning}");
    }
    if status.healthy {
        println!("healthy");
    }
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

pub(super) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        text.chars().take(max - 1).collect::<String>() + "…"
    }
}
