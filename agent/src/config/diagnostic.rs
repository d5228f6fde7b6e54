//! Positions and messages: what every config error and warning carries.

use std::fmt;
use std::path::PathBuf;

/// A 1-based position in a config or policy file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl Location {
    pub const fn new(line: usize, column: usize) -> Self {
        Self { line, column }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Whether a diagnostic stops the file from loading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Error,
    Warning,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Error => "error",
            Level::Warning => "warning",
        })
    }
}

/// One finding about a config or policy file, printed as `origin:line:col: level: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name (or other origin) given to the loader.
    pub origin: String,
    pub line: usize,
    pub column: usize,
    pub level: Level,
    pub message: String,
}

impl Diagnostic {
    pub fn location(&self) -> Location {
        Location::new(self.line, self.column)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.origin, self.line, self.column, self.level, self.message
        )
    }
}

/// Why a config or policy file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file was read but is not valid; every error found, in file order.
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ConfigError {
    /// The diagnostics of an invalid file (empty for I/O errors).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ConfigError::Invalid(d) => d,
            ConfigError::Io { .. } => &[],
        }
    }
}

/// Collects the diagnostics of one load, errors and warnings alike.
pub(crate) struct Report {
    origin: String,
    items: Vec<Diagnostic>,
}

impl Report {
    pub fn new(origin: &str) -> Self {
        Self {
            origin: origin.to_string(),
            items: Vec::new(),
        }
    }

    /// What the diagnostics name as their file.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn error(&mut self, at: Location, message: impl Into<String>) {
        self.push(at, Level::Error, message.into());
    }

    pub fn warn(&mut self, at: Location, message: impl Into<String>) {
        self.push(at, Level::Warning, message.into());
    }

    fn push(&mut self, at: Location, level: Level, message: String) {
        self.items.push(Diagnostic {
            origin: self.origin.clone(),
            line: at.line,
            column: at.column,
            level,
            message,
        });
    }

    /// Errors (all of them) if there are any, else the warnings, both in file order.
    pub fn finish(mut self) -> Result<Vec<Diagnostic>, ConfigError> {
        self.items.sort_by_key(|d| (d.line, d.column, d.level));
        let (errors, warnings): (Vec<_>, Vec<_>) = self
            .items
            .into_iter()
            .partition(|d| d.level == Level::Error);
        if errors.is_empty() {
            Ok(warnings)
        } else {
            Err(ConfigError::Invalid(errors))
        }
    }
}

fn render(diagnostics: &[Diagnostic]) -> String {
    let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_per_diagnostic() {
        let d = |line, message: &str| Diagnostic {
            origin: "p.yaml".into(),
            line,
            column: 3,
            level: Level::Error,
            message: message.into(),
        };
        let err = ConfigError::Invalid(vec![d(1, "first"), d(7, "second")]);
        assert_eq!(
            err.to_string(),
            "p.yaml:1:3: error: first\np.yaml:7:3: error: second"
        );
        assert_eq!(err.diagnostics().len(), 2);
    }
}
