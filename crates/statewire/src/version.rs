//! Version identifiers and inclusive version ranges.
//!
//! Owns: parsing and ordering of `YYYY-MM-DD` version dates and the
//! intersection rule of two ranges. Pure: no I/O.
//! Must never: accept a date that is not on the calendar (2026-02-30) or
//! a form other than fixed-width `YYYY-MM-DD` (suffixes are reserved).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A calendar date naming a contract revision. Ordered chronologically,
/// which is also the lexicographic order of its text.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    year: u16,
    month: u8,
    day: u8,
}

/// Why a text is not a version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a version: expected a calendar date YYYY-MM-DD")]
pub struct BadVersion {
    pub text: String,
}

fn is_leap(year: u16) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

impl Version {
    /// Parses a fixed-width `YYYY-MM-DD` calendar date.
    pub fn parse(text: &str) -> Result<Self, BadVersion> {
        let bad = || BadVersion {
            text: text.chars().take(32).collect(),
        };
        let bytes = text.as_bytes();
        if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
            return Err(bad());
        }
        let digits = |range: std::ops::Range<usize>| -> Option<u32> {
            let part = &bytes[range];
            if !part.iter().all(u8::is_ascii_digit) {
                return None;
            }
            part.iter()
                .try_fold(0u32, |acc, &b| Some(acc * 10 + u32::from(b - b'0')))
        };
        let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10))
        else {
            return Err(bad());
        };
        let (year, month, day) = (year as u16, month as u8, day as u8);
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return Err(bad());
        }
        Ok(Self { year, month, day })
    }

    /// A version known valid at compile time (registrations, constants).
    /// Panics on an invalid literal, which is a programming error.
    pub const fn ymd(year: u16, month: u8, day: u8) -> Self {
        assert!(month >= 1 && month <= 12 && day >= 1 && day <= 31);
        Self { year, month, day }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl std::str::FromStr for Version {
    type Err = BadVersion;
    fn from_str(text: &str) -> Result<Self, BadVersion> {
        Self::parse(text)
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// An inclusive range of versions, `min <= max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VersionRange {
    min: Version,
    max: Version,
}

/// A range whose minimum is after its maximum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reversed range: min-version {min} is after version {max}")]
pub struct ReversedRange {
    pub min: Version,
    pub max: Version,
}

impl VersionRange {
    pub fn new(min: Version, max: Version) -> Result<Self, ReversedRange> {
        if min > max {
            return Err(ReversedRange { min, max });
        }
        Ok(Self { min, max })
    }

    /// The single-version range `[version, version]`: an exact offer.
    pub fn exact(version: Version) -> Self {
        Self {
            min: version,
            max: version,
        }
    }

    pub fn min(&self) -> Version {
        self.min
    }

    pub fn max(&self) -> Version {
        self.max
    }

    pub fn contains(&self, version: Version) -> bool {
        self.min <= version && version <= self.max
    }

    /// `[max(mins), min(maxes)]` when it is not empty.
    pub fn intersect(&self, other: &VersionRange) -> Option<VersionRange> {
        let lower = self.min.max(other.min);
        let upper = self.max.min(other.max);
        (lower <= upper).then_some(VersionRange {
            min: lower,
            max: upper,
        })
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::{Version, VersionRange};

    #[test]
    fn parses_real_dates_only() {
        assert_eq!(
            Version::parse("2026-09-30").unwrap().to_string(),
            "2026-09-30"
        );
        assert!(Version::parse("2024-02-29").is_ok());
        for bad in [
            "2026-02-29",
            "2026-02-30",
            "2026-13-01",
            "2026-00-10",
            "2026-04-31",
            "2026-9-30",
            "2026-09-30x",
            "20260930",
            "2026_09_30",
            "",
            "2026-09-3a",
            "+026-09-30",
            "1900-02-29",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_intersect_inclusively() {
        let v = |s| Version::parse(s).unwrap();
        let a = VersionRange::new(v("2026-09-01"), v("2026-09-30")).unwrap();
        let b = VersionRange::new(v("2026-09-30"), v("2026-11-02")).unwrap();
        assert_eq!(a.intersect(&b), Some(VersionRange::exact(v("2026-09-30"))));
        let c = VersionRange::exact(v("2026-12-01"));
        assert_eq!(b.intersect(&c), None);
        assert!(VersionRange::new(v("2026-10-01"), v("2026-09-01")).is_err());
    }
}
