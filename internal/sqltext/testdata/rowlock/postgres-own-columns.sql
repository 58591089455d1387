-- claim
SELECT "id", "payload", "attempt", "queue", "headers", "account", "region" FROM "jobs" WHERE "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) AND "queue" = $2 ORDER BY "priority", "retry_after" NULLS FIRST, "id" LIMIT 1 FOR UPDATE SKIP LOCKED

-- claim(3)
SELECT "id", "payload", "attempt", "queue", "headers", "account", "region" FROM "jobs" WHERE "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) AND "queue" = $2 ORDER BY "priority", "retry_after" NULLS FIRST, "id" LIMIT 3 FOR UPDATE SKIP LOCKED

-- ack
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" = $2

-- retry
UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $1

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $2

-- fail
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" = $2

-- relock
SELECT "id" FROM "jobs" WHERE "id" = $1 AND "processed_at" IS NULL AND COALESCE("attempt", 0) = $2 FOR UPDATE SKIP LOCKED

-- ackIn(3)
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3, $4)

-- retryIn(3)
UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" IN ($1, $2, $3)

-- retryAfterIn(3)
UPDATE "jobs" SET "retry_after" = $1, "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" IN ($2, $3, $4)

-- failIn(3)
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3, $4)

-- savepoint
SAVEPOINT inbox_handler

-- rollbackToSavepoint
ROLLBACK TO SAVEPOINT inbox_handler

-- ack unflushed
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" = $2 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackIn(3) unflushed
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3, $4) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
