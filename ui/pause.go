package ui

import (
	"context"
	"fmt"
	"net/http"
)

// pause pauses or resumes the queue the form names, through admin.Pause and admin.Resume,
// and goes back to the overview, which shows the queue's new state at once.
func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	if !h.posted(w, r, "pause or resume") {
		return
	}
	queue, do := r.PostFormValue("queue"), r.PostFormValue("do")
	run := map[string]func(context.Context, string) error{"pause": h.a.Pause, "resume": h.a.Resume}[do]
	if run == nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("do=%q: pause or resume", do))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ActionTimeout)
	defer cancel()
	err := run(ctx, queue)
	h.log.Info("inbox ui: "+do, "queue", queue, "err", err)
	if err != nil {
		h.fail(w, r, h.statusOf(err), err)
		return
	}
	h.counts.setPaused(queue, do == "pause")
	http.Redirect(w, r, base(r)+"/", http.StatusSeeOther)
}
