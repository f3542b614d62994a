//! Latency as a Prometheus native histogram, built from HDR histograms: each recorded HDR
//! bucket lands, at its highest equivalent value (the value HDR reports its percentiles at),
//! in the exponential bucket of schema [`SCHEMA`] that holds it.
//!
//! The schema: HDR at 3 significant digits tells values apart to 1 part in 2^10 at worst
//! (2048 sub-buckets, the upper half used; under 1024 µs, to the microsecond), finer than any
//! schema remote write takes (at most 8). So the schema is the finest there is, 8: each bucket spans a factor 2^(2^-8) ≈ 1.0027,
//! and a quantile read from it (`histogram_quantile`) is within 0.27% of the value plus HDR's
//! own 0.1% (docs/metrics-export.md).

use super::proto::{BucketSpan, Histogram};
use crate::metrics::LatencyHistogram;
use std::collections::BTreeMap;

/// The exponential schema: 2^8 buckets per power of two, the finest remote write takes.
pub(super) const SCHEMA: i32 = 8;

/// Which bucket of [`SCHEMA`] holds `seconds` (> 0): bucket `i` is (2^((i-1)/256), 2^(i/256)].
fn bucket_of(seconds: f64) -> i32 {
    let scaled = seconds.log2() * f64::from(1u32 << SCHEMA);
    let i = scaled.ceil();
    // log2 rounds: a value a hair above a boundary must not fall into the bucket below it.
    let i = if 2f64.powf(i / f64::from(1u32 << SCHEMA)) < seconds {
        i + 1.0
    } else {
        i
    };
    i as i32
}

/// A cumulative native histogram: counts by bucket index, their total and their sum.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Native {
    buckets: BTreeMap<i32, u64>,
    count: u64,
    sum: f64,
}

impl Native {
    /// Adds an HDR histogram of microseconds.
    pub(super) fn add(&mut self, h: &LatencyHistogram) {
        let h = h.histogram();
        for v in h.iter_recorded() {
            let n = v.count_at_value();
            let seconds = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e6;
            *self.buckets.entry(bucket_of(seconds)).or_default() += n;
            self.count += n;
            self.sum += seconds * n as f64;
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The histogram as remote write sends it, at `timestamp` (Unix milliseconds).
    pub(super) fn message(&self, timestamp: i64) -> Histogram {
        let mut spans: Vec<BucketSpan> = Vec::new();
        let mut deltas = Vec::with_capacity(self.buckets.len());
        let (mut last_index, mut last_count) = (None::<i32>, 0i64);
        for (&i, &n) in &self.buckets {
            match last_index {
                Some(prev) if i == prev + 1 => spans.last_mut().expect("a span").length += 1,
                Some(prev) => spans.push(BucketSpan {
                    offset: i - prev - 1,
                    length: 1,
                }),
                None => spans.push(BucketSpan {
                    offset: i,
                    length: 1,
                }),
            }
            deltas.push(n as i64 - last_count);
            (last_index, last_count) = (Some(i), n as i64);
        }
        Histogram {
            count_int: self.count,
            sum: self.sum,
            schema: SCHEMA,
            zero_threshold: 0.0,
            zero_count_int: 0,
            positive_spans: spans,
            positive_deltas: deltas,
            reset_hint: 0,
            timestamp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn hdr_tells_apart_finer_than_a_bucket_of_the_schema() {
        let width = 2f64.powf(1.0 / f64::from(1u32 << SCHEMA)) - 1.0;
        let hdr = LatencyHistogram::default();
        let h = hdr.histogram();
        // From 1024 µs on (below it HDR counts whole microseconds, exactly).
        for us in [1024u64, 2048, 4097, 123_456, 3_599_999_999] {
            let span = (h.highest_equivalent(us) - h.lowest_equivalent(us) + 1) as f64;
            assert!(span / us as f64 <= 1.0 / 1024.0, "{us}");
            assert!(span / (us as f64) < width);
        }
        // Schema 8 is the finest remote write takes, so no finer one fits HDR better.
        assert_eq!(SCHEMA, 8);
    }

    #[test]
    fn buckets_hold_their_values_between_their_bounds() {
        for v in [1e-6, 0.000_123, 0.001, 0.5, 1.0, 2.0, 3.7, 3600.0] {
            let i = bucket_of(v);
            let upper = 2f64.powf(f64::from(i) / 256.0);
            let lower = 2f64.powf(f64::from(i - 1) / 256.0);
            assert!(
                lower < v && v <= upper * (1.0 + 1e-12),
                "{v}: ({lower}, {upper}]"
            );
        }
        assert_eq!(bucket_of(1.0), 0);
        assert_eq!(bucket_of(2.0), 256);
    }

    #[test]
    fn spans_and_deltas_describe_the_buckets() {
        let mut hdr = LatencyHistogram::default();
        for us in [1000, 1000, 1001, 4000] {
            hdr.record(Duration::from_micros(us));
        }
        let mut n = Native::default();
        n.add(&hdr);
        let m = n.message(7);
        assert_eq!(m.count_int, 4);
        let lengths: u32 = m.positive_spans.iter().map(|s| s.length).sum();
        assert_eq!(lengths as usize, m.positive_deltas.len());
        // Rebuild the counts from the deltas: they add up to the count.
        let mut count = 0i64;
        let mut total = 0i64;
        for d in &m.positive_deltas {
            count += d;
            assert!(count > 0);
            total += count;
        }
        assert_eq!(total, 4);
        // 4 ms is two powers of two (512 buckets) above 1 ms.
        let first = m.positive_spans[0].offset;
        let last = first
            + m.positive_spans
                .iter()
                .map(|s| s.length as i32)
                .sum::<i32>()
            + m.positive_spans[1..].iter().map(|s| s.offset).sum::<i32>()
            - 1;
        assert_eq!(last - first, 512);
        assert!((m.sum - 0.007_001).abs() < 1e-5);
    }
}
