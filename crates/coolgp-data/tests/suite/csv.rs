//! CSV loading: errors name file, line and column; skipping; gzip; inference.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use coolgp_data::{load_csv, load_csv_reader, CsvOptions, DataError, LoadReport};
use flate2::write::GzEncoder;
use flate2::Compression;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A temp file with a unique name, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(ext: &str, bytes: &[u8]) -> Self {
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("coolgp-data-test-{}-{k}.{ext}", std::process::id()));
        std::fs::write(&path, bytes).expect("write temp file");
        Temp(path)
    }
    fn csv(text: &str) -> Self {
        Self::new("csv", text.as_bytes())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn gz(text: &str) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(text.as_bytes()).expect("gz write");
    enc.finish().expect("gz finish")
}

fn opts(target: &str) -> CsvOptions {
    CsvOptions::new(target)
}

/// Loads `text` from a temp file and returns the error message, checking it names the file.
fn err_of(text: &str, o: &CsvOptions) -> (DataError, String) {
    let f = Temp::csv(text);
    let e = match load_csv(&f.0, o) {
        Ok(_) => panic!("expected an error for {text:?}"),
        Err(e) => e,
    };
    let msg = e.to_string();
    let name = f.0.display().to_string();
    assert!(msg.contains(&name), "message {msg:?} does not name {name}");
    (e, msg)
}

const GOOD: &str = "a,b,y\n1,2,3\n4,5,6\n";

#[test]
fn loads_and_infers_numeric_inputs() {
    let text = "id,a,name,b,y\nr1,1.5,foo,2,3\nr2,-4,bar,5e1,6\n";
    let f = Temp::csv(text);
    let (d, rep) = load_csv(&f.0, &opts("y")).expect("load");
    // `id` and `name` are not numeric in the first row: not inputs
    assert_eq!(d.input_names, ["a", "b"]);
    assert_eq!(d.target_name, "y");
    assert_eq!((d.len(), d.dim()), (2, 2));
    assert_eq!(d.x[(1, 1)], 50.0);
    assert_eq!(d.y, vec![3.0, 6.0]);
    assert!(d.keys.is_none());
    assert_eq!(
        rep,
        LoadReport {
            rows_read: 2,
            rows_skipped: 0,
            first_skipped: vec![]
        }
    );
}

#[test]
fn explicit_inputs_and_agent_by() {
    let text = "st,a,b,c,y\nS1,1,2,3,4\nS2,5,6,7,8\n";
    let o = CsvOptions {
        target: "y".into(),
        inputs: Some(vec!["c".into(), "a".into()]),
        agent_by: Some("st".into()),
        skip_bad_rows: false,
    };
    let (d, _) = load_csv_reader("mem", text.as_bytes(), &o).expect("load");
    assert_eq!(d.input_names, ["c", "a"]);
    assert_eq!(d.x[(0, 0)], 3.0);
    assert_eq!(d.x[(1, 1)], 5.0);
    assert_eq!(d.keys, Some(vec!["S1".to_string(), "S2".to_string()]));
    // a numeric agent_by column is never an input
    let text = "st,a,y\n7,1,2\n8,3,4\n";
    let o = CsvOptions {
        agent_by: Some("st".into()),
        ..opts("y")
    };
    let (d, _) = load_csv_reader("mem", text.as_bytes(), &o).expect("load");
    assert_eq!(d.input_names, ["a"]);
    assert_eq!(d.keys, Some(vec!["7".to_string(), "8".to_string()]));
}

#[test]
fn non_numeric_value_names_file_line_column() {
    let (e, msg) = err_of("a,b,y\n1,2,3\n1,x,3\n", &opts("y"));
    assert!(
        matches!(&e, DataError::NotNumeric { line: 3, column, value, .. } if column == "b" && value == "x"),
        "{e:?}"
    );
    assert!(msg.contains(":3:") && msg.contains("`b`"), "{msg}");
    // in the target
    let (e, _) = err_of("a,y\n1,2\n2,3\n3,?\n", &opts("y"));
    assert!(matches!(&e, DataError::NotNumeric { line: 4, column, .. } if column == "y"));
    // empty field
    let (e, _) = err_of("a,y\n1,2\n,3\n", &opts("y"));
    assert!(matches!(&e, DataError::NotNumeric { line: 3, column, .. } if column == "a"));
}

#[test]
fn nan_and_inf_name_file_line_column() {
    let (e, msg) = err_of("a,b,y\n1,2,3\n1,NaN,3\n", &opts("y"));
    assert!(matches!(&e, DataError::NotFinite { line: 3, column, .. } if column == "b"));
    assert!(msg.contains(":3:") && msg.contains("`b`"), "{msg}");
    let (e, _) = err_of("a,b,y\n1,2,3\n1,2,3\n1,2,-inf\n", &opts("y"));
    assert!(matches!(&e, DataError::NotFinite { line: 4, column, .. } if column == "y"));
}

#[test]
fn wrong_column_count_names_file_line() {
    let (e, msg) = err_of("a,b,y\n1,2,3\n1,2\n", &opts("y"));
    assert!(matches!(
        e,
        DataError::ColumnCount {
            line: 3,
            expected: 3,
            found: 2,
            ..
        }
    ));
    assert!(msg.contains(":3:"), "{msg}");
    let (e, _) = err_of("a,b,y\n1,2,3,4\n", &opts("y"));
    assert!(matches!(
        e,
        DataError::ColumnCount {
            line: 2,
            found: 4,
            ..
        }
    ));
}

#[test]
fn blank_lines_keep_line_numbers() {
    let (e, _) = err_of("a,y\n1,2\n\n\n1,x\n", &opts("y"));
    assert!(matches!(e, DataError::NotNumeric { line: 5, .. }), "{e:?}");
    let (e, _) = err_of("a,y\r\n1,2\r\n\r\n1,x\r\n", &opts("y"));
    assert!(matches!(e, DataError::NotNumeric { line: 4, .. }), "{e:?}");
    // a quoted field spanning lines: the next record's line is still exact
    let (e, _) = err_of("s,a,y\n\"two\nlines\",1,2\nq,1,x\n", &opts("y"));
    assert!(matches!(e, DataError::NotNumeric { line: 4, .. }), "{e:?}");
    // leading blank lines before the header shift every line number
    let (e, msg) = err_of("\n\na,y\n1,2\n", &opts("z"));
    assert!(
        matches!(e, DataError::MissingColumn { line: 3, .. }),
        "{e:?}"
    );
    assert!(msg.contains(":3:"), "{msg}");
}

#[test]
fn missing_columns_list_available() {
    let (e, msg) = err_of(GOOD, &opts("z"));
    assert!(matches!(&e, DataError::MissingColumn { role: "target", column, .. } if column == "z"));
    assert!(
        msg.contains(":1:") && msg.contains("a, b, y") && msg.contains("`z`"),
        "{msg}"
    );

    let o = CsvOptions {
        inputs: Some(vec!["a".into(), "q".into()]),
        ..opts("y")
    };
    let (e, msg) = err_of(GOOD, &o);
    assert!(matches!(&e, DataError::MissingColumn { role: "input", column, .. } if column == "q"));
    assert!(msg.contains("a, b, y"), "{msg}");

    let o = CsvOptions {
        agent_by: Some("station".into()),
        ..opts("y")
    };
    let (e, msg) = err_of(GOOD, &o);
    assert!(
        matches!(&e, DataError::MissingColumn { role: "agent_by", column, .. } if column == "station")
    );
    assert!(msg.contains("a, b, y"), "{msg}");
}

#[test]
fn bad_options_and_headers() {
    let o = CsvOptions {
        inputs: Some(vec!["a".into(), "y".into()]),
        ..opts("y")
    };
    assert!(matches!(
        err_of(GOOD, &o).0,
        DataError::InvalidOptions { .. }
    ));
    let o = CsvOptions {
        inputs: Some(vec!["a".into()]),
        agent_by: Some("a".into()),
        ..opts("y")
    };
    assert!(matches!(
        err_of(GOOD, &o).0,
        DataError::InvalidOptions { .. }
    ));
    let (e, _) = err_of("a,a,y\n1,2,3\n", &opts("y"));
    assert!(matches!(&e, DataError::DuplicateColumn { column, .. } if column == "a"));
    // no numeric input at all
    let (e, _) = err_of("s,y\nfoo,1\n", &opts("y"));
    assert!(matches!(e, DataError::InvalidOptions { .. }));
}

#[test]
fn empty_file_and_header_only() {
    let (e, msg) = err_of("", &opts("y"));
    assert!(matches!(e, DataError::Empty { .. }), "{e:?}");
    assert!(msg.contains(":1:"), "{msg}");
    let (e, _) = err_of("a,y\n", &opts("y"));
    assert!(matches!(e, DataError::NoRows { skipped: 0, .. }), "{e:?}");
    let e = load_csv_reader("gzempty", gz("").as_slice(), &opts("y"));
    assert!(matches!(e, Err(DataError::Empty { .. })));
}

#[test]
fn missing_file_is_io_error_naming_it() {
    let p = std::env::temp_dir().join("coolgp-data-test-does-not-exist.csv");
    match load_csv(&p, &opts("y")) {
        Err(e @ DataError::Io { .. }) => {
            assert!(e
                .to_string()
                .contains("coolgp-data-test-does-not-exist.csv"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn skip_bad_rows_counts() {
    let text = "a,b,y\n\
                1,2,3\n\
                1,x,3\n\
                4,5,6\n\
                1,2\n\
                7,inf,9\n\
                1,2,3,4\n\
                10,11,12\n\
                ,1,2\n\
                1,1,NaN\n";
    let o = CsvOptions {
        skip_bad_rows: true,
        ..opts("y")
    };
    let f = Temp::csv(text);
    let (d, rep) = load_csv(&f.0, &o).expect("load");
    assert_eq!(d.y, vec![3.0, 6.0, 12.0]);
    assert_eq!(d.x[(2, 1)], 11.0);
    assert_eq!(rep.rows_read, 9);
    assert_eq!(rep.rows_skipped, 6);
    assert_eq!(rep.first_skipped.len(), 5);
    assert!(rep.first_skipped[0].contains(":3:") && rep.first_skipped[0].contains("`b`"));
    assert!(rep.first_skipped[1].contains(":5:"));
    assert!(rep.first_skipped[4].contains(":9:"));
    // all rows bad
    let (e, _) = err_of(
        "a,y\nx,1\ny,2\n",
        &CsvOptions {
            skip_bad_rows: true,
            ..opts("y")
        },
    );
    // the first row decides that `a` is not numeric, so there is no input at all
    assert!(matches!(e, DataError::InvalidOptions { .. }), "{e:?}");
    let o = CsvOptions {
        inputs: Some(vec!["a".into()]),
        skip_bad_rows: true,
        ..opts("y")
    };
    let (e, _) = err_of("a,y\nx,1\ny,2\n", &o);
    assert!(matches!(e, DataError::NoRows { skipped: 2, .. }), "{e:?}");
}

#[test]
fn skip_uses_first_well_formed_row_for_inference() {
    let text = "a,b,y\n1,2\n1,2,3\n";
    let o = CsvOptions {
        skip_bad_rows: true,
        ..opts("y")
    };
    let (d, rep) = load_csv_reader("mem", text.as_bytes(), &o).expect("load");
    assert_eq!((d.len(), d.dim(), rep.rows_skipped), (1, 2, 1));
}

#[test]
fn reads_gzip_files_and_streams() {
    let text = "a,b,y\n1,2,3\n4,5,6\n7,8,9\n";
    let f = Temp::new("csv.gz", &gz(text));
    let (d, _) = load_csv(&f.0, &opts("y")).expect("gz file");
    assert_eq!(d.y, vec![3.0, 6.0, 9.0]);
    assert_eq!(d.x[(2, 0)], 7.0);
    let (d2, _) = load_csv_reader("stdin", gz(text).as_slice(), &opts("y")).expect("gz stream");
    assert_eq!(d2.y, d.y);
    // errors inside gz files still name file and line
    let f = Temp::new("csv.gz", &gz("a,y\n1,2\n3,oops\n"));
    let e = load_csv(&f.0, &opts("y")).expect_err("bad value");
    assert!(matches!(e, DataError::NotNumeric { line: 3, .. }));
    assert!(e.to_string().contains(&f.0.display().to_string()));
    // a corrupt gzip stream is an I/O error, not a panic
    let mut bytes = gz(text);
    let mid = bytes.len() / 2;
    bytes.truncate(mid);
    let e = load_csv_reader("cut", bytes.as_slice(), &opts("y"));
    assert!(e.is_err());
}

#[test]
fn unterminated_quote_is_a_bad_row() {
    let (e, msg) = err_of("a,y\n1,2\n\"3,4\n5,6\n", &opts("y"));
    assert!(matches!(e, DataError::Csv { line: 3, .. }), "{e:?}");
    assert!(msg.contains(":3:"), "{msg}");
    let o = CsvOptions {
        skip_bad_rows: true,
        ..opts("y")
    };
    let (d, rep) = load_csv_reader("mem", "a,y\n1,2\n\"3,4\n5,6\n".as_bytes(), &o).expect("load");
    assert_eq!((d.len(), rep.rows_read, rep.rows_skipped), (1, 2, 1));
}

#[test]
fn whitespace_and_quotes() {
    let text = "a , \"b\" ,y\r\n 1 ,\"2\", 3\r\n";
    let (d, _) = load_csv_reader("mem", text.as_bytes(), &opts("y")).expect("load");
    assert_eq!(d.input_names, ["a", "b"]);
    assert_eq!((d.x[(0, 0)], d.x[(0, 1)], d.y[0]), (1.0, 2.0, 3.0));
}
