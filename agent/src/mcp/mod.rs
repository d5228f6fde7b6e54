//! mcp (being written).
