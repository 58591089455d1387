-- claim
WITH inbox_lease_pick AS (SELECT "id" FROM "jobs" WHERE 1 = 1 AND ("locked_until" IS NULL OR "locked_until" < $1) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED), inbox_lease_claimed AS (UPDATE "jobs" SET "locked_until" = $2 FROM inbox_lease_pick WHERE "jobs"."id" = inbox_lease_pick."id" RETURNING "jobs"."id", "jobs"."payload") SELECT "id", "payload" FROM inbox_lease_claimed ORDER BY "id"

-- claim(3)
WITH inbox_lease_pick AS (SELECT "id" FROM "jobs" WHERE 1 = 1 AND ("locked_until" IS NULL OR "locked_until" < $1) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' ORDER BY "id" LIMIT 3 FOR UPDATE SKIP LOCKED), inbox_lease_claimed AS (UPDATE "jobs" SET "locked_until" = $2 FROM inbox_lease_pick WHERE "jobs"."id" = inbox_lease_pick."id" RETURNING "jobs"."id", "jobs"."payload") SELECT "id", "payload" FROM inbox_lease_claimed ORDER BY "id"

-- extend
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ack
DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2

-- extendIn(3)
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" IN ($2, $3, $4) AND "locked_until" = $5 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackIn(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND "locked_until" = $4

-- retryIn(3)
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" IN ($1, $2, $3) AND "locked_until" = $4

-- ackPairs(2)
DELETE FROM "jobs" WHERE ("id" = $1 AND "locked_until" = $2) OR ("id" = $3 AND "locked_until" = $4) RETURNING "id"

-- retryPairs(2)
UPDATE "jobs" SET "locked_until" = NULL WHERE ("id" = $1 AND "locked_until" = $2) OR ("id" = $3 AND "locked_until" = $4) RETURNING "id"

-- ackIn(3) returning
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND "locked_until" = $4 RETURNING "id"

-- retryIn(3) returning
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" IN ($1, $2, $3) AND "locked_until" = $4 RETURNING "id"

-- ack unflushed
DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackPairs(2) unflushed
DELETE FROM "jobs" WHERE (("id" = $1 AND "locked_until" = $2) OR ("id" = $3 AND "locked_until" = $4)) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id"

-- ackIn(3) returning unflushed
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND "locked_until" = $4 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id"
