use super::*;
use crate::cdr::CdrReader;
use crate::map::point_cloud;
use crate::types::Prim;

fn names() -> Vec<String> {
    ["lat", "lon", "alt"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// A decoded layer: its dimensions (label, size, stride), offset and values.
struct Layer {
    dims: Vec<(String, u32, u32)>,
    offset: u32,
    data: Vec<f64>,
}

/// A decoded GridMap: stamp, frame, info (resolution, length x, y, pose), layers, basic
/// layers, data, start indices.
struct Decoded {
    stamp: (f64, f64),
    frame: String,
    info: [f64; 10],
    layers: Vec<String>,
    basic: Vec<String>,
    data: Vec<Layer>,
    start: (f64, f64),
}

fn strings(r: &mut CdrReader) -> Vec<String> {
    let n = r.u32().expect("count");
    (0..n)
        .map(|_| r.string().expect("string").to_string())
        .collect()
}

/// Walks the message field by field, as the .msg definitions lay it out.
fn decode(msg: &[u8]) -> Decoded {
    let mut r = CdrReader::new(msg).expect("cdr");
    let stamp = (
        r.number(Prim::I32).expect("sec"),
        r.number(Prim::U32).expect("ns"),
    );
    let frame = r.string().expect("frame").to_string();
    let mut info = [0.0; 10];
    for v in &mut info {
        *v = r.number(Prim::F64).expect("info");
    }
    let layers = strings(&mut r);
    let basic = strings(&mut r);
    let n = r.u32().expect("data count");
    let data = (0..n)
        .map(|_| {
            let nd = r.u32().expect("dims");
            let dims = (0..nd)
                .map(|_| {
                    let label = r.string().expect("label").to_string();
                    (label, r.u32().expect("size"), r.u32().expect("stride"))
                })
                .collect();
            let offset = r.u32().expect("offset");
            let len = r.u32().expect("len");
            let data = (0..len)
                .map(|_| r.number(Prim::F32).expect("value"))
                .collect();
            Layer { dims, offset, data }
        })
        .collect();
    let start = (
        r.number(Prim::U16).expect("outer"),
        r.number(Prim::U16).expect("inner"),
    );
    assert_eq!(r.remaining(), 0, "trailing bytes");
    Decoded {
        stamp,
        frame,
        info,
        layers,
        basic,
        data,
        start,
    }
}

#[test]
fn grid_map_layout_indices_and_values() {
    // x = lat: 10, 10.5 (2 points); y = lon: 0, 0.5, 1 (3 points); spacing 0.5 on both.
    let g = MapGrid::parse("lat=10:10.5:2,lon=0:1:3", &names()).expect("grid");
    let rows = g.rows(Some(&[0.0, 0.0, 7.0]));
    // Row-major values that tell the point: mean = 10 lat + lon, variance = its tenth.
    let mean: Vec<f64> = rows.iter().map(|r| 10.0 * r[0] + r[1]).collect();
    let var: Vec<f64> = mean.iter().map(|m| m / 10.0).collect();
    let msg = grid_map(&g, &mean, &var, 3_500_000_000, "map").expect("grid map");
    let d = decode(&msg);
    assert_eq!(d.stamp, (3.0, 5e8));
    assert_eq!(d.frame, "map");
    // resolution, length_x = 2 cells, length_y = 3 cells, centre, z 0, identity orientation.
    assert_eq!(d.info, [0.5, 1.0, 1.5, 10.25, 0.5, 0.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(d.layers, ["mean", "variance"]);
    assert!(d.basic.is_empty());
    assert_eq!(d.start, (0.0, 0.0));
    assert_eq!(d.data.len(), 2);
    let [res, lx, ly, cx, cy, ..] = d.info;
    for (layer, values) in d.data.iter().zip([&mean, &var]) {
        // Column-major, as grid_map_ros writes an Eigen matrix: outer = columns (y).
        assert_eq!(
            layer.dims,
            [
                ("column_index".to_string(), 3, 6),
                ("row_index".to_string(), 2, 2)
            ]
        );
        assert_eq!(layer.offset, 0);
        assert_eq!(layer.data.len(), 6);
        for (k, &v) in layer.data.iter().enumerate() {
            // grid_map's getPositionFromIndex with start index 0.
            let (i, j) = ((k % 2) as f64, (k / 2) as f64);
            let x = cx + 0.5 * lx - 0.5 * res - i * res;
            let y = cy + 0.5 * ly - 0.5 * res - j * res;
            let want = values[rows
                .iter()
                .position(|r| (r[0] - x).abs() < 1e-12 && (r[1] - y).abs() < 1e-12)
                .expect("a grid point at the cell's position")];
            assert_eq!(v, f64::from(want as f32), "cell ({i}, {j})");
        }
    }
    // Cell (0, 0) is the largest x and y: lat 10.5, lon 1 → mean 106; the last cell the
    // smallest: lat 10, lon 0 → 100.
    assert_eq!(d.data[0].data[0], 106.0);
    assert_eq!(d.data[0].data[5], 100.0);
    assert_eq!(d.data[0].data[1], 101.0, "cell (1, 0): lat 10, lon 1");
    assert_eq!(d.data[0].data[2], 105.5, "cell (0, 1): lat 10.5, lon 0.5");
}

#[test]
fn missing_values_are_nan_and_the_format_dispatches() {
    let g = MapGrid::parse("lon=0:1:2,lat=0:1:2", &names()).expect("grid");
    let d = decode(&grid_map(&g, &[1.0, 2.0, 3.0], &[0.5; 4], 0, "").expect("grid map"));
    // Row-major point 3 (lon 1, lat 1) has no mean: cell (0, 0).
    assert!(d.data[0].data[0].is_nan());
    assert_eq!(d.data[0].data[1..], [3.0, 2.0, 1.0]);
    assert_eq!(d.data[1].data, [0.5; 4]);
    let (mean, var) = ([1.0, 2.0, 3.0, 4.0], [0.1, 0.2, 0.3, 0.4]);
    assert_eq!(
        MapFormat::PointCloud2
            .encode(&g, &mean, &var, 5, "f")
            .expect("cloud"),
        point_cloud(&g, &mean, &var, 5, "f")
    );
    assert_eq!(
        MapFormat::GridMap
            .encode(&g, &mean, &var, 5, "f")
            .expect("grid map"),
        grid_map(&g, &mean, &var, 5, "f").expect("grid map")
    );
    assert_eq!(
        MapFormat::parse("grid_map").expect("ok"),
        MapFormat::GridMap
    );
    assert_eq!(
        MapFormat::parse("pointcloud2").expect("ok"),
        MapFormat::PointCloud2
    );
    assert_eq!(MapFormat::default(), MapFormat::PointCloud2);
    assert_eq!(MapFormat::GridMap.type_name(), "grid_map_msgs/msg/GridMap");
    let err = MapFormat::parse("gridmap")
        .expect_err("refused")
        .to_string();
    assert!(err.contains("gridmap") && err.contains("grid_map"), "{err}");
}

#[test]
fn unequal_spacings_are_refused_naming_both() {
    let err = Geometry::of_text("lat=10:11:3,lon=0:1:5")
        .expect_err("0.5 vs 0.25")
        .to_string();
    for needle in ["`lat`", "`lon`", "0.5", "0.25", "equal spacings"] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    let g = MapGrid::parse("lat=10:11:3,lon=0:1:5", &names()).expect("grid");
    let err = grid_map(&g, &[0.0; 15], &[0.0; 15], 0, "map")
        .expect_err("the encoder refuses too")
        .to_string();
    assert!(
        err.contains("input #0") && err.contains("input #1"),
        "{err}"
    );
    for (bad, needle) in [
        ("lat=10:11:1,lon=0:1:5", "at least 2 points"),
        ("lat=11:10:3,lon=0:1:3", "from low to high"),
        ("lat=10:11:3", "exactly two"),
    ] {
        let err = Geometry::of_text(bad).expect_err(bad).to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
    // Decimal grids whose spacings differ only in rounding are one resolution.
    let g = Geometry::of_text("latitude=48:48.0006:4,longitude=11:11.0004:3").expect("equal");
    assert_eq!((g.rows, g.cols), (4, 3));
    assert!((g.resolution - 0.0002).abs() < 1e-15);
}
