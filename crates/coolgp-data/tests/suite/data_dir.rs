//! `data_dir()` honours `COOLGP_DATA_DIR` (own test binary: no other test sees the variable).

use coolgp_data::{builtin, data_dir, DataError, DATA_DIR_ENV};

#[test]
fn env_var_overrides_and_default_exists() {
    std::env::remove_var(DATA_DIR_ENV);
    let default = data_dir();
    assert!(
        default.join("airline.csv.gz").is_file(),
        "{}",
        default.display()
    );
    let elsewhere = std::env::temp_dir().join("coolgp-data-test-no-such-dir");
    std::env::set_var(DATA_DIR_ENV, &elsewhere);
    assert_eq!(data_dir(), elsewhere);
    match builtin("wind", &data_dir()) {
        Err(e @ DataError::Io { .. }) => assert!(e.to_string().contains("wind.csv.gz")),
        other => panic!("{other:?}"),
    }
    std::env::set_var(DATA_DIR_ENV, "");
    assert_eq!(data_dir(), default);
}
