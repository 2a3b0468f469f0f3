//! The lines a node writes on stderr, each in a single write. The Python layer
//! writes lines of its own to the same stderr (the start banner), and a line
//! written in pieces, as `eprintln!` writes its formatted parts, can be cut in
//! two by one of them (seen in the fault harness: a "leads" line cut by the
//! banner); a supervisor or a test reading the lines then misses both.

use std::io::Write;

/// Write `args` and a newline to stderr in one write.
pub fn line(args: std::fmt::Arguments<'_>) {
    line_to(&mut std::io::stderr(), args);
}

fn line_to(out: &mut impl Write, args: std::fmt::Arguments<'_>) {
    let mut text = args.to_string();
    text.push('\n');
    let _ = out.write_all(text.as_bytes());
}

/// `eprintln!`, but the line goes out in one write ([`line`]).
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::line(format_args!($($arg)*))
    };
}
pub(crate) use say;

#[cfg(test)]
mod tests {
    use std::io::Write;

    /// Keeps every write it is given apart.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_goes_out_in_one_write() {
        // Values known only at run time, as a node's id and term are (literals
        // would be folded into the format string at compile time).
        let (id, term) = (std::hint::black_box(2), std::hint::black_box(7));
        let mut out = Writes::default();
        super::line_to(&mut out, format_args!("node {id} leads (term {term})"));
        assert_eq!(out.0, [b"node 2 leads (term 7)\n".to_vec()]);
        // What eprintln! does, for contrast: the same line in pieces.
        let mut pieces = Writes::default();
        let _ = writeln!(pieces, "node {id} leads (term {term})");
        assert!(pieces.0.len() > 1, "{:?}", pieces.0);
    }
}
