//! The SQLite store below the napi layer: opening, identity, and the atomic claim.

use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use rusqlite::Connection;

use super::open::{self, Durability, Settings, APPLICATION_ID, SCHEMA_VERSION};
use super::queries;
use crate::claim::AcquireRequest;
use crate::clock::now_ms;
use crate::record::COMPLETED;

fn settings() -> Settings {
    Settings {
        durability: Durability::Full,
        busy_timeout: Duration::from_secs(5),
    }
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "idempotent-tools-rs-{}-{}",
        std::process::id(),
        crate::token::new_token()
    ));
    dir.join(name)
}

fn open_store(path: &std::path::Path) -> Connection {
    open::prepare_path(path).unwrap();
    let conn = open::connect(path, &settings()).unwrap();
    open::initialize(&conn, path, &settings()).unwrap();
    conn
}

fn request(key: &str, fingerprint: &str) -> AcquireRequest {
    AcquireRequest {
        key: key.into(),
        name: "op".into(),
        fingerprint: fingerprint.into(),
        lease_ms: 60_000.0,
        ttl_ms: None,
        force: false,
    }
}

#[test]
fn a_new_file_gets_wal_our_identity_and_private_modes() {
    let path = temp_path("store.db");
    let conn = open_store(&path);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let app: i32 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .unwrap();
    assert_eq!(app, APPLICATION_ID);
    let version: i32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
    }
}

#[test]
fn a_newer_schema_is_refused_with_advice() {
    let path = temp_path("store.db");
    let conn = open_store(&path);
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    let again = open::connect(&path, &settings()).unwrap();
    let err = open::initialize(&again, &path, &settings()).unwrap_err();
    assert!(err.message.contains("newer idempotent-tools"), "{err}");
    assert!(err.message.contains(&path.display().to_string()), "{err}");
}

#[test]
fn a_foreign_database_is_refused_and_left_unchanged() {
    let path = temp_path("app.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let other = Connection::open(&path).unwrap();
    other
        .execute_batch("CREATE TABLE users (id INTEGER)")
        .unwrap();
    drop(other);
    let before = std::fs::read(&path).unwrap();
    let conn = open::connect(&path, &settings()).unwrap();
    let err = open::initialize(&conn, &path, &settings()).unwrap_err();
    assert!(err.message.contains("some other program"), "{err}");
    drop(conn);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_corrupt_file_is_refused_naming_the_path() {
    let path = temp_path("junk.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let err = open::connect(&path, &settings())
        .and_then(|conn| open::initialize(&conn, &path, &settings()))
        .unwrap_err();
    assert!(
        err.message.contains("not an idempotent-tools store"),
        "{err}"
    );
    assert!(err.message.contains(&path.display().to_string()), "{err}");
}

#[test]
fn racing_connections_on_a_new_file_open_it_and_get_exactly_one_winner() {
    let path = temp_path("race.db");
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (path, barrier) = (path.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let conn = open_store(&path);
                conn.execute_batch("BEGIN IMMEDIATE").unwrap();
                let outcome = queries::acquire(&conn, &request("k", "fp"), now_ms()).unwrap();
                conn.execute_batch("COMMIT").unwrap();
                outcome.acquired
            })
        })
        .collect();
    let winners = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|won| *won)
        .count();
    assert_eq!(winners, 1);
}

#[test]
fn settle_needs_the_current_token() {
    let path = temp_path("fence.db");
    let conn = open_store(&path);
    let claim = queries::acquire(&conn, &request("k", "fp"), now_ms()).unwrap();
    let token = claim.token.unwrap();
    assert!(!queries::settle(
        &conn,
        "k",
        "not-the-token",
        COMPLETED,
        Some("1"),
        None,
        None,
        now_ms()
    )
    .unwrap());
    assert!(queries::settle(
        &conn,
        "k",
        &token,
        COMPLETED,
        Some("1"),
        None,
        Some(1000.0),
        now_ms()
    )
    .unwrap());
    assert!(!queries::settle(
        &conn,
        "k",
        &token,
        COMPLETED,
        Some("2"),
        None,
        None,
        now_ms()
    )
    .unwrap());
    let record = queries::read(&conn, "k").unwrap().unwrap();
    assert_eq!(record.result.as_deref(), Some("1"));
    assert_eq!(record.token, None);
    assert!(record.expires_at.is_some());
}
