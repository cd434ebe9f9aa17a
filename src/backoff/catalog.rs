//! The strategies by name, built from `name=value` parameters as `backlog backoff`
//! takes them, each with its defaults, and its closed-form retry budget where it has one.

use super::{Adaptive, Exponential, Jitter, Sequence, SequenceKind, Step, Strategy};

/// The strategy names, for messages.
pub const NAMES: &str = "constant, exponential, httpx, fibonacci, arctan, sidekiq, buckets, lild, limd, mild, mimd (and progressive, with --schedule)";

/// The count of retries fitting in `t` seconds by formula, and the formula.
pub type ClosedForm = Box<dyn Fn(f64) -> (usize, String)>;

/// A strategy built from parameters.
pub struct Built {
    pub strategy: Box<dyn Strategy>,
    /// The count of retries fitting in `t` seconds by formula, and the formula; none
    /// where there is no closed form, or a cap or jitter makes it wrong.
    pub closed_form: Option<ClosedForm>,
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

    fn number(&mut self, key: &'static str, default: f64) -> Result<f64, String> {
        match self.text(key) {
            None => Ok(default),
            Some(v) if v == "inf" => Ok(f64::INFINITY),
            Some(v) => v
                .parse()
                .map_err(|_| format!("{}: {key}={v:?} is not a number", self.strategy)),
        }
    }

    /// A number in the chosen unit, or a duration like `1h`, returned in seconds.
    fn delay(&mut self, key: &'static str, default: f64) -> Result<f64, String> {
        if let Some(text) = self
            .given
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            && text.parse::<f64>().is_err()
            && text != "inf"
        {
            self.used.push(key);
            return crate::duration::parse(&text)
                .map(|d| d.as_secs_f64())
                .map_err(|e| format!("{}: {key}: {e}", self.strategy));
        }
        Ok(self.number(key, default)? * self.unit)
    }

    fn finish(self) -> Result<(), String> {
        match self
            .given
            .iter()
            .find(|(k, _)| !self.used.contains(&k.as_str()))
        {
            Some((k, _)) => Err(format!(
                "{}: no parameter {k:?}; it takes {}",
                self.strategy,
                self.used.join(", ")
            )),
            None => Ok(()),
        }
    }
}

/// Builds strategy `name` from `name=value` parameters; delays in the parameters and
/// the results are in units of `unit` seconds.
pub fn build(name: &str, params: &[String], unit: f64) -> Result<Built, String> {
    let mut given = Vec::new();
    for p in params {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("{name}: parameter {p:?} is not name=value"))?;
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
            let d = p.delay("delay", 1.0)?;
            Built {
                strategy: Box::new(Adaptive::constant(d)),
                closed_form: Some(Box::new(move |t| {
                    ((t / d).floor() as usize, "n·d ≤ t ⇒ n = ⌊t/d⌋".into())
                })),
            }
        }
        "exponential" => {
            let (a, f, max) = (
                p.delay("initial", 1.0)?,
                p.number("factor", 2.0)?,
                p.delay("max", f64::INFINITY)?,
            );
            let jitter = match p.text("jitter").as_deref() {
                None | Some("none") => Jitter::None,
                Some("full") => Jitter::Full,
                Some("equal") => Jitter::Equal,
                Some("decorrelated") => Jitter::Decorrelated,
                Some(other) => {
                    return Err(format!(
                        "{name}: jitter={other:?}; use none, full, equal or decorrelated"
                    ));
                }
            };
            let exact = jitter == Jitter::None && max.is_infinite() && f > 1.0;
            Built {
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
            }
        }
        "httpx" => {
            let (b, max) = (p.delay("factor", 0.5)?, p.delay("max", 120.0)?);
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
                    first: p.delay("first", 1.0)?,
                    second: p.delay("second", 1.0)?,
                },
                "arctan" => SequenceKind::Arctan,
                "sidekiq" => SequenceKind::Sidekiq,
                _ => SequenceKind::Buckets,
            };
            let seq = Sequence {
                kind,
                max: p.delay("max", f64::INFINITY)?,
                on_success: p.delay("success", 0.0)?,
            };
            Built {
                strategy: Box::new(seq),
                closed_form: None,
            }
        }
        "lild" | "limd" | "mild" | "mimd" => {
            let bytes = name.as_bytes();
            let step = |p: &mut Params,
                        key: &'static str,
                        multiplicative: bool,
                        default: f64|
             -> Result<Step, String> {
                Ok(if multiplicative {
                    Step::Mul(p.number(key, default)?)
                } else {
                    Step::Add(p.delay(key, default)?)
                })
            };
            let on_failure = step(
                &mut p,
                "failure",
                bytes[0] == b'm',
                if bytes[0] == b'm' { 2.0 } else { 1.0 },
            )?;
            let on_success = step(
                &mut p,
                "success",
                bytes[2] == b'm',
                if bytes[2] == b'm' { 0.5 } else { -1.0 },
            )?;
            let strategy = Adaptive {
                initial: p.delay("initial", 1.0)?,
                on_failure,
                on_success,
                min: p.delay("min", 0.0)?,
                max: p.delay("max", f64::INFINITY)?,
            };
            Built {
                strategy: Box::new(strategy),
                closed_form: None,
            }
        }
        other => return Err(format!("no strategy {other:?}; the strategies are {NAMES}")),
    };
    p.finish()?;
    Ok(built)
}
