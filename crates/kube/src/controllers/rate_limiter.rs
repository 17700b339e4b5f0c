//! How long a controller waits before it retries a key that failed (upstream: client-go's
//! `workqueue.DefaultTypedControllerRateLimiter`, which the controllers of
//! kube-controller-manager give their rate-limited work queues). Two limits, the longer of
//! which wins: each key backs off on its own, 5 ms doubling with every failure up to 1000 s,
//! until it is forgotten after a success; and all retries together draw from one token bucket of
//! 10 a second with a burst of 100. It only computes delays: the queue that waits them out is
//! the controller's.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// The first retry's delay (`ItemExponentialFailureRateLimiter`'s base).
const BASE_DELAY: Duration = Duration::from_millis(5);
/// The longest a key's backoff grows.
const MAX_DELAY: Duration = Duration::from_secs(1000);
/// Retries a second, over all keys (`BucketRateLimiter`'s rate).
const QPS: f64 = 10.0;
/// Retries that may go at once before the rate applies.
const BURST: f64 = 100.0;

/// `DefaultTypedControllerRateLimiter`: per-key exponential backoff and an overall token
/// bucket, the larger delay of the two.
pub struct ControllerRateLimiter<K> {
    /// Failures since each key was last forgotten.
    failures: HashMap<K, u32>,
    /// Tokens left in the bucket as of `last`; negative when retries are already booked ahead.
    tokens: f64,
    /// When the bucket was last drawn from; `None` before the first retry (the bucket is full).
    last: Option<Instant>,
}

impl<K: Hash + Eq + Clone> Default for ControllerRateLimiter<K> {
    fn default() -> Self {
        ControllerRateLimiter {
            failures: HashMap::new(),
            tokens: BURST,
            last: None,
        }
    }
}

impl<K: Hash + Eq + Clone> ControllerRateLimiter<K> {
    /// `When`: how long `key`, which just failed, waits before its retry; counts the failure
    /// and takes a token from the bucket, as both of upstream's limiters do on every call.
    pub fn when(&mut self, key: &K) -> Duration {
        self.when_at(key, Instant::now())
    }

    fn when_at(&mut self, key: &K, now: Instant) -> Duration {
        let item = self.item_delay(key);
        let bucket = self.bucket_delay(now);
        item.max(bucket)
    }

    /// `Forget`: `key` succeeded, its next failure starts again at the base delay. The bucket
    /// is not refilled by it.
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    /// `ItemExponentialFailureRateLimiter.When`: the base doubled once per earlier failure,
    /// capped (the doubling is computed in floating point so that it cannot overflow).
    fn item_delay(&mut self, key: &K) -> Duration {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let exp = *failures;
        *failures = failures.saturating_add(1);
        let backoff = BASE_DELAY.as_nanos() as f64 * 2f64.powi(exp.min(i32::MAX as u32) as i32);
        if backoff > MAX_DELAY.as_nanos() as f64 {
            MAX_DELAY
        } else {
            Duration::from_nanos(backoff as u64)
        }
    }

    /// `BucketRateLimiter.When` (x/time/rate's `Reserve().Delay()`): the bucket refills at
    /// `QPS` up to `BURST`, one token is taken, and a bucket in debt makes the taker wait
    /// until the debt is paid.
    fn bucket_delay(&mut self, now: Instant) -> Duration {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * QPS).min(BURST);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        if self.tokens < 0.0 {
            // As Go's `time.Duration(float64(time.Second) * seconds)`: whole nanoseconds.
            Duration::from_nanos((1e9 * (-self.tokens / QPS)) as u64)
        } else {
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_backs_off_exponentially_until_it_is_forgotten() {
        let mut limiter = ControllerRateLimiter::default();
        let now = Instant::now();
        let delays: Vec<Duration> = (0..4).map(|_| limiter.when_at(&"a", now)).collect();
        assert_eq!(delays, [5, 10, 20, 40].map(Duration::from_millis).to_vec());
        assert_eq!(limiter.failures.get(&"a"), Some(&4));
        // Another key has its own count.
        assert_eq!(limiter.when_at(&"b", now), Duration::from_millis(5));
        limiter.forget(&"a");
        assert_eq!(limiter.failures.get(&"a"), None);
        assert_eq!(limiter.when_at(&"a", now), Duration::from_millis(5));
    }

    #[test]
    fn a_key_backs_off_at_most_1000_seconds() {
        let mut limiter = ControllerRateLimiter::default();
        let mut now = Instant::now();
        let mut last = Duration::ZERO;
        for _ in 0..80 {
            // Far enough apart that the bucket is full each time.
            now += Duration::from_secs(100);
            last = limiter.when_at(&"a", now);
        }
        assert_eq!(last, MAX_DELAY);
        // 5 ms * 2^17 is the last delay below the cap.
        let mut limiter = ControllerRateLimiter::default();
        let delays: Vec<Duration> = (0..19)
            .map(|i| limiter.when_at(&"a", now + Duration::from_secs(100 * (i + 1))))
            .collect();
        assert_eq!(delays[17], Duration::from_millis(5 << 17));
        assert_eq!(delays[18], MAX_DELAY);
    }

    #[test]
    fn all_keys_share_a_bucket_of_100_refilled_at_10_a_second() {
        let mut limiter = ControllerRateLimiter::default();
        let now = Instant::now();
        // A hundred first failures of different keys go after the base delay...
        for i in 0..100 {
            assert_eq!(limiter.when_at(&i, now), BASE_DELAY, "key {i}");
        }
        // ... and the ones after them wait for the bucket, a tenth of a second each.
        assert_eq!(limiter.when_at(&100, now), Duration::from_millis(100));
        assert_eq!(limiter.when_at(&101, now), Duration::from_millis(200));
        // A second later ten tokens are back; two of them pay the debt.
        let later = now + Duration::from_secs(1);
        for i in 102..110 {
            assert_eq!(limiter.when_at(&i, later), BASE_DELAY, "key {i}");
        }
        assert_eq!(limiter.when_at(&110, later), Duration::from_millis(100));
    }
}
