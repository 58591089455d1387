-- claim
SELECT "id", "payload" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED

-- claim(3)
SELECT "id", "payload" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 3 FOR UPDATE SKIP LOCKED

-- ack
DELETE FROM "jobs" WHERE "id" = $1

-- fail
DELETE FROM "jobs" WHERE "id" = $1

-- relock
SELECT "id" FROM "jobs" WHERE "id" = $1 FOR UPDATE SKIP LOCKED

-- ackIn(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3)

-- failIn(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3)

-- savepoint
SAVEPOINT inbox_handler

-- rollbackToSavepoint
ROLLBACK TO SAVEPOINT inbox_handler

-- ack unflushed
DELETE FROM "jobs" WHERE "id" = $1 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackIn(3) unflushed
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
