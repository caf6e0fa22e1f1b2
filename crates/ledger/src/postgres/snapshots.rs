//! Fold snapshots in their own table: derivable values, written without
//! waiting for the disk, deletable at any time.
//!
//! Owns: the snapshots table's reads and writes.
//!
//! Must never: hold anything a fold could not compute again from records.

use async_trait::async_trait;
use deadpool_postgres::Pool;

use super::error::PostgresError;
use crate::contract::SnapshotStore;
use crate::error::Result;

const GET: &str = "SELECT value FROM ledgerwire_snapshots WHERE key = $1";
const PUT: &str = "INSERT INTO ledgerwire_snapshots (key, value) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET value = excluded.value";
const CLEAR: &str = "DELETE FROM ledgerwire_snapshots";

/// The snapshots table, through the buffered pool (a snapshot is not
/// worth a wait for the WAL to reach the disk).
pub(super) struct PostgresSnapshots {
    pub(super) pool: Pool,
}

impl PostgresSnapshots {
    async fn run(
        &self,
        doing: &'static str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let client = self.pool.get().await.map_err(PostgresError::from)?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| PostgresError::statement(doing, &e))?;
        Ok(client
            .query(&statement, params)
            .await
            .map_err(|e| PostgresError::statement(doing, &e))?)
    }
}

#[async_trait]
impl SnapshotStore for PostgresSnapshots {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let rows = self.run("read a snapshot", GET, &[&key]).await?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    async fn put(&self, key: &[u8], value: Vec<u8>) -> Result<()> {
        self.run("write a snapshot", PUT, &[&key, &value]).await?;
        Ok(())
    }

    async fn clear(&self) -> Result<()> {
        self.run("delete the snapshots", CLEAR, &[]).await?;
        Ok(())
    }
}
