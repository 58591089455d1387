-- claim
WITH inbox_lease_pick AS (SELECT "id" FROM "jobs" WHERE "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) AND "queue" = $2 AND ("locked_until" IS NULL OR "locked_until" < $3) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' ORDER BY "priority", "retry_after" NULLS FIRST, "id" LIMIT 1 FOR UPDATE SKIP LOCKED), inbox_lease_claimed AS (UPDATE "jobs" SET "locked_until" = $4, "attempt" = COALESCE("attempt", 0) + 1 FROM inbox_lease_pick WHERE "jobs"."id" = inbox_lease_pick."id" RETURNING "jobs"."id", "jobs"."payload", "jobs"."attempt", "jobs"."queue", "jobs"."headers", "jobs"."account", "jobs"."region", "jobs"."priority", "jobs"."retry_after") SELECT "id", "payload", "attempt", "queue", "headers", "account", "region" FROM inbox_lease_claimed ORDER BY "priority", "retry_after" NULLS FIRST, "id"

-- claim(3)
WITH inbox_lease_pick AS (SELECT "id" FROM "jobs" WHERE "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) AND "queue" = $2 AND ("locked_until" IS NULL OR "locked_until" < $3) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' ORDER BY "priority", "retry_after" NULLS FIRST, "id" LIMIT 3 FOR UPDATE SKIP LOCKED), inbox_lease_claimed AS (UPDATE "jobs" SET "locked_until" = $4, "attempt" = COALESCE("attempt", 0) + 1 FROM inbox_lease_pick WHERE "jobs"."id" = inbox_lease_pick."id" RETURNING "jobs"."id", "jobs"."payload", "jobs"."attempt", "jobs"."queue", "jobs"."headers", "jobs"."account", "jobs"."region", "jobs"."priority", "jobs"."retry_after") SELECT "id", "payload", "attempt", "queue", "headers", "account", "region" FROM inbox_lease_claimed ORDER BY "priority", "retry_after" NULLS FIRST, "id"

-- extend
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ack
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3

-- extendIn(3)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" IN ($2, $3, $4) AND "locked_until" = $5 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackIn(3)
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" IN ($2, $3, $4) AND "locked_until" = $5

-- retryIn(3)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" IN ($1, $2, $3) AND "locked_until" = $4

-- retryAfterIn(3)
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" IN ($2, $3, $4) AND "locked_until" = $5

-- ackPairs(2)
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE ("id" = $2 AND "locked_until" = $3) OR ("id" = $4 AND "locked_until" = $5) RETURNING "id"

-- retryPairs(2)
UPDATE "jobs" SET "locked_until" = NULL WHERE ("id" = $1 AND "locked_until" = $2) OR ("id" = $3 AND "locked_until" = $4) RETURNING "id"

-- ackIn(3) returning
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" IN ($2, $3, $4) AND "locked_until" = $5 RETURNING "id"

-- retryIn(3) returning
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" IN ($1, $2, $3) AND "locked_until" = $4 RETURNING "id"

-- retryAfterIn(3) returning
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" IN ($2, $3, $4) AND "locked_until" = $5 RETURNING "id"

-- ack unflushed
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackPairs(2) unflushed
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE (("id" = $2 AND "locked_until" = $3) OR ("id" = $4 AND "locked_until" = $5)) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id"

-- ackIn(3) returning unflushed
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" IN ($2, $3, $4) AND "locked_until" = $5 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id"
