//! Records of format 1 (a hash per key) met by this version, and processes of both versions
//! on one server. The older version here is its own scripts (testdata/format1/, copied
//! unchanged from the last version that wrote hashes): everything it did to a record went
//! through them (its replay read, an HMGET of a completed record, and HGETALL in get and
//! listings only read).
//!
//! What must hold: every format-1 record is read as it is and migrated when a call of this
//! version claims it or finds it settled; a pending one whose lease is alive stays a hash,
//! so that its owner (an older process) can still renew and settle it; and an older process
//! and a newer one racing on one key never both win. An older process that meets a record
//! of format 2 gets an error (WRONGTYPE) from every script: it never claims, renews or
//! settles it, so it fails safe (StoreError, its fn does not run).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

use super::tests::{admin, redis_url, req, settle_req, store};
use super::*;
use crate::record::FAILED;

/// A process of the older version: its scripts on its own connection.
#[derive(Clone)]
struct Old {
    con: MultiplexedConnection,
    prefix: String,
}

/// What the older version's acquire answered.
#[derive(Debug, PartialEq)]
enum OldClaim {
    Claimed {
        attempts: i64,
        taken_over: bool,
    },
    /// Refused; the status of the record in the way.
    Refused(String),
}

fn old_script(name: &str) -> Script {
    Script::new(match name {
        "acquire" => include_str!("testdata/format1/acquire.lua"),
        "settle" => include_str!("testdata/format1/settle.lua"),
        "renew" => include_str!("testdata/format1/renew.lua"),
        "release" => include_str!("testdata/format1/release.lua"),
        _ => include_str!("testdata/format1/clear.lua"),
    })
}

impl Old {
    async fn new(prefix: &str) -> Old {
        let client = redis::Client::open(redis_url()).unwrap();
        Old {
            con: client.get_multiplexed_async_connection().await.unwrap(),
            prefix: prefix.to_string(),
        }
    }

    async fn run(&self, name: &str, key: &str, args: &[String]) -> redis::RedisResult<Value> {
        let script = old_script(name);
        let mut invocation = script.key(format!("{}{key}", self.prefix));
        for a in args {
            invocation.arg(a);
        }
        invocation.invoke_async(&mut self.con.clone()).await
    }

    /// The older version's acquire (lua/acquire.lua of format 1), under `token`.
    async fn acquire(
        &self,
        key: &str,
        fp: &str,
        token: &str,
        lease_ms: i64,
        force: bool,
    ) -> redis::RedisResult<OldClaim> {
        let args = [
            "charge".into(),
            fp.into(),
            token.into(),
            lease_ms.to_string(),
            String::new(),
            if force { "1" } else { "0" }.into(),
            key.into(),
            String::new(),
        ];
        let reply = self.run("acquire", key, &args).await?;
        let Value::Array(items) = reply else {
            panic!("{reply:?}")
        };
        Ok(match items.as_slice() {
            [Value::Int(1), Value::Int(a), Value::Int(t)] => OldClaim::Claimed {
                attempts: *a,
                taken_over: *t == 1,
            },
            [Value::Int(0), hash] => {
                let f = legacy::fields(hash).unwrap();
                OldClaim::Refused(f["status"].clone())
            }
            other => panic!("{other:?}"),
        })
    }

    async fn complete(
        &self,
        key: &str,
        token: &str,
        result: &str,
        ttl_ms: Option<i64>,
    ) -> redis::RedisResult<bool> {
        let args = [
            token.into(),
            "completed".into(),
            "1".into(),
            result.into(),
            "0".into(),
            String::new(),
            ttl_ms.map(|t| t.to_string()).unwrap_or_default(),
            String::new(),
        ];
        Ok(self.run("settle", key, &args).await? == Value::Int(1))
    }

    async fn fail(&self, key: &str, token: &str) -> redis::RedisResult<bool> {
        let args = [
            token.into(),
            "failed".into(),
            "0".into(),
            String::new(),
            "1".into(),
            r#"{"name":"Error","message":"boom"}"#.into(),
            String::new(),
            String::new(),
        ];
        Ok(self.run("settle", key, &args).await? == Value::Int(1))
    }

    async fn renew(&self, key: &str, token: &str, lease_ms: i64) -> redis::RedisResult<bool> {
        let args = [token.into(), lease_ms.to_string()];
        Ok(self.run("renew", key, &args).await? == Value::Int(1))
    }

    /// The older version's replay read (an HMGET of the record's status and result).
    async fn read(&self, key: &str) -> redis::RedisResult<Vec<Option<String>>> {
        redis::cmd("HMGET")
            .arg(format!("{}{key}", self.prefix))
            .arg("status")
            .arg("result")
            .query_async(&mut self.con.clone())
            .await
    }
}

fn key_type(con: &mut redis::Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(con).unwrap()
}

fn pttl(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

#[tokio::test]
async fn every_state_of_a_format_1_record_is_read_and_migrated_when_met() {
    let (s, prefix) = store();
    let st = &s.inner;
    let old = Old::new(&prefix).await;
    let mut con = admin(&redis_url());
    let rkey = |k: &str| format!("{prefix}{k}");

    // The older process writes one record of every kind, through its own scripts.
    let tokens: Vec<String> = (0..8).map(|_| new_token()).collect();
    let claim = |i: usize, key: &'static str, lease: i64| {
        let (old, token) = (&old, tokens[i].clone());
        async move {
            let c = old.acquire(key, "fp", &token, lease, false).await.unwrap();
            assert!(
                matches!(c, OldClaim::Claimed { attempts: 1, .. }),
                "{key}: {c:?}"
            );
            token
        }
    };
    let done = claim(0, "done", 60_000).await;
    assert!(old.complete("done", &done, "\"d\"", None).await.unwrap());
    let done_ttl = claim(1, "done-ttl", 60_000).await;
    assert!(old
        .complete("done-ttl", &done_ttl, "7", Some(60_000))
        .await
        .unwrap());
    let failed = claim(2, "failed", 60_000).await;
    assert!(old.fail("failed", &failed).await.unwrap());
    let dead = claim(3, "dead", 1).await;
    let live = claim(4, "live", 60_000).await;
    let forced = claim(5, "forced", 60_000).await;
    let _other = claim(6, "other", 60_000).await;
    let stuck = claim(7, "stuck", 60_000).await;
    tokio::time::sleep(Duration::from_millis(5)).await; // "dead"'s 1 ms lease runs out

    // Read as they are.
    let shown = st.get("done".into()).await.unwrap().unwrap();
    assert_eq!(
        (
            shown.status.as_str(),
            shown.result.as_deref(),
            shown.attempts
        ),
        (COMPLETED, Some("\"d\""), 1)
    );
    let shown = st.get("live".into()).await.unwrap().unwrap();
    assert_eq!(shown.status, PENDING);
    assert!(shown.lease_expires_at.unwrap() > shown.created_at);
    assert_eq!(st.list(None, None).await.unwrap().len(), 8);
    assert_eq!(st.stats().await.unwrap().pending, 5);
    assert_eq!(
        key_type(&mut con, &rkey("done")),
        "hash",
        "reads migrate nothing"
    );

    // Completed: replayed, and migrated (its expiry kept).
    for (key, result) in [("done", "\"d\""), ("done-ttl", "7")] {
        let o = st
            .acquire(req(key, "fp", 10_000.0, None, false))
            .await
            .unwrap();
        assert!(!o.acquired);
        assert_eq!(o.record.unwrap().result.as_deref(), Some(result));
        assert_eq!(key_type(&mut con, &rkey(key)), "string", "{key}");
        let again = st
            .acquire(req(key, "fp", 10_000.0, None, false))
            .await
            .unwrap();
        assert_eq!(
            again.record.unwrap().result.as_deref(),
            Some(result),
            "{key} after migration"
        );
    }
    assert_eq!(pttl(&mut con, &rkey("done")), -1);
    let ttl = pttl(&mut con, &rkey("done-ttl"));
    assert!(
        ttl > 0 && ttl <= 60_000,
        "the migrated record keeps its expiry: {ttl}"
    );
    // ... and the older process, which could replay it before, now fails safe.
    assert!(old
        .acquire("done", "fp", &new_token(), 60_000, false)
        .await
        .is_err());

    // Failed: claimed again (attempts counted, created_at kept), migrated.
    let before = st.get("failed".into()).await.unwrap().unwrap();
    let o = st
        .acquire(req("failed", "fp", 10_000.0, None, false))
        .await
        .unwrap();
    assert!(o.acquired && o.attempts == 2 && !o.taken_over);
    let after = st.get("failed".into()).await.unwrap().unwrap();
    assert_eq!(
        (after.status.as_str(), after.created_at),
        (PENDING, before.created_at)
    );
    assert_eq!(key_type(&mut con, &rkey("failed")), "string");

    // Pending, its owner's lease run out: taken over (reconcile is asked), migrated; the
    // old owner can no longer renew or settle it (an error, never applied).
    let o = st
        .acquire(req("dead", "fp", 10_000.0, None, false))
        .await
        .unwrap();
    assert!(o.acquired && o.attempts == 2 && o.taken_over);
    assert!(old.renew("dead", &dead, 60_000).await.is_err());
    assert!(old.complete("dead", &dead, "1", None).await.is_err());
    let token = o.token.unwrap();
    assert!(st
        .settle(COMPLETED, settle_req("dead", &token, Some("2"), None, None))
        .await
        .unwrap());
    assert_eq!(
        st.get("dead".into())
            .await
            .unwrap()
            .unwrap()
            .result
            .as_deref(),
        Some("2")
    );

    // Pending, its lease alive: refused and left a hash, so its owner can still renew and
    // settle it; then it replays (and is migrated).
    let o = st
        .acquire(req("live", "fp", 10_000.0, None, false))
        .await
        .unwrap();
    assert!(!o.acquired);
    assert_eq!(o.record.unwrap().status, PENDING);
    assert_eq!(key_type(&mut con, &rkey("live")), "hash");
    assert!(old.renew("live", &live, 60_000).await.unwrap());
    assert!(old.complete("live", &live, "\"l\"", None).await.unwrap());
    let o = st
        .acquire(req("live", "fp", 10_000.0, None, false))
        .await
        .unwrap();
    assert_eq!(o.record.unwrap().result.as_deref(), Some("\"l\""));

    // 'retry' on a live one: claimed (attempts counted), migrated; the old owner is fenced.
    let o = st
        .acquire(req("forced", "fp", 10_000.0, None, true))
        .await
        .unwrap();
    assert!(o.acquired && o.attempts == 2 && !o.taken_over);
    assert!(old.complete("forced", &forced, "1", None).await.is_err());
    assert_eq!(
        st.get("forced".into()).await.unwrap().unwrap().status,
        PENDING
    );

    // Another fingerprint: refused with the record (the wrapper reports the mismatch).
    let o = st
        .acquire(req("other", "fp2", 10_000.0, None, false))
        .await
        .unwrap();
    assert_eq!(o.record.unwrap().fingerprint, "fp");
    assert_eq!(key_type(&mut con, &rkey("other")), "hash");

    // An operator's release of a stuck one: failed, migrated, its owner fenced.
    assert!(st.release("stuck".into(), false).await.unwrap());
    let r = st.get("stuck".into()).await.unwrap().unwrap();
    assert_eq!(r.status, FAILED);
    assert!(r.error.unwrap().contains("released"));
    assert!(old.complete("stuck", &stuck, "1", None).await.is_err());

    // clear() deletes records of both formats (and only this store's).
    assert_eq!(st.clear(None).await.unwrap(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn old_and_new_processes_racing_on_one_key_never_both_win() {
    let (s, prefix) = store();
    // Two older processes (a connection each) and the newer store.
    let olds = [Old::new(&prefix).await, Old::new(&prefix).await];
    let old = &olds[0];
    // Both sides connected and their scripts loaded before the race.
    assert!(
        s.inner
            .acquire(req("warm", "fp", 60_000.0, None, false))
            .await
            .unwrap()
            .acquired
    );
    let _ = old.acquire("warm", "fp", &new_token(), 60_000, false).await;
    s.inner.clear(Some("warm".into())).await.unwrap();
    const KEYS: usize = 60;
    // Every key raced by two processes of each version at once, each racer a task of its
    // own on a runtime of four threads: the server interleaves them as they arrive.
    let mut races = tokio::task::JoinSet::new();
    for k in 0..KEYS {
        let key = format!("race{k}");
        for n in 0..4usize {
            // Who is spawned first alternates from key to key.
            let side = n + k % 2;
            let (inner, old, key) = (s.inner.clone(), olds[n / 2].clone(), key.clone());
            races.spawn(async move {
                if side % 2 == 0 {
                    let token = new_token();
                    match old.acquire(&key, "fp", &token, 60_000, false).await {
                        Ok(OldClaim::Claimed { .. }) => Some((key, false, token)),
                        // Refused (the other's claim), or an error (a record of format 2):
                        // either way the older process does not run.
                        _ => None,
                    }
                } else {
                    let o = inner
                        .acquire(req(&key, "fp", 60_000.0, None, false))
                        .await
                        .unwrap();
                    o.acquired.then(|| (key, true, o.token.unwrap()))
                }
            });
        }
    }
    let mut winners: Vec<(String, bool, String)> = Vec::new();
    while let Some(done) = races.join_next().await {
        winners.extend(done.unwrap());
    }
    let mut per_key = std::collections::HashMap::new();
    for (key, _, _) in &winners {
        *per_key.entry(key.clone()).or_insert(0) += 1;
    }
    assert_eq!(per_key.len(), KEYS, "every key has a winner");
    assert!(per_key.values().all(|&n| n == 1), "{per_key:?}");
    // (Which version wins depends on how the server interleaves the two connections; the
    // orders one by one are in the other tests: a newer claim refused by an older live
    // claim, an older claim failing on a newer record.)
    let new_won = winners.iter().filter(|w| w.1).count();
    eprintln!("old and new racing: the newer version won {new_won} of {KEYS} keys");

    // Each winner settles through its own version; then nobody of either version claims
    // any of the keys again: the newer replays every one, the older replays its own
    // records or fails safe (an error) on the newer's.
    for (key, new, token) in &winners {
        if *new {
            assert!(s
                .inner
                .settle(COMPLETED, settle_req(key, token, Some("1"), None, None))
                .await
                .unwrap());
        } else {
            assert!(old.complete(key, token, "1", None).await.unwrap());
        }
    }
    for (key, new, _) in &winners {
        let claim = old.acquire(key, "fp", &new_token(), 60_000, false).await;
        if *new {
            assert!(claim.is_err(), "{key}: {claim:?}");
        } else {
            assert_eq!(claim.unwrap(), OldClaim::Refused(COMPLETED.into()));
            assert_eq!(old.read(key).await.unwrap()[1].as_deref(), Some("1"));
        }
        let o = s
            .inner
            .acquire(req(key, "fp", 60_000.0, None, false))
            .await
            .unwrap();
        assert_eq!(o.record.unwrap().result.as_deref(), Some("1"), "{key}");
    }
    assert_eq!(s.inner.clear(None).await.unwrap(), KEYS as u32);
}

#[tokio::test]
async fn an_old_process_never_claims_renews_settles_or_deletes_a_format_2_record() {
    let (s, prefix) = store();
    let st = &s.inner;
    let old = Old::new(&prefix).await;
    let p = st
        .acquire(req("p", "fp", 60_000.0, None, false))
        .await
        .unwrap();
    let token = p.token.unwrap();
    let c = st
        .acquire(req("c", "fp", 60_000.0, None, false))
        .await
        .unwrap();
    assert!(st
        .settle(
            COMPLETED,
            settle_req("c", &c.token.unwrap(), Some("1"), None, None)
        )
        .await
        .unwrap());
    for key in ["p", "c"] {
        for force in [false, true] {
            assert!(
                old.acquire(key, "fp", &new_token(), 1, force)
                    .await
                    .is_err(),
                "{key}"
            );
        }
        assert!(old.renew(key, &token, 60_000).await.is_err());
        assert!(old.complete(key, &token, "2", None).await.is_err());
        assert!(old.run("release", key, &[]).await.is_err());
        assert_eq!(
            old.run("clear", key, &[key.into()]).await.unwrap(),
            Value::Int(0)
        );
    }
    assert_eq!(st.get("p".into()).await.unwrap().unwrap().status, PENDING);
    assert!(st
        .settle(COMPLETED, settle_req("p", &token, Some("3"), None, None))
        .await
        .unwrap());
    assert_eq!(
        st.get("c".into()).await.unwrap().unwrap().result.as_deref(),
        Some("1")
    );
    assert_eq!(st.clear(None).await.unwrap(), 2);
}
