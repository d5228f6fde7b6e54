//! Request routing of the LLM proxy (`agentsh::proxy::route`, `agentsh::llm::Dialect`), on
//! the path and headers an agent sends:
//! - never panics;
//! - a path the proxy does not refuse as ambiguous reads the same after the upstream's URL
//!   normalisation: the upstream URL keeps the base's origin, and its path is classified as
//!   the same dialect as the path the proxy classified;
//! - the provider prefix comes off only as a whole segment.
#![no_main]

use agentsh::llm::{Dialect, gemini};
use agentsh::proxy::route::{Provider, Route};
use arbitrary::{Arbitrary, Unstructured};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Case {
    prefix: u8,
    path: String,
    headers: Vec<(u8, String)>,
    base: u8,
}

const PREFIXES: [&str; 5] = ["", "/anthropic", "/openai", "/google", "/v1"];
const HEADERS: [&str; 5] = [
    "anthropic-version",
    "x-api-key",
    "x-goog-api-key",
    "authorization",
    "content-type",
];
const BASES: [&str; 4] = [
    "https://api.openai.com",
    "https://api.anthropic.com/",
    "http://127.0.0.2:8080/gateway/",
    "https://generativelanguage.googleapis.com/v1beta/..",
];

fuzz_target!(|data: &[u8]| {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let path = format!(
        "{}{}",
        PREFIXES[usize::from(case.prefix) % PREFIXES.len()],
        case.path
    );
    let mut headers = HeaderMap::new();
    for (name, value) in case.headers.iter().take(4) {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.append(
                HeaderName::from_static(HEADERS[usize::from(*name) % HEADERS.len()]),
                value,
            );
        }
    }
    let _ = gemini::model_of(&path);
    let _ = gemini::method_of(&path);
    let direct = Route::direct(Provider::OpenAi, &path);
    assert_eq!(direct.dialect, Dialect::of_path(&path));

    // What reaches the proxy is an HTTP request target: check the routing on those.
    let Ok(target) = path.parse::<http::uri::PathAndQuery>() else {
        let _ = Route::of(&path, &headers);
        return;
    };
    let path = target.as_str();
    let route = Route::of(path, &headers);
    assert_eq!(route.dialect, Dialect::of_path(&route.path_and_query));
    assert!(!route.path_and_query.is_empty());
    if route.path_and_query != path {
        let stripped = ["/anthropic", "/openai", "/google"].iter().any(|prefix| {
            path.strip_prefix(prefix).is_some_and(|rest| {
                rest == route.path_and_query || (rest.is_empty() && route.path_and_query == "/")
            })
        });
        assert!(
            stripped,
            "{path:?} became {:?}: no provider prefix came off",
            route.path_and_query
        );
    }
    if route.is_ambiguous() || !path.starts_with('/') {
        return;
    }
    let base = url::Url::parse(BASES[usize::from(case.base) % BASES.len()]).unwrap();
    let upstream = route.upstream_url(&base);
    let parsed = url::Url::parse(&upstream)
        .unwrap_or_else(|e| panic!("the upstream URL {upstream:?} does not parse: {e}"));
    assert_eq!(
        parsed.origin(),
        base.origin(),
        "{path:?} sends the request to another origin: {upstream}"
    );
    let normalised = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_owned(),
    };
    assert_eq!(
        Dialect::of_path(&normalised),
        route.dialect,
        "the upstream reads {path:?} as {normalised:?}, another kind of call"
    );
});
