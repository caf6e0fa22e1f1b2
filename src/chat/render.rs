//! How the chat shows a conversation: the screen it writes to, and every
//! Studio frame, card and canvas as text.
//!
//! Owns: the two screens (a terminal: Markdown styled, steps redrawn in
//! place, the message streaming on one line until it is whole; anything
//! else: each message, step result and card written once, Markdown read as
//! plain text), and the wording of frames, plan cards, cards and the
//! canvas. Must never: show what the frame does not say, or move the
//! cursor on a screen that is not a terminal.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::Value;
use termimad::MadSkin;

/// What the screen is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screen {
    /// A terminal: ANSI styles and redraws.
    Terminal,
    /// A pipe or a file (and the tests): plain lines, each written once.
    Plain,
}

/// Widest a redrawn line is, in characters (the streaming message's line
/// and a step's line are cut to it, so a redraw never wraps).
const REDRAWN_LINE_CHARS: usize = 100;

/// What is on the screen, for the parts drawn in place.
pub(super) struct View {
    screen: Screen,
    skin: MadSkin,
    /// Lines written so far.
    lines: usize,
    /// The message's text streamed so far and not yet shown whole.
    pending: String,
    /// A terminal's streaming line (no newline yet) is on screen.
    streaming_line: bool,
    /// Each step's line and the status shown for it, by step id.
    steps: BTreeMap<String, (usize, String)>,
}

impl View {
    pub(super) fn new(screen: Screen) -> Self {
        let skin = match screen {
            Screen::Terminal => MadSkin::default(),
            Screen::Plain => MadSkin::no_style(),
        };
        Self {
            screen,
            skin,
            lines: 0,
            pending: String::new(),
            streaming_line: false,
            steps: BTreeMap::new(),
        }
    }

    /// A new stream: its steps are its own.
    pub(super) fn new_stream(&mut self) {
        self.steps.clear();
    }

    /// Shows what streamed and was not shown yet (a stream ended).
    pub(super) fn finish(&mut self, out: &mut impl Write) -> io::Result<()> {
        self.settle(out)?;
        out.flush()
    }

    /// Writes whole lines.
    pub(super) fn say(&mut self, out: &mut impl Write, text: &str) -> io::Result<()> {
        self.settle(out)?;
        self.write_lines(out, text)
    }

    fn write_lines(&mut self, out: &mut impl Write, text: &str) -> io::Result<()> {
        let text = text.strip_suffix('\n').unwrap_or(text);
        writeln!(out, "{text}")?;
        self.lines += text.split('\n').count();
        out.flush()
    }

    /// Clears a terminal's streaming line and writes out the streamed
    /// text: what precedes anything else.
    fn settle(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.streaming_line {
            write!(out, "\r\x1b[2K")?;
            self.streaming_line = false;
        }
        if !self.pending.is_empty() {
            let text = std::mem::take(&mut self.pending);
            self.markdown(out, &text)?;
        }
        Ok(())
    }

    /// Writes Markdown (GitHub-flavored, delta 15) as the screen shows it.
    fn markdown(&mut self, out: &mut impl Write, text: &str) -> io::Result<()> {
        let width = match self.screen {
            Screen::Terminal => Some(usize::from(termimad::terminal_size().0).max(20)),
            Screen::Plain => None,
        };
        let rendered = self.skin.text(text, width).to_string();
        let trimmed: Vec<&str> = rendered.lines().map(str::trim_end).collect();
        self.write_lines(out, &trimmed.join("\n"))
    }

    /// A `message.delta`: streamed on one line of a terminal; kept until
    /// the message is whole (or something else is shown) on a plain one.
    pub(super) fn delta(&mut self, out: &mut impl Write, text: &str) -> io::Result<()> {
        self.pending.push_str(text);
        if self.screen == Screen::Terminal {
            let flat = self.pending.replace('\n', " ");
            let tail: String = {
                let chars: Vec<char> = flat.chars().collect();
                let from = chars.len().saturating_sub(REDRAWN_LINE_CHARS - 2);
                chars[from..].iter().collect()
            };
            write!(out, "\r\x1b[2K\x1b[2m… {tail}\x1b[0m")?;
            self.streaming_line = true;
            out.flush()?;
        }
        Ok(())
    }

    /// A `message.complete`: the whole message, in place of its deltas
    /// (an empty one takes them back, as the model agent's withdrawal of
    /// a reply that broke off: nothing is written).
    pub(super) fn complete(&mut self, out: &mut impl Write, text: &str) -> io::Result<()> {
        self.pending.clear();
        self.settle(out)?;
        if text.is_empty() {
            return Ok(());
        }
        self.markdown(out, text)
    }

    /// An `activity.step`: one line per step, redrawn in place on a
    /// terminal; on a plain screen written once each time the step ends
    /// (complete or failed).
    pub(super) fn step(&mut self, out: &mut impl Write, frame: &Value) -> io::Result<()> {
        let status = frame["status"].as_str().unwrap_or("running").to_owned();
        let id = frame["step_id"].to_string();
        let line = step_line(frame);
        let shown = self.steps.get(&id).cloned();
        if shown.as_ref().is_some_and(|(_, was)| *was == status) {
            return Ok(());
        }
        self.settle(out)?;
        match (self.screen, shown) {
            (Screen::Terminal, Some((at, _))) => {
                let up = self.lines - at;
                write!(out, "\x1b[{up}A\r\x1b[2K{line}\x1b[{up}B\r")?;
                out.flush()?;
                self.steps.insert(id, (at, status));
            }
            (Screen::Terminal, None) => {
                self.steps.insert(id, (self.lines, status));
                self.write_lines(out, &line)?;
            }
            (Screen::Plain, _) if status == "running" => {}
            (Screen::Plain, _) => {
                self.steps.insert(id, (self.lines, status));
                self.write_lines(out, &line)?;
            }
        }
        Ok(())
    }
}

fn cut(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

fn step_line(frame: &Value) -> String {
    let text = |key: &str| frame[key].as_str().unwrap_or_default();
    let (mark, detail) = match frame["status"].as_str() {
        Some("complete") => ("✓", String::new()),
        Some("failed") => ("✗", format!(": {}", text("detail"))),
        _ => ("⋯", String::new()),
    };
    cut(
        &format!("  {mark} {}{detail}", text("label")),
        REDRAWN_LINE_CHARS,
    )
}

/// The plan card's lines.
pub(super) fn plan_lines(frame: &Value) -> Vec<String> {
    let mut lines = vec![format!(
        "\nPlan, version {}: {}",
        frame["version"],
        frame["summary"].as_str().unwrap_or("")
    )];
    for (n, step) in frame["steps"].as_array().into_iter().flatten().enumerate() {
        let star = if step["gives_answer"] == true {
            " ★"
        } else {
            ""
        };
        let label = step["label"].as_str().unwrap_or_default();
        lines.push(format!("  {}. {label}{star}", n + 1));
    }
    for (row, decision) in frame["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let options: Vec<String> = decision["options"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(n, o)| format!("{} {}", n + 1, o["label"].as_str().unwrap_or_default()))
            .collect();
        lines.push(format!(
            "  [{}] {}: {} (options: {})",
            row + 1,
            decision["question"].as_str().unwrap_or_default(),
            decision["chosen"].as_str().unwrap_or_default(),
            options.join(", ")
        ));
    }
    let failed = &frame["switch_failed"];
    if let Some(reason) = failed["reason"].as_str() {
        if failed["code"] == "switch_cancelled" {
            lines.push(format!("  ({reason})"));
        } else {
            lines.push(format!("  The switch did not apply: {reason}"));
        }
    }
    for caveat in frame["caveats"].as_array().into_iter().flatten() {
        lines.push(format!("  note: {}", caveat.as_str().unwrap_or_default()));
    }
    lines
}

/// A card's lines: its title and type, headline and body.
pub(super) fn card_head(frame: &Value) -> Vec<String> {
    let mut lines = vec![format!(
        "  ▣ {} ({})",
        frame["title"].as_str().unwrap_or_default(),
        frame["type"].as_str().unwrap_or("revised")
    )];
    if let Some(headline) = frame["fact_summary"]["headline"].as_str() {
        lines.push(format!("    {headline}"));
    }
    lines.extend(
        card_lines(&frame["payload"]["component"])
            .into_iter()
            .map(|line| format!("    {line}")),
    );
    lines
}

/// The canvas's lines.
pub(super) fn canvas_lines(canvas: Option<&Value>) -> Vec<String> {
    let blocks = canvas
        .and_then(|c| c["blocks"].as_array())
        .cloned()
        .unwrap_or_default();
    if blocks.is_empty() {
        return vec!["The canvas is empty.".to_owned()];
    }
    blocks
        .iter()
        .enumerate()
        .map(|(n, block)| {
            let pin = if block["pinned"] == true {
                " (pinned)"
            } else {
                ""
            };
            format!(
                "  {}. {} [{}]{pin}",
                n + 1,
                block["title"].as_str().unwrap_or_default(),
                block["type"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// An error frame's line.
pub(super) fn error_line(error: &Value) -> String {
    let mut line = format!(
        "error ({}): {} [{}]",
        error["code"].as_str().unwrap_or("?"),
        error["detail"].as_str().unwrap_or_default(),
        error["retry"].as_str().unwrap_or_default()
    );
    if let Some(fix) = error["fix"].as_str() {
        line.push_str(&format!(" fix: {fix}"));
    }
    line
}

/// Rows of a table card shown, at most.
const CARD_ROWS_SHOWN: usize = 8;
/// Points of a sparkline, at most (longer series are sampled evenly).
const SPARKLINE_POINTS: usize = 40;
/// Width of the longest bar of a bar card, in characters.
const BAR_WIDTH_CHARS: f64 = 24.0;

/// A card's body as a few lines of text: sparklines for series, bars for
/// points, the first rows of a table, or the single value.
pub(super) fn card_lines(component: &Value) -> Vec<String> {
    // Integers (years) as they are; measured values grouped or rounded.
    let number = |v: &Value| match v {
        Value::Number(n) if n.is_f64() => v.as_f64().map_or_else(|| v.to_string(), short_number),
        _ => v.to_string(),
    };
    if let Some(series) = component["series"].as_array() {
        return series
            .iter()
            .map(|line| {
                let points = line["points"].as_array().map_or(&[][..], Vec::as_slice);
                let values: Vec<f64> = points.iter().filter_map(|p| p[1].as_f64()).collect();
                let span = match (points.first(), points.last()) {
                    (Some(first), Some(last)) => format!("{}–{}", first[0], last[0]),
                    _ => String::new(),
                };
                let label = line["label"].as_str().unwrap_or_default();
                format!("{label}  {}  {span}", sparkline(&values))
            })
            .collect();
    }
    if let Some(points) = component["points"].as_array() {
        let top = points
            .iter()
            .filter_map(|p| p[1].as_f64())
            .fold(0.0, f64::max);
        return points
            .iter()
            .take(CARD_ROWS_SHOWN)
            .map(|p| {
                let value = p[1].as_f64().unwrap_or(0.0);
                let width = if top > 0.0 {
                    (value / top * BAR_WIDTH_CHARS).round()
                } else {
                    0.0
                };
                let bar = "█".repeat(width.max(0.0) as usize);
                format!(
                    "{:<20} {bar} {}",
                    p[0].as_str().unwrap_or_default(),
                    number(&p[1])
                )
            })
            .chain(more(points.len()))
            .collect();
    }
    if let Some(rows) = component["rows"].as_array() {
        return rows
            .iter()
            .take(CARD_ROWS_SHOWN)
            .map(|row| {
                let cells: Vec<String> = row
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|cell| cell.as_str().map_or_else(|| number(cell), str::to_owned))
                    .collect();
                cells.join("  ")
            })
            .chain(more(rows.len()))
            .collect();
    }
    match (component.get("value"), component["period"].as_str()) {
        (Some(value), Some(period)) => vec![format!("{} ({period})", number(value))],
        _ => Vec::new(),
    }
}

fn more(shown_of: usize) -> Option<String> {
    (shown_of > CARD_ROWS_SHOWN).then(|| format!("… {} more", shown_of - CARD_ROWS_SHOWN))
}

/// "170,901,148", "82.61": whole numbers grouped, others to two places.
fn short_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        let digits = format!("{}", value.abs() as u64);
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        let sign = if value < 0.0 { "-" } else { "" };
        format!("{sign}{grouped}")
    } else {
        format!("{value:.2}")
    }
}

/// ▁▂▃▄▅▆▇█ from the lowest to the highest value.
fn sparkline(values: &[f64]) -> String {
    const TICKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let step = values.len().div_ceil(SPARKLINE_POINTS).max(1);
    let sampled: Vec<f64> = values.iter().step_by(step).copied().collect();
    let low = sampled.iter().copied().fold(f64::INFINITY, f64::min);
    let high = sampled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    sampled
        .iter()
        .map(|v| {
            let level = if high > low {
                (v - low) / (high - low) * 7.0
            } else {
                3.0
            };
            TICKS[(level.round() as usize).min(7)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cards_read_as_sparklines_bars_rows_and_values() {
        let line = json!({"series": [{"label": "Kenya", "points": [[2000, 1.0], [2001, 2.0], [2002, 8.0]]}]});
        assert_eq!(card_lines(&line), ["Kenya  ▁▂█  2000–2002"]);
        let bars = json!({"points": [["Japan", 82.5], ["Chad", 41.25]]});
        let lines = card_lines(&bars);
        assert!(
            lines[0].ends_with(&format!("{} 82.50", "█".repeat(24))),
            "{lines:?}"
        );
        assert!(lines[1].contains(&format!("{} 41.25", "█".repeat(12))));
        let rows: Vec<Value> = (0..10).map(|y| json!(["Peru", 2000 + y, 1000.0])).collect();
        let table = card_lines(&json!({"rows": rows}));
        assert_eq!(table[0], "Peru  2000  1,000");
        assert_eq!(table.last().map(String::as_str), Some("… 2 more"));
        assert_eq!(
            card_lines(&json!({"value": 5.5, "period": "2007"})),
            ["5.50 (2007)"]
        );
    }

    fn step(status: &str) -> Value {
        json!({"event": "activity.step", "step_id": "step-1", "status": status, "label": "Fetch"})
    }

    #[test]
    fn a_plain_screen_shows_markdown_as_text_and_each_step_once() {
        let mut out = Vec::new();
        let mut view = View::new(Screen::Plain);
        view.delta(&mut out, "Looking ").unwrap();
        view.delta(&mut out, "it up.").unwrap();
        view.step(&mut out, &step("running")).unwrap();
        view.step(&mut out, &step("complete")).unwrap();
        view.step(&mut out, &step("complete")).unwrap();
        view.complete(&mut out, "The value **rose**\n\n- from 1\n- to 2")
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "Looking it up.\n  ✓ Fetch\nThe value rose\n\n• from 1\n• to 2\n"
        );
    }

    #[test]
    fn an_empty_complete_takes_back_the_streamed_text() {
        for screen in [Screen::Plain, Screen::Terminal] {
            let mut out = Vec::new();
            let mut view = View::new(screen);
            view.delta(&mut out, "Half an").unwrap();
            view.complete(&mut out, "").unwrap();
            view.delta(&mut out, "Whole.").unwrap();
            view.complete(&mut out, "Whole.").unwrap();
            let text = String::from_utf8(out).unwrap();
            let shown = text.rsplit('\r').next().unwrap_or_default();
            assert!(shown.ends_with("Whole.\n"), "{text:?}");
            assert_eq!(text.matches("Whole.\n").count(), 1, "{text:?}");
            assert!(!text.contains("Half an\n"), "{text:?}");
        }
    }

    #[test]
    fn a_terminal_redraws_a_step_in_place_and_streams_the_message_on_one_line() {
        let mut out = Vec::new();
        let mut view = View::new(Screen::Terminal);
        view.step(&mut out, &step("running")).unwrap();
        view.say(&mut out, "another line").unwrap();
        view.step(&mut out, &step("complete")).unwrap();
        view.delta(&mut out, "Work").unwrap();
        view.delta(&mut out, "ing").unwrap();
        view.complete(&mut out, "Done.").unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("  ⋯ Fetch\nanother line\n"), "{text:?}");
        // Up two lines, the step redrawn, and back.
        assert!(
            text.contains("\x1b[2A\r\x1b[2K  ✓ Fetch\x1b[2B\r"),
            "{text:?}"
        );
        assert!(
            text.contains("\r\x1b[2K\x1b[2m… Working\x1b[0m"),
            "{text:?}"
        );
        assert_eq!(text.matches("  ✓ Fetch").count(), 1);
    }
}
