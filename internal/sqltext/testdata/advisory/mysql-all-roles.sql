-- keyCheck
SELECT CONCAT('jobs-', COALESCE(CAST(`queue` AS CHAR), ''), ':', COALESCE(CAST(`id` AS CHAR), '')) FROM `jobs` WHERE 1 = 0

-- candidates
SELECT `id`, CONCAT('jobs-', COALESCE(CAST(`queue` AS CHAR), ''), ':', COALESCE(CAST(`id` AS CHAR), '')) FROM `jobs` WHERE `processed_at` IS NULL AND `dead_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `queue` = ? AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT(DATABASE(), '.', CONCAT('jobs-', COALESCE(CAST(`queue` AS CHAR), ''), ':', COALESCE(CAST(`id` AS CHAR), '')))) > 64, SHA1(CONCAT(DATABASE(), '.', CONCAT('jobs-', COALESCE(CAST(`queue` AS CHAR), ''), ':', COALESCE(CAST(`id` AS CHAR), '')))), CONCAT(DATABASE(), '.', CONCAT('jobs-', COALESCE(CAST(`queue` AS CHAR), ''), ':', COALESCE(CAST(`id` AS CHAR), ''))))) IS NULL ORDER BY `priority`, `retry_after`, `id` LIMIT ?

-- lock
SELECT GET_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n), 0) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k

-- unlock
SELECT RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k

-- take
UPDATE `jobs` SET `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` = ? AND (CONCAT('jobs-', COALESCE(CAST(`queue` AS CHAR), ''), ':', COALESCE(CAST(`id` AS CHAR), ''))) = ? AND `processed_at` IS NULL AND `dead_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `queue` = ?

-- read
SELECT `id`, `payload`, `attempt`, `queue`, `headers` FROM `jobs` WHERE `id` = ?

-- ack
UPDATE `jobs` SET `processed_at` = ? WHERE `id` = ?

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `last_error` = ? WHERE `id` = ?

-- fail
UPDATE `jobs` SET `dead_at` = ?, `last_error` = ? WHERE `id` = ?

-- unlockMany(3)
SELECT COUNT(*) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n UNION ALL SELECT CONCAT(DATABASE(), '.', ?) AS n UNION ALL SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k WHERE RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) = 1

-- ackMany(3)
UPDATE `jobs` SET `processed_at` = ? WHERE `id` IN (?, ?, ?)

-- retryAfterMany(3)
UPDATE `jobs` SET `retry_after` = ?, `last_error` = ? WHERE `id` IN (?, ?, ?)

-- failMany(3)
UPDATE `jobs` SET `dead_at` = ?, `last_error` = ? WHERE `id` IN (?, ?, ?)
