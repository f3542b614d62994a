//! `--metrics-listen ADDR`: the pushed series served as an OpenMetrics 1.0 text page for a
//! scraper, renewed at every push, from a thread of its own that answers every request with
//! the latest page (never the engine's business). A native histogram becomes a classic one:
//! a `_bucket` per bucket of the schema (its upper bound as `le`), `_count` and `_sum`.

use super::proto::{Histogram, MetricMetadata, TimeSeries};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The page and the thread serving it, which ends (and frees the address) when it is dropped.
pub(super) struct Page {
    text: Arc<Mutex<Arc<str>>>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Page {
    /// Serves `listener` (bound by the caller, so a taken port is an error before the run).
    pub(super) fn serve(listener: TcpListener) -> std::io::Result<Page> {
        let text: Arc<Mutex<Arc<str>>> = Arc::new(Mutex::new(Arc::from("# EOF\n")));
        let stop = Arc::new(AtomicBool::new(false));
        let addr = listener.local_addr()?;
        let (shared, stopped) = (text.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("mcpload-metrics-page".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopped.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let page = shared
                        .lock()
                        .map_or_else(|e| e.into_inner().clone(), |t| t.clone());
                    answer(conn, &page);
                }
            })?;
        Ok(Page {
            text,
            stop,
            addr,
            thread: Some(thread),
        })
    }

    /// Puts `series` on the page.
    pub(super) fn renew(&self, series: &[TimeSeries], families: &[MetricMetadata]) {
        let page: Arc<str> = Arc::from(render(series, families));
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = page;
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // A connection wakes the accept, which then sees the stop (a run repeated by
        // `--repeat` binds the address again).
        if TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok()
            && let Some(t) = self.thread.take()
        {
            let _ = t.join();
        }
    }
}

/// Reads a request's head (bounded in size and time) and answers it with the page.
fn answer(mut conn: TcpStream, page: &str) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; \
         charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
}

/// The OpenMetrics text of `series`, family by family (each family's samples together, as
/// the format requires), ended by `# EOF`.
fn render(series: &[TimeSeries], families: &[MetricMetadata]) -> String {
    let mut out = String::new();
    for f in families {
        let name = f.metric_family_name.as_str();
        let of_family: Vec<&TimeSeries> = series
            .iter()
            .filter(|s| s.labels.first().is_some_and(|l| l.value == name))
            .collect();
        if of_family.is_empty() {
            continue;
        }
        let (family, kind) = match f.r#type {
            1 => (name.strip_suffix("_total").unwrap_or(name), "counter"),
            3 => (name, "histogram"),
            _ => (name, "gauge"),
        };
        let _ = writeln!(out, "# TYPE {family} {kind}");
        let _ = writeln!(out, "# HELP {family} {}", escape(&f.help));
        for s in of_family {
            let labels = labels(s);
            for sample in &s.samples {
                let _ = writeln!(out, "{name}{{{labels}}} {}", number(sample.value));
            }
            for h in &s.histograms {
                classic(&mut out, name, &labels, h);
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

/// A native histogram's buckets as cumulative classic ones (`le` the schema's upper bounds).
fn classic(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let per_power = f64::from(1u32 << h.schema);
    let (mut index, mut count, mut cumulative) = (0i32, 0i64, 0u64);
    let mut deltas = h.positive_deltas.iter();
    // The first span starts at its offset, each next one `offset` past the previous one's end.
    for span in &h.positive_spans {
        index += span.offset;
        for _ in 0..span.length {
            count += deltas.next().copied().unwrap_or(0);
            cumulative += count.max(0) as u64;
            let le = 2f64.powf(f64::from(index) / per_power);
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{}\"}} {cumulative}",
                number(le)
            );
            index += 1;
        }
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count_int);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count_int);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", number(h.sum));
}

/// A series' labels but its name, `name="value"` joined by commas.
fn labels(s: &TimeSeries) -> String {
    s.labels
        .iter()
        .filter(|l| l.name != "__name__")
        .map(|l| format!("{}=\"{}\"", l.name, escape(&l.value)))
        .collect::<Vec<_>>()
        .join(",")
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::native::Native;
    use super::super::proto::Label;
    use super::*;
    use crate::metrics::LatencyHistogram;

    #[test]
    fn a_native_histogram_becomes_cumulative_classic_buckets() {
        let mut hdr = LatencyHistogram::default();
        for us in [1000, 1000, 4000] {
            hdr.record(Duration::from_micros(us));
        }
        let mut n = Native::default();
        n.add(&hdr);
        let series = TimeSeries {
            labels: vec![
                Label {
                    name: "__name__".into(),
                    value: "h".into(),
                },
                Label {
                    name: "step".into(),
                    value: "1".into(),
                },
            ],
            samples: Vec::new(),
            histograms: vec![n.message(1)],
        };
        let family = MetricMetadata {
            r#type: 3,
            metric_family_name: "h".into(),
            help: "a \"help\"".into(),
            unit: String::new(),
        };
        let text = render(&[series], &[family]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# TYPE h histogram");
        assert_eq!(lines[1], r#"# HELP h a \"help\""#);
        let buckets: Vec<(f64, u64)> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("h_bucket{step=\"1\",le=\""))
            .filter(|l| !l.starts_with('+'))
            .map(|l| {
                let (le, n) = l.split_once("\"} ").unwrap();
                (le.parse().unwrap(), n.parse().unwrap())
            })
            .collect();
        assert_eq!(buckets.len(), 2);
        assert!(buckets[0].0 >= 0.001 && buckets[0].0 < 0.001 * 1.003);
        assert_eq!(buckets[0].1, 2);
        assert!(buckets[1].0 >= 0.004 && buckets[1].0 < 0.004 * 1.003);
        assert_eq!(buckets[1].1, 3);
        assert!(text.contains("h_bucket{step=\"1\",le=\"+Inf\"} 3\nh_count{step=\"1\"} 3\n"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_page_is_served_and_its_address_freed_when_dropped() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let page = Page::serve(listener).unwrap();
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("application/openmetrics-text; version=1.0.0"));
        assert!(answer.ends_with("\r\n\r\n# EOF\n"), "{answer}");
        drop(page);
        TcpListener::bind(addr).expect("the address is free again");
    }
}
