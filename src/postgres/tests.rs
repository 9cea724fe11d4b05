//! Tests against a real PostgreSQL: `IDEMPOTENT_TOOLS_TEST_PG`, else
//! postgres://postgres@127.0.0.1:5432/pg_helper (`.ci/postgres.sh` makes sure it exists).
//! They fail, never skip, when it cannot be reached. Each test uses its own table.

use super::*;
use crate::record::FAILED;
use crate::test_requests::{req, settle_req};

fn pg_url() -> String {
    std::env::var("IDEMPOTENT_TOOLS_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/pg_helper".into())
}

struct Fixture {
    inner: Arc<Inner>,
    table: String,
}

impl Fixture {
    fn new() -> Self {
        Self::with_url(&pg_url())
    }

    fn with_url(url: &str) -> Self {
        Self::on_table(url, format!("rs_{}", &new_token()[..12]))
    }

    /// Another store on this fixture's table, as another process would have: its own
    /// connections.
    fn another_store(&self) -> Arc<Inner> {
        Self::on_table(&pg_url(), self.table.clone()).inner
    }

    fn on_table(url: &str, table: String) -> Self {
        let store = NativePostgresStore::from_options(PostgresOptions {
            url: url.into(),
            table: Some(table.clone()),
            pool_size: Some(2),
            connect_timeout_ms: None,
            command_timeout_ms: None,
            create_table: None,
        })
        .expect("options");
        Fixture {
            inner: store.inner,
            table,
        }
    }

    async fn drop_table(&self) {
        let client = self
            .inner
            .pool
            .connect("drop")
            .await
            .expect("PostgreSQL must be reachable for these tests");
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{}\"", self.table))
            .await
            .unwrap();
    }

    async fn sql(&self, text: &str) {
        let client = self.inner.pool.connect("sql").await.unwrap();
        client
            .batch_execute(&text.replace("{t}", &format!("\"{}\"", self.table)))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn claim_settle_replay_and_fencing() {
    let f = Fixture::new();
    let s = &f.inner;
    // This test's calls carry meta and a duration: kept with the record.
    let scoped = |force| AcquireRequest {
        meta: Some(r#"{"scope":"t-1"}"#.into()),
        ..req("k", "fp", 30_000.0, None, force)
    };
    let timed = |token: &str, result: &str| SettleRequest {
        duration_ms: Some(12.5),
        ..settle_req("k", token, Some(result), None, None)
    };
    let a = s.acquire(scoped(false)).await.unwrap();
    assert!(a.acquired && a.attempts == 1 && !a.taken_over);
    let token = a.token.unwrap();
    // In flight: refused, the record in the same reply; 'retry' claims it anew.
    let b = s
        .acquire(req("k", "fp", 30_000.0, None, false))
        .await
        .unwrap();
    assert!(!b.acquired);
    assert_eq!(b.record.as_ref().unwrap().status, "pending");
    assert_eq!(
        b.record.unwrap().meta.as_deref(),
        Some(r#"{"scope":"t-1"}"#)
    );
    let retry = s.acquire(scoped(true)).await.unwrap();
    assert!(retry.acquired && retry.attempts == 2);
    // The first owner's token no longer holds the record.
    assert!(!s
        .settle(COMPLETED, settle_req("k", &token, Some("1"), None, None))
        .await
        .unwrap());
    assert!(!s.renew("k".into(), token.clone(), 1000.0).await.unwrap());
    let t2 = retry.token.unwrap();
    assert!(s.renew("k".into(), t2.clone(), 30_000.0).await.unwrap());
    // Any text is kept exactly (the TypeScript layer decides what is storable).
    let text = "{\"b\":1,\"a\":\"\\ud800 é\"}   not json either";
    assert!(s.settle(COMPLETED, timed(&t2, text)).await.unwrap());
    // The same settle sent again (its reply lost) is recognised; another is refused.
    assert!(s.settle(COMPLETED, timed(&t2, text)).await.unwrap());
    assert!(!s
        .settle(COMPLETED, settle_req("k", &t2, Some("2"), None, None))
        .await
        .unwrap());
    let r = s.get("k".into()).await.unwrap().unwrap();
    assert_eq!(
        (
            r.status.as_str(),
            r.result.as_deref(),
            r.attempts,
            r.duration_ms
        ),
        ("completed", Some(text), 2, Some(12.5))
    );
    let replay = s
        .acquire(req("k", "fp", 30_000.0, None, true))
        .await
        .unwrap();
    assert!(!replay.acquired);
    assert_eq!(replay.record.unwrap().result.as_deref(), Some(text));
    let other = s
        .acquire(req("k", "other", 30_000.0, None, false))
        .await
        .unwrap();
    assert!(!other.acquired && other.record.unwrap().fingerprint == "fp");
    f.drop_table().await;
}

#[tokio::test]
async fn failed_runs_again_and_a_dead_lease_is_taken_over() {
    let f = Fixture::new();
    let s = &f.inner;
    let a = s
        .acquire(req("k", "fp", 30_000.0, None, false))
        .await
        .unwrap();
    assert!(s
        .settle(
            FAILED,
            settle_req(
                "k",
                a.token.as_ref().unwrap(),
                None,
                Some(r#"{"name":"E","message":"m"}"#),
                None
            )
        )
        .await
        .unwrap());
    let b = s.acquire(req("k", "fp", 1.0, None, false)).await.unwrap();
    assert!(b.acquired && b.attempts == 2 && !b.taken_over);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let c = s
        .acquire(req("k", "fp", 30_000.0, None, false))
        .await
        .unwrap();
    assert!(c.acquired && c.attempts == 3 && c.taken_over);
    // The dead owner's late settle is refused.
    assert!(!s
        .settle(
            COMPLETED,
            settle_req("k", b.token.as_ref().unwrap(), Some("1"), None, None)
        )
        .await
        .unwrap());
    assert!(s.release("k".into(), false).await.unwrap());
    assert_eq!(s.get("k".into()).await.unwrap().unwrap().status, "failed");
    assert!(!s
        .settle(
            COMPLETED,
            settle_req("k", c.token.as_ref().unwrap(), Some("1"), None, None)
        )
        .await
        .unwrap());
    f.drop_table().await;
}

#[tokio::test]
async fn expire_settled_gives_settled_rows_an_expiry_and_leaves_pending_ones() {
    let f = Fixture::new();
    let s = &f.inner;
    let done = s
        .acquire(req("done", "fp", 60_000.0, None, false))
        .await
        .unwrap();
    assert!(s
        .settle(
            COMPLETED,
            settle_req("done", done.token.as_ref().unwrap(), Some("1"), None, None)
        )
        .await
        .unwrap());
    s.acquire(req("open", "fp", 60_000.0, None, false))
        .await
        .unwrap();
    let at = crate::clock::now_ms() + 3_600_000;
    let keys = vec!["done".to_string(), "open".to_string(), "none".to_string()];
    assert_eq!(s.expire_settled(keys, at as f64).await.unwrap(), 1);
    assert_eq!(
        s.get("done".into()).await.unwrap().unwrap().expires_at,
        Some(at as f64)
    );
    assert_eq!(
        s.get("open".into()).await.unwrap().unwrap().expires_at,
        None
    );
    assert_eq!(s.expire_settled(vec!["done".into()], 1.0).await.unwrap(), 1);
    assert!(
        s.get("done".into()).await.unwrap().is_none(),
        "past it: absent"
    );
    f.drop_table().await;
}

#[tokio::test]
async fn release_for_reconcile_leaves_a_claim_nobody_holds_which_the_next_call_takes_over() {
    let f = Fixture::new();
    let s = &f.inner;
    let a = s
        .acquire(req("k", "fp", 600_000.0, None, false))
        .await
        .unwrap();
    assert!(s.release("k".into(), true).await.unwrap());
    let r = s.get("k".into()).await.unwrap().unwrap();
    assert_eq!(r.status, "pending");
    assert!(r.error.is_none());
    let old = a.token.clone().unwrap();
    assert!(!s.renew("k".into(), old.clone(), 600_000.0).await.unwrap());
    assert!(!s
        .settle(COMPLETED, settle_req("k", &old, Some("1"), None, None))
        .await
        .unwrap());
    let b = s
        .acquire(req("k", "fp", 30_000.0, None, false))
        .await
        .unwrap();
    assert!(b.acquired && b.taken_over && b.attempts == 2);
    assert!(s
        .settle(
            COMPLETED,
            settle_req("k", b.token.as_ref().unwrap(), Some("2"), None, None)
        )
        .await
        .unwrap());
    assert!(!s.release("k".into(), true).await.unwrap(), "not pending");
    f.drop_table().await;
}

#[tokio::test]
async fn expired_rows_count_as_absent_and_prune_deletes_them() {
    let f = Fixture::new();
    let s = &f.inner;
    for i in 0..5 {
        let k = format!("k{i}");
        let a = s
            .acquire(req(&k, "fp", 30_000.0, Some(1.0), false))
            .await
            .unwrap();
        assert!(s
            .settle(
                COMPLETED,
                settle_req(&k, a.token.as_ref().unwrap(), Some("1"), None, Some(1.0))
            )
            .await
            .unwrap());
    }
    let live = s
        .acquire(req("live", "fp", 30_000.0, None, false))
        .await
        .unwrap();
    assert!(live.acquired);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(s.get("k0".into()).await.unwrap().is_none());
    assert_eq!(s.list(None, None).await.unwrap().len(), 1);
    let stats = s.stats().await.unwrap();
    assert_eq!((stats.expired, stats.pending), (5, 1));
    // An expired row is claimed fresh, with another fingerprint too.
    let again = s
        .acquire(req("k0", "other", 30_000.0, None, false))
        .await
        .unwrap();
    assert!(again.acquired && again.attempts == 1);
    assert_eq!(s.prune().await.unwrap(), 4);
    assert_eq!(s.clear(None).await.unwrap(), 2);
    f.drop_table().await;
}

#[tokio::test]
async fn racing_claims_have_one_winner() {
    let f = Fixture::new();
    let s = f.inner.clone();
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.acquire(req("race", "fp", 30_000.0, None, false))
                .await
                .unwrap()
                .acquired
        }));
    }
    let mut winners = 0;
    for t in tasks {
        winners += t.await.unwrap() as u32;
    }
    assert_eq!(winners, 1);
    f.drop_table().await;
}

#[tokio::test]
async fn bad_input_is_refused_clearly() {
    let f = Fixture::new();
    let err = f
        .inner
        .acquire(req("a\0b", "fp", 1000.0, None, false))
        .await
        .unwrap_err();
    assert!(err.message.contains("U+0000"), "{err}");
    let bad = NativePostgresStore::from_options(PostgresOptions {
        url: pg_url(),
        table: Some("x; drop table y".into()),
        pool_size: None,
        connect_timeout_ms: None,
        command_timeout_ms: None,
        create_table: None,
    });
    assert!(bad.err().unwrap().message.contains("invalid table name"));
    // A table that is not ours is refused, never written.
    f.sql("CREATE TABLE {t} (key text PRIMARY KEY)").await;
    let err = f.inner.get("k".into()).await.unwrap_err();
    assert!(
        err.message.contains("not an idempotent-tools table"),
        "{err}"
    );
    f.drop_table().await;
}

#[tokio::test]
async fn a_string_postgres_cannot_hold_fails_its_own_request_never_its_batch() {
    // Each field of a batch's statement is an array of every request of the round: one
    // U+0000 anywhere would make the server refuse the statement, and every call with it.
    let f = Fixture::new();
    let s = &f.inner;
    let bad_claims = [
        req("k\0", "fp", 30_000.0, None, false),
        AcquireRequest {
            name: "ch\0rge".into(),
            ..req("n", "fp", 30_000.0, None, false)
        },
        req("f", "f\0p", 30_000.0, None, false),
        AcquireRequest {
            meta: Some("{\"scope\":\"\0\"}".into()),
            ..req("m", "fp", 30_000.0, None, false)
        },
    ];
    for (case, bad) in bad_claims.into_iter().enumerate() {
        let mut reqs: Vec<AcquireRequest> = (0..8)
            .map(|i| req(&format!("case{case}-{i}"), "fp", 30_000.0, None, false))
            .collect();
        reqs.insert(3, bad.clone());
        let out = s.acquire_batch(reqs).await;
        for (i, o) in out.iter().enumerate() {
            match o {
                Err(e) if i == 3 => assert!(e.message.contains("U+0000"), "{e}"),
                Ok(o) if i != 3 => assert!(o.acquired, "{:?}: claim {i}", bad.key),
                other => panic!("{:?}: claim {i}: {other:?}", bad.key),
            }
        }
    }
    let mut tokens = Vec::new();
    for (field, status) in [
        ("token", COMPLETED),
        ("result", COMPLETED),
        ("error", FAILED),
    ] {
        let keys: Vec<String> = (0..8).map(|i| format!("{field}-{i}")).collect();
        let claims = s
            .acquire_batch(
                keys.iter()
                    .map(|k| req(k, "fp", 30_000.0, None, false))
                    .collect(),
            )
            .await;
        tokens = claims
            .into_iter()
            .map(|c| c.unwrap().token.unwrap())
            .collect();
        let mut settles: Vec<SettleRequest> = keys
            .iter()
            .zip(&tokens)
            .map(|(k, t)| settle_req(k, t, Some("1"), None, None))
            .collect();
        let bad = &mut settles[3];
        match field {
            "token" => bad.token.push('\0'),
            "result" => bad.result = Some("\"\0\"".into()),
            _ => bad.error = Some("{\"name\":\"\0\"}".into()),
        }
        let out = s.settle_batch(status, settles).await;
        for (i, o) in out.iter().enumerate() {
            match o {
                Err(e) if i == 3 => assert!(e.message.contains("U+0000"), "{field}: {e}"),
                Ok(settled) if i != 3 => assert!(*settled, "{field}: settle {i}"),
                other => panic!("{field}: settle {i}: {other:?}"),
            }
        }
    }
    let err = s
        .renew("error-3".into(), format!("{}\0", tokens[3]), 1000.0)
        .await
        .unwrap_err();
    assert!(err.message.contains("U+0000"), "{err}");
    f.drop_table().await;
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let f = Fixture::with_url(&format!("postgres://u:s3cret-pw@127.0.0.1:{port}/db"));
    let err = f.inner.get("k".into()).await.unwrap_err();
    assert!(
        err.message.contains("u:***@127.0.0.1") && !err.message.contains("s3cret-pw"),
        "{err}"
    );
}

#[tokio::test]
async fn a_batch_answers_each_claim_on_its_own_rule_in_one_statement_per_round() {
    let f = Fixture::new();
    let st = &f.inner;
    // A completed record, a pending one with a live lease, and a failed one, before the batch.
    let done = st
        .acquire(req("done", "fp", 60_000.0, None, false))
        .await
        .unwrap();
    assert!(st
        .settle(
            COMPLETED,
            settle_req("done", done.token.as_ref().unwrap(), Some("1"), None, None)
        )
        .await
        .unwrap());
    let live = st
        .acquire(req("live", "fp", 60_000.0, None, false))
        .await
        .unwrap();
    let failed = st
        .acquire(req("failed", "fp", 60_000.0, None, false))
        .await
        .unwrap();
    assert!(st
        .settle(
            FAILED,
            settle_req(
                "failed",
                failed.token.as_ref().unwrap(),
                None,
                Some(r#"{"name":"E","message":"m"}"#),
                None
            )
        )
        .await
        .unwrap());

    let out = st
        .acquire_batch(vec![
            req("new", "fp", 60_000.0, None, false),
            req("done", "fp", 60_000.0, None, false),
            req("done", "other", 60_000.0, None, false),
            req("live", "fp", 60_000.0, None, false),
            req("failed", "fp", 60_000.0, None, false),
            req("new", "fp", 60_000.0, None, false), // the same key again: after the first
            req("live", "fp", 60_000.0, None, true), // 'retry' claims a live lease
        ])
        .await;
    let out: Vec<AcquireOutcome> = out.into_iter().map(|o| o.unwrap()).collect();
    let shape: Vec<(bool, u32, Option<String>)> = out
        .iter()
        .map(|o| {
            (
                o.acquired,
                o.attempts,
                o.record.as_ref().map(|r| r.status.clone()),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (true, 1, None),
            (false, 1, Some("completed".into())),
            (false, 1, Some("completed".into())),
            (false, 1, Some("pending".into())),
            (true, 2, None),
            (false, 1, Some("pending".into())), // the batch's own claim of "new" holds it
            (true, 2, None),
        ]
    );
    // Each claim has its own token, and the old owner of "live" is fenced out.
    assert_ne!(out[0].token, out[4].token);
    assert!(!st
        .settle(
            COMPLETED,
            settle_req("live", live.token.as_ref().unwrap(), Some("2"), None, None)
        )
        .await
        .unwrap());

    // Settles in one batch, each on its own token; a stale one is refused beside them.
    let settled = st
        .settle_batch(
            COMPLETED,
            vec![
                settle_req(
                    "new",
                    out[0].token.as_ref().unwrap(),
                    Some("\"n\""),
                    None,
                    Some(60_000.0),
                ),
                settle_req(
                    "failed",
                    out[4].token.as_ref().unwrap(),
                    Some("\"f\""),
                    None,
                    None,
                ),
                settle_req(
                    "live",
                    live.token.as_ref().unwrap(),
                    Some("\"stale\""),
                    None,
                    None,
                ),
                settle_req(
                    "live",
                    out[6].token.as_ref().unwrap(),
                    Some("\"l\""),
                    None,
                    None,
                ),
            ],
        )
        .await;
    let settled: Vec<bool> = settled.into_iter().map(|s| s.unwrap()).collect();
    assert_eq!(settled, vec![true, true, false, true]);
    for (key, result) in [("new", "\"n\""), ("failed", "\"f\""), ("live", "\"l\"")] {
        let r = st.get(key.into()).await.unwrap().unwrap();
        assert_eq!(
            (r.status.as_str(), r.result.as_deref()),
            ("completed", Some(result)),
            "{key}"
        );
    }
    let new = st.get("new".into()).await.unwrap().unwrap();
    assert_eq!(new.expires_at.unwrap() - new.updated_at, 60_000.0);
    f.drop_table().await;
}

/// Three batches claiming the same 40 keys at once, one on each of `stores` (the second
/// in reverse order): every claim is answered (`why` says what a failure would mean), and
/// each key has one winner.
async fn race_three_batches(stores: [Arc<Inner>; 3], why: &str) {
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let batch = |st: Arc<Inner>, reverse: bool| {
        let mut ks = keys.clone();
        if reverse {
            ks.reverse();
        }
        async move {
            st.acquire_batch(
                ks.iter()
                    .map(|k| req(k, "fp", 60_000.0, None, false))
                    .collect(),
            )
            .await
        }
    };
    let [a, b, c] = stores;
    let (a, b, c) = tokio::join!(batch(a, false), batch(b, true), batch(c, false));
    let mut wins = std::collections::HashMap::new();
    for outcome in a.into_iter().chain(b).chain(c) {
        let o = outcome.expect(why);
        if o.acquired {
            *wins.entry(o.token.unwrap()).or_insert(0) += 1;
        }
    }
    assert_eq!(wins.len(), keys.len(), "one winner per key");
}

#[tokio::test]
async fn racing_batches_on_overlapping_keys_have_one_winner_per_key() {
    let f = Fixture::new();
    let s = &f.inner;
    race_three_batches(
        [s.clone(), s.clone(), s.clone()],
        "no claim fails: batches never deadlock",
    )
    .await;
    f.drop_table().await;
}

/// The plans the store's statements run with now (their cached generic plans), as
/// EXPLAIN prints them, read on each connection of the pool: acquire, settle, get, renew.
async fn cached_plans(f: &Fixture) -> Vec<String> {
    let sql = &f.inner.pool.sql;
    let statements = [
        (sql.acquire.clone(), "('{k1,k2}', '{n,n}', '{fp,fp}', '{t1,t2}', '{1000,1000}', '{f,f}', '{NULL,NULL}')"),
        (sql.settle.clone(), "('{k1,k2}', '{t1,t2}', '{completed,completed}', '{1,1}', '{NULL,NULL}', '{NULL,NULL}', '{1,1}')"),
        (sql.get.clone(), "('{k1,k2}')"),
        (sql.renew.clone(), "('k1', 't1', 1000)"),
    ];
    let mut plans = Vec::new();
    for _ in 0..4 {
        let statements = statements.clone();
        let text = f
            .inner
            .pool
            .run("explain", |s| async move {
                let mut out = Vec::new();
                for (text, args) in statements {
                    // The connection's name for the prepared statement.
                    let row = s
                        .client
                        .query_one(
                            "SELECT name FROM pg_prepared_statements WHERE statement = $1",
                            &[&text],
                        )
                        .await?;
                    let name: String = row.get(0);
                    let mut plan = String::new();
                    for m in s
                        .client
                        .simple_query(&format!("EXPLAIN EXECUTE {name}{args}"))
                        .await?
                    {
                        if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
                            plan.push_str(r.get(0).unwrap_or(""));
                            plan.push('\n');
                        }
                    }
                    out.push(plan);
                }
                Ok(out)
            })
            .await
            .unwrap();
        plans.extend(text);
    }
    plans
}

#[tokio::test]
async fn statements_planned_on_a_small_table_reach_rows_through_the_key_index_as_it_grows() {
    // Plans made while the table held a few rows, then the table grows past what a
    // sequential scan per statement could afford (and nothing analyzes it meanwhile).
    let f = Fixture::new();
    let s = &f.inner;
    s.get("none".into()).await.unwrap(); // creates the table
                                         // Nothing analyzes it meanwhile (an ALTER later would invalidate the cached plans).
    f.sql("ALTER TABLE {t} SET (autovacuum_enabled = false)")
        .await;
    let reqs: Vec<AcquireRequest> = (0..64)
        .map(|i| req(&format!("small-{i}"), "fp", 30_000.0, None, false))
        .collect();
    let settles: Vec<SettleRequest> = s
        .acquire_batch(reqs.clone())
        .await
        .into_iter()
        .zip(&reqs)
        .map(|(out, r)| settle_req(&r.key, &out.unwrap().token.unwrap(), Some("1"), None, None))
        .collect();
    assert!(s
        .settle_batch(COMPLETED, settles.clone())
        .await
        .into_iter()
        .all(|o| o.unwrap()));
    // Each statement runs often enough to be given its cached plan (after 5 runs).
    for _ in 0..8 {
        for out in s.acquire_batch(reqs.clone()).await {
            assert!(!out.unwrap().acquired); // replays
        }
        s.settle_batch(COMPLETED, settles.clone()).await;
        s.get("small-0".into()).await.unwrap();
        s.renew("small-0".into(), "t".into(), 1000.0).await.unwrap();
    }
    f.sql(
        "INSERT INTO {t} (key, name, fingerprint, status, attempts, created_at, updated_at) \
         SELECT 'big-' || g, 'n', 'fp', 'completed', 1, 0, 0 FROM generate_series(1, 200000) AS g",
    )
    .await;
    for plan in cached_plans(&f).await {
        assert!(
            !plan.contains("Seq Scan") && plan.contains("Index"),
            "a statement of the store reads the whole table instead of probing the key index:\n{plan}"
        );
    }
    f.drop_table().await;
}

/// Waits until `n` statements wait, directly or through each other, on the lock of the
/// backend `blocker` (a state read from pg_stat_activity, not a pause).
async fn until_waiting_on(f: &Fixture, blocker: i32, n: i64) {
    let client = f.inner.pool.connect("watch").await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let row = client
            .query_one(
                "WITH RECURSIVE w AS ( \
                   SELECT pid FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)) \
                   UNION SELECT a.pid FROM pg_stat_activity AS a, w \
                   WHERE w.pid = ANY (pg_blocking_pids(a.pid))) \
                 SELECT count(*) FROM w",
                &[&blocker],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) >= n {
            return;
        }
        tokio::task::yield_now().await;
    }
    let rows = client
        .query(
            "SELECT pid::text || ' ' || coalesce(wait_event_type, '') || ' ' || coalesce(wait_event, '') \
               || ' ' || pg_blocking_pids(pid)::text || ' ' || left(query, 40) \
             FROM pg_stat_activity WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap();
    let seen: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    panic!("{n} statements never waited on backend {blocker}: {seen:#?}");
}

/// Claims `keys` in one batch; their tokens.
async fn claimed(s: &Inner, keys: &[&str]) -> Vec<String> {
    s.acquire_batch(
        keys.iter()
            .map(|k| req(k, "fp", 60_000.0, None, false))
            .collect(),
    )
    .await
    .into_iter()
    .map(|c| c.unwrap().token.unwrap())
    .collect()
}

/// Runs `sql` in `tx` ({t}: the fixture's table); the backend pid that holds what it took.
async fn holding(f: &Fixture, tx: &tokio_postgres::Transaction<'_>, sql: &str) -> i32 {
    tx.batch_execute(&sql.replace("{t}", &format!("\"{}\"", f.table)))
        .await
        .unwrap();
    tx.query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Settles `(key, token)` in one batch, in that order, on a task of its own.
fn settling(
    s: Arc<Inner>,
    settles: Vec<(&'static str, String)>,
) -> tokio::task::JoinHandle<Vec<StoreResult<bool>>> {
    tokio::spawn(async move {
        let reqs = settles
            .iter()
            .map(|(k, t)| settle_req(k, t, Some("1"), None, None))
            .collect();
        s.settle_batch(COMPLETED, reqs).await
    })
}

#[tokio::test]
async fn a_settle_and_a_claim_of_the_same_rows_lock_them_in_one_order() {
    // Found by CI (stop 42): 4 processes racing on 100 keys, one acquire failed with
    // "deadlock detected". An acquire locks its rows in key order; a settle locked them in
    // its batch's order. Here: a settle of [b, a] and a takeover of [a, b], both held
    // behind a third transaction's lock on `a` until each has taken what it can.
    let f = Fixture::new();
    let s = f.inner.clone();
    let tokens = claimed(&s, &["a", "b"]).await;
    // Both leases run out (so another call takes the claims over), their owner still
    // settling them.
    f.sql("UPDATE {t} SET lease_expires_at = 1").await;
    let mut blocker = f.inner.pool.connect("blocker").await.unwrap();
    let tx = blocker.transaction().await.unwrap();
    let blocker_pid = holding(&f, &tx, "SELECT 1 FROM {t} WHERE key = 'a' FOR UPDATE").await;
    let taker = {
        let s = s.clone();
        tokio::spawn(async move {
            s.acquire_batch(vec![
                req("a", "fp", 60_000.0, None, false),
                req("b", "fp", 60_000.0, None, false),
            ])
            .await
        })
    };
    until_waiting_on(&f, blocker_pid, 1).await;
    let settler = settling(
        f.another_store(),
        vec![("b", tokens[1].clone()), ("a", tokens[0].clone())],
    );
    until_waiting_on(&f, blocker_pid, 2).await;
    tx.commit().await.unwrap();
    let taken = taker.await.unwrap();
    let settled = settler.await.unwrap();
    for out in taken {
        let o = out.expect("a claim never fails on a deadlock");
        assert!(
            o.acquired && o.taken_over,
            "the run-out leases are taken over"
        );
    }
    for out in settled {
        let settled = out.expect("a settle never fails on a deadlock");
        assert!(
            !settled,
            "a settle of a claim taken over is refused (fencing)"
        );
    }
    f.drop_table().await;
}

#[tokio::test]
async fn a_server_whose_sessions_default_to_serializable_still_gets_read_committed_statements() {
    // A database set to `default_transaction_isolation = serializable` (ALTER DATABASE ...
    // SET, common where an application relies on it) made the store's own statements
    // serializable: racing claims failed with SQLSTATE 40001 instead of waiting and
    // replaying, and stores opening a new table at once failed "not an idempotent-tools
    // table". The URL's `options` stands in for the database's setting here.
    let url = format!(
        "{}?options=-c%20default_transaction_isolation%3Dserializable",
        pg_url()
    );
    let f = Fixture::on_table(&url, format!("rs_{}", &new_token()[..12]));
    let store = || Fixture::on_table(&url, f.table.clone()).inner;
    race_three_batches(
        [f.inner.clone(), store(), store()],
        "no claim fails under a serializable default",
    )
    .await;
    let client = f.inner.pool.connect("iso").await.unwrap();
    let level: String = client
        .query_one("SHOW transaction_isolation", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(level, "read committed", "the store's own connections");
    f.drop_table().await;
}

#[tokio::test]
async fn a_settle_chosen_as_a_deadlocks_victim_is_sent_again() {
    // The store's statements lock rows in one order, but another transaction on the table
    // (an operator's UPDATE over many rows) need not: PostgreSQL then ends one of the two
    // with SQLSTATE 40P01, which rolls that statement back whole. Here the settle is the
    // victim (the other session waits 30 s before it looks for a deadlock, the settle's
    // 1 s): its calls' side effects have run, so failing it would leave their records
    // pending until a takeover. Sent again, it settles.
    let f = Fixture::new();
    let tokens = claimed(&f.inner, &["a", "b"]).await;
    let mut other = f.inner.pool.connect("other").await.unwrap();
    let tx = other.transaction().await.unwrap();
    let other_pid = holding(
        &f,
        &tx,
        "SET LOCAL deadlock_timeout = '30s'; SELECT 1 FROM {t} WHERE key = 'b' FOR UPDATE",
    )
    .await;
    let settler = settling(
        f.another_store(),
        vec![("a", tokens[0].clone()), ("b", tokens[1].clone())],
    );
    // The settle holds `a` and waits for `b`; now the other session asks for `a`.
    until_waiting_on(&f, other_pid, 1).await;
    tx.batch_execute(&format!(
        "SELECT 1 FROM \"{}\" WHERE key = 'a' FOR UPDATE",
        f.table
    ))
    .await
    .expect("the settle, not this session, is the deadlock's victim");
    tx.commit().await.unwrap();
    for out in settler.await.unwrap() {
        assert!(
            out.expect("a settle that was a deadlock's victim is sent again"),
            "and settles"
        );
    }
    f.drop_table().await;
}
