//! How many requests a model server gets at once, adapted to what it can take.
//!
//! A llama.cpp server with one slot computes one request at a time; the rest queue inside it,
//! where a client's timeout runs while nothing happens for it, and a request the client gave
//! up on is still computed. A fixed cap sized for a hosted API (32) turns such a server's queue
//! into a storm of timeouts and retries. So the cap follows the server (additive increase,
//! multiplicative decrease, as TCP and Netflix's concurrency limits do):
//! - it starts from what the server says it has (llama.cpp `/props` `total_slots`, set by the
//!   caller) or the configured cap;
//! - a request that timed out, or was answered 429 or 503, or took more than twice the fastest
//!   recent answer and two seconds more, halves it (at most once per round of requests: a queue
//!   of timeouts that all began before the cut counts once);
//! - an answer in good time (at most half again the fastest recent one) while every permit was
//!   in use raises it by one per round: a one-slot server settles at two, one computing and
//!   one waiting, so the slot never idles between requests;
//! - never below `min`, never above `max`.
//!
//! Waiting for a permit is not part of a request's time: a permit is taken before the request
//! is sent, and the request's own timeout starts after.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Recent answers whose fastest is the no-load baseline.
const RECENT_ANSWERS: usize = 50;
/// An answer slower than `SLOW_FACTOR` times the baseline and `SLOW_MARGIN` more is a sign of
/// queueing (a short answer and a long one differ a lot, hence the margin).
const SLOW_FACTOR: u32 = 2;
const SLOW_MARGIN: Duration = Duration::from_secs(2);

/// What a request's answer says about the server's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered (its time is judged against the baseline).
    Answered,
    /// Timed out, or refused for load (429, 503): too many at once.
    Overloaded,
    /// Says nothing about load (connection refused, a bad request).
    Ignored,
}

/// An adaptive cap on requests in flight.
pub struct AdaptiveLimit {
    state: Mutex<State>,
    released: Notify,
    min: usize,
    max: usize,
}

struct State {
    /// Fractional, so a round of answers raises it by one.
    limit: f64,
    in_flight: usize,
    recent: VecDeque<Duration>,
    /// When the limit was last cut: overloads of requests sent before it are already counted.
    last_cut: Option<Instant>,
}

/// Leave to send one request. Say how it went with [`Permit::finish`]; dropped unfinished
/// (the request was abandoned), it says nothing.
pub struct Permit<'a> {
    owner: &'a AdaptiveLimit,
    granted: Instant,
    /// Every permit was in use when this one was granted: an answer in good time shows the
    /// server could take more.
    saturated: bool,
    finished: bool,
}

impl AdaptiveLimit {
    /// A cap starting at `initial`, kept within `min..=max` (both at least 1).
    pub fn new(initial: usize, min: usize, max: usize) -> AdaptiveLimit {
        let min = min.max(1);
        let max = max.max(min);
        AdaptiveLimit {
            state: Mutex::new(State {
                limit: initial.clamp(min, max) as f64,
                in_flight: 0,
                recent: VecDeque::with_capacity(RECENT_ANSWERS),
                last_cut: None,
            }),
            released: Notify::new(),
            min,
            max,
        }
    }

    /// The current cap.
    pub fn limit(&self) -> usize {
        self.lock().limit as usize
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// Sets the cap (what the server reports it can take), within `min..=max`.
    pub fn set_limit(&self, limit: usize) {
        self.lock().limit = limit.clamp(self.min, self.max) as f64;
        self.released.notify_waiters();
    }

    /// Waits for a permit.
    pub async fn acquire(&self) -> Permit<'_> {
        loop {
            let notified = self.released.notified();
            tokio::pin!(notified);
            // Registered before looking, so a release between the look and the wait wakes it.
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                let limit = (state.limit as usize).max(1);
                if state.in_flight < limit {
                    state.in_flight += 1;
                    return Permit {
                        owner: self,
                        granted: Instant::now(),
                        saturated: state.in_flight >= limit,
                        finished: false,
                    };
                }
            }
            notified.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn release(&self, permit: &Permit<'_>, outcome: Outcome) {
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        let took = permit.granted.elapsed();
        let mut in_good_time = false;
        let overloaded = match outcome {
            Outcome::Ignored => false,
            Outcome::Overloaded => true,
            Outcome::Answered => {
                if state.recent.len() == RECENT_ANSWERS {
                    state.recent.pop_front();
                }
                state.recent.push_back(took);
                let fastest = state.recent.iter().min().copied().unwrap_or(took);
                in_good_time = took <= fastest + fastest / 2;
                took > fastest * SLOW_FACTOR && took > fastest + SLOW_MARGIN
            }
        };
        if overloaded {
            // One cut per round: requests sent before the last cut saw the old limit.
            if state.last_cut.is_none_or(|cut| permit.granted >= cut) {
                state.limit = (state.limit / 2.0).max(self.min as f64);
                state.last_cut = Some(Instant::now());
                tracing::info!(
                    limit = state.limit as usize,
                    ?outcome,
                    took_ms = took.as_millis() as u64,
                    "model server overloaded; fewer requests at once"
                );
            }
        } else if in_good_time && permit.saturated {
            state.limit = (state.limit + 1.0 / state.limit.max(1.0)).min(self.max as f64);
        }
        crate::telemetry::llm_concurrency_limit(state.limit as usize);
        drop(state);
        self.released.notify_waiters();
    }
}

impl Permit<'_> {
    /// Reports how the request went and frees the permit.
    pub fn finish(mut self, outcome: Outcome) {
        self.finished = true;
        self.owner.release(&self, outcome);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.owner.release(self, Outcome::Ignored);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_timeout_halves_the_limit_once_per_round() {
        let limit = AdaptiveLimit::new(8, 1, 32);
        let permits: Vec<Permit> = futures::future::join_all((0..8).map(|_| limit.acquire())).await;
        tokio::time::advance(Duration::from_secs(20)).await;
        for permit in permits {
            permit.finish(Outcome::Overloaded);
        }
        assert_eq!(limit.limit(), 4, "eight timeouts of one round cut once");
        let permit = limit.acquire().await;
        permit.finish(Outcome::Overloaded);
        assert_eq!(
            limit.limit(),
            2,
            "a request sent after the cut counts again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn it_never_falls_below_one_nor_rises_above_the_cap() {
        let limit = AdaptiveLimit::new(1, 1, 3);
        for _ in 0..5 {
            limit.acquire().await.finish(Outcome::Overloaded);
        }
        assert_eq!(limit.limit(), 1);
        for _ in 0..100 {
            round(&limit).await;
        }
        assert_eq!(limit.limit(), 3);
    }

    /// Every permit the limit allows, answered a second later.
    async fn round(limit: &AdaptiveLimit) {
        let n = limit.limit();
        let permits: Vec<Permit> = futures::future::join_all((0..n).map(|_| limit.acquire())).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        for permit in permits {
            permit.finish(Outcome::Answered);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn answers_in_good_time_at_the_limit_raise_it_by_one_a_round() {
        let limit = AdaptiveLimit::new(2, 1, 32);
        round(&limit).await;
        round(&limit).await;
        round(&limit).await;
        assert!(limit.limit() >= 3, "{}", limit.limit());
        // Answers that are not at the limit say nothing about more.
        let before = limit.limit();
        for _ in 0..20 {
            let permit = limit.acquire().await;
            permit.finish(Outcome::Answered);
        }
        assert_eq!(limit.limit(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_far_slower_than_the_fastest_is_queueing() {
        let limit = AdaptiveLimit::new(4, 1, 32);
        let fast = limit.acquire().await;
        tokio::time::advance(Duration::from_secs(1)).await;
        fast.finish(Outcome::Answered);
        let slow = limit.acquire().await;
        tokio::time::advance(Duration::from_secs(6)).await;
        slow.finish(Outcome::Answered);
        assert_eq!(limit.limit(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_gets_the_permit_a_finished_request_frees() {
        let limit = std::sync::Arc::new(AdaptiveLimit::new(1, 1, 4));
        let first = limit.acquire().await;
        let waiter = {
            let limit = limit.clone();
            tokio::spawn(async move {
                let permit = limit.acquire().await;
                permit.finish(Outcome::Ignored);
            })
        };
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!waiter.is_finished());
        assert_eq!(limit.in_flight(), 1);
        drop(first);
        waiter.await.unwrap();
        assert_eq!(limit.in_flight(), 0);
    }
}
