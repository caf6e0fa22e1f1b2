//! `ledgerwire chat`: a terminal client for people. It reads questions,
//! shows the answer as readable text (messages, the plan card, steps,
//! cards, the canvas) and asks for the decision on a plan and the answers
//! to clarifying questions, over one of two transports: the Studio's
//! HTTP/SSE routes (`chat::sse`) or Statewire's `harness-sdk` over
//! WebSocket (`chat::statewire`, `--statewire`).
//!
//! Owns: the session (config, errors, the question loop), the rendering
//! of Studio frames (messages, plan card, steps, cards, suggestions,
//! errors, the canvas) and the prompts that turn a pause into an
//! `interrupt.response` body, shared by both transports.
//! Must never: hold conversation state the server does not send (what it
//! shows is what the frames and documents say), or talk to the server
//! itself (the transports do).

mod sse;
mod statewire;

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

pub use statewire::QUIET_LIMIT_SECS;

/// Most reconnects to one dropped stream (or attach) before giving up.
pub const MAX_RECONNECTS: u32 = 5;

/// How the chat reaches the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// The Studio's routes: `POST /api/studio/turn|interrupt` answer SSE
    /// streams, and `/api/studio/stream` reconnects.
    #[default]
    Sse,
    /// `harness-sdk` over WebSocket at `/threads/<conversation>/ws`: the
    /// conversation is read from its documents.
    Statewire,
}

/// Where and as whom the client talks.
#[derive(Clone, Debug)]
pub struct ChatConfig {
    /// The server's base URL, e.g. `http://127.0.0.1:8080` (the Statewire
    /// transport attaches to the same host with `ws://`).
    pub url: String,
    pub token: String,
    pub conversation: String,
    pub transport: Transport,
}

/// Why the chat stopped.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("cannot reach {url}: {source}")]
    Http { url: String, source: reqwest::Error },
    #[error("the server refused: {0}")]
    Refused(String),
    #[error("terminal I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("--url {0:?} is not an http:// or https:// URL; pass the server's base URL")]
    Url(String),
    #[error("cannot attach to {url}: {detail}")]
    Attach { url: String, detail: String },
    #[error("the Statewire attach failed: {0}")]
    Statewire(String),
}

/// How a stream ended.
enum Ending {
    /// A pause: the frame that asks.
    Pause(Value),
    /// `done` or a stream-fatal error.
    Closed,
}

/// The connection a session talks over.
enum Link {
    Sse(reqwest::Client),
    Statewire(Box<statewire::Attach>),
}

/// The chat session.
pub struct Chat<R, W> {
    config: ChatConfig,
    input: R,
    out: W,
    /// The newest canvas the server sent.
    canvas: Option<Value>,
}

impl<R: AsyncBufRead + Unpin, W: Write> Chat<R, W> {
    pub fn new(config: ChatConfig, input: R, out: W) -> Self {
        Self {
            config,
            input,
            out,
            canvas: None,
        }
    }

    /// Reads questions until the input ends (or `/quit`).
    pub async fn run(mut self) -> Result<(), ChatError> {
        let mut link = match self.config.transport {
            Transport::Sse => Link::Sse(reqwest::Client::new()),
            Transport::Statewire => {
                Link::Statewire(Box::new(statewire::Attach::open(&self.config).await?))
            }
        };
        writeln!(
            self.out,
            "Conversation {}. Ask a question; /canvas shows the canvas, /quit leaves.",
            self.config.conversation
        )?;
        while let Some(line) = self.prompt("you> ").await? {
            match line.as_str() {
                "" => continue,
                "/quit" => break,
                "/canvas" => {
                    if let Link::Statewire(attach) = &mut link {
                        self.catch_up_statewire(attach).await?;
                    }
                    self.show_canvas()?;
                }
                question => match &mut link {
                    Link::Sse(http) => self.converse_sse(http, question).await?,
                    Link::Statewire(attach) => self.converse_statewire(attach, question).await?,
                },
            }
        }
        if let Link::Statewire(attach) = link {
            attach.close().await;
        }
        Ok(())
    }

    async fn prompt(&mut self, text: &str) -> Result<Option<String>, ChatError> {
        write!(self.out, "{text}")?;
        self.out.flush()?;
        let mut line = String::new();
        if self.input.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        Ok(Some(line.trim().to_owned()))
    }

    /// Prints one frame; returns how the stream ends if this frame ends it.
    fn show(&mut self, frame: &Value) -> Result<Option<Ending>, ChatError> {
        let text = |key: &str| frame[key].as_str().unwrap_or_default().to_owned();
        match frame["event"].as_str().unwrap_or_default() {
            "message.delta" => writeln!(self.out, "… {}", text("text"))?,
            "message.complete" => writeln!(self.out, "\n{}\n", text("text"))?,
            "activity.step" => {
                let (mark, detail) = match frame["status"].as_str() {
                    Some("complete") => ("✓", String::new()),
                    Some("failed") => ("✗", format!(": {}", text("detail"))),
                    _ => ("⋯", String::new()),
                };
                writeln!(self.out, "  {mark} {}{detail}", text("label"))?;
            }
            "plan.proposed" => {
                self.show_plan(frame)?;
                return Ok(Some(Ending::Pause(frame.clone())));
            }
            "elicitation.request" => return Ok(Some(Ending::Pause(frame.clone()))),
            "plan.versioned" => {
                writeln!(self.out, "(the plan changed: version {})", frame["version"])?
            }
            "plan.approved" => writeln!(self.out, "Approved: {}", text("title"))?,
            "component.created" | "component.revised" => self.show_card(frame)?,
            "composition.updated" => {
                self.canvas = Some(frame["composition"].clone());
                let blocks = frame["composition"]["blocks"]
                    .as_array()
                    .map_or(0, Vec::len);
                writeln!(self.out, "  (canvas: {blocks} card(s))")?;
            }
            "suggestions" => {
                let chips: Vec<&str> = frame["suggestions"]
                    .as_array()
                    .map(|s| s.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !chips.is_empty() {
                    writeln!(self.out, "Try: {}", chips.join(" | "))?;
                }
            }
            "error" => {
                let error = &frame["error"];
                writeln!(
                    self.out,
                    "error ({}): {} [{}]",
                    error["code"].as_str().unwrap_or("?"),
                    error["detail"].as_str().unwrap_or_default(),
                    error["retry"].as_str().unwrap_or_default()
                )?;
                return Ok(Some(Ending::Closed));
            }
            "done" => {
                if !frame["composition"].is_null() {
                    self.canvas = Some(frame["composition"].clone());
                }
                return Ok(Some(Ending::Closed));
            }
            _ => {}
        }
        Ok(None)
    }

    fn show_plan(&mut self, frame: &Value) -> Result<(), ChatError> {
        writeln!(
            self.out,
            "\nPlan, version {}: {}",
            frame["version"],
            frame["summary"].as_str().unwrap_or("")
        )?;
        for (n, step) in frame["steps"].as_array().into_iter().flatten().enumerate() {
            let star = if step["gives_answer"] == true {
                " ★"
            } else {
                ""
            };
            writeln!(
                self.out,
                "  {}. {}{star}",
                n + 1,
                step["label"].as_str().unwrap_or_default()
            )?;
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
            writeln!(
                self.out,
                "  [{}] {}: {} (options: {})",
                row + 1,
                decision["question"].as_str().unwrap_or_default(),
                decision["chosen"].as_str().unwrap_or_default(),
                options.join(", ")
            )?;
        }
        let failed = &frame["switch_failed"];
        if let Some(reason) = failed["reason"].as_str() {
            if failed["code"] == "switch_cancelled" {
                writeln!(self.out, "  ({reason})")?;
            } else {
                writeln!(self.out, "  The switch did not apply: {reason}")?;
            }
        }
        for caveat in frame["caveats"].as_array().into_iter().flatten() {
            writeln!(self.out, "  note: {}", caveat.as_str().unwrap_or_default())?;
        }
        Ok(())
    }

    fn show_card(&mut self, frame: &Value) -> Result<(), ChatError> {
        writeln!(
            self.out,
            "  ▣ {} ({})",
            frame["title"].as_str().unwrap_or_default(),
            frame["type"].as_str().unwrap_or("revised")
        )?;
        if let Some(headline) = frame["fact_summary"]["headline"].as_str() {
            writeln!(self.out, "    {headline}")?;
        }
        for line in card_lines(&frame["payload"]["component"]) {
            writeln!(self.out, "    {line}")?;
        }
        Ok(())
    }

    fn show_canvas(&mut self) -> Result<(), ChatError> {
        let blocks = self
            .canvas
            .as_ref()
            .and_then(|c| c["blocks"].as_array().cloned())
            .unwrap_or_default();
        if blocks.is_empty() {
            writeln!(self.out, "The canvas is empty.")?;
        }
        for (n, block) in blocks.iter().enumerate() {
            let pin = if block["pinned"] == true {
                " (pinned)"
            } else {
                ""
            };
            writeln!(
                self.out,
                "  {}. {} [{}]{pin}",
                n + 1,
                block["title"].as_str().unwrap_or_default(),
                block["type"].as_str().unwrap_or_default()
            )?;
        }
        Ok(())
    }

    /// Asks the user about a pause; `None` when the input ended.
    async fn decide(&mut self, frame: &Value) -> Result<Option<Value>, ChatError> {
        let base = json!({"kind": "interrupt.response",
            "conversation_id": self.config.conversation, "interrupt_id": frame["interrupt_id"]});
        if frame["event"] == "plan.proposed" {
            return self.decide_plan(frame, base).await;
        }
        self.answer_questions(frame, base).await
    }

    async fn decide_plan(
        &mut self,
        frame: &Value,
        mut base: Value,
    ) -> Result<Option<Value>, ChatError> {
        loop {
            let Some(line) = self
                .prompt("[a]pprove, [m]end <what to change>, [s]witch <row> <option>, [r]eject > ")
                .await?
            else {
                return Ok(None);
            };
            let (word, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            let decision = match word {
                "a" | "approve" => "approve",
                "r" | "reject" => "reject",
                "m" | "amend" if !rest.trim().is_empty() => {
                    base["payload"] = json!(rest.trim());
                    "amend"
                }
                "s" | "switch" => match switch_of(frame, rest) {
                    Some(switch) => {
                        base["switch"] = switch;
                        "amend"
                    }
                    None => continue,
                },
                _ => continue,
            };
            base["decision"] = json!(decision);
            return Ok(Some(base));
        }
    }

    async fn answer_questions(
        &mut self,
        frame: &Value,
        mut base: Value,
    ) -> Result<Option<Value>, ChatError> {
        let mut answers = BTreeMap::new();
        for question in frame["questions"].as_array().into_iter().flatten() {
            writeln!(
                self.out,
                "\n{}",
                question["question"].as_str().unwrap_or_default()
            )?;
            let options: Vec<&Value> = question["options"]
                .as_array()
                .map(|o| o.iter().collect())
                .unwrap_or_default();
            for (n, option) in options.iter().enumerate() {
                let star = if option["recommended"] == true {
                    " (recommended)"
                } else {
                    ""
                };
                writeln!(
                    self.out,
                    "  {}. {}{star}",
                    n + 1,
                    option["label"].as_str().unwrap_or_default()
                )?;
            }
            let skippable = question["skippable"] == true;
            let free = question["allow_free_text"] == true;
            let answer = loop {
                let hint = match (free, skippable) {
                    (true, true) => "number, text or 'skip' > ",
                    (true, false) => "number or text > ",
                    (false, true) => "number or 'skip' > ",
                    (false, false) => "number > ",
                };
                let Some(line) = self.prompt(hint).await? else {
                    return Ok(None);
                };
                if line == "skip"
                    && frame["skippable"] == true
                    && !skippable
                    && frame["questions"].as_array().map_or(0, Vec::len) == 1
                {
                    base["decision"] = json!("skip");
                    return Ok(Some(base));
                }
                if line == "skip" && skippable {
                    break json!({"kind": "skipped"});
                }
                if let Some(option) = line
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| options.get(n.wrapping_sub(1)))
                {
                    break json!({"kind": "option", "option_id": option["id"]});
                }
                if free && !line.is_empty() {
                    break json!({"kind": "text", "text": line});
                }
            };
            answers.insert(
                question["id"].as_str().unwrap_or_default().to_owned(),
                answer,
            );
        }
        base["decision"] = json!("answer");
        base["answers"] = json!(answers);
        Ok(Some(base))
    }
}

/// `{choice_id, option_id}` for "<row> <option>", both numbered from 1 as
/// the plan card lists them.
fn switch_of(plan: &Value, words: &str) -> Option<Value> {
    let mut numbers = words.split_whitespace().map(|w| w.parse::<usize>().ok());
    let (row, option) = (numbers.next()??, numbers.next()??);
    let decision = plan["decisions"].as_array()?.get(row.checked_sub(1)?)?;
    let option = decision["options"]
        .as_array()?
        .get(option.checked_sub(1)?)?;
    Some(json!({"choice_id": decision["choice_id"], "option_id": option["option_id"]}))
}

/// Rows of a table card shown, at most.
const CARD_ROWS_SHOWN: usize = 8;
/// Points of a sparkline, at most (longer series are sampled evenly).
const SPARKLINE_POINTS: usize = 40;
/// Width of the longest bar of a bar card, in characters.
const BAR_WIDTH_CHARS: f64 = 24.0;

/// A card's body as a few lines of text: sparklines for series, bars for
/// points, the first rows of a table, or the single value.
fn card_lines(component: &Value) -> Vec<String> {
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
}
