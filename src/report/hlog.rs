//! latency.hlog: the standard HdrHistogram V2 interval log (compressed histograms, base64), one
//! interval per second tagged `step=N`, written by the hdrhistogram crate's log writer and read
//! back by its log iterator.

use super::{ReportError, Reporter};
use crate::engine::Second;
use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The legend line HdrHistogram's Java writer puts after the headers; readers skip it.
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// The tag of every interval of step `n`.
fn step_tag(n: u32) -> String {
    format!("step={n}")
}

/// Appends one interval per second to latency.hlog, flushed each time.
pub(super) struct HlogWriter {
    path: PathBuf,
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
}

impl HlogWriter {
    /// Creates the log and writes its headers: comments, `StartTime` and `BaseTime` (both the
    /// run's start, so interval timestamps are seconds since the start), the format version
    /// and the legend.
    pub(super) fn create(dir: &Path, started: SystemTime) -> Result<Self, ReportError> {
        let path = dir.join(super::LATENCY_HLOG);
        let file = File::create(&path).map_err(|e| ReportError::io(&path, e))?;
        let mut w = HlogWriter {
            path,
            out: BufWriter::new(file),
            serializer: V2DeflateSerializer::new(),
        };
        IntervalLogWriterBuilder::new()
            .add_comment(&format!(
                "[Logged with mcpload {}]",
                env!("CARGO_PKG_VERSION")
            ))
            .add_comment("[Histogram log format version 1.3]")
            .add_comment("pairing latency in microseconds; one interval per second, tagged step=N")
            .with_start_time(started)
            .with_base_time(started)
            .begin_log_with(&mut w.out, &mut w.serializer)
            .map_err(|e| ReportError::io(&w.path, e))?;
        writeln!(w.out, "{LEGEND}").map_err(|e| ReportError::io(&w.path, e))?;
        w.out.flush().map_err(|e| ReportError::io(&w.path, e))?;
        Ok(w)
    }
}

impl Reporter for HlogWriter {
    fn second(&mut self, s: &Second<'_>) -> Result<(), ReportError> {
        let tag = step_tag(s.step);
        // A builder without headers writes nothing itself: it only wraps the open file.
        let mut log = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|e| ReportError::io(&self.path, e))?;
        log.write_histogram(s.latency.histogram(), s.start, s.length, Tag::new(&tag))
            .map_err(|e| ReportError::Hlog {
                path: self.path.clone(),
                msg: e.to_string(),
            })?;
        self.out.flush().map_err(|e| ReportError::io(&self.path, e))
    }
}

/// One interval read back from a log.
#[derive(Clone, Debug)]
pub struct Interval {
    /// The step of a `step=N` tag; `None` for an untagged interval or another tag.
    pub step: Option<u32>,
    /// Seconds since the run's start.
    pub start_s: f64,
    pub length_s: f64,
    pub histogram: Histogram<u64>,
}

/// Reads the intervals of `dir/latency.hlog` in order, handing each to `each` and keeping
/// none, so reading a long run's log takes the memory of one interval, not of the run.
pub fn read_hlog(
    dir: &Path,
    mut each: impl FnMut(Interval) -> Result<(), ReportError>,
) -> Result<(), ReportError> {
    let path = dir.join(super::LATENCY_HLOG);
    let bytes = fs::read(&path).map_err(|e| ReportError::io(&path, e))?;
    let bad = |msg: String| ReportError::Hlog {
        path: path.clone(),
        msg,
    };
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(super::complete_lines(&bytes)) {
        let LogEntry::Interval(i) = entry.map_err(|e| bad(format!("{e:?}")))? else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(i.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let histogram: Histogram<u64> = deserializer
            .deserialize(&mut raw.as_slice())
            .map_err(|e| bad(e.to_string()))?;
        each(Interval {
            step: i
                .tag()
                .and_then(|t| t.as_str().strip_prefix("step="))
                .and_then(|n| n.parse().ok()),
            start_s: i.start_timestamp().as_secs_f64(),
            length_s: i.duration().as_secs_f64(),
            histogram,
        })?;
    }
    Ok(())
}

/// Each step's latency histogram: the sum of its intervals in `dir/latency.hlog`, read one
/// at a time. Fails when an interval's values do not fit the first interval's bounds (a log
/// that mcpload did not write).
pub fn step_histograms(dir: &Path) -> Result<BTreeMap<u32, Histogram<u64>>, ReportError> {
    let mut out: BTreeMap<u32, Histogram<u64>> = BTreeMap::new();
    read_hlog(dir, |i| {
        let Some(step) = i.step else { return Ok(()) };
        match out.get_mut(&step) {
            Some(h) => h.add(&i.histogram).map_err(|e| ReportError::Hlog {
                path: dir.join(super::LATENCY_HLOG),
                msg: e.to_string(),
            }),
            None => {
                out.insert(step, i.histogram);
                Ok(())
            }
        }
    })?;
    Ok(out)
}
