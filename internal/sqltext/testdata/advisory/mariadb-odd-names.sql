-- keyCheck
SELECT CONCAT('odd ', COALESCE(CAST(`group` AS CHAR), ''), ':', COALESCE(CAST(`id "x"` AS CHAR), '')) FROM `select ``from`` "where"` WHERE 1 = 0

-- candidates
SELECT `id "x"`, CONCAT('odd ', COALESCE(CAST(`group` AS CHAR), ''), ':', COALESCE(CAST(`id "x"` AS CHAR), '')) FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND (`retry after` IS NULL OR `retry after` <= ?) AND `group` = ? AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT(DATABASE(), '.', CONCAT('odd ', COALESCE(CAST(`group` AS CHAR), ''), ':', COALESCE(CAST(`id "x"` AS CHAR), '')))) > 64, SHA1(CONCAT(DATABASE(), '.', CONCAT('odd ', COALESCE(CAST(`group` AS CHAR), ''), ':', COALESCE(CAST(`id "x"` AS CHAR), '')))), CONCAT(DATABASE(), '.', CONCAT('odd ', COALESCE(CAST(`group` AS CHAR), ''), ':', COALESCE(CAST(`id "x"` AS CHAR), ''))))) IS NULL ORDER BY ```priority```, `retry after`, `id "x"` LIMIT ?

-- lock
SELECT GET_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n), 0) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k

-- unlock
SELECT RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k

-- take
UPDATE `select ``from`` "where"` SET `order` = COALESCE(`order`, 0) + 1 WHERE `id "x"` = ? AND (CONCAT('odd ', COALESCE(CAST(`group` AS CHAR), ''), ':', COALESCE(CAST(`id "x"` AS CHAR), ''))) = ? AND `processed "at"` IS NULL AND (`retry after` IS NULL OR `retry after` <= ?) AND `group` = ?

-- read
SELECT `id "x"`, ```payload`` data`, `order`, `group`, `select` FROM `select ``from`` "where"` WHERE `id "x"` = ?

-- ack
UPDATE `select ``from`` "where"` SET `processed "at"` = ? WHERE `id "x"` = ?

-- retryAfter
UPDATE `select ``from`` "where"` SET `retry after` = ? WHERE `id "x"` = ?

-- unlockMany(3)
SELECT COUNT(*) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n UNION ALL SELECT CONCAT(DATABASE(), '.', ?) AS n UNION ALL SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k WHERE RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) = 1

-- ackMany(3)
UPDATE `select ``from`` "where"` SET `processed "at"` = ? WHERE `id "x"` IN (?, ?, ?)

-- retryAfterMany(3)
UPDATE `select ``from`` "where"` SET `retry after` = ? WHERE `id "x"` IN (?, ?, ?)
