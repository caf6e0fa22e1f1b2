//! One fixture per packet shape in `fixtures/statewire/` (documented in
//! docs/statewire.md): server packets decode and re-encode to the same
//! JSON, client frames and the WebSocket initialisation pass the host's
//! frame checks.

use std::path::Path;

use ledgerwire::statewire::packet::{Packet, parse_frame, parse_init};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/statewire");

#[test]
fn every_fixture_is_a_valid_packet_frame_or_initialisation() {
    let mut names: Vec<String> = std::fs::read_dir(Path::new(FIXTURES))
        .expect("fixtures/statewire")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        let text = std::fs::read_to_string(Path::new(FIXTURES).join(&name)).unwrap();
        let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        if name.starts_with("server-") {
            let packet: Packet =
                serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                serde_json::to_value(&packet).unwrap(),
                json,
                "{name} round trip"
            );
        } else if name.starts_with("client-init") {
            parse_init(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else if name.starts_with("client-frame") {
            parse_frame(text.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else {
            panic!("{name}: unknown fixture kind");
        }
    }
}
