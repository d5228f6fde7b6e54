//! End-to-end test harness: locating binaries and peers.
