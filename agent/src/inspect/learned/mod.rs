//! The learned second opinion on tool results: a logistic model over each sentence's words and
//! the intent layer's word classes, trained by `examples/train_injection_model.rs` on the
//! corpus's `tune` split and shipped in the binary (`model.bin`, no download).
//!
//! Where the intent layer's combinations are written by hand, the model weighs the same word
//! classes (and their pairs, and the words themselves) from data, so a phrasing no combination
//! names can still score. Its score is a probability per sentence; the document scores as its
//! strongest sentence. It reports at `high` (an alert under the default policy, never blocked
//! by it: blocking by default takes `critical`), or at `low` as context.
//!
//! The model is only valid for the word classes it was trained on: the file carries their
//! fingerprint, and a detector built with other classes refuses to load it.

use std::fmt;

use super::intent::{ReadSentence, Reading, Signal};
use super::{Category, Evidence, Finding, Severity};

mod features;

pub use features::BITS;
use features::for_each_feature;

/// The rule id of the model's findings.
pub const RULE: &str = "learned.instruction";

const MAGIC: &[u8; 8] = b"AGSHLM01";
/// Magic, fingerprint, bits, bias, scale, medium and high thresholds.
const HEADER: usize = 8 + 8 + 4 + 4 * 4;

/// The model shipped with this build.
static SHIPPED: &[u8] = include_bytes!("model.bin");

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("the model file is {0} bytes, shorter than its header")]
    Truncated(usize),
    #[error("the model file does not start with {MAGIC:?}")]
    Magic,
    #[error("the model has {found} feature bits, this build hashes into {expected}")]
    Bits { found: u32, expected: u32 },
    #[error("the model holds {found} weights, its header promises {expected}")]
    Length { found: usize, expected: usize },
    #[error(
        "the model was trained on other word classes (fingerprint {found:016x}, these are \
         {expected:016x}): retrain it with `make model`"
    )]
    Stale { found: u64, expected: u64 },
    #[error("the model's thresholds are not 0 < medium ({medium}) <= high ({high}) < 1")]
    Thresholds { medium: f32, high: f32 },
}

/// A trained model: one weight per feature bucket, and the probabilities at which a sentence
/// is reported at `medium` and at `high`.
#[derive(Clone, PartialEq)]
pub struct ModelFile {
    pub fingerprint: u64,
    pub bias: f32,
    pub medium: f32,
    pub high: f32,
    /// `1 << BITS` weights.
    pub weights: Vec<f32>,
}

impl fmt::Debug for ModelFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelFile")
            .field("fingerprint", &format_args!("{:016x}", self.fingerprint))
            .field("medium", &self.medium)
            .field("high", &self.high)
            .field("weights", &self.weights.len())
            .finish()
    }
}

impl ModelFile {
    /// Weights are stored as `i16` scaled by the largest magnitude: half the size of `f32`,
    /// and a step far below any weight that matters.
    pub fn to_bytes(&self) -> Vec<u8> {
        let max = self
            .weights
            .iter()
            .fold(0f32, |m, w| m.max(w.abs()))
            .max(f32::MIN_POSITIVE);
        let scale = max / f32::from(i16::MAX);
        let mut out = Vec::with_capacity(HEADER + 2 * self.weights.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&BITS.to_le_bytes());
        for v in [self.bias, scale, self.medium, self.high] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for w in &self.weights {
            // In range by construction of `scale`.
            let q = (w / scale).round() as i16;
            out.extend_from_slice(&q.to_le_bytes());
        }
        out
    }

    pub fn from_bytes(b: &[u8]) -> Result<Self, ModelError> {
        if b.len() < HEADER {
            return Err(ModelError::Truncated(b.len()));
        }
        if &b[..8] != MAGIC {
            return Err(ModelError::Magic);
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        let f32_at = |i: usize| f32::from_bits(u32_at(i));
        let bits = u32_at(16);
        if bits != BITS {
            return Err(ModelError::Bits {
                found: bits,
                expected: BITS,
            });
        }
        let (bias, scale, medium, high) = (f32_at(20), f32_at(24), f32_at(28), f32_at(32));
        let body = &b[HEADER..];
        let expected = 1usize << BITS;
        if body.len() != 2 * expected {
            return Err(ModelError::Length {
                found: body.len() / 2,
                expected,
            });
        }
        if !(0.0 < medium && medium <= high && high < 1.0) {
            return Err(ModelError::Thresholds { medium, high });
        }
        let weights = body
            .chunks_exact(2)
            .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])) * scale)
            .collect();
        Ok(Self {
            fingerprint: u64_at(8),
            bias,
            medium,
            high,
            weights,
        })
    }
}

/// The model, ready to score readings.
pub(crate) struct Model {
    file: ModelFile,
}

impl Model {
    /// The shipped model, checked against the word classes of this build.
    pub(crate) fn shipped(fingerprint: u64) -> Result<Self, ModelError> {
        Self::new(ModelFile::from_bytes(SHIPPED)?, fingerprint)
    }

    pub(crate) fn new(file: ModelFile, fingerprint: u64) -> Result<Self, ModelError> {
        if file.fingerprint != fingerprint {
            return Err(ModelError::Stale {
                found: file.fingerprint,
                expected: fingerprint,
            });
        }
        Ok(Self { file })
    }

    fn score(&self, buckets: &[u32]) -> f32 {
        score(self.file.bias, &self.file.weights, buckets)
    }

    /// The finding on the strongest sentence of a tool result, if it reaches the `medium`
    /// threshold. Definitions are not judged: the model learned from results.
    pub(crate) fn judge(&self, reading: &Reading) -> Option<Finding> {
        if reading.kind() != super::intent::Kind::Output {
            return None;
        }
        let mut buckets = Vec::new();
        let mut prev = 0;
        let mut best: Option<(f32, ReadSentence, u64)> = None;
        for s in reading.sentences() {
            buckets.clear();
            for_each_feature(&s, prev, &mut |parts| buckets.push(features::bucket(parts)));
            let p = self.score(&buckets);
            let classes = s.classes;
            if best.as_ref().is_none_or(|(b, ..)| p > *b) {
                best = Some((p, s, prev));
            }
            prev = classes;
        }
        let (p, sentence, prev) = best?;
        // Between the two thresholds the score is context (`low`, never an alert): at the
        // `medium` threshold 2% of benign results of unseen styles would alert.
        let severity = if p >= self.file.high {
            Severity::High
        } else if p >= self.file.medium {
            Severity::Low
        } else {
            return None;
        };
        let mut evidence = vec![Evidence {
            signal: "score".into(),
            text: format!("{p:.3}"),
        }];
        evidence.extend(self.explain(&sentence, prev));
        Some(reading.finding(
            RULE,
            Category::HiddenInstructions,
            severity,
            sentence.span,
            evidence,
        ))
    }

    /// The features that raised a sentence's score most, strongest first.
    fn explain(&self, sentence: &ReadSentence, prev: u64) -> Vec<Evidence> {
        let mut weighed: Vec<(f32, String)> = Vec::new();
        for_each_feature(sentence, prev, &mut |parts| {
            let w = self.file.weights[features::bucket(parts) as usize];
            // Shown unscaled: the order is what explains.
            if w > 0.0 {
                weighed.push((w, features::describe(parts)));
            }
        });
        weighed.sort_by(|a, b| b.0.total_cmp(&a.0));
        weighed.dedup_by(|a, b| a.1 == b.1);
        weighed
            .into_iter()
            .take(4)
            .map(|(w, name)| Evidence {
                signal: "feature".into(),
                text: format!("{name} (+{w:.2})"),
            })
            .collect()
    }
}

/// The probability that a sentence (its feature buckets) is an instruction aimed at the model.
/// The weights add up scaled by `1/sqrt(n)`, so a long sentence is not sure of itself for being
/// long.
pub fn score(bias: f32, weights: &[f32], buckets: &[u32]) -> f32 {
    let sum: f32 = buckets.iter().map(|b| weights[*b as usize]).sum();
    sigmoid(bias + sum * feature_scale(buckets.len()))
}

/// How much each of `n` features counts in a sentence's score.
pub fn feature_scale(n: usize) -> f32 {
    1.0 / (n.max(1) as f32).sqrt()
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

/// A sentence as the model reads it, for training.
#[derive(Debug, Clone)]
pub struct SentenceFeatures {
    /// The normalised text.
    pub text: String,
    /// Whether the intent layer found any word class in it.
    pub has_classes: bool,
    pub buckets: Vec<u32>,
}

/// Every sentence of a reading with its feature buckets.
pub(crate) fn sentence_features(reading: &Reading) -> Vec<SentenceFeatures> {
    let mut prev = 0;
    reading
        .sentences()
        .map(|s| {
            let mut buckets = Vec::new();
            for_each_feature(&s, prev, &mut |parts| buckets.push(features::bucket(parts)));
            prev = s.classes;
            SentenceFeatures {
                text: s.cased.to_string(),
                has_classes: s.classes != 0,
                buckets,
            }
        })
        .collect()
}

/// The names of the word classes set in `bits`.
fn class_names(bits: u64) -> impl Iterator<Item = &'static str> {
    Signal::CLASSES
        .iter()
        .filter(move |s| bits & s.bit() != 0)
        .map(|s| s.name())
}

#[cfg(test)]
mod tests;
