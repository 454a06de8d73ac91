//! Rows out of messages: each target message paired with the nearest message of every input
//! topic by stamp, within the tolerance.
//!
//! The rule follows message_filters' approximate-time policy where it matters for mapping:
//! each output row holds one message per topic, no input message is used twice, pairs whose
//! stamps differ by more than the tolerance are never made, and rows come out in the target's
//! stamp order. Unlike it, the target topic drives: every target message is paired with the
//! nearest unused input message (ties go to the earlier), so a 10 Hz fix and a 1 Hz sensor
//! give one row a second. A target is decided once every input topic has shown a stamp past
//! it by the tolerance (or the stream ends), so live and recorded streams pair alike.
//!
//! Bad messages are counted in [`Counts`] and dropped: undecodable CDR, non-finite fields, a
//! stamp older than the topic's previous one; messages that find no partner are counted as
//! unpaired. Queues are bounded ([`MAX_QUEUE`]), so a topic that never publishes costs
//! nothing but its count.

use std::collections::VecDeque;

pub use crate::decoder::{Decoded, Decoder, Outcome};
use crate::error::Ros2Error;
use crate::spec::RowSpec;

/// Most messages held per queue while waiting for a partner; older ones are dropped as
/// unpaired.
pub const MAX_QUEUE: usize = 4096;

/// One assembled row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The target message's stamp, seconds.
    pub stamp: f64,
    /// Inputs in column order.
    pub x: Vec<f64>,
    /// Target.
    pub y: f64,
}

/// What happened to the messages, for status and diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Messages offered on a named topic.
    pub messages: u64,
    /// Rows assembled.
    pub rows: u64,
    /// Messages whose CDR could not be read (truncated, garbage).
    pub bad_cdr: u64,
    /// Messages with a NaN or infinite field.
    pub non_finite: u64,
    /// Messages whose stamp is older than the previous one on their topic.
    pub stamp_backwards: u64,
    /// Input messages that found no target within the tolerance.
    pub unpaired_inputs: u64,
    /// Target messages that found no input within the tolerance.
    pub unpaired_targets: u64,
    /// Messages on a named topic with another type than the one named.
    pub wrong_type: u64,
    /// Messages on topics not named.
    pub other_topics: u64,
    /// Messages per named topic, in [`RowSpec::topics`] order.
    pub per_topic: Vec<(String, u64)>,
}

impl Counts {
    /// Adds `other`'s counts (another robot's assembler), topic by topic in order.
    pub fn add(&mut self, other: &Counts) {
        self.messages += other.messages;
        self.rows += other.rows;
        self.bad_cdr += other.bad_cdr;
        self.non_finite += other.non_finite;
        self.stamp_backwards += other.stamp_backwards;
        self.unpaired_inputs += other.unpaired_inputs;
        self.unpaired_targets += other.unpaired_targets;
        self.wrong_type += other.wrong_type;
        self.other_topics += other.other_topics;
        self.per_topic.extend(other.per_topic.iter().cloned());
    }
}

/// A paired input: its columns and its queue of messages waiting for a target: their stamps,
/// and their `width` values each, back to back, in `values`.
#[derive(Debug)]
struct Paired {
    topic: usize,
    width: usize,
    first_col: usize,
    stamps: VecDeque<f64>,
    values: VecDeque<f64>,
    latest: f64,
}

impl Paired {
    /// Drops the oldest message of the queue.
    fn pop_front(&mut self) {
        self.stamps.pop_front();
        self.values.drain(..self.width);
    }
}

/// The assembler (sans-IO: messages in, rows out).
#[derive(Debug)]
pub struct RowAssembler {
    topics: Vec<String>,
    last_stamp: Vec<f64>,
    target_topic: usize,
    /// The target extractor's width (its value is the first).
    target_width: usize,
    decoder: Decoder,
    /// The inline inputs' (read from the target's message) first column and width.
    inline: Vec<(usize, usize)>,
    paired: Vec<Paired>,
    width: usize,
    tolerance: f64,
    /// Targets waiting for their inputs: (stamp, target value); their `width` inputs each,
    /// back to back, in `pending_x` (no allocation per row).
    pending: VecDeque<(f64, f64)>,
    pending_x: VecDeque<f64>,
    /// Rows decided, as `pending`: (stamp, target) and `width` inputs each in `ready_x`;
    /// the first `popped` of them taken already (both emptied once all are).
    ready: Vec<(f64, f64)>,
    ready_x: Vec<f64>,
    popped: usize,
    /// The inputs of the target being pushed (`width`), reused.
    row_x: Vec<f64>,
    /// Each paired input's pick for the row being decided, reused.
    picks: Vec<Option<usize>>,
    /// One message decoded ([`Self::push_at`]), reused.
    scratch: Decoded,
    counts: Counts,
}

impl RowAssembler {
    /// An assembler for `spec`.
    ///
    /// # Errors
    /// As [`crate::spec::TopicSpec::extractor`].
    pub fn new(spec: &RowSpec) -> Result<Self, Ros2Error> {
        let topics: Vec<String> = spec
            .topics()
            .iter()
            .map(|(t, _)| (*t).to_string())
            .collect();
        let index = |bare: &str| topics.iter().position(|t| t == bare).unwrap_or(0);
        let target_topic = index(spec.target.bare_topic());
        let (mut inline, mut paired, mut col) = (Vec::new(), Vec::new(), 0);
        for input in &spec.inputs {
            let width = input.extractor()?.width();
            let topic = index(input.bare_topic());
            if topic == target_topic {
                inline.push((col, width));
            } else {
                paired.push(Paired {
                    topic,
                    width,
                    first_col: col,
                    stamps: VecDeque::new(),
                    values: VecDeque::new(),
                    latest: f64::NEG_INFINITY,
                });
            }
            col += width;
        }
        let counts = Counts {
            per_topic: topics.iter().map(|t| (t.clone(), 0)).collect(),
            ..Counts::default()
        };
        Ok(Self {
            last_stamp: vec![f64::NEG_INFINITY; topics.len()],
            topics,
            target_topic,
            target_width: spec.target.extractor()?.width(),
            decoder: Decoder::new(spec)?,
            inline,
            paired,
            width: col,
            tolerance: spec.tolerance,
            pending: VecDeque::new(),
            pending_x: VecDeque::new(),
            ready: Vec::new(),
            ready_x: Vec::new(),
            popped: 0,
            row_x: vec![f64::NAN; col],
            picks: Vec::new(),
            scratch: Decoded::default(),
            counts,
        })
    }

    /// The index of `topic` (leading and trailing `/` ignored) among the named topics.
    pub fn topic_index(&self, topic: &str) -> Option<usize> {
        let bare = topic.trim_matches('/');
        self.topics.iter().position(|t| t == bare)
    }

    /// The counts so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The decoding half of this assembler (for [`Self::push_decoded`]).
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// Counts a message seen on a named topic with another type (the transport knows types).
    pub fn count_wrong_type(&mut self) {
        self.counts.wrong_type += 1;
    }

    /// Offers one message of `topic`; `fallback` is its time in seconds for types without a
    /// header (when it was recorded or sent).
    pub fn push(&mut self, topic: &str, payload: &[u8], fallback: f64) {
        let Some(t) = self.topic_index(topic) else {
            self.counts.other_topics += 1;
            return;
        };
        self.push_at(t, payload, fallback);
    }

    /// Counts `n` messages seen on topics not named (a reader that filtered them itself).
    pub fn count_other_topics(&mut self, n: u64) {
        self.counts.other_topics += n;
    }

    /// [`Self::push`] for the topic of index `t` in [`RowSpec::topics`] order.
    ///
    /// # Panics
    /// If `t` is not a topic index.
    pub fn push_at(&mut self, t: usize, payload: &[u8], fallback: f64) {
        let mut one = std::mem::take(&mut self.scratch);
        one.clear();
        self.decoder.decode(t, payload, fallback, &mut one);
        self.push_decoded(t, &one.outcomes, &one.values);
        self.scratch = one;
    }

    /// Offers one message of the topic of index `t`, decoded by [`Self::decoder`] (or a
    /// clone): `outcomes` and `values` are what it added to its [`Decoded`],
    /// [`Decoder::shape`] long.
    ///
    /// # Panics
    /// If `t` is not a topic index or the slices are shorter than its shape.
    #[track_caller]
    pub fn push_decoded(&mut self, t: usize, outcomes: &[Outcome], values: &[f64]) {
        self.counts.messages += 1;
        self.counts.per_topic[t].1 += 1;
        let (mut k, mut at) = (0, 0);
        if t == self.target_topic {
            self.push_target(outcomes, values);
            k = 1 + self.inline.len();
            at = self.target_width + self.inline.iter().map(|(_, w)| w).sum::<usize>();
        }
        for p in 0..self.paired.len() {
            if self.paired[p].topic == t {
                let w = self.paired[p].width;
                self.push_input(p, outcomes[k], &values[at..at + w]);
                k += 1;
                at += w;
            }
        }
        self.emit(false);
    }

    /// Counts a failed outcome; the stamp of a good one.
    fn good(&mut self, outcome: Outcome) -> Option<f64> {
        match outcome {
            Outcome::Stamp(s) => Some(s),
            Outcome::BadCdr => {
                self.counts.bad_cdr += 1;
                None
            }
            Outcome::NonFinite => {
                self.counts.non_finite += 1;
                None
            }
        }
    }

    /// The target's message: its outcome and value first, then the inline inputs'.
    fn push_target(&mut self, outcomes: &[Outcome], values: &[f64]) {
        let Some(stamp) = self.good(outcomes[0]) else {
            return;
        };
        if stamp < self.last_stamp[self.target_topic] {
            self.counts.stamp_backwards += 1;
            return;
        }
        let mut at = self.target_width;
        for i in 0..self.inline.len() {
            if self.good(outcomes[1 + i]).is_none() {
                return;
            }
            let (c, w) = self.inline[i];
            self.row_x[c..c + w].copy_from_slice(&values[at..at + w]);
            at += w;
        }
        self.last_stamp[self.target_topic] = stamp;
        self.pending.push_back((stamp, values[0]));
        for &v in &self.row_x {
            self.pending_x.push_back(v);
        }
        if self.pending.len() > MAX_QUEUE {
            self.pending.pop_front();
            self.pending_x.drain(..self.width);
            self.counts.unpaired_targets += 1;
        }
    }

    fn push_input(&mut self, p: usize, outcome: Outcome, values: &[f64]) {
        let Some(stamp) = self.good(outcome) else {
            return;
        };
        let topic = self.paired[p].topic;
        if stamp < self.last_stamp[topic] {
            self.counts.stamp_backwards += 1;
            return;
        }
        self.last_stamp[topic] = self.last_stamp[topic].max(stamp);
        let q = &mut self.paired[p];
        q.latest = stamp;
        q.stamps.push_back(stamp);
        for &v in values {
            q.values.push_back(v);
        }
        if q.stamps.len() > MAX_QUEUE {
            q.pop_front();
            self.counts.unpaired_inputs += 1;
        }
    }

    /// Decides the pending targets that can be decided (all of them at the end).
    fn emit(&mut self, end: bool) {
        let (w, tol) = (self.width, self.tolerance);
        while let Some(&(t, y)) = self.pending.front() {
            if !end && self.paired.iter().any(|p| p.latest < t + tol) {
                break;
            }
            self.pending.pop_front();
            self.picks.clear();
            let picks = self.paired.iter().map(|p| nearest(&p.stamps, t, tol));
            self.picks.extend(picks);
            if self.picks.iter().all(Option::is_some) {
                let at = self.ready_x.len();
                for _ in 0..w {
                    self.ready_x
                        .push(self.pending_x.pop_front().unwrap_or(f64::NAN));
                }
                for (p, pick) in self.paired.iter_mut().zip(&self.picks) {
                    let Some(k) = *pick else { continue };
                    p.stamps.remove(k);
                    let c = at + p.first_col;
                    if k == 0 {
                        for x in &mut self.ready_x[c..c + p.width] {
                            *x = p.values.pop_front().unwrap_or(f64::NAN);
                        }
                    } else {
                        let taken = p.values.drain(k * p.width..(k + 1) * p.width);
                        for (x, v) in self.ready_x[c..c + p.width].iter_mut().zip(taken) {
                            *x = v;
                        }
                    }
                }
                self.counts.rows += 1;
                self.ready.push((t, y));
            } else {
                self.pending_x.drain(..w);
                self.counts.unpaired_targets += 1;
            }
            for p in &mut self.paired {
                while p.stamps.front().is_some_and(|s| *s < t - tol) {
                    p.pop_front();
                    self.counts.unpaired_inputs += 1;
                }
            }
        }
    }

    /// The next decided row: (stamp, target) and its inputs' range in `ready_x`.
    fn next_ready(&mut self) -> Option<((f64, f64), std::ops::Range<usize>)> {
        let row = *self.ready.get(self.popped)?;
        let at = self.popped * self.width;
        self.popped += 1;
        Some((row, at..at + self.width))
    }

    /// Forgets the rows taken once all are.
    fn reset_ready(&mut self) {
        if self.popped == self.ready.len() {
            self.ready.clear();
            self.ready_x.clear();
            self.popped = 0;
        }
    }

    /// The next assembled row, if any.
    pub fn pop(&mut self) -> Option<Row> {
        let ((stamp, y), range) = self.next_ready()?;
        let x = self.ready_x[range].to_vec();
        self.reset_ready();
        Some(Row { stamp, x, y })
    }

    /// The next assembled row without allocating: its inputs appended to `x` (in column
    /// order, [`RowSpec::input_names`]); returns its stamp (seconds) and target.
    pub fn pop_into(&mut self, x: &mut Vec<f64>) -> Option<(f64, f64)> {
        let (row, range) = self.next_ready()?;
        x.extend_from_slice(&self.ready_x[range]);
        self.reset_ready();
        Some(row)
    }

    /// Decides every pending target now with the inputs at hand (a live stream gone quiet:
    /// the partner a target still waits for is not coming); later messages pair as usual.
    pub fn flush(&mut self) {
        self.emit(true);
    }

    /// The stream ended: decides every pending target and counts what is left unpaired.
    pub fn finish(&mut self) {
        self.emit(true);
        for p in &mut self.paired {
            self.counts.unpaired_inputs += p.stamps.len() as u64;
            p.stamps.clear();
            p.values.clear();
        }
    }
}

/// The queue index of the message nearest `t` within `tol` (the earlier on a tie).
fn nearest(queue: &VecDeque<f64>, t: f64, tol: f64) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (k, s) in queue.iter().enumerate() {
        let d = (s - t).abs();
        if *s > t + tol {
            break;
        }
        if d <= tol && best.is_none_or(|(_, bd)| d < bd) {
            best = Some((k, d));
        }
    }
    best.map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::encode;
    use crate::types::input_type;

    fn spec(tol: f64) -> RowSpec {
        RowSpec::parse(
            &["/fix:sensor_msgs/msg/NavSatFix:latitude,longitude".into()],
            "/temp:sensor_msgs/msg/Temperature:temperature",
            tol,
        )
        .expect("spec")
    }

    fn fix(t_ms: i64, lat: f64) -> Vec<u8> {
        let ty = input_type("sensor_msgs/msg/NavSatFix").expect("type");
        encode(
            ty,
            t_ms * 1_000_000,
            "gps",
            &[("latitude", lat), ("longitude", -lat)],
        )
        .expect("encode")
    }

    fn temp(t_ms: i64, v: f64) -> Vec<u8> {
        let ty = input_type("sensor_msgs/msg/Temperature").expect("type");
        encode(ty, t_ms * 1_000_000, "t", &[("temperature", v)]).expect("encode")
    }

    fn drain(a: &mut RowAssembler) -> Vec<Row> {
        std::iter::from_fn(|| a.pop()).collect()
    }

    #[test]
    fn ten_hertz_fix_and_one_hertz_sensor() {
        let mut a = RowAssembler::new(&spec(0.05)).expect("assembler");
        for k in 0..30 {
            a.push("/fix", &fix(k * 100 + 3, k as f64), 0.0);
            if k % 10 == 0 {
                a.push("temp", &temp(k * 100, 20.0 + k as f64), 0.0);
            }
        }
        a.finish();
        let rows = drain(&mut a);
        assert_eq!(rows.len(), 3);
        for (r, k) in rows.iter().zip([0.0, 10.0, 20.0]) {
            assert_eq!(r.x, [k, -k]);
            assert_eq!(r.y, 20.0 + k);
        }
        let c = a.counts();
        assert_eq!((c.rows, c.unpaired_inputs, c.unpaired_targets), (3, 27, 0));
        assert_eq!(
            c.per_topic,
            [("fix".to_string(), 30), ("temp".to_string(), 3)]
        );
    }

    #[test]
    fn rows_are_decided_live_once_inputs_pass_the_tolerance() {
        let mut a = RowAssembler::new(&spec(0.05)).expect("assembler");
        a.push("/temp", &temp(1000, 1.0), 0.0);
        a.push("/fix", &fix(1010, 5.0), 0.0);
        assert!(a.pop().is_none(), "a closer fix may still come");
        a.push("/fix", &fix(1020, 6.0), 0.0);
        assert!(a.pop().is_none());
        a.push("/fix", &fix(1060, 7.0), 0.0);
        let row = a.pop().expect("decided");
        assert_eq!(row.x, [5.0, -5.0]);
    }

    #[test]
    fn bad_messages_are_counted_and_dropped() {
        let mut a = RowAssembler::new(&spec(0.05)).expect("assembler");
        a.push("/fix", &fix(1000, 1.0), 0.0);
        a.push("/temp", &temp(1000, 1.0), 0.0);
        a.push("/fix", &fix(900, 2.0), 0.0); // backwards
        a.push("/fix", &fix(1100, f64::NAN), 0.0); // NaN
        a.push("/fix", &[0, 1, 0, 0, 9], 0.0); // truncated
        a.push("/fix", b"garbage!", 0.0); // not CDR
        a.push("/temp", &temp(1200, 2.0), 0.0); // no fix within 50 ms
        a.push("/other", &temp(1200, 2.0), 0.0);
        a.finish();
        let c = a.counts().clone();
        assert_eq!(drain(&mut a).len(), 1);
        assert_eq!(
            (
                c.stamp_backwards,
                c.non_finite,
                c.bad_cdr,
                c.unpaired_targets,
                c.other_topics
            ),
            (1, 1, 2, 1, 1)
        );
    }

    #[test]
    fn inline_inputs_and_a_silent_topic() {
        let s = RowSpec::parse(
            &[
                "/temp:sensor_msgs/msg/Temperature:stamp".into(),
                "/fix:sensor_msgs/msg/NavSatFix:latitude".into(),
            ],
            "/temp:sensor_msgs/msg/Temperature:temperature",
            0.01,
        )
        .expect("spec");
        let mut a = RowAssembler::new(&s).expect("assembler");
        for k in 0..(MAX_QUEUE as i64 + 10) {
            a.push("/temp", &temp(k * 1000, 1.0), 0.0);
        }
        assert!(a.pop().is_none(), "no fix ever arrives");
        assert_eq!(a.counts().unpaired_targets, 10, "the queue is bounded");
        a.push("/fix", &fix((MAX_QUEUE as i64 + 9) * 1000, 3.0), 0.0);
        a.finish();
        let rows = drain(&mut a);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].x, [(MAX_QUEUE as f64 + 9.0), 3.0]);
    }
}
