//! The bundled dataset and the data service over it.
//!
//! Owns: the closed vocabularies of indicators, place types and place
//! levels; parsing the two CSV files under `data/` (embedded at compile
//! time, so `serve` reads no file); lookups of places and observations.
//! Must never: read files or the network at run time, or guess a value the
//! source does not hold (a missing year is reported as missing).

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

const PLACES_CSV: &str = include_str!("../../../../data/places.csv");
const SERIES_CSV: &str = include_str!("../../../../data/series.csv");

/// The indicators the dataset holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Indicator {
    LifeExpectancy,
    Population,
    GdpPerCapita,
    FertilityRate,
    ViolentCrimeRate,
    MurderRate,
    PovertyRate,
    HighSchoolGraduation,
}

/// Where an indicator's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// Short name for provenance lines.
    pub name: &'static str,
    /// The registry package and file it was extracted from.
    pub package: &'static str,
    pub licence: &'static str,
}

/// Life expectancy and population: yearly, 1964–2013.
pub const GAPMINDER_YEARLY: Source = Source {
    name: "Gapminder (via bokeh_sampledata's gapminder table)",
    package: "bokeh_sampledata 2026.1, bokeh_sampledata/_data/gapminder.csv.gz",
    licence: "CC BY 2.0 (Gapminder); package BSD-3-Clause",
};
/// GDP per capita: every five years, 1952–2007.
pub const GAPMINDER: Source = Source {
    name: "Gapminder (via plotly's gapminder table)",
    package: "plotly 7.1.0, plotly/package_data/datasets/gapminder.csv.gz",
    licence: "CC BY 4.0 (Gapminder); package MIT",
};
pub const WORLD_BANK: Source = Source {
    name: "World Bank World Development Indicators (via statsmodels)",
    package: "statsmodels 0.15.0, statsmodels/datasets/fertility/fertility.csv",
    licence: "World Bank terms of use (CC BY 4.0); package BSD-3-Clause",
};
pub const STATE_CRIME: Source = Source {
    name: "US Statistical Abstract 2009 (via statsmodels' statecrime)",
    package: "statsmodels 0.15.0, statsmodels/datasets/statecrime/statecrime.csv",
    licence: "public domain; package BSD-3-Clause",
};

impl Indicator {
    pub const ALL: [Indicator; 8] = [
        Indicator::LifeExpectancy,
        Indicator::Population,
        Indicator::GdpPerCapita,
        Indicator::FertilityRate,
        Indicator::ViolentCrimeRate,
        Indicator::MurderRate,
        Indicator::PovertyRate,
        Indicator::HighSchoolGraduation,
    ];

    /// The key used in `data/series.csv` and in plan args.
    pub fn key(self) -> &'static str {
        match self {
            Indicator::LifeExpectancy => "life_expectancy",
            Indicator::Population => "population",
            Indicator::GdpPerCapita => "gdp_per_capita",
            Indicator::FertilityRate => "fertility_rate",
            Indicator::ViolentCrimeRate => "violent_crime_rate",
            Indicator::MurderRate => "murder_rate",
            Indicator::PovertyRate => "poverty_rate",
            Indicator::HighSchoolGraduation => "high_school_graduation",
        }
    }

    pub fn from_key(key: &str) -> Option<Indicator> {
        Indicator::ALL.into_iter().find(|i| i.key() == key)
    }

    /// The name a sentence uses, lower case.
    pub fn name(self) -> &'static str {
        match self {
            Indicator::LifeExpectancy => "life expectancy",
            Indicator::Population => "population",
            Indicator::GdpPerCapita => "GDP per capita",
            Indicator::FertilityRate => "fertility rate",
            Indicator::ViolentCrimeRate => "violent crime rate",
            Indicator::MurderRate => "murder rate",
            Indicator::PovertyRate => "poverty rate",
            Indicator::HighSchoolGraduation => "high-school graduation rate",
        }
    }

    /// The unit values are in.
    pub fn unit(self) -> &'static str {
        match self {
            Indicator::LifeExpectancy => "years",
            Indicator::Population => "people",
            Indicator::GdpPerCapita => "international dollars (2005 prices)",
            Indicator::FertilityRate => "births per woman",
            Indicator::ViolentCrimeRate | Indicator::MurderRate => "per 100,000 people",
            Indicator::PovertyRate | Indicator::HighSchoolGraduation => "%",
        }
    }

    pub fn source(self) -> Source {
        match self {
            Indicator::LifeExpectancy | Indicator::Population => GAPMINDER_YEARLY,
            Indicator::GdpPerCapita => GAPMINDER,
            Indicator::FertilityRate => WORLD_BANK,
            _ => STATE_CRIME,
        }
    }

    /// Whether values of places add up (a total or a share makes sense).
    pub fn is_summable(self) -> bool {
        self == Indicator::Population
    }

    /// How aggregates of this indicator were computed, for caveats.
    pub fn aggregate_method(self) -> &'static str {
        if self.is_summable() {
            "sums of their countries"
        } else {
            "population-weighted means of their countries, computed by ledgerwire"
        }
    }
}

/// Data Commons-style place types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PlaceType {
    World,
    Continent,
    Country,
    AdministrativeArea1,
    EurostatNUTS1,
    WorldBankGroup,
}

impl PlaceType {
    fn parse(text: &str) -> Option<PlaceType> {
        Some(match text {
            "World" => PlaceType::World,
            "Continent" => PlaceType::Continent,
            "Country" => PlaceType::Country,
            "AdministrativeArea1" => PlaceType::AdministrativeArea1,
            "EurostatNUTS1" => PlaceType::EurostatNUTS1,
            "WorldBankGroup" => PlaceType::WorldBankGroup,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PlaceType::World => "World",
            PlaceType::Continent => "Continent",
            PlaceType::Country => "Country",
            PlaceType::AdministrativeArea1 => "AdministrativeArea1",
            PlaceType::EurostatNUTS1 => "EurostatNUTS1",
            PlaceType::WorldBankGroup => "WorldBankGroup",
        }
    }
}

/// The levels a question can rank or total over (delta 19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Countries,
    Continents,
    Subdivisions,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Countries, Level::Continents, Level::Subdivisions];

    pub fn plural(self) -> &'static str {
        match self {
            Level::Countries => "countries",
            Level::Continents => "continents",
            Level::Subdivisions => "first-level subdivisions",
        }
    }

    pub fn singular(self) -> &'static str {
        match self {
            Level::Countries => "a country",
            Level::Continents => "a continent",
            Level::Subdivisions => "a first-level subdivision",
        }
    }

    /// The type the `place_level` predicate tests.
    pub fn place_type(self) -> PlaceType {
        match self {
            Level::Countries => PlaceType::Country,
            Level::Continents => PlaceType::Continent,
            Level::Subdivisions => PlaceType::AdministrativeArea1,
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Level::Countries => "countries",
            Level::Continents => "continents",
            Level::Subdivisions => "subdivisions",
        }
    }

    pub fn from_key(key: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.key() == key)
    }
}

/// One place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub code: String,
    pub name: String,
    pub types: Vec<PlaceType>,
    pub parent: Option<String>,
    pub aliases: Vec<String>,
}

impl Place {
    fn has(&self, t: PlaceType) -> bool {
        self.types.contains(&t)
    }

    /// Whether the place sits at `level`: at each level its types name,
    /// except that a place with a Eurostat NUTS type is never a country
    /// (its figures sit inside its state's), and a NUTS 1 region is a
    /// first-level subdivision.
    pub fn is_at(&self, level: Level) -> bool {
        match level {
            Level::Countries => self.has(PlaceType::Country) && !self.has(PlaceType::EurostatNUTS1),
            Level::Continents => self.has(PlaceType::Continent),
            Level::Subdivisions => {
                self.has(PlaceType::AdministrativeArea1) || self.has(PlaceType::EurostatNUTS1)
            }
        }
    }
}

/// Observations of one indicator for one place, by year.
pub type Series = BTreeMap<i32, f64>;

/// The whole bundled dataset.
#[derive(Debug)]
pub struct Dataset {
    pub places: Vec<Place>,
    by_code: HashMap<String, usize>,
    series: HashMap<(Indicator, usize), Series>,
}

/// Why the embedded files could not be read (a build defect, tested).
#[derive(Debug, thiserror::Error)]
#[error("bundled data line {line}: {reason}")]
pub struct DataError {
    pub line: usize,
    pub reason: String,
}

/// Splits one CSV line, honouring double quotes (the files use no escapes
/// other than quoting a field that holds a comma).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

fn split_list(text: &str) -> Vec<String> {
    text.split(';')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Dataset {
    /// The bundled dataset, parsed once.
    pub fn bundled() -> &'static Dataset {
        static DATA: OnceLock<Dataset> = OnceLock::new();
        DATA.get_or_init(|| {
            Dataset::parse(PLACES_CSV, SERIES_CSV)
                .unwrap_or_else(|e| panic!("the bundled dataset is malformed: {e}"))
        })
    }

    pub fn parse(places_csv: &str, series_csv: &str) -> Result<Dataset, DataError> {
        let mut places = Vec::new();
        for (n, line) in places_csv.lines().enumerate().skip(1) {
            let f = csv_fields(line);
            let [code, name, types, parent, aliases] = f.as_slice() else {
                return Err(DataError {
                    line: n + 1,
                    reason: "expected 5 fields".into(),
                });
            };
            let types = types
                .split(';')
                .map(|t| {
                    PlaceType::parse(t).ok_or_else(|| DataError {
                        line: n + 1,
                        reason: format!("unknown place type {t}"),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            places.push(Place {
                code: code.clone(),
                name: name.clone(),
                types,
                parent: (!parent.is_empty()).then(|| parent.clone()),
                aliases: split_list(aliases),
            });
        }
        let by_code: HashMap<String, usize> = places
            .iter()
            .enumerate()
            .map(|(i, p)| (p.code.clone(), i))
            .collect();
        let mut series = HashMap::new();
        for (n, line) in series_csv.lines().enumerate().skip(1) {
            let bad = |reason: &str| DataError {
                line: n + 1,
                reason: reason.to_owned(),
            };
            let f = csv_fields(line);
            let [indicator, place, observations] = f.as_slice() else {
                return Err(bad("expected 3 fields"));
            };
            let indicator =
                Indicator::from_key(indicator).ok_or_else(|| bad("unknown indicator"))?;
            let place = *by_code.get(place).ok_or_else(|| bad("unknown place"))?;
            let mut points = Series::new();
            for pair in observations.split(' ') {
                let (year, value) = pair.split_once('=').ok_or_else(|| bad("year=value"))?;
                let year = year.parse().map_err(|_| bad("year"))?;
                let value = value.parse().map_err(|_| bad("value"))?;
                points.insert(year, value);
            }
            series.insert((indicator, place), points);
        }
        Ok(Dataset {
            places,
            by_code,
            series,
        })
    }

    pub fn place(&self, code: &str) -> Option<&Place> {
        self.by_code.get(code).map(|&i| &self.places[i])
    }

    /// The observations of `indicator` for the place `code`, if any.
    pub fn series(&self, indicator: Indicator, code: &str) -> Option<&Series> {
        let index = *self.by_code.get(code)?;
        self.series.get(&(indicator, index))
    }

    /// Places with data for `indicator` at `level`, in code order.
    pub fn places_at(&self, indicator: Indicator, level: Level) -> Vec<&Place> {
        self.places
            .iter()
            .filter(|p| p.is_at(level) && self.series(indicator, &p.code).is_some())
            .collect()
    }

    /// The years any place has for `indicator`.
    pub fn years(&self, indicator: Indicator) -> (i32, i32) {
        let mut lo = i32::MAX;
        let mut hi = i32::MIN;
        for ((i, _), s) in &self.series {
            if *i == indicator
                && let (Some((&a, _)), Some((&b, _))) = (s.first_key_value(), s.last_key_value())
            {
                lo = lo.min(a);
                hi = hi.max(b);
            }
        }
        (lo, hi)
    }

    /// Which indicators hold data for the place `code`.
    pub fn indicators_for(&self, code: &str) -> Vec<Indicator> {
        Indicator::ALL
            .into_iter()
            .filter(|&i| self.series(i, code).is_some())
            .collect()
    }
}

/// The observation at or nearest before `year` (sources like Gapminder
/// report every five years), with the year it was read at.
pub fn at_or_before(series: &Series, year: i32) -> Option<(i32, f64)> {
    series.range(..=year).next_back().map(|(&y, &v)| (y, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_data_meets_the_issue_floor() {
        let data = Dataset::bundled();
        // At least 3 indicators with 150+ countries holding 20+ years each.
        for indicator in [
            Indicator::LifeExpectancy,
            Indicator::Population,
            Indicator::FertilityRate,
        ] {
            let long = data
                .places_at(indicator, Level::Countries)
                .into_iter()
                .filter(|p| {
                    data.series(indicator, &p.code)
                        .is_some_and(|s| s.len() >= 20)
                })
                .count();
            assert!(long >= 150, "{}: {long}", indicator.key());
        }
        assert!(data.series(Indicator::LifeExpectancy, "Earth").is_some());
        assert_eq!(
            data.places_at(Indicator::Population, Level::Continents)
                .len(),
            5
        );
        assert_eq!(
            data.places_at(Indicator::MurderRate, Level::Subdivisions)
                .len(),
            51
        );
    }

    #[test]
    fn levels_follow_the_place_types() {
        let data = Dataset::bundled();
        let aland = data.place("nuts/FI2").expect("Åland");
        assert!(!aland.is_at(Level::Countries));
        assert!(aland.is_at(Level::Subdivisions));
        for code in ["HKG", "GRL"] {
            let place = data.place(code).expect(code);
            assert!(place.is_at(Level::Countries), "{code}");
        }
        let world_bank_group = data.place("OED").expect("OECD");
        assert!(Level::ALL.iter().all(|&l| !world_bank_group.is_at(l)));
        assert!(!data.place("Earth").expect("World").is_at(Level::Countries));
    }

    #[test]
    fn kenya_has_real_figures() {
        let data = Dataset::bundled();
        let life = data
            .series(Indicator::LifeExpectancy, "KEN")
            .expect("Kenya");
        assert_eq!(life.get(&2007), Some(&56.627));
        assert_eq!(data.years(Indicator::LifeExpectancy), (1964, 2013));
        // GDP per capita is five-yearly: a year between points reads the one before.
        let gdp = data.series(Indicator::GdpPerCapita, "KEN").expect("Kenya");
        assert_eq!(at_or_before(gdp, 2010), Some((2007, 1463.25)));
    }
}
