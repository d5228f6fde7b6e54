//! Rule-family tests (evasions included) and the corpus rate check.

use super::*;
use serde_json::json;

fn det() -> Detector {
    match Detector::new(DetectorOptions::default()) {
        Ok(d) => d,
        Err(e) => panic!("detector builds: {e}"),
    }
}
