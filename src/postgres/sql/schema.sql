-- The records table. `{table}` is the quoted, validated name; `{index}` its expiry index.
-- The table's comment carries the schema version (checked on open).
CREATE TABLE IF NOT EXISTS {table} (
  key              text PRIMARY KEY,
  name             text NOT NULL,
  fingerprint      text NOT NULL,
  status           text NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
  token            text,
  settled_token    text,
  result           text,
  error            text,
  attempts         integer NOT NULL,
  taken_over       boolean NOT NULL DEFAULT false,
  created_at       bigint NOT NULL,
  updated_at       bigint NOT NULL,
  expires_at       bigint,
  lease_expires_at bigint,
  meta             text,
  duration_ms      double precision,
  -- A 'block' waiter in some process LISTENs for this claim's settle (see watch.sql).
  watched          boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS {index} ON {table} (expires_at) WHERE expires_at IS NOT NULL;
COMMENT ON TABLE {table} IS '{version}';
