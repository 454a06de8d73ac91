//! The agent's local memory: at most `capacity` of its own raw rows `(x [d], y)`, chosen by a
//! [`MemoryPolicy`]. A block is first *planned* on a logical list of slots (old rows and the
//! block's rows), then applied as "delete these old rows, append these new rows", so the
//! factor of [`super::factor::Factor`] changes only by rows that stay.

use faer::MatRef;

use super::MemoryPolicy;
use crate::rng::Rng;

/// Stream of the reservoir's draws: draw t uses `Rng::new(seed, RESERVOIR_STREAM + t)`, so the
/// policy's whole random state is the counter of rows seen.
const RESERVOIR_STREAM: u64 = 0x6c6f_6361_6c00_0000;

/// What a block changes: old rows deleted (ascending indices) and block rows appended (in order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Indices of old rows deleted, ascending.
    pub remove: Vec<usize>,
    /// Rows of the block appended, in this order after the deletions.
    pub add: Vec<usize>,
}

/// A slot of the logical list while a block is planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    Old(usize),
    New(usize),
}

/// The rows kept, `x [n, d]` row-major and `y [n]`, the counter of rows offered and, for
/// [`MemoryPolicy::Spread`], each row's squared distance to its nearest neighbour.
#[derive(Clone, Debug, PartialEq)]
pub struct Memory {
    policy: MemoryPolicy,
    capacity: usize,
    d: usize,
    seed: u64,
    x: Vec<f64>,
    y: Vec<f64>,
    seen: u64,
    /// Spread: `(‖x_i − x_nn‖², nn)` per row in the metric of `scale` (empty for the other
    /// policies).
    nn: Vec<(f64, usize)>,
    /// Spread: the metric's scale per input, `‖a − b‖² = Σ_k ((a_k − b_k) s_k)²` (the residual
    /// kernel's inverse lengthscales; ones until set).
    scale: Vec<f64>,
}

impl Memory {
    /// An empty memory of `capacity` rows of width `d`; `seed` drives the reservoir.
    pub fn new(policy: MemoryPolicy, capacity: usize, d: usize, seed: u64) -> Self {
        Self {
            policy,
            capacity,
            d,
            seed,
            x: Vec::new(),
            y: Vec::new(),
            seen: 0,
            nn: Vec::new(),
            scale: vec![1.0; d],
        }
    }

    /// A memory holding `x [n·d]`, `y [n]` after `seen` rows offered (a restore); the caller
    /// has checked the shapes and `n ≤ capacity`.
    pub fn from_rows(
        policy: MemoryPolicy,
        capacity: usize,
        d: usize,
        seed: u64,
        (x, y, seen): (Vec<f64>, Vec<f64>, u64),
    ) -> Self {
        let mut m = Self {
            x,
            y,
            seen,
            ..Self::new(policy, capacity, d, seed)
        };
        if policy == MemoryPolicy::Spread {
            m.nn = (0..m.len()).map(|i| m.nearest(m.row(i), Some(i))).collect();
        }
        m
    }

    /// Sets the spread policy's metric (`scale [d]`, see [`Memory::offer`]) and recomputes
    /// every row's nearest neighbour in it, O(n² d) (at a fit or a restore).
    pub fn set_scale(&mut self, scale: Vec<f64>) {
        debug_assert_eq!(scale.len(), self.d);
        self.scale = scale;
        if self.policy == MemoryPolicy::Spread {
            self.nn = (0..self.len())
                .map(|i| self.nearest(self.row(i), Some(i)))
                .collect();
        }
    }

    /// Rows held (≤ capacity).
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// True with no row.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Input width d.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Row `i` of x.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.d..(i + 1) * self.d]
    }

    /// All rows, `[n·d]` row-major.
    pub fn x(&self) -> &[f64] {
        &self.x
    }

    /// Targets `[n]`.
    pub fn y(&self) -> &[f64] {
        &self.y
    }

    /// Rows offered so far (the reservoir's counter).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Offers the rows of a checked block `(x [b, d], y [b])`, keeps what the policy says and
    /// returns the change made ([`Plan`]).
    pub fn offer(&mut self, x: MatRef<'_, f64>, y: &[f64]) -> Plan {
        let b = y.len();
        if self.capacity == 0 {
            return Plan::default();
        }
        let plan = match self.policy {
            MemoryPolicy::Recent => {
                let drop = (self.len() + b).saturating_sub(self.capacity);
                let old_drop = drop.min(self.len());
                Plan {
                    remove: (0..old_drop).collect(),
                    add: (drop - old_drop..b).collect(),
                }
            }
            MemoryPolicy::Reservoir => self.plan_reservoir(b),
            MemoryPolicy::Spread => return self.offer_spread(x, y),
        };
        self.seen += b as u64;
        self.apply(&plan, x, y);
        plan
    }

    /// Algorithm R over a logical list of slots: row t (1-based count of rows seen) enters
    /// while the memory is not full, and then replaces slot `j < capacity` for `j` uniform in
    /// `0..t` (and is dropped otherwise).
    fn plan_reservoir(&self, b: usize) -> Plan {
        let mut slots: Vec<Src> = (0..self.len()).map(Src::Old).collect();
        for r in 0..b {
            let t = self.seen + r as u64 + 1;
            if slots.len() < self.capacity {
                slots.push(Src::New(r));
            } else {
                let j = Rng::new(self.seed, RESERVOIR_STREAM.wrapping_add(t)).below(t as usize);
                if j < self.capacity {
                    slots[j] = Src::New(r);
                }
            }
        }
        plan_of(&slots, self.len())
    }

    /// Spread: each row enters; when full, one point of the closest pair (in the metric set by
    /// [`Memory::set_scale`]) among the
    /// `capacity + 1` candidates leaves: the old one (the first in memory order when both are
    /// old), so a new row close to an old one replaces it. O(capacity·d) per row, plus a rescan of the rows whose nearest
    /// neighbour left.
    fn offer_spread(&mut self, x: MatRef<'_, f64>, y: &[f64]) -> Plan {
        let d = self.d;
        let block: Vec<f64> = (0..y.len())
            .flat_map(|r| (0..d).map(move |j| x[(r, j)]))
            .collect();
        let mut slots: Vec<Src> = (0..self.len()).map(Src::Old).collect();
        let mut nn = std::mem::take(&mut self.nn);
        let point = |s: Src| -> &[f64] {
            match s {
                Src::Old(i) => &self.x[i * d..(i + 1) * d],
                Src::New(r) => &block[r * d..(r + 1) * d],
            }
        };
        for r in 0..y.len() {
            let p = &block[r * d..(r + 1) * d];
            let dist = |a: &[f64], b: &[f64]| scaled_sqdist(a, b, &self.scale);
            let dp: Vec<f64> = slots.iter().map(|&s| dist(point(s), p)).collect();
            let (best, nn_p) = argmin(&dp, None);
            if slots.len() < self.capacity {
                for (e, &dv) in nn.iter_mut().zip(&dp) {
                    if dv < e.0 {
                        *e = (dv, slots.len());
                    }
                }
                slots.push(Src::New(r));
                nn.push((best, nn_p));
                continue;
            }
            // Effective nearest distances with the new row among the candidates.
            let eff: Vec<f64> = nn.iter().zip(&dp).map(|(e, &dv)| e.0.min(dv)).collect();
            let e = argmin(&eff, None).1;
            slots[e] = Src::New(r);
            let (be, nne) = argmin(&dp, Some(e));
            nn[e] = (be, nne);
            for i in 0..slots.len() {
                if i == e {
                    continue;
                }
                if nn[i].1 == e {
                    let pi = point(slots[i]);
                    let dists: Vec<f64> = slots.iter().map(|&s| dist(point(s), pi)).collect();
                    nn[i] = argmin(&dists, Some(i));
                } else if dp[i] < nn[i].0 {
                    nn[i] = (dp[i], e);
                }
            }
        }
        self.seen += y.len() as u64;
        let plan = plan_of(&slots, self.len());
        // Re-index nn from slots to the memory's order after the plan: kept old rows in order,
        // then the new rows in block order.
        let mut pos = vec![0usize; slots.len()];
        let mut order: Vec<(Src, usize)> = slots.iter().copied().zip(0..).collect();
        order.sort_by_key(|(s, _)| match *s {
            Src::Old(i) => (0, i),
            Src::New(r) => (1, r),
        });
        for (p, &(_, slot)) in order.iter().enumerate() {
            pos[slot] = p;
        }
        self.nn = order
            .iter()
            .map(|&(_, slot)| (nn[slot].0, pos[nn[slot].1.min(slots.len() - 1)]))
            .collect();
        self.apply(&plan, x, y);
        plan
    }

    /// Deletes the plan's old rows and appends its new rows (not the nn state).
    fn apply(&mut self, plan: &Plan, x: MatRef<'_, f64>, y: &[f64]) {
        let d = self.d;
        retain_rows(&mut self.x, d, &plan.remove);
        retain_rows(&mut self.y, 1, &plan.remove);
        for &r in &plan.add {
            self.x.extend((0..d).map(|j| x[(r, j)]));
            self.y.push(y[r]);
        }
    }

    /// `(‖p − x_j‖², j)` of the nearest row `j ≠ skip` (`(∞, 0)` with none).
    fn nearest(&self, p: &[f64], skip: Option<usize>) -> (f64, usize) {
        let dists: Vec<f64> = (0..self.len())
            .map(|j| scaled_sqdist(self.row(j), p, &self.scale))
            .collect();
        argmin(&dists, skip)
    }
}

/// Deletes rows `remove` (ascending) of a row-major `[n, width]` buffer, in one pass.
pub(crate) fn retain_rows(v: &mut Vec<f64>, width: usize, remove: &[usize]) {
    if remove.is_empty() {
        return;
    }
    let n = v.len() / width.max(1);
    let mut at = 0;
    let mut next = remove.iter().peekable();
    for i in 0..n {
        if next.peek() == Some(&&i) {
            next.next();
            continue;
        }
        v.copy_within(i * width..(i + 1) * width, at * width);
        at += 1;
    }
    v.truncate(at * width);
}

/// The change from `old` rows to a logical list of slots: old rows absent are deleted, new
/// rows present are appended in block order.
fn plan_of(slots: &[Src], old: usize) -> Plan {
    let mut kept = vec![false; old];
    let mut add = Vec::new();
    for s in slots {
        match *s {
            Src::Old(i) => kept[i] = true,
            Src::New(r) => add.push(r),
        }
    }
    add.sort_unstable();
    Plan {
        remove: (0..old).filter(|&i| !kept[i]).collect(),
        add,
    }
}

/// `Σ_k ((a_k − b_k) s_k)²`.
fn scaled_sqdist(a: &[f64], b: &[f64], s: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .zip(s)
        .map(|((x, y), w)| ((x - y) * w) * ((x - y) * w))
        .sum()
}

/// `(min, first index)` of `v` skipping `skip` (`(∞, 0)` when nothing is left).
fn argmin(v: &[f64], skip: Option<usize>) -> (f64, usize) {
    let mut best = (f64::INFINITY, 0);
    for (i, &a) in v.iter().enumerate() {
        if Some(i) != skip && a < best.0 {
            best = (a, i);
        }
    }
    best
}
