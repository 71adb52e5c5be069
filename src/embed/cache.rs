//! A cache of recent embeddings by exact text. Topics repeat far more than they change: every
//! reinforcement embeds a topic the persona has voiced before ("green tea"), and a remote
//! embedder charges for each call. Texts seen recently are answered from memory; the rest go
//! to the inner embedder in one call.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use lru::LruCache;

use super::{EmbedError, Embedder};

pub struct CachingEmbedder {
    inner: Arc<dyn Embedder>,
    cache: Mutex<LruCache<String, Arc<Vec<f32>>>>,
}

impl CachingEmbedder {
    pub fn new(inner: Arc<dyn Embedder>, capacity: NonZeroUsize) -> CachingEmbedder {
        CachingEmbedder {
            inner,
            cache: Mutex::new(LruCache::new(capacity)),
        }
    }

    async fn embed_cached(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut found: Vec<Option<Arc<Vec<f32>>>> = {
            let mut cache = self.cache.lock().expect("embedding cache lock");
            texts.iter().map(|text| cache.get(text).cloned()).collect()
        };
        // Each missing text once, however often it repeats in this call.
        let mut missing: Vec<String> = Vec::new();
        for (text, hit) in texts.iter().zip(&found) {
            if hit.is_none() && !missing.contains(text) {
                missing.push(text.clone());
            }
        }
        if !missing.is_empty() {
            let vectors = self.inner.embed(&missing).await?;
            if vectors.len() != missing.len() {
                return Err(EmbedError::Model(format!(
                    "{} vectors for {} texts",
                    vectors.len(),
                    missing.len()
                )));
            }
            let vectors: Vec<Arc<Vec<f32>>> = vectors.into_iter().map(Arc::new).collect();
            let mut cache = self.cache.lock().expect("embedding cache lock");
            for (text, vector) in missing.iter().zip(&vectors) {
                cache.put(text.clone(), vector.clone());
            }
            for (text, slot) in texts.iter().zip(found.iter_mut()) {
                if slot.is_none() {
                    let at = missing.iter().position(|m| m == text).expect("listed");
                    *slot = Some(vectors[at].clone());
                }
            }
        }
        Ok(found
            .into_iter()
            .map(|vector| vector.expect("filled").as_ref().clone())
            .collect())
    }
}

impl Embedder for CachingEmbedder {
    fn dims(&self) -> usize {
        self.inner.dims()
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(self.embed_cached(texts))
    }
}
