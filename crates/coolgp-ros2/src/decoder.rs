//! The decoding half of the row assembly: each message of a named topic read by every
//! extractor its topic has ([`Decoder`]), into [`Decoded`] buffers without an allocation per
//! message. Pure, so a recording's reader decodes on its own thread while the
//! [`crate::assemble::RowAssembler`] pairs ([`crate::assemble::RowAssembler::push_decoded`]);
//! live messages go through both halves in a row ([`crate::assemble::RowAssembler::push_at`]).

use crate::error::Ros2Error;
use crate::extract::Extractor;
use crate::spec::RowSpec;

/// What one extractor made of a message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// Read, every value finite: the message's stamp, seconds.
    Stamp(f64),
    /// Not readable as CDR (truncated, garbage): [`crate::assemble::Counts::bad_cdr`].
    BadCdr,
    /// A NaN or infinite value or stamp: [`crate::assemble::Counts::non_finite`].
    NonFinite,
}

/// Messages decoded by a [`Decoder`], back to back: per message one [`Outcome`] per extractor
/// of its topic, and each extractor's values (its width of them, whatever the outcome), in
/// the order [`Decoder::shape`] gives.
#[derive(Clone, Debug, Default)]
pub struct Decoded {
    /// The outcomes, message after message.
    pub outcomes: Vec<Outcome>,
    /// The values, message after message.
    pub values: Vec<f64>,
}

impl Decoded {
    /// Empties the buffers (their room kept).
    pub fn clear(&mut self) {
        self.outcomes.clear();
        self.values.clear();
    }
}

/// The decoding half of a [`crate::assemble::RowAssembler`]: per topic the extractors its
/// messages go through, in the order the assembler takes their outcomes.
#[derive(Clone, Debug)]
pub struct Decoder {
    /// Per topic ([`RowSpec::topics`] order): the target's extractor and the inline inputs'
    /// (the target's topic), or the paired inputs of the topic, in `spec.inputs` order.
    per_topic: Vec<Vec<Extractor>>,
    /// Per topic: its extractors' total width.
    widths: Vec<usize>,
}

impl Decoder {
    /// The decoder of `spec`'s topics.
    ///
    /// # Errors
    /// As [`crate::spec::TopicSpec::extractor`].
    pub fn new(spec: &RowSpec) -> Result<Self, Ros2Error> {
        let topics = spec.topics();
        let index = |bare: &str| topics.iter().position(|(t, _)| *t == bare).unwrap_or(0);
        let mut per_topic: Vec<Vec<Extractor>> = vec![Vec::new(); topics.len()];
        let target = index(spec.target.bare_topic());
        per_topic[target].push(spec.target.extractor()?);
        // The inline inputs first (the target's topic), then the paired ones.
        for input in &spec.inputs {
            let t = index(input.bare_topic());
            if t == target {
                per_topic[t].push(input.extractor()?);
            }
        }
        for input in &spec.inputs {
            let t = index(input.bare_topic());
            if t != target {
                per_topic[t].push(input.extractor()?);
            }
        }
        let widths = per_topic
            .iter()
            .map(|exs| exs.iter().map(Extractor::width).sum())
            .collect();
        Ok(Self { per_topic, widths })
    }

    /// How many outcomes and values a message of topic `t` adds to [`Decoded`].
    ///
    /// # Panics
    /// If `t` is not a topic index.
    #[track_caller]
    pub fn shape(&self, t: usize) -> (usize, usize) {
        (self.per_topic[t].len(), self.widths[t])
    }

    /// Decodes `payload`, a message of the topic of index `t` ([`RowSpec::topics`] order),
    /// with each of its extractors, appending to `out`; `fallback` is its time in seconds for
    /// types without a header.
    ///
    /// # Panics
    /// If `t` is not a topic index.
    #[track_caller]
    pub fn decode(&self, t: usize, payload: &[u8], fallback: f64, out: &mut Decoded) {
        for ex in &self.per_topic[t] {
            let at = out.values.len();
            out.values.resize(at + ex.width(), f64::NAN);
            let vals = &mut out.values[at..];
            let outcome = match ex.decode(payload, fallback, vals) {
                Err(_) => Outcome::BadCdr,
                Ok(s) if !s.is_finite() || vals.iter().any(|v| !v.is_finite()) => {
                    Outcome::NonFinite
                }
                Ok(s) => Outcome::Stamp(s),
            };
            out.outcomes.push(outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::RowAssembler;
    use crate::extract::encode;
    use crate::types::input_type;

    fn msg(ty: &str, t_ms: i64, values: &[(&str, f64)]) -> Vec<u8> {
        let ty = input_type(ty).expect("type");
        encode(ty, t_ms * 1_000_000, "f", values).expect("encode")
    }

    #[test]
    fn decoding_apart_then_pairing_equals_pushing() {
        // Inline and paired inputs, two inputs on one topic, and bad messages of each kind.
        let spec = RowSpec::parse(
            &[
                "/fix:sensor_msgs/msg/NavSatFix:latitude".into(),
                "/temp:sensor_msgs/msg/Temperature:stamp,variance".into(),
                "/fix:sensor_msgs/msg/NavSatFix:longitude,stamp".into(),
            ],
            "/temp:sensor_msgs/msg/Temperature:temperature",
            0.05,
        )
        .expect("spec");
        let fix = "sensor_msgs/msg/NavSatFix";
        let temp = "sensor_msgs/msg/Temperature";
        let mut msgs: Vec<(usize, Vec<u8>)> = Vec::new();
        for k in 0..200i64 {
            let lat = if k % 37 == 5 { f64::NAN } else { k as f64 };
            msgs.push((
                0,
                msg(fix, k * 100 + 3, &[("latitude", lat), ("longitude", -lat)]),
            ));
            let t = if k % 53 == 7 { k * 100 - 500 } else { k * 100 };
            msgs.push((
                1,
                msg(
                    temp,
                    t,
                    &[("temperature", 0.5 * k as f64), ("variance", 1.0)],
                ),
            ));
            if k % 41 == 3 {
                msgs.push((k as usize % 2, vec![0, 1, 0, 0, 9]));
            }
        }
        let mut pushed = RowAssembler::new(&spec).expect("assembler");
        let mut split = RowAssembler::new(&spec).expect("assembler");
        let decoder = split.decoder().clone();
        let mut decoded = Decoded::default();
        for (t, m) in &msgs {
            decoder.decode(*t, m, 0.0, &mut decoded);
        }
        let (mut k, mut at) = (0, 0);
        for (t, m) in &msgs {
            pushed.push_at(*t, m, 0.0);
            let (n, w) = decoder.shape(*t);
            split.push_decoded(*t, &decoded.outcomes[k..k + n], &decoded.values[at..at + w]);
            (k, at) = (k + n, at + w);
        }
        assert_eq!((k, at), (decoded.outcomes.len(), decoded.values.len()));
        pushed.finish();
        split.finish();
        let rows = |a: &mut RowAssembler| std::iter::from_fn(|| a.pop()).collect::<Vec<_>>();
        let (a, b) = (rows(&mut pushed), rows(&mut split));
        assert!(a.len() > 150, "{}", a.len());
        assert_eq!(a, b);
        assert_eq!(pushed.counts(), split.counts());
        let c = pushed.counts();
        assert!(
            c.bad_cdr > 0 && c.non_finite > 0 && c.stamp_backwards > 0,
            "{c:?}"
        );
    }
}
