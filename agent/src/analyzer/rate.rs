//! Token buckets for per-server rate limits.
//!
//! Arithmetic is exact: credit is counted in units of 1/60e9 of a token, so a bucket refilling
//! `rpm` tokens a minute gains exactly `rpm` units per elapsed nanosecond, with no rounding that
//! could drift over a long session.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::config::RateLimit;

/// Credit units in one token: nanoseconds in a minute.
const UNITS_PER_TOKEN: u128 = 60 * 1_000_000_000;

/// One token bucket: holds up to `burst` tokens, refills `rpm / 60` tokens a second, starts
/// full.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    limit: RateLimit,
    /// In units of `1 / UNITS_PER_TOKEN` tokens.
    credit: u128,
    /// When `credit` was last brought up to date.
    updated: Instant,
}

impl TokenBucket {
    pub fn new(limit: RateLimit, now: Instant) -> Self {
        Self {
            limit,
            credit: capacity(limit),
            updated: now,
        }
    }

    pub fn limit(&self) -> RateLimit {
        self.limit
    }

    /// Takes one token, or says how long until the next one. `Duration::MAX` means never
    /// (`rpm: 0` once empty, or `burst: 0`).
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        match self.credit.checked_sub(UNITS_PER_TOKEN) {
            Some(rest) => {
                self.credit = rest;
                Ok(())
            }
            None => Err(self.wait()),
        }
    }

    /// Whether a token could be taken at `now`, taking nothing: the verdict on a call that is
    /// only intended (a model asked for it) and will be counted when it executes.
    pub fn peek(&self, now: Instant) -> Result<(), Duration> {
        let mut current = self.clone();
        current.try_take(now)
    }

    /// This bucket under a new limit (a policy reload): the new capacity and rate, but never
    /// more tokens than are left now.
    fn relimited(&self, limit: RateLimit, now: Instant) -> Self {
        let mut current = self.clone();
        current.refill(now);
        Self {
            limit,
            credit: current.credit.min(capacity(limit)),
            updated: current.updated,
        }
    }

    fn refill(&mut self, now: Instant) {
        // An instant earlier than the last one (callers on several threads) adds nothing.
        let Some(elapsed) = now.checked_duration_since(self.updated) else {
            return;
        };
        let gained = elapsed
            .as_nanos()
            .saturating_mul(u128::from(self.limit.rpm));
        self.credit = self.credit.saturating_add(gained).min(capacity(self.limit));
        self.updated = now;
    }

    fn wait(&self) -> Duration {
        let rate = u128::from(self.limit.rpm);
        if rate == 0 || capacity(self.limit) < UNITS_PER_TOKEN {
            return Duration::MAX;
        }
        let missing = UNITS_PER_TOKEN.saturating_sub(self.credit);
        let nanos = missing.div_ceil(rate);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

fn capacity(limit: RateLimit) -> u128 {
    u128::from(limit.burst) * UNITS_PER_TOKEN
}

/// One token bucket per server id.
#[derive(Clone, Debug, Default)]
pub struct RateLimiter {
    buckets: HashMap<String, TokenBucket>,
}

impl RateLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a token from `server`'s bucket, creating it full on first use and rebuilding it
    /// when `limit` differs from the one it was made with.
    pub fn try_acquire(
        &mut self,
        server: &str,
        limit: RateLimit,
        now: Instant,
    ) -> Result<(), Duration> {
        if let Some(bucket) = self.buckets.get_mut(server) {
            if bucket.limit != limit {
                *bucket = bucket.relimited(limit, now);
            }
            return bucket.try_take(now);
        }
        let mut bucket = TokenBucket::new(limit, now);
        let taken = bucket.try_take(now);
        self.buckets.insert(server.to_owned(), bucket);
        taken
    }

    /// What [`Self::try_acquire`] would answer, taking nothing.
    pub fn check(&self, server: &str, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        match self.buckets.get(server) {
            Some(bucket) if bucket.limit == limit => bucket.peek(now),
            Some(bucket) => bucket.relimited(limit, now).peek(now),
            None => TokenBucket::new(limit, now).peek(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn limit(rpm: u32, burst: u32) -> RateLimit {
        RateLimit { rpm, burst }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn checking_takes_nothing() {
        let t0 = Instant::now();
        let mut limiter = RateLimiter::new();
        let one = limit(60, 1);
        for _ in 0..3 {
            assert_eq!(limiter.check("a", one, t0), Ok(()));
        }
        assert_eq!(limiter.try_acquire("a", one, t0), Ok(()));
        assert_eq!(limiter.check("a", one, t0), Err(secs(1)));
        assert_eq!(limiter.check("a", one, t0 + secs(1)), Ok(()));
        // A stricter limit after a reload is checked as the acquire would apply it.
        assert_eq!(limiter.check("b", limit(60, 0), t0), Err(Duration::MAX));
    }

    #[test]
    fn one_call_a_second() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(limit(60, 1), t0);
        assert_eq!(bucket.try_take(t0), Ok(()));
        assert_eq!(bucket.try_take(t0), Err(secs(1)));
        let almost = t0 + secs(1) - Duration::from_nanos(1);
        assert_eq!(bucket.try_take(almost), Err(Duration::from_nanos(1)));
        for n in 1..=1000 {
            assert_eq!(bucket.try_take(t0 + secs(n)), Ok(()), "second {n}");
            assert!(bucket.try_take(t0 + secs(n)).is_err(), "second {n}");
        }
    }

    #[test]
    fn burst_then_refill_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(limit(120, 3), t0);
        for _ in 0..3 {
            assert_eq!(bucket.try_take(t0), Ok(()));
        }
        // 120 rpm: a token every 500 ms.
        assert_eq!(bucket.try_take(t0), Err(Duration::from_millis(500)));
        let half = t0 + Duration::from_millis(500);
        assert_eq!(bucket.try_take(half), Ok(()));
        assert_eq!(bucket.try_take(half), Err(Duration::from_millis(500)));
        // A long pause refills to the burst, never beyond.
        let later = t0 + secs(3600);
        for _ in 0..3 {
            assert_eq!(bucket.try_take(later), Ok(()));
        }
        assert!(bucket.try_take(later).is_err());
    }

    #[test]
    fn rates_that_do_not_divide_a_second() {
        // 7 rpm: a token every 60/7 s = 8.571428571... s, rounded up to the nanosecond.
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(limit(7, 1), t0);
        assert_eq!(bucket.try_take(t0), Ok(()));
        let wait = bucket.try_take(t0).err().unwrap_or_default();
        assert_eq!(wait, Duration::from_nanos(8_571_428_572));
        assert!(
            bucket
                .try_take(t0 + wait - Duration::from_nanos(1))
                .is_err()
        );
        assert_eq!(bucket.try_take(t0 + wait), Ok(()));
        // Seven tokens in exactly one minute, not a nanosecond earlier: no drift.
        let mut bucket = TokenBucket::new(limit(7, 7), t0);
        for _ in 0..7 {
            assert_eq!(bucket.try_take(t0), Ok(()));
        }
        let minute = t0 + secs(60);
        let almost = minute - Duration::from_nanos(1);
        for _ in 0..6 {
            assert_eq!(bucket.try_take(almost), Ok(()));
        }
        assert_eq!(bucket.try_take(almost), Err(Duration::from_nanos(1)));
        assert_eq!(bucket.try_take(minute), Ok(()));
        assert!(bucket.try_take(minute).is_err());
    }

    #[test]
    fn zero_rpm_and_zero_burst() {
        let t0 = Instant::now();
        let mut no_refill = TokenBucket::new(limit(0, 2), t0);
        assert_eq!(no_refill.try_take(t0), Ok(()));
        assert_eq!(no_refill.try_take(t0 + secs(1)), Ok(()));
        assert_eq!(no_refill.try_take(t0 + secs(86_400)), Err(Duration::MAX));
        let mut closed = TokenBucket::new(limit(60, 0), t0);
        assert_eq!(closed.try_take(t0), Err(Duration::MAX));
        assert_eq!(closed.try_take(t0 + secs(3600)), Err(Duration::MAX));
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let t0 = Instant::now();
        let t1 = t0 + secs(10);
        let mut bucket = TokenBucket::new(limit(60, 1), t1);
        assert_eq!(bucket.try_take(t1), Ok(()));
        assert!(bucket.try_take(t0).is_err());
        assert_eq!(bucket.try_take(t1 + secs(1)), Ok(()));
    }

    #[test]
    fn extreme_limits_do_not_overflow() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(limit(u32::MAX, u32::MAX), t0);
        assert_eq!(bucket.try_take(t0), Ok(()));
        let decade = Duration::from_secs(10 * 365 * 86_400);
        assert_eq!(bucket.try_take(t0 + decade), Ok(()));
    }

    #[test]
    fn limiter_keeps_one_bucket_per_server() {
        let t0 = Instant::now();
        let mut limiter = RateLimiter::new();
        let one = limit(60, 1);
        assert_eq!(limiter.try_acquire("a", one, t0), Ok(()));
        assert_eq!(limiter.try_acquire("a", one, t0), Err(secs(1)));
        assert_eq!(limiter.try_acquire("b", one, t0), Ok(()));
        assert_eq!(limiter.try_acquire("a", one, t0 + secs(1)), Ok(()));
    }

    #[test]
    fn reload_never_grants_more_than_was_left() {
        let t0 = Instant::now();
        let mut limiter = RateLimiter::new();
        let small = limit(60, 2);
        assert_eq!(limiter.try_acquire("s", small, t0), Ok(()));
        assert_eq!(limiter.try_acquire("s", small, t0), Ok(()));
        // Empty now; a bigger limit does not refill it.
        let big = limit(60, 100);
        assert_eq!(limiter.try_acquire("s", big, t0), Err(secs(1)));
        // It refills at the new rate up to the new capacity.
        for _ in 0..10 {
            assert_eq!(limiter.try_acquire("s", big, t0 + secs(10)), Ok(()));
        }
        assert!(limiter.try_acquire("s", big, t0 + secs(10)).is_err());
        // A smaller limit cuts what is left down to its capacity.
        let t1 = t0 + secs(1000);
        let tiny = limit(60, 1);
        assert_eq!(limiter.try_acquire("s", tiny, t1), Ok(()));
        assert_eq!(limiter.try_acquire("s", tiny, t1), Err(secs(1)));
    }

    #[test]
    fn reload_counts_refill_under_the_old_rate_first() {
        let t0 = Instant::now();
        let mut limiter = RateLimiter::new();
        let fast = limit(600, 1);
        assert_eq!(limiter.try_acquire("s", fast, t0), Ok(()));
        // 100 ms at 600 rpm refilled one token before the switch to 60 rpm.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(limiter.try_acquire("s", limit(60, 1), t1), Ok(()));
        assert_eq!(limiter.try_acquire("s", limit(60, 1), t1), Err(secs(1)));
    }
}
