//! A per-persona lock across processes, with fencing.
//!
//! The ingest decide-and-write step (find_conflicts, then reinforce/evolve/add) must not run
//! twice at once for one persona, or two workers each see "no match" and add twins. The lock is
//! a Redis key holding a token from a monotonic counter, set with NX and an expiry so a crashed
//! holder cannot block the persona forever. Fencing: every guarded write checks, inside the
//! same Lua script, that the lock key still holds the caller's token, so a holder that paused
//! past its expiry cannot write after a newer holder took over.

use std::time::{Duration, Instant};

use redis::Script;

use super::{PreferenceStore, StoreError, validate};

/// Proof of holding a persona's lock; pass it in a `WriteGuard` to fence writes.
#[derive(Debug, Clone)]
pub struct LockToken {
    persona_id: String,
    key: String,
    token: String,
    /// How long the lock lives unless renewed.
    ttl: Duration,
}

impl LockToken {
    pub fn persona_id(&self) -> &str {
        &self.persona_id
    }
    pub fn token(&self) -> &str {
        &self.token
    }

    /// For work that can outlast the lock (an erasure over a large persona, an event with
    /// hundreds of opinions): renews the lock when a third of its lifetime has passed since
    /// `renewed` (at once when `None`). Fenced when the lock was lost meanwhile.
    pub async fn keep_alive(
        &self,
        store: &PreferenceStore,
        renewed: &mut Option<Instant>,
    ) -> Result<(), StoreError> {
        if renewed.is_some_and(|at| at.elapsed() < self.ttl / 3) {
            return Ok(());
        }
        if !self.renew(store).await? {
            return Err(StoreError::Fenced {
                persona_id: self.persona_id.clone(),
            });
        }
        *renewed = Some(Instant::now());
        Ok(())
    }

    /// Pushes the expiry out by the lock's time to live again; false when the lock was lost.
    pub async fn renew(&self, store: &PreferenceStore) -> Result<bool, StoreError> {
        let mut connection = store.connection();
        let extended: i64 = EXTEND
            .key(&self.key)
            .arg(&self.token)
            .arg(self.ttl.as_millis() as u64)
            .invoke_async(&mut connection)
            .await?;
        Ok(extended == 1)
    }
}

/// Acquires and releases persona locks over the store's connection.
#[derive(Clone)]
pub struct PersonaLock {
    store: PreferenceStore,
    ttl: Duration,
    retry_every: Duration,
}

/// Mints the next fencing token and takes the lock with it if free; nil when held. The token
/// is the counter plus the server time, so it stays unique even if the counter is deleted
/// (with the persona): a stalled holder can never match a later holder's token.
static ACQUIRE: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/lock_acquire.lua")));

static RELEASE: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/lock_release.lua")));

static EXTEND: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/lock_extend.lua")));

impl PersonaLock {
    pub fn new(store: PreferenceStore, ttl: Duration) -> PersonaLock {
        PersonaLock {
            store,
            ttl,
            retry_every: Duration::from_millis(5),
        }
    }

    /// Tries once; `None` when another holder has it.
    pub async fn try_acquire(&self, persona_id: &str) -> Result<Option<LockToken>, StoreError> {
        validate::persona_id(persona_id)?;
        let key = self.store.lock_key(persona_id);
        let mut connection = self.store.connection();
        // One round trip: every event takes this lock, so the attempt is a single script.
        let set: Option<String> = ACQUIRE
            .key(&key)
            .key(self.store.keys().fence(persona_id))
            .arg(self.ttl.as_millis() as u64)
            .invoke_async(&mut connection)
            .await?;
        Ok(set.map(|token| LockToken {
            persona_id: persona_id.to_string(),
            key,
            token,
            ttl: self.ttl,
        }))
    }

    /// Waits (polling with a growing pause, at most `patience`) until the lock is free.
    /// `None` when `patience` ran out: the caller should retry the whole message later.
    pub async fn acquire(
        &self,
        persona_id: &str,
        patience: Duration,
    ) -> Result<Option<LockToken>, StoreError> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut pause = self.retry_every;
        loop {
            if let Some(token) = self.try_acquire(persona_id).await? {
                return Ok(Some(token));
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Waits for the lock as [`PersonaLock::acquire`] does and holds it in a guard: released
    /// by [`HeldLock::release`], or when the guard is dropped unreleased (work cancelled by a
    /// shutdown, a panic), so a holder that stops early does not keep the persona locked for
    /// the lock's whole lifetime.
    pub async fn hold(
        &self,
        persona_id: &str,
        patience: Duration,
    ) -> Result<Option<HeldLock>, StoreError> {
        Ok(self
            .acquire(persona_id, patience)
            .await?
            .map(|token| HeldLock {
                token: Some(token),
                locks: self.clone(),
            }))
    }

    /// Releases the lock if still held by `token` (never someone else's).
    pub async fn release(&self, token: LockToken) -> Result<(), StoreError> {
        let mut connection = self.store.connection();
        let _: i64 = RELEASE
            .key(&token.key)
            .arg(&token.token)
            .invoke_async(&mut connection)
            .await?;
        Ok(())
    }
}

/// A persona lock held for a scope (see [`PersonaLock::hold`]). Derefs to its [`LockToken`],
/// which fences the writes made under it.
pub struct HeldLock {
    /// `None` once released.
    token: Option<LockToken>,
    locks: PersonaLock,
}

impl HeldLock {
    /// Releases the lock now. A failed release only delays the next holder by the lock's
    /// lifetime, so it is logged, not returned.
    pub async fn release(mut self) {
        if let Some(token) = self.token.take() {
            let persona_id = token.persona_id.clone();
            if let Err(error) = self.locks.release(token).await {
                tracing::warn!(%persona_id, %error, "releasing a persona lock failed");
            }
        }
    }
}

impl std::ops::Deref for HeldLock {
    type Target = LockToken;
    fn deref(&self) -> &LockToken {
        self.token
            .as_ref()
            .expect("a held lock has its token until released")
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        // Dropped unreleased (the holder's work was cancelled): release in the background.
        if let Some(token) = self.token.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let locks = self.locks.clone();
            runtime.spawn(async move {
                let _ = locks.release(token).await;
            });
        }
    }
}
