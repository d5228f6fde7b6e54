//! From bytes to a `Policy`: read, parse the YAML, read each section, validate.

use std::io::Read;
use std::path::Path;

use super::diagnostic::{ConfigError, Location, Report};
use super::mcp_section::{self, Section, agentshield, inspection};
use super::reader::{self, Fields};
use super::schema::{Policy, Sandbox};
use super::validate::validate;
use super::yaml::{self, Node};

/// Far above any real policy; refusing bigger input keeps a mistaken path (a log, a disk
/// image) from being slurped into memory.
pub const MAX_POLICY_BYTES: usize = 8 * 1024 * 1024;

/// Top-level keys: `sandbox` (its `mcp` section), or the same section as `mcp_rules` (the
/// design documents' policy files); `mcp` (its `inspection` section, the tool-inspection
/// design); and AgentShield's rule file keys. A new top-level section is a key here plus a
/// field on `Policy`.
const ROOT_KEYS: &[&str] = &[
    "sandbox",
    "mcp_rules",
    "mcp",
    agentshield::KEYS[0],
    agentshield::KEYS[1],
    agentshield::KEYS[2],
];
/// Keys under `sandbox:`. A new sandbox section is a key here plus a field on `Sandbox`.
const SANDBOX_KEYS: &[&str] = &["mcp"];

/// Loads and validates a policy file. Errors name `path:line:column`.
pub fn load_file(path: &Path) -> Result<Policy, ConfigError> {
    let src = read_source(path)?;
    load_str(&src, &path.display().to_string())
}

/// Same as [`load_file`]; the name `agentshctl policy check` reads best with.
pub fn check_file(path: &Path) -> Result<Policy, ConfigError> {
    load_file(path)
}

/// Loads and validates a policy from text; `origin` names it in diagnostics.
pub fn load_str(src: &str, origin: &str) -> Result<Policy, ConfigError> {
    let mut r = Report::new(origin);
    let sandbox = match parse_document(&mut r, src) {
        Some(root) => read_root(&mut r, &root),
        None => Sandbox::default(),
    };
    let mut policy = Policy {
        origin: origin.to_string(),
        sha256: {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(src.as_bytes()))
        },
        sandbox,
        warnings: Vec::new(),
    };
    validate(&mut r, &policy);
    policy.warnings = r.finish()?;
    Ok(policy)
}

/// The text of a YAML file (policy or daemon config), at most [`MAX_POLICY_BYTES`] of it (more
/// is reported by [`parse_document`]); invalid UTF-8 is an error at its position.
pub(super) fn read_source(path: &Path) -> Result<String, ConfigError> {
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_POLICY_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    String::from_utf8(bytes).or_else(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let mut r = Report::new(&path.display().to_string());
        r.error(position_after(valid), "the file is not valid UTF-8");
        r.finish().map(|_| String::new())
    })
}

/// The document's tree, with syntax errors reported. An empty document reads as null at 1:1;
/// None means there is nothing worth walking (the errors say why).
pub(super) fn parse_document(r: &mut Report, src: &str) -> Option<Node> {
    if src.len() > MAX_POLICY_BYTES {
        r.error(
            Location::new(1, 1),
            format!("the file is larger than {MAX_POLICY_BYTES} bytes"),
        );
        return None;
    }
    let parsed = yaml::parse(src);
    let clean = parsed.errors.is_empty();
    for (at, message) in parsed.errors {
        r.error(at, message);
    }
    parsed
        .root
        .or_else(|| clean.then(|| Node::null(Location::new(1, 1))))
}

fn read_root(r: &mut Report, root: &Node) -> Sandbox {
    let Some(top) = Fields::open(r, root, "", ROOT_KEYS) else {
        return Sandbox::default();
    };
    let sandbox_mcp = top
        .get("sandbox")
        .and_then(|n| Fields::open(r, n, "sandbox", SANDBOX_KEYS))
        .and_then(|f| Some((f.get("mcp")?, f.path_of("mcp"), f.key_loc("mcp"))));
    let mcp_rules = top
        .get("mcp_rules")
        .map(|n| (n, "mcp_rules".to_owned(), top.key_loc("mcp_rules")));
    let (node, path) = match (sandbox_mcp, mcp_rules) {
        (Some((node, path, at)), Some((_, other, other_at))) => {
            reader::conflict(r, (&path, at), (&other, other_at));
            (Some(node), path)
        }
        (Some((node, path, _)), None) | (None, Some((node, path, _))) => (Some(node), path),
        (None, None) => (None, "sandbox.mcp".to_owned()),
    };
    let mut mcp = match node {
        Some(n) => mcp_section::parse(r, n, &path),
        None => Default::default(),
    };
    let section = Section::new(node, &path);
    agentshield::apply(r, &top, &section, &mut mcp);
    if let Some(n) = top.get("mcp") {
        inspection::apply(r, n, &section, &mut mcp);
    }
    Sandbox { mcp }
}

/// The 1-based position just after `text` (where an invalid byte sits).
fn position_after(text: &[u8]) -> Location {
    let line = 1 + text.iter().filter(|b| **b == b'\n').count();
    let line_start = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let column = 1 + String::from_utf8_lossy(&text[line_start..]).chars().count();
    Location::new(line, column)
}
