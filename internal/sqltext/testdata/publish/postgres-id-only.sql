-- insert(1)
WITH published AS (INSERT INTO "jobs" ("id") VALUES (DEFAULT)) SELECT pg_notify($1, '')

-- insert(3)
WITH published AS (INSERT INTO "jobs" ("id") VALUES (DEFAULT), (DEFAULT), (DEFAULT)) SELECT pg_notify($1, '')
