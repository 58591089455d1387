-- insert(1)
INSERT INTO `select ``from`` "where"` (```payload`` data`, `group`, ```priority```, `select`, `retry after`) VALUES (?, ?, ?, ?, ?)

-- insert(3)
INSERT INTO `select ``from`` "where"` (```payload`` data`, `group`, ```priority```, `select`, `retry after`) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)

-- insertID
INSERT INTO `select ``from`` "where"` (```payload`` data`, `group`, ```priority```, `select`, `retry after`) VALUES (?, ?, ?, ?, ?) RETURNING `id "x"`
