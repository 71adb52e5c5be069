//! One backoff policy for everything that waits before trying again: calls to the LLM and
//! embedding APIs (`openai_http`), and the delay a failed event waits in JetStream before it
//! is redelivered (`ingest::worker`). Exponential with factor 2 from `first`, capped at `max`,
//! built on `backon`.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait before the first retry.
    pub first: Duration,
    /// No wait is longer.
    pub max: Duration,
}

impl RetryPolicy {
    fn exponential(self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_factor(2.0)
            .with_min_delay(self.first)
            .with_max_delay(self.max)
    }

    /// For in-process retries (`backon::Retryable::retry`): at most `max_retries` retries,
    /// with jitter so callers that failed together do not retry together.
    pub fn backoff(self, max_retries: usize) -> ExponentialBuilder {
        self.exponential().with_max_times(max_retries).with_jitter()
    }

    /// The wait before retry number `retry` (1 = the first), without jitter: what a JetStream
    /// nak asks for, where the server spreads redeliveries itself.
    pub fn delay(self, retry: u32) -> Duration {
        self.exponential()
            .without_max_times()
            .build()
            .nth(retry.max(1) as usize - 1)
            .unwrap_or(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_first_up_to_the_cap() {
        let policy = RetryPolicy {
            first: Duration::from_millis(500),
            max: Duration::from_secs(60),
        };
        let delays: Vec<u64> = (1..=10)
            .map(|retry| policy.delay(retry).as_millis() as u64)
            .collect();
        assert_eq!(
            delays,
            [
                500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000
            ]
        );
        assert_eq!(
            policy.delay(0),
            Duration::from_millis(500),
            "0 counts as the first"
        );
    }

    #[test]
    fn in_process_retries_stop_after_the_limit_and_stay_under_twice_the_cap() {
        let policy = RetryPolicy {
            first: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let waits: Vec<Duration> = policy.backoff(4).build().collect();
        assert_eq!(waits.len(), 4);
        // Jitter adds up to one more delay of the same size.
        assert!(
            waits.iter().all(|wait| *wait < Duration::from_secs(2)),
            "{waits:?}"
        );
        assert!(waits[0] >= Duration::from_millis(100), "{waits:?}");
    }
}
