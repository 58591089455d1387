package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/sqlinbox/inbox/bench/harness"
)

// writePlot draws msgs/s by workers, one panel per database and form: the library and the raw
// loop for each batch size, each a line through the medians with a bar from min to max. Plain
// SVG, written by hand.
func writePlot(path string, cells []*cell, cfg *config) error {
	type panelKey struct{ db, form string }
	var panels []panelKey
	for _, c := range cells {
		k := panelKey{c.db, c.form}
		if !slices.Contains(panels, k) {
			panels = append(panels, k)
		}
	}
	const (
		cols           = 3
		pw, ph         = 300, 210 // panel size
		ml, mr, mt, mb = 62, 12, 28, 34
		legendH        = 46
	)
	rows := (len(panels) + cols - 1) / cols
	width, height := cols*pw, legendH+rows*ph

	type series struct {
		name, color, dash string
		pick              func(c *cell) []float64
		batch             func(b int) bool
	}
	// Per batch size a colour: the library's line solid, the raw loop's dashed.
	var all []series
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"}
	for i, b := range cfg.batches {
		per := "1 per claim"
		if b > 1 {
			per = fmt.Sprintf("batches of %d", b)
		}
		color, of := colors[i%len(colors)], func(bb int) bool { return bb == b }
		all = append(all,
			series{"library, " + per, color, "", func(c *cell) []float64 { return c.lib }, of},
			series{"raw loop, " + per, color, "6,4", func(c *cell) []float64 { return c.raw }, of})
	}

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&s, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&s, `<text x="8" y="16" font-size="13" font-weight="bold">msgs/s by workers (log scale), %d rows per round, median of %d rounds (bars: min to max)</text>`+"\n", cfg.n, cfg.rounds)
	x := 8
	for _, se := range all {
		fmt.Fprintf(&s, `<line x1="%d" y1="34" x2="%d" y2="34" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`, x, x+24, se.color, se.dash)
		fmt.Fprintf(&s, `<text x="%d" y="38">%s</text>`+"\n", x+30, html.EscapeString(se.name))
		x += 40 + 7*len(se.name)
	}

	workers := cfg.workers
	for i, p := range panels {
		ox, oy := (i%cols)*pw, legendH+(i/cols)*ph
		var mine []*cell
		lo, hi := math.Inf(1), 0.0
		for _, c := range cells {
			if c.db == p.db && c.form == p.form {
				mine = append(mine, c)
				for _, v := range harness.Counted(append(slices.Clone(c.lib), c.raw...)) {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
		// A log scale: batches run ten times the single deliveries' rate.
		bottom := math.Pow(10, math.Floor(math.Log10(max(lo, 1))))
		top := math.Pow(10, math.Ceil(math.Log10(max(hi, bottom*10))))
		px := func(w int) float64 {
			idx := slices.Index(workers, w)
			if len(workers) == 1 {
				return float64(ox+ml) + float64(pw-ml-mr)/2
			}
			return float64(ox+ml) + float64(idx)*float64(pw-ml-mr-20)/float64(len(workers)-1) + 10
		}
		py := func(v float64) float64 {
			f := (math.Log10(max(v, bottom)) - math.Log10(bottom)) / (math.Log10(top) - math.Log10(bottom))
			return float64(oy+ph-mb) - f*float64(ph-mt-mb)
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" font-weight="bold">%s, %s</text>`+"\n", ox+ml, oy+mt-10, harness.Label(p.db), p.form)
		for decade := bottom; decade < top*1.01; decade *= 10 {
			for _, m := range []float64{1, 2, 5} {
				v := decade * m
				if v > top*1.01 {
					break
				}
				y := py(v)
				fmt.Fprintf(&s, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`, ox+ml, y, ox+pw-mr, y)
				fmt.Fprintf(&s, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", ox+ml-4, y+4, harness.Thousands(v))
			}
		}
		fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, ox+ml, oy+ph-mb, ox+pw-mr, oy+ph-mb)
		fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", ox+ml, oy+mt, ox+ml, oy+ph-mb)
		for _, w := range workers {
			fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`, px(w), oy+ph-mb+14, w)
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="middle">workers</text>`+"\n", ox+ml+(pw-ml-mr)/2, oy+ph-mb+28)

		for _, se := range all {
			var pts []string
			for _, w := range workers {
				for _, c := range mine {
					if c.workers != w || !se.batch(c.batch) {
						continue
					}
					v := harness.Counted(se.pick(c))
					if len(v) == 0 {
						continue
					}
					x, y := px(w), py(harness.Median(v))
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
					fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, x, py(slices.Min(v)), x, py(slices.Max(v)), se.color)
					fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", x, y, se.color)
				}
			}
			if len(pts) > 1 {
				fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.8" stroke-dasharray="%s"/>`+"\n", strings.Join(pts, " "), se.color, se.dash)
			}
		}
	}
	s.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(s.String()), 0o644)
}
