-- claim
SELECT `id`, `payload`, `attempt`, `queue`, `headers`, `account`, `region` FROM `jobs` WHERE `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `queue` = ? ORDER BY `priority`, `retry_after`, `id` LIMIT 1 FOR UPDATE SKIP LOCKED

-- claim(3)
SELECT `id`, `payload`, `attempt`, `queue`, `headers`, `account`, `region` FROM `jobs` WHERE `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `queue` = ? ORDER BY `priority`, `retry_after`, `id` LIMIT 3 FOR UPDATE SKIP LOCKED

-- ack
UPDATE `jobs` SET `processed_at` = ? WHERE `id` = ?

-- retry
UPDATE `jobs` SET `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` = ?

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` = ?

-- fail
UPDATE `jobs` SET `processed_at` = ? WHERE `id` = ?

-- relock
SELECT `id` FROM `jobs` WHERE `id` = ? AND `processed_at` IS NULL AND COALESCE(`attempt`, 0) = ? FOR UPDATE SKIP LOCKED

-- savepoint
SAVEPOINT inbox_handler

-- rollbackToSavepoint
ROLLBACK TO SAVEPOINT inbox_handler
