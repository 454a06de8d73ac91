//! The map as `grid_map_msgs/msg/GridMap` (`--ros2-map-format grid_map`): the layers `mean`
//! and `variance` over the grid of [`crate::map`], as ANYbotics' grid_map (ROS 2 Humble and
//! later) stores and sends them.
//!
//! grid_map's conventions, followed exactly (grid_map_core `GridMapMath.cpp`, grid_map_ros
//! `GridMapRosConverter::toMessage` and `GridMapMsgHelpers.hpp`):
//!
//! - A layer is an Eigen matrix of `rows × cols` cells, rows along the map's x axis (the first
//!   spanned input), columns along y (the second); the cell size is `resolution` on both axes,
//!   so the two spanned inputs must have equal spacings.
//! - `info.length_x = rows · resolution`, `info.length_y = cols · resolution`; `info.pose` is
//!   the map's centre (orientation identity, z = 0).
//! - Index (0, 0) is the cell at the *largest* x and y: with start indices 0, cell `(i, j)`
//!   lies at `centre + length / 2 − resolution / 2 − (i, j) · resolution`. Our grid point
//!   `(ix, iy)` (x = `lo + ix · resolution`) is therefore cell `(rows − 1 − ix, cols − 1 − iy)`.
//! - The matrix is sent column-major (Eigen's default): element `i + j · rows`, with
//!   `layout.dim[0] = {"column_index", cols, rows · cols}`, `layout.dim[1] = {"row_index",
//!   rows, rows}`, `data_offset = 0`; the values are float32 (NaN for an unknown cell).
//! - `outer_start_index = inner_start_index = 0` (no circular-buffer shift); `basic_layers`
//!   empty, as a `grid_map::GridMap` has by default.

use crate::cdr::CdrWriter;
use crate::error::Ros2Error;
use crate::map::{header, point_cloud, MapGrid};
use crate::types::Prim;

/// The layers of the map, in this order.
pub const LAYERS: [&str; 2] = ["mean", "variance"];

/// The ROS type of a grid map.
pub const GRID_MAP_TYPE: &str = "grid_map_msgs/msg/GridMap";

/// Relative tolerance under which the two spacings count as equal (decimal grids such as
/// `48:48.0006:4` and `11:11.0004:3` differ in the last bits).
const SPACING_TOLERANCE: f64 = 1e-9;

/// The message a node publishes its map as (`--ros2-map-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapFormat {
    /// An organized `sensor_msgs/msg/PointCloud2` ([`crate::map::point_cloud`]).
    #[default]
    PointCloud2,
    /// A `grid_map_msgs/msg/GridMap` with layers `mean` and `variance` ([`grid_map`]).
    GridMap,
}

impl MapFormat {
    /// `pointcloud2` or `grid_map`, as the flag spells it.
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] naming the two formats.
    pub fn parse(text: &str) -> Result<Self, Ros2Error> {
        match text.trim() {
            "pointcloud2" => Ok(Self::PointCloud2),
            "grid_map" => Ok(Self::GridMap),
            other => Err(Ros2Error::Spec(format!(
                "--ros2-map-format {other}: use pointcloud2 (sensor_msgs/msg/PointCloud2) or \
                 grid_map (grid_map_msgs/msg/GridMap, layers mean and variance)"
            ))),
        }
    }

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PointCloud2 => "pointcloud2",
            Self::GridMap => "grid_map",
        }
    }

    /// The ROS type the map is published as (`pkg/msg/Name`).
    pub fn type_name(self) -> &'static str {
        match self {
            Self::PointCloud2 => "sensor_msgs/msg/PointCloud2",
            Self::GridMap => GRID_MAP_TYPE,
        }
    }

    /// The map's message: `grid`'s predictive `mean` and `variance` (row-major as
    /// [`MapGrid::rows`]) in this format.
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] if the format is grid_map and the grid has no single resolution
    /// ([`Geometry::of`]).
    pub fn encode(
        self,
        grid: &MapGrid,
        mean: &[f64],
        variance: &[f64],
        stamp_ns: i64,
        frame_id: &str,
    ) -> Result<Vec<u8>, Ros2Error> {
        match self {
            Self::PointCloud2 => Ok(point_cloud(grid, mean, variance, stamp_ns, frame_id)),
            Self::GridMap => grid_map(grid, mean, variance, stamp_ns, frame_id),
        }
    }
}

/// A grid's shape as a grid_map.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    /// Cell size on both axes.
    pub resolution: f64,
    /// Cells along x (the first spanned input): the matrix's rows.
    pub rows: usize,
    /// Cells along y (the second spanned input): the matrix's columns.
    pub cols: usize,
    /// The map's centre (x, y).
    pub centre: [f64; 2],
}

impl Geometry {
    /// The grid_map shape of `grid`; `inputs` name the columns in errors (a missing name
    /// reads `input #k`).
    ///
    /// # Errors
    /// [`Ros2Error::Spec`] if a spanned input has fewer than 2 points or does not increase,
    /// or the two spacings differ (naming both).
    pub fn of(grid: &MapGrid, inputs: &[String]) -> Result<Self, Ros2Error> {
        let name = |col: usize| {
            inputs
                .get(col)
                .map_or_else(|| format!("input #{col}"), |n| format!("`{n}`"))
        };
        let mut spacing = [0.0; 2];
        for (k, ax) in grid.axes.iter().enumerate() {
            if ax.n < 2 || ax.hi <= ax.lo {
                return Err(Ros2Error::Spec(format!(
                    "--ros2-map-format grid_map: {} spans {}:{}:{}; a grid_map needs at least \
                     2 points along each spanned input, from low to high",
                    name(ax.col),
                    ax.lo,
                    ax.hi,
                    ax.n
                )));
            }
            spacing[k] = (ax.hi - ax.lo) / (ax.n - 1) as f64;
        }
        let [sx, sy] = spacing;
        if (sx - sy).abs() > SPACING_TOLERANCE * sx.max(sy) {
            let [ax, ay] = &grid.axes;
            return Err(Ros2Error::Spec(format!(
                "--ros2-map-format grid_map needs equal spacings on both spanned inputs (a \
                 grid_map has one resolution): {} is spaced {sx} ({}:{}:{}), {} {sy} ({}:{}:{}); \
                 choose the point counts so that (HI - LO) / (N - 1) agree, or use \
                 --ros2-map-format pointcloud2",
                name(ax.col),
                ax.lo,
                ax.hi,
                ax.n,
                name(ay.col),
                ay.lo,
                ay.hi,
                ay.n,
            )));
        }
        Ok(Self {
            resolution: sx,
            rows: grid.axes[0].n,
            cols: grid.axes[1].n,
            centre: [
                0.5 * (grid.axes[0].lo + grid.axes[0].hi),
                0.5 * (grid.axes[1].lo + grid.axes[1].hi),
            ],
        })
    }

    /// The grid_map shape of the grid `text` (`--ros2-map`) describes, before the data's
    /// inputs are known: the names are taken as written.
    ///
    /// # Errors
    /// As [`MapGrid::parse`] and [`Geometry::of`].
    pub fn of_text(text: &str) -> Result<Self, Ros2Error> {
        let names: Vec<String> = text
            .split(',')
            .filter_map(|p| p.split_once('='))
            .map(|(n, _)| n.trim().to_string())
            .collect();
        Self::of(&MapGrid::parse(text, &names)?, &names)
    }

    /// The index into the row-major values of [`MapGrid::rows`] of element `k` of a layer's
    /// column-major data (cell `i = k % rows`, `j = k / rows`).
    pub fn source(&self, k: usize) -> usize {
        let (i, j) = (k % self.rows, k / self.rows);
        let (ix, iy) = (self.rows - 1 - i, self.cols - 1 - j);
        iy * self.rows + ix
    }
}

/// The GridMap message of a map: `grid`'s predictive `mean` and `variance` (one per point,
/// row-major as [`MapGrid::rows`]) as the layers [`LAYERS`]; a point without a value is NaN.
///
/// # Errors
/// [`Ros2Error::Spec`] if the grid has no single resolution ([`Geometry::of`]).
pub fn grid_map(
    grid: &MapGrid,
    mean: &[f64],
    variance: &[f64],
    stamp_ns: i64,
    frame_id: &str,
) -> Result<Vec<u8>, Ros2Error> {
    let g = Geometry::of(grid, &[])?;
    let cells = g.rows * g.cols;
    let mut w = CdrWriter::with_capacity(256 + 2 * 4 * cells);
    header(&mut w, stamp_ns, frame_id);
    w.f64(g.resolution);
    w.f64(g.rows as f64 * g.resolution);
    w.f64(g.cols as f64 * g.resolution);
    for v in [g.centre[0], g.centre[1], 0.0, 0.0, 0.0, 0.0, 1.0] {
        w.f64(v);
    }
    for layers in [&LAYERS[..], &[]] {
        w.u32(layers.len() as u32);
        for l in layers {
            w.string(l);
        }
    }
    w.u32(LAYERS.len() as u32);
    for values in [mean, variance] {
        w.u32(2);
        for (label, size, stride) in [
            ("column_index", g.cols, cells),
            ("row_index", g.rows, g.rows),
        ] {
            w.string(label);
            w.u32(size as u32);
            w.u32(stride as u32);
        }
        w.u32(0);
        w.u32(cells as u32);
        let mut data = Vec::with_capacity(4 * cells);
        for k in 0..cells {
            let v = values.get(g.source(k)).copied().unwrap_or(f64::NAN) as f32;
            data.extend_from_slice(&v.to_le_bytes());
        }
        w.raw(&data);
    }
    w.number(Prim::U16, 0.0);
    w.number(Prim::U16, 0.0);
    Ok(w.finish())
}

#[cfg(test)]
#[path = "grid_map_tests.rs"]
mod tests;
