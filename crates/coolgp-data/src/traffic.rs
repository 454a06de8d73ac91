//! A seeded stand-in for a road-traffic speed table (issue 18): many discrete road segments
//! described by a low-dimensional embedding, a time-of-day input, and small blocks.
//!
//! Each of `segments` segments has a 5-d embedding `e_s ~ N(0, I)` (as a learned embedding
//! of a road graph would give) and is observed at every one of `slots` time slots of a day
//! (`slot ∈ {0, …, slots − 1}`, one row per segment and slot, in time order: all segments of
//! slot 0, then slot 1, …). Its speed in km/h is
//!
//! ```text
//! y = 55 + 12·u1(e) − depth(e)·rush(t) + 4·u2(e, 3t) + local_s + N(0, noise²)
//! rush(t) = exp(−(t − 0.3)²/0.005) + 0.8·exp(−(t − 0.7)²/0.008),   t = slot/slots
//! depth(e) = 15 + 10·u3(e)
//! ```
//!
//! with `u1, u2, u3` unit-SE-kernel GP draws ([`crate::RandomFeatures`]; `u1`, `u3` on the
//! embedding scaled by 1/2, `u2` on (embedding, 3t)): smooth in the embedding, a time-of-day
//! profile with two rush hours whose depth varies smoothly across segments, an interaction of
//! place and time, and a per-segment offset `local_s ~ N(0, 8²)` that no smooth function of
//! the embedding explains (local structure). The inputs are `slot, e1, …, e5`.

use coolgp::faer::Mat;
use coolgp::rng::Rng;

use crate::synthetic::RandomFeatures;
use crate::table::Dataset;

const STREAM_EMBED: u64 = 0x7a_0001;
const STREAM_FIELDS: u64 = 0x7a_0002;
const STREAM_NOISE: u64 = 0x7a_0003;

/// Shape of the traffic-like table ([`traffic`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrafficConfig {
    /// Road segments (discrete locations).
    pub segments: usize,
    /// Time slots per day.
    pub slots: usize,
    /// Standard deviation of the observation noise (km/h).
    pub noise: f64,
    /// Seed of every draw.
    pub seed: u64,
}

impl Default for TrafficConfig {
    /// 775 segments × 54 slots (41,850 rows), noise 6 km/h, seed 0.
    fn default() -> Self {
        Self {
            segments: 775,
            slots: 54,
            noise: 6.0,
            seed: 0,
        }
    }
}

/// Embedding dimension of a segment.
pub const EMBED_DIM: usize = 5;

/// The traffic-like table of `cfg` (module docs): `segments·slots` rows of
/// `(slot, e1, …, e5) → speed`, time order. Deterministic in `cfg`.
pub fn traffic(cfg: &TrafficConfig) -> Dataset {
    let mut rng = Rng::new(cfg.seed, STREAM_EMBED);
    let embed: Vec<[f64; EMBED_DIM]> = (0..cfg.segments)
        .map(|_| std::array::from_fn(|_| rng.normal()))
        .collect();
    let local: Vec<f64> = (0..cfg.segments).map(|_| 8.0 * rng.normal()).collect();
    let mut frng = Rng::new(cfg.seed, STREAM_FIELDS);
    let u1 = RandomFeatures::new(EMBED_DIM, 500, &mut frng);
    let u2 = RandomFeatures::new(EMBED_DIM + 1, 500, &mut frng);
    let u3 = RandomFeatures::new(EMBED_DIM, 500, &mut frng);
    let mut noise = Rng::new(cfg.seed, STREAM_NOISE);
    let n = cfg.segments * cfg.slots;
    let mut x = Mat::zeros(n, EMBED_DIM + 1);
    let mut y = Vec::with_capacity(n);
    let mut half = [0.0; EMBED_DIM];
    let mut with_time = [0.0; EMBED_DIM + 1];
    for slot in 0..cfg.slots {
        let t = slot as f64 / cfg.slots as f64;
        let rush = (-(t - 0.3).powi(2) / 0.005).exp() + 0.8 * (-(t - 0.7).powi(2) / 0.008).exp();
        for (s, e) in embed.iter().enumerate() {
            let row = y.len();
            x[(row, 0)] = slot as f64;
            for (k, &v) in e.iter().enumerate() {
                x[(row, k + 1)] = v;
                half[k] = 0.5 * v;
                with_time[k] = 0.5 * v;
            }
            with_time[EMBED_DIM] = 3.0 * t;
            let eval = |f: &RandomFeatures, z: &[f64]| f.eval(z).unwrap_or(0.0);
            let depth = 15.0 + 10.0 * eval(&u3, &half);
            let v = 55.0 + 12.0 * eval(&u1, &half) - depth * rush
                + 4.0 * eval(&u2, &with_time)
                + local[s]
                + cfg.noise * noise.normal();
            y.push(v);
        }
    }
    let mut input_names = vec!["slot".to_owned()];
    input_names.extend((1..=EMBED_DIM).map(|k| format!("e{k}")));
    Dataset {
        x,
        y,
        input_names,
        target_name: "speed".into(),
        keys: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_one_row_per_segment_and_slot_in_time_order_and_is_seeded() {
        let cfg = TrafficConfig {
            segments: 30,
            slots: 6,
            ..TrafficConfig::default()
        };
        let d = traffic(&cfg);
        assert_eq!((d.len(), d.dim()), (180, 6));
        assert_eq!(d.input_names[0], "slot");
        assert_eq!((d.x[(0, 0)], d.x[(29, 0)], d.x[(30, 0)]), (0.0, 0.0, 1.0));
        // Segment 3's embedding is the same at every slot.
        assert_eq!(d.x[(3, 2)], d.x[(33, 2)]);
        assert_eq!(traffic(&cfg).y, d.y, "deterministic");
        let other = traffic(&TrafficConfig { seed: 1, ..cfg });
        assert_ne!(other.y, d.y);
        let mean = d.y.iter().sum::<f64>() / d.len() as f64;
        assert!((30.0..80.0).contains(&mean), "speeds in km/h: mean {mean}");
    }
}
