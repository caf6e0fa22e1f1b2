//! The public conformance vectors copied into `tests/conformance/` (see
//! its README for their sources and licences): every structured-field
//! `list` case through the `Statewire-Protocol` reader and every `item`
//! case through the `Statewire-Version` reader; the JSON Patch suite
//! through Statepatch where its operations are Statepatch operations. A
//! missing file fails the test.

use std::path::{Path, PathBuf};

use ledgerwire::statewire::negotiation::{
    NegotiationError, parse_protocol_field, parse_version_field, read_protocol_field,
    read_version_field,
};
use ledgerwire::statewire::statepatch::{self, PatchOp, pointer_to_path};
use serde_json::{Value, json};

fn vectors() -> PathBuf {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance"));
    assert!(path.is_dir(), "{} is missing", path.display());
    path.to_path_buf()
}

/// Cases in the copied vectors (checked exactly, so none goes unread).
const SF_LISTS: usize = 319;
const SF_ITEMS: usize = 840;
const JSON_PATCH_RUN: usize = 73;
const JSON_PATCH_DISABLED: usize = 4;
const JSON_PATCH_OUTSIDE: usize = 35;

fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    for chunk in bytes.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(ALPHABET[((bits >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn bare_json(bare: &sfv::BareItem) -> Value {
    use sfv::BareItem;
    match bare {
        BareItem::Integer(i) => json!(i64::from(*i)),
        BareItem::Decimal(d) => json!(i64::from(d.as_integer_scaled_1000()) as f64 / 1000.0),
        BareItem::String(s) => json!(s.as_str()),
        BareItem::ByteSequence(b) => json!({"__type": "binary", "value": base32(b)}),
        BareItem::Boolean(b) => json!(b),
        BareItem::Token(t) => json!({"__type": "token", "value": t.as_str()}),
        BareItem::Date(d) => json!({"__type": "date", "value": i64::from(d.unix_seconds())}),
        BareItem::DisplayString(s) => json!({"__type": "displaystring", "value": s}),
    }
}

fn params_json(params: &sfv::Parameters) -> Value {
    Value::Array(
        params
            .iter()
            .map(|(k, v)| json!([k.as_str(), bare_json(v)]))
            .collect(),
    )
}

fn item_json(item: &sfv::Item) -> Value {
    json!([bare_json(&item.bare_item), params_json(&item.params)])
}

fn list_json(list: &sfv::List) -> Value {
    Value::Array(
        list.iter()
            .map(|entry| match entry {
                sfv::ListEntry::Item(item) => item_json(item),
                sfv::ListEntry::InnerList(inner) => json!([
                    Value::Array(inner.items.iter().map(item_json).collect()),
                    params_json(&inner.params)
                ]),
            })
            .collect(),
    )
}

/// Numbers compare as f64 (decimals are scaled thousandths).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64().unwrap_or(f64::NAN) - y.as_f64().unwrap_or(f64::NAN)).abs() < 1e-9
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn structured_field_vectors_through_the_negotiation_readers() {
    let dir = vectors().join("structured-field-tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read structured-field-tests")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let (mut lists, mut items, mut refused, mut accepted) = (0, 0, 0, 0);
    for file in files {
        let cases: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
        for case in cases {
            let name = format!("{}: {}", file.display(), case["name"]);
            let Some(raw) = case["raw"].as_array() else {
                continue;
            };
            let raw: Vec<&str> = raw.iter().filter_map(Value::as_str).collect();
            let value = raw.join(", ");
            let must_fail = case["must_fail"].as_bool().unwrap_or(false);
            let can_fail = case["can_fail"].as_bool().unwrap_or(false);
            let (structural, statewire) = match case["header_type"].as_str() {
                Some("list") => {
                    lists += 1;
                    (
                        parse_protocol_field(&value).map(|l| list_json(&l)),
                        read_protocol_field(&value).map(drop),
                    )
                }
                Some("item") => {
                    items += 1;
                    (
                        parse_version_field(&value).map(|i| item_json(&i)),
                        read_version_field(&value).map(drop),
                    )
                }
                _ => continue,
            };
            if must_fail {
                assert!(structural.is_err(), "{name}: must fail, parsed");
                assert!(
                    matches!(statewire, Err(NegotiationError::Invalid(_))),
                    "{name}: must be invalid negotiation, got {statewire:?}"
                );
            } else {
                match structural {
                    Ok(parsed) => assert!(
                        same(&parsed, &case["expected"]),
                        "{name}: parsed {parsed}, expected {}",
                        case["expected"]
                    ),
                    Err(error) => assert!(can_fail, "{name}: refused a valid field: {error:?}"),
                }
                // Statewire's own rules then accept or refuse it as invalid
                // negotiation; nothing else, and never a panic.
                assert!(
                    matches!(statewire, Ok(()) | Err(NegotiationError::Invalid(_))),
                    "{name}: {statewire:?}"
                );
            }
            match statewire {
                Ok(()) => accepted += 1,
                Err(_) => refused += 1,
            }
        }
    }
    println!(
        "structured fields: {lists} list and {items} item cases; {accepted} accepted as offers, {refused} refused"
    );
    assert_eq!(
        (lists, items),
        (SF_LISTS, SF_ITEMS),
        "structured-field cases"
    );
}

#[test]
fn json_patch_vectors_through_statepatch() {
    let root = vectors();
    let (mut ran, mut disabled, mut outside) = (0, 0, 0);
    for file in ["tests.json", "spec_tests.json"] {
        let path = root.join("json-patch-tests").join(file);
        let cases: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        for case in cases {
            let name = format!("{file}: {}", case["comment"]);
            if case["disabled"].as_bool() == Some(true) {
                disabled += 1;
                continue;
            }
            let Some(patch) = case["patch"].as_array() else {
                continue;
            };
            // Translate JSON Pointers to path arrays; other operations
            // (move, copy, test) are not Statepatch operations.
            let mut translated = Vec::new();
            let mut translatable = true;
            for op in patch {
                let mut op = op.clone();
                let kind = op["op"].as_str().unwrap_or("");
                if !matches!(kind, "add" | "remove" | "replace") {
                    translatable = false;
                    break;
                }
                match op["path"].as_str().and_then(pointer_to_path) {
                    Some(path) => op["path"] = serde_json::to_value(path).expect("path"),
                    None if case.get("error").is_some() => {
                        // An unreadable pointer is itself the expected error.
                        op["path"] = json!(null);
                    }
                    None => panic!("{name}: bad pointer in a valid case"),
                }
                translated.push(op);
            }
            if !translatable {
                outside += 1;
                continue;
            }
            ran += 1;
            let original = case["doc"].clone();
            let mut document = original.clone();
            let result = statepatch::parse(&Value::Array(translated))
                .and_then(|ops: Vec<PatchOp>| statepatch::apply(&mut document, &ops));
            if case.get("error").is_some() {
                assert!(result.is_err(), "{name}: must fail, gave {document}");
                assert_eq!(
                    document, original,
                    "{name}: a failing patch changed the document"
                );
            } else if let Some(expected) = case.get("expected") {
                assert!(result.is_ok(), "{name}: {result:?}");
                assert_eq!(&document, expected, "{name}");
            } else {
                assert!(result.is_ok(), "{name}: {result:?}");
            }
        }
    }
    // The copied suite's counts: a file that shrank or failed to read
    // shows here.
    assert_eq!(
        (ran, disabled, outside),
        (JSON_PATCH_RUN, JSON_PATCH_DISABLED, JSON_PATCH_OUTSIDE),
        "json patch cases run, disabled, outside Statepatch"
    );
}
