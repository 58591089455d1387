-- claim
SELECT `id`, `payload` FROM `jobs` WHERE 1 = 1 ORDER BY `id` LIMIT 1 FOR UPDATE SKIP LOCKED

-- claim(3)
SELECT `id`, `payload` FROM `jobs` WHERE 1 = 1 ORDER BY `id` LIMIT 3 FOR UPDATE SKIP LOCKED

-- ack
DELETE FROM `jobs` WHERE `id` = ?

-- fail
DELETE FROM `jobs` WHERE `id` = ?

-- relock
SELECT `id` FROM `jobs` WHERE `id` = ? FOR UPDATE SKIP LOCKED

-- savepoint
SAVEPOINT inbox_handler

-- rollbackToSavepoint
ROLLBACK TO SAVEPOINT inbox_handler
