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
    write_chunks(path, n, endian, id, None);
}

/// [`write_with`] with the chunks compressed by `compression`.
fn write_chunks(
    path: &Path,
    n: usize,
    endian: Endian,
    id: Option<[u8; 2]>,
    compression: Option<mcap::Compression>,
) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut w = mcap::WriteOptions::new()
        .compression(compression)
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

#[test]
fn compressed_chunks_read_as_the_plain_ones() {
    // Many chunks of ~4 KB: zstd ones decompressed on the reading thread into recycled
    // buffers, lz4 ones walked by the mcap crate; the same rows and counts either way.
    let path = tmp("plain-chunks");
    write(&path, 700);
    let plain = read_bag(&path, &spec()).expect("plain");
    assert_eq!(plain.rows.len(), 700);
    for (name, c) in [
        ("zstd-chunks", mcap::Compression::Zstd),
        ("lz4-chunks", mcap::Compression::Lz4),
    ] {
        let path = tmp(name);
        write_chunks(&path, 700, Endian::Little, None, Some(c));
        let read = read_bag(&path, &spec()).expect(name);
        assert_eq!(read.rows, plain.rows, "{name}");
        assert_eq!(read.counts, plain.counts, "{name}");
        let (ds, counts) = load_bag(&path, &spec()).expect(name);
        assert_eq!(counts, plain.counts);
        assert_eq!(ds.len(), 700);
        assert_eq!(
            (ds.x[(699, 0)], ds.x[(699, 1)], ds.y[699]),
            (699.0, 1.0, 1398.0)
        );
        // Cut mid-file: the complete chunks before the cut.
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("cut");
        let cut = read_bag(&path, &spec()).expect("cut");
        assert!(cut.truncated && !cut.rows.is_empty(), "{name}");
        assert_eq!(cut.rows[..], plain.rows[..cut.rows.len()]);
    }
}

#[test]
fn every_robots_topics_give_rows_robot_by_robot() {
    // Two robots interleaved in one file; each robot's rows together, in its own stamp order,
    // equal to reading its topics alone.
    let path = tmp("robots");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    let mut w = mcap::WriteOptions::new()
        .compression(None)
        .chunk_size(Some(4096))
        .create(file)
        .expect("writer");
    let (fix, temp) = (lookup(FIX).expect("fix"), lookup(TEMP).expect("temp"));
    let mut channels = Vec::new();
    for robot in ["r2", "r1"] {
        for (ty, leaf) in [(fix, "fix"), (temp, "temp")] {
            let schema = w.add_schema(ty.name, "ros2msg", b"").expect("schema");
            let topic = format!("/{robot}/{leaf}");
            channels.push(
                w.add_channel(schema, &topic, "cdr", &BTreeMap::new())
                    .expect("ch"),
            );
        }
    }
    for k in 0..300u32 {
        let t = 1_000_000_000 + i64::from(k) * 100_000_000;
        for (r, robot) in [0.0, 1.0].into_iter().enumerate() {
            let f = encode_with(
                Endian::Little,
                fix,
                t,
                "gps",
                &[("latitude", f64::from(k)), ("longitude", robot)],
            )
            .expect("fix");
            let m = encode_with(
                Endian::Little,
                temp,
                t + 1_000_000,
                "t",
                &[("temperature", robot)],
            )
            .expect("temp");
            for (ch, data, time) in [
                (channels[2 * r], f, t),
                (channels[2 * r + 1], m, t + 1_000_000),
            ] {
                let header = mcap::records::MessageHeader {
                    channel_id: ch,
                    sequence: k,
                    log_time: time as u64,
                    publish_time: time as u64,
                };
                w.write_to_known_channel(&header, &data).expect("write");
            }
        }
    }
    w.finish().expect("finish");
    let all = RowSpec::parse(
        &[format!("/*/fix:{FIX}:latitude,longitude")],
        &format!("/*/temp:{TEMP}:temperature"),
        0.05,
    )
    .expect("spec");
    let bag = read_bag(&path, &all).expect("robots");
    let keys = bag.keys.clone().expect("keys");
    assert_eq!(bag.rows.len(), 600);
    assert!(keys[..300].iter().all(|k| k == "r2") && keys[300..].iter().all(|k| k == "r1"));
    for (i, robot) in ["r2", "r1"].into_iter().enumerate() {
        let one = read_bag(&path, &all.for_namespace(robot)).expect("one robot");
        assert_eq!(one.rows[..], bag.rows[300 * i..300 * (i + 1)], "{robot}");
    }
    let (ds, _) = load_bag(&path, &all).expect("dataset");
    assert_eq!(ds.keys, Some(keys));
    assert_eq!((ds.x[(301, 0)], ds.x[(301, 1)], ds.y[301]), (1.0, 1.0, 1.0));
}
