package ui

import (
	"errors"
	"net/http"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
)

// schedulesPage lists the table's periodic jobs (inbox.Periodic) from its ticks table.
type schedulesPage struct {
	view
	Schedules []admin.Schedule
	// NoTicks is why there is no list: the ticks table cannot be read, which on a table whose
	// periodic jobs never ran means it does not exist.
	NoTicks string
	Now     time.Time
}

func (h *handler) schedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	p := schedulesPage{view: h.view(w, r, "schedules"), Now: time.Now()}
	list, err := h.a.Schedules(ctx)
	switch {
	case errors.Is(err, inbox.ErrSchema):
		p.NoTicks = err.Error()
	case err != nil:
		h.fail(w, r, h.statusOf(err), err)
		return
	}
	p.Schedules = list
	h.render(w, http.StatusOK, "schedules", p)
}
