//! The log filter every command runs under: the operator's `RUST_LOG`
//! (`info` when unset or unreadable), with the dependencies that log
//! message contents held at `info` unless the operator names them.
//!
//! Owns: the list of those targets and the rule that caps them.
//! Must never: let a global level (`RUST_LOG=trace`) reach a target that
//! writes a request's or a message's bytes, since a bearer token travels
//! in them (the Statewire WebSocket's first message carries
//! `Authorization`).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// The filter when `RUST_LOG` is unset or does not parse.
pub const DEFAULT_LOG_FILTER: &str = "info";

/// Targets whose debug and trace events carry message contents, each
/// capped at [`CONTENT_TARGET_CAP`] unless `RUST_LOG` names it:
///
/// - `tungstenite`: every WebSocket frame and message whole, and a
///   client handshake's request with its headers;
/// - `reqwest`: a verbose connection's every byte read and written;
/// - `hyper` and `h2`: headers and bodies, in builds that turn their
///   tracing on (neither does here today: the cap holds if one does);
/// - `axum::rejection`: the text of a refused extraction, which quotes
///   what the request held.
pub const CONTENT_TARGETS: &[&str] = &["tungstenite", "reqwest", "hyper", "h2", "axum::rejection"];

/// The most a content target logs unless named: its warnings and errors
/// say what failed without the bytes.
pub const CONTENT_TARGET_CAP: &str = "info";

/// The filter for this `RUST_LOG` value.
pub fn env_filter(rust_log: Option<&str>) -> EnvFilter {
    let operator = rust_log
        .map(str::trim)
        .filter(|value| !value.is_empty() && EnvFilter::try_new(value).is_ok())
        .unwrap_or(DEFAULT_LOG_FILTER);
    EnvFilter::try_new(directives(operator))
        .unwrap_or_else(|_| EnvFilter::new(directives(DEFAULT_LOG_FILTER)))
}

/// The operator's directives followed by a cap for each content target
/// they do not name. A cap names a longer target than a bare level does,
/// so it wins over `trace`; a directive naming the target itself (or a
/// module under it) is the operator's explicit choice and wins.
pub fn directives(operator: &str) -> String {
    let named = named_targets(operator);
    let mut directives = operator.to_owned();
    for target in CONTENT_TARGETS {
        if !named.iter().any(|named| named == target) {
            directives.push_str(&format!(",{target}={CONTENT_TARGET_CAP}"));
        }
    }
    directives
}

/// The targets `RUST_LOG`'s directives name (`target[span{…}]=level`);
/// a bare level names none.
fn named_targets(operator: &str) -> Vec<String> {
    operator
        .split(',')
        .filter_map(|directive| {
            let directive = directive.trim();
            let end = directive.find(['[', '=']).unwrap_or(directive.len());
            let target = directive[..end].trim();
            let bare_level = target.parse::<LevelFilter>().is_ok();
            (!target.is_empty() && !bare_level).then(|| target.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("captured").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What events at every level of `target` write under `rust_log`.
    fn logged(rust_log: &str, target: &str) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(env_filter(Some(rust_log)))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            // `target:` must be a constant: one callsite per target.
            macro_rules! each_level {
                ($target:literal) => {
                    tracing::trace!(target: $target, "trace-line");
                    tracing::debug!(target: $target, "debug-line");
                    tracing::info!(target: $target, "info-line");
                };
            }
            match target {
                "tungstenite::protocol" => {
                    each_level!("tungstenite::protocol");
                }
                "axum::rejection" => {
                    each_level!("axum::rejection");
                }
                _ => {
                    each_level!("ledgerwire::studio");
                }
            }
        });
        let bytes = out.0.lock().expect("captured").clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn a_global_trace_leaves_content_targets_at_info() {
        let text = logged("trace", "tungstenite::protocol");
        assert!(!text.contains("trace-line") && !text.contains("debug-line"));
        assert!(text.contains("info-line"));
        let text = logged("trace", "axum::rejection");
        assert!(!text.contains("trace-line"), "{text}");
        let ours = logged("trace", "ledgerwire::studio");
        assert!(ours.contains("trace-line"), "{ours}");
    }

    #[test]
    fn naming_a_content_target_lets_it_through() {
        let text = logged("info,tungstenite=trace", "tungstenite::protocol");
        assert!(text.contains("trace-line"), "{text}");
        let text = logged("tungstenite::protocol=debug", "tungstenite::protocol");
        assert!(text.contains("debug-line") && !text.contains("trace-line"));
        // Naming a parent is not naming the target.
        let text = logged("axum=trace", "axum::rejection");
        assert!(!text.contains("trace-line"), "{text}");
    }

    #[test]
    fn an_unreadable_filter_falls_back_to_info_with_the_caps() {
        assert_eq!(
            directives(DEFAULT_LOG_FILTER),
            "info,tungstenite=info,reqwest=info,hyper=info,h2=info,axum::rejection=info"
        );
        let text = logged("=[", "ledgerwire::studio");
        assert!(text.contains("info-line") && !text.contains("debug-line"));
        assert_eq!(
            named_targets("warn, tungstenite[x{a=1}]=trace,hyper"),
            ["tungstenite", "hyper"]
        );
    }
}
