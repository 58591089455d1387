-- insert(1)
INSERT INTO "jobs" ("id") VALUES (DEFAULT)

-- insert(3)
INSERT INTO "jobs" ("id") VALUES (DEFAULT), (DEFAULT), (DEFAULT)

-- insertID
INSERT INTO "jobs" ("id") VALUES (DEFAULT) RETURNING "id"

-- insert(1) notifying
WITH published AS (INSERT INTO "jobs" ("id") VALUES (DEFAULT)) SELECT pg_notify($1, '')

-- insert(3) notifying
WITH published AS (INSERT INTO "jobs" ("id") VALUES (DEFAULT), (DEFAULT), (DEFAULT)) SELECT pg_notify($1, '')
