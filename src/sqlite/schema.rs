//! The schema of a store file and its migrations, keyed by `PRAGMA user_version`.
//!
//! - 1: one record per key.
//! - 2: records belong to a project (`namespace`, part of the primary key), keep the
//!   call's `meta` and `duration_ms`, and time their lease on the host's monotonic clock
//!   (`lease_clock`, `lease_until`; see `clock.rs`). `lease_expires_at` stays, on the
//!   wall clock, for display and for records whose lease has no monotonic deadline.

use rusqlite::Connection;

/// `PRAGMA user_version` of the schema this code writes.
pub const SCHEMA_VERSION: i32 = 2;

/// The table of a new file (the latest version).
pub const SCHEMA: &str = "
CREATE TABLE records (
  namespace        TEXT NOT NULL DEFAULT '',
  key              TEXT NOT NULL,
  name             TEXT NOT NULL,
  fingerprint      TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
  token            TEXT,
  result           TEXT,
  error            TEXT,
  attempts         INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  expires_at       INTEGER,
  lease_expires_at INTEGER,
  lease_clock      TEXT,
  lease_until      INTEGER,
  meta             TEXT,
  duration_ms      INTEGER,
  PRIMARY KEY (namespace, key)
);
CREATE INDEX records_by_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;
";

/// Version 1 to 2: a table rebuild (the primary key changes). Old records belong to the
/// project '' (what `new SqliteStore({ path })` uses); their leases stay on the wall clock.
const V1_TO_V2: &str = "
DROP INDEX IF EXISTS records_by_expiry;
ALTER TABLE records RENAME TO records_v1;
";

const V1_TO_V2_COPY: &str = "
INSERT INTO records (namespace, key, name, fingerprint, status, token, result, error, attempts,
                     created_at, updated_at, expires_at, lease_expires_at)
  SELECT '', key, name, fingerprint, status, token, result, error, attempts,
         created_at, updated_at, expires_at, lease_expires_at
  FROM records_v1;
DROP TABLE records_v1;
";

/// Brings a file at `from` up to `SCHEMA_VERSION`. Runs inside the caller's
/// `BEGIN IMMEDIATE`, so a crash or a racing process never sees half a migration.
pub fn migrate(conn: &Connection, from: i32) -> rusqlite::Result<()> {
    if from < 2 {
        conn.execute_batch(V1_TO_V2)?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(V1_TO_V2_COPY)?;
    }
    conn.pragma_update(None, "user_version", SCHEMA_VERSION)
}

/// The table and version 1 wrote, for the migration tests.
#[cfg(test)]
pub const SCHEMA_V1: &str = "
CREATE TABLE records (
  key              TEXT PRIMARY KEY NOT NULL,
  name             TEXT NOT NULL,
  fingerprint      TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
  token            TEXT,
  result           TEXT,
  error            TEXT,
  attempts         INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  expires_at       INTEGER,
  lease_expires_at INTEGER
);
CREATE INDEX records_by_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;
";
