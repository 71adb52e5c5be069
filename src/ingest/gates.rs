//! A limit on one persona's events in flight, so that a hot persona leaves the worker's other
//! slots to everyone else.
//!
//! The consume loop enters each pulled message at its persona's gate, in stream order. At
//! most `ingest.max_in_flight_per_persona` of a persona's events are past the gate at once;
//! the rest wait in order, holding only their place among the worker's pulled messages (and
//! sending progress acks, so JetStream does not deliver them again). A quiet persona's event
//! pulled behind a flood is therefore worked on at once, as long as the worker pulls far
//! enough to reach it (`ingest.max_in_flight`).
//!
//! Deadlock-free with [`super::turns`]: events of a persona pass the gate in the order they
//! took their turns, so every event past the gate waits only for turns of events that are
//! past it too, or done.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

#[derive(Default)]
struct Gate {
    /// Events of the persona past the gate and not done.
    active: usize,
    /// Events waiting to pass, first come first; a sender whose receiver is gone is skipped.
    waiting: VecDeque<oneshot::Sender<()>>,
}

/// Gates per persona, `limit` events past each at once (0: no limit).
#[derive(Clone)]
pub struct PersonaGates {
    limit: usize,
    gates: Arc<Mutex<HashMap<String, Gate>>>,
}

/// One event's place at its persona's gate. [`Entry::pass`] resolves once it may go; dropping
/// the entry (the event done, or given back) lets the next one through.
pub struct Entry {
    persona_id: String,
    gates: PersonaGates,
    waiting: Option<oneshot::Receiver<()>>,
    passed: bool,
}

impl PersonaGates {
    pub fn new(limit: usize) -> PersonaGates {
        PersonaGates {
            limit,
            gates: Arc::default(),
        }
    }

    /// Enters an event of `persona_id` at the gate, behind every event entered before it.
    pub fn enter(&self, persona_id: &str) -> Entry {
        let mut gates = self.gates.lock().expect("gates lock is never poisoned");
        let gate = gates.entry(persona_id.to_string()).or_default();
        let waiting = if self.limit == 0 || gate.active < self.limit {
            gate.active += 1;
            None
        } else {
            let (sender, receiver) = oneshot::channel();
            gate.waiting.push_back(sender);
            Some(receiver)
        };
        Entry {
            persona_id: persona_id.to_string(),
            gates: self.clone(),
            passed: waiting.is_none(),
            waiting,
        }
    }

    /// Events past a gate or waiting at one, over every persona (for tests and telemetry).
    pub fn counts(&self) -> (usize, usize) {
        let gates = self.gates.lock().expect("gates lock is never poisoned");
        gates.values().fold((0, 0), |(active, waiting), gate| {
            (active + gate.active, waiting + gate.waiting.len())
        })
    }

    /// A passed event is done: its place goes to the first waiting event still there, or
    /// the gate has one fewer past it.
    fn release(&self, persona_id: &str) {
        let mut gates = self.gates.lock().expect("gates lock is never poisoned");
        let Some(gate) = gates.get_mut(persona_id) else {
            return;
        };
        while let Some(next) = gate.waiting.pop_front() {
            if next.send(()).is_ok() {
                return;
            }
        }
        gate.active = gate.active.saturating_sub(1);
        if gate.active == 0 {
            gates.remove(persona_id);
        }
    }
}

impl Entry {
    /// Whether the event may go now, without waiting.
    pub fn has_passed(&self) -> bool {
        self.passed
    }

    /// Resolves once the event may go.
    pub async fn pass(&mut self) {
        if let Some(waiting) = self.waiting.as_mut() {
            // Err only if the gates were dropped, which they are not while events run.
            let _ = waiting.await;
            self.waiting = None;
            self.passed = true;
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // An entry given up while waiting may have been let through just then: its place is
        // handed on as a passed event's would be.
        let let_through = match self.waiting.as_mut() {
            Some(waiting) => waiting.try_recv().is_ok(),
            None => false,
        };
        if self.passed || let_through {
            self.gates.release(&self.persona_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_most_the_limit_pass_and_the_rest_follow_in_order() {
        let gates = PersonaGates::new(2);
        let a1 = gates.enter("a");
        let a2 = gates.enter("a");
        let mut a3 = gates.enter("a");
        let mut a4 = gates.enter("a");
        let b1 = gates.enter("b");
        assert!(a1.has_passed() && a2.has_passed() && b1.has_passed());
        assert!(!a3.has_passed() && !a4.has_passed());
        assert_eq!(gates.counts(), (3, 2));
        drop(a2);
        a3.pass().await;
        assert!(a3.has_passed());
        assert_eq!(gates.counts(), (3, 1), "a3 took a2's place");
        drop(a1);
        a4.pass().await;
        drop((a3, a4, b1));
        assert_eq!(gates.counts(), (0, 0), "nothing left behind");
    }

    #[tokio::test]
    async fn an_event_given_up_while_waiting_does_not_keep_a_place() {
        let gates = PersonaGates::new(1);
        let a1 = gates.enter("a");
        let a2 = gates.enter("a");
        let mut a3 = gates.enter("a");
        drop(a2);
        drop(a1);
        a3.pass().await;
        assert!(a3.has_passed(), "a2's turn went to a3");
        // Let through, then given up before it noticed: the place is handed on.
        let a4 = gates.enter("a");
        assert!(!a4.has_passed());
        drop(a3);
        assert_eq!(gates.counts(), (1, 0), "a4 let through");
        drop(a4);
        assert_eq!(gates.counts(), (0, 0));
    }

    #[tokio::test]
    async fn no_limit_lets_everything_through() {
        let gates = PersonaGates::new(0);
        let entries: Vec<Entry> = (0..100).map(|_| gates.enter("a")).collect();
        assert!(entries.iter().all(Entry::has_passed));
    }
}
