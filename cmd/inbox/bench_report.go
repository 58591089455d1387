package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func numCPU() int       { return runtime.NumCPU() }
func gomaxprocs() int   { return runtime.GOMAXPROCS(0) }
func goVersion() string { return runtime.Version() }

// median of the counted rounds (a failed round is 0 and left out).
func median(v []float64) float64 {
	s := counted(v)
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pairedRatio is the median over rounds of library/raw, each round's library drain divided by
// the raw drain that ran right after it: on a noisy machine the pair shares the noise, where
// a ratio of the two medians would not.
func pairedRatio(c *cell) float64 {
	var r []float64
	for i := range min(len(c.lib), len(c.raw)) {
		if c.lib[i] > 0 && c.raw[i] > 0 {
			r = append(r, c.lib[i]/c.raw[i])
		}
	}
	return median(r)
}

// counted leaves out the rounds that failed.
func counted(v []float64) []float64 {
	var s []float64
	for _, x := range v {
		if x > 0 {
			s = append(s, x)
		}
	}
	return s
}

// spread formats a cell's samples as "median (min–max)".
func spread(v []float64) string {
	v = counted(v)
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", thousands(median(v)), thousands(slices.Min(v)), thousands(slices.Max(v)))
}

// thousands formats a rate as a whole number with thousands separators.
func thousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// printCells writes the throughput table in Markdown.
func printCells(w io.Writer, cells []*cell) {
	fmt.Fprintln(w, "| database | form | batch | workers | library msgs/s | raw msgs/s | library/raw (paired) | allocs/msg library, raw |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|")
	for _, c := range cells {
		ratio := "–"
		if r := pairedRatio(c); r > 0 {
			ratio = fmt.Sprintf("%.2f", r)
		}
		allocs := "–"
		if len(c.libAllocs) > 0 && len(c.rawAllocs) > 0 {
			allocs = fmt.Sprintf("%.1f, %.1f", median(c.libAllocs), median(c.rawAllocs))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s | %s |\n", dbLabel(c.db), c.form, c.batch, c.workers, spread(c.lib), spread(c.raw), ratio, allocs)
	}
}

// dbLabel names a database cell as the tables show it.
func dbLabel(db string) string {
	switch db {
	case "postgres":
		return "Postgres"
	case "mysql":
		return "MySQL dialect"
	case "mariadb":
		return "MariaDB"
	}
	return "SQLite"
}

// benchBar draws a bar on stderr while the drains run, when stderr is a terminal; otherwise it
// prints a line per finished drain, which reads well in a CI log.
type benchBar struct {
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

func newBenchBar(total int64) *benchBar {
	p := &benchBar{total: max(total, 1), start: time.Now(), quit: make(chan struct{}), exited: make(chan struct{})}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
	}
	go p.loop()
	return p
}

// add counts n messages handled.
func (p *benchBar) add(n int64) { p.done.Add(n) }

func (p *benchBar) setLabel(s string) {
	p.mu.Lock()
	p.label = s
	p.mu.Unlock()
}

// logf prints a line about a finished drain: above the bar on a terminal, as it is elsewhere.
func (p *benchBar) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(os.Stderr, "\r\033[K"+format+"\n", args...)
		p.draw()
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (p *benchBar) loop() {
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
func (p *benchBar) draw() {
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

func (p *benchBar) stop() {
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
