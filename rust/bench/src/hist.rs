//! A log-linear latency histogram in nanoseconds (HDR-style, fixed memory).
//!
//! Values below 256 ns are exact; above, each power of two is split into 128 buckets, so a
//! reported percentile is within 0.4% of the true sample (the bucket's midpoint is reported).
//! Memory is fixed (about 59 KiB) whatever the number of samples.

/// Sub-bucket bits: 2^SUB buckets per power of two.
const SUB: u32 = 7;
const HALF: u64 = 1 << SUB;
const BUCKETS: usize = ((64 - SUB as usize) << SUB) + (2 * HALF as usize);

#[derive(Debug, Clone)]
pub struct Hist {
    counts: Box<[u64]>,
    total: u64,
    max: u64,
    sum: u128,
}

impl Default for Hist {
    fn default() -> Self {
        Self::new()
    }
}

fn index(v: u64) -> usize {
    if v < 2 * HALF {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB;
    let top = v >> shift; // in [HALF, 2*HALF)
    ((shift as usize) << SUB) + top as usize
}

/// The lowest value of bucket `i` and the bucket's width.
fn bounds(i: usize) -> (u64, u64) {
    if i < 2 * HALF as usize {
        return (i as u64, 1);
    }
    let shift = (i >> SUB) as u32 - 1;
    let top = (i as u64 & (HALF - 1)) + HALF;
    (top << shift, 1 << shift)
}

impl Hist {
    pub fn new() -> Self {
        Hist {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            max: 0,
            sum: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[index(ns)] += 1;
        self.total += 1;
        self.sum += u128::from(ns);
        if ns > self.max {
            self.max = ns;
        }
    }

    pub fn merge(&mut self, other: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The value at quantile `q` (0..=1), in ns; 0 when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = bounds(i);
                let mid = low as f64 + (width as f64 - 1.0) / 2.0;
                return mid.min(self.max as f64);
            }
        }
        self.max as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_bounds_agree() {
        for v in (0..100_000u64).chain([u64::MAX, 1 << 40, (1 << 40) + 12345]) {
            let (low, width) = bounds(index(v));
            assert!(low <= v && v - low < width, "v={v} low={low} width={width}");
        }
        assert!(index(u64::MAX) < BUCKETS);
    }

    #[test]
    fn quantiles_are_close() {
        let mut h = Hist::new();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        let p50 = h.quantile(0.5);
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.005, "{p50}");
        let p99 = h.quantile(0.99);
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.005, "{p99}");
        assert_eq!(h.count(), 100_000);
        assert!(h.quantile(1.0) <= 1_000_000.0);
    }
}
