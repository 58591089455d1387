package sqlmocktests

import (
	"context"
	"errors"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
)

// TestUniqueKeyTakenStatements pins a publish whose unique key another row holds, on MySQL and
// MariaDB: the plain INSERT fails with a duplicate key on the key's index (1062), which is the
// key taken, and the publish reads the holder's id with a shared lock on the index record alone
// (LOCK IN SHARE MODE); a replace then locks the holder where no one holds it (SKIP LOCKED) and
// changes it, or where the pick finds it held changes nothing; a duplicate key on another index
// (the primary key) and any other error roll the publish back and return the driver's error as
// it is, never read as a duplicate. The statements are the golden files'.
func TestUniqueKeyTakenStatements(t *testing.T) {
	sh := goldenShape("unique")
	sh.table.LockedUntil = sh.lease
	for _, c := range []dbCase{onMySQL, onMariaDB} {
		insert := goldenSQL(t, "publish", c.db, sh).of("insert unique")
		u := goldenSQL(t, "unique", c.db, sh)
		taken := errors.New("Error 1062 (23000): Duplicate entry 'k' for key 'jobs_unique_key_key'")
		if c.db == "mysql" {
			taken = errors.New("Error 1062 (23000): Duplicate entry 'k' for key 'jobs.jobs_unique_key_key'")
		}
		primary := errors.New("Error 1062 (23000): Duplicate entry '5' for key 'PRIMARY'")
		other := errors.New("Error 1406 (22001): Data too long for column 'payload' at row 1")
		for _, tc := range []struct {
			name    string
			oc      inbox.OnConflict
			insert  error // the INSERT's error; nil: it inserts row 5
			held    bool  // the replace's pick finds the holder held
			want    inbox.Enqueued
			wantErr error
		}{
			{name: "inserted", want: inbox.Enqueued{ID: 5}},
			{name: "skip", insert: taken, want: inbox.Enqueued{ID: 7, Duplicate: true}},
			{name: "replace", oc: inbox.OnConflictReplace, insert: taken, want: inbox.Enqueued{ID: 7, Duplicate: true, Changed: true}},
			{name: "replace held", oc: inbox.OnConflictReplace, insert: taken, held: true, want: inbox.Enqueued{ID: 7, Duplicate: true}},
			{name: "primary key", insert: primary, wantErr: primary},
			{name: "other error", insert: other, wantErr: other},
		} {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				m := newRecorder(t, 0)
				m.mock.ExpectBegin()
				e := m.mock.ExpectExec(insert).WithArgs([]byte("p"), "q", 0, nil, nil, sqlmock.AnyArg(), "k")
				switch {
				case tc.insert == nil:
					e.WillReturnResult(sqlmock.NewResult(5, 1))
				default:
					e.WillReturnError(tc.insert)
				}
				if tc.insert == taken {
					m.mock.ExpectQuery(u.of("holder")).WithArgs("k").WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(7)))
				}
				if tc.oc == inbox.OnConflictReplace {
					pick := m.mock.ExpectQuery(u.of("pick-queued")).WithArgs(int64(7), sqlmock.AnyArg())
					if tc.held {
						pick.WillReturnRows(sqlmock.NewRows([]string{"id"}))
					} else {
						pick.WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(7)))
						m.mock.ExpectExec(u.of("replace")).WithArgs([]byte("p"), nil, int64(7), sqlmock.AnyArg()).WillReturnResult(sqlmock.NewResult(0, 1))
					}
				}
				if tc.wantErr != nil {
					m.mock.ExpectRollback()
				} else {
					m.mock.ExpectCommit()
				}
				res, err := inbox.EnqueueResults(context.Background(), m.db, c.d, sh.table, inbox.Message{Queue: "q", Payload: []byte("p"), UniqueKey: "k", OnConflict: tc.oc})
				switch {
				case tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || res != nil):
					t.Errorf("EnqueueResults = %+v, %v; want the driver's error %v", res, err, tc.wantErr)
				case tc.wantErr == nil && (err != nil || len(res) != 1 || res[0] != tc.want):
					t.Errorf("EnqueueResults = %+v, %v; want %+v", res, err, tc.want)
				}
				if err := m.mock.ExpectationsWereMet(); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestUniqueKeyTakenPostgres pins the same on Postgres: INSERT … ON CONFLICT (key) DO NOTHING
// RETURNING id returns no row, and the holder is read without a lock.
func TestUniqueKeyTakenPostgres(t *testing.T) {
	sh := goldenShape("unique")
	sh.table.LockedUntil = sh.lease
	m := newRecorder(t, 0)
	m.mock.ExpectBegin()
	m.mock.ExpectQuery(goldenSQL(t, "publish", "postgres", sh).of("insert unique")).
		WithArgs([]byte("p"), "q", 0, nil, nil, sqlmock.AnyArg(), "k").WillReturnRows(sqlmock.NewRows([]string{"id"}))
	m.mock.ExpectQuery(goldenSQL(t, "unique", "postgres", sh).of("holder")).WithArgs("k").
		WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(7)))
	m.mock.ExpectCommit()
	res, err := inbox.EnqueueResults(context.Background(), m.db, onPostgres.d, sh.table, inbox.Message{Queue: "q", Payload: []byte("p"), UniqueKey: "k"})
	if err != nil || len(res) != 1 || res[0] != (inbox.Enqueued{ID: 7, Duplicate: true}) {
		t.Errorf("EnqueueResults = %+v, %v; want a duplicate of row 7", res, err)
	}
	if err := m.mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
