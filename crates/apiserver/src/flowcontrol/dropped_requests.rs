//! The `Retry-After` of flow control's 429s (upstream's `droppedRequestsTracker` in
//! k8s.io/apiserver/pkg/util/flowcontrol/dropped_requests_tracker.go): per priority level, it
//! starts at 1 s, doubles (to at most 32 s) when the level dropped at least three times as many
//! requests per second as it asks clients to wait, no sooner than one period after the last
//! increase, and falls back by one second at a time when the level drops fewer than that.
//!
//! It is only reconsidered when a drop arrives in a new second, from the seconds before it, as
//! upstream's does.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, RwLock};

const MAX_RETRY_AFTER: i64 = 32;

#[derive(Default)]
struct Level {
    /// Drops per second, oldest first: (unix second, count), the current second last.
    history: VecDeque<(i64, i64)>,
    retry_after: i64,
    last_increase: i64,
}

#[derive(Default)]
pub struct DroppedRequests {
    levels: RwLock<HashMap<String, Mutex<Level>>>,
}

impl Level {
    fn new() -> Self {
        Self {
            history: VecDeque::new(),
            retry_after: 1,
            last_increase: 0,
        }
    }

    fn record(&mut self, now: i64) {
        match self.history.back_mut() {
            Some((second, count)) if *second == now => {
                *count += 1;
                return;
            }
            _ => {}
        }
        // Older seconds than twice the period (or than the longest period) are never read.
        let keep = (2 * self.retry_after).min(MAX_RETRY_AFTER);
        while self
            .history
            .front()
            .is_some_and(|(second, _)| now - second > keep)
        {
            self.history.pop_front();
        }
        self.reconsider(now);
        self.history.push_back((now, 1));
    }

    /// The drops of the last `retry_after` seconds before `now` decide.
    fn reconsider(&mut self, now: i64) {
        let dropped: i64 = self
            .history
            .iter()
            .rev()
            .take_while(|(second, _)| now - second <= self.retry_after)
            .filter(|(second, _)| *second < now)
            .map(|(_, count)| count)
            .sum();
        if now - self.last_increase >= self.retry_after && dropped >= 3 * self.retry_after {
            self.retry_after = (self.retry_after * 2).min(MAX_RETRY_AFTER);
            self.last_increase = now;
        } else if dropped < self.retry_after && self.retry_after > 1 {
            self.retry_after -= 1;
        }
    }
}

impl DroppedRequests {
    /// Notes a request of `level` dropped at `now` (unix seconds) and answers the `Retry-After`
    /// to send with it.
    pub fn record(&self, level: &str, now: i64) -> i64 {
        {
            let levels = self.levels.read().unwrap_or_else(|p| p.into_inner());
            if let Some(l) = levels.get(level) {
                let mut l = l.lock().unwrap_or_else(|p| p.into_inner());
                l.record(now);
                return l.retry_after;
            }
        }
        let mut levels = self.levels.write().unwrap_or_else(|p| p.into_inner());
        let l = levels
            .entry(level.to_string())
            .or_insert_with(|| Mutex::new(Level::new()))
            .get_mut()
            .unwrap_or_else(|p| p.into_inner());
        l.record(now);
        l.retry_after
    }

    /// The `Retry-After` of `level` now.
    pub fn retry_after(&self, level: &str) -> i64 {
        let levels = self.levels.read().unwrap_or_else(|p| p.into_inner());
        levels.get(level).map_or(1, |l| {
            l.lock().unwrap_or_else(|p| p.into_inner()).retry_after
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_doubles_under_drops_and_falls_back_slowly() {
        let d = DroppedRequests::default();
        let flood = |second: i64, n: usize| {
            let mut last = 0;
            for _ in 0..n {
                last = d.record("pl", second);
            }
            last
        };
        // A second's drops are judged when the next second's first drop arrives.
        assert_eq!(flood(1000, 3), 1);
        // 3 drops in the last 1 s ≥ 3 × 1: doubled.
        assert_eq!(flood(1001, 1), 2);
        // Too soon after the increase to double again (2 s must pass).
        assert_eq!(flood(1002, 10), 2);
        // 11 drops in the last 2 s ≥ 3 × 2: doubled to 4.
        assert_eq!(flood(1003, 20), 4);
        assert_eq!(flood(1007, 30), 8);
        // Each period with at least three drops per second of it doubles it again.
        assert_eq!(flood(1015, 60), 16);
        assert_eq!(flood(1031, 200), 32);
        // Never more than 32.
        assert_eq!(flood(1063, 200), 32);
        assert_eq!(flood(1095, 1), 32);
        // Quiet: each new second with fewer drops than the period takes a second off.
        assert_eq!(flood(1096, 1), 31);
        assert_eq!(flood(1097, 1), 30);
        // Levels are separate; an unknown one says 1.
        assert_eq!(d.retry_after("other"), 1);
        assert_eq!(d.retry_after("pl"), 30);
    }
}
