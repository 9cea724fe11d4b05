-- session: run once on each of PostgresStore's own connections, before anything else.
-- Its statements are prepared once per connection and run thousands of times; two
-- settings keep each run cheap whatever the table's size was when it was first planned:
-- - plan_cache_mode: one generic plan, never planned again. Under the default (`auto`) a
--   batch of one kept a custom plan, planned on every run: most of the statement's CPU on
--   the server (about 0.25 ms of 0.3 ms).
-- - enable_seqscan / enable_hashjoin / enable_mergejoin off: a generic plan is made once,
--   and on a table of a few pages the planner prefers to read the whole table (a
--   sequential scan, or a hash join over one) to probing the key index; that plan would be
--   kept as the table grows to millions of rows. With these off, a statement reaches rows
--   through the key (or expiry) index whenever one applies; the statements that read the
--   whole table (list, stats) still scan it.
-- - jit off: the disabled scans above add a cost of 1e10 to every plan that still scans the
--   table (list, recent, stats), far past jit_above_cost, so the server JIT-compiled each
--   run of them: about 100 ms a statement on a table of one row (a listing, two of them,
--   took 230 ms). The store's statements are short; none gains from JIT.
-- - default_transaction_isolation: READ COMMITTED, what the statements are written for
--   (a claim that waited on another's row decides on its newest version). A database set
--   to default to SERIALIZABLE or REPEATABLE READ made them fail with SQLSTATE 40001 when
--   calls raced on a key, and made stores that created a new table at once refuse it.
-- These connections run only the store's statements: nothing else sees these settings.
SET plan_cache_mode = force_generic_plan;
SET enable_seqscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET jit = off;
SET default_transaction_isolation = 'read committed';
