//! Understanding a question without a model: which indicator, places,
//! time, operation, level and chart it names, and whether it refers to an
//! earlier turn or card.
//!
//! Owns: the word lists and the phrase matcher. Pure: no I/O, no state,
//! no knowledge of frames. Must never: fail on any input; a word it does
//! not know is simply not used, and the planner decides what to say.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::data::{Dataset, Indicator, Level};
use super::words::{
    CHART_WORDS, FILLER, INDICATOR_WORDS, LEVEL_WORDS, NOW_PHRASES, OP_WORDS, OpWord,
    PLACE_PREPOSITIONS,
};

/// Longest phrase the matcher tries, in words.
const MAX_PHRASE_WORDS: usize = 5;
/// Earliest and latest number read as a year.
const MIN_YEAR: i32 = 1800;
const MAX_YEAR: i32 = 2200;
/// Largest N of "top N" honoured.
pub const MAX_RANK_N: usize = 50;
/// N of "top" with no number.
pub const DEFAULT_RANK_N: usize = 10;

/// What the question asks to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Operation {
    /// One value per place at one year.
    Value,
    Trend,
    Compare,
    Rank {
        top: bool,
        n: usize,
    },
    Total,
    Average,
    Share,
    Forecast {
        target: i32,
    },
}

impl Operation {
    /// Whether it reads across a level (every place with data).
    pub fn spans_a_level(self) -> bool {
        matches!(
            self,
            Operation::Rank { .. } | Operation::Total | Operation::Average
        )
    }
}

/// The time a question names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Time {
    #[default]
    Unspecified,
    Year(i32),
    Range(i32, i32),
    Since(i32),
}

/// Words that ask for figures up to today, with no year named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    /// One figure, the newest ("latest", "current", "today").
    Latest,
    /// Every year up to today ("until now", "so far", "to date").
    UpToNow,
}

/// The chart the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartKind {
    Line,
    Bar,
    Table,
    SingleValue,
}

impl ChartKind {
    pub const ALL: [ChartKind; 4] = [
        ChartKind::Line,
        ChartKind::Bar,
        ChartKind::Table,
        ChartKind::SingleValue,
    ];

    pub fn component_type(self) -> &'static str {
        match self {
            ChartKind::Line => "line_chart",
            ChartKind::Bar => "bar_chart",
            ChartKind::Table => "table",
            ChartKind::SingleValue => "single_value",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ChartKind::Line => "Line chart",
            ChartKind::Bar => "Bar chart",
            ChartKind::Table => "Table",
            ChartKind::SingleValue => "Single value",
        }
    }

    pub fn from_component_type(text: &str) -> Option<ChartKind> {
        ChartKind::ALL
            .into_iter()
            .find(|c| c.component_type() == text)
    }
}

/// A place phrase and the places it may name (several: ambiguous).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceMention {
    pub phrase: String,
    pub codes: Vec<String>,
}

/// An indicator phrase and the indicators it may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndicatorMention {
    pub phrase: String,
    pub indicators: Vec<Indicator>,
}

/// How the question leans on an earlier turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// "now do the same for Uganda", "what about Uganda?"
    SameAs,
    /// "the country I mentioned", "that country"
    MentionedPlace,
}

/// A requested card edit, read from the words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditWords {
    Rename(String),
    Keep(Vec<String>),
    Remove(Vec<String>),
}

/// Everything read from one text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Understanding {
    pub indicators: Vec<IndicatorMention>,
    pub places: Vec<PlaceMention>,
    pub time: Time,
    pub operation: Option<Operation>,
    pub level: Option<Level>,
    pub chart: Option<ChartKind>,
    pub reference: Option<Reference>,
    pub canvas_question: bool,
    pub edit: Option<EditWords>,
    /// Words no list knew, for an honest message.
    pub unknown: Vec<String>,
    /// An unknown word where a place would stand ("population of
    /// guernsey"): the question likely names a place the data lacks.
    pub unknown_place: Option<String>,
    /// The seed from Search that settled the indicator, if any.
    pub seed: Option<SeedSource>,
    /// Words asking for figures up to today ("latest", "until now").
    pub now: Option<Now>,
    /// The N of "top N" when it lay outside what a ranking shows
    /// (1 to [`MAX_RANK_N`]) and was moved into it.
    pub rank_asked: Option<usize>,
}

/// A dataset handed over from Search: its `spec_id` and its position
/// (from 1) in the turn's `seed_spec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedSource {
    pub spec_id: String,
    pub seed: usize,
}

impl Understanding {
    /// Whether anything data-like was understood.
    pub fn is_empty(&self) -> bool {
        self.indicators.is_empty()
            && self.places.is_empty()
            && self.operation.is_none()
            && self.level.is_none()
            && self.time == Time::Unspecified
            && self.reference.is_none()
    }
}

#[derive(Debug, Clone)]
enum Entry {
    Indicators(Vec<Indicator>),
    Places(Vec<String>),
    Level(Level),
    Chart(ChartKind),
    Op(OpWord),
    Skip,
}

/// Lower-cases and turns anything but letters and digits into spaces.
pub fn normalise(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect()
}

fn words(text: &str) -> Vec<String> {
    normalise(text)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn dictionary() -> &'static HashMap<String, Entry> {
    static DICT: OnceLock<HashMap<String, Entry>> = OnceLock::new();
    DICT.get_or_init(|| {
        let mut dict: HashMap<String, Entry> = HashMap::new();
        for place in &Dataset::bundled().places {
            let names = std::iter::once(&place.name).chain(&place.aliases);
            for name in names {
                let key = words(name).join(" ");
                if key.is_empty() || FILLER.contains(&key.as_str()) {
                    continue;
                }
                match dict.entry(key).or_insert_with(|| Entry::Places(Vec::new())) {
                    Entry::Places(codes) if !codes.contains(&place.code) => {
                        codes.push(place.code.clone())
                    }
                    _ => {}
                }
            }
        }
        for (word, indicators) in INDICATOR_WORDS {
            dict.insert((*word).to_owned(), Entry::Indicators(indicators.to_vec()));
        }
        for (word, level) in LEVEL_WORDS {
            dict.insert((*word).to_owned(), Entry::Level(*level));
        }
        for (word, chart) in CHART_WORDS {
            dict.insert((*word).to_owned(), Entry::Chart(*chart));
        }
        for (word, op) in OP_WORDS {
            dict.insert((*word).to_owned(), Entry::Op(*op));
        }
        for (phrase, _) in NOW_PHRASES {
            // Read by `now_words`; here they only stop "most" of "most
            // recent" from ranking and "today" from looking like a place.
            dict.insert((*phrase).to_owned(), Entry::Skip);
        }
        dict.insert("world".into(), Entry::Places(vec!["Earth".into()]));
        dict.insert("per".into(), Entry::Skip);
        dict
    })
}

fn number_word(word: &str) -> Option<usize> {
    const NUMBERS: [&str; 10] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    if let Ok(n) = word.parse::<usize>() {
        return Some(n);
    }
    NUMBERS.iter().position(|w| *w == word).map(|i| i + 1)
}

fn year_of(word: &str) -> Option<i32> {
    let year: i32 = word.parse().ok()?;
    (word.len() == 4 && (MIN_YEAR..=MAX_YEAR).contains(&year)).then_some(year)
}

/// Reads a text.
pub fn understand(text: &str) -> Understanding {
    let words = words(text);
    let joined = words.join(" ");
    let mut out = Understanding {
        canvas_question: joined.contains("canvas")
            && ["what", "show", "list", "which", "anything"]
                .iter()
                .any(|w| words.iter().any(|x| x == w)),
        reference: reference(&joined),
        now: now_words(&joined),
        edit: edit_words(text, &joined),
        ..Understanding::default()
    };
    let mut years: Vec<(usize, i32)> = Vec::new();
    let mut ops: Vec<(usize, OpWord)> = Vec::new();
    let mut rank_n = None;
    let dict = dictionary();
    let mut i = 0;
    while i < words.len() {
        if let Some(year) = year_of(&words[i]) {
            years.push((i, year));
            i += 1;
            continue;
        }
        let mut matched = 0;
        for len in (1..=MAX_PHRASE_WORDS.min(words.len() - i)).rev() {
            let phrase = words[i..i + len].join(" ");
            let Some(entry) = dict.get(&phrase) else {
                continue;
            };
            matched = len;
            match entry {
                Entry::Indicators(list) => push_indicator(&mut out, phrase, list),
                Entry::Places(codes) => {
                    if !out.places.iter().any(|p| p.codes == *codes) {
                        out.places.push(PlaceMention {
                            phrase,
                            codes: codes.clone(),
                        })
                    }
                }
                Entry::Level(level) => out.level = out.level.or(Some(*level)),
                Entry::Chart(chart) => out.chart = out.chart.or(Some(*chart)),
                Entry::Op(op) => ops.push((i, *op)),
                Entry::Skip => {}
            }
            break;
        }
        if matched == 0 {
            let word = &words[i];
            if let Some(n) = number_word(word) {
                rank_n = rank_n.or(Some(n));
            } else if !FILLER.contains(&word.as_str()) {
                let after_preposition = i
                    .checked_sub(1)
                    .is_some_and(|p| PLACE_PREPOSITIONS.contains(&words[p].as_str()));
                if after_preposition && out.unknown_place.is_none() {
                    out.unknown_place = Some(word.clone());
                }
                out.unknown.push(word.clone());
            }
            matched = 1;
        }
        i += matched;
    }
    out.time = time(&words, &years);
    out.operation = operation(&ops, rank_n, &out);
    if matches!(out.operation, Some(Operation::Rank { .. })) {
        out.rank_asked = rank_n.filter(|n| !(1..=MAX_RANK_N).contains(n));
    }
    out
}

/// Whether the words ask for figures up to today, and how.
fn now_words(joined: &str) -> Option<Now> {
    let padded = format!(" {joined} ");
    NOW_PHRASES
        .iter()
        .find(|(phrase, _)| padded.contains(&format!(" {phrase} ")))
        .map(|(_, now)| *now)
}

fn push_indicator(out: &mut Understanding, phrase: String, list: &[Indicator]) {
    let known = out
        .indicators
        .iter()
        .any(|m| m.indicators.iter().any(|i| list.contains(i)));
    if !known {
        out.indicators.push(IndicatorMention {
            phrase,
            indicators: list.to_vec(),
        });
    }
}

fn reference(joined: &str) -> Option<Reference> {
    const SAME: [&str; 6] = [
        "same for",
        "same thing for",
        "what about",
        "how about",
        "and for",
        "instead",
    ];
    const MENTIONED: [&str; 4] = [
        "i mentioned",
        "that country",
        "the same country",
        "same place",
    ];
    if MENTIONED.iter().any(|p| joined.contains(p)) {
        return Some(Reference::MentionedPlace);
    }
    SAME.iter()
        .any(|p| joined.contains(p) || joined.starts_with("and "))
        .then_some(Reference::SameAs)
}

fn time(words: &[String], years: &[(usize, i32)]) -> Time {
    let before = |at: usize| at.checked_sub(1).map(|i| words[i].as_str());
    match years {
        [] => Time::Unspecified,
        [(at, year)] => match before(*at) {
            Some("since" | "from" | "after") => Time::Since(*year),
            _ => Time::Year(*year),
        },
        [(_, a), .., (_, b)] => Time::Range((*a).min(*b), (*a).max(*b)),
    }
}

fn operation(
    ops: &[(usize, OpWord)],
    rank_n: Option<usize>,
    u: &Understanding,
) -> Option<Operation> {
    let n = rank_n.unwrap_or(DEFAULT_RANK_N).clamp(1, MAX_RANK_N);
    let has = |w: OpWord| ops.iter().any(|(_, o)| *o == w);
    if has(OpWord::Forecast) {
        let target = match u.time {
            Time::Year(y) | Time::Since(y) | Time::Range(_, y) => y,
            Time::Unspecified => 0,
        };
        return Some(Operation::Forecast { target });
    }
    if has(OpWord::Share) {
        return Some(Operation::Share);
    }
    if has(OpWord::Total) {
        return Some(Operation::Total);
    }
    if has(OpWord::Average) {
        return Some(Operation::Average);
    }
    // "Which countries have the most people" ranks; "the most populous
    // of Kenya and Uganda" compares the two named.
    let ranks = has(OpWord::Top) || has(OpWord::Bottom);
    if ranks && u.places.len() != 1 && (u.places.is_empty() || u.level.is_some()) {
        let top = !has(OpWord::Bottom);
        return Some(Operation::Rank { top, n });
    }
    if has(OpWord::Compare) || ranks {
        return Some(Operation::Compare);
    }
    if has(OpWord::Trend) {
        return Some(Operation::Trend);
    }
    None
}

fn after<'a>(text: &'a str, markers: &[&str]) -> Option<&'a str> {
    let lower = text.to_lowercase();
    markers.iter().find_map(|m| {
        lower
            .find(m)
            .and_then(|at| text.get(at + m.len()..))
            .map(|rest| rest.trim().trim_matches(|c| c == '"' || c == '\''))
    })
}

fn edit_words(text: &str, joined: &str) -> Option<EditWords> {
    if let Some(title) = after(
        text,
        &[
            "rename it to ",
            "rename to ",
            "call it ",
            "title it ",
            "retitle to ",
            "title: ",
        ],
    ) {
        let title = title.trim_end_matches(['.', '"', '\'']).trim();
        if !title.is_empty() {
            return Some(EditWords::Rename(title.to_owned()));
        }
    }
    let first = joined.split(' ').next().unwrap_or_default();
    let places = |rest: &str| -> Vec<String> {
        understand_places(rest)
            .into_iter()
            .flat_map(|m| m.codes)
            .collect()
    };
    match first {
        "only" | "just" | "keep" => Some(EditWords::Keep(places(joined))),
        "remove" | "drop" | "without" => Some(EditWords::Remove(places(joined))),
        _ => None,
    }
}

/// The place mentions of a text alone (no edit parsing, no recursion).
fn understand_places(text: &str) -> Vec<PlaceMention> {
    let words = words(text);
    let dict = dictionary();
    let mut found = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let mut step = 1;
        for len in (1..=MAX_PHRASE_WORDS.min(words.len() - i)).rev() {
            let phrase = words[i..i + len].join(" ");
            if let Some(Entry::Places(codes)) = dict.get(&phrase) {
                found.push(PlaceMention {
                    phrase,
                    codes: codes.clone(),
                });
                step = len;
                break;
            }
        }
        i += step;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(u: &Understanding) -> Vec<String> {
        u.places.iter().flat_map(|p| p.codes.clone()).collect()
    }

    #[test]
    fn a_trend_question() {
        let u = understand("Life expectancy in Kenya since 1990");
        assert_eq!(u.indicators[0].indicators, [Indicator::LifeExpectancy]);
        assert_eq!(codes(&u), ["KEN"]);
        assert_eq!(u.time, Time::Since(1990));
    }

    #[test]
    fn a_ranking_names_its_level_and_n() {
        let u = understand("Top 5 countries by GDP per capita in 2007");
        assert_eq!(u.operation, Some(Operation::Rank { top: true, n: 5 }));
        assert_eq!(u.level, Some(Level::Countries));
        assert_eq!(u.indicators[0].indicators, [Indicator::GdpPerCapita]);
        assert_eq!(u.time, Time::Year(2007));
        let u = understand("the three least populous continents");
        assert_eq!(u.operation, Some(Operation::Rank { top: false, n: 3 }));
    }

    #[test]
    fn georgia_and_crime_are_ambiguous() {
        let u = understand("crime in Georgia");
        assert_eq!(u.indicators[0].indicators.len(), 2);
        assert_eq!(u.places[0].codes.len(), 2);
    }

    #[test]
    fn aliases_ranges_and_references() {
        let u = understand("Compare the population of Russia and the UK from 1960 to 2000");
        assert_eq!(codes(&u), ["RUS", "GBR"]);
        assert_eq!(u.time, Time::Range(1960, 2000));
        assert_eq!(u.operation, Some(Operation::Compare));
        assert_eq!(
            understand("now do the same for Uganda").reference,
            Some(Reference::SameAs)
        );
        assert_eq!(
            understand("forecast Kenya's population to 2030").operation,
            Some(Operation::Forecast { target: 2030 })
        );
    }

    #[test]
    fn nonsense_is_understood_as_nothing() {
        for text in ["", "blorp zzz", "🙂🙂", "1234567", "what's on my canvas?"] {
            let u = understand(text);
            assert!(u.indicators.is_empty() && u.places.is_empty(), "{text}");
        }
        assert!(understand("What's on my canvas?").canvas_question);
    }

    #[test]
    fn an_unknown_word_where_a_place_stands_is_kept() {
        assert_eq!(
            understand("Population of Guernsey")
                .unknown_place
                .as_deref(),
            Some("guernsey")
        );
        assert_eq!(understand("Population of Kenya").unknown_place, None);
        assert_eq!(
            understand("How has the population changed?").unknown_place,
            None
        );
    }

    #[test]
    fn words_for_today_and_an_outsized_ranking_are_kept() {
        assert_eq!(
            understand("Latest life expectancy in Kenya").now,
            Some(Now::Latest)
        );
        assert_eq!(
            understand("Population of Kenya until today").now,
            Some(Now::UpToNow)
        );
        assert_eq!(understand("now do the same for Uganda").now, None);
        // "most recent" is a time, not a ranking, and "today" not a place.
        let recent = understand("most recent population of Kenya");
        assert_eq!((recent.now, recent.operation), (Some(Now::Latest), None));
        assert_eq!(
            understand("Population of Kenya today").unknown,
            Vec::<String>::new()
        );
        let big = understand("Top 100 countries by population");
        assert_eq!(
            big.operation,
            Some(Operation::Rank {
                top: true,
                n: MAX_RANK_N
            })
        );
        assert_eq!(big.rank_asked, Some(100));
        assert_eq!(understand("Top 5 countries by population").rank_asked, None);
    }

    #[test]
    fn edits_are_read() {
        assert_eq!(
            understand("rename it to Kenya's story").edit,
            Some(EditWords::Rename("Kenya's story".into()))
        );
        assert_eq!(
            understand("only Kenya").edit,
            Some(EditWords::Keep(vec!["KEN".into()]))
        );
    }
}
