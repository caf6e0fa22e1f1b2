//! The answer's text read out of a step reply while the reply streams in:
//! the `text` member of the reply's top-level object, decoded as the JSON
//! parser will decode it, once the reply has said its `tool` is `answer`.
//!
//! No well-kept crate reads one string member of a JSON object as it
//! arrives: the partial-JSON parsers found parse the whole buffer again on
//! every chunk (quadratic in a reply of up to 256 KiB) into a value, and
//! the event parsers hand a string over only once it is closed. So this
//! is a small scanner of the top-level object that skips every other
//! value.
//!
//! What it yields is a function of the bytes read so far, however they
//! were cut, and it is the trimmed text's prefix: leading whitespace is
//! dropped and trailing whitespace held until more text follows, so the
//! deltas add up to what `step::check` makes of the text.
//!
//! Owns: that scanning. Pure. Must never: yield text the reply has not
//! said is an answer's, past [`MAX_STEP_TEXT_BYTES`], or after anything
//! the JSON parser would refuse.

use super::step::MAX_STEP_TEXT_BYTES;

/// Longest member name kept for comparison, in bytes; longer ones are
/// neither `tool` nor `text`.
const MAX_KEY_BYTES: usize = 16;

/// Where the scanner is in the reply.
#[derive(Clone, Debug, PartialEq, Eq)]
enum At {
    /// Before the object's `{`.
    Start,
    /// After `{` or a `,`: a member name, or (after `{`) the `}`.
    Name { first: bool },
    /// Inside a member name.
    InName,
    /// After a member name: the `:`.
    Colon,
    /// After the `:`: the value.
    Value,
    /// Inside a top-level string value.
    InString,
    /// Inside a value being skipped: a number or literal at depth 0, or
    /// an array or object `depth` levels deep.
    Skipping { depth: u32, in_string: bool },
    /// After a value: a `,` or the `}`.
    AfterValue,
    /// After the object's `}`.
    Closed,
    /// The reply cannot parse, or its text passed the bound: nothing more.
    Stopped,
}

/// An escape being read inside a string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After a backslash (`high`: after a high surrogate's escape).
    Started { high: Option<u32> },
    /// Hex digits of a `\u` escape so far.
    Unicode { hex: String, high: Option<u32> },
    /// A high surrogate, which only a `\u` low half may follow.
    HighSurrogate(u32),
}

/// Reads the answer's text out of a reply fed to it piece by piece.
#[derive(Clone, Debug)]
pub struct AnswerText {
    at: At,
    escape: Escape,
    /// The member being read, decoded (up to [`MAX_KEY_BYTES`]).
    name: String,
    /// The member whose value is being read.
    member: String,
    /// The `tool` member's value so far, and whether it was `answer`.
    tool: String,
    is_answer: bool,
    /// Decoded bytes of the `text` value, whitespace included.
    text_bytes: usize,
    /// Whitespace read but not yet yielded.
    held: String,
    /// The text yielded so far.
    streamed: String,
}

impl Default for AnswerText {
    fn default() -> Self {
        Self {
            at: At::Start,
            escape: Escape::None,
            name: String::new(),
            member: String::new(),
            tool: String::new(),
            is_answer: false,
            text_bytes: 0,
            held: String::new(),
            streamed: String::new(),
        }
    }
}

impl AnswerText {
    /// Reads the next `piece` of the reply; the answer text it adds.
    pub fn push(&mut self, piece: &str) -> String {
        let before = self.streamed.len();
        for c in piece.chars() {
            self.read(c);
            if self.at == At::Stopped {
                break;
            }
        }
        self.streamed[before..].to_owned()
    }

    /// The text yielded so far.
    pub fn streamed(&self) -> &str {
        &self.streamed
    }

    fn read(&mut self, c: char) {
        self.at = match std::mem::replace(&mut self.at, At::Stopped) {
            At::Start if c.is_ascii_whitespace() => At::Start,
            At::Start if c == '{' => At::Name { first: true },
            At::Name { first } if c.is_ascii_whitespace() => At::Name { first },
            At::Name { .. } if c == '"' => {
                self.name.clear();
                At::InName
            }
            At::Name { first: true } if c == '}' => At::Closed,
            At::InName => match self.string_char(c) {
                Some(Decoded::End) => {
                    self.member = std::mem::take(&mut self.name);
                    At::Colon
                }
                Some(Decoded::Char(d)) => {
                    if self.name.len() < MAX_KEY_BYTES {
                        self.name.push(d);
                    }
                    At::InName
                }
                Some(Decoded::Pending) => At::InName,
                None => At::Stopped,
            },
            At::Colon if c.is_ascii_whitespace() => At::Colon,
            At::Colon if c == ':' => At::Value,
            At::Value if c.is_ascii_whitespace() => At::Value,
            At::Value if c == '"' => {
                if self.member == "tool" {
                    self.tool.clear();
                }
                At::InString
            }
            At::Value if c == '{' || c == '[' => At::Skipping {
                depth: 1,
                in_string: false,
            },
            At::Value if c == '-' || c.is_ascii_alphanumeric() => At::Skipping {
                depth: 0,
                in_string: false,
            },
            At::InString => self.in_string(c),
            At::Skipping { depth, in_string } => self.skipping(c, depth, in_string),
            At::AfterValue => self.after_value(c),
            At::Closed if c.is_ascii_whitespace() => At::Closed,
            _ => At::Stopped,
        };
    }

    fn in_string(&mut self, c: char) -> At {
        match self.string_char(c) {
            None => At::Stopped,
            Some(Decoded::Pending) => At::InString,
            Some(Decoded::End) => {
                if self.member == "tool" {
                    self.is_answer = self.tool == "answer";
                }
                At::AfterValue
            }
            Some(Decoded::Char(d)) => match self.member.as_str() {
                "tool" => {
                    if self.tool.len() < MAX_KEY_BYTES {
                        self.tool.push(d);
                    }
                    At::InString
                }
                "text" if self.is_answer => self.text_char(d),
                _ => At::InString,
            },
        }
    }

    /// One decoded character of the answer's text.
    fn text_char(&mut self, d: char) -> At {
        self.text_bytes += d.len_utf8();
        if self.text_bytes > MAX_STEP_TEXT_BYTES {
            return At::Stopped;
        }
        if d.is_whitespace() {
            if !self.streamed.is_empty() {
                self.held.push(d);
            }
        } else {
            self.streamed.push_str(&self.held);
            self.held.clear();
            self.streamed.push(d);
        }
        At::InString
    }

    fn skipping(&mut self, c: char, depth: u32, in_string: bool) -> At {
        if in_string {
            return match self.string_char(c) {
                None => At::Stopped,
                Some(Decoded::End) => At::Skipping {
                    depth,
                    in_string: false,
                },
                Some(_) => At::Skipping {
                    depth,
                    in_string: true,
                },
            };
        }
        match (depth, c) {
            // A number or literal ends where what follows a value begins.
            (0, ',' | '}') => self.after_value(c),
            (0, c) if c.is_ascii_whitespace() => At::AfterValue,
            (0, c) if c == '-' || c == '+' || c == '.' || c.is_ascii_alphanumeric() => {
                At::Skipping { depth, in_string }
            }
            (0, _) => At::Stopped,
            (_, '"') => At::Skipping {
                depth,
                in_string: true,
            },
            (_, '{' | '[') => At::Skipping {
                depth: depth + 1,
                in_string,
            },
            (1, '}' | ']') => At::AfterValue,
            (_, '}' | ']') => At::Skipping {
                depth: depth - 1,
                in_string,
            },
            _ => At::Skipping { depth, in_string },
        }
    }

    fn after_value(&mut self, c: char) -> At {
        match c {
            c if c.is_ascii_whitespace() => At::AfterValue,
            ',' => At::Name { first: false },
            '}' => At::Closed,
            _ => At::Stopped,
        }
    }

    /// Reads `c` inside a string: a decoded character, the string's end,
    /// more of an escape, or `None` where JSON refuses what was read.
    fn string_char(&mut self, c: char) -> Option<Decoded> {
        match std::mem::take(&mut self.escape) {
            Escape::None => match c {
                '"' => Some(Decoded::End),
                '\\' => {
                    self.escape = Escape::Started { high: None };
                    Some(Decoded::Pending)
                }
                c if u32::from(c) < 0x20 => None,
                c => Some(Decoded::Char(c)),
            },
            Escape::HighSurrogate(high) => (c == '\\').then(|| {
                self.escape = Escape::Started { high: Some(high) };
                Decoded::Pending
            }),
            Escape::Started { high: Some(high) } => (c == 'u').then(|| {
                self.escape = Escape::Unicode {
                    hex: String::new(),
                    high: Some(high),
                };
                Decoded::Pending
            }),
            Escape::Started { high: None } => {
                let decoded = match c {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'u' => {
                        self.escape = Escape::Unicode {
                            hex: String::new(),
                            high: None,
                        };
                        return Some(Decoded::Pending);
                    }
                    _ => return None,
                };
                Some(Decoded::Char(decoded))
            }
            Escape::Unicode { mut hex, high } => {
                if !c.is_ascii_hexdigit() {
                    return None;
                }
                hex.push(c);
                if hex.len() < 4 {
                    self.escape = Escape::Unicode { hex, high };
                    return Some(Decoded::Pending);
                }
                let code = u32::from_str_radix(&hex, 16).ok()?;
                self.code_point(code, high)
            }
        }
    }

    /// A `\u` escape's code point (`high`: the high surrogate before it),
    /// or the first half of a pair.
    fn code_point(&mut self, code: u32, high: Option<u32>) -> Option<Decoded> {
        match (high, code) {
            (Some(high), 0xDC00..=0xDFFF) => {
                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00))
                    .map(Decoded::Char)
            }
            // A high half not followed by its low half.
            (Some(_), _) => None,
            (None, 0xD800..=0xDBFF) => {
                self.escape = Escape::HighSurrogate(code);
                Some(Decoded::Pending)
            }
            // A low half alone.
            (None, 0xDC00..=0xDFFF) => None,
            (None, code) => char::from_u32(code).map(Decoded::Char),
        }
    }
}

/// What a character inside a string comes to.
enum Decoded {
    Char(char),
    Pending,
    End,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::builtin::data::Dataset;
    use crate::model::step::{self, Step};

    /// The text yielded for `reply` fed in `pieces`, and each piece's delta.
    fn fed(pieces: &[&str]) -> (String, Vec<String>) {
        let mut scanner = AnswerText::default();
        let deltas: Vec<String> = pieces.iter().map(|p| scanner.push(p)).collect();
        (scanner.streamed().to_owned(), deltas)
    }

    /// An answer step, its members in the order the schema asks for.
    fn answer(text: &str) -> String {
        format!(
            r#"{{"tool": "answer", "text": {}, "series": "", "places": [], "from_year": 0, "to_year": 0, "operation": "trend", "chart": "auto", "options": []}}"#,
            json!(text)
        )
    }

    #[test]
    fn an_answers_text_streams_as_it_comes_trimmed() {
        let (all, deltas) = fed(&[
            "{\"tool\": \"ans",
            "wer\", \"text\": \"  Kenya's ",
            "life expectancy \\\"rose\\\"\\n",
            "\\ud83d",
            "\\ude00 \", \"series\": \"\"}",
        ]);
        assert_eq!(all, "Kenya's life expectancy \"rose\"\n😀");
        assert_eq!(
            deltas,
            ["", "Kenya's", " life expectancy \"rose\"", "", "\n😀"]
        );
    }

    #[test]
    fn nothing_streams_but_an_answers_text() {
        let plan = r#"{"tool":"plan","text":"a plan","series":"population"}"#;
        assert_eq!(fed(&[plan]).0, "");
        // The tool named after the text: the reply is read whole later.
        let late = r#"{"text":"said first","tool":"answer"}"#;
        assert_eq!(fed(&[late]).0, "");
        // A `text` nested in a skipped value is not the answer's.
        let nested = r#"{"tool":"answer","options":[{"text":"no"}],"series":"x\"text\":"}"#;
        assert_eq!(fed(&[nested]).0, "");
    }

    #[test]
    fn what_json_refuses_stops_the_text_where_it_is() {
        let cases = [
            "{\"tool\":\"answer\",\"text\":\"cut \u{1} here\"}",
            "{\"tool\":\"answer\",\"text\":\"cut \\x here\"}",
            "{\"tool\":\"answer\",\"text\":\"cut \\ud800 here\"}",
            "{\"tool\":\"answer\",\"text\":\"cut \\udc00 here\"}",
        ];
        for case in cases {
            assert_eq!(fed(&[case]).0, "cut", "{case}");
        }
        assert_eq!(fed(&["[\"tool\",\"answer\"]"]).0, "");
        let long = answer(&"a".repeat(MAX_STEP_TEXT_BYTES + 10));
        assert_eq!(fed(&[&long]).0.len(), MAX_STEP_TEXT_BYTES);
    }

    /// Cuts `text` at the byte offsets in `cuts` that fall on characters.
    fn cut(text: &str, cuts: &[usize]) -> Vec<String> {
        let mut at: Vec<usize> = cuts
            .iter()
            .map(|c| c % (text.len() + 1))
            .filter(|c| text.is_char_boundary(*c))
            .collect();
        at.sort_unstable();
        at.dedup();
        let mut pieces = Vec::new();
        let mut from = 0;
        for to in at.into_iter().chain([text.len()]) {
            pieces.push(text[from..to].to_owned());
            from = to;
        }
        pieces
    }

    proptest! {
        #[test]
        fn however_a_reply_is_cut_its_deltas_add_up_to_the_checked_answer(
            text in "[ a-z\"\\\\\n\t\u{e9}\u{1F600}]{0,80}",
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let reply = answer(&text);
            let pieces = cut(&reply, &cuts);
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let (streamed, deltas) = fed(&refs);
            prop_assert_eq!(deltas.concat(), streamed.clone());
            prop_assert_eq!(&streamed, &fed(&[&reply]).0);
            match step::check(&reply, Dataset::bundled()) {
                Ok(Step::Answer(checked)) => prop_assert_eq!(streamed, checked),
                _ => prop_assert_eq!(streamed, ""),
            }
        }

        #[test]
        fn any_bytes_at_all_stream_a_bounded_prefix_and_never_panic(
            junk in "\\PC{0,300}",
            cuts in proptest::collection::vec(0usize..400, 0..8),
        ) {
            let reply = format!("{{\"tool\":\"answer\",\"text\":\"{junk}");
            let pieces = cut(&reply, &cuts);
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let (streamed, _) = fed(&refs);
            prop_assert!(streamed.len() <= MAX_STEP_TEXT_BYTES);
            prop_assert_eq!(&streamed, &fed(&[&reply]).0);
        }
    }
}
