package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"
)

const schedulesHead = `Lists the schedules of the table's periodic jobs (inbox.Periodic), from its ticks table
(<table>_ticks, which inbox schema -schedules creates): each schedule's last tick taken, the next
tick the process that took it planned, and the id of the last job a tick published. The next
tick is as planned then: only the code that defines a schedule can compute it anew, so a
schedule changed in code since, or stopped, shows the tick it had planned. Times are UTC.`

func schedulesCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("schedules", schedulesHead)
	dsn := dsnFlag(fs, "none")
	asJSON := fs.Bool("json", false, "print each schedule as a line of JSON (a tick never taken or planned is null)")
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	o, err := s.operate(ctx, *dsn, tf, readFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	list, err := o.admin.Schedules(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		for _, sc := range list {
			b, _ := json.Marshal(sc)
			fmt.Fprintf(s.stdout, "%s\n", b)
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintf(s.stdout, "no schedule has run on table %s\n", *tf.name)
		return nil
	}
	w := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "schedule\tlast tick\tnext tick\tlast job")
	for _, sc := range list {
		job := "none"
		if sc.JobID != 0 {
			job = fmt.Sprint(sc.JobID)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", sc.Name, tick(sc.LastTick, "never"), tick(sc.NextTick, "none planned"), job)
	}
	return w.Flush()
}

// tick shows a tick to the millisecond, or none where there is none.
func tick(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Format("2006-01-02 15:04:05.000")
}
