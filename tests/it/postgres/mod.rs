//! The PostgreSQL store against a real cluster (`cluster`): what only it
//! has to show beyond the conformance suite (which runs against it in
//! `conformance`): the group commit (`batch`), the global order with a writer parked in an open
//! transaction, tails across two stores on one database, the database
//! going away and coming back, several `serve` processes on one
//! database, the tools.

mod batch;
pub mod cluster;
mod faults;
mod instances;
mod store;
mod tools;

use ledgerwire::ledger::StreamKey;

/// Flips one bit in the middle of a stored record's envelope, as a disk
/// could.
pub async fn flip_stored_byte(url: &str, stream: &StreamKey, position: u64) {
    let client = cluster::connect_url(url).await;
    let flipped = client
        .execute(
            "UPDATE ledgerwire_records
             SET envelope = set_byte(envelope, length(envelope) / 2, get_byte(envelope, length(envelope) / 2) # 1)
             WHERE stream = $1 AND position = $2",
            &[&stream.as_str(), &(position as i64)],
        )
        .await
        .expect("damage a record");
    assert_eq!(flipped, 1, "no record {stream} #{position} to damage");
}
