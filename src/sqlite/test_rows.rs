//! INTERNAL, for this package's tests only (a build with the `test-hooks` feature; what
//! users install has none of it): writes many settled records, long expired, into a store's
//! file in one transaction, as a store writes them. The pruning tests need 100k of them
//! (issue 40); the public API takes seconds of every test run to write that many, and a
//! script in another language would make `npm test` need that language.

use napi_derive::napi;
use rusqlite::{params, Connection};

/// Adds `count` completed records named `charge` (keys `old-1` ... in project `namespace`),
/// each with a result of about 200 bytes, that expired at epoch 1 ms, to the store file at
/// `path` (its schema made already: a store opened it first).
#[napi]
pub fn test_fill_expired(path: String, namespace: String, count: u32) -> napi::Result<()> {
    let fill = || -> rusqlite::Result<()> {
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let tx = conn.transaction()?;
        tx.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO records (namespace, key, name, fingerprint, status, result, attempts,
                                  created_at, updated_at, expires_at)
             SELECT ?2, 'old-' || i, 'charge', 'fp', 'completed',
                    '\"' || hex(randomblob(100)) || '\"', 1, 1, 1, 1 FROM n",
            params![count, namespace],
        )?;
        tx.commit()
    };
    fill().map_err(|e| napi::Error::from_reason(format!("test_fill_expired: {e}")))
}
