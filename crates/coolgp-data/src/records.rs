//! A small RFC 4180 record reader that knows its line numbers.
//!
//! The `csv` crate's record positions skip blank lines and miscount `\r\n` files, and error
//! messages must name the exact line, so records are split here: fields separated by `,`,
//! optionally quoted with `"` (a doubled `""` inside quotes is one quote, and quoted fields may
//! span lines), records ended by `\n` or `\r\n`, whitespace around unquoted values and outside
//! quotes trimmed, blank lines skipped, a UTF-8 byte-order mark at the start ignored. Text after
//! a closing quote is kept literally (lenient, like most readers).

use std::io::BufRead;

/// One record: the fields' bytes and the 1-based line on which it starts.
#[derive(Debug, Default)]
pub(crate) struct Record {
    data: Vec<u8>,
    ends: Vec<usize>,
    /// 1-based line number of the record's first line.
    pub(crate) line: u64,
}

impl Record {
    /// Number of fields.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Field `j`, if present.
    pub(crate) fn get(&self, j: usize) -> Option<&[u8]> {
        let end = *self.ends.get(j)?;
        let start = if j == 0 { 0 } else { self.ends[j - 1] };
        self.data.get(start..end)
    }

    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    /// A record that is one empty unquoted field (a blank line).
    fn is_blank(&self, quoted: bool) -> bool {
        !quoted && self.ends.len() == 1 && self.ends[0] == 0
    }
}

/// Why reading a record failed.
#[derive(Debug)]
pub(crate) enum RecordError {
    /// The underlying reader failed.
    Io(std::io::Error),
    /// The input ended inside a quoted field that began on this line.
    Unterminated(u64),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a field's first non-blank byte.
    Start,
    /// Inside an unquoted field.
    Unquoted,
    /// Inside quotes.
    Quoted,
    /// Just after a quote inside a quoted field (closing quote or first half of `""`).
    QuoteSeen,
}

fn is_blank_byte(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r')
}

/// Reads records from a buffered byte stream.
pub(crate) struct RecordReader<R> {
    inner: R,
    /// Completed lines so far (number of `\n` consumed).
    lines: u64,
    at_start: bool,
}

impl<R: BufRead> RecordReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            lines: 0,
            at_start: true,
        }
    }

    fn skip_bom(&mut self) -> std::io::Result<()> {
        const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
        let mut matched = 0;
        // The BOM may straddle buffer refills: match it byte by byte.
        while matched < BOM.len() {
            let buf = self.inner.fill_buf()?;
            let Some(&b) = buf.first() else { break };
            if b != BOM[matched] {
                break;
            }
            self.inner.consume(1);
            matched += 1;
        }
        // A partial BOM is not valid UTF-8 anyway; the header check will report it.
        Ok(())
    }

    /// Reads the next non-blank record into `rec`; `Ok(false)` at the end of the input.
    pub(crate) fn read(&mut self, rec: &mut Record) -> Result<bool, RecordError> {
        if self.at_start {
            self.at_start = false;
            self.skip_bom().map_err(RecordError::Io)?;
        }
        rec.clear();
        rec.line = self.lines + 1;
        let mut state = State::Start;
        let mut field_start = 0usize;
        let mut quoted = false; // the current field was quoted
        let mut any_quoted = false; // some field of the record was quoted
        let mut started = false; // any byte of this record consumed
        loop {
            let buf = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(RecordError::Io(e)),
            };
            if buf.is_empty() {
                // end of input
                if state == State::Quoted {
                    return Err(RecordError::Unterminated(rec.line));
                }
                if !started {
                    return Ok(false);
                }
                end_field(rec, field_start, quoted);
                if rec.is_blank(any_quoted) {
                    return Ok(false);
                }
                return Ok(true);
            }
            started = true;
            let mut consumed = buf.len();
            let mut record_done = false;
            for (i, &b) in buf.iter().enumerate() {
                // Outside quotes, a newline ends the record and a comma ends the field.
                if state != State::Quoted {
                    if b == b'\n' {
                        self.lines += 1;
                        consumed = i + 1;
                        record_done = true;
                        break;
                    }
                    if b == b',' {
                        end_field(rec, field_start, quoted);
                        field_start = rec.data.len();
                        quoted = false;
                        state = State::Start;
                        continue;
                    }
                }
                match state {
                    State::Start => match b {
                        b'"' => {
                            state = State::Quoted;
                            quoted = true;
                            any_quoted = true;
                        }
                        _ if is_blank_byte(b) => {}
                        _ => {
                            rec.data.push(b);
                            state = State::Unquoted;
                        }
                    },
                    State::Unquoted => rec.data.push(b),
                    State::Quoted => {
                        if b == b'"' {
                            state = State::QuoteSeen;
                        } else {
                            if b == b'\n' {
                                self.lines += 1;
                            }
                            rec.data.push(b);
                        }
                    }
                    State::QuoteSeen => match b {
                        b'"' => {
                            rec.data.push(b'"');
                            state = State::Quoted;
                        }
                        _ if is_blank_byte(b) => {}
                        _ => {
                            // lenient: text after the closing quote is kept
                            rec.data.push(b);
                            state = State::Unquoted;
                        }
                    },
                }
            }
            self.inner.consume(consumed);
            if record_done {
                end_field(rec, field_start, quoted);
                if rec.is_blank(any_quoted) {
                    // a blank line: start over on the next line
                    rec.clear();
                    rec.line = self.lines + 1;
                    state = State::Start;
                    field_start = 0;
                    quoted = false;
                    any_quoted = false;
                    started = false;
                    continue;
                }
                return Ok(true);
            }
        }
    }
}

/// Closes the current field; an unquoted field loses its trailing blanks.
fn end_field(rec: &mut Record, field_start: usize, quoted: bool) {
    if !quoted {
        while rec.data.len() > field_start && rec.data.last().copied().is_some_and(is_blank_byte) {
            rec.data.pop();
        }
    }
    rec.ends.push(rec.data.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8], chunk: usize) -> Vec<(u64, Vec<String>)> {
        let reader = std::io::BufReader::with_capacity(chunk, text);
        let mut rr = RecordReader::new(reader);
        let mut rec = Record::default();
        let mut out = Vec::new();
        while rr.read(&mut rec).expect("read") {
            let fields = (0..rec.len())
                .map(|j| String::from_utf8_lossy(rec.get(j).unwrap_or_default()).into_owned())
                .collect();
            out.push((rec.line, fields));
        }
        out
    }

    fn v(fields: &[&str]) -> Vec<String> {
        fields.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn splits_with_line_numbers() {
        let text =
            b"\xEF\xBB\xBFa, b ,c\r\n\r\n1,\"x,\"\"y\"\"\",3\n\n  \n\"multi\nline\",,\t z \n4,5,6";
        for chunk in [1, 2, 3, 7, 64, 8192] {
            let got = all(text, chunk);
            assert_eq!(
                got,
                vec![
                    (1, v(&["a", "b", "c"])),
                    (3, v(&["1", "x,\"y\"", "3"])),
                    (6, v(&["multi\nline", "", "z"])),
                    (8, v(&["4", "5", "6"])),
                ],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn quoted_empty_is_a_record_and_unterminated_is_an_error() {
        assert_eq!(all(b"a\n\"\"\n", 8), vec![(1, v(&["a"])), (2, v(&[""]))]);
        let mut rr = RecordReader::new(&b"a\n\"open\nmore\n"[..]);
        let mut rec = Record::default();
        assert!(rr.read(&mut rec).expect("header"));
        assert!(matches!(
            rr.read(&mut rec),
            Err(RecordError::Unterminated(2))
        ));
        assert!(all(b"", 8).is_empty());
        assert!(all(b"\n\n  \n", 8).is_empty());
    }
}
