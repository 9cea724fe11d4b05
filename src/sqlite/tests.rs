//! The SQLite store below the napi layer: opening, identity, and the atomic claim.

use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use rusqlite::Connection;

use super::open::{self, Durability, Settings, APPLICATION_ID};
use super::queries::{self, Scope, Settle};
use super::schema::{SCHEMA_V1, SCHEMA_VERSION};
use crate::claim::AcquireRequest;
use crate::clock::Now;
use crate::record::{COMPLETED, FAILED};

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
        meta: None,
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
                let outcome =
                    queries::acquire(&conn, "", &request("k", "fp"), &Now::current()).unwrap();
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

fn completion<'a>(
    key: &'a str,
    token: &'a str,
    result: &'a str,
    ttl_ms: Option<f64>,
) -> Settle<'a> {
    Settle {
        key,
        token,
        status: COMPLETED,
        result: Some(result),
        error: None,
        ttl_ms,
        duration_ms: Some(12.4),
    }
}

#[test]
fn settle_needs_the_current_token() {
    let path = temp_path("fence.db");
    let conn = open_store(&path);
    let claim = queries::acquire(&conn, "", &request("k", "fp"), &Now::current()).unwrap();
    let token = claim.token.unwrap();
    assert!(!queries::settle(
        &conn,
        "",
        &completion("k", "not-the-token", "1", None),
        &Now::current()
    )
    .unwrap());
    assert!(queries::settle(
        &conn,
        "",
        &completion("k", &token, "1", Some(1000.0)),
        &Now::current()
    )
    .unwrap());
    assert!(!queries::settle(
        &conn,
        "",
        &completion("k", &token, "2", None),
        &Now::current()
    )
    .unwrap());
    let record = queries::read(&conn, &Scope::Project(String::new()), "k")
        .unwrap()
        .unwrap();
    assert_eq!(record.result.as_deref(), Some("1"));
    assert_eq!(record.token, None);
    assert!(record.expires_at.is_some());
    assert_eq!(record.duration_ms, Some(12));
}

#[test]
fn release_for_reconcile_leaves_a_dead_claim_and_release_without_fails_it() {
    let path = temp_path("release.db");
    let conn = open_store(&path);
    let project = Scope::Project(String::new());
    for (key, reconcile) in [("a", true), ("b", false)] {
        let old = queries::acquire(&conn, "", &request(key, "fp"), &Now::current())
            .unwrap()
            .token
            .unwrap();
        let now = Now::current();
        assert!(queries::release(&conn, &project, key, now.wall, reconcile).unwrap());
        let r = queries::read(&conn, &project, key).unwrap().unwrap();
        assert_eq!(r.status, if reconcile { "pending" } else { FAILED });
        assert!(!r.lease_alive(&Now::current()), "nobody holds it");
        assert_eq!(r.error.is_some(), !reconcile);
        // The old owner is fenced.
        assert!(!queries::renew(&conn, "", key, &old, 60_000.0, &Now::current()).unwrap());
        assert!(!queries::settle(
            &conn,
            "",
            &completion(key, &old, "1", None),
            &Now::current()
        )
        .unwrap());
        // Reconcile: a takeover (reconcile is asked); without: a new attempt after a failure.
        let next = queries::acquire(&conn, "", &request(key, "fp"), &Now::current()).unwrap();
        assert!(next.acquired);
        assert_eq!((next.attempts, next.taken_over), (2, reconcile));
        assert!(!queries::release(&conn, &project, "nothing", now.wall, reconcile).unwrap());
    }
}

#[test]
fn expire_settled_gives_settled_records_an_expiry_and_leaves_pending_ones() {
    let path = temp_path("expire.db");
    let conn = open_store(&path);
    let project = Scope::Project("p".into());
    let done = queries::acquire(&conn, "p", &request("done", "fp"), &Now::current()).unwrap();
    assert!(queries::settle(
        &conn,
        "p",
        &completion("done", &done.token.unwrap(), "1", None),
        &Now::current()
    )
    .unwrap());
    queries::acquire(&conn, "p", &request("open", "fp"), &Now::current()).unwrap();
    let keys = ["done".to_string(), "open".to_string(), "none".to_string()];
    assert_eq!(
        queries::expire_settled(&conn, "p", &keys, 4_000_000_000_000).unwrap(),
        1
    );
    let read = |key: &str| queries::read(&conn, &project, key).unwrap().unwrap();
    assert_eq!(read("done").expires_at, Some(4_000_000_000_000));
    assert_eq!(read("open").expires_at, None);
    // Only the store's own project.
    assert_eq!(
        queries::expire_settled(&conn, "other", &keys, 1).unwrap(),
        0
    );
    assert_eq!(queries::expire_settled(&conn, "p", &keys, 1).unwrap(), 1);
    assert!(read("done").expired(Now::current()));
}

#[test]
fn projects_sharing_a_file_never_meet() {
    let path = temp_path("shared.db");
    let conn = open_store(&path);
    let now = Now::current();
    let a = queries::acquire(&conn, "project-a", &request("k", "fp"), &now).unwrap();
    let b = queries::acquire(&conn, "project-b", &request("k", "fp"), &now).unwrap();
    assert!(
        a.acquired && b.acquired,
        "one key, two projects: two claims"
    );
    let a_token = a.token.unwrap();
    assert!(queries::settle(
        &conn,
        "project-a",
        &completion("k", &a_token, "\"a\"", None),
        &now
    )
    .unwrap());
    // A's token does not settle B's record, even under B's namespace.
    assert!(!queries::settle(
        &conn,
        "project-b",
        &completion("k", &a_token, "\"x\"", None),
        &now
    )
    .unwrap());
    let scope = |ns: &str| Scope::Project(ns.to_string());
    assert_eq!(
        queries::read(&conn, &scope("project-a"), "k")
            .unwrap()
            .unwrap()
            .result
            .as_deref(),
        Some("\"a\"")
    );
    assert_eq!(
        queries::read(&conn, &scope("project-b"), "k")
            .unwrap()
            .unwrap()
            .status,
        "pending"
    );
    assert!(queries::read(&conn, &scope(""), "k").unwrap().is_none());
    let every = queries::list(&conn, &Scope::Every, None, None, &now).unwrap();
    let mut namespaces: Vec<_> = every.iter().map(|r| r.namespace.clone().unwrap()).collect();
    namespaces.sort();
    assert_eq!(namespaces, ["project-a", "project-b"]);
    assert_eq!(queries::clear(&conn, &scope("project-a"), None).unwrap(), 1);
    assert_eq!(
        queries::list(&conn, &Scope::Every, None, None, &now)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn meta_is_kept_as_given() {
    let path = temp_path("meta.db");
    let conn = open_store(&path);
    let meta = r#"{"scope":"thread-1","toolCallId":"call_0","b":1,"a":2}"#;
    let req = AcquireRequest {
        meta: Some(meta.into()),
        ..request("k", "fp")
    };
    queries::acquire(&conn, "", &req, &Now::current()).unwrap();
    let record = queries::read(&conn, &Scope::Project(String::new()), "k")
        .unwrap()
        .unwrap();
    assert_eq!(record.meta.as_deref(), Some(meta));
    assert_eq!(record.namespace.as_deref(), Some(""));
}

#[test]
fn a_version_1_file_is_migrated_in_place_and_keeps_its_records() {
    let path = temp_path("v1.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    {
        let old = Connection::open(&path).unwrap();
        old.execute_batch("PRAGMA journal_mode = WAL").unwrap();
        old.execute_batch(SCHEMA_V1).unwrap();
        old.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        old.pragma_update(None, "user_version", 1).unwrap();
        old.execute(
            "INSERT INTO records VALUES ('done', 'charge', 'fp', 'completed', NULL, '{\"id\":1}', NULL, 1, 10, 20, NULL, NULL),
                                       ('busy', 'charge', 'fp', 'pending', 'tok', NULL, NULL, 2, 30, 30, NULL, ?1)",
            [Now::current().wall + 60_000],
        )
        .unwrap();
    }
    let conn = open_store(&path);
    let version: i32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let scope = Scope::Project(String::new());
    let done = queries::read(&conn, &scope, "done").unwrap().unwrap();
    assert_eq!(
        (
            done.status.as_str(),
            done.result.as_deref(),
            done.created_at
        ),
        ("completed", Some("{\"id\":1}"), 10)
    );
    let busy = queries::read(&conn, &scope, "busy").unwrap().unwrap();
    assert_eq!(
        (busy.status.as_str(), busy.token.as_deref(), busy.attempts),
        ("pending", Some("tok"), 2)
    );
    // Its owner (an old process) still holds a live lease: not taken over, from '' or a project.
    let in_project =
        queries::acquire(&conn, "shop", &request("busy", "fp"), &Now::current()).unwrap();
    assert!(!in_project.acquired);
    assert!(
        !queries::acquire(&conn, "", &request("busy", "fp"), &Now::current())
            .unwrap()
            .acquired
    );
    // And the old owner's completion still lands.
    assert!(queries::settle(
        &conn,
        "",
        &completion("busy", "tok", "2", None),
        &Now::current()
    )
    .unwrap());
    // A project's default store (namespace 'shop') still honours the records from before
    // namespaces: the finished call replays, and another call under the same key is
    // claimed in the project's own namespace.
    let now = Now::current();
    let replay = queries::acquire(&conn, "shop", &request("done", "fp"), &now).unwrap();
    assert!(!replay.acquired);
    assert_eq!(replay.record.unwrap().result.as_deref(), Some("{\"id\":1}"));
    let other = queries::acquire(&conn, "shop", &request("done", "other-call"), &now).unwrap();
    assert!(
        other.acquired,
        "a legacy record of another call is not this call's"
    );
    let shop = Scope::Project("shop".into());
    assert_eq!(
        queries::read(&conn, &shop, "done")
            .unwrap()
            .unwrap()
            .fingerprint,
        "other-call"
    );
    // Opening it again changes nothing.
    drop(conn);
    let again = open_store(&path);
    assert_eq!(
        queries::list(&again, &scope, None, None, &Now::current())
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn any_result_and_error_text_is_kept_byte_for_byte() {
    let path = temp_path("exact.db");
    let conn = open_store(&path);
    let texts = [
        r#""\ud83d""#.to_string(),
        r#"{"b":"x\udc00","a":1}"#.to_string(),
        format!("{}{}", "[".repeat(1000), "]".repeat(1000)),
        "{not json".to_string(),
        String::new(),
    ];
    let project = Scope::Project(String::new());
    for (i, text) in texts.iter().enumerate() {
        for status in [COMPLETED, FAILED] {
            let key = format!("{i}-{status}");
            let token = queries::acquire(&conn, "", &request(&key, "fp"), &Now::current())
                .unwrap()
                .token
                .unwrap();
            let (result, error) = if status == COMPLETED {
                (Some(text.as_str()), None)
            } else {
                (None, Some(text.as_str()))
            };
            let settle = Settle {
                key: &key,
                token: &token,
                status,
                result,
                error,
                ttl_ms: None,
                duration_ms: None,
            };
            assert!(queries::settle(&conn, "", &settle, &Now::current()).unwrap());
            let r = queries::read(&conn, &project, &key).unwrap().unwrap();
            assert_eq!(
                if status == COMPLETED {
                    r.result
                } else {
                    r.error
                }
                .as_deref(),
                Some(text.as_str())
            );
            if status == COMPLETED {
                let hit = queries::read_replay(&conn, "", &key, "fp", Now::current().wall)
                    .unwrap()
                    .unwrap();
                assert_eq!(hit.result.as_deref(), Some(text.as_str()));
            }
        }
    }
}
