-- claim
SELECT `id`, `payload`, `attempt` FROM `jobs` WHERE `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND (`locked_until` IS NULL OR `locked_until` < ?) ORDER BY `retry_after`, `id` LIMIT ? FOR UPDATE SKIP LOCKED

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

-- heldIn(3)
SELECT `id` FROM `jobs` WHERE `id` IN (?, ?, ?) AND `locked_until` = ? FOR UPDATE
