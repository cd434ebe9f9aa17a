//! The strategies by name, built from `name=value` parameters as `backlog backoff`
//! takes them, each with its defaults, and its closed-form retry budget where it has one.

use super::{Adaptive, Exponential, Jitter, Sequence, SequenceKind, Step, Strategy};

/// The strategy names, for messages.
pub const NAMES: &str = "constant, exponential, httpx, fibonacci, arctan, sidekiq, buckets, lild, limd, mild, mimd (and progressive, with --schedule)";

/// The count of retries fitting in `t` seconds by formula, and the formula.
pub type ClosedForm = Box<dyn Fn(f64) -> (usize, String)>;

/// A strategy built from parameters.
pub struct Built {
    /// The strategy, with its parameters (and the shared `max_attempts`, `max_total`,
    /// `jitter`) applied.
    pub strategy: Box<dyn Strategy>,
    /// The count of retries fitting in `t` seconds by formula, and the formula; none
    /// where there is no closed form, or a cap or jitter makes it wrong.
    pub closed_form: Option<ClosedForm>,
}

/// Why a strategy cannot be built from its name and parameters; each names the
/// strategy and the parameter, and says what to write.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StrategyError {
    /// No strategy of that name.
    #[error("no strategy {0:?}; the strategies are {NAMES}")]
    Unknown(String),
    /// A parameter not written `name=value`.
    #[error("{strategy}: parameter {param:?} is not name=value")]
    NotNameValue {
        /// The strategy's name.
        strategy: String,
        /// The parameter as given.
        param: String,
    },
    /// A parameter the strategy does not take.
    #[error("{strategy}: no parameter {param:?}; it takes {takes}")]
    NoSuchParameter {
        /// The strategy's name.
        strategy: String,
        /// The parameter's name.
        param: String,
        /// The parameters it takes, joined.
        takes: String,
    },
    /// A value that is not a number.
    #[error("{strategy}: {param}={value:?} is not a number")]
    NotANumber {
        /// The strategy's name.
        strategy: String,
        /// The parameter's name.
        param: &'static str,
        /// The value as given.
        value: String,
    },
    /// A value that is not a duration.
    #[error("{strategy}: {param}: {source}")]
    NotADuration {
        /// The strategy's name.
        strategy: String,
        /// The parameter's name.
        param: &'static str,
        /// Why.
        source: crate::duration::DurationError,
    },
    /// A value outside the parameter's range.
    #[error("{strategy}: {param}: {value} is out of range; use {range}")]
    OutOfRange {
        /// The strategy's name.
        strategy: String,
        /// The parameter's name.
        param: &'static str,
        /// The value as given.
        value: String,
        /// The range, in words.
        range: String,
    },
    /// A word the parameter does not take (`jitter=`).
    #[error("{strategy}: {param}={value:?}; use {takes}")]
    NotAWord {
        /// The strategy's name.
        strategy: String,
        /// The parameter's name.
        param: &'static str,
        /// The value as given.
        value: String,
        /// The words it takes.
        takes: &'static str,
    },
}

/// Parameters as given: `name=value`, durations already in seconds.
struct Params<'a> {
    strategy: &'a str,
    given: Vec<(String, String)>,
    unit: f64,
    used: Vec<&'static str>,
}

impl Params<'_> {
    fn text(&mut self, key: &'static str) -> Option<String> {
        self.used.push(key);
        self.given
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn parsed(&mut self, key: &'static str, default: f64) -> Result<f64, StrategyError> {
        match self.text(key) {
            None => Ok(default),
            Some(v) if v == "inf" => Ok(f64::INFINITY),
            Some(v) => v.parse().map_err(|_| StrategyError::NotANumber {
                strategy: self.strategy.into(),
                param: key,
                value: v,
            }),
        }
    }

    /// A factor, within `range`.
    fn number(
        &mut self,
        key: &'static str,
        default: f64,
        range: Factor,
    ) -> Result<f64, StrategyError> {
        let n = self.parsed(key, default)?;
        if (range.0..=range.1).contains(&n) {
            return Ok(n);
        }
        Err(self.out_of_range(key, format!("{} to {}", range.0, range.1)))
    }

    fn out_of_range(&self, param: &'static str, range: String) -> StrategyError {
        StrategyError::OutOfRange {
            strategy: self.strategy.into(),
            param,
            value: self.written(param),
            range,
        }
    }

    /// A number in the chosen unit, or a duration like `1h`, returned in seconds,
    /// within `range`.
    fn delay(
        &mut self,
        key: &'static str,
        default: f64,
        range: Span,
    ) -> Result<f64, StrategyError> {
        let secs = self.seconds(key, default)?;
        if range.contains(secs) {
            return Ok(secs);
        }
        Err(self.out_of_range(key, range.to_string()))
    }

    fn seconds(&mut self, key: &'static str, default: f64) -> Result<f64, StrategyError> {
        if let Some(text) = self
            .given
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            && text.parse::<f64>().is_err()
            && text != "inf"
        {
            self.used.push(key);
            let negative = text.strip_prefix('-');
            let d = crate::duration::parse(negative.unwrap_or(&text)).map_err(|source| {
                StrategyError::NotADuration {
                    strategy: self.strategy.into(),
                    param: key,
                    source,
                }
            })?;
            return Ok(d.as_secs_f64() * if negative.is_some() { -1.0 } else { 1.0 });
        }
        Ok(self.parsed(key, default)? * self.unit)
    }

    /// The value as given, for messages.
    fn written(&self, key: &str) -> String {
        self.given
            .iter()
            .find(|(k, _)| k == key)
            .map_or_else(String::new, |(_, v)| v.clone())
    }

    fn finish(self) -> Result<(), StrategyError> {
        match self
            .given
            .iter()
            .find(|(k, _)| !self.used.contains(&k.as_str()))
        {
            Some((k, _)) => Err(StrategyError::NoSuchParameter {
                strategy: self.strategy.into(),
                param: k.clone(),
                takes: self.used.join(", "),
            }),
            None => Ok(()),
        }
    }
}

/// The range of a factor, bounds included. NaN is in none.
#[derive(Clone, Copy)]
struct Factor(f64, f64);

/// How much a delay grows on a failure: from staying as it is to a thousandfold.
const GROWTH: Factor = Factor(1.0, 1000.0);
/// How much it shrinks on a success: from zero to staying as it is.
const SHRINK: Factor = Factor(0.0, 1.0);

/// The range of a delay parameter, in seconds. NaN is in none.
#[derive(Clone, Copy)]
enum Span {
    /// `0s` to `36500d`, or `inf` (a cap that never binds).
    Cap,
    /// `0s` to `36500d`.
    Delay,
    /// `-36500d` to `0s`: a step taken off the delay.
    Decrease,
}

impl Span {
    fn contains(self, secs: f64) -> bool {
        let longest = crate::duration::LONGEST.as_secs_f64();
        match self {
            Span::Cap => (0.0..=longest).contains(&secs) || secs == f64::INFINITY,
            Span::Delay => (0.0..=longest).contains(&secs),
            Span::Decrease => (-longest..=0.0).contains(&secs),
        }
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Span::Cap => "0s to 36500d, or inf",
            Span::Delay => "0s to 36500d",
            Span::Decrease => "-36500d to 0s (a step taken off the delay)",
        })
    }
}

/// Builds strategy `name` from `name=value` parameters; delays in the parameters and
/// the results are in units of `unit` seconds.
pub fn build(name: &str, params: &[String], unit: f64) -> Result<Built, StrategyError> {
    let mut given = Vec::new();
    for p in params {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| StrategyError::NotNameValue {
                strategy: name.into(),
                param: p.clone(),
            })?;
        given.push((k.trim().to_string(), v.trim().to_string()));
    }
    let mut p = Params {
        strategy: name,
        given,
        unit,
        used: Vec::new(),
    };
    let built = match name {
        "constant" => {
            let d = p.delay("delay", 1.0, Span::Delay)?;
            Built {
                strategy: Box::new(Adaptive::constant(d)),
                closed_form: Some(Box::new(move |t| {
                    ((t / d).floor() as usize, "n·d ≤ t ⇒ n = ⌊t/d⌋".into())
                })),
            }
        }
        "exponential" => exponential(&mut p)?,
        "httpx" => {
            let (b, max) = (
                p.delay("factor", 0.5, Span::Delay)?,
                p.delay("max", 120.0, Span::Cap)?,
            );
            Built {
                strategy: Box::new(Exponential::httpx(b, max)),
                closed_form: Some(Box::new(move |t| {
                    (
                        (t / b + 1.0).log2().floor() as usize + 1,
                        "b·(2ⁿ⁻¹ − 1) ≤ t ⇒ n = ⌊log₂(t/b + 1)⌋ + 1 (before the cap)".into(),
                    )
                })),
            }
        }
        "fibonacci" | "arctan" | "sidekiq" | "buckets" => {
            let kind = match name {
                "fibonacci" => SequenceKind::Fibonacci {
                    first: p.delay("first", 1.0, Span::Delay)?,
                    second: p.delay("second", 1.0, Span::Delay)?,
                },
                "arctan" => SequenceKind::Arctan,
                "sidekiq" => SequenceKind::Sidekiq,
                _ => SequenceKind::Buckets,
            };
            let seq = Sequence {
                kind,
                max: p.delay("max", f64::INFINITY, Span::Cap)?,
                on_success: p.delay("success", 0.0, Span::Delay)?,
            };
            Built {
                strategy: Box::new(seq),
                closed_form: None,
            }
        }
        "lild" | "limd" | "mild" | "mimd" => adaptive(name, &mut p)?,
        other => return Err(StrategyError::Unknown(other.into())),
    };
    p.finish()?;
    Ok(built)
}

/// `exponential`: `initial·factorⁿ`, capped at `max`, with an optional jitter.
fn exponential(p: &mut Params<'_>) -> Result<Built, StrategyError> {
    let (a, f, max) = (
        p.delay("initial", 1.0, Span::Delay)?,
        p.number("factor", 2.0, GROWTH)?,
        p.delay("max", f64::INFINITY, Span::Cap)?,
    );
    let jitter = match p.text("jitter").as_deref() {
        None | Some("none") => Jitter::None,
        Some("full") => Jitter::Full,
        Some("equal") => Jitter::Equal,
        Some("decorrelated") => Jitter::Decorrelated,
        Some(other) => {
            return Err(StrategyError::NotAWord {
                strategy: "exponential".into(),
                param: "jitter",
                value: other.into(),
                takes: "none, full, equal or decorrelated",
            });
        }
    };
    let exact = jitter == Jitter::None && max.is_infinite() && f > 1.0;
    Ok(Built {
        strategy: Box::new(Exponential {
            jitter,
            ..Exponential::classic(a, f, max)
        }),
        closed_form: exact.then(|| {
            Box::new(move |t: f64| {
                (
                    (t * (f - 1.0) / a + 1.0).log(f).floor() as usize,
                    "a·(fⁿ − 1)/(f − 1) ≤ t ⇒ n = ⌊log_f(t·(f − 1)/a + 1)⌋".into(),
                )
            }) as ClosedForm
        }),
    })
}

/// `lild`, `limd`, `mild`, `mimd`: a delay that a failure lengthens and a success
/// shortens, each by a step (l) or a factor (m).
fn adaptive(name: &str, p: &mut Params<'_>) -> Result<Built, StrategyError> {
    let bytes = name.as_bytes();
    let on_failure = if bytes[0] == b'm' {
        Step::Mul(p.number("failure", 2.0, GROWTH)?)
    } else {
        Step::Add(p.delay("failure", 1.0, Span::Delay)?)
    };
    let on_success = if bytes[2] == b'm' {
        Step::Mul(p.number("success", 0.5, SHRINK)?)
    } else {
        Step::Add(p.delay("success", -1.0, Span::Decrease)?)
    };
    let strategy = Adaptive {
        initial: p.delay("initial", 1.0, Span::Delay)?,
        on_failure,
        on_success,
        min: p.delay("min", 0.0, Span::Delay)?,
        max: p.delay("max", f64::INFINITY, Span::Cap)?,
    };
    Ok(Built {
        strategy: Box::new(strategy),
        closed_form: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(name: &str, params: &[&str]) -> String {
        let params: Vec<String> = params.iter().map(|p| p.to_string()).collect();
        match build(name, &params, 1.0) {
            Ok(_) => panic!("{name} {params:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    /// Every parameter has a range, and a value outside it (NaN included) is named
    /// with its strategy, its value and the range.
    #[test]
    fn each_parameter_is_refused_outside_its_range() {
        let cases = [
            (
                "constant",
                "delay=-5",
                "constant: delay: -5 is out of range; use 0s to 36500d",
            ),
            (
                "constant",
                "delay=nan",
                "constant: delay: nan is out of range; use 0s to 36500d",
            ),
            (
                "constant",
                "delay=1e300",
                "constant: delay: 1e300 is out of range; use 0s to 36500d",
            ),
            (
                "constant",
                "delay=inf",
                "constant: delay: inf is out of range; use 0s to 36500d",
            ),
            (
                "exponential",
                "initial=-1",
                "exponential: initial: -1 is out of range; use 0s to 36500d",
            ),
            (
                "exponential",
                "factor=0.5",
                "exponential: factor: 0.5 is out of range; use 1 to 1000",
            ),
            (
                "exponential",
                "factor=1e300",
                "exponential: factor: 1e300 is out of range; use 1 to 1000",
            ),
            (
                "exponential",
                "max=-1h",
                "exponential: max: -1h is out of range; use 0s to 36500d, or inf",
            ),
            (
                "httpx",
                "factor=99999999d",
                "httpx: factor: 99999999d is out of range; use 0s to 36500d",
            ),
            (
                "fibonacci",
                "second=-1",
                "fibonacci: second: -1 is out of range; use 0s to 36500d",
            ),
            (
                "sidekiq",
                "success=nan",
                "sidekiq: success: nan is out of range; use 0s to 36500d",
            ),
            (
                "mimd",
                "failure=0.1",
                "mimd: failure: 0.1 is out of range; use 1 to 1000",
            ),
            (
                "mimd",
                "success=5",
                "mimd: success: 5 is out of range; use 0 to 1",
            ),
            (
                "lild",
                "failure=-1",
                "lild: failure: -1 is out of range; use 0s to 36500d",
            ),
            (
                "lild",
                "success=1e308",
                "lild: success: 1e308 is out of range; use -36500d to 0s (a step taken off the delay)",
            ),
            (
                "limd",
                "min=-1",
                "limd: min: -1 is out of range; use 0s to 36500d",
            ),
        ];
        for (name, param, expected) in cases {
            assert_eq!(error(name, &[param]), expected, "{name} {param}");
        }
    }

    #[test]
    fn the_edges_of_each_range_are_taken() {
        for (name, params) in [
            ("constant", &["delay=0"][..]),
            ("constant", &["delay=36500d"]),
            ("exponential", &["factor=1", "max=inf"]),
            ("exponential", &["factor=1000", "initial=0"]),
            ("mimd", &["failure=1", "success=0"]),
            ("lild", &["success=-36500d", "failure=0"]),
            ("lild", &["success=-1h"]),
        ] {
            let params: Vec<String> = params.iter().map(|p| p.to_string()).collect();
            assert!(build(name, &params, 1.0).is_ok(), "{name} {params:?}");
        }
    }
}
