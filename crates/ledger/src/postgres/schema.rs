//! The store's tables in the database and their version: created by the
//! first instance that opens an empty database, checked by every open.
//! `log-format/LOG-FORMAT.md` ("The PostgreSQL store") describes them.
//!
//! Owns: the DDL, the schema version row and the migrations between
//! versions. Must never: open a database whose schema is newer than the
//! build's, or change a table an older version wrote other than through
//! a migration that bumps the version.

use deadpool_postgres::Client;

use super::error::PostgresError;

/// The schema version this build writes and reads (every older one is
/// migrated on open; there is none yet).
pub const SCHEMA_VERSION: i64 = 1;

/// The advisory lock key every instance takes while it creates or checks
/// the schema, so two opening at once do not both create it.
const SCHEMA_LOCK_KEY: i64 = 0x6c65_6467_6572_7701;

/// The tables of version 1. Stream keys sort as bytes (collation "C"),
/// as the contract lists them.
const CREATE_V1: &str = r#"
CREATE TABLE ledgerwire_meta (
    key text PRIMARY KEY,
    value bigint NOT NULL
);
CREATE TABLE ledgerwire_streams (
    stream text COLLATE "C" PRIMARY KEY,
    head bigint NOT NULL CHECK (head > 0)
);
CREATE TABLE ledgerwire_records (
    stream text COLLATE "C" NOT NULL,
    position bigint NOT NULL,
    global bigint NOT NULL,
    envelope bytea NOT NULL,
    PRIMARY KEY (stream, position)
);
ALTER TABLE ledgerwire_records ALTER COLUMN envelope SET STORAGE EXTERNAL;
CREATE UNIQUE INDEX ledgerwire_records_global ON ledgerwire_records (global);
CREATE TABLE ledgerwire_snapshots (
    key bytea PRIMARY KEY,
    value bytea NOT NULL
);
INSERT INTO ledgerwire_meta (key, value) VALUES ('schema_version', 1), ('flushes', 0);
"#;

/// Creates the tables in an empty database, or checks the version of the
/// ones there, in one transaction under the schema lock.
pub(super) async fn prepare(client: &mut Client) -> Result<(), PostgresError> {
    let doing = "create or check the ledgerwire tables";
    let failed = |error: tokio_postgres::Error| PostgresError::statement(doing, &error);
    let transaction = client.transaction().await.map_err(failed)?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY])
        .await
        .map_err(failed)?;
    let exists: bool = transaction
        .query_one("SELECT to_regclass('ledgerwire_meta') IS NOT NULL", &[])
        .await
        .map_err(failed)?
        .get(0);
    if !exists {
        transaction.batch_execute(CREATE_V1).await.map_err(failed)?;
        tracing::info!(version = SCHEMA_VERSION, "created the ledgerwire tables");
    }
    let found: i64 = transaction
        .query_one(
            "SELECT value FROM ledgerwire_meta WHERE key = 'schema_version'",
            &[],
        )
        .await
        .map_err(failed)?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(PostgresError::NewerSchema {
            found,
            known: SCHEMA_VERSION,
        });
    }
    transaction.commit().await.map_err(failed)
}
