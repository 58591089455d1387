-- keyCheck
SELECT COALESCE(CAST("id" AS TEXT), '') FROM "jobs" WHERE 1 = 0

-- candidates
SELECT c."id", c.inbox_key FROM (SELECT "id", COALESCE(CAST("id" AS TEXT), '') AS inbox_key FROM "jobs" WHERE 1 = 1 ORDER BY "id" OFFSET 0) c WHERE pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0)) LIMIT $1

-- lock
SELECT pg_try_advisory_lock(hashtextextended($1, 0))

-- unlock
SELECT pg_advisory_unlock(hashtextextended($1, 0))

-- take
SELECT "id" FROM "jobs" WHERE "id" = $1 AND (COALESCE(CAST("id" AS TEXT), '')) = $2

-- ack
DELETE FROM "jobs" WHERE "id" = $1

-- unlockMany(3)
SELECT COUNT(*) FROM (VALUES (CAST($1 AS TEXT)), (CAST($2 AS TEXT)), (CAST($3 AS TEXT))) AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))

-- ackMany(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3)

-- ack unflushed
DELETE FROM "jobs" WHERE "id" = $1 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackMany(3) unflushed
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
