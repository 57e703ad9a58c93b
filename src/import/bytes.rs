//! The readers below the list's CSV reader: one hands on every line end as LF so that line
//! numbers are true, the other hashes the file's own bytes.

use std::io::Read;

use sha2::{Digest as _, Sha256};

/// A reader that hands on every line end as LF (CRLF as one LF, a CR alone as LF), so that
/// the CSV reader's line count is true whichever a file uses. (Only lines are counted from
/// what it reads: the hash is taken below it, over the file's own bytes.)
pub(super) struct LineEnds<R> {
    pub(super) inner: R,
    /// The last byte read was a CR: an LF that comes next is its pair.
    after_cr: bool,
    /// Bytes handed on.
    pub(super) handed_on: u64,
    /// The last byte handed on is an LF (or none was).
    pub(super) ends_in_lf: bool,
    /// The file has ended.
    pub(super) at_end: bool,
}

impl<R> LineEnds<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            after_cr: false,
            handed_on: 0,
            ends_in_lf: true,
            at_end: false,
        }
    }
}

impl<R: Read> Read for LineEnds<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                self.at_end = !buf.is_empty();
                return Ok(0);
            }
            let mut kept = 0;
            for i in 0..n {
                let byte = buf[i];
                let pair = self.after_cr && byte == b'\n';
                self.after_cr = byte == b'\r';
                if pair {
                    continue;
                }
                buf[kept] = if byte == b'\r' { b'\n' } else { byte };
                kept += 1;
            }
            // A read of a lone LF (a CRLF's half) gives nothing: 0 would mean the end.
            if kept > 0 {
                self.handed_on += kept as u64;
                self.ends_in_lf = buf[kept - 1] == b'\n';
                return Ok(kept);
            }
        }
    }
}

/// A reader that hashes every byte read through it.
pub(super) struct Hashing<R> {
    pub(super) inner: R,
    pub(super) hasher: Sha256,
}

impl<R> Hashing<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
        }
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}
