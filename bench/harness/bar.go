package harness

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bar draws a progress bar on stderr while the drains run, when stderr is a terminal; its log
// lines (a line per finished drain) go to stderr either way, which reads well in a CI log.
type Bar struct {
	total int64
	done  atomic.Int64
	start time.Time
	tty   bool

	mu      sync.Mutex
	label   string
	stopped bool
	quit    chan struct{}
	exited  chan struct{}
}

// NewBar starts a bar that is full after total rows.
func NewBar(total int64) *Bar {
	p := &Bar{total: max(total, 1), start: time.Now(), quit: make(chan struct{}), exited: make(chan struct{})}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
	}
	go p.loop()
	return p
}

// Add counts n rows drained.
func (p *Bar) Add(n int64) { p.done.Add(n) }

// SetLabel names the drain running.
func (p *Bar) SetLabel(s string) {
	p.mu.Lock()
	p.label = s
	p.mu.Unlock()
}

// Logf prints a line: above the bar on a terminal, as it is elsewhere.
func (p *Bar) Logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(os.Stderr, "\r\033[K"+format+"\n", args...)
		p.draw()
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (p *Bar) loop() {
	defer close(p.exited)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
			p.mu.Lock()
			if p.tty {
				p.draw()
			}
			p.mu.Unlock()
		}
	}
}

// draw redraws the bar; the caller holds p.mu.
func (p *Bar) draw() {
	const width = 30
	done := min(p.done.Load(), p.total)
	filled := int(done * width / p.total)
	elapsed := time.Since(p.start)
	eta := "–"
	if done > 0 {
		eta = (time.Duration(float64(elapsed) * float64(p.total-done) / float64(done))).Round(time.Second).String()
	}
	fmt.Fprintf(os.Stderr, "\r\033[K[%s%s] %3d%%  %s  elapsed %s, about %s left",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done*100/p.total, p.label, elapsed.Round(time.Second), eta)
}

// Stop stops drawing and clears the bar; later calls do nothing.
func (p *Bar) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.mu.Unlock()
	close(p.quit)
	<-p.exited
	if p.tty {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
}
