//! Columns in Arrow's memory layout, built without any Arrow library: a validity
//! bitmap (bit i set when row i has a value), and either plain little-endian
//! 64-bit values or 32-bit offsets into one byte buffer for strings and binaries.
//! The Python layer wraps the buffers with `pyarrow.Array.from_buffers`, so a
//! table of a million rows reaches Python as a handful of byte strings.

/// What a column holds, named as Arrow and Spark name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Arrow `int64`, Spark `bigint`.
    Int64,
    /// Arrow `string` (`utf8`, 32-bit offsets), Spark `string`.
    Utf8,
    /// Arrow `binary` (32-bit offsets), Spark `binary`.
    Binary,
}

impl ColumnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnKind::Int64 => "int64",
            ColumnKind::Utf8 => "string",
            ColumnKind::Binary => "binary",
        }
    }
}

/// Why a column could not take a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnError {
    #[error("column {0} would hold more than 2 GiB of data in one batch")]
    TooLarge(&'static str),
}

/// One column being built.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: &'static str,
    pub kind: ColumnKind,
    /// Rows so far.
    pub len: usize,
    /// Rows without a value.
    pub nulls: usize,
    /// One bit per row, least significant bit first.
    pub validity: Vec<u8>,
    /// For strings and binaries: `len + 1` little-endian `i32` offsets.
    pub offsets: Vec<u8>,
    /// The values: 8 bytes per row for `Int64`, the bytes one after the other
    /// for strings and binaries.
    pub values: Vec<u8>,
}

impl Column {
    pub fn new(name: &'static str, kind: ColumnKind) -> Column {
        let offsets = match kind {
            ColumnKind::Int64 => Vec::new(),
            ColumnKind::Utf8 | ColumnKind::Binary => 0i32.to_le_bytes().to_vec(),
        };
        Column {
            name,
            kind,
            len: 0,
            nulls: 0,
            validity: Vec::new(),
            offsets,
            values: Vec::new(),
        }
    }

    /// Room for `rows` more rows (and `bytes` more bytes of string data).
    pub fn reserve(&mut self, rows: usize, bytes: usize) {
        self.validity.reserve(rows / 8 + 1);
        match self.kind {
            ColumnKind::Int64 => self.values.reserve(rows * 8),
            ColumnKind::Utf8 | ColumnKind::Binary => {
                self.offsets.reserve(rows * 4);
                self.values.reserve(bytes);
            }
        }
    }

    fn mark(&mut self, valid: bool) {
        let bit = self.len % 8;
        if bit == 0 {
            self.validity.push(0);
        }
        if valid {
            if let Some(last) = self.validity.last_mut() {
                *last |= 1 << bit;
            }
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }

    /// Append an integer, or a null.
    pub fn push_i64(&mut self, value: Option<i64>) {
        debug_assert_eq!(self.kind, ColumnKind::Int64);
        self.mark(value.is_some());
        self.values
            .extend_from_slice(&value.unwrap_or(0).to_le_bytes());
    }

    /// Append bytes (a string's must be UTF-8; see [`Column::push_str`]), or a null.
    pub fn push_bytes(&mut self, value: Option<&[u8]>) -> Result<(), ColumnError> {
        debug_assert_ne!(self.kind, ColumnKind::Int64);
        let bytes = value.unwrap_or_default();
        let end = i32::try_from(self.values.len() + bytes.len())
            .map_err(|_| ColumnError::TooLarge(self.name))?;
        self.mark(value.is_some());
        self.values.extend_from_slice(bytes);
        self.offsets.extend_from_slice(&end.to_le_bytes());
        Ok(())
    }

    /// Append a string column's value: bytes that are not UTF-8 (a tube name is
    /// ASCII, so only damage makes one) are replaced as Python's "replace" does.
    pub fn push_str(&mut self, value: Option<&[u8]>) -> Result<(), ColumnError> {
        match value.map(String::from_utf8_lossy) {
            Some(text) => self.push_bytes(Some(text.as_bytes())),
            None => self.push_bytes(None),
        }
    }

    /// The validity bitmap, or `None` when every row has a value (Arrow's way of
    /// saying so, and what Spark expects of a column declared not null).
    pub fn validity(&self) -> Option<&[u8]> {
        (self.nulls > 0).then_some(self.validity.as_slice())
    }
}

/// A batch of rows: its columns, all of the same length.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    pub columns: Vec<Column>,
}

impl Columns {
    pub fn new(spec: &[(&'static str, ColumnKind)]) -> Columns {
        Columns {
            columns: spec.iter().map(|&(n, k)| Column::new(n, k)).collect(),
        }
    }

    /// Rows in the batch.
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_follow_the_arrow_layout() {
        let mut ints = Column::new("n", ColumnKind::Int64);
        for v in [Some(1), None, Some(-2)] {
            ints.push_i64(v);
        }
        assert_eq!(ints.len, 3);
        assert_eq!(ints.validity(), Some(&[0b101u8][..]));
        assert_eq!(&ints.values[16..24], &(-2i64).to_le_bytes());

        let mut text = Column::new("s", ColumnKind::Utf8);
        text.push_str(Some(b"ab")).expect("fits");
        text.push_str(None).expect("fits");
        text.push_str(Some(b"\xffc")).expect("fits");
        let offsets: Vec<i32> = text
            .offsets
            .chunks(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(offsets, [0, 2, 2, 6]);
        assert_eq!(text.values, "ab\u{fffd}c".as_bytes());
        assert_eq!(text.nulls, 1);

        let mut all = Column::new("b", ColumnKind::Binary);
        for _ in 0..9 {
            all.push_bytes(Some(b"x")).expect("fits");
        }
        assert_eq!(all.validity(), None);
        assert_eq!(all.validity, [0xff, 0x01]);
    }
}
