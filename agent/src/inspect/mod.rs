//! inspect (being written).
