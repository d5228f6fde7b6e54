//! A getopt-style scan of a launcher's own options, up to the operand that names what it runs.
//!
//! Each launcher has its own table of options that take a value: knowing them is what keeps
//! `npx --registry URL pkg` from reading URL as the package, and `docker run -e VAR image` from
//! reading VAR as the image.

/// One launcher's option syntax. Options are written as spelled: `--from`, `-p`.
pub(super) struct Syntax {
    /// Options that take a value: `--opt VALUE`, `--opt=VALUE`, `-o VALUE`, `-oVALUE`, `-o=VALUE`.
    pub with_value: &'static [&'static str],
    /// Options that take none; only consulted when `unknown_takes_value`.
    pub without_value: &'static [&'static str],
    /// Whether an option in neither list takes a value (docker's mostly do).
    pub unknown_takes_value: bool,
    /// Options that take a value and after which the launcher reads no more options:
    /// python's `-m MODULE` and `-c CODE`.
    pub terminal: &'static [&'static str],
}

impl Syntax {
    fn takes_value(&self, name: Name<'_>) -> bool {
        if name.is_any(self.with_value) || name.is_any(self.terminal) {
            true
        } else if name.is_any(self.without_value) {
            false
        } else {
            self.unknown_takes_value
        }
    }
}

/// An option's name as written, without its dashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Name<'a> {
    Long(&'a str),
    Short(char),
}

impl Name<'_> {
    /// Whether this is the option spelled `spelling` (`--from`, `-p`).
    pub fn is(self, spelling: &str) -> bool {
        match self {
            Name::Long(name) => spelling.strip_prefix("--") == Some(name),
            Name::Short(c) => {
                let mut chars = spelling.chars();
                chars.next() == Some('-') && chars.next() == Some(c) && chars.next().is_none()
            }
        }
    }

    pub fn is_any(self, spellings: &[&str]) -> bool {
        spellings.iter().any(|s| self.is(s))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Opt<'a> {
    pub name: Name<'a>,
    pub value: Option<&'a str>,
}

/// The options before the first operand, in order.
#[derive(Debug)]
pub(super) struct Scan<'a> {
    pub options: Vec<Opt<'a>>,
    /// The first operand and everything after it; after a terminal option, what follows it.
    pub rest: &'a [String],
}

impl<'a> Scan<'a> {
    /// The value of the last of these options given (later ones override earlier ones).
    pub fn value(&self, spellings: &[&str]) -> Option<&'a str> {
        self.values(spellings).last()
    }

    /// Every value of these options, in order (for repeatable options such as `-p`).
    pub fn values<'s>(&'s self, spellings: &'s [&str]) -> impl Iterator<Item = &'a str> + 's {
        self.options
            .iter()
            .filter(|o| o.name.is_any(spellings))
            .filter_map(|o| o.value)
    }

    pub fn operand(&self) -> Option<&'a str> {
        self.rest.first().map(String::as_str)
    }

    /// The option that ended the scan, if one of the syntax's terminal options did.
    pub fn terminal(&self, syntax: &Syntax) -> Option<Opt<'a>> {
        self.options
            .last()
            .filter(|o| o.name.is_any(syntax.terminal))
            .copied()
    }
}

pub(super) fn scan<'a>(args: &'a [String], syntax: &Syntax) -> Scan<'a> {
    let mut options = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg == "--" {
            return Scan {
                options,
                rest: &args[i..],
            };
        }
        let before = options.len();
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (Name::Long(name), Some(value)),
                None => (Name::Long(long), None),
            };
            let value = match inline {
                None if syntax.takes_value(name) => next(args, &mut i),
                inline => inline,
            };
            options.push(Opt { name, value });
        } else if let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) {
            short_cluster(cluster, args, &mut i, syntax, &mut options);
        } else {
            // The first operand (a lone `-` is one: stdin for python).
            return Scan {
                options,
                rest: &args[i - 1..],
            };
        }
        if options[before..]
            .iter()
            .any(|o| o.name.is_any(syntax.terminal))
        {
            return Scan {
                options,
                rest: &args[i..],
            };
        }
    }
    Scan { options, rest: &[] }
}

/// `-it`, `-eVAR`, `-e=VAR`, `-e VAR`: flags until one that takes a value, which takes the rest
/// of the cluster or the next argument.
fn short_cluster<'a>(
    cluster: &'a str,
    args: &'a [String],
    i: &mut usize,
    syntax: &Syntax,
    options: &mut Vec<Opt<'a>>,
) {
    for (at, c) in cluster.char_indices() {
        let name = Name::Short(c);
        let after = &cluster[at + c.len_utf8()..];
        if syntax.takes_value(name) {
            let attached = after.strip_prefix('=').unwrap_or(after);
            let value = if attached.is_empty() {
                next(args, i)
            } else {
                Some(attached)
            };
            options.push(Opt { name, value });
            return;
        }
        if let Some(value) = after.strip_prefix('=') {
            options.push(Opt {
                name,
                value: Some(value),
            });
            return;
        }
        options.push(Opt { name, value: None });
    }
}

fn next<'a>(args: &'a [String], i: &mut usize) -> Option<&'a str> {
    let value = args.get(*i)?;
    *i += 1;
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYNTAX: Syntax = Syntax {
        with_value: &["-e", "--env"],
        without_value: &[],
        unknown_takes_value: false,
        terminal: &["-m"],
    };

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_values_and_operand() {
        let args = strings(&[
            "-it", "-eA=1", "-e=B", "-e", "C", "--env", "D", "--x=y", "img", "-e",
        ]);
        let s = scan(&args, &SYNTAX);
        let values: Vec<_> = s.values(&["-e", "--env"]).collect();
        assert_eq!(values, ["A=1", "B", "C", "D"]);
        assert_eq!(s.value(&["--x"]), Some("y"));
        assert!(s.options[0].name.is("-i") && s.options[1].name.is("-t"));
        assert_eq!(s.operand(), Some("img"));
        assert_eq!(s.rest.len(), 2);
    }

    #[test]
    fn double_dash_and_terminal_options_end_the_scan() {
        let args = strings(&["-x", "--", "-e", "v"]);
        let s = scan(&args, &SYNTAX);
        assert_eq!((s.options.len(), s.operand()), (1, Some("-e")));
        let args = strings(&["-um", "mod", "--flag"]);
        let s = scan(&args, &SYNTAX);
        assert_eq!(s.terminal(&SYNTAX).and_then(|o| o.value), Some("mod"));
        assert_eq!(s.operand(), Some("--flag"));
        let args = strings(&["-e"]);
        let s = scan(&args, &SYNTAX);
        assert_eq!((s.options[0].value, s.operand()), (None, None));
    }
}
