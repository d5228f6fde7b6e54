//! The ClientHello peek of the transparent proxy (`agentsh::net::tls::read_hello`), on what a
//! client sends first: never panics; a server name it returns is one the input carries (as
//! rustls lowercases it), and each ALPN protocol is bytes of the input; and a valid hello cut
//! anywhere (a hello in several TCP segments) reads as "incomplete" up to its end, never as
//! "not TLS".
#![no_main]

use agentsh::net::tls::{Hello, read_hello};
use agentsh_fuzz::{Cuts, Mutation, mutate};
use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Case {
    Raw(Vec<u8>, Cuts),
    Built {
        sni: Option<Vec<u8>>,
        alpn: Vec<Vec<u8>>,
        extra: Vec<(u16, Vec<u8>)>,
        session_id: Vec<u8>,
        tls13: bool,
        /// Split the handshake message over records of these sizes.
        records: Vec<u8>,
        mutations: Vec<Mutation>,
        cuts: Cuts,
    },
}

fn u16be(n: usize) -> [u8; 2] {
    (n as u16).to_be_bytes()
}

fn extension(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
    out.extend(kind.to_be_bytes());
    out.extend(u16be(body.len()));
    out.extend(body);
}

#[allow(clippy::too_many_arguments)]
fn build(
    sni: &Option<Vec<u8>>,
    alpn: &[Vec<u8>],
    extra: &[(u16, Vec<u8>)],
    session_id: &[u8],
    tls13: bool,
    records: &[u8],
) -> Vec<u8> {
    let mut extensions = Vec::new();
    if let Some(name) = sni {
        let name = &name[..name.len().min(300)];
        let mut entry = vec![0u8];
        entry.extend(u16be(name.len()));
        entry.extend(name);
        let mut list = u16be(entry.len()).to_vec();
        list.extend(entry);
        extension(&mut extensions, 0x0000, &list);
    }
    if !alpn.is_empty() {
        let mut list = Vec::new();
        for protocol in alpn.iter().take(8) {
            let protocol = &protocol[..protocol.len().min(255)];
            list.push(protocol.len() as u8);
            list.extend(protocol);
        }
        let mut body = u16be(list.len()).to_vec();
        body.extend(list);
        extension(&mut extensions, 0x0010, &body);
    }
    extension(&mut extensions, 0x000a, &[0, 4, 0, 0x1d, 0, 0x17]);
    extension(&mut extensions, 0x000d, &[0, 4, 0x04, 0x03, 0x08, 0x04]);
    if tls13 {
        extension(&mut extensions, 0x002b, &[4, 0x03, 0x04, 0x03, 0x03]);
        let mut share = vec![0, 36, 0, 0x1d, 0, 32];
        share.extend([7u8; 32]);
        extension(&mut extensions, 0x0033, &share);
    }
    for (kind, body) in extra.iter().take(4) {
        extension(&mut extensions, *kind, &body[..body.len().min(512)]);
    }
    let mut hello = vec![0x03, 0x03];
    hello.extend([0x42u8; 32]);
    let session_id = &session_id[..session_id.len().min(32)];
    hello.push(session_id.len() as u8);
    hello.extend(session_id);
    hello.extend([0, 4, 0x13, 0x01, 0xc0, 0x2f]);
    hello.extend([1, 0]);
    hello.extend(u16be(extensions.len()));
    hello.extend(extensions);
    let mut message = vec![1u8];
    message.extend(&(hello.len() as u32).to_be_bytes()[1..]);
    message.extend(hello);
    // Records: the message in pieces of the given sizes (the rest in the last).
    let mut out = Vec::new();
    let mut rest = message.as_slice();
    let mut sizes = records.iter().take(8);
    while !rest.is_empty() {
        let size = sizes
            .next()
            .map_or(rest.len(), |s| usize::from(*s).max(1))
            .min(rest.len());
        out.extend([0x16, 0x03, 0x01]);
        out.extend(u16be(size));
        out.extend(&rest[..size]);
        rest = &rest[size..];
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// The handshake bytes the records carry, joined (a hello may span several records).
fn handshake_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut joined = Vec::new();
    let mut rest = bytes;
    while let [kind, _, _, high, low, body @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low])).min(body.len());
        if *kind == 0x16 {
            joined.extend(&body[..len]);
        }
        rest = &body[len..];
    }
    joined
}

fn check(bytes: &[u8], cuts: &Cuts) {
    let Ok(full) = read_hello(bytes) else {
        return;
    };
    let Some(hello) = full else { return };
    let Hello { server_name, alpn } = &hello;
    let handshake = handshake_bytes(bytes);
    if let Some(name) = server_name {
        assert!(
            contains(
                &handshake.to_ascii_lowercase(),
                name.to_ascii_lowercase().as_bytes()
            ),
            "the server name {name:?} is not in the input"
        );
    }
    for protocol in alpn {
        assert!(
            contains(&handshake, protocol),
            "the protocol {protocol:?} is not in the input"
        );
    }
    // The peek reads the socket as it fills: every prefix is incomplete or this same hello.
    for piece in cuts.pieces(bytes) {
        let at = piece.as_ptr() as usize - bytes.as_ptr() as usize;
        match read_hello(&bytes[..at]) {
            Ok(None) => {}
            Ok(Some(early)) => assert_eq!(early, hello, "a prefix reads as another hello"),
            Err(e) => panic!("a hello cut at {at} of {} is refused: {e}", bytes.len()),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    match case {
        Case::Raw(bytes, cuts) => check(&bytes, &cuts),
        Case::Built {
            sni,
            alpn,
            extra,
            session_id,
            tls13,
            records,
            mutations,
            cuts,
        } => {
            let mut bytes = build(&sni, &alpn, &extra, &session_id, tls13, &records);
            mutate(&mut bytes, &mutations);
            check(&bytes, &cuts);
        }
    }
});
