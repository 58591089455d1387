-- stats
SELECT `group`, COUNT(CASE WHEN `processed "at"` IS NULL AND `dead ``at``` IS NULL AND (`locked ``until`` "now"` IS NULL OR `locked ``until`` "now"` < ?) AND (`retry after` IS NULL OR `retry after` <= ?) THEN 1 END), COUNT(CASE WHEN `processed "at"` IS NULL AND `dead ``at``` IS NULL AND (`locked ``until`` "now"` IS NULL OR `locked ``until`` "now"` < ?) AND `retry after` > ? THEN 1 END), COUNT(CASE WHEN `processed "at"` IS NULL AND `dead ``at``` IS NULL AND `locked ``until`` "now"` >= ? THEN 1 END), COUNT(CASE WHEN `processed "at"` IS NULL AND `dead ``at``` IS NULL AND (`locked ``until`` "now"` IS NULL OR `locked ``until`` "now"` < ?) AND `order` > 0 THEN 1 END), COUNT(CASE WHEN `dead ``at``` IS NOT NULL THEN 1 END), COUNT(CASE WHEN `processed "at"` IS NOT NULL AND `dead ``at``` IS NULL THEN 1 END), MIN(CASE WHEN `processed "at"` IS NULL AND `dead ``at``` IS NULL AND (`locked ``until`` "now"` IS NULL OR `locked ``until`` "now"` < ?) AND `retry after` <= ? THEN `retry after` END), COUNT(CASE WHEN `processed "at"` IS NULL AND `dead ``at``` IS NULL AND (`locked ``until`` "now"` IS NULL OR `locked ``until`` "now"` < ?) AND `retry after` IS NULL THEN 1 END) FROM `select ``from`` "where"` GROUP BY `group` ORDER BY `group`

-- dead
SELECT `id "x"`, `group`, COALESCE(`order`, 0), `dead ``at```, COALESCE(`"error"`, '') FROM `select ``from`` "where"` WHERE `dead ``at``` IS NOT NULL ORDER BY `dead ``at``` DESC, `id "x"` DESC LIMIT ?

-- dead(after)
SELECT `id "x"`, `group`, COALESCE(`order`, 0), `dead ``at```, COALESCE(`"error"`, '') FROM `select ``from`` "where"` WHERE `dead ``at``` IS NOT NULL AND (`dead ``at``` < ? OR `dead ``at``` = ? AND `id "x"` < ?) ORDER BY `dead ``at``` DESC, `id "x"` DESC LIMIT ?

-- dead(queue, after)
SELECT `id "x"`, `group`, COALESCE(`order`, 0), `dead ``at```, COALESCE(`"error"`, '') FROM `select ``from`` "where"` WHERE `dead ``at``` IS NOT NULL AND `group` = ? AND (`dead ``at``` < ? OR `dead ``at``` = ? AND `id "x"` < ?) ORDER BY `dead ``at``` DESC, `id "x"` DESC LIMIT ?

-- pickDead
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `dead ``at``` IS NOT NULL AND `id "x"` > ? ORDER BY `id "x"` LIMIT ?

-- pickDead(queue)
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `dead ``at``` IS NOT NULL AND `group` = ? AND `id "x"` > ? ORDER BY `id "x"` LIMIT ?

-- requeue(3)
UPDATE `select ``from`` "where"` SET `dead ``at``` = NULL, `retry after` = NULL, `order` = 0 WHERE `id "x"` IN (?, ?, ?) AND `dead ``at``` IS NOT NULL

-- purgeDead(3)
DELETE FROM `select ``from`` "where"` WHERE `id "x"` IN (?, ?, ?) AND `dead ``at``` IS NOT NULL

-- pickProcessed
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `processed "at"` < ? AND `id "x"` > ? ORDER BY `id "x"` LIMIT ?

-- pickProcessed(queue)
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `processed "at"` < ? AND `group` = ? AND `id "x"` > ? ORDER BY `id "x"` LIMIT ?

-- purgeProcessed(3)
DELETE FROM `select ``from`` "where"` WHERE `id "x"` IN (?, ?, ?) AND `processed "at"` < ?
