//! Trains the learned second opinion on tool results, `agent/src/inspect/learned/model.bin`,
//! from the `tune` split of `tests/corpus` (nothing of `evaluate` or `holdout` is read).
//!
//! ```text
//! cargo run --release -p agentsh --example train_injection_model -- [CORPUS_DIR] [--out PATH]
//! ```
//! (`make model`). Deterministic: the same corpus and word classes give the same file.
//! `TRAIN_SHOW_BENIGN=1` also prints, per source, the benign sentences the model trained
//! without that source scores highest: where its false positives would come from.
//!
//! What it learns from:
//! - A benign result: each of its sentences is an instruction-free example.
//! - An injected result: the injected string (`meta.payload`, else the whole text) is a bag of
//!   sentences of which at least one is the instruction; only sentences carrying some word
//!   class are candidates (the trivia question a trigger carries has none), unless none does.
//!   The first round takes the candidates as positive; the second keeps, per bag, those the first round scored at 0.5 or more (at least
//!   its best one): a trigger's "answer this instead:" is learned, the trivia question after it
//!   is not. The carrier around a payload found in the text ("Dear John, ...") is benign.
//! - Each source weighs by the square root of its size, so no one style rules the model.
//!
//! Logistic regression over hashed features (see `agentsh::inspect::learned`), AdaGrad with L2.
//! The thresholds of `medium` and `high` are set on out-of-source scores: each tune source is
//! scored by a model trained on the others, and `high` lets at most 0.5% of benign results
//! through (`medium` 2%), so they hold for styles the model has never seen, not only its own.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use agentsh::inspect::learned::{self, BITS, ModelFile, SentenceFeatures};
use agentsh::inspect::{Detector, DetectorOptions};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

mod support;

const EPOCHS: usize = 8;
const LEARNING_RATE: f32 = 0.2;
/// Chosen on the out-of-source detection at `high` (1e-5 to 1e-2 tried; 1e-4 and 1e-3 tie).
const L2: f32 = 1e-3;
/// Benign results a threshold may let through: 0.5% at `high`, 2% at `medium`.
const HIGH_FP: f64 = 0.005;
const MEDIUM_FP: f64 = 0.02;
/// No threshold below these, however the out-of-source scores fall.
const MIN_HIGH: f32 = 0.8;
const MIN_MEDIUM: f32 = 0.6;

type Features = Vec<u32>;

/// One tune result, read into sentences.
struct Doc {
    source: String,
    attack: bool,
    /// Every sentence of the result as the detector reads it: a result scores as its best.
    sentences: Vec<Features>,
    /// Their text, for the debugging report.
    texts: Vec<String>,
    /// Attack: the injected string's sentences, one of which is the instruction.
    bag: Vec<Features>,
    /// Sentences known to be benign: a benign result's, or the carrier around a payload.
    benign: Vec<Features>,
}

struct Instance<'a> {
    features: &'a [u32],
    positive: bool,
    weight: f32,
}

fn main() -> Result<()> {
    let mut corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
    let mut out = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/inspect/learned/model.bin");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = PathBuf::from(args.next().context("--out needs a path")?),
            "-h" | "--help" => {
                println!("usage: train_injection_model [CORPUS_DIR] [--out PATH]");
                return Ok(());
            }
            other if !other.starts_with('-') => corpus = PathBuf::from(other),
            other => bail!("unknown argument `{other}`"),
        }
    }
    let detector = Detector::untrained(DetectorOptions::default())?;
    let records = support::corpus::load(&corpus)?;
    let docs = read_docs(&detector, &records)?;
    let sources: Vec<&str> = docs
        .iter()
        .map(|d| d.source.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    println!(
        "{} tune results ({} injected) from {}: {} sentences",
        docs.len(),
        docs.iter().filter(|d| d.attack).count(),
        sources.join(", "),
        docs.iter().map(|d| d.sentences.len()).sum::<usize>()
    );

    // Out-of-source scores: each source judged by a model that never saw it.
    let mut held_out: Vec<(&Doc, f32)> = Vec::new();
    // TRAIN_SHOW_BENIGN=1 prints the benign sentences each held-out source scores highest on.
    let debug = std::env::var_os("TRAIN_SHOW_BENIGN").is_some();
    for source in &sources {
        let train: Vec<&Doc> = docs.iter().filter(|d| d.source != *source).collect();
        let model = train_model(&train);
        if debug {
            let mut top: Vec<(f32, &str, bool)> = docs
                .iter()
                .filter(|d| d.source == *source)
                .flat_map(|d| {
                    d.sentences
                        .iter()
                        .zip(&d.texts)
                        .map(|(f, t)| (model.score(f), t.as_str(), d.attack))
                })
                .filter(|(_, _, attack)| !attack)
                .collect();
            top.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (s, t, _) in top.iter().take(8) {
                println!(
                    "  {source} benign {s:.4} {}",
                    t.chars().take(150).collect::<String>()
                );
            }
        }
        held_out.extend(
            docs.iter()
                .filter(|d| d.source == *source)
                .map(|d| (d, doc_score(&model, d))),
        );
    }
    let benign: Vec<f32> = held_out
        .iter()
        .filter(|(d, _)| !d.attack)
        .map(|(_, s)| *s)
        .collect();
    let high = threshold(&benign, HIGH_FP).max(MIN_HIGH);
    let medium = threshold(&benign, MEDIUM_FP).max(MIN_MEDIUM).min(high);
    println!("\nout of source (each source scored by a model trained on the others):");
    report(&held_out, medium, high);

    let all: Vec<&Doc> = docs.iter().collect();
    let model = train_model(&all);
    let fitted: Vec<(&Doc, f32)> = docs.iter().map(|d| (d, doc_score(&model, d))).collect();
    println!("\nthe shipped model on its own training data:");
    report(&fitted, medium, high);

    let file = ModelFile {
        fingerprint: detector.class_fingerprint(),
        bias: model.bias,
        medium,
        high,
        weights: model.weights,
    };
    std::fs::write(&out, file.to_bytes()).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "\nthresholds: medium {medium:.3}, high {high:.3}; wrote {}",
        out.display()
    );
    Ok(())
}

fn read_docs(detector: &Detector, records: &[Value]) -> Result<Vec<Doc>> {
    let mut docs = Vec::new();
    let mut seen: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    for r in records {
        if r["kind"] != "result" || r["split"] != "tune" {
            continue;
        }
        let source = r["source"]
            .as_str()
            .context("a record without a source")?
            .to_string();
        let attack = match r["label"].as_str() {
            Some("attack") => true,
            Some("benign") => false,
            other => bail!("{}: label {other:?}", r["id"]),
        };
        let text = r["text"].as_str().context("a result without text")?;
        let read = |t: &str| {
            detector.output_sentence_features(&json!({"content": [{"type": "text", "text": t}]}))
        };
        let (texts, sentences): (Vec<String>, Vec<Features>) = detector
            .output_sentence_features(&support::corpus::result_value(r))
            .into_iter()
            .map(|s| (s.text, s.buckets))
            .unzip();
        // A sentence repeated across a source's items (a shared carrier) is learned once.
        let seen = seen.entry(source.clone()).or_default();
        let mut fresh = |read: Vec<SentenceFeatures>| -> Vec<Features> {
            read.into_iter()
                .filter(|s| seen.insert(s.text.clone()))
                .map(|s| s.buckets)
                .collect()
        };
        // The instruction in an injected string carries some word class (a verb of acting, an
        // obligation, an override ...); the question or text it carries may not.
        let candidates = |read: Vec<SentenceFeatures>| -> Vec<Features> {
            let any = read.iter().any(|s| s.has_classes);
            read.into_iter()
                .filter(|s| s.has_classes || !any)
                .map(|s| s.buckets)
                .collect()
        };
        let (bag, benign) = if attack {
            match r["meta"]["payload"]
                .as_str()
                .filter(|p| !p.trim().is_empty())
            {
                Some(payload) => {
                    let carrier = if text.contains(payload) {
                        fresh(read(&text.replace(payload, "\n")))
                    } else {
                        Vec::new()
                    };
                    (candidates(read(payload)), carrier)
                }
                None => (
                    candidates(
                        detector.output_sentence_features(&support::corpus::result_value(r)),
                    ),
                    Vec::new(),
                ),
            }
        } else {
            (Vec::new(), fresh(read(text)))
        };
        docs.push(Doc {
            source,
            attack,
            sentences,
            texts,
            bag,
            benign,
        });
    }
    if docs.iter().all(|d| !d.attack) || docs.iter().all(|d| d.attack) {
        bail!("the tune split needs injected and benign results");
    }
    Ok(docs)
}

struct Model {
    bias: f32,
    weights: Vec<f32>,
}

impl Model {
    fn score(&self, features: &[u32]) -> f32 {
        learned::score(self.bias, &self.weights, features)
    }
}

fn doc_score(model: &Model, doc: &Doc) -> f32 {
    doc.sentences
        .iter()
        .map(|s| model.score(s))
        .fold(0.0, f32::max)
}

/// Two rounds: every sentence of a bag positive, then only those the first round found.
fn train_model(docs: &[&Doc]) -> Model {
    let first = fit(&instances(docs, None));
    fit(&instances(docs, Some(&first)))
}

fn instances<'a>(docs: &[&'a Doc], first: Option<&Model>) -> Vec<Instance<'a>> {
    let mut bags: BTreeMap<&str, usize> = BTreeMap::new();
    let mut payloads: BTreeMap<&str, BTreeSet<&[Features]>> = BTreeMap::new();
    let mut negatives: BTreeMap<&str, usize> = BTreeMap::new();
    for d in docs {
        if d.attack && !d.bag.is_empty() {
            *bags.entry(&d.source).or_default() += 1;
            payloads.entry(&d.source).or_default().insert(&d.bag);
        }
        *negatives.entry(&d.source).or_default() += d.benign.len();
    }
    let per = |n: usize| 1.0 / (n.max(1) as f32).sqrt();
    // A source weighs as the square root of its distinct payloads, shared by its bags: one
    // instruction in seventeen carriers is one piece of evidence, not seventeen.
    let per_bag =
        |source: &str| (payloads[source].len() as f32).sqrt() / bags[source].max(1) as f32;
    let mut out = Vec::new();
    for d in docs {
        for f in &d.benign {
            out.push(Instance {
                features: f,
                positive: false,
                weight: per(negatives[d.source.as_str()]),
            });
        }
        if !d.attack || d.bag.is_empty() {
            continue;
        }
        let kept: Vec<&Features> = match first {
            None => d.bag.iter().collect(),
            Some(m) => {
                let scores: Vec<f32> = d.bag.iter().map(|s| m.score(s)).collect();
                let best = scores.iter().copied().fold(0.0, f32::max);
                d.bag
                    .iter()
                    .zip(&scores)
                    .filter(|(_, s)| **s >= 0.5 || **s == best)
                    .map(|(f, _)| f)
                    .collect()
            }
        };
        let weight = per_bag(d.source.as_str()) / kept.len() as f32;
        out.extend(kept.into_iter().map(|f| Instance {
            features: f,
            positive: true,
            weight,
        }));
    }
    // As much weight on each side.
    let total = |positive: bool| {
        out.iter()
            .filter(|i| i.positive == positive)
            .map(|i| i.weight)
            .sum::<f32>()
    };
    let ratio = total(false) / total(true).max(f32::MIN_POSITIVE);
    for i in out.iter_mut().filter(|i| i.positive) {
        i.weight *= ratio;
    }
    let mean = out.iter().map(|i| i.weight).sum::<f32>() / out.len().max(1) as f32;
    for i in &mut out {
        i.weight /= mean;
    }
    out
}

/// Logistic regression, AdaGrad, L2 on the weights a step touches; a fixed shuffle per epoch.
fn fit(data: &[Instance]) -> Model {
    let n = 1usize << BITS;
    let mut m = Model {
        bias: 0.0,
        weights: vec![0.0; n],
    };
    let mut g2 = vec![1e-8f32; n];
    let mut bias_g2 = 1e-8f32;
    let mut order: Vec<usize> = (0..data.len()).collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..EPOCHS {
        for i in (1..order.len()).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            order.swap(i, (rng % (i as u64 + 1)) as usize);
        }
        for &k in &order {
            let x = &data[k];
            let p = m.score(x.features);
            let g = (p - f32::from(u8::from(x.positive))) * x.weight;
            bias_g2 += g * g;
            m.bias -= LEARNING_RATE * g / bias_g2.sqrt();
            let scaled = g * learned::feature_scale(x.features.len());
            for &b in x.features {
                let b = b as usize;
                let gb = scaled + L2 * m.weights[b];
                g2[b] += gb * gb;
                m.weights[b] -= LEARNING_RATE * gb / g2[b].sqrt();
            }
        }
    }
    m
}

/// The lowest score that lets at most `rate` of the benign scores reach it.
fn threshold(benign: &[f32], rate: f64) -> f32 {
    let mut sorted = benign.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let allowed = (rate * sorted.len() as f64).floor() as usize;
    sorted.get(allowed).map_or(0.5, |s| (s + 1e-4).min(0.999))
}

fn report(scored: &[(&Doc, f32)], medium: f32, high: f32) {
    let mut by: BTreeMap<&str, [usize; 6]> = BTreeMap::new();
    for (d, s) in scored {
        let row = by.entry(&d.source).or_default();
        let base = if d.attack { 0 } else { 3 };
        row[base] += 1;
        row[base + 1] += usize::from(*s >= medium);
        row[base + 2] += usize::from(*s >= high);
    }
    println!(
        "  {:<18} {:>18} {:>18}",
        "source", "injected: med/high", "benign: med/high"
    );
    for (source, r) in by {
        println!(
            "  {:<18} {:>5}/{:<5}of {:>5} {:>5}/{:<5}of {:>5}",
            source, r[1], r[2], r[0], r[4], r[5], r[3]
        );
    }
}
