//! The registry of every record kind this binary writes, assembled from
//! the ledger's own kinds and each door's list.
//!
//! Owns: which doors' kinds the binary knows. Must never: define a kind
//! (each door owns its codes and payloads) or be imported by the ledger
//! or a door.

use std::sync::LazyLock;

use crate::ledger::KindRegistry;

static REGISTRY: LazyLock<KindRegistry> = LazyLock::new(|| {
    KindRegistry::new()
        .with(crate::studio::records::KINDS)
        .with(crate::statewire::records::KINDS)
});

/// Every kind this binary knows: the ledger's, the Studio's and
/// Statewire's. `log dump`, `log stats`, `replay` and the audit API
/// name and decode records through it.
pub fn registry() -> &'static KindRegistry {
    &REGISTRY
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_kind_has_one_code_and_a_name_in_its_owners_range() {
        let kinds: Vec<_> = super::registry().kinds().collect();
        assert_eq!(kinds.len(), 19);
        for kind in kinds {
            let owner = kind.name.split('.').next().unwrap_or_default();
            let range = match owner {
                "probe" => 1..=15,
                "studio" => 16..=63,
                "statewire" => 64..=127,
                other => panic!("kind {} has an unknown owner {other}", kind.code),
            };
            assert!(range.contains(&kind.code), "{kind:?}");
        }
    }
}
