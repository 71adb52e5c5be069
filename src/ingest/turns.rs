//! Events of one persona take effect in stream order within a worker; other personas' events
//! never wait for them.
//!
//! The consume loop takes a [`Turn`] for each message as it pulls it, so turns are handed out
//! in stream order. Extraction and embedding (the slow part) run at once for every event in
//! flight; an event waits for the turns before it only to decide and write, and gives its turn
//! up when it is done, whether it succeeded, failed or was returned for redelivery. Across
//! workers, and for redelivered events, the order is not kept: the preference timeline
//! (`model::timeline`) makes the memory the same whatever order events take effect in. This
//! keeps the usual case (one worker, events in order) from reordering at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::Shared;
use tokio::sync::oneshot;

/// Resolves when a turn ends.
type TurnEnded = Shared<oneshot::Receiver<()>>;

/// Hands out turns per persona.
#[derive(Clone, Default)]
pub struct PersonaTurns {
    /// Per persona, the last turn handed out: its number and what resolves when it ends.
    last: Arc<Mutex<HashMap<String, (u64, TurnEnded)>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

/// A place in one persona's queue. [`Turn::wait`] resolves once every earlier turn of the
/// persona has ended; dropping the turn ends it.
pub struct Turn {
    persona_id: String,
    number: u64,
    previous: Option<TurnEnded>,
    /// Dropped when the turn ends, which resolves the next turn's `previous`.
    _ended: oneshot::Sender<()>,
    turns: PersonaTurns,
}

impl PersonaTurns {
    /// The next turn of `persona_id`, after every turn already handed out for it.
    pub fn take(&self, persona_id: &str) -> Turn {
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (ended, ended_receiver) = oneshot::channel();
        let mut last = self.last.lock().expect("turns lock is never poisoned");
        let previous = last
            .insert(persona_id.to_string(), (number, ended_receiver.shared()))
            .map(|(_, previous)| previous);
        Turn {
            persona_id: persona_id.to_string(),
            number,
            previous,
            _ended: ended,
            turns: self.clone(),
        }
    }

    /// Personas with a turn outstanding (for tests: the map does not grow without bound).
    pub fn personas_waiting(&self) -> usize {
        self.last
            .lock()
            .expect("turns lock is never poisoned")
            .len()
    }
}

impl Turn {
    /// Resolves once every earlier turn of this persona has ended.
    pub async fn wait(&mut self) {
        if let Some(previous) = self.previous.take() {
            // Err(Canceled) is how an ended turn says so: its sender was dropped.
            let _ = previous.await;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut last = self
            .turns
            .last
            .lock()
            .expect("turns lock is never poisoned");
        // The last turn handed out for the persona forgets it; a later one keeps its entry.
        if last
            .get(&self.persona_id)
            .is_some_and(|(number, _)| *number == self.number)
        {
            last.remove(&self.persona_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_personas_turns_end_in_the_order_they_were_taken() {
        let turns = PersonaTurns::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for n in 0..5u64 {
            let mut turn = turns.take("ada");
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                // Later turns finish their own work first.
                tokio::time::sleep(Duration::from_millis(50 - n * 10)).await;
                turn.wait().await;
                order.lock().unwrap().push(n);
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(turns.personas_waiting(), 0, "nothing is left behind");
    }

    #[tokio::test]
    async fn another_persona_never_waits() {
        let turns = PersonaTurns::default();
        let _held = turns.take("ada");
        let mut other = turns.take("grace");
        tokio::time::timeout(Duration::from_secs(1), other.wait())
            .await
            .expect("grace's first turn is free while ada's is held");
        let mut next_of_ada = turns.take("ada");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), next_of_ada.wait())
                .await
                .is_err(),
            "ada's second turn waits for her first"
        );
    }

    #[tokio::test]
    async fn a_turn_given_up_without_waiting_still_lets_the_next_go() {
        let turns = PersonaTurns::default();
        let first = turns.take("ada");
        let mut second = turns.take("ada");
        drop(first);
        tokio::time::timeout(Duration::from_secs(1), second.wait())
            .await
            .expect("the next turn goes once the earlier one is dropped");
    }
}
