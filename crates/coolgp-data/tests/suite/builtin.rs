//! The shipped datasets in `data/`.

use std::io::{BufRead, BufReader, Read};

use coolgp_data::{builtin, builtin_options, data_dir, load_csv_reader, DataError};
use flate2::read::MultiGzDecoder;

#[test]
fn airline_full() {
    let d = builtin("airline", &data_dir()).expect("airline");
    assert_eq!(d.len(), 273_853);
    assert_eq!(d.dim(), 8);
    assert_eq!(d.target_name, "arr_delay");
    assert_eq!(
        d.input_names,
        [
            "month",
            "day_of_month",
            "day_of_week",
            "plane_age",
            "air_time",
            "distance",
            "arr_time",
            "dep_time"
        ]
    );
    assert!(d.keys.is_none());
    // first data row: 1,1,2,14,227,1400,830,517,11
    assert_eq!(
        d.row(0),
        vec![1.0, 1.0, 2.0, 14.0, 227.0, 1400.0, 830.0, 517.0]
    );
    assert_eq!(d.y[0], 11.0);
}

/// The first `lines` lines (header included) of a shipped file, decompressed.
fn head_of(file: &str, lines: usize) -> String {
    let f = std::fs::File::open(data_dir().join(file)).expect("open");
    let mut out = String::new();
    for line in BufReader::new(MultiGzDecoder::new(f)).lines().take(lines) {
        out.push_str(&line.expect("line"));
        out.push('\n');
    }
    out
}

#[test]
fn station_sets_head() {
    for (name, first_station) in [("wind", "RPT"), ("air", "DESH001")] {
        let (file, opts) = builtin_options(name).expect("options");
        let text = head_of(file, 1001);
        let (d, rep) = load_csv_reader(file, text.as_bytes(), &opts).expect("load");
        assert_eq!(rep.rows_read, 1000);
        assert_eq!((d.len(), d.dim()), (1000, 4));
        assert_eq!(d.input_names, ["lon", "lat", "day", "doy"]);
        assert_eq!(d.target_name, "value");
        let keys = d.keys.as_ref().expect("keys");
        assert_eq!(keys.len(), 1000);
        if name == "wind" {
            assert_eq!(keys[0], first_station);
        }
        assert!(d.y.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn wind_full_has_12_stations() {
    let d = builtin("wind", &data_dir()).expect("wind");
    assert_eq!(d.len(), 78_888);
    let mut keys = d.keys.clone().expect("keys");
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 12);
}

#[test]
fn airline_head_via_reader() {
    let (file, opts) = builtin_options("airline").expect("options");
    let text = head_of(file, 1001);
    let (d, _) = load_csv_reader(file, text.as_bytes(), &opts).expect("load");
    assert_eq!((d.len(), d.dim()), (1000, 8));
    // the reader path also takes the compressed bytes directly
    let mut gzbytes = Vec::new();
    std::fs::File::open(data_dir().join(file))
        .expect("open")
        .take(4096)
        .read_to_end(&mut gzbytes)
        .expect("read");
    // a truncated stream is an error, not a panic
    assert!(load_csv_reader(file, gzbytes.as_slice(), &opts).is_err());
}

#[test]
fn unknown_name() {
    match builtin("nope", &data_dir()) {
        Err(e @ DataError::UnknownDataset { .. }) => {
            assert!(e.to_string().contains("airline, wind, air"))
        }
        other => panic!("{other:?}"),
    }
}
