//! Tests of [`super`]: recordings cut short, hostile files.

use super::*;
use crate::cdr::Endian;
use crate::extract::encode_with;
use crate::types::lookup;

const FIX: &str = "sensor_msgs/msg/NavSatFix";
const TEMP: &str = "sensor_msgs/msg/Temperature";

fn spec() -> RowSpec {
    RowSpec::parse(
        &[format!("/fix:{FIX}:latitude,longitude")],
        &format!("/temp:{TEMP}:temperature"),
        0.05,
    )
    .expect("spec")
}

/// An MCAP file of `n` fix + temperature pairs (the crate's writer, chunks of ~4 KB).
fn write(path: &Path, n: usize) {
    write_with(path, n, Endian::Little, None);
}

/// [`write`] in byte order `endian`, each message's representation identifier replaced by
/// `id` if given.
fn write_with(path: &Path, n: usize, endian: Endian, id: Option<[u8; 2]>) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut w = mcap::WriteOptions::new()
        .compression(None)
        .chunk_size(Some(4096))
        .create(file)
        .expect("writer");
    let (fix, temp) = (lookup(FIX).expect("fix"), lookup(TEMP).expect("temp"));
    let mut channel = |ty: &crate::types::MsgType, topic: &str| {
        let schema = w.add_schema(ty.name, "ros2msg", b"").expect("schema");
        w.add_channel(schema, topic, "cdr", &BTreeMap::new())
            .expect("channel")
    };
    let (cf, ct) = (channel(fix, "/fix"), channel(temp, "/temp"));
    for k in 0..n {
        let t = 1_000_000_000 + k as i64 * 100_000_000;
        let values = [("latitude", k as f64), ("longitude", 1.0)];
        let f = encode_with(endian, fix, t, "gps", &values).expect("fix");
        let values = [("temperature", 2.0 * k as f64)];
        let m = encode_with(endian, temp, t + 1_000_000, "t", &values).expect("temp");
        for (ch, mut data, time) in [(cf, f, t), (ct, m, t + 1_000_000)] {
            if let Some(id) = id {
                data[..2].copy_from_slice(&id);
            }
            let header = mcap::records::MessageHeader {
                channel_id: ch,
                sequence: k as u32,
                log_time: time as u64,
                publish_time: time as u64,
            };
            w.write_to_known_channel(&header, &data).expect("write");
        }
    }
    w.finish().expect("finish");
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("coolgp-bag-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir.join(format!("{name}.mcap"))
}

#[test]
fn a_recording_cut_short_is_read_up_to_the_cut() {
    let path = tmp("cut");
    write(&path, 400);
    let whole = read_bag(&path, &spec()).expect("whole");
    assert_eq!((whole.rows.len(), whole.truncated), (400, false));
    assert_eq!(whole.rows[7].x, [7.0, 1.0]);
    assert_eq!(whole.rows[7].y, 14.0);
    // A recorder killed mid-file: the complete chunks before the cut are rows.
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("cut");
    let cut = read_bag(&path, &spec()).expect("cut file");
    assert!(cut.truncated);
    assert!(
        cut.rows.len() > 100 && cut.rows.len() < 400,
        "{}",
        cut.rows.len()
    );
    assert_eq!(cut.rows[..], whole.rows[..cut.rows.len()]);
}

#[test]
fn garbage_and_hostile_files_are_refused_not_read() {
    let path = tmp("bad");
    std::fs::write(&path, b"latitude,longitude\n1,2\n").expect("write");
    let err = read_bag(&path, &spec()).expect_err("not MCAP").to_string();
    assert!(err.contains("not an MCAP file"), "{err}");
    // The magic, then a record claiming 2^60 bytes: refused, not allocated.
    let mut hostile = MCAP_MAGIC.to_vec();
    hostile.push(mcap::records::op::CHUNK);
    hostile.extend_from_slice(&(1u64 << 60).to_le_bytes());
    std::fs::write(&path, &hostile).expect("write");
    let err = read_bag(&path, &spec()).expect_err("hostile").to_string();
    assert!(err.contains("corrupt MCAP"), "{err}");
    // A chunk whose body is garbage.
    let mut junk = MCAP_MAGIC.to_vec();
    junk.push(mcap::records::op::CHUNK);
    junk.extend_from_slice(&64u64.to_le_bytes());
    junk.extend_from_slice(&[0xAB; 64]);
    std::fs::write(&path, &junk).expect("write");
    assert!(read_bag(&path, &spec()).is_err());
    let db3 = path.with_extension("db3");
    std::fs::write(&db3, b"SQLite format 3\0").expect("write");
    let err = read_bag(&db3, &spec()).expect_err("sqlite").to_string();
    assert!(err.contains("ros2 bag convert"), "{err}");
}

#[test]
fn a_big_endian_recording_gives_the_rows_of_the_little_endian_one() {
    let (le, be) = (tmp("le"), tmp("be"));
    write(&le, 300);
    write_with(&be, 300, Endian::Big, None);
    assert_ne!(
        std::fs::read(&le).expect("le"),
        std::fs::read(&be).expect("be")
    );
    let (le, be) = (
        read_bag(&le, &spec()).expect("le"),
        read_bag(&be, &spec()).expect("be"),
    );
    assert_eq!(be.rows.len(), 300);
    assert_eq!(be.rows, le.rows);
    assert_eq!((be.counts.bad_cdr, be.counts.rows), (0, 300));
}

#[test]
fn a_recording_in_another_representation_is_refused_naming_it() {
    let path = tmp("xcdr2");
    write_with(&path, 50, Endian::Little, Some([0, 7]));
    let err = read_bag(&path, &spec()).expect_err("XCDR2").to_string();
    assert!(
        err.contains("topic /fix") && err.contains("0x0007") && err.contains("CDR_LE (0x0001)"),
        "{err}"
    );
    // Bytes that are no representation are bad CDR, counted, not a refusal.
    write_with(&path, 50, Endian::Little, Some([0x55, 0x55]));
    let err = read_bag(&path, &spec()).expect_err("garbage").to_string();
    assert!(
        err.contains("gave no row") && err.contains("100 undecodable"),
        "{err}"
    );
}
