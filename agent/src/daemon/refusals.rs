//! The kernel's refusals, aggregated before they reach the trail: a session that sends a
//! million datagrams to a denied address must not write a million events (and so push every
//! other session's events out of a bounded store).
//!
//! Per session, a window opens at its first refusal. In it, the first refusal to each
//! destination is recorded as it comes (up to `DESTINATIONS` destinations); the others are
//! counted. When the window closes, one summary per destination says how many more there
//! were, and one more how many went to destinations past the cap. A session's flood then
//! costs at most `2 * DESTINATIONS + 1` events per window.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::kernel::{Event, Refusal};

/// How long a session's window stays open.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Destinations recorded one by one per session and window.
pub const DESTINATIONS: usize = 16;

/// What a summary counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Refusals to one destination after its first.
    One(SocketAddr),
    /// Refusals to the destinations past the cap.
    Others,
    /// Refusals the kernel could not report (its ring buffer was full): destinations unknown.
    Unreported,
}

/// What to record, once a window closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub session_cgroup: u64,
    /// The session the cgroup was when the window opened (it may have ended since).
    pub session: Option<String>,
    pub target: Target,
    pub refusal: Refusal,
    /// Refusals not recorded one by one.
    pub count: u64,
    /// How many destinations they went to (1 for a single destination).
    pub destinations: u64,
    pub window: Duration,
}

#[derive(Default)]
pub struct RefusalDigest {
    windows: HashMap<u64, SessionWindow>,
}

struct SessionWindow {
    opened: Instant,
    session: Option<String>,
    /// Destinations recorded this window, with the refusals since not recorded.
    seen: HashMap<(SocketAddr, Refusal), u64>,
    /// Refusals to destinations past the cap, by kind, and to how many destinations.
    overflow: HashMap<Refusal, (u64, std::collections::HashSet<SocketAddr>)>,
    /// Refusals the kernel could not report.
    unreported: u64,
}

/// Distinct destinations past the cap kept for counting; past it they are counted, not told
/// apart (the count of destinations is then a lower bound).
const OVERFLOW_DESTINATIONS: usize = 4096;

impl RefusalDigest {
    /// Whether `event` is recorded as it is (the first to its destination this window).
    /// `session` names the cgroup's session, asked when a window opens.
    pub fn observe(
        &mut self,
        event: &Event,
        now: Instant,
        session: impl FnOnce() -> Option<String>,
    ) -> bool {
        let window = self.window(event.session_cgroup, now, session);
        let key = (event.destination, event.refusal);
        if let Some(count) = window.seen.get_mut(&key) {
            *count += 1;
            return false;
        }
        if window.seen.len() < DESTINATIONS {
            window.seen.insert(key, 0);
            return true;
        }
        let (count, destinations) = window.overflow.entry(event.refusal).or_default();
        *count += 1;
        if destinations.len() < OVERFLOW_DESTINATIONS {
            destinations.insert(event.destination);
        }
        false
    }

    /// `count` more refusals of a session the kernel could not report one by one.
    pub fn unreported(
        &mut self,
        cgroup: u64,
        count: u64,
        now: Instant,
        session: impl FnOnce() -> Option<String>,
    ) {
        self.window(cgroup, now, session).unreported += count;
    }

    fn window(
        &mut self,
        cgroup: u64,
        now: Instant,
        session: impl FnOnce() -> Option<String>,
    ) -> &mut SessionWindow {
        self.windows.entry(cgroup).or_insert_with(|| SessionWindow {
            opened: now,
            session: session(),
            seen: HashMap::new(),
            overflow: HashMap::new(),
            unreported: 0,
        })
    }

    /// The summaries of the windows closed by `now`.
    pub fn close_due(&mut self, now: Instant) -> Vec<Summary> {
        let due: Vec<u64> = self
            .windows
            .iter()
            .filter(|(_, w)| now.duration_since(w.opened) >= WINDOW)
            .map(|(cgroup, _)| *cgroup)
            .collect();
        let mut summaries = Vec::new();
        for cgroup in due {
            let Some(window) = self.windows.remove(&cgroup) else {
                continue;
            };
            let length = now.duration_since(window.opened);
            let mut seen: Vec<_> = window.seen.into_iter().filter(|(_, n)| *n > 0).collect();
            seen.sort_by_key(|((addr, _), _)| *addr);
            for ((destination, refusal), count) in seen {
                summaries.push(Summary {
                    session_cgroup: cgroup,
                    session: window.session.clone(),
                    target: Target::One(destination),
                    refusal,
                    count,
                    destinations: 1,
                    window: length,
                });
            }
            for (refusal, (count, destinations)) in window.overflow {
                summaries.push(Summary {
                    session_cgroup: cgroup,
                    session: window.session.clone(),
                    target: Target::Others,
                    refusal,
                    count,
                    destinations: destinations.len() as u64,
                    window: length,
                });
            }
            if window.unreported > 0 {
                summaries.push(Summary {
                    session_cgroup: cgroup,
                    session: window.session,
                    target: Target::Unreported,
                    refusal: Refusal::Denied,
                    count: window.unreported,
                    destinations: 0,
                    window: length,
                });
            }
        }
        summaries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cgroup: u64, dest: &str) -> Event {
        Event {
            session_cgroup: cgroup,
            pid: 7,
            tid: 7,
            destination: dest.parse().unwrap(),
            refusal: Refusal::Quic,
        }
    }

    #[test]
    fn a_flood_costs_a_bounded_number_of_events_per_window() {
        let mut digest = RefusalDigest::default();
        let start = Instant::now();
        let mut recorded = 0;
        for i in 0..1_000_000u32 {
            let dest = format!("127.0.0.{}:{}", 2 + i % 3, 443 + i % 100);
            recorded += usize::from(digest.observe(&refused(1, &dest), start, || None));
        }
        assert_eq!(recorded, DESTINATIONS);
        assert!(
            digest.close_due(start + WINDOW / 2).is_empty(),
            "still open"
        );
        let summaries = digest.close_due(start + WINDOW);
        assert_eq!(summaries.len(), DESTINATIONS + 1, "{summaries:#?}");
        let told: u64 = summaries.iter().map(|s| s.count).sum();
        assert_eq!(
            told as usize + recorded,
            1_000_000,
            "every refusal is counted"
        );
        let overflow = summaries
            .iter()
            .find(|s| s.target == Target::Others)
            .unwrap();
        assert_eq!(overflow.destinations, 300 - DESTINATIONS as u64);
        // A new window: the first refusal is recorded again.
        assert!(digest.observe(&refused(1, "127.0.0.2:443"), start + WINDOW, || None));
    }

    #[test]
    fn sessions_are_counted_apart() {
        let mut digest = RefusalDigest::default();
        let now = Instant::now();
        for _ in 0..100 {
            digest.observe(&refused(1, "127.0.0.2:443"), now, || Some("one".into()));
        }
        assert!(digest.observe(&refused(2, "127.0.0.2:443"), now, || None));
        let summaries = digest.close_due(now + WINDOW);
        assert_eq!(summaries.len(), 1, "{summaries:?}");
        assert_eq!((summaries[0].session_cgroup, summaries[0].count), (1, 99));
        assert_eq!(summaries[0].session.as_deref(), Some("one"));
    }
}
