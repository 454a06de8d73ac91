//! The node's health as `diagnostic_msgs/msg/DiagnosticArray`: one status whose values are
//! the node's counts (points, fleet points, peers, rejected and dropped messages, the ROS 2
//! messages paired and refused).

use crate::cdr::CdrWriter;
use crate::map::header;

/// `diagnostic_msgs/msg/DiagnosticStatus` levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// OK (0).
    Ok = 0,
    /// WARN (1).
    Warn = 1,
    /// ERROR (2).
    Error = 2,
    /// STALE (3).
    Stale = 3,
}

/// One status of the array.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    /// Level.
    pub level: Level,
    /// Name (`coolgp: <node>`).
    pub name: String,
    /// One line for humans.
    pub message: String,
    /// Hardware id (the agent id).
    pub hardware_id: String,
    /// Key/value pairs.
    pub values: Vec<(String, String)>,
}

/// The DiagnosticArray message of `statuses`.
pub fn diagnostic_array(statuses: &[Status], stamp_ns: i64, frame_id: &str) -> Vec<u8> {
    let mut w = CdrWriter::with_capacity(256);
    header(&mut w, stamp_ns, frame_id);
    w.u32(statuses.len() as u32);
    for s in statuses {
        w.u8(s.level as u8);
        w.string(&s.name);
        w.string(&s.message);
        w.string(&s.hardware_id);
        w.u32(s.values.len() as u32);
        for (k, v) in &s.values {
            w.string(k);
            w.string(v);
        }
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdr::CdrReader;
    use crate::types::Prim;

    #[test]
    fn array_layout() {
        let msg = diagnostic_array(
            &[Status {
                level: Level::Warn,
                name: "coolgp: agent 3".into(),
                message: "2 messages refused".into(),
                hardware_id: "3".into(),
                values: vec![("points".into(), "120".into())],
            }],
            1_000_000_001,
            "",
        );
        let mut r = CdrReader::new(&msg).expect("cdr");
        assert_eq!(r.number(Prim::I32).expect("sec"), 1.0);
        assert_eq!(r.number(Prim::U32).expect("ns"), 1.0);
        assert_eq!(r.string().expect("frame"), "");
        assert_eq!(r.number(Prim::U32).expect("count"), 1.0);
        assert_eq!(r.number(Prim::Byte).expect("level"), 1.0);
        assert_eq!(r.string().expect("name"), "coolgp: agent 3");
        assert_eq!(r.string().expect("message"), "2 messages refused");
        assert_eq!(r.string().expect("hw"), "3");
        assert_eq!(r.number(Prim::U32).expect("values"), 1.0);
        assert_eq!(r.string().expect("k"), "points");
        assert_eq!(r.string().expect("v"), "120");
        assert_eq!(r.remaining(), 0);
    }
}
