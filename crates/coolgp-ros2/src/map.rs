//! The map a node publishes: its predictions over a grid, as `sensor_msgs/msg/PointCloud2`.
//!
//! `--ros2-map NAME=LO:HI:N,NAME=LO:HI:N[,NAME=VALUE…]`: two inputs spanned by an N-point
//! grid each (the first along x, the second along y), any other input fixed at a value or,
//! if not named, at its value in the latest row. The cloud is organized (height = the
//! second input's N, width = the first's), with fields `x`, `y`, `z` (float32; z = 0, so
//! RViz draws it flat), `mean` and `variance` (float64, the predictive mean and variance of
//! f in the target's units), 32 bytes a point, little endian, row-major.

use crate::cdr::CdrWriter;
use crate::error::Ros2Error;

/// `sensor_msgs/msg/PointField` datatype FLOAT32.
pub const FLOAT32: u8 = 7;
/// `sensor_msgs/msg/PointField` datatype FLOAT64.
pub const FLOAT64: u8 = 8;
/// Bytes per point.
pub const POINT_STEP: u32 = 32;
/// The cloud's fields: name, byte offset, datatype.
pub const FIELDS: [(&str, u32, u8); 5] = [
    ("x", 0, FLOAT32),
    ("y", 4, FLOAT32),
    ("z", 8, FLOAT32),
    ("mean", 16, FLOAT64),
    ("variance", 24, FLOAT64),
];

/// One spanned axis: an input column and its grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Input column index.
    pub col: usize,
    /// First value.
    pub lo: f64,
    /// Last value.
    pub hi: f64,
    /// Number of points (≥ 2, or 1 for lo alone).
    pub n: usize,
}

impl Axis {
    /// The k-th grid value.
    pub fn value(&self, k: usize) -> f64 {
        if self.n <= 1 {
            self.lo
        } else {
            self.lo + (self.hi - self.lo) * k as f64 / (self.n - 1) as f64
        }
    }
}

/// A map grid over the inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct MapGrid {
    /// The two spanned inputs (x, then y).
    pub axes: [Axis; 2],
    /// Inputs fixed at a value.
    pub fixed: Vec<(usize, f64)>,
    /// Number of inputs.
    pub dim: usize,
}

/// Most points a map may have (a 1000 × 1000 grid).
pub const MAX_POINTS: usize = 1_000_000;

impl MapGrid {
    /// Parses `NAME=LO:HI:N,NAME=LO:HI:N[,NAME=VALUE…]` against the input names.
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] naming the problem: an unknown input, not exactly two spanned
    /// inputs, a bad number, a grid over [`MAX_POINTS`].
    pub fn parse(text: &str, inputs: &[String]) -> Result<Self, Ros2Error> {
        let bad = |m: String| Ros2Error::Spec(format!("--ros2-map `{text}`: {m}"));
        let num = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(format!("`{s}` is not a finite number")))
        };
        let mut axes = Vec::new();
        let mut fixed = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("`{part}`: write NAME=LO:HI:N or NAME=VALUE")))?;
            let col = inputs
                .iter()
                .position(|i| i == name.trim())
                .ok_or_else(|| {
                    bad(format!(
                        "no input `{}`; the inputs: {}",
                        name.trim(),
                        inputs.join(", ")
                    ))
                })?;
            let pieces: Vec<&str> = value.split(':').collect();
            match pieces.as_slice() {
                [lo, hi, n] => {
                    let n: usize = n
                        .trim()
                        .parse()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| bad(format!("`{n}` is not a point count ≥ 1")))?;
                    axes.push(Axis {
                        col,
                        lo: num(lo)?,
                        hi: num(hi)?,
                        n,
                    });
                }
                [v] => fixed.push((col, num(v)?)),
                _ => return Err(bad(format!("`{part}`: write NAME=LO:HI:N or NAME=VALUE"))),
            }
        }
        let [x, y]: [Axis; 2] = axes
            .try_into()
            .map_err(|a: Vec<Axis>| bad(format!("span exactly two inputs, got {}", a.len())))?;
        if x.col == y.col {
            return Err(bad("the two spanned inputs must differ".into()));
        }
        if x.n.saturating_mul(y.n) > MAX_POINTS {
            return Err(bad(format!("{} points; at most {MAX_POINTS}", x.n * y.n)));
        }
        Ok(Self {
            axes: [x, y],
            fixed,
            dim: inputs.len(),
        })
    }

    /// Number of grid points.
    pub fn len(&self) -> usize {
        self.axes[0].n * self.axes[1].n
    }

    /// Whether the grid is empty (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The grid's input rows, row-major (x fastest), in original units: spanned inputs on
    /// the grid, fixed ones at their value, the rest at `latest` (NaN if none yet).
    pub fn rows(&self, latest: Option<&[f64]>) -> Vec<Vec<f64>> {
        let [ax, ay] = &self.axes;
        let mut base: Vec<f64> = (0..self.dim)
            .map(|j| latest.and_then(|l| l.get(j).copied()).unwrap_or(f64::NAN))
            .collect();
        for &(c, v) in &self.fixed {
            base[c] = v;
        }
        let mut out = Vec::with_capacity(self.len());
        for iy in 0..ay.n {
            for ix in 0..ax.n {
                let mut r = base.clone();
                r[ax.col] = ax.value(ix);
                r[ay.col] = ay.value(iy);
                out.push(r);
            }
        }
        out
    }
}

/// Writes a `std_msgs/msg/Header`.
pub(crate) fn header(w: &mut CdrWriter, stamp_ns: i64, frame_id: &str) {
    w.i32(i32::try_from(stamp_ns.div_euclid(1_000_000_000)).unwrap_or(i32::MAX));
    w.u32(u32::try_from(stamp_ns.rem_euclid(1_000_000_000)).unwrap_or(0));
    w.string(frame_id);
}

/// The PointCloud2 message of a map: `grid`'s points with their predictive `mean` and
/// `variance` (one per point, row-major as [`MapGrid::rows`]).
pub fn point_cloud(
    grid: &MapGrid,
    mean: &[f64],
    variance: &[f64],
    stamp_ns: i64,
    frame_id: &str,
) -> Vec<u8> {
    let [ax, ay] = &grid.axes;
    let n = grid.len().min(mean.len()).min(variance.len());
    let mut w = CdrWriter::with_capacity(128 + n * POINT_STEP as usize);
    header(&mut w, stamp_ns, frame_id);
    w.u32(ay.n as u32);
    w.u32(ax.n as u32);
    w.u32(FIELDS.len() as u32);
    for (name, offset, datatype) in FIELDS {
        w.string(name);
        w.u32(offset);
        w.u8(datatype);
        w.u32(1);
    }
    w.u8(0);
    w.u32(POINT_STEP);
    w.u32(POINT_STEP * ax.n as u32);
    w.u32((n * POINT_STEP as usize) as u32);
    let mut data = Vec::with_capacity(n * POINT_STEP as usize);
    for k in 0..n {
        let (ix, iy) = (k % ax.n, k / ax.n);
        data.extend_from_slice(&(ax.value(ix) as f32).to_le_bytes());
        data.extend_from_slice(&(ay.value(iy) as f32).to_le_bytes());
        data.extend_from_slice(&0f32.to_le_bytes());
        data.extend_from_slice(&[0u8; 4]);
        data.extend_from_slice(&mean[k].to_le_bytes());
        data.extend_from_slice(&variance[k].to_le_bytes());
    }
    w.raw(&data);
    w.u8(u8::from(mean.iter().chain(variance).all(|v| v.is_finite())));
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdr::CdrReader;
    use crate::types::Prim;

    fn names() -> Vec<String> {
        ["lat", "lon", "alt"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn grids_parse_and_span() {
        let g = MapGrid::parse("lon=0:1:3, lat=10:12:2", &names()).expect("grid");
        assert_eq!(g.len(), 6);
        let rows = g.rows(Some(&[0.0, 0.0, 500.0]));
        assert_eq!(rows[0], [10.0, 0.0, 500.0]);
        assert_eq!(rows[1], [10.0, 0.5, 500.0]);
        assert_eq!(rows[5], [12.0, 1.0, 500.0]);
        let g = MapGrid::parse("lon=0:1:3,lat=10:12:2,alt=7", &names()).expect("grid");
        assert!(g.rows(None).iter().all(|r| r[2] == 7.0));
        for (bad, needle) in [
            ("lon=0:1:3", "exactly two"),
            ("lon=0:1:3,depth=0:1:2", "no input `depth`"),
            ("lon=0:1:3,lat=a:1:2", "not a finite number"),
            ("lon=0:1:0,lat=0:1:2", "point count"),
            ("lon=0:1:3,lon=0:1:2", "must differ"),
            ("lon=0:1:2000,lat=0:1:2000", "at most"),
            ("lon", "NAME=LO:HI:N"),
        ] {
            let err = MapGrid::parse(bad, &names()).expect_err(bad).to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn point_cloud_layout() {
        let g = MapGrid::parse("lon=0:1:2,lat=10:11:2", &names()).expect("grid");
        let mean = [1.0, 2.0, 3.0, 4.5];
        let var = [0.1, 0.2, 0.3, 0.4];
        let msg = point_cloud(&g, &mean, &var, 3_500_000_000, "map");
        let mut r = CdrReader::new(&msg).expect("cdr");
        assert_eq!(r.number(Prim::I32).expect("sec"), 3.0);
        assert_eq!(r.number(Prim::U32).expect("ns"), 5e8);
        assert_eq!(r.string().expect("frame"), "map");
        assert_eq!(r.number(Prim::U32).expect("height"), 2.0);
        assert_eq!(r.number(Prim::U32).expect("width"), 2.0);
        assert_eq!(r.number(Prim::U32).expect("fields"), 5.0);
        for (name, offset, dt) in FIELDS {
            assert_eq!(r.string().expect("name"), name);
            assert_eq!(r.number(Prim::U32).expect("offset"), f64::from(offset));
            assert_eq!(r.number(Prim::U8).expect("type"), f64::from(dt));
            assert_eq!(r.number(Prim::U32).expect("count"), 1.0);
        }
        assert_eq!(r.number(Prim::Bool).expect("be"), 0.0);
        assert_eq!(r.number(Prim::U32).expect("step"), 32.0);
        assert_eq!(r.number(Prim::U32).expect("row"), 64.0);
        assert_eq!(r.number(Prim::U32).expect("len"), 128.0);
        let data = &msg[msg.len() - 129..msg.len() - 1];
        let p3 = &data[96..128];
        assert_eq!(f32::from_le_bytes(p3[0..4].try_into().expect("4")), 1.0);
        assert_eq!(f32::from_le_bytes(p3[4..8].try_into().expect("4")), 11.0);
        assert_eq!(f64::from_le_bytes(p3[16..24].try_into().expect("8")), 4.5);
        assert_eq!(f64::from_le_bytes(p3[24..32].try_into().expect("8")), 0.4);
        assert_eq!(msg[msg.len() - 1], 1, "dense");
    }
}
