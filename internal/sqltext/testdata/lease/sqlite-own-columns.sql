-- claim
SELECT `id`, `payload`, `attempt`, `queue`, `headers`, `account`, `region` FROM `jobs` WHERE `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `queue` = ? AND (`locked_until` IS NULL OR `locked_until` < ?) ORDER BY `priority`, `retry_after`, `id` LIMIT ?

-- stamp(1)
UPDATE `jobs` SET `locked_until` = ?, `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` IN (?)

-- stamp(3)
UPDATE `jobs` SET `locked_until` = ?, `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` IN (?, ?, ?)

-- extend
UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?

-- ack
UPDATE `jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retry
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- extendIn(3)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (?, ?, ?) AND `locked_until` = ?

-- ackIn(3)
UPDATE `jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `id` IN (?, ?, ?) AND `locked_until` = ?

-- retryIn(3)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` IN (?, ?, ?) AND `locked_until` = ?

-- retryAfterIn(3)
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` IN (?, ?, ?) AND `locked_until` = ?

-- ackPairs(2)
UPDATE `jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE (`id` = ? AND `locked_until` = ?) OR (`id` = ? AND `locked_until` = ?) RETURNING `id`

-- retryPairs(2)
UPDATE `jobs` SET `locked_until` = NULL WHERE (`id` = ? AND `locked_until` = ?) OR (`id` = ? AND `locked_until` = ?) RETURNING `id`

-- ackIn(3) returning
UPDATE `jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `id` IN (?, ?, ?) AND `locked_until` = ? RETURNING `id`

-- retryIn(3) returning
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` IN (?, ?, ?) AND `locked_until` = ? RETURNING `id`

-- retryAfterIn(3) returning
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` IN (?, ?, ?) AND `locked_until` = ? RETURNING `id`
