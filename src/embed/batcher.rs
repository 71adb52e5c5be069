//! Micro-batching: texts from concurrent callers are gathered (up to `max_batch`, waiting at
//! most `linger` after the first) and embedded in one call, so the local model runs at batch
//! throughput while each event still awaits only its own vectors.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::{EmbedError, Embedder};

struct Job {
    text: String,
    reply: oneshot::Sender<Result<Vec<f32>, Arc<EmbedError>>>,
}

pub struct BatchingEmbedder {
    dims: usize,
    sender: mpsc::Sender<Job>,
}

impl BatchingEmbedder {
    /// Spawns the batching task on the current runtime; it ends when the embedder is dropped.
    pub fn new(inner: Arc<dyn Embedder>, max_batch: usize, linger: Duration) -> BatchingEmbedder {
        let dims = inner.dims();
        // Bounded: callers wait (backpressure) rather than queueing without limit.
        let (sender, receiver) = mpsc::channel(max_batch * 4);
        tokio::spawn(run(inner, receiver, max_batch, linger));
        BatchingEmbedder { dims, sender }
    }
}

async fn run(
    inner: Arc<dyn Embedder>,
    mut receiver: mpsc::Receiver<Job>,
    max_batch: usize,
    linger: Duration,
) {
    while let Some(first) = receiver.recv().await {
        let mut jobs = vec![first];
        let deadline = tokio::time::Instant::now() + linger;
        while jobs.len() < max_batch {
            // Take whatever is already queued without waiting, then linger for stragglers.
            match receiver.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => match tokio::time::timeout_at(deadline, receiver.recv()).await {
                    Ok(Some(job)) => jobs.push(job),
                    _ => break,
                },
            }
        }
        // Concurrent callers often ask for the same topic: embed each text once per batch.
        let mut texts: Vec<String> = Vec::with_capacity(jobs.len());
        let slots: Vec<usize> = jobs
            .iter()
            .map(|job| match texts.iter().position(|t| *t == job.text) {
                Some(at) => at,
                None => {
                    texts.push(job.text.clone());
                    texts.len() - 1
                }
            })
            .collect();
        match inner.embed(&texts).await {
            Ok(vectors) if vectors.len() == texts.len() => {
                for (job, slot) in jobs.into_iter().zip(slots) {
                    let _ = job.reply.send(Ok(vectors[slot].clone()));
                }
            }
            Ok(vectors) => {
                let error = Arc::new(EmbedError::Model(format!(
                    "{} vectors for {} texts",
                    vectors.len(),
                    texts.len()
                )));
                for job in jobs {
                    let _ = job.reply.send(Err(error.clone()));
                }
            }
            Err(error) => {
                let error = Arc::new(error);
                for job in jobs {
                    let _ = job.reply.send(Err(error.clone()));
                }
            }
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
        Box::pin(async move {
            let mut replies = Vec::with_capacity(texts.len());
            for text in texts {
                let (reply, receive) = oneshot::channel();
                self.sender
                    .send(Job {
                        text: text.clone(),
                        reply,
                    })
                    .await
                    .map_err(|_| EmbedError::Model("embedding batcher stopped".into()))?;
                replies.push(receive);
            }
            let mut vectors = Vec::with_capacity(texts.len());
            for receive in replies {
                let vector = receive
                    .await
                    .map_err(|_| EmbedError::Model("embedding batcher dropped a request".into()))?;
                vectors.push(vector.map_err(|error| error.as_ref().clone())?);
            }
            Ok(vectors)
        })
    }
}
