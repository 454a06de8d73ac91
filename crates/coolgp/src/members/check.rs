//! The member check (issue 29, docs/MEMBERS.md §1).
//!
//! For member i, a few of its own rows `(x_r, y_r)` are predicted by a peer's own model (its
//! own data only: it does not contain i). At each row the peer's posterior variance of f,
//! `v_r`, says whether it knows that place at all: the row is *informed* when
//! `v_r < informed_below · σ_s²` (the peer has halved the prior's variance there). Over the
//! informed rows:
//!
//! - `score_i = median_r (y_r − μ_r)²`, the typical squared error the peer makes on i's rows;
//! - `z2_i = median_r (y_r − μ_r)² / (v_r + σ_n²)`, the same in units of the predictive
//!   variance (under a calibrated model, the median of a χ²₁ variable, 0.455).
//!
//! [`judge`] compares each verifiable member's score with the median member's: a member is
//! `Suspect` when its score is more than `ratio` times the median *and* its rows fall outside
//! the others' intervals (`z2 > interval`); a suspect is readmitted when its score falls below
//! `readmit` times the median or its `z2` below half the interval. A member's evidence is
//! that of the peer that agrees with it best ([`super::best_agreement`]). The defaults were
//! set on honest fleets (docs/MEMBERS.md §3). Neither statistic depends on i's own
//! contribution to any model, and the median member is honest as long as fewer than half the
//! verifiable members are faulty. A member with too few informed rows is `Unverifiable`: a region only it covers
//! cannot be checked by anyone else, and differing there is not a fault.

use crate::model::Prediction;

/// The settings of the member check (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckOptions {
    /// Rows of each member's memory checked (spread evenly over it).
    pub rows: usize,
    /// A row is informed when the others' variance of f there is below this fraction of the
    /// prior's `σ_s²`.
    pub informed_below: f64,
    /// A member is verifiable when at least this fraction of its checked rows is informed.
    pub min_informed: f64,
    /// Fewest informed rows for a verdict (early checks on a few rows are noisy: with 16, a
    /// traffic-like region was marked at its first block).
    pub min_rows: usize,
    /// Suspect above this multiple of the median verifiable member's score.
    pub ratio: f64,
    /// ... and only if the median standardized squared error exceeds this (a χ²₁ median is
    /// 0.455; 9 is the rows' errors typically three predictive standard deviations out).
    pub interval: f64,
    /// A suspect is readmitted below this multiple of the median member's score.
    pub readmit: f64,
    /// Fewest verifiable members for any verdict but `Unverifiable`.
    pub min_members: usize,
    /// Fewest informed rows for a member's score to count in the median member's (the
    /// reference), with the same fraction `min_informed` of its rows; a verdict on the member
    /// itself still needs `min_rows`. The median of scores on 16 rows is a fair reference,
    /// and `z2` (which the median does not enter) guards each verdict: with a reference of
    /// verifiable members only, a station of 5-row blocks whose 40 informed rows put it 90
    /// intervals out waited until two other stations had 32 informed rows (its block 11).
    pub reference_rows: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            rows: 64,
            informed_below: 0.5,
            min_informed: 0.25,
            min_rows: 32,
            ratio: 30.0,
            interval: 9.0,
            readmit: 10.0,
            min_members: 3,
            reference_rows: 16,
        }
    }
}

/// What the others' model says of one member's rows (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evidence {
    /// Rows checked.
    pub rows: usize,
    /// Rows the others know (`v_r < informed_below · σ_s²`).
    pub informed: usize,
    /// Median squared error of the others' means at the informed rows (NaN without any).
    pub score: f64,
    /// Median squared error over the predictive variance at the informed rows (NaN without
    /// any).
    pub z2: f64,
}

impl Evidence {
    /// The evidence of the member's targets `y` under the others' prediction at its rows
    /// (`others`, one entry per row; `prior_var`: the prior's `σ_s²`).
    ///
    /// # Panics
    /// If `others` does not hold one prediction per target.
    pub fn measure(y: &[f64], others: &Prediction, prior_var: f64, informed_below: f64) -> Self {
        assert_eq!(others.mean.len(), y.len(), "one prediction per row");
        let mut sq = Vec::with_capacity(y.len());
        let mut z2 = Vec::with_capacity(y.len());
        for (r, &yr) in y.iter().enumerate() {
            // A NaN variance is not informed either.
            let informed = others.var_f[r] < informed_below * prior_var;
            if !informed {
                continue;
            }
            let e = yr - others.mean[r];
            if e.is_finite() {
                sq.push(e * e);
                z2.push(e * e / others.var_y[r].max(f64::MIN_POSITIVE));
            }
        }
        Self {
            rows: y.len(),
            informed: sq.len(),
            score: median(&mut sq),
            z2: median(&mut z2),
        }
    }

    /// True when enough of the rows are informed to judge the member.
    pub fn verifiable(&self, opts: &CheckOptions) -> bool {
        self.informed_over(opts.min_rows, opts)
    }

    /// True when enough of the rows are informed for the member's score to count in the
    /// median member's ([`CheckOptions::reference_rows`], at most `min_rows`).
    pub fn reference(&self, opts: &CheckOptions) -> bool {
        self.informed_over(opts.reference_rows.min(opts.min_rows), opts)
    }

    /// At least `least` (and 1) informed rows, `min_informed` of the rows, a finite score.
    fn informed_over(&self, least: usize, opts: &CheckOptions) -> bool {
        self.rows > 0
            && self.informed >= least.max(1)
            && self.informed as f64 >= opts.min_informed * self.rows as f64
            && self.score.is_finite()
    }
}

/// A member's standing after a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Standing {
    /// Its rows agree with the others' model as well as the median member's.
    Trusted,
    /// Its rows disagree with what the others know far beyond the median member's and
    /// beyond the others' intervals.
    Suspect,
    /// Too few of its rows lie where the others know anything (or too few members can be
    /// verified): it cannot be checked.
    Unverifiable,
    /// No rows to check.
    Unchecked,
}

impl Standing {
    /// The lowercase name (`trusted`, `suspect`, `unverifiable`, `unchecked`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Trusted => "trusted",
            Self::Suspect => "suspect",
            Self::Unverifiable => "unverifiable",
            Self::Unchecked => "unchecked",
        }
    }
}

/// The verdicts of one check over the fleet: `evidence[i]` of member i (`None`: no rows),
/// `was_suspect[i]` its standing before (a suspect stays one until its score falls below
/// `readmit` times the median or its `z2` below half the interval). Returns each member's
/// standing and the median reference member's score ([`Evidence::reference`]: the members
/// with `reference_rows` informed rows; NaN when fewer than `min_members` are references:
/// then no member is judged). A verdict on a member needs it verifiable
/// ([`Evidence::verifiable`]).
///
/// # Panics
/// If `was_suspect` is not one flag per member.
pub fn judge(
    evidence: &[Option<Evidence>],
    was_suspect: &[bool],
    opts: &CheckOptions,
) -> (Vec<Standing>, f64) {
    assert_eq!(evidence.len(), was_suspect.len(), "one flag per member");
    let mut scores: Vec<f64> = evidence
        .iter()
        .flatten()
        .filter(|e| e.reference(opts))
        .map(|e| e.score)
        .collect();
    let enough = scores.len() >= opts.min_members.max(1);
    let med = if enough {
        median(&mut scores)
    } else {
        f64::NAN
    };
    let standings = evidence
        .iter()
        .zip(was_suspect)
        .map(|(e, &was)| match e {
            None => Standing::Unchecked,
            Some(e) if e.rows == 0 => Standing::Unchecked,
            Some(e) if !enough || !e.verifiable(opts) => Standing::Unverifiable,
            Some(e) => {
                let off = if was {
                    e.score > opts.readmit * med && e.z2 > 0.5 * opts.interval
                } else {
                    e.score > opts.ratio * med && e.z2 > opts.interval
                };
                if off {
                    Standing::Suspect
                } else {
                    Standing::Trusted
                }
            }
        })
        .collect();
    (standings, med)
}

/// The median of `v` (NaN when empty; an even count: the mean of the two middle values);
/// reorders `v`. Also the fleet's consensus kernel's ([`crate::local::consensus`]).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prediction(mean: Vec<f64>, var_f: f64, noise: f64) -> Prediction {
        let n = mean.len();
        Prediction {
            mean,
            var_f: vec![var_f; n],
            var_y: vec![var_f + noise; n],
        }
    }

    fn evidence(score: f64, informed: usize) -> Option<Evidence> {
        Some(Evidence {
            rows: 64,
            informed,
            score,
            z2: score / 0.01,
        })
    }

    #[test]
    fn evidence_is_the_median_over_the_informed_rows() {
        let y = [1.0, 2.0, 3.0, 10.0, 0.0];
        let mut p = prediction(vec![0.0; 5], 0.1, 0.9);
        // The last row is uninformed (variance of f at the prior's).
        p.var_f[4] = 1.0;
        let e = Evidence::measure(&y, &p, 1.0, 0.5);
        assert_eq!((e.rows, e.informed), (5, 4));
        assert!((e.score - 6.5).abs() < 1e-12, "{}", e.score);
        assert!((e.z2 - 6.5).abs() < 1e-12, "{}", e.z2);
        // Four informed rows: too few for the default's 32, enough for 4.
        assert!(!e.verifiable(&CheckOptions::default()));
        let few = CheckOptions {
            min_rows: 4,
            ..CheckOptions::default()
        };
        assert!(e.verifiable(&few));
        let none = Evidence::measure(&y, &prediction(vec![0.0; 5], 0.9, 0.1), 1.0, 0.5);
        assert_eq!(none.informed, 0);
        assert!(none.score.is_nan() && !none.verifiable(&CheckOptions::default()));
    }

    #[test]
    fn one_member_far_off_the_median_is_suspect_and_readmitted_when_it_checks_out() {
        let opts = CheckOptions::default();
        let mut ev: Vec<Option<Evidence>> = (0..9)
            .map(|i| evidence(0.01 + 0.001 * i as f64, 60))
            .collect();
        ev.push(evidence(25.0, 60));
        let (s, med) = judge(&ev, &[false; 10], &opts);
        assert_eq!(s[9], Standing::Suspect);
        assert!(s[..9].iter().all(|&s| s == Standing::Trusted));
        assert!((med - 0.0145).abs() < 1e-12, "{med}");
        // At 20x the median: still a suspect (readmitted below 10x), trusted if it was not.
        ev[9] = evidence(20.0 * med, 60);
        assert_eq!(judge(&ev, &[false; 10], &opts).0[9], Standing::Trusted);
        let mut was = [false; 10];
        was[9] = true;
        assert_eq!(judge(&ev, &was, &opts).0[9], Standing::Suspect);
        ev[9] = evidence(5.0 * med, 60);
        assert_eq!(judge(&ev, &was, &opts).0[9], Standing::Trusted);
        // Far off the median but back inside the intervals: readmitted.
        ev[9] = Some(Evidence {
            rows: 64,
            informed: 60,
            score: 20.0 * med,
            z2: 3.0,
        });
        assert_eq!(judge(&ev, &was, &opts).0[9], Standing::Trusted);
    }

    #[test]
    fn members_with_16_informed_rows_set_the_median_but_only_32_are_judged() {
        let opts = CheckOptions::default();
        // Three members with 20 of 24 rows informed: references, not verifiable.
        let young = |score: f64| {
            Some(Evidence {
                rows: 24,
                informed: 20,
                score,
                z2: score / 0.01,
            })
        };
        let mut ev = vec![young(0.01), young(0.012), young(0.011), evidence(25.0, 40)];
        let (s, med) = judge(&ev, &[false; 4], &opts);
        assert!((med - 0.0115).abs() < 1e-12, "{med}");
        assert_eq!(s[3], Standing::Suspect);
        assert!(s[..3].iter().all(|&s| s == Standing::Unverifiable), "{s:?}");
        // With 15 informed rows they are no reference: too few for a median.
        for e in ev.iter_mut().take(3) {
            *e = e.map(|e| Evidence { informed: 15, ..e });
        }
        let (s, med) = judge(&ev, &[false; 4], &opts);
        assert!(med.is_nan());
        assert_eq!(s[3], Standing::Unverifiable);
    }

    #[test]
    fn within_the_intervals_is_not_suspect_and_the_uninformed_are_unverifiable() {
        let opts = CheckOptions::default();
        let mut ev: Vec<Option<Evidence>> = (0..5).map(|_| evidence(1e-6, 60)).collect();
        // 100x the median but inside the others' intervals (z2 = 1).
        ev.push(Some(Evidence {
            rows: 64,
            informed: 60,
            score: 1e-4,
            z2: 1.0,
        }));
        // Far off, but in a place only it knows (10 of 64 rows informed), or on too few rows.
        ev.push(evidence(50.0, 10));
        ev.push(Some(Evidence {
            rows: 12,
            informed: 12,
            score: 50.0,
            z2: 5e3,
        }));
        ev.push(None);
        let (s, _) = judge(&ev, &[false; 9], &opts);
        assert_eq!(s[5], Standing::Trusted);
        assert_eq!(s[6], Standing::Unverifiable);
        assert_eq!(s[7], Standing::Unverifiable);
        assert_eq!(s[8], Standing::Unchecked);
        // Too few verifiable members: no one is judged.
        let (s, med) = judge(&ev[..2], &[false; 2], &opts);
        assert!(med.is_nan());
        assert!(s.iter().all(|&s| s == Standing::Unverifiable));
    }
}
