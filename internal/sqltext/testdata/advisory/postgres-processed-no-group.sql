-- keyCheck
SELECT 'jobs-' || COALESCE(CAST("id" AS TEXT), '') FROM "jobs" WHERE 1 = 0

-- candidates
SELECT c."id", c.inbox_key FROM (SELECT "id", 'jobs-' || COALESCE(CAST("id" AS TEXT), '') AS inbox_key FROM "jobs" WHERE "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) ORDER BY "retry_after" NULLS FIRST, "id" OFFSET 0) c WHERE pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0)) LIMIT $2

-- lock
SELECT pg_try_advisory_lock(hashtextextended($1, 0))

-- unlock
SELECT pg_advisory_unlock(hashtextextended($1, 0))

-- take
UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $1 AND ('jobs-' || COALESCE(CAST("id" AS TEXT), '')) = $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id", "payload", "attempt"

-- ack
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" = $2

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1 WHERE "id" = $2

-- unlockMany(3)
SELECT COUNT(*) FROM (VALUES (CAST($1 AS TEXT)), (CAST($2 AS TEXT)), (CAST($3 AS TEXT))) AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))

-- ackMany(3)
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3, $4)

-- retryAfterMany(3)
UPDATE "jobs" SET "retry_after" = $1 WHERE "id" IN ($2, $3, $4)

-- ack unflushed
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" = $2 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackMany(3) unflushed
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3, $4) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
