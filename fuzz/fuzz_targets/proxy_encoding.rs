//! Content-encoding handling of the LLM proxy (`agentsh::proxy::encoding`), on what an
//! upstream sends:
//! - `Decoder` fed in pieces gives what `decode_all` gives, never more than its bound, and
//!   never panics, whatever the bytes and the coding chain;
//! - a body encoded with any chain decodes back to itself; cut short it is refused; with
//!   bytes after its end it is refused (fail closed);
//! - `Content-Encoding` and `Accept-Encoding` values never panic, and what the proxy asks
//!   upstream for is a list it can decode.
#![no_main]

use std::io::Write;

use agentsh::proxy::encoding::{
    Coding, Decoder, accept_encoding, decode_all, parse_content_encoding,
};
use agentsh_fuzz::Cuts;
use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Case {
    /// Any bytes, decoded as if sent with these codings.
    Decode {
        codings: Vec<u8>,
        max_total: u16,
        cuts: Cuts,
        body: Vec<u8>,
    },
    /// A plain body encoded, then decoded (whole, cut short, with a byte after its end).
    RoundTrip {
        codings: Vec<u8>,
        raw_deflate: bool,
        cut: u16,
        cuts: Cuts,
        plain: Vec<u8>,
    },
    Headers {
        content_encoding: String,
        accept: Option<String>,
    },
}

fn codings_of(selectors: &[u8]) -> Vec<Coding> {
    selectors
        .iter()
        .take(3)
        .map(|s| Coding::ALL[usize::from(*s) % Coding::ALL.len()])
        .collect()
}

fn encode(coding: Coding, raw_deflate: bool, data: &[u8]) -> Vec<u8> {
    match coding {
        Coding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Coding::Deflate if raw_deflate => {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Coding::Deflate => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Coding::Brotli => {
            let mut out = Vec::new();
            {
                let mut e = brotli::CompressorWriter::new(&mut out, 4096, 1, 16);
                e.write_all(data).unwrap();
            }
            out
        }
        Coding::Zstd => zstd::bulk::compress(data, 1).unwrap(),
    }
}

fn decode_pieces(
    codings: &[Coding],
    pieces: &[&[u8]],
    max_total: u64,
) -> (Vec<u8>, Result<(), agentsh::proxy::encoding::DecodeError>) {
    let mut decoder = Decoder::new(codings, max_total);
    let mut out = Vec::new();
    for piece in pieces {
        if let Err(e) = decoder.push(piece, &mut out) {
            return (out, Err(e));
        }
    }
    let end = decoder.finish(&mut out);
    (out, end)
}

fuzz_target!(|data: &[u8]| {
    let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    match case {
        Case::Decode {
            codings,
            max_total,
            cuts,
            body,
        } => {
            let codings = codings_of(&codings);
            let max_total = u64::from(max_total) * 16;
            let whole = decode_all(&codings, &body, max_total);
            let (out, end) = decode_pieces(&codings, &cuts.pieces(&body), max_total);
            assert!(out.len() as u64 <= max_total, "decoded past the bound");
            match (&whole, &end) {
                (Ok(plain), Ok(())) => assert_eq!(plain, &out, "pieces decode differently"),
                (Err(_), Err(_)) => {}
                _ => panic!("whole: {whole:?}, in pieces: {end:?}"),
            }
        }
        Case::RoundTrip {
            codings,
            raw_deflate,
            cut,
            cuts,
            plain,
        } => {
            let codings = codings_of(&codings);
            let mut body = plain.clone();
            for &coding in &codings {
                body = encode(coding, raw_deflate, &body);
            }
            let max_total = plain.len() as u64 + 1;
            assert_eq!(
                decode_all(&codings, &body, max_total).as_deref(),
                Ok(plain.as_slice()),
                "an encoded body does not decode back"
            );
            let (out, end) = decode_pieces(&codings, &cuts.pieces(&body), max_total);
            assert_eq!((out.as_slice(), end), (plain.as_slice(), Ok(())));
            if !codings.is_empty() && body.len() > 1 {
                // Cut short anywhere but at zero bytes (an empty body is no body).
                let at = 1 + usize::from(cut) % (body.len() - 1);
                assert!(
                    decode_all(&codings, &body[..at], max_total).is_err(),
                    "a body cut short at {at} of {} decodes",
                    body.len()
                );
                let mut longer = body.clone();
                longer.push(cut as u8);
                assert!(
                    decode_all(&codings, &longer, max_total).is_err(),
                    "a body with a byte after its end decodes"
                );
            }
        }
        Case::Headers {
            content_encoding,
            accept,
        } => {
            if let Ok(codings) = parse_content_encoding(&content_encoding) {
                assert!(codings.len() <= agentsh::proxy::encoding::MAX_CODINGS);
            }
            let asked = accept_encoding(accept.as_deref());
            let codings = parse_content_encoding(&asked).unwrap_or_else(|e| {
                panic!("the proxy asks for {asked:?}, which it cannot read: {e}")
            });
            assert!(asked == "identity" || !codings.is_empty());
        }
    }
});
