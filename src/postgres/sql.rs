//! The SQL of the Postgres store, written once (the `.sql` files beside this one) and used
//! by both `PostgresStore` (Rust, prepared statements) and `idempotent-tools/pg`
//! (TypeScript, through `postgresSql()`), so the claim rule has one text.
//!
//! The table name is the only thing substituted into the text, and only after it has been
//! validated and quoted here; every value is a bind parameter.

use napi_derive::napi;
use sha2::{Digest, Sha256};

use crate::failure::{StoreFailure, StoreResult};

pub const DEFAULT_TABLE: &str = "idempotent_tools_records";
/// The table's comment: who made it, and its schema version.
pub const SCHEMA_VERSION: &str = "idempotent-tools records, schema 1";
/// Rows `prune` deletes per statement.
pub const PRUNE_BATCH: i64 = 1000;

const SCHEMA: &str = include_str!("sql/schema.sql");
const ACQUIRE: &str = include_str!("sql/acquire.sql");
const SETTLE: &str = include_str!("sql/settle.sql");
const RENEW: &str = include_str!("sql/renew.sql");
const RELEASE: &str = include_str!("sql/release.sql");
const GET: &str = include_str!("sql/get.sql");
const LIST: &str = include_str!("sql/list.sql");
const RECENT: &str = include_str!("sql/recent.sql");
const STATS: &str = include_str!("sql/stats.sql");
const PRUNE: &str = include_str!("sql/prune.sql");
const CLEAR: &str = include_str!("sql/clear.sql");
const EXPIRE: &str = include_str!("sql/expire.sql");
const VERSION: &str = include_str!("sql/version.sql");
const WATCH: &str = include_str!("sql/watch.sql");
const SESSION: &str = include_str!("sql/session.sql");

/// A validated table name: `name` or `schema.name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// As the user wrote it.
    pub name: String,
    /// Each part double-quoted: `"schema"."name"`.
    pub quoted: String,
    /// The expiry index's name (quoted, unqualified: it lives in the table's schema).
    pub index: String,
    /// The NOTIFY channel settles on this table are announced on.
    pub channel: String,
}

fn check_part(part: &str, whole: &str) -> StoreResult<()> {
    let mut chars = part.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') || part.len() > 63 {
        return Err(StoreFailure::new(format!(
            "invalid table name {whole:?}: use `name` or `schema.name`, each part 1 to 63 characters of \
             letters, digits and underscores, not starting with a digit (default {DEFAULT_TABLE})"
        )));
    }
    Ok(())
}

impl Table {
    pub fn parse(name: &str) -> StoreResult<Self> {
        let parts: Vec<&str> = name.split('.').collect();
        if parts.len() > 2 {
            return Err(StoreFailure::new(format!(
                "invalid table name {name:?}: at most one dot, as in `schema.name`"
            )));
        }
        for part in &parts {
            check_part(part, name)?;
        }
        let quoted = parts
            .iter()
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(".");
        let base = parts.last().copied().unwrap_or(DEFAULT_TABLE);
        // Identifiers are cut at 63 bytes by the server; keep the suffix by cutting the base.
        let index = format!("\"{}_expires_at_idx\"", &base[..base.len().min(63 - 15)]);
        let digest = Sha256::digest(quoted.as_bytes());
        let channel = format!("idempotent_tools_{}", crate::hashing::hex(&digest[..8]));
        Ok(Table {
            name: name.to_string(),
            quoted,
            index,
            channel,
        })
    }

    fn fill(&self, sql: &str) -> String {
        sql.replace("{table_text}", &self.quoted)
            .replace("{table}", &self.quoted)
            .replace("{index}", &self.index)
            .replace("{channel}", &self.channel)
            .replace("{version}", SCHEMA_VERSION)
    }
}

/// Every statement of the store, for one table. `schema` creates the table (it holds
/// several statements: send it as a simple query, not prepared).
#[napi(object)]
#[derive(Clone, Debug)]
pub struct PostgresSql {
    pub table: String,
    pub channel: String,
    pub version: String,
    pub schema: String,
    pub version_query: String,
    pub acquire: String,
    pub settle: String,
    pub renew: String,
    pub release: String,
    pub get: String,
    pub list: String,
    /// The inspector's listing: newest first, filtered and cut in the query.
    pub recent: String,
    pub stats: String,
    pub prune: String,
    pub clear: String,
    /// Steps' expiry (see `expire.sql`).
    pub expire: String,
    pub watch: String,
    /// PostgresStore's settings for its own connections (a simple query, several statements).
    pub session: String,
}

impl PostgresSql {
    pub fn for_table(t: &Table) -> Self {
        PostgresSql {
            table: t.quoted.clone(),
            channel: t.channel.clone(),
            version: SCHEMA_VERSION.to_string(),
            schema: t.fill(SCHEMA),
            version_query: t.fill(VERSION),
            acquire: t.fill(ACQUIRE),
            settle: t.fill(SETTLE),
            renew: t.fill(RENEW),
            release: t.fill(RELEASE),
            get: t.fill(GET),
            list: t.fill(LIST),
            recent: t.fill(RECENT),
            stats: t.fill(STATS),
            prune: t.fill(PRUNE),
            clear: t.fill(CLEAR),
            expire: t.fill(EXPIRE),
            watch: t.fill(WATCH),
            session: SESSION.to_string(),
        }
    }
}

/// The store's SQL for `table` (default `idempotent_tools_records`), for
/// `idempotent-tools/pg`. Throws on a table name that is not `name` or `schema.name`.
#[napi(js_name = "postgresSql")]
pub fn postgres_sql(table: Option<String>) -> napi::Result<PostgresSql> {
    let table = Table::parse(table.as_deref().unwrap_or(DEFAULT_TABLE))?;
    Ok(PostgresSql::for_table(&table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_validated_and_quoted() {
        let t = Table::parse("idempotent_tools_records").unwrap();
        assert_eq!(t.quoted, "\"idempotent_tools_records\"");
        assert_eq!(
            Table::parse("app.Calls").unwrap().quoted,
            "\"app\".\"Calls\""
        );
        for bad in [
            "",
            "a.b.c",
            "1abc",
            "a;drop",
            "a\"b",
            "a b",
            ".x",
            "x.",
            &"x".repeat(64),
        ] {
            let err = Table::parse(bad).unwrap_err();
            assert!(err.message.contains("invalid table name"), "{bad}: {err}");
        }
    }

    #[test]
    fn every_placeholder_is_filled() {
        let sql = PostgresSql::for_table(&Table::parse("s.t").unwrap());
        for text in [
            &sql.schema,
            &sql.acquire,
            &sql.settle,
            &sql.renew,
            &sql.release,
            &sql.get,
            &sql.list,
            &sql.recent,
            &sql.stats,
            &sql.prune,
            &sql.clear,
            &sql.watch,
        ] {
            assert!(
                !text.contains("{table")
                    && !text.contains("{channel}")
                    && !text.contains("{index}"),
                "{text}"
            );
        }
        assert!(sql.channel.starts_with("idempotent_tools_") && sql.channel.len() == 17 + 16);
    }
}
