//! Prometheus remote write 1.0's messages (`prometheus.WriteRequest` of prompb's
//! `remote.proto` and `types.proto`), written out with prost's derive so that no `protoc`
//! is needed, and the request body: the message, snappy block compressed.

use prost::Message;

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, Message)]
pub(super) struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

/// `prometheus.TimeSeries`: its labels sorted by name, `__name__` among them.
#[derive(Clone, PartialEq, Message)]
pub(super) struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    pub histograms: Vec<Histogram>,
}

#[derive(Clone, PartialEq, Eq, Message)]
pub(super) struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, Message)]
pub(super) struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Unix milliseconds.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// `prometheus.Histogram`: a native histogram with integer counts (the `count_int` and
/// `zero_count_int` arms of its oneofs; the float arms are never sent).
#[derive(Clone, PartialEq, Message)]
pub(super) struct Histogram {
    #[prost(uint64, tag = "1")]
    pub count_int: u64,
    #[prost(double, tag = "3")]
    pub sum: f64,
    #[prost(sint32, tag = "4")]
    pub schema: i32,
    #[prost(double, tag = "5")]
    pub zero_threshold: f64,
    #[prost(uint64, tag = "6")]
    pub zero_count_int: u64,
    #[prost(message, repeated, tag = "11")]
    pub positive_spans: Vec<BucketSpan>,
    /// Each bucket's count less the previous bucket's (the first's less zero).
    #[prost(sint64, repeated, tag = "12")]
    pub positive_deltas: Vec<i64>,
    /// `ResetHint`: 0 unknown (Prometheus checks for a reset itself).
    #[prost(int32, tag = "14")]
    pub reset_hint: i32,
    /// Unix milliseconds.
    #[prost(int64, tag = "15")]
    pub timestamp: i64,
}

/// `prometheus.BucketSpan`: `length` consecutive buckets, `offset` past the previous span's
/// end (the first span's: the index of its first bucket).
#[derive(Clone, PartialEq, Eq, Message)]
pub(super) struct BucketSpan {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

/// `prometheus.MetricMetadata`: a family's type and help text.
#[derive(Clone, PartialEq, Message)]
pub(super) struct MetricMetadata {
    /// `MetricType`: 1 counter, 2 gauge, 3 histogram.
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    #[prost(string, tag = "4")]
    pub help: String,
    #[prost(string, tag = "5")]
    pub unit: String,
}

/// The body of a push: the request encoded, then snappy's block format (not its framed
/// stream format), as remote write 1.0 requires.
pub(super) fn body(request: &WriteRequest) -> Vec<u8> {
    let encoded = request.encode_to_vec();
    snap::raw::Encoder::new()
        .compress_vec(&encoded)
        .expect("a protobuf message is never past snappy's 4 GiB limit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_decompresses_and_decodes_to_the_request() {
        let request = WriteRequest {
            timeseries: vec![TimeSeries {
                labels: vec![Label {
                    name: "__name__".into(),
                    value: "up".into(),
                }],
                samples: vec![Sample {
                    value: 1.0,
                    timestamp: 1_700_000_000_000,
                }],
                histograms: Vec::new(),
            }],
            metadata: Vec::new(),
        };
        let raw = snap::raw::Decoder::new()
            .decompress_vec(&body(&request))
            .unwrap();
        assert_eq!(WriteRequest::decode(&raw[..]).unwrap(), request);
    }
}
