package sqltext

import "strings"

// Arg is what a statement's parameter binds, by its role; a statement lists its parameters'
// Args in the order their placeholders appear (Statement.Args), and the golden files print
// them beside the text, so that a change to the order shows in a golden diff.
type Arg string

// The roles a form's, a wake-up's or a search's parameter binds. A role of several values (ids,
// tokens, kinds, keys) takes them in order, one per placeholder of the role.
const (
	ArgNow     Arg = "now"     // the claim's (or the wake-up's) reading of the clock
	ArgQueue   Arg = "queue"   // the queue's name
	ArgKind    Arg = "kind"    // a kind's name, in the order the statement lists them (OtherKinds)
	ArgID      Arg = "id"      // a row's id
	ArgToken   Arg = "token"   // the lease token a row's holder wrote, which must still hold
	ArgLease   Arg = "lease"   // the lease token a claim or an extension writes
	ArgAttempt Arg = "attempt" // the attempt the claim read (a relock's check)
	ArgAt      Arg = "at"      // the time a settlement stamps: processed_at, retry_after or dead_at
	ArgError   Arg = "error"   // the last error a settlement writes
	ArgLimit   Arg = "limit"   // how many rows a claim takes
	ArgKey     Arg = "key"     // a row's key, the advisory lock's name
	ArgHorizon Arg = "horizon" // the time past which a retry_after reads as never (FarAhead)
	ArgChannel Arg = "channel" // the channel a publish notifies

	// A publish's roles where another row holds its unique key (Unique).
	ArgUniqueKey     Arg = "unique_key"     // the message's unique key
	ArgPayload       Arg = "payload"        // the payload a replace writes
	ArgRunAt         Arg = "run_at"         // the message's run time, its now where it is due at once
	ArgSettledBefore Arg = "settled_before" // the time before which a settled holder's key has expired

	// The sweeper lease's and retention's roles (Sweeps, Purge).
	ArgTable           Arg = "table"            // the job table's name (as described), the sweeper lease's and a pause's key
	ArgHolder          Arg = "holder"           // the sweeper's name, the lease's holder; a group hold's holder id as a claim read it
	ArgFor             Arg = "for"              // a duration on the database's clock, in microseconds
	ArgProcessedBefore Arg = "processed_before" // the time before which a processed row expires
	ArgDeadBefore      Arg = "dead_before"      // the time before which a dead row expires
	ArgCancelledBefore Arg = "cancelled_before" // the time before which a cancelled row expires

	// A FIFO group hold's roles (Lease's TakeHeld, TakeFree); a hold also binds ArgTable, ArgID
	// (the claimed row, the new holder), ArgLease and ArgToken (the token the pick read).
	ArgGroup Arg = "group" // the claimed row's group key

	// A concurrency limit's and its slots' roles (Limits; Lease's ReadSlots, TakeSlot,
	// NewSlot), and a rate limit's (Rates); they also bind ArgTable, ArgQueue, ArgLimit (a
	// limit's max_in_work), ArgFor (a rate's interval), ArgID, ArgLease, ArgHolder and ArgToken.
	ArgScope    Arg = "scope"     // what a limit or a rate counts: queue, kind or key
	ArgLimitKey Arg = "limit_key" // a limit's key: empty, a kind's name or a limit key
	ArgSlot     Arg = "slot"      // a slot's number: a limit's, or a rate's start slot
	ArgRateKey  Arg = "rate_key"  // the kind a rate limits; empty for a queue's
	ArgStarts   Arg = "starts"    // a rate's starts per interval
	ArgNowUs    Arg = "now_us"    // the claim's reading of the clock, in Unix microseconds
	// The limits a row lock claim found full, whose rows its candidates leave out
	// (RowLock.Candidates), in the order the statement lists them.
	ArgFullKind Arg = "full_kind" // the kind of a kind's limit found full
	ArgFullKey  Arg = "full_key"  // the limit key of a key's limit found full
)

// Statement is a statement's text and the roles of its parameters, in the order they appear.
// Bind orders the arguments of a run by those roles, so that no caller orders them itself.
type Statement struct {
	SQL  string
	Args []Arg
}

// Values are the values a run of a statement binds, by role; a statement binds those of the
// roles it lists (Statement.Args). A value of the database's form (a time as
// dialect.Dialect.Time returns it) is given as it is to be bound.
type Values struct {
	Now, Queue, Lease, Attempt, At, Error, Limit, Horizon, Channel any
	// The sweeper lease's, retention's and the pauses' values (Sweeps, Purge, Pauses); a claim
	// binds Table where the description names a pauses table or a cancelled_at column.
	Table, Holder, For, ProcessedBefore, DeadBefore, CancelledBefore any
	// A publish's values where another row holds its unique key (Unique).
	UniqueKey, Payload, RunAt, SettledBefore any
	// A FIFO group hold's group key (Lease's TakeHeld, TakeFree).
	Group any
	// A concurrency limit's or a rate's scope, and a slot's number (Limits, Lease's slots,
	// Rates); a limit's key; a rate's key, starts and the clock in microseconds.
	Scope, LimitKey, Slot  any
	RateKey, Starts, NowUs any
	Kinds                  []string
	IDs                    []int64
	Tokens                 []any
	Keys                   []string
	// The kinds and the limit keys whose limits a row lock claim found full (RowLock.Candidates).
	FullKinds, FullKeys []string
}

// Bind appends to dst the arguments of a run of st, v's values in the order st lists their
// roles, and returns the extended slice. Given a dst with room for them, it allocates nothing
// but what boxing a value as an any costs; given nil, one slice of their number. It panics where v holds fewer values of a role of
// several than st has placeholders of it: the form's mistake, never the user's.
func (st Statement) Bind(dst []any, v *Values) []any {
	if dst == nil {
		dst = make([]any, 0, len(st.Args))
	}
	var ids, tokens, kinds, keys, fullKinds, fullKeys int
	for _, a := range st.Args {
		switch a {
		case ArgID:
			dst = append(dst, v.IDs[ids])
			ids++
		case ArgToken:
			dst = append(dst, v.Tokens[tokens])
			tokens++
		case ArgKind:
			dst = append(dst, v.Kinds[kinds])
			kinds++
		case ArgKey:
			dst = append(dst, v.Keys[keys])
			keys++
		case ArgFullKind:
			dst = append(dst, v.FullKinds[fullKinds])
			fullKinds++
		case ArgFullKey:
			dst = append(dst, v.FullKeys[fullKeys])
			fullKeys++
		default:
			dst = append(dst, v.one(a))
		}
	}
	return dst
}

// one is v's value of a role of one value.
func (v *Values) one(a Arg) any {
	switch a {
	case ArgNow:
		return v.Now
	case ArgQueue:
		return v.Queue
	case ArgLease:
		return v.Lease
	case ArgAttempt:
		return v.Attempt
	case ArgAt:
		return v.At
	case ArgError:
		return v.Error
	case ArgLimit:
		return v.Limit
	case ArgHorizon:
		return v.Horizon
	case ArgChannel:
		return v.Channel
	}
	return v.beside(a)
}

// beside is v's value of a role of one value of the statements beside the forms' (the sweeper
// lease's and retention's, a keyed publish's, a group hold's).
func (v *Values) beside(a Arg) any {
	switch a {
	case ArgTable:
		return v.Table
	case ArgHolder:
		return v.Holder
	case ArgFor:
		return v.For
	case ArgProcessedBefore:
		return v.ProcessedBefore
	case ArgDeadBefore:
		return v.DeadBefore
	case ArgUniqueKey:
		return v.UniqueKey
	case ArgPayload:
		return v.Payload
	case ArgRunAt:
		return v.RunAt
	case ArgSettledBefore:
		return v.SettledBefore
	case ArgCancelledBefore:
		return v.CancelledBefore
	case ArgGroup:
		return v.Group
	case ArgScope:
		return v.Scope
	case ArgLimitKey:
		return v.LimitKey
	case ArgSlot:
		return v.Slot
	}
	return v.rated(a)
}

// rated is v's value of a rate limit's role (Rates).
func (v *Values) rated(a Arg) any {
	switch a {
	case ArgScope:
		return v.Scope
	case ArgRateKey:
		return v.RateKey
	case ArgStarts:
		return v.Starts
	case ArgSlot:
		return v.Slot
	case ArgNowUs:
		return v.NowUs
	}
	panic("sqltext: no value for the parameter role " + string(a))
}

// Empty reports whether the statement has no text: one the table or the database does not have.
func (st Statement) Empty() bool { return st.SQL == "" }

// ArgList is the statement's roles, comma-separated, or "none": the golden files' line.
func (st Statement) ArgList() string {
	if len(st.Args) == 0 {
		return "none"
	}
	ss := make([]string, len(st.Args))
	for i, a := range st.Args {
		ss[i] = string(a)
	}
	return strings.Join(ss, ", ")
}
