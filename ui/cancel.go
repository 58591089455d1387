package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
)

// cancelDone is what the row's page says after a cancel or a requeue from it, by the done
// parameter the POST's redirect gives it.
var cancelDone = map[string]string{
	inbox.Cancelled.String():        "Cancelled: no claim takes the row again.",
	inbox.CancelRequested.String():  "Cancel requested: the row is in work, and its consumer cancels its handler at its next look at the requests (Config.CancelPoll), then settles the row as cancelled.",
	inbox.AlreadyProcessed.String(): "Not cancelled: the row was processed already.",
	inbox.AlreadyDead.String():      "Not cancelled: the row was dead already.",
	inbox.AlreadyCancelled.String(): "The row was cancelled already.",
	"requeued":                      "Requeued: the row is due at once, attempt 0.",
	"not requeued":                  "Not requeued: the row is no longer cancelled.",
}

// cancel cancels the row the form names (admin.Cancel), or requeues it where it was cancelled
// (admin.RequeueCancelled), and goes back to the row's page, which says what was done.
func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	if !h.posted(w, r, "cancel") {
		return
	}
	id, err := strconv.ParseInt(r.PostFormValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("id %q: a row's id, a whole number above 0", r.PostFormValue("id")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ActionTimeout)
	defer cancel()
	var done string
	switch do := r.PostFormValue("do"); do {
	case "cancel":
		var res []inbox.CancelResult
		if res, err = h.a.Cancel(ctx, id); err == nil {
			done = res[0].Outcome.String()
		}
	case "requeue":
		var n int64
		if n, err = h.a.RequeueCancelled(ctx, admin.IDs(id)); err == nil {
			done = map[bool]string{true: "requeued", false: "not requeued"}[n == 1]
		}
	default:
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("do=%q: cancel or requeue", do))
		return
	}
	h.log.Info("inbox ui: cancel", "id", id, "do", r.PostFormValue("do"), "done", done, "err", err)
	if err != nil {
		h.fail(w, r, h.statusOf(err), err)
		return
	}
	http.Redirect(w, r, base(r)+"/rows/"+strconv.FormatInt(id, 10)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}
