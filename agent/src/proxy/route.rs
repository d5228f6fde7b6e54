//! Which provider a request is for, and where it goes upstream.
//!
//! `agentshctl run --no-kernel` gives each SDK its own prefix (`ANTHROPIC_BASE_URL=…/anthropic`,
//! `OPENAI_BASE_URL=…/openai/v1`, `GOOGLE_GEMINI_BASE_URL=…/google`). A request without one goes
//! by its path (`/v1/messages` is Anthropic's, `…:generateContent` Google's), then by its
//! headers (`anthropic-version`, `x-api-key`; `x-goog-api-key`), else to OpenAI.

use http::HeaderMap;
use url::Url;

use crate::llm::Dialect;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
    Google,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::Google => "google",
        }
    }
}

/// Prefixes that name the provider; removed before the request goes upstream.
pub const ANTHROPIC_PREFIX: &str = "/anthropic";
pub const OPENAI_PREFIX: &str = "/openai";
pub const GOOGLE_PREFIX: &str = "/google";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub provider: Provider,
    /// `Some` for the calls that answer with tool calls.
    pub dialect: Option<Dialect>,
    /// The path and query to ask upstream, below the upstream's base.
    pub path_and_query: String,
}

impl Route {
    pub fn of(path_and_query: &str, headers: &HeaderMap) -> Self {
        let (provider, rest) = if let Some(rest) = strip_prefix(path_and_query, ANTHROPIC_PREFIX) {
            (Provider::Anthropic, rest)
        } else if let Some(rest) = strip_prefix(path_and_query, OPENAI_PREFIX) {
            (Provider::OpenAi, rest)
        } else if let Some(rest) = strip_prefix(path_and_query, GOOGLE_PREFIX) {
            (Provider::Google, rest)
        } else {
            (guess(path_and_query, headers), path_and_query)
        };
        let rest = if rest.is_empty() { "/" } else { rest };
        // The provider picks the upstream only: an OpenAI-shaped call to Anthropic's
        // compatible endpoint (or through a gateway) carries tool calls all the same.
        let dialect = Dialect::of_path(rest);
        Self {
            provider,
            dialect,
            path_and_query: rest.to_owned(),
        }
    }

    /// A request on the transparent path, whose provider the host it went to says: the path
    /// is the upstream's own, no prefix to take off.
    pub fn direct(provider: Provider, path_and_query: &str) -> Self {
        Self {
            provider,
            dialect: Dialect::of_path(path_and_query),
            path_and_query: path_and_query.to_owned(),
        }
    }

    /// A path an upstream could read differently from the proxy (`%6Dessages`, `/v1//messages`,
    /// `/./`, `;params`, a backslash): the proxy classifies the raw text, a server may
    /// normalise it first, so such a path is refused rather than passed unclassified.
    pub fn is_ambiguous(&self) -> bool {
        let path = self.path_and_query.split('?').next().unwrap_or_default();
        path.contains(['%', ';', '\\'])
            || path.contains("//")
            || path
                .split('/')
                .any(|segment| segment == "." || segment == "..")
    }

    /// The upstream URL: the provider's base (which may carry a path) and this route's path.
    pub fn upstream_url(&self, base: &Url) -> String {
        let origin = base.origin().ascii_serialization();
        let base_path = base.path().trim_end_matches('/');
        format!("{origin}{base_path}{}", self.path_and_query)
    }
}

fn strip_prefix<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with(['/', '?'])).then_some(rest)
}

fn provider_of(dialect: Dialect) -> Provider {
    match dialect {
        Dialect::AnthropicMessages => Provider::Anthropic,
        Dialect::OpenAiChat | Dialect::OpenAiResponses => Provider::OpenAi,
        Dialect::GeminiGenerateContent => Provider::Google,
    }
}

/// The provider a request without a prefix is for: by its path, then its headers.
pub fn guess(path: &str, headers: &HeaderMap) -> Provider {
    if let Some(dialect) = Dialect::of_path(path) {
        return provider_of(dialect);
    }
    let path = path.split('?').next().unwrap_or_default();
    if path.starts_with("/v1/messages")
        || headers.contains_key("anthropic-version")
        || headers.contains_key("x-api-key")
    {
        Provider::Anthropic
    } else if headers.contains_key("x-goog-api-key") || path.contains(":countTokens") {
        Provider::Google
    } else {
        Provider::OpenAi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Route {
        Route::of(path, &HeaderMap::new())
    }

    #[test]
    fn prefixes_name_the_provider() {
        let r = route("/anthropic/v1/messages?beta=true");
        assert_eq!(r.provider, Provider::Anthropic);
        assert_eq!(r.dialect, Some(Dialect::AnthropicMessages));
        assert_eq!(r.path_and_query, "/v1/messages?beta=true");
        let r = route("/openai/v1/responses");
        assert_eq!(
            (r.provider, r.dialect),
            (Provider::OpenAi, Some(Dialect::OpenAiResponses))
        );
        // `/anthropicx` is no prefix.
        assert_eq!(
            route("/anthropicx/v1/models").path_and_query,
            "/anthropicx/v1/models"
        );
        // An OpenAI-shaped call through the Anthropic prefix (its compatible endpoint) is
        // intercepted as what it is.
        let r = route("/anthropic/v1/chat/completions");
        assert_eq!(
            (r.provider, r.dialect),
            (Provider::Anthropic, Some(Dialect::OpenAiChat))
        );
    }

    #[test]
    fn without_a_prefix_the_path_then_the_headers_decide() {
        assert_eq!(route("/v1/messages").provider, Provider::Anthropic);
        assert_eq!(
            route("/v1/messages/count_tokens").provider,
            Provider::Anthropic
        );
        assert_eq!(route("/v1/messages/count_tokens").dialect, None);
        assert_eq!(
            route("/v1/chat/completions").dialect,
            Some(Dialect::OpenAiChat)
        );
        assert_eq!(route("/v1/models").provider, Provider::OpenAi);
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", "2023-06-01".parse().unwrap());
        assert_eq!(
            Route::of("/v1/models", &headers).provider,
            Provider::Anthropic
        );
        let r = route("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse");
        assert_eq!(
            (r.provider, r.dialect),
            (Provider::Google, Some(Dialect::GeminiGenerateContent))
        );
        let mut headers = HeaderMap::new();
        headers.insert("x-goog-api-key", "k".parse().unwrap());
        assert_eq!(
            Route::of("/v1beta/models", &headers).provider,
            Provider::Google
        );
    }

    #[test]
    fn the_google_prefix() {
        let r = route("/google/v1beta/models/gemini-2.5-flash:generateContent");
        assert_eq!(
            (r.provider, r.dialect),
            (Provider::Google, Some(Dialect::GeminiGenerateContent))
        );
        assert_eq!(
            r.path_and_query,
            "/v1beta/models/gemini-2.5-flash:generateContent"
        );
        let r = route("/google/v1beta/models/gemini-2.5-flash:countTokens");
        assert_eq!((r.provider, r.dialect), (Provider::Google, None));
    }

    #[test]
    fn paths_a_server_could_normalise_are_ambiguous() {
        for path in [
            "/anthropic/v1/%6Dessages",
            "/anthropic/v1//messages",
            "//v1/messages",
            "/v1/messages/.",
            "/v1/x/../messages",
            "/v1/messages;x",
            "/v1\\messages",
        ] {
            assert!(route(path).is_ambiguous(), "{path}");
        }
        for path in [
            "/anthropic/v1/messages?q=%20a",
            "/v1/models",
            "/openai/v1/responses/resp_1",
        ] {
            assert!(!route(path).is_ambiguous(), "{path}");
        }
    }

    #[test]
    fn upstream_urls_keep_the_base_path() {
        let r = route("/openai/v1/chat/completions?x=1");
        let base = Url::parse("https://api.openai.com").unwrap();
        assert_eq!(
            r.upstream_url(&base),
            "https://api.openai.com/v1/chat/completions?x=1"
        );
        let base = Url::parse("http://127.0.0.2:8080/gateway/").unwrap();
        assert_eq!(
            r.upstream_url(&base),
            "http://127.0.0.2:8080/gateway/v1/chat/completions?x=1"
        );
    }
}
