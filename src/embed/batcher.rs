//! Micro-batching: texts from concurrent callers are gathered (up to `max_batch`) and read in
//! one call, so the local model runs at batch throughput while each caller still awaits only
//! its own answers. The embedder's vectors go through it ([`BatchingEmbedder`]), and so do the
//! learned reader's sentence scores and readings ([`Batcher`] over any [`BatchWork`]).
//!
//! Batches form while the model is busy, not by waiting: the batch task reads whatever is
//! queued the moment the model is free. A lone request (an injection query on a quiet
//! service) therefore goes straight to the model, and under load every call but the first
//! finds a queue to gather. `linger` adds an optional wait after the first request, for
//! work whose every call has a fixed cost worth sharing (a remote API); 0 by default.
//!
//! One caller's texts travel as one job (split only past `max_batch`), so an event's topics
//! are read together rather than racing the batch task text by text.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::{EmbedError, Embedder};

/// Work that reads several texts in one call, one answer a text, in order: what [`Batcher`]
/// gathers concurrent callers' texts for.
pub trait BatchWork: Send + Sync + 'static {
    type Answer: Clone + Send + 'static;

    fn read<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Self::Answer>, EmbedError>>;
}

type Reply<A> = oneshot::Sender<Result<Vec<A>, Arc<EmbedError>>>;

struct Job<A> {
    texts: Vec<String>,
    reply: Reply<A>,
}

/// Gathers concurrent callers' texts into batches for one [`BatchWork`]; its task ends when
/// the batcher is dropped.
pub struct Batcher<A> {
    max_batch: usize,
    sender: mpsc::Sender<Job<A>>,
}

impl<A: Clone + Send + 'static> Batcher<A> {
    /// Spawns the batching task on the current runtime.
    pub fn new<W: BatchWork<Answer = A>>(
        work: Arc<W>,
        max_batch: usize,
        linger: Duration,
    ) -> Batcher<A> {
        let max_batch = max_batch.max(1);
        // Bounded: callers wait (backpressure) rather than queueing without limit.
        let (sender, receiver) = mpsc::channel(max_batch * 4);
        tokio::spawn(run(work, receiver, max_batch, linger));
        Batcher { max_batch, sender }
    }

    /// The answer for each of `texts`, in order, read in batches with other callers' texts.
    pub async fn read(&self, texts: &[String]) -> Result<Vec<A>, EmbedError> {
        // Queue every chunk before awaiting any, so they can share the batch task's next call
        // with other callers' texts.
        let mut replies = Vec::new();
        for chunk in texts.chunks(self.max_batch) {
            let (reply, receive) = oneshot::channel();
            self.sender
                .send(Job {
                    texts: chunk.to_vec(),
                    reply,
                })
                .await
                .map_err(|_| EmbedError::Model("batcher stopped".into()))?;
            replies.push(receive);
        }
        let mut answers = Vec::with_capacity(texts.len());
        for receive in replies {
            let answer = receive
                .await
                .map_err(|_| EmbedError::Model("batcher dropped a request".into()))?;
            answers.extend(answer.map_err(|error| error.as_ref().clone())?);
        }
        Ok(answers)
    }
}

async fn run<W: BatchWork>(
    work: Arc<W>,
    mut receiver: mpsc::Receiver<Job<W::Answer>>,
    max_batch: usize,
    linger: Duration,
) {
    // A job that would have overflowed the previous batch starts the next one.
    let mut carried: Option<Job<W::Answer>> = None;
    loop {
        let first = match carried.take() {
            Some(job) => job,
            None => match receiver.recv().await {
                Some(job) => job,
                None => return,
            },
        };
        let mut size = first.texts.len();
        let mut jobs = vec![first];
        let deadline = tokio::time::Instant::now() + linger;
        while size < max_batch {
            // Whatever queued while the model was busy, then (only if configured) stragglers.
            let next = match receiver.try_recv() {
                Ok(job) => Some(job),
                Err(_) if linger.is_zero() => None,
                Err(_) => tokio::time::timeout_at(deadline, receiver.recv())
                    .await
                    .ok()
                    .flatten(),
            };
            let Some(job) = next else { break };
            if size + job.texts.len() > max_batch {
                carried = Some(job);
                break;
            }
            size += job.texts.len();
            jobs.push(job);
        }
        read_jobs(work.as_ref(), jobs).await;
    }
}

/// Reads the jobs' texts in one call (each distinct text once: concurrent callers often ask
/// for the same topic) and answers every job with its own answers, in its own order.
async fn read_jobs<W: BatchWork>(work: &W, jobs: Vec<Job<W::Answer>>) {
    let mut texts: Vec<String> = Vec::new();
    let slots: Vec<Vec<usize>> = jobs
        .iter()
        .map(|job| {
            job.texts
                .iter()
                .map(|text| match texts.iter().position(|t| t == text) {
                    Some(at) => at,
                    None => {
                        texts.push(text.clone());
                        texts.len() - 1
                    }
                })
                .collect()
        })
        .collect();
    let outcome = match work.read(&texts).await {
        Ok(answers) if answers.len() == texts.len() => Ok(answers),
        Ok(answers) => Err(Arc::new(EmbedError::Model(format!(
            "{} answers for {} texts",
            answers.len(),
            texts.len()
        )))),
        Err(error) => Err(Arc::new(error)),
    };
    for (job, slots) in jobs.into_iter().zip(slots) {
        let answer = match &outcome {
            Ok(answers) => Ok(slots.iter().map(|&at| answers[at].clone()).collect()),
            Err(error) => Err(error.clone()),
        };
        // The caller may have gone (its event was cancelled): nothing to answer.
        let _ = job.reply.send(answer);
    }
}

/// An embedder whose calls are gathered into batches across concurrent callers.
pub struct BatchingEmbedder {
    dims: usize,
    batcher: Batcher<Vec<f32>>,
}

/// An embedder as batch work: its vectors are the answers.
struct Embedding(Arc<dyn Embedder>);

impl BatchWork for Embedding {
    type Answer = Vec<f32>;

    fn read<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        self.0.embed(texts)
    }
}

impl BatchingEmbedder {
    /// Spawns the batching task on the current runtime; it ends when the embedder is dropped.
    pub fn new(inner: Arc<dyn Embedder>, max_batch: usize, linger: Duration) -> BatchingEmbedder {
        BatchingEmbedder {
            dims: inner.dims(),
            batcher: Batcher::new(Arc::new(Embedding(inner)), max_batch, linger),
        }
    }
}

impl Embedder for BatchingEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(self.batcher.read(texts))
    }
}

#[cfg(test)]
mod tests {
    //! The batch task against a recording embedder; time is tokio's paused clock, so "without
    //! waiting" is exact, not a timing guess.

    use std::sync::Mutex;

    use tokio::sync::Semaphore;
    use tokio::time::Instant;

    use super::*;

    /// Records every call's texts and when it came; each call takes one permit of `gate`,
    /// so a test can hold the model busy while requests queue.
    struct Recording {
        calls: Mutex<Vec<(Vec<String>, Instant)>>,
        gate: Semaphore,
        fail: bool,
    }

    impl Recording {
        fn new(open: bool, fail: bool) -> Arc<Recording> {
            Arc::new(Recording {
                calls: Mutex::new(Vec::new()),
                gate: Semaphore::new(if open { 1_000 } else { 0 }),
                fail,
            })
        }

        fn batches(&self) -> Vec<Vec<String>> {
            let calls = self.calls.lock().unwrap();
            calls.iter().map(|(texts, _)| texts.clone()).collect()
        }
    }

    /// A vector that says which text it is for.
    fn vector_of(text: &str) -> Vec<f32> {
        vec![text.len() as f32, f32::from(text.as_bytes()[0])]
    }

    impl Embedder for Recording {
        fn dims(&self) -> usize {
            2
        }

        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            Box::pin(async move {
                self.calls
                    .lock()
                    .unwrap()
                    .push((texts.to_vec(), Instant::now()));
                self.gate.acquire().await.unwrap().forget();
                if self.fail {
                    return Err(EmbedError::Unavailable("model down".into()));
                }
                Ok(texts.iter().map(|text| vector_of(text)).collect())
            })
        }
    }

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|text| text.to_string()).collect()
    }

    /// A caller embedding `texts` through `batcher`, awaited later.
    fn ask(
        batcher: &Arc<BatchingEmbedder>,
        texts: &'static [&'static str],
    ) -> tokio::task::JoinHandle<Result<Vec<Vec<f32>>, EmbedError>> {
        let batcher = batcher.clone();
        tokio::spawn(async move { batcher.embed(&strings(texts)).await })
    }

    /// Lets every spawned task run to its next wait (the paused clock only moves when all are
    /// idle).
    async fn settle() {
        tokio::time::sleep(Duration::from_micros(1)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_request_goes_to_the_model_without_waiting() {
        let model = Recording::new(true, false);
        let batcher = BatchingEmbedder::new(model.clone(), 32, Duration::ZERO);
        let asked = Instant::now();
        let vectors = batcher.embed(&strings(&["tea"])).await.unwrap();
        assert_eq!(vectors, vec![vector_of("tea")]);
        let calls = model.calls.lock().unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].1 - asked, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_configured_linger_waits_for_stragglers() {
        let model = Recording::new(true, false);
        let batcher = Arc::new(BatchingEmbedder::new(
            model.clone(),
            32,
            Duration::from_millis(5),
        ));
        let asked = Instant::now();
        let first = tokio::spawn({
            let batcher = batcher.clone();
            async move { batcher.embed(&strings(&["tea"])).await }
        });
        tokio::time::sleep(Duration::from_millis(3)).await;
        let second = batcher.embed(&strings(&["jazz"])).await.unwrap();
        assert_eq!(second, vec![vector_of("jazz")]);
        assert_eq!(first.await.unwrap().unwrap(), vec![vector_of("tea")]);
        assert_eq!(model.batches(), vec![strings(&["tea", "jazz"])]);
        let calls = model.calls.lock().unwrap();
        assert_eq!(calls[0].1 - asked, Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn requests_queued_while_the_model_is_busy_form_one_batch_with_each_text_once() {
        let model = Recording::new(false, false);
        let batcher = Arc::new(BatchingEmbedder::new(model.clone(), 32, Duration::ZERO));
        let busy = ask(&batcher, &["tea"]);
        settle().await;
        let callers = [
            ask(&batcher, &["jazz"]),
            ask(&batcher, &["rain", "fog"]),
            ask(&batcher, &["jazz"]),
        ];
        settle().await;
        model.gate.add_permits(2);
        assert_eq!(busy.await.unwrap().unwrap(), vec![vector_of("tea")]);
        let [jazz, weather, jazz_again] = callers;
        assert_eq!(jazz.await.unwrap().unwrap(), vec![vector_of("jazz")]);
        assert_eq!(
            weather.await.unwrap().unwrap(),
            vec![vector_of("rain"), vector_of("fog")]
        );
        assert_eq!(jazz_again.await.unwrap().unwrap(), vec![vector_of("jazz")]);
        assert_eq!(
            model.batches(),
            vec![strings(&["tea"]), strings(&["jazz", "rain", "fog"])]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_past_max_batch_is_split_and_answered_in_order() {
        let model = Recording::new(true, false);
        let batcher = BatchingEmbedder::new(model.clone(), 2, Duration::ZERO);
        let texts = strings(&["a", "bb", "ccc", "dddd", "eeeee"]);
        let vectors = batcher.embed(&texts).await.unwrap();
        let expected: Vec<Vec<f32>> = texts.iter().map(|text| vector_of(text)).collect();
        assert_eq!(vectors, expected);
        assert!(model.batches().iter().all(|batch| batch.len() <= 2));
        assert_eq!(model.batches().concat(), texts);
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_that_would_overflow_the_batch_starts_the_next_one_whole() {
        let model = Recording::new(false, false);
        let batcher = Arc::new(BatchingEmbedder::new(model.clone(), 3, Duration::ZERO));
        let busy = ask(&batcher, &["tea"]);
        settle().await;
        let first = ask(&batcher, &["b", "c"]);
        settle().await;
        let second = ask(&batcher, &["d", "e"]);
        settle().await;
        model.gate.add_permits(3);
        busy.await.unwrap().unwrap();
        first.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
        assert_eq!(
            model.batches(),
            vec![
                strings(&["tea"]),
                strings(&["b", "c"]),
                strings(&["d", "e"])
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_embedding_error_reaches_every_caller_in_the_batch() {
        let model = Recording::new(false, true);
        let batcher = Arc::new(BatchingEmbedder::new(model.clone(), 32, Duration::ZERO));
        let busy = ask(&batcher, &["tea"]);
        settle().await;
        let callers = [ask(&batcher, &["jazz"]), ask(&batcher, &["rain"])];
        settle().await;
        model.gate.add_permits(2);
        for caller in [busy].into_iter().chain(callers) {
            let error = caller.await.unwrap().unwrap_err();
            assert!(matches!(error, EmbedError::Unavailable(_)), "{error:?}");
        }
        assert_eq!(model.batches().len(), 2);
    }
}
