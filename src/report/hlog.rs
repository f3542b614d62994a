//! latency.hlog and histograms.hlog: standard HdrHistogram V2 interval logs (compressed
//! histograms, base64), written by the hdrhistogram crate's log writer and read back by its
//! log iterator. latency.hlog holds one interval per second tagged `step=N`; histograms.hlog
//! (written by `raw`) every histogram of every step, tagged `step=N/<name>`.

use super::{ReportError, Reporter};
use crate::engine::Second;
use crate::watch::ResourceSample;
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
use std::time::{Duration, SystemTime};

/// The legend line HdrHistogram's Java writer puts after the headers; readers skip it.
const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// The tag of every interval of step `n`.
fn step_tag(n: u32) -> String {
    format!("step={n}")
}

/// An interval log being appended to, flushed after each interval.
pub(super) struct HlogFile {
    path: PathBuf,
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
}

impl HlogFile {
    /// Creates the log and writes its headers: comments (`about` last), `StartTime` and
    /// `BaseTime` (both the run's start, so interval timestamps are seconds since the start),
    /// the format version and the legend.
    pub(super) fn create(
        path: PathBuf,
        started: SystemTime,
        about: &str,
    ) -> Result<Self, ReportError> {
        let file = File::create(&path).map_err(|e| ReportError::io(&path, e))?;
        let mut w = HlogFile {
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
            .add_comment(about)
            .with_start_time(started)
            .with_base_time(started)
            .begin_log_with(&mut w.out, &mut w.serializer)
            .map_err(|e| ReportError::io(&w.path, e))?;
        writeln!(w.out, "{LEGEND}").map_err(|e| ReportError::io(&w.path, e))?;
        w.out.flush().map_err(|e| ReportError::io(&w.path, e))?;
        Ok(w)
    }

    /// Appends one interval tagged `tag` (no comma or whitespace in it).
    pub(super) fn append(
        &mut self,
        h: &Histogram<u64>,
        start: Duration,
        length: Duration,
        tag: &str,
    ) -> Result<(), ReportError> {
        let bad = |msg: String| ReportError::Hlog {
            path: self.path.clone(),
            msg,
        };
        let tag = Tag::new(tag).ok_or_else(|| bad(format!("invalid tag {tag:?}")))?;
        // A builder without headers writes nothing itself: it only wraps the open file.
        let mut log = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|e| ReportError::io(&self.path, e))?;
        log.write_histogram(h, start, length, Some(tag))
            .map_err(|e| bad(e.to_string()))?;
        self.out.flush().map_err(|e| ReportError::io(&self.path, e))
    }
}

/// latency.hlog: one interval per second.
pub(super) struct HlogWriter(HlogFile);

impl HlogWriter {
    pub(super) fn create(dir: &Path, started: SystemTime) -> Result<Self, ReportError> {
        Ok(HlogWriter(HlogFile::create(
            dir.join(super::LATENCY_HLOG),
            started,
            "pairing latency in microseconds; one interval per second, tagged step=N",
        )?))
    }
}

impl Reporter for HlogWriter {
    fn second(&mut self, s: &Second<'_>, _: Option<&ResourceSample>) -> Result<(), ReportError> {
        self.0
            .append(s.latency.histogram(), s.start, s.length, &step_tag(s.step))
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

/// One interval of any log, its tag as written.
pub(super) struct TaggedInterval<'a> {
    pub tag: Option<&'a str>,
    /// Since the log's base time.
    pub start: Duration,
    pub length: Duration,
    pub histogram: Histogram<u64>,
}

/// Reads the log at `path` in order: hands each interval to `each`, keeping none, and returns
/// the log's `StartTime` when it has one. A line cut short by a crash is left out.
pub(super) fn read_log(
    path: &Path,
    mut each: impl FnMut(TaggedInterval<'_>) -> Result<(), ReportError>,
) -> Result<Option<SystemTime>, ReportError> {
    let bytes = fs::read(path).map_err(|e| ReportError::io(path, e))?;
    let bad = |msg: String| ReportError::Hlog {
        path: path.to_owned(),
        msg,
    };
    let mut deserializer = Deserializer::new();
    let mut started = None;
    for entry in IntervalLogIterator::new(super::complete_lines(&bytes)) {
        let i = match entry.map_err(|e| bad(format!("{e:?}")))? {
            LogEntry::Interval(i) => i,
            LogEntry::StartTime(t) => {
                started = Some(SystemTime::UNIX_EPOCH + t);
                continue;
            }
            LogEntry::BaseTime(_) => continue,
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(i.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let histogram: Histogram<u64> = deserializer
            .deserialize(&mut raw.as_slice())
            .map_err(|e| bad(e.to_string()))?;
        each(TaggedInterval {
            tag: i.tag().map(|t| t.as_str()),
            start: i.start_timestamp(),
            length: i.duration(),
            histogram,
        })?;
    }
    Ok(started)
}

/// Reads the intervals of `dir/latency.hlog` in order, handing each to `each` and keeping
/// none, so reading a long run's log takes the memory of one interval, not of the run.
pub fn read_hlog(
    dir: &Path,
    mut each: impl FnMut(Interval) -> Result<(), ReportError>,
) -> Result<(), ReportError> {
    read_log(&dir.join(super::LATENCY_HLOG), |i| {
        each(Interval {
            step: i
                .tag
                .and_then(|t| t.strip_prefix("step="))
                .and_then(|n| n.parse().ok()),
            start_s: i.start.as_secs_f64(),
            length_s: i.length.as_secs_f64(),
            histogram: i.histogram,
        })
    })?;
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
