//! Counting call attempts in a sliding window, in bounded memory.
//!
//! To tell whether more than `max` calls fell within the window, the last `max + 1` timestamps
//! are enough: a ring of at most that many, pruned by age.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Timestamps of the most recent call attempts, oldest first.
#[derive(Debug, Default)]
pub(super) struct CallWindow {
    times: VecDeque<Instant>,
}

impl CallWindow {
    /// Records an attempt at `now` and returns how many attempts, this one included, are at
    /// most `window` old, counting no further than `max + 1`.
    pub fn record(&mut self, now: Instant, window: Duration, max: usize) -> usize {
        self.times.push_back(now);
        while self
            .times
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) > window)
        {
            self.times.pop_front();
        }
        let keep = max.saturating_add(1);
        if self.times.len() > keep {
            self.times.drain(..self.times.len() - keep);
        }
        self.times.len()
    }

    /// What [`Self::record`] would return for an attempt at `now`, recording nothing.
    pub fn count_with(&self, now: Instant, window: Duration, max: usize) -> usize {
        let within = self
            .times
            .iter()
            .rev()
            .take_while(|&&t| now.saturating_duration_since(t) <= window)
            .count();
        within.saturating_add(1).min(max.saturating_add(1))
    }

    /// The most recent attempt recorded.
    pub fn latest(&self) -> Option<Instant> {
        self.times.back().copied()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.times.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    #[test]
    fn counts_attempts_within_the_window_inclusive() {
        let t0 = Instant::now();
        let mut calls = CallWindow::default();
        assert_eq!(calls.record(t0, WINDOW, 5), 1);
        assert_eq!(calls.record(t0 + Duration::from_secs(4), WINDOW, 5), 2);
        // Exactly `window` old still counts...
        assert_eq!(calls.record(t0 + WINDOW, WINDOW, 5), 3);
        // ...one nanosecond more does not.
        let later = t0 + WINDOW + Duration::from_nanos(1);
        assert_eq!(calls.record(later, WINDOW, 5), 3);
    }

    #[test]
    fn memory_is_bounded_by_max_plus_one() {
        let t0 = Instant::now();
        let mut calls = CallWindow::default();
        for i in 0..1000 {
            let n = calls.record(t0 + Duration::from_millis(i), WINDOW, 7);
            assert_eq!(n, (i as usize + 1).min(8));
            assert!(calls.len() <= 8);
        }
        // A smaller limit (a reload) shrinks the ring on the next attempt.
        assert_eq!(calls.record(t0 + Duration::from_secs(1), WINDOW, 2), 3);
        assert_eq!(calls.len(), 3);
        assert_eq!(calls.record(t0, WINDOW, 0), 1);
    }

    #[test]
    fn an_earlier_instant_is_counted_not_pruned() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(100);
        let mut calls = CallWindow::default();
        calls.record(t1, WINDOW, 5);
        assert_eq!(calls.record(t0, WINDOW, 5), 2);
    }
}
