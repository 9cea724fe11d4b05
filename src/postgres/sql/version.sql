-- The table's schema version: its comment (NULL table when it does not exist).
SELECT to_regclass($1::text) IS NOT NULL AS present, obj_description(to_regclass($1::text), 'pg_class') AS comment
