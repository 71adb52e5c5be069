//! A preference's strength over time, reconstructed from what its record keeps, drawn as a
//! small SVG on the server (no script, nothing to load).

use crate::store::Preference;
use crate::timestamp::Timestamp;

/// One point of the strength curve: when, and the stored strength from then on.
#[derive(Debug, Clone, PartialEq)]
pub struct StrengthPoint {
    pub at: Timestamp,
    pub strength: f64,
}

/// The strength curve, oldest first, from the record alone: walking back from the current
/// strength, a logged reinforcement undoes `s' = s + rate·(1 − s)` and a history entry gives
/// the strength it replaced. Reinforcements older than the log (`store.max_reinforcement_log`)
/// are not known; the curve then starts at the oldest known point.
pub fn strength_history(preference: &Preference, reinforce_rate: f64) -> Vec<StrengthPoint> {
    enum Change {
        Reinforced,
        Replaced(Option<f64>),
    }
    let mut changes: Vec<(Timestamp, Change)> = Vec::new();
    for reinforcement in &preference.reinforcements {
        if let Ok(at) = Timestamp::parse(&reinforcement.timestamp) {
            changes.push((at, Change::Reinforced));
        }
    }
    for entry in &preference.evolution_history {
        if let Ok(at) = Timestamp::parse(&entry.timestamp) {
            changes.push((at, Change::Replaced(entry.old_strength)));
        }
    }
    changes.sort_by_key(|(at, _)| *at);
    let mut points = Vec::with_capacity(changes.len() + 1);
    let mut strength = preference.strength;
    for (at, change) in changes.into_iter().rev() {
        points.push(StrengthPoint { at, strength });
        strength = match change {
            Change::Reinforced if reinforce_rate < 1.0 => {
                ((strength - reinforce_rate) / (1.0 - reinforce_rate)).clamp(0.0, 1.0)
            }
            Change::Reinforced => strength,
            Change::Replaced(old) => old.unwrap_or(strength),
        };
    }
    // Ingest stamps changes with when they were said, which can be before the record was made
    // (a conversation published later): the curve starts at whichever came first.
    let first_change = points.last().map(|point| point.at);
    let created = Timestamp::parse(&preference.created_at).ok();
    if let Some(start) = match (created, first_change) {
        (Some(created), Some(first)) => Some(created.min(first)),
        (created, first) => created.or(first),
    } {
        points.push(StrengthPoint {
            at: start,
            strength,
        });
    }
    points.reverse();
    points.dedup_by(|later, earlier| later.at == earlier.at && later.strength == earlier.strength);
    points
}

const WIDTH: f64 = 480.0;
const HEIGHT: f64 = 160.0;
const PAD: f64 = 28.0;

/// The curve as an accessible SVG (a title and a text description of the points): a step line
/// (strength holds until the next change), time along, strength 0–1 up.
pub fn strength_svg(points: &[StrengthPoint]) -> String {
    let description = points
        .iter()
        .map(|p| format!("{}: {:.2}", p.at, p.strength))
        .collect::<Vec<_>>()
        .join("; ");
    let mut svg = format!(
        r#"<svg class="chart" role="img" aria-labelledby="chart-t chart-d" viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg"><title id="chart-t">Strength over time</title><desc id="chart-d">{}</desc>"#,
        escape(if description.is_empty() {
            "no recorded changes"
        } else {
            &description
        })
    );
    // Axes and the 0.5 guide.
    let y = |strength: f64| HEIGHT - PAD - strength.clamp(0.0, 1.0) * (HEIGHT - 2.0 * PAD);
    svg.push_str(&format!(
        r##"<line x1="{PAD}" y1="{}" x2="{}" y2="{}" stroke="#8a93a3"/><line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{}" stroke="#8a93a3"/><line x1="{PAD}" y1="{}" x2="{}" y2="{}" stroke="#d8dde6" stroke-dasharray="4 4"/><text x="4" y="{}" font-size="10" fill="#5b6474">1</text><text x="4" y="{}" font-size="10" fill="#5b6474">0</text>"##,
        y(0.0),
        WIDTH - PAD,
        y(0.0),
        y(0.0),
        y(0.5),
        WIDTH - PAD,
        y(0.5),
        y(1.0) + 4.0,
        y(0.0) + 4.0,
    ));
    if let (Some(first), Some(last)) = (points.first(), points.last()) {
        let start = first.at.instant().unix_timestamp_nanos() as f64;
        let span = (last.at.instant().unix_timestamp_nanos() as f64 - start).max(1.0);
        let x = |at: Timestamp| {
            if points.len() == 1 {
                WIDTH / 2.0
            } else {
                PAD + (at.instant().unix_timestamp_nanos() as f64 - start) / span
                    * (WIDTH - 2.0 * PAD)
            }
        };
        let mut path = String::new();
        for (n, point) in points.iter().enumerate() {
            if n > 0 {
                // Hold the previous strength until this change.
                path.push_str(&format!(
                    " {:.1},{:.1}",
                    x(point.at),
                    y(points[n - 1].strength)
                ));
            }
            path.push_str(&format!(" {:.1},{:.1}", x(point.at), y(point.strength)));
        }
        svg.push_str(&format!(
            r##"<polyline fill="none" stroke="#2b59c3" stroke-width="2" points="{}"/>"##,
            path.trim()
        ));
        for point in points {
            svg.push_str(&format!(
                r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#2b59c3"/>"##,
                x(point.at),
                y(point.strength)
            ));
        }
    }
    svg.push_str("</svg>");
    svg
}

fn escape(text: &str) -> String {
    crate::serve::render::xml_escape(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{HistoryEntry, Reinforcement};

    fn entry(timestamp: &str, old_strength: f64) -> HistoryEntry {
        HistoryEntry {
            action: Some("evolution".into()),
            version: Some(1),
            old_opinion: Some("x".into()),
            old_stance: Some("for".into()),
            old_strength: Some(old_strength),
            old_active: Some(true),
            old_reinforcement_count: None,
            restored: None,
            merged: None,
            merged_into: None,
            new_opinion: Some("y".into()),
            timestamp: timestamp.into(),
            reason: String::new(),
        }
    }

    #[test]
    fn the_curve_is_walked_back_from_the_current_strength() {
        // Created at 0.5, reinforced once (rate 0.2: 0.6), changed its mind (reset to 0.4),
        // reinforced again (0.52).
        let preference = Preference {
            strength: 0.52,
            created_at: "2026-11-01T00:00:00Z".into(),
            reinforcements: vec![
                Reinforcement {
                    timestamp: "2026-11-02T00:00:00Z".into(),
                    ..Reinforcement::default()
                },
                Reinforcement {
                    timestamp: "2026-11-04T00:00:00Z".into(),
                    ..Reinforcement::default()
                },
            ],
            evolution_history: vec![entry("2026-11-03T00:00:00Z", 0.6)],
            ..Preference::for_tests("tea")
        };
        let points = strength_history(&preference, 0.2);
        let strengths: Vec<f64> = points
            .iter()
            .map(|p| (p.strength * 1000.0).round() / 1000.0)
            .collect();
        assert_eq!(strengths, vec![0.5, 0.6, 0.4, 0.52]);
        assert_eq!(
            points[0].at,
            Timestamp::parse("2026-11-01T00:00:00Z").unwrap()
        );
        let svg = strength_svg(&points);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("2026-11-03T00:00:00Z: 0.40"), "{svg}");
    }

    #[test]
    fn a_record_without_times_draws_an_empty_chart() {
        let svg = strength_svg(&strength_history(&Preference::for_tests("tea"), 0.15));
        assert!(svg.contains("no recorded changes"));
        assert!(!svg.contains("<polyline"));
    }
}
