-- data-version
PRAGMA data_version
