//! The `Metrics` source: a Prometheus text-format page (0.0.4, and OpenMetrics' text as far
//! as samples go), scraped over HTTP and read for the standard `process_*` figures, a heap
//! gauge and the named series; the page's parser.

use super::cpu::CpuRate;
use super::http_get;
use super::{Problem, Reading, ResourceSample, Source};
use std::time::{Duration, Instant};

/// How long a scrape may take, connecting included.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(1);

/// Heap gauges, the first one on the page wins: Node's prom-client, then Go's client.
const HEAP_SERIES: [&str; 2] = [
    "nodejs_heap_size_used_bytes",
    "go_memstats_heap_inuse_bytes",
];

/// A series' labels, (name, value) in the order written.
type Labels = Vec<(String, String)>;

/// One sample line of a page: the series' name, its labels as written (escapes undone),
/// and its value (timestamps and exemplars are read past).
#[derive(Debug, PartialEq)]
struct Series {
    name: String,
    labels: Labels,
    value: f64,
}

/// The series of a page, in its order; comments, blank lines and lines that are not a
/// sample are skipped.
fn parse_page(text: &str) -> Vec<Series> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return None;
            }
            let (name, labels, rest) = series_head(line)?;
            // The value, then an optional timestamp and an optional `# {...} v` exemplar.
            let value = parse_value(rest.split_whitespace().next()?)?;
            Some(Series {
                name,
                labels,
                value,
            })
        })
        .collect()
}

/// A sample value: a float, or `+Inf`, `-Inf`, `NaN` in any case.
fn parse_value(text: &str) -> Option<f64> {
    match text.to_ascii_lowercase().as_str() {
        "+inf" | "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        number => number.parse().ok(),
    }
}

/// The series name, the labels and what follows them in `line` (`name{k="v",...} rest`).
fn series_head(line: &str) -> Option<(String, Labels, &str)> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let rest = line[name_end..].trim_start();
    let Some(inside) = rest.strip_prefix('{') else {
        return Some((name.to_owned(), Vec::new(), rest));
    };
    let (labels, after) = parse_labels(inside)?;
    Some((name.to_owned(), labels, after))
}

/// `k="v",...}` up to and past its closing brace: the pairs and what follows. Values may
/// hold any character, with `\\`, `\"` and `\n` escaped.
fn parse_labels(mut text: &str) -> Option<(Labels, &str)> {
    let mut labels = Vec::new();
    // Each pass consumes a pair or the closing brace: bounded by the line's length.
    loop {
        text = text.trim_start();
        if let Some(after) = text.strip_prefix('}') {
            return Some((labels, after));
        }
        let (key, after_key) = text.split_once('=')?;
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let mut chars = after_key.trim_start().strip_prefix('"')?.char_indices();
        let value_start = after_key.len() - after_key.trim_start().len() + 1;
        let mut value = String::new();
        let value_end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key.to_owned(), value));
        text = after_key[value_start + value_end + 1..].trim_start();
        text = text.strip_prefix(',').unwrap_or(text);
    }
}

/// What a named series asks for: a name, and labels a sample must carry (others it may).
struct Selector {
    name: String,
    labels: Labels,
}

impl Selector {
    /// `name` or `name{k="v",...}`; None if it is neither.
    fn parse(text: &str) -> Option<Selector> {
        let (name, labels, rest) = series_head(text.trim())?;
        rest.trim().is_empty().then_some(Selector { name, labels })
    }

    fn by_name(name: &str) -> Selector {
        Selector {
            name: name.to_owned(),
            labels: Vec::new(),
        }
    }

    /// The sum of every sample on `page` this selects; None if none does.
    fn sum(&self, page: &[Series]) -> Option<f64> {
        page.iter()
            .filter(|series| {
                series.name == self.name && self.labels.iter().all(|l| series.labels.contains(l))
            })
            .map(|series| series.value)
            .reduce(|a, b| a + b)
    }
}

/// A gauge as a count of bytes or things: None unless finite and not negative.
fn whole(value: Option<f64>) -> Option<u64> {
    value
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| v.round() as u64)
}

pub(super) struct MetricsPage {
    url: String,
    /// (name, its series as asked, the selector it parsed to).
    named: Vec<(String, String, Option<Selector>)>,
    rate: CpuRate,
}

impl MetricsPage {
    pub(super) fn new(url: String, named: &[(String, String)]) -> MetricsPage {
        MetricsPage {
            url,
            named: named
                .iter()
                .map(|(name, series)| (name.clone(), series.clone(), Selector::parse(series)))
                .collect(),
            rate: CpuRate::default(),
        }
    }

    /// The figures on `page`, scraped at `at`, and the named series it lacks.
    fn read_page(&mut self, page: &[Series], at: Instant) -> Reading {
        let cpu_s = Selector::by_name("process_cpu_seconds_total").sum(page);
        let mut reading = Reading::of(ResourceSample {
            rss_bytes: whole(Selector::by_name("process_resident_memory_bytes").sum(page)),
            cpu_pct: cpu_s.and_then(|cpu_s| self.rate.percent(at, cpu_s)),
            fds: whole(Selector::by_name("process_open_fds").sum(page)),
            heap_bytes: HEAP_SERIES
                .iter()
                .find_map(|name| whole(Selector::by_name(name).sum(page))),
            ..ResourceSample::default()
        });
        if cpu_s.is_none() {
            self.rate.forget();
        }
        for (name, series, selector) in &self.named {
            match selector.as_ref().and_then(|selector| selector.sum(page)) {
                Some(value) => reading.figures.named.push((name.clone(), value)),
                None => reading.problems.push(Problem {
                    episode: format!("named {name}"),
                    message: match selector {
                        Some(_) => format!("{}: no series {series} (for {name})", self.url),
                        None => format!("{series} (for {name}) is not a Prometheus series name"),
                    },
                }),
            }
        }
        reading
    }
}

impl Source for MetricsPage {
    fn read(&mut self) -> Reading {
        let at = Instant::now();
        match http_get::get(&self.url, SCRAPE_TIMEOUT) {
            Ok(body) => {
                let page = parse_page(&String::from_utf8_lossy(&body));
                self.read_page(&page, at)
            }
            Err(why) => {
                self.rate.forget();
                Reading::failed("scrape", format!("{}: {why}", self.url))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{WatchSource, WatchSpec, Watcher};
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn series(name: &str, labels: &[(&str, &str)], value: f64) -> Series {
        Series {
            name: name.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
        }
    }

    #[test]
    fn a_page_is_read_with_its_labels_special_values_timestamps_and_exemplars() {
        let page = parse_page(concat!(
            "# HELP http_requests_total The total number of HTTP requests.\n",
            "# TYPE http_requests_total counter\n",
            "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n",
            "http_requests_total{ method = \"post\" , code=\"400\", }    3\n",
            "\n",
            "msdos_file{path=\"C:\\\\DIR\\\\F.TXT\",error=\"no \\\"F\\\"\\n,}{#\"} 1.458e9\n",
            "weird{problem=\"division by zero\"} +Inf -3982045\n",
            "down -Inf\n",
            "unknown NaN\n",
            "rpc_seconds_bucket{le=\"+Inf\"} 17 # {trace_id=\"abc\"} 0.5 1.6e9\n",
            "not a sample line\n",
            "9starts_with_a_digit 1\n",
            "novalue\n",
            "# EOF\n",
        ));
        let expected = [
            series(
                "http_requests_total",
                &[("method", "post"), ("code", "200")],
                1027.0,
            ),
            series(
                "http_requests_total",
                &[("method", "post"), ("code", "400")],
                3.0,
            ),
            series(
                "msdos_file",
                &[("path", "C:\\DIR\\F.TXT"), ("error", "no \"F\"\n,}{#")],
                1.458e9,
            ),
            series("weird", &[("problem", "division by zero")], f64::INFINITY),
            series("down", &[], f64::NEG_INFINITY),
            series("rpc_seconds_bucket", &[("le", "+Inf")], 17.0),
        ];
        let (nan, rest): (Vec<_>, Vec<_>) = page.into_iter().partition(|s| s.value.is_nan());
        assert_eq!(rest, expected);
        assert_eq!(nan.len(), 1);
        assert_eq!(nan[0].name, "unknown");
    }

    fn named(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
            .collect()
    }

    #[test]
    fn the_process_figures_a_heap_gauge_and_named_series_come_off_the_page() {
        let node = parse_page(concat!(
            "process_resident_memory_bytes 5.24288e+07\n",
            "process_open_fds 23\n",
            "process_cpu_seconds_total 1.5\n",
            "nodejs_heap_size_used_bytes 12345000\n",
            "go_memstats_heap_inuse_bytes 999\n",
            "mcp_sessions{transport=\"http\"} 7\n",
            "mcp_sessions{transport=\"stdio\"} 5\n",
            "queue_depth NaN\n",
        ));
        let asked = named(&[
            ("sessions", "mcp_sessions"),
            ("http_sessions", "mcp_sessions{transport=\"http\"}"),
            ("queue", "queue_depth"),
            ("typo", "mcp_sesions"),
            ("broken", "mcp_sessions{transport="),
        ]);
        let mut source = MetricsPage::new("http://x/metrics".to_owned(), &asked);
        let reading = source.read_page(&node, Instant::now());
        let figures = &reading.figures;
        assert_eq!(figures.rss_bytes, Some(52_428_800));
        assert_eq!(figures.fds, Some(23));
        assert_eq!(
            figures.heap_bytes,
            Some(12_345_000),
            "Node's gauge comes first"
        );
        assert_eq!(figures.cpu_pct, None, "one reading is no rate");
        assert_eq!((figures.threads, figures.processes), (None, None));
        assert_eq!(
            figures.named[..2],
            [
                ("sessions".to_owned(), 12.0),
                ("http_sessions".to_owned(), 7.0)
            ]
        );
        assert_eq!(figures.named[2].0, "queue");
        assert!(
            figures.named[2].1.is_nan(),
            "a NaN gauge is carried as it is"
        );
        let problems: Vec<_> = reading
            .problems
            .iter()
            .map(|p| p.message.as_str())
            .collect();
        assert_eq!(
            problems,
            [
                "http://x/metrics: no series mcp_sesions (for typo)",
                "mcp_sessions{transport= (for broken) is not a Prometheus series name",
            ]
        );

        let go = parse_page("go_memstats_heap_inuse_bytes 4.2e6\nprocess_open_fds -1\n");
        let reading = MetricsPage::new(String::new(), &[]).read_page(&go, Instant::now());
        assert_eq!(reading.figures.heap_bytes, Some(4_200_000));
        assert_eq!(reading.figures.fds, None, "a negative count is no count");
        assert!(reading.problems.is_empty());
    }

    /// A Prometheus page over real HTTP on 127.0.0.1, its CPU counter 0.2 s higher at every
    /// scrape; answers alternate Content-Length and chunked framing. Serves until dropped
    /// (or a minute, whichever is first).
    struct MetricsServer {
        url: String,
        done: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    /// CPU seconds the test server's counter gains per scrape.
    const CPU_PER_SCRAPE: f64 = 0.2;

    impl MetricsServer {
        fn start() -> MetricsServer {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let url = format!("http://{addr}/metrics");
            let done = Arc::new(AtomicBool::new(false));
            let stop = Arc::clone(&done);
            let thread = std::thread::spawn(move || {
                let mut scrapes = 0u64;
                let deadline = Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            answer(stream, &addr.to_string(), scrapes);
                            scrapes += 1;
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            });
            MetricsServer {
                url,
                done,
                thread: Some(thread),
            }
        }
    }

    impl Drop for MetricsServer {
        fn drop(&mut self) {
            self.done.store(true, Ordering::Relaxed);
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    /// Reads the request's head and answers scrape `n` with the page, or a 400 unless it is a
    /// GET of /metrics naming `host`.
    fn answer(mut stream: std::net::TcpStream, host: &str, n: u64) {
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 64 * 1024 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(k) => request.extend_from_slice(&buf[..k]),
            }
        }
        let head = String::from_utf8_lossy(&request);
        if !head.starts_with("GET /metrics HTTP/1.1\r\n")
            || !head.contains(&format!("\r\nHost: {host}\r\n"))
        {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            return;
        }
        let page = format!(
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds_total counter\n\
             process_cpu_seconds_total {}\n\
             # TYPE process_resident_memory_bytes gauge\n\
             process_resident_memory_bytes 104857600\n\
             process_open_fds 31 1700000000000\n\
             go_memstats_heap_inuse_bytes 4194304\n\
             mcp_active_sessions{{transport=\"http\",pod=\"a\"}} 12\n",
            10.0 + CPU_PER_SCRAPE * n as f64
        );
        let response = if n.is_multiple_of(2) {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{page}",
                page.len()
            )
        } else {
            let (a, b) = page.split_at(page.len() / 2);
            format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                a.len(),
                b.len()
            )
        };
        let _ = stream.write_all(response.as_bytes());
    }

    #[test]
    fn a_scraped_page_gives_rss_fds_heap_named_series_and_cpu_from_the_counters_rate() {
        let server = MetricsServer::start();
        let watcher = Watcher::start(WatchSpec {
            sources: vec![WatchSource::Metrics {
                url: server.url.clone(),
            }],
            named: named(&[("sessions", "mcp_active_sessions{transport=\"http\"}")]),
            interval: Duration::from_millis(200),
            origin: Instant::now(),
        });
        let samples = samples_until(&watcher, "three rates", {
            let rates = std::cell::Cell::new(0);
            move |s| {
                rates.set(rates.get() + usize::from(s.cpu_pct.is_some()));
                rates.get() >= 3
            }
        });
        drop(watcher);
        assert!(samples[0].cpu_pct.is_none(), "{:?}", samples[0]);
        for s in &samples {
            assert_eq!(s.rss_bytes, Some(104_857_600), "{s:?}");
            assert_eq!(s.fds, Some(31));
            assert_eq!(s.heap_bytes, Some(4_194_304));
            assert_eq!(s.named, [("sessions".to_owned(), 12.0)]);
        }
        // Each rate is 0.2 CPU-s over the wall time between two scrapes. The samples' t_s
        // are stamped just before each scrape, so that wall time is their gap give or take
        // the scrapes' own delays: on a loaded machine those may differ by tens of ms, so
        // the rate is held to within a factor of two of 0.2 s over the gap.
        for pair in samples.windows(2) {
            let Some(cpu) = pair[1].cpu_pct else { continue };
            let gap = pair[1].t_s - pair[0].t_s;
            let expected = 100.0 * CPU_PER_SCRAPE / gap;
            assert!(
                expected / 2.0 <= cpu && cpu <= expected * 2.0,
                "{cpu}% over a {gap} s gap, expected about {expected}%"
            );
        }
    }

    #[test]
    fn a_refused_connection_is_a_failure_and_sampling_goes_on() {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let url = format!("http://127.0.0.1:{port}/metrics");
        let watcher = Watcher::start(WatchSpec {
            sources: vec![WatchSource::Metrics { url: url.clone() }],
            named: Vec::new(),
            interval: Duration::from_millis(20),
            origin: Instant::now(),
        });
        let failures = failures_until(&watcher, "connection refused");
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with(&format!("{url}: connection refused (at ")));
        let samples = samples_until(&watcher, "a later sample", |s| s.t_s >= 0.1);
        assert!(
            samples
                .iter()
                .all(|s| s.rss_bytes.is_none() && s.cpu_pct.is_none())
        );
        assert!(
            watcher.take_failures().is_empty(),
            "one report for the episode"
        );
    }
}
