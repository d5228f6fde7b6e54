//! Shares of a bounded resource held per key (a session, a user): connections, bytes in flight.
//! One key at its cap is refused more without touching anyone else's share, and each episode of
//! refusals is reported once: the first refusal says so, the next ones do not, until the key's
//! use falls back to half its cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A cap per key on some amount.
#[derive(Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

struct Inner {
    name: &'static str,
    cap: u64,
    usage: Mutex<HashMap<String, Usage>>,
}

#[derive(Default)]
struct Usage {
    used: u64,
    /// Refused since the use last fell to half the cap.
    in_episode: bool,
}

/// A refusal: `key` would go over `cap` of `budget`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub budget: &'static str,
    pub key: String,
    pub cap: u64,
    /// The first refusal of this episode: the one to report.
    pub first: bool,
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} limit of {} reached for {}",
            self.budget, self.cap, self.key
        )
    }
}

impl Exceeded {
    /// The `limit_reached` event that reports this episode: `{limit, cap}` and `extra`'s fields
    /// as its details.
    pub fn event(
        &self,
        server: &str,
        rule: &str,
        reason: String,
        extra: serde_json::Value,
    ) -> crate::audit::Event {
        use crate::audit::{Action, Event, EventKind};
        let mut details = serde_json::json!({"limit": self.budget, "cap": self.cap});
        if let (Some(details), serde_json::Value::Object(extra)) = (details.as_object_mut(), extra)
        {
            details.extend(extra);
        }
        Event::new(EventKind::LimitReached, server, Action::Block, reason)
            .rule(rule)
            .details(details)
    }
}

impl Budget {
    /// `name` says what is counted, in the words of the events that report it.
    pub fn new(name: &'static str, cap: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                name,
                cap,
                usage: Mutex::default(),
            }),
        }
    }

    pub fn cap(&self) -> u64 {
        self.inner.cap
    }

    /// Takes `amount` for `key`, or refuses without taking anything.
    pub fn take(&self, key: &str, amount: u64) -> Result<Share, Exceeded> {
        let mut share = self.share(key);
        share.resize(amount)?;
        Ok(share)
    }

    /// A share of `key` that holds nothing yet.
    pub fn share(&self, key: &str) -> Share {
        Share {
            inner: Arc::clone(&self.inner),
            key: key.to_owned(),
            held: 0,
        }
    }

    /// What `key` holds now.
    pub fn used(&self, key: &str) -> u64 {
        self.inner.lock().get(key).map_or(0, |u| u.used)
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Usage>> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What one holder has of a key's budget; given back when dropped.
pub struct Share {
    inner: Arc<Inner>,
    key: String,
    held: u64,
}

impl Share {
    /// Holds `amount` from now on instead of what it held: growing may be refused (the share is
    /// then unchanged), shrinking never is.
    pub fn resize(&mut self, amount: u64) -> Result<(), Exceeded> {
        let inner = &self.inner;
        let mut usage = inner.lock();
        let entry = usage.entry(self.key.clone()).or_default();
        let others = entry.used - self.held;
        if amount > self.held && others.saturating_add(amount) > inner.cap {
            let first = !entry.in_episode;
            entry.in_episode = true;
            return Err(Exceeded {
                budget: inner.name,
                key: self.key.clone(),
                cap: inner.cap,
                first,
            });
        }
        entry.used = others + amount;
        self.held = amount;
        if entry.used <= inner.cap / 2 {
            entry.in_episode = false;
        }
        if entry.used == 0 && !entry.in_episode {
            usage.remove(&self.key);
        }
        Ok(())
    }

    pub fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        // Shrinking cannot fail.
        let _ = self.resize(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_at_its_cap_is_refused_and_others_are_not() {
        let budget = Budget::new("connections", 4);
        let a1 = budget.take("a", 1).unwrap();
        let _a2 = budget.take("a", 3).unwrap();
        let refused = budget.take("a", 1).err().unwrap();
        assert!(refused.first);
        assert_eq!(refused.to_string(), "connections limit of 4 reached for a");
        assert!(
            !budget.take("a", 1).err().unwrap().first,
            "one report per episode"
        );
        let _b = budget.take("b", 4).unwrap();
        assert_eq!(budget.used("a"), 4);
        drop(a1);
        assert_eq!(budget.used("a"), 3);
        let _again = budget.take("a", 1).unwrap();
        assert!(
            !budget.take("a", 1).err().unwrap().first,
            "still above half the cap"
        );
    }

    #[test]
    fn an_episode_ends_at_half_the_cap() {
        let budget = Budget::new("bytes", 10);
        let mut share = budget.take("s", 8).unwrap();
        assert!(budget.take("s", 5).err().unwrap().first);
        share.resize(6).unwrap();
        assert!(!budget.take("s", 5).err().unwrap().first);
        share.resize(0).unwrap();
        assert!(budget.take("s", 11).err().unwrap().first, "a new episode");
        assert_eq!(budget.used("s"), 0);
    }

    #[test]
    fn a_refused_growth_leaves_the_share_as_it_was() {
        let budget = Budget::new("bytes", 10);
        let mut share = budget.take("s", 4).unwrap();
        assert!(share.resize(11).is_err());
        assert_eq!(share.held(), 4);
        assert_eq!(budget.used("s"), 4);
        drop(share);
        assert_eq!(budget.used("s"), 0);
        assert!(
            budget.inner.lock().is_empty(),
            "nothing kept for an idle key"
        );
    }
}
