//! The side-by-side chart as a PNG, drawn with plotters on a bitmap with DejaVu Sans embedded
//! (no system fonts needed): median latencies on a log scale, then context tokens per read.

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::report::{ContextRow, Figure, Line, rounded};

const OURS: RGBColor = RGBColor(31, 119, 180);
const PEER: RGBColor = RGBColor(255, 127, 14);
const LIMIT: RGBColor = RGBColor(150, 150, 150);

/// One group of up to three bars: the limit, ours and the peer.
struct Group {
    label: String,
    limit: Option<f64>,
    ours: Option<f64>,
    peer: Option<f64>,
}

/// Draws the chart and returns the PNG bytes.
pub fn draw(lines: &[Line], context: &[ContextRow]) -> Result<Vec<u8>> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow!("the embedded DejaVu Sans font did not load"))?;
    let latency: Vec<Group> = lines
        .iter()
        .filter(|line| line.ours.is_time() || line.peer.is_time())
        .map(|line| Group {
            label: short_label(&line.name),
            limit: line
                .limit
                .as_ref()
                .and_then(|(figure, _)| figure.is_time().then(|| figure.value()).flatten()),
            ours: time_value(&line.ours),
            peer: time_value(&line.peer),
        })
        .collect();
    let tokens: Vec<Group> = context
        .iter()
        .map(|row| Group {
            label: row.notebook.clone(),
            limit: Some(row.raw_bytes.div_ceil(4) as f64),
            ours: Some(row.ours.tokens as f64),
            peer: row.peer.map(|peer| peer.tokens as f64),
        })
        .collect();

    let folder = tempfile::tempdir()?;
    let path = folder.path().join("chart.png");
    let height = 160 + 42 * (latency.len() + tokens.len()) as u32;
    {
        let root = BitMapBackend::new(&path, (1500, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let split = 60 + 42 * latency.len() as u32 + 40;
        let (top, bottom) = root.split_vertically(split);
        panel(
            &top,
            "Median latency, ms (log scale): limit, jupyter-mcp, datalayer jupyter-mcp-server",
            "ms",
            &latency,
            ("limit", "jupyter-mcp", "datalayer"),
        )?;
        panel(
            &bottom,
            "Context cost of reading every cell with its outputs, tokens (log scale)",
            "tokens",
            &tokens,
            ("raw output JSON", "jupyter-mcp", "datalayer"),
        )?;
        root.present()?;
    }
    Ok(std::fs::read(&path)?)
}

fn time_value(figure: &Figure) -> Option<f64> {
    figure.is_time().then(|| figure.value()).flatten()
}

/// A row name without its parenthesised details and markdown.
fn short_label(name: &str) -> String {
    let plain = name.replace('`', "");
    let head = plain.split(" (").next().unwrap_or(&plain).to_owned();
    if head.chars().count() > 58 {
        format!("{}…", head.chars().take(57).collect::<String>())
    } else {
        head
    }
}

fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    groups: &[Group],
    names: (&str, &str, &str),
) -> Result<()> {
    if groups.is_empty() {
        return Ok(());
    }
    let values = groups
        .iter()
        .flat_map(|group| [group.limit, group.ours, group.peer])
        .flatten()
        .filter(|value| *value > 0.0);
    let (low, high) = values.fold((f64::MAX, f64::MIN), |(low, high), value| {
        (low.min(value), high.max(value))
    });
    let low = 10f64.powf(low.log10().floor()).max(1e-3);
    let high = 10f64.powf(high.log10().ceil() + 0.3);
    let slots = groups.len() as i32 * 4;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .set_label_area_size(LabelAreaPosition::Left, 430)
        .set_label_area_size(LabelAreaPosition::Bottom, 36)
        .build_cartesian_2d((low..high).log_scale(), 0..slots)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(slots as usize)
        .y_label_formatter(&|slot| {
            if slot.rem_euclid(4) == 2 {
                groups
                    .get((slots - 1 - slot) as usize / 4)
                    .map_or_else(String::new, |group| group.label.clone())
            } else {
                String::new()
            }
        })
        .x_desc(unit)
        .label_style(("sans-serif", 15))
        .draw()?;
    // Group `index` occupies slots from the top: limit, ours, peer, then a gap.
    let bar = |index: usize, offset: i32, value: f64| {
        let top = slots - (index as i32) * 4 - offset;
        [(low, top - 1), (value, top)]
    };
    let series = [
        (
            names.0,
            LIMIT,
            1,
            groups.iter().map(|group| group.limit).collect::<Vec<_>>(),
        ),
        (
            names.1,
            OURS,
            2,
            groups.iter().map(|group| group.ours).collect(),
        ),
        (
            names.2,
            PEER,
            3,
            groups.iter().map(|group| group.peer).collect(),
        ),
    ];
    for (name, color, offset, values) in series {
        let bars: Vec<_> = values
            .iter()
            .enumerate()
            .filter_map(|(index, value)| value.map(|value| (index, value)))
            .collect();
        chart
            .draw_series(
                bars.iter().map(|(index, value)| {
                    Rectangle::new(bar(*index, offset, *value), color.filled())
                }),
            )?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        chart.draw_series(bars.iter().map(|(index, value)| {
            let [_, (end, top)] = bar(*index, offset, *value);
            Text::new(
                format_value(*value),
                (end, top - 1),
                ("sans-serif", 13).into_font().color(&BLACK),
            )
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    Ok(())
}

fn format_value(value: f64) -> String {
    format!(" {}", rounded(value, 1.0))
}
