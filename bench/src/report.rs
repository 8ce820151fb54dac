//! The side-by-side report: figures with median and p90, ratios against the limit and the peer
//! measured in the same run, targets with a pass/miss mark, the machine, versions and date, and
//! where the results are written.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Median and p90 of one measurement, with the number of repetitions behind them.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub median: Duration,
    pub p90: Duration,
    pub runs: usize,
}

impl Summary {
    pub fn of(samples: Vec<Duration>) -> Summary {
        let runs = samples.len();
        let stats = super::stats(samples);
        Summary {
            median: stats.median,
            p90: stats.p90,
            runs,
        }
    }

    pub fn millis(&self) -> f64 {
        self.median.as_secs_f64() * 1000.0
    }

    fn cell(&self) -> String {
        format!(
            "{} ({}) ×{}",
            format_millis(self.median),
            format_millis(self.p90),
            self.runs
        )
    }
}

fn format_millis(duration: Duration) -> String {
    format!("{} ms", rounded(duration.as_secs_f64() * 1000.0, 10.0))
}

/// `value` with no decimals from 100 on, one from `one_decimal_from` on, two below it.
pub(crate) fn rounded(value: f64, one_decimal_from: f64) -> String {
    let decimals = if value >= 100.0 {
        0
    } else if value >= one_decimal_from {
        1
    } else {
        2
    };
    format!("{value:.decimals$}")
}

/// One measured figure, or why there is none.
#[derive(Debug, Clone)]
pub enum Figure {
    Time(Summary),
    Megabytes(f64),
    Missing(String),
    /// Not measured on purpose (`--quick`): shown with the reason, never counted as a failure.
    Skipped(&'static str),
}

impl Figure {
    fn cell(&self) -> String {
        match self {
            Figure::Time(summary) => summary.cell(),
            Figure::Megabytes(megabytes) => format!("{megabytes:.1} MB"),
            Figure::Missing(reason) => format!("— ({reason})"),
            Figure::Skipped(reason) => format!("— ({reason})"),
        }
    }

    /// The median in milliseconds, or the size in MB: what ratios and the chart use.
    pub fn value(&self) -> Option<f64> {
        match self {
            Figure::Time(summary) => Some(summary.millis()),
            Figure::Megabytes(megabytes) => Some(*megabytes),
            Figure::Missing(_) | Figure::Skipped(_) => None,
        }
    }

    pub fn is_time(&self) -> bool {
        matches!(self, Figure::Time(_))
    }
}

impl From<anyhow::Result<Summary>> for Figure {
    fn from(result: anyhow::Result<Summary>) -> Figure {
        match result {
            Ok(summary) => Figure::Time(summary),
            Err(error) => Figure::Missing(one_line(&format!("{error:#}"))),
        }
    }
}

/// The first line of an error, shortened for a table cell.
pub fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().replace('|', "/");
    if line.chars().count() > 140 {
        format!("{}…", line.chars().take(140).collect::<String>())
    } else {
        line
    }
}

/// The target a figure is held to (from the issues that set them).
#[derive(Debug, Clone, Copy)]
pub enum Target {
    None,
    /// Our median at most this many times the limit's median.
    RatioToLimit(f64),
    /// Our median below this many milliseconds.
    BelowMillis(f64),
}

/// One row of the side-by-side table.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub ours: Figure,
    /// The physical limit for the same work, when there is one, and what it is.
    pub limit: Option<(Figure, &'static str)>,
    pub peer: Figure,
    pub target: Target,
    /// Bytes of content each side returned for one call (what lands in the agent's context).
    pub reply_bytes: Option<(usize, Option<usize>)>,
}

impl Line {
    pub fn new(name: impl Into<String>, ours: Figure, peer: Figure) -> Line {
        Line {
            name: name.into(),
            ours,
            limit: None,
            peer,
            target: Target::None,
            reply_bytes: None,
        }
    }

    pub fn limit(mut self, limit: Figure, what: &'static str) -> Line {
        self.limit = Some((limit, what));
        self
    }

    pub fn target(mut self, target: Target) -> Line {
        self.target = target;
        self
    }

    pub fn reply_bytes(mut self, ours: usize, peer: Option<usize>) -> Line {
        self.reply_bytes = Some((ours, peer));
        self
    }

    fn ratio_to_limit(&self) -> Option<f64> {
        let (limit, _) = self.limit.as_ref()?;
        Some(self.ours.value()? / limit.value()?)
    }

    fn peer_ratio(&self) -> Option<f64> {
        Some(self.peer.value()? / self.ours.value()?)
    }

    fn verdict(&self) -> String {
        let (pass, wanted) = match self.target {
            Target::None => return String::new(),
            Target::RatioToLimit(most) => match self.ratio_to_limit() {
                Some(ratio) => (ratio <= most, format!("≤ {most}× limit")),
                None => return format!("≤ {most}× limit: not measured"),
            },
            Target::BelowMillis(most) => match self.ours.value() {
                Some(millis) => (millis < most, format!("< {most} ms")),
                None => return format!("< {most} ms: not measured"),
            },
        };
        format!("{wanted}: **{}**", if pass { "pass" } else { "MISS" })
    }
}

fn ratio_cell(ratio: Option<f64>) -> String {
    match ratio {
        Some(ratio) if ratio >= 100.0 => format!("{ratio:.0}×"),
        Some(ratio) if ratio >= 10.0 => format!("{ratio:.1}×"),
        Some(ratio) => format!("{ratio:.2}×"),
        None => "—".to_owned(),
    }
}

/// The side-by-side table as markdown.
pub fn side_by_side_table(title: &str, lines: &[Line]) -> String {
    let mut table = format!(
        "\n### {title}\n\n| measurement | jupyter-mcp median (p90) ×runs | limit median (p90) | ours ÷ limit | datalayer jupyter-mcp-server median (p90) | datalayer ÷ ours | reply bytes (ours / datalayer) | target |\n|---|---|---|---|---|---|---|---|\n"
    );
    for line in lines {
        let limit = match &line.limit {
            Some((figure, what)) => format!("{} {what}", figure.cell()),
            None => "—".to_owned(),
        };
        let bytes = match line.reply_bytes {
            Some((ours, Some(peer))) => format!("{ours} / {peer}"),
            Some((ours, None)) => format!("{ours} / —"),
            None => String::new(),
        };
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            line.name,
            line.ours.cell(),
            limit,
            ratio_cell(line.ratio_to_limit()),
            line.peer.cell(),
            ratio_cell(line.peer_ratio()),
            bytes,
            line.verdict()
        );
    }
    table
}

/// Context cost of the same read on one output-heavy notebook.
#[derive(Debug, Clone)]
pub struct ContextRow {
    pub notebook: String,
    pub cells: usize,
    pub raw_bytes: usize,
    pub ours: Reply,
    pub peer: Option<Reply>,
    pub peer_note: String,
}

/// What a server returned: text bytes, image bytes (base64) and an estimate of tokens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reply {
    pub text_bytes: usize,
    pub image_bytes: usize,
    pub images: usize,
    pub tokens: usize,
    pub calls: usize,
}

impl Reply {
    pub fn add(&mut self, other: Reply) {
        self.text_bytes += other.text_bytes;
        self.image_bytes += other.image_bytes;
        self.images += other.images;
        self.tokens += other.tokens;
        self.calls += other.calls;
    }

    fn cell(&self) -> String {
        format!(
            "{} B text + {} B in {} image(s) ≈ {} tokens, {} call(s)",
            self.text_bytes, self.image_bytes, self.images, self.tokens, self.calls
        )
    }
}

pub fn context_table(rows: &[ContextRow]) -> String {
    let mut table = String::from(
        "\n### Context cost: reading every cell with its outputs (ours: one `read_notebook` view `all`; datalayer: `read_cell` per cell, `include_outputs`)\n\nTokens are estimated: text at 4 bytes a token, images at width × height / 750 after scaling to 1568 px (how Claude counts image tokens); raw is the cells' output JSON as stored in the file.\n\n| notebook | raw output JSON | jupyter-mcp | datalayer jupyter-mcp-server | datalayer ÷ ours (tokens) | raw ÷ ours (bytes) |\n|---|---|---|---|---|---|\n",
    );
    let mut ours_total = Reply::default();
    let mut peer_total = Reply::default();
    let mut peer_complete = true;
    let mut raw_total = 0;
    for row in rows {
        raw_total += row.raw_bytes;
        ours_total.add(row.ours);
        let (peer, ratio) = match row.peer {
            Some(peer) => {
                peer_total.add(peer);
                (
                    peer.cell(),
                    ratio_cell(Some(peer.tokens as f64 / row.ours.tokens.max(1) as f64)),
                )
            }
            None => {
                peer_complete = false;
                (format!("— ({})", row.peer_note), "—".to_owned())
            }
        };
        let _ = writeln!(
            table,
            "| {} ({} cells) | {} B | {} | {} | {} | {} |",
            row.notebook,
            row.cells,
            row.raw_bytes,
            row.ours.cell(),
            peer,
            ratio,
            ratio_cell(Some(
                row.raw_bytes as f64 / (row.ours.text_bytes + row.ours.image_bytes).max(1) as f64
            ))
        );
    }
    let _ = writeln!(
        table,
        "| **total** | {raw_total} B | {} | {} | {} | {} |",
        ours_total.cell(),
        if peer_complete && !rows.is_empty() {
            peer_total.cell()
        } else {
            "incomplete".to_owned()
        },
        if peer_complete && !rows.is_empty() {
            ratio_cell(Some(
                peer_total.tokens as f64 / ours_total.tokens.max(1) as f64,
            ))
        } else {
            "—".to_owned()
        },
        ratio_cell(Some(
            raw_total as f64 / (ours_total.text_bytes + ours_total.image_bytes).max(1) as f64
        ))
    );
    table
}

/// An estimate of the tokens a model is charged for an image, from its pixel size.
pub fn image_tokens(base64_data: &str) -> usize {
    let (width, height) = image_size(base64_data).unwrap_or((1092, 1092));
    let (mut width, mut height) = (width as f64, height as f64);
    let long_edge = width.max(height);
    if long_edge > 1568.0 {
        width *= 1568.0 / long_edge;
        height *= 1568.0 / long_edge;
    }
    let area = width * height;
    if area > 1_150_000.0 {
        let scale = (1_150_000.0 / area).sqrt();
        width *= scale;
        height *= scale;
    }
    ((width * height) / 750.0).ceil() as usize
}

/// Width and height of a PNG, JPEG or GIF, from the first bytes of its base64 data.
fn image_size(base64_data: &str) -> Option<(u32, u32)> {
    let bytes = decode_base64(base64_data.get(..base64_data.len().min(200_000))?);
    if bytes.starts_with(b"\x89PNG") && bytes.len() >= 24 {
        let width = u32::from_be_bytes(bytes[16..20].try_into().ok()?);
        let height = u32::from_be_bytes(bytes[20..24].try_into().ok()?);
        return Some((width, height));
    }
    if bytes.starts_with(b"GIF") && bytes.len() >= 10 {
        return Some((
            u32::from(u16::from_le_bytes([bytes[6], bytes[7]])),
            u32::from(u16::from_le_bytes([bytes[8], bytes[9]])),
        ));
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        let mut at = 2;
        while at + 9 < bytes.len() {
            if bytes[at] != 0xFF {
                at += 1;
                continue;
            }
            let marker = bytes[at + 1];
            let length = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
            if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
                let height = u32::from(u16::from_be_bytes([bytes[at + 5], bytes[at + 6]]));
                let width = u32::from(u16::from_be_bytes([bytes[at + 7], bytes[at + 8]]));
                return Some((width, height));
            }
            at += 2 + length;
        }
    }
    None
}

fn decode_base64(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    let whole = text.len() / 4 * 4;
    base64::engine::general_purpose::STANDARD
        .decode(&text.as_bytes()[..whole])
        .unwrap_or_default()
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock.
pub fn today() -> String {
    host_core::host::rfc3339(std::time::SystemTime::now())[..10].to_owned()
}

/// The machine and software the figures were measured on.
pub fn environment(python: &Path) -> String {
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("MemTotal"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kilobytes| kilobytes.parse::<f64>().ok())
        })
        .map_or_else(String::new, |kilobytes| {
            format!(", {:.0} GiB memory", kilobytes / 1024.0 / 1024.0)
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|release| format!(", Linux {}", release.trim()))
        .unwrap_or_default();
    let rustc = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default();
    let script = r#"
import sys, importlib.metadata as m
def v(name):
    try:
        return m.version(name)
    except Exception:
        return "not installed"
print(f"Python {sys.version.split()[0]}, ipykernel {v('ipykernel')}, jupyter_client {v('jupyter_client')}, "
      f"jupyter-mcp-server {v('jupyter-mcp-server')}, jupyter_server {v('jupyter_server')}, "
      f"jupyter-collaboration {v('jupyter-collaboration')}, mcp {v('mcp')}")
"#;
    let python_versions = std::process::Command::new(python)
        .args(["-c", script])
        .output()
        .ok()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default();
    let note = std::env::var("JUPYTER_MCP_BENCH_NOTE")
        .map(|note| format!("- Note: {note}\n"))
        .unwrap_or_default();
    format!(
        "- Date: {} (UTC)\n- Machine: {}{memory}{kernel}\n- Rust: {rustc} (release build)\n- {python_versions}\n{note}",
        today(),
        super::machine_line(),
    )
}

/// Where a run's results go: the dated and `latest` files for a full run; `raw/` (not
/// committed) for `--quick`.
pub fn results_paths(quick: bool) -> (PathBuf, Vec<String>) {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    if quick {
        (results.join("raw"), vec!["quick".to_owned()])
    } else {
        (results, vec!["latest".to_owned(), today()])
    }
}

/// Writes the markdown report and the chart under every name of [`results_paths`].
pub fn write_results(report: &str, chart_png: Option<&[u8]>, quick: bool) -> anyhow::Result<()> {
    let (folder, names) = results_paths(quick);
    std::fs::create_dir_all(&folder)?;
    for name in &names {
        let mut text = report.to_owned();
        if chart_png.is_some() {
            text.push_str(&format!("\n![side-by-side chart]({name}.png)\n"));
        }
        std::fs::write(folder.join(format!("{name}.md")), text)?;
        if let Some(png) = chart_png {
            std::fs::write(folder.join(format!("{name}.png")), png)?;
        }
        eprintln!("written to {}", folder.join(format!("{name}.md")).display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_png_size_from_base64() {
        // A 1×1 PNG header: width 640, height 480 patched in.
        let mut header = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        header.extend_from_slice(&640u32.to_be_bytes());
        header.extend_from_slice(&480u32.to_be_bytes());
        header.extend_from_slice(&[8, 6, 0, 0, 0]);
        let encoded = encode(&header);
        assert_eq!(image_size(&encoded), Some((640, 480)));
        assert_eq!(image_tokens(&encoded), 410);
    }

    #[test]
    fn milliseconds_lose_decimals_as_they_grow() {
        for (micros, shown) in [(123_456, "123 ms"), (12_345, "12.3 ms"), (1_234, "1.23 ms")] {
            assert_eq!(format_millis(Duration::from_micros(micros)), shown);
        }
        assert_eq!(rounded(0.5, 1.0), "0.50");
        assert_eq!(rounded(5.26, 1.0), "5.3");
    }

    fn encode(bytes: &[u8]) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn today_is_a_date() {
        let date = today();
        assert_eq!(date.len(), 10);
        assert!(date.starts_with("20"));
    }
}
