-- claim
SELECT `id "x"`, ```payload`` data`, `order`, `group`, `select` FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND (`retry after` IS NULL OR `retry after` <= ?) AND `group` = ? ORDER BY ```priority```, `retry after`, `id "x"` LIMIT 1 FOR UPDATE SKIP LOCKED

-- claim(3)
SELECT `id "x"`, ```payload`` data`, `order`, `group`, `select` FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND (`retry after` IS NULL OR `retry after` <= ?) AND `group` = ? ORDER BY ```priority```, `retry after`, `id "x"` LIMIT 3 FOR UPDATE SKIP LOCKED

-- ack
UPDATE `select ``from`` "where"` SET `processed "at"` = ? WHERE `id "x"` = ?

-- retry
UPDATE `select ``from`` "where"` SET `order` = COALESCE(`order`, 0) + 1 WHERE `id "x"` = ?

-- retryAfter
UPDATE `select ``from`` "where"` SET `retry after` = ?, `order` = COALESCE(`order`, 0) + 1 WHERE `id "x"` = ?

-- fail
UPDATE `select ``from`` "where"` SET `processed "at"` = ? WHERE `id "x"` = ?

-- relock
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `id "x"` = ? AND `processed "at"` IS NULL AND COALESCE(`order`, 0) = ? FOR UPDATE SKIP LOCKED

-- savepoint
SAVEPOINT inbox_handler

-- rollbackToSavepoint
ROLLBACK TO SAVEPOINT inbox_handler
