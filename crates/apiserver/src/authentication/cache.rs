//! The token cache of upstream's token authenticators (k8s.io/apiserver/pkg/authentication/
//! token/cache): a token's answer kept for a while so that a client sending the same token on
//! every request does not pay an issuer's signature check or a webhook call each time.
//!
//! Entries are keyed by the token's SHA-256 (the cache never holds a token itself); an answer
//! that recognised the user lives `success_ttl`, any other answer `failure_ttl` (zero: not
//! kept). Concurrent requests with the same token each compute the answer (upstream folds them
//! with singleflight; the cost here is a duplicate check, not a wrong answer). The map is bounded:
//! past [`MAX_ENTRIES`] expired entries are dropped, and if none are, the whole map is.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{AuthnError, UserInfo, sha256};

/// How many tokens the cache remembers at most.
pub const MAX_ENTRIES: usize = 4096;

/// A remembered answer: the user, no opinion, or the failure's text.
type Answer = Result<Option<UserInfo>, String>;

pub struct TokenCache {
    success_ttl: Duration,
    failure_ttl: Duration,
    entries: Mutex<HashMap<[u8; 32], (Instant, Answer)>>,
}

impl TokenCache {
    pub fn new(success_ttl: Duration, failure_ttl: Duration) -> Self {
        TokenCache {
            success_ttl,
            failure_ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The remembered answer for `token`, or the one `compute` gives, remembered.
    pub async fn get_or_insert_with<F, Fut>(
        &self,
        token: &[u8],
        compute: F,
    ) -> Result<Option<UserInfo>, AuthnError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<UserInfo>, AuthnError>>,
    {
        let key = sha256(token);
        if let Some(answer) = self.lookup(&key) {
            return answer.map_err(AuthnError::Cached);
        }
        let answer = compute().await;
        let ttl = match &answer {
            Ok(Some(_)) => self.success_ttl,
            _ => self.failure_ttl,
        };
        if !ttl.is_zero() {
            let kept = match &answer {
                Ok(user) => Ok(user.clone()),
                Err(e) => Err(e.to_string()),
            };
            self.insert(key, Instant::now() + ttl, kept);
        }
        answer
    }

    fn lookup(&self, key: &[u8; 32]) -> Option<Answer> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (expires, answer) = entries.get(key)?;
        (Instant::now() < *expires).then(|| answer.clone())
    }

    fn insert(&self, key: [u8; 32], expires: Instant, answer: Answer) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            let now = Instant::now();
            entries.retain(|_, (t, _)| *t > now);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (expires, answer));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn user() -> UserInfo {
        UserInfo {
            name: "ann".into(),
            ..UserInfo::default()
        }
    }

    #[tokio::test]
    async fn successes_are_kept_for_their_ttl_and_failures_per_their_own() {
        let calls = AtomicUsize::new(0);
        let cache = TokenCache::new(Duration::from_millis(200), Duration::ZERO);
        let ok = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(Some(user()))
        };
        for _ in 0..3 {
            assert_eq!(
                cache
                    .get_or_insert_with(b"t", ok)
                    .await
                    .unwrap()
                    .unwrap()
                    .name,
                "ann"
            );
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Another token is another entry.
        cache.get_or_insert_with(b"u", ok).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        tokio::time::sleep(Duration::from_millis(250)).await;
        cache.get_or_insert_with(b"t", ok).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // A zero failure TTL keeps no failure.
        let fails = AtomicUsize::new(0);
        let bad = || async {
            fails.fetch_add(1, Ordering::SeqCst);
            Err(AuthnError::InvalidToken("no".into()))
        };
        assert!(cache.get_or_insert_with(b"x", bad).await.is_err());
        assert!(cache.get_or_insert_with(b"x", bad).await.is_err());
        assert_eq!(fails.load(Ordering::SeqCst), 2);
        // A failure TTL keeps the failure's text.
        let cache = TokenCache::new(Duration::ZERO, Duration::from_secs(60));
        assert!(cache.get_or_insert_with(b"x", bad).await.is_err());
        let again = cache.get_or_insert_with(b"x", bad).await.unwrap_err();
        assert_eq!(fails.load(Ordering::SeqCst), 3);
        assert_eq!(again.to_string(), "invalid bearer token, no");
    }
}

/// Tokens whose signature was found good lately, by SHA-256: a token sent on every request pays
/// the signature check (tens of microseconds for ES256) once per `ttl`, while everything else
/// about it — expiry, the objects it is bound to — is still checked each time. Bounded as
/// [`TokenCache`] is.
pub struct VerifiedSignatures {
    ttl: Duration,
    entries: Mutex<HashMap<[u8; 32], Instant>>,
}

impl VerifiedSignatures {
    pub fn new(ttl: Duration) -> Self {
        VerifiedSignatures {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `token`'s signature is good: remembered, or `verify` says so (and then it is
    /// remembered).
    pub fn check(&self, token: &[u8], verify: impl FnOnce() -> bool) -> bool {
        let key = sha256(token);
        let now = Instant::now();
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if entries.get(&key).is_some_and(|until| now < *until) {
                return true;
            }
        }
        if !verify() {
            return false;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, until| *until > now);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, now + self.ttl);
        true
    }
}

#[cfg(test)]
mod verified_tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn good_signatures_are_remembered_bad_ones_never() {
        let cache = VerifiedSignatures::new(Duration::from_secs(60));
        let calls = Cell::new(0);
        let good = || {
            calls.set(calls.get() + 1);
            true
        };
        assert!(cache.check(b"a", good));
        assert!(cache.check(b"a", good));
        assert_eq!(calls.get(), 1);
        let bad = || {
            calls.set(calls.get() + 1);
            false
        };
        assert!(!cache.check(b"b", bad));
        assert!(!cache.check(b"b", bad));
        assert_eq!(calls.get(), 3);
    }
}
