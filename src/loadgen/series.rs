//! A series of load runs: the same run repeated, each on a server started
//! afresh, and, when a baseline binary is given, alternated with the same
//! run against it; summarised per build as medians and ranges, with the
//! ratio of this build's medians to the baseline's.
//!
//! Why: on a shared or virtual machine one run's figures drift by a
//! quarter or more from the next run's, and whichever of two builds runs
//! second in a pair tends to look faster. Runs in the order this,
//! baseline, baseline, this, … put both builds in both places equally,
//! and medians over many runs are what a comparison can rest on.
//!
//! Owns: the order of the runs and their summary (pure, no I/O). Must
//! never: drop a run from the summary (an incomplete one is counted and
//! its figures kept), or compare builds it did not run in one series.

use super::Report;

/// Most runs of one build in a series.
pub const MAX_RUNS: u32 = 50;

/// Which server binary a run measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Build {
    /// The binary running `bench`.
    This,
    /// The binary given as `--baseline`.
    Baseline,
}

impl Build {
    pub fn name(self) -> &'static str {
        match self {
            Build::This => "this",
            Build::Baseline => "baseline",
        }
    }
}

/// The builds of a series' runs in the order they run: `runs` of this
/// build alone, or `runs` of each alternated as this, baseline, baseline,
/// this, and so on.
pub fn order(runs: u32, with_baseline: bool) -> Vec<Build> {
    if !with_baseline {
        return vec![Build::This; runs as usize];
    }
    (0..runs)
        .flat_map(|pair| {
            if pair % 2 == 0 {
                [Build::This, Build::Baseline]
            } else {
                [Build::Baseline, Build::This]
            }
        })
        .collect()
}

/// One run of a series.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    pub build: Build,
    pub report: Report,
}

/// The middle and the extremes of one figure over a build's runs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` when no run has the figure.
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut values: Vec<f64> = values.into_iter().collect();
        values.sort_by(f64::total_cmp);
        let (&min, &max) = (values.first()?, values.last()?);
        let middle = values.len() / 2;
        let median = if values.len() % 2 == 1 {
            values[middle]
        } else {
            (values[middle - 1] + values[middle]) / 2.0
        };
        Some(Self { median, min, max })
    }
}

/// The figures a series compares between builds, each as a `T`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Figures<T> {
    pub conversations_per_sec: T,
    pub p50_ms: T,
    pub p99_ms: T,
    pub server_cpu_ms_per_conversation: T,
    pub server_instructions_per_conversation: T,
}

impl<T> Figures<T> {
    /// Each figure made into a `T` by `figure`, given how to read it from a report.
    fn of(figure: impl Fn(fn(&Report) -> Option<f64>) -> T) -> Self {
        Self {
            conversations_per_sec: figure(|r| Some(r.conversations_per_sec)),
            p50_ms: figure(|r| Some(r.p50_ms)),
            p99_ms: figure(|r| Some(r.p99_ms)),
            server_cpu_ms_per_conversation: figure(|r| r.server_cpu_ms_per_conversation),
            server_instructions_per_conversation: figure(|r| {
                r.server_instructions_per_conversation
            }),
        }
    }

    /// Each figure paired with the same figure of `other`.
    fn zip<U, V>(&self, other: &Figures<U>, pair: impl Fn(&T, &U) -> V) -> Figures<V> {
        Figures {
            conversations_per_sec: pair(&self.conversations_per_sec, &other.conversations_per_sec),
            p50_ms: pair(&self.p50_ms, &other.p50_ms),
            p99_ms: pair(&self.p99_ms, &other.p99_ms),
            server_cpu_ms_per_conversation: pair(
                &self.server_cpu_ms_per_conversation,
                &other.server_cpu_ms_per_conversation,
            ),
            server_instructions_per_conversation: pair(
                &self.server_instructions_per_conversation,
                &other.server_instructions_per_conversation,
            ),
        }
    }
}

/// One build's runs, summarised.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BuildSummary {
    pub runs: usize,
    /// Conversations asked for that did not complete, over all its runs.
    pub incomplete: u64,
    #[serde(flatten)]
    pub figures: Figures<Option<Spread>>,
    pub client_cpu_ms_per_conversation: Option<Spread>,
}

/// This build's medians over the baseline's.
pub type Ratios = Figures<Option<f64>>;

/// A series' summary: this build's, the baseline's (if run) and the
/// ratios between them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    pub this: BuildSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BuildSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Ratios>,
}

/// Summarises `runs` per build.
pub fn summarise(runs: &[Run]) -> Summary {
    let this = build_summary(runs, Build::This);
    let baseline = runs
        .iter()
        .any(|run| run.build == Build::Baseline)
        .then(|| build_summary(runs, Build::Baseline));
    let ratio = baseline.as_ref().map(|base| {
        this.figures
            .zip(&base.figures, |&this, &base| ratio(this, base))
    });
    Summary {
        this,
        baseline,
        ratio,
    }
}

fn build_summary(runs: &[Run], build: Build) -> BuildSummary {
    let reports: Vec<&Report> = runs
        .iter()
        .filter(|run| run.build == build)
        .map(|run| &run.report)
        .collect();
    let spread =
        |figure: fn(&Report) -> Option<f64>| Spread::of(reports.iter().filter_map(|r| figure(r)));
    BuildSummary {
        runs: reports.len(),
        incomplete: reports.iter().map(|r| r.incomplete()).sum(),
        figures: Figures::of(spread),
        client_cpu_ms_per_conversation: spread(|r| r.client_cpu_ms_per_conversation),
    }
}

fn ratio(this: Option<Spread>, baseline: Option<Spread>) -> Option<f64> {
    let (this, baseline) = (this?.median, baseline?.median);
    (baseline > 0.0).then(|| this / baseline)
}

impl Run {
    /// One line: which build, and its main figures.
    pub fn line(&self, number: usize) -> String {
        let r = &self.report;
        let cpu = r
            .server_cpu_ms_per_conversation
            .map_or_else(|| "n/a".to_owned(), |cpu| format!("{cpu:.3} ms"));
        let instructions = r
            .server_instructions_per_conversation
            .map_or_else(String::new, |count| {
                format!("  instructions {:.1}k", count / 1e3)
            });
        let transactions = r
            .database_transactions_per_conversation
            .map_or_else(String::new, |per| {
                format!("  database transactions {per:.2}/conversation")
            });
        format!(
            "run {number:>3} {build:<8}  {done}/{requested} conversations  {rate:>8.1}/s  p50 {p50:>7.2} ms  p99 {p99:>7.2} ms  server CPU {cpu}{instructions}{transactions}  syncs over {slow_ms} ms: {slow}  tail {tail}",
            build = self.build.name(),
            done = r.conversations,
            requested = r.requested,
            rate = r.conversations_per_sec,
            p50 = r.p50_ms,
            p99 = r.p99_ms,
            slow_ms = (super::SLOW_SYNC_SECS * 1e3).round(),
            slow = r
                .server_syncs
                .map_or_else(|| "n/a".to_owned(), |syncs| syncs.brief()),
            tail = r.tail.map_or_else(|| "n/a".to_owned(), |tail| tail.brief()),
        )
    }
}

impl Summary {
    /// The summary as people read it: per build, each figure's median and
    /// range; then the ratios.
    pub fn human(&self) -> String {
        // Instructions only when a run counted them (`--instructions`).
        let counted = self
            .this
            .figures
            .server_instructions_per_conversation
            .is_some()
            || self
                .baseline
                .as_ref()
                .is_some_and(|b| b.figures.server_instructions_per_conversation.is_some());
        let mut text = String::from(
            "build     runs  conversations/s (median, range)  p50 ms                 p99 ms                 server CPU ms/conversation",
        );
        if counted {
            text.push_str("  server instructions/conversation, thousands");
        }
        text.push('\n');
        let mut row = |name: &str, summary: &BuildSummary| {
            let thousands = summary
                .figures
                .server_instructions_per_conversation
                .map(|s| Spread {
                    median: s.median / 1e3,
                    min: s.min / 1e3,
                    max: s.max / 1e3,
                });
            text.push_str(&format!(
                "{name:<8}  {runs:>4}  {rate:<31}  {p50:<21}  {p99:<21}  {cpu}",
                runs = summary.runs,
                rate = spread_text(summary.figures.conversations_per_sec, 0),
                p50 = spread_text(summary.figures.p50_ms, 1),
                p99 = spread_text(summary.figures.p99_ms, 1),
                cpu = spread_text(summary.figures.server_cpu_ms_per_conversation, 3),
            ));
            if counted {
                text.push_str(&format!("  {}", spread_text(thousands, 1)));
            }
            text.push('\n');
            if summary.incomplete > 0 {
                text.push_str(&format!(
                    "          ({} conversations did not complete)\n",
                    summary.incomplete
                ));
            }
        };
        row("this", &self.this);
        if let Some(baseline) = &self.baseline {
            row("baseline", baseline);
        }
        if let Some(ratio) = &self.ratio {
            let show =
                |value: Option<f64>| value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"));
            text.push_str(&format!(
                "this / baseline (medians): conversations/s {}  p50 {}  p99 {}  server CPU {}",
                show(ratio.conversations_per_sec),
                show(ratio.p50_ms),
                show(ratio.p99_ms),
                show(ratio.server_cpu_ms_per_conversation),
            ));
            if counted {
                text.push_str(&format!(
                    "  server instructions {}",
                    show(ratio.server_instructions_per_conversation)
                ));
            }
            text.push('\n');
        }
        text
    }

    /// Conversations asked for that did not complete, in every build.
    pub fn incomplete(&self) -> u64 {
        self.this.incomplete + self.baseline.as_ref().map_or(0, |b| b.incomplete)
    }
}

fn spread_text(spread: Option<Spread>, decimals: usize) -> String {
    match spread {
        Some(s) => format!(
            "{:.d$} ({:.d$}–{:.d$})",
            s.median,
            s.min,
            s.max,
            d = decimals
        ),
        None => "n/a".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rate: f64, p99: f64, cpu: Option<f64>, completed: u64) -> Report {
        Report {
            door: "studio",
            concurrency: 1,
            requested: 10,
            conversations: completed,
            failed: 10 - completed,
            not_started: 0,
            warmup: 0,
            warmup_failed: 0,
            elapsed_secs: 1.0,
            conversations_per_sec: rate,
            p50_ms: p99 / 2.0,
            p99_ms: p99,
            p999_ms: p99,
            max_ms: p99,
            server_cpu_ms_per_conversation: cpu,
            server_cpu_secs: cpu,
            server_peak_rss_mib: None,
            server_instructions_per_conversation: cpu.map(|cpu| cpu * 1e6),
            client_cpu_ms_per_conversation: None,
            server_syncs: None,
            tail: None,
            database_transactions_per_conversation: None,
            errors: Vec::new(),
        }
    }

    fn run(build: Build, rate: f64, p99: f64, cpu: Option<f64>, completed: u64) -> Run {
        Run {
            build,
            report: report(rate, p99, cpu, completed),
        }
    }

    #[test]
    fn a_baseline_alternates_so_each_build_runs_first_and_second_equally() {
        use Build::{Baseline as B, This as T};
        assert_eq!(order(3, false), vec![T, T, T]);
        assert_eq!(order(4, true), vec![T, B, B, T, T, B, B, T]);
        assert_eq!(order(1, true), vec![T, B]);
        assert!(order(0, true).is_empty());
    }

    #[test]
    fn medians_ranges_and_ratios_are_per_build_and_keep_incomplete_runs() {
        let runs = vec![
            run(Build::This, 300.0, 90.0, Some(0.4), 10),
            run(Build::Baseline, 200.0, 120.0, Some(0.5), 10),
            run(Build::Baseline, 100.0, 100.0, None, 8),
            run(Build::This, 100.0, 70.0, Some(0.2), 10),
            run(Build::This, 200.0, 80.0, Some(0.3), 10),
        ];
        let summary = summarise(&runs);
        assert_eq!(summary.this.runs, 3);
        assert_eq!(
            summary.this.figures.conversations_per_sec,
            Some(Spread {
                median: 200.0,
                min: 100.0,
                max: 300.0
            })
        );
        let baseline = summary.baseline.as_ref().expect("baseline");
        assert_eq!(baseline.runs, 2);
        assert_eq!(baseline.incomplete, 2);
        // An even count's median is the mean of the middle two; a figure
        // a run lacks is left out of that figure only.
        assert_eq!(baseline.figures.p99_ms.map(|s| s.median), Some(110.0));
        assert_eq!(
            baseline
                .figures
                .server_cpu_ms_per_conversation
                .map(|s| s.median),
            Some(0.5)
        );
        let ratio = summary.ratio.as_ref().expect("ratio");
        assert_eq!(ratio.conversations_per_sec, Some(200.0 / 150.0));
        assert_eq!(ratio.server_cpu_ms_per_conversation, Some(0.3 / 0.5));
        assert_eq!(
            ratio.server_instructions_per_conversation,
            Some(0.3e6 / 0.5e6)
        );
        let human = summary.human();
        assert!(
            human.contains("server instructions/conversation, thousands"),
            "{human}"
        );
        assert!(human.contains("300.0 (200.0–400.0)"), "{human}");
        assert_eq!(summary.incomplete(), 2);
        assert!(summary.human().contains("this / baseline"));
    }

    #[test]
    fn a_series_without_a_baseline_has_no_ratio_and_no_figure_is_invented() {
        let runs = vec![run(Build::This, 100.0, 50.0, None, 10)];
        let summary = summarise(&runs);
        assert!(summary.baseline.is_none() && summary.ratio.is_none());
        assert_eq!(summary.this.figures.server_cpu_ms_per_conversation, None);
        assert_eq!(
            summary.this.figures.server_instructions_per_conversation,
            None
        );
        let human = summary.human();
        assert!(human.contains("n/a"), "{human}");
        assert!(!human.contains("instructions"), "{human}");
    }
}
