//! report.html in a real browser: headless Chromium (installed by
//! tests/report_browser/setup.sh) opens the file from disk; every plot must be in the rendered
//! DOM with its drawing, the screenshot must show the plots' colours, and nothing may be
//! fetched: the file names no external resource, its CSP forbids fetches, and a trap proxy on
//! loopback that Chromium must send every HTTP(S) request through sees no request but
//! Chromium's own service traffic (a control page with an external image proves the trap
//! catches one). And nothing is wider than the window: at 1,400 px no element scrolls or
//! sticks out sideways (every `<details>` opened), at 800 px neither does any element but the
//! "more columns" views behind `<details>`, which may scroll.

use crate::support::machine;
use crate::support::scratch::scratch;
use crate::support::synthetic::{synthetic_run, workflow_run};
use std::fs;
use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

const PLOTS: [&str; 5] = [
    "Throughput and latency against load",
    "Universal Scalability Law fit",
    "Latency by percentile, per step",
    "Anomalies, rejections and losses per step",
    "Per second",
];

/// Hosts of Chromium's own background services (component updates, sign-in), which headless
/// Chromium contacts whatever page it shows; requests to them are not the page's.
const CHROMIUM_SERVICES: [&str; 2] = ["google.com", "googleapis.com"];

/// The host an HTTP proxy request names: `CONNECT host:443` or `GET http://host/path`.
fn proxied_host(request_line: &str) -> String {
    let target = request_line.split_whitespace().nth(1).unwrap_or_default();
    let target = target.split("://").nth(1).unwrap_or(target);
    let authority = target.split('/').next().unwrap_or_default();
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .to_owned()
}

/// A loopback listener standing in for Chromium's only proxy: it records the request line of
/// every connection that is not Chromium's own service traffic, and drops the connection.
struct Trap {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Trap {
    fn start() -> Trap {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, s) = (requests.clone(), stop.clone());
        let thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                        let mut buf = [0u8; 1024];
                        let n = conn.read(&mut buf).unwrap_or(0);
                        let text = String::from_utf8_lossy(&buf[..n]);
                        let line = text.lines().next().unwrap_or("(nothing sent)").to_owned();
                        let host = proxied_host(&line);
                        let service = CHROMIUM_SERVICES
                            .iter()
                            .any(|d| host == *d || host.ends_with(&format!(".{d}")));
                        if !service {
                            seen.lock().unwrap().push(line);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(10));
                    }
                    Err(_) => {}
                }
            }
        });
        Trap {
            port,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// Request lines seen so far (Chromium's service traffic left out).
    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Trap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn chromium() -> PathBuf {
    let found = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .expect("run sh");
    assert!(
        found.status.success(),
        "chromium is not installed: run tests/report_browser/setup.sh"
    );
    PathBuf::from(String::from_utf8(found.stdout).unwrap().trim())
}

/// Runs headless Chromium on `page` with every request sent through the trap.
fn browse(trap: &Trap, page: &Path, profile: &Path, extra: &[&str]) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            "--timeout=20000",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--proxy-server=http://127.0.0.1:{}", trap.port),
            "--proxy-bypass-list=<-loopback>",
        ])
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The RGB pixels of a PNG.
fn pixels(png_path: &Path) -> Vec<[u8; 3]> {
    let decoder = png::Decoder::new(std::io::BufReader::new(fs::File::open(png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(step)
        .map(|p| [p[0], p[1], p[2]])
        .collect()
}

#[test]
fn report_html_renders_every_plot_and_fetches_nothing() {
    let _share = machine::loading();
    let dir = scratch("browser");
    synthetic_run(&dir, &["anomalies==0"]);
    let page = fs::canonicalize(dir.join("report.html")).unwrap();
    let html = fs::read_to_string(&page).unwrap();

    // Nothing in the file could fetch anything.
    assert!(html.contains(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'"
    ));
    let lower = html.to_ascii_lowercase();
    for needle in [
        "<script", "<link", "<img", "<iframe", "<object", "<embed", "<video", "<audio", "src=",
        "href=", "url(", "@import",
    ] {
        assert!(!lower.contains(needle), "report.html contains {needle}");
    }
    for url in lower
        .match_indices("http:")
        .chain(lower.match_indices("https:"))
    {
        let tail = &lower[url.0..];
        // The only URLs: the SVG namespace name and the redacted target URL shown as text.
        assert!(
            tail.starts_with("http://www.w3.org/2000/svg")
                || tail.starts_with("http://[redacted]@"),
            "unexpected URL in report.html: {}",
            &tail[..tail.len().min(60)]
        );
    }

    let trap = Trap::start();
    let profile = scratch("browser_profile");
    let dom = browse(&trap, &page, &profile, &["--dump-dom"]);
    assert_eq!(
        dom.matches("<svg").count(),
        5,
        "five plots in the rendered DOM"
    );
    for title in PLOTS {
        assert!(dom.contains(title), "plot {title:?} missing from the DOM");
    }
    // Each plot drew lines or shapes, not only axes.
    for svg in dom.split("<svg").skip(1) {
        let svg = &svg[..svg.find("</svg>").expect("closed svg")];
        let shapes = svg.matches("<polyline").count()
            + svg.matches("<circle").count()
            + svg.matches("<rect").count()
            + svg.matches("<path").count();
        assert!(
            shapes > 5,
            "a plot without drawing: {}",
            &svg[..svg.len().min(200)]
        );
    }
    assert!(dom.contains("Content-Security-Policy"));

    let shot = dir.join("screenshot.png");
    browse(
        &trap,
        &page,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1100,4200",
        ],
    );
    let px = pixels(&shot);
    let non_white = px.iter().filter(|p| **p != [255, 255, 255]).count();
    assert!(
        non_white * 20 > px.len(),
        "screenshot mostly blank: {non_white} of {} pixels",
        px.len()
    );
    // The plots' own colours: the throughput line (blue) and the rejection bars (orange).
    for (name, rgb) in [("blue", [31, 119, 180]), ("orange", [255, 127, 14])] {
        let n = px.iter().filter(|p| **p == rgb).count();
        assert!(n > 200, "only {n} {name} pixels: a plot did not render");
    }
    assert_eq!(
        trap.requests(),
        Vec::<String>::new(),
        "the report made a network request"
    );

    // Control: the same browser and trap do catch an external fetch.
    let control = dir.join("control.html");
    fs::write(
        &control,
        "<!DOCTYPE html><html><body><img src=\"http://trap.invalid/x.png\"></body></html>",
    )
    .unwrap();
    browse(&trap, &control, &profile, &["--dump-dom"]);
    let seen = trap.requests();
    assert!(
        seen.iter().any(|l| l.contains("trap.invalid")),
        "the trap proxy missed the control page's request: {seen:?}"
    );
}

/// Measures a page's layout in Chromium: opens every `<details>`, then lists the page when it
/// is wider than the window, and each element that is wider than its own box (scrolls or
/// clips sideways) or reaches past the window's right edge, but those matching `SCROLLS`
/// (and what they hold).
const PROBE: &str = r#"<script>
(function () {
  for (const d of document.querySelectorAll('details')) d.open = true;
  const root = document.documentElement, vw = root.clientWidth, out = [];
  const name = e => e.tagName.toLowerCase() + (e.getAttribute('class') ? '.' + e.getAttribute('class') : '')
    + ' "' + (e.textContent || '').trim().slice(0, 40) + '"';
  if (root.scrollWidth > vw) out.push('page ' + root.scrollWidth + ' px wide in ' + vw);
  {
    for (const e of document.body.querySelectorAll('*')) {
      if (e.closest('svg') && e.tagName.toLowerCase() !== 'svg') continue;
      if (e.closest('SCROLLS')) continue;
      const right = e.getBoundingClientRect().right;
      if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
        out.push(name(e) + ': content ' + e.scrollWidth + ' px in ' + e.clientWidth);
      else if (right > vw + 1) out.push(name(e) + ': reaches ' + Math.round(right) + ' px of ' + vw);
    }
  }
  const p = document.createElement('pre');
  p.id = 'overflow-probe';
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
})();
</script>"#;

/// What overflows sideways in `page` shown `width` px wide, elements matching the CSS
/// selector `scrolls` left out: a copy of it without its Content-Security-Policy (which
/// forbids the probe's script) and with [`PROBE`] at its end, dumped by Chromium.
fn overflow(trap: &Trap, profile: &Path, page: &Path, width: u32, scrolls: &str) -> Vec<String> {
    let html = fs::read_to_string(page).unwrap();
    let csp = html.find("<meta http-equiv=\"Content-Security-Policy\"");
    let html = match csp {
        Some(at) => {
            let end = at + html[at..].find('>').unwrap() + 1;
            format!("{}{}", &html[..at], &html[end..])
        }
        None => html,
    };
    let probe = PROBE.replace("SCROLLS", scrolls);
    let probed = page.with_file_name(format!("probed-{width}.html"));
    fs::write(&probed, html.replace("</body>", &format!("{probe}</body>"))).unwrap();
    let dom = browse(
        trap,
        &probed,
        profile,
        &["--dump-dom", &format!("--window-size={width},900")],
    );
    let found = dom
        .split("<pre id=\"overflow-probe\">")
        .nth(1)
        .and_then(|t| t.split("</pre>").next())
        .unwrap_or_else(|| panic!("the probe did not run at {width} px"));
    let json = found
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// A selector no element of report.html matches: nothing may scroll.
const NONE: &str = "no-such-element";

#[test]
fn report_html_fits_1400_and_800_px_without_scrolling_sideways() {
    let _share = machine::loading();
    let sweep = scratch("browser_fit_sweep");
    synthetic_run(&sweep, &["anomalies==0"]);
    let workflow = scratch("browser_fit_workflow");
    workflow_run(&workflow, &["p99_ms<1000"], |_, _| {});
    let trap = Trap::start();
    let profile = scratch("browser_fit_profile");
    for dir in [&sweep, &workflow] {
        let page = fs::canonicalize(dir.join("report.html")).unwrap();
        let html = fs::read_to_string(&page).unwrap();
        assert!(html.contains("<details>"), "no columns behind <details>");
        assert_eq!(
            overflow(&trap, &profile, &page, 1400, NONE),
            Vec::<String>::new(),
            "{} at 1,400 px",
            page.display()
        );
        assert_eq!(
            overflow(&trap, &profile, &page, 800, ".more"),
            Vec::<String>::new(),
            "{} at 800 px",
            page.display()
        );
    }

    // Control: the probe does see a table too wide for the window, in a scrolling wrapper
    // (an element scrolling sideways) and in the page.
    let page = fs::canonicalize(sweep.join("report.html")).unwrap();
    let control = sweep.join("control-wide.html");
    let wide: String = (0..60).map(|i| format!("<td>column {i}</td>")).collect();
    fs::write(
        &control,
        fs::read_to_string(&page).unwrap().replace(
            "<h2>Steps</h2>",
            &format!(
                "<div style=\"overflow-x: auto\"><table><tr>{wide}</tr></table></div>\
                 <table><tr>{wide}</tr></table><h2>Steps</h2>"
            ),
        ),
    )
    .unwrap();
    let found = overflow(&trap, &profile, &control, 1400, NONE);
    assert!(
        found.iter().any(|f| f.starts_with("div ")),
        "the scrolling wrapper: {found:?}"
    );
    assert!(
        found.iter().any(|f| f.starts_with("page ")),
        "the page: {found:?}"
    );
    assert!(
        overflow(&trap, &profile, &control, 800, ".more")
            .iter()
            .any(|f| f.starts_with("page ")),
        "the page at 800 px"
    );
    assert_eq!(trap.requests(), Vec::<String>::new());
}
