//! The closed vocabularies of the policy file (decisions, severities, actions...).
//!
//! Each enum spells its YAML form once; `FromStr`, `Display`, serde and the loader's
//! "expected one of" messages all come from that one list.

use std::fmt;
use std::str::FromStr;

/// Implemented by every keyword enum; lets the loader parse and list values generically.
pub trait Keyword: Copy + Sized + 'static {
    /// Every value, in the order error messages list them.
    fn all() -> &'static [Self];
    fn as_str(self) -> &'static str;
}

/// A string that is not one of a keyword enum's values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown value `{value}` (expected one of: {})", expected.join(", "))]
pub struct UnknownKeyword {
    pub value: String,
    pub expected: &'static [&'static str],
}

macro_rules! keyword_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant ),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            const NAMES: &'static [&'static str] = &[$($text),+];

            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl Keyword for $name {
            fn all() -> &'static [Self] {
                Self::ALL
            }
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownKeyword;
            fn from_str(s: &str) -> Result<Self, UnknownKeyword> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownKeyword { value: s.to_string(), expected: Self::NAMES }),
                }
            }
        }
    };
}

keyword_enum! {
    /// What to do with a tool call. Ordered by restrictiveness, so combining the verdicts of
    /// several rules is `max()`.
    Decision {
        /// Let it through.
        Allow = "allow",
        /// Let it through and record it as notable.
        Audit = "audit",
        /// Stop it.
        Block = "block",
    }
}

keyword_enum! {
    /// How serious a detection is; ordered, so a threshold is a `>=` comparison.
    Severity {
        Low = "low",
        Medium = "medium",
        High = "high",
        Critical = "critical",
    }
}

keyword_enum! {
    /// From which severity on instructions injected into a tool result (findings about text
    /// aimed at the model) are blocked whatever `on_detection` says; `off` leaves them to it.
    InjectionBlock {
        Off = "off",
        Low = "low",
        Medium = "medium",
        High = "high",
        Critical = "critical",
    }
}

impl InjectionBlock {
    pub fn threshold(self) -> Option<Severity> {
        match self {
            Self::Off => None,
            Self::Low => Some(Severity::Low),
            Self::Medium => Some(Severity::Medium),
            Self::High => Some(Severity::High),
            Self::Critical => Some(Severity::Critical),
        }
    }
}

keyword_enum! {
    /// What to do when a pinned tool definition (or server binary) changes.
    PinAction {
        Block = "block",
        Alert = "alert",
        Allow = "allow",
    }
}

keyword_enum! {
    /// How a list of servers or tools is applied.
    #[derive(Default)]
    ListPolicy {
        /// The lists are ignored.
        #[default]
        None = "none",
        /// Only what the allow list names may be used.
        Allowlist = "allowlist",
        /// Everything but what the deny list names may be used.
        Denylist = "denylist",
    }
}

keyword_enum! {
    /// How agentsh reaches a declared MCP server.
    #[derive(Default)]
    Transport {
        #[default]
        Stdio = "stdio",
        /// Streamable HTTP.
        Http = "http",
        /// The older HTTP+SSE transport.
        Sse = "sse",
    }
}

keyword_enum! {
    /// What a detector does when it fires.
    Action {
        /// Record an event, let the traffic through.
        Alert = "alert",
        /// Stop the call (or hide the tool, for definitions).
        Block = "block",
    }
}

keyword_enum! {
    /// Whether a server-to-client request (sampling, elicitation, roots) is let through.
    RequestAction {
        Allow = "allow",
        Block = "block",
    }
}

impl Severity {
    /// One level down, saturating at `Low` (a finding softened by its context).
    pub fn lower(self) -> Self {
        match self {
            Self::Critical => Self::High,
            Self::High => Self::Medium,
            Self::Medium | Self::Low => Self::Low,
        }
    }
}

keyword_enum! {
    /// What the LLM proxy does with LLM traffic.
    ProxyMode {
        /// Tool-call enforcement; bodies stored for audit; nothing else rewritten.
        McpOnly = "mcp-only",
        /// The same, plus DLP on outgoing requests.
        Embedded = "embedded",
        /// Pass-through: audit only.
        Disabled = "disabled",
    }
}

keyword_enum! {
    /// Whether agentshd enforces through the kernel hooks.
    Enforcement {
        /// When this host allows it (root or CAP_BPF); otherwise say so and serve the explicit
        /// proxy only.
        Auto = "auto",
        /// Refuse to start without working hooks.
        Required = "required",
        /// Never load them.
        Off = "off",
    }
}

keyword_enum! {
    /// What the transparent proxy does with a connection that is neither an LLM provider's
    /// nor a declared MCP server's.
    OtherTraffic {
        /// Copy both ways, untouched.
        Splice = "splice",
        /// Close it.
        Refuse = "refuse",
    }
}

keyword_enum! {
    /// Secrets in outgoing LLM requests (`embedded` mode).
    DlpMode {
        Redact = "redact",
        Disabled = "disabled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_max_is_most_restrictive() {
        assert_eq!(Decision::Allow.max(Decision::Block), Decision::Block);
        assert_eq!(Decision::Audit.max(Decision::Allow), Decision::Audit);
        assert!(Severity::Critical > Severity::High && Severity::Medium > Severity::Low);
    }

    #[test]
    fn round_trips() {
        for s in Severity::ALL {
            assert_eq!(s.to_string().parse::<Severity>(), Ok(*s));
        }
        let err = "mild".parse::<Severity>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown value `mild` (expected one of: low, medium, high, critical)"
        );
    }

    #[test]
    fn serde_is_lowercase() {
        assert_eq!(serde_json::to_string(&Severity::High).unwrap(), "\"high\"");
        assert_eq!(
            serde_json::from_str::<ListPolicy>("\"allowlist\"").unwrap(),
            ListPolicy::Allowlist
        );
    }
}

keyword_enum! {
    /// How the audit trail reaches the OpenTelemetry collector; the names of
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`.
    #[derive(Default)]
    OtlpProtocol {
        /// OTLP/gRPC (`LogsService/Export` over HTTP/2), usually port 4317.
        Grpc = "grpc",
        /// OTLP/HTTP, protobuf bodies to `{endpoint}/v1/logs`, usually port 4318: OTLP's default.
        #[default]
        HttpProtobuf = "http/protobuf",
        /// OTLP/HTTP, JSON bodies to `{endpoint}/v1/logs`.
        HttpJson = "http/json",
    }
}

keyword_enum! {
    /// Whether export requests are compressed.
    #[derive(Default)]
    Compression {
        #[default]
        None = "none",
        Gzip = "gzip",
    }
}
