package ui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// parsePages parses each page's template with the layout and the parts pages share.
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"count":      shownCount,
		"age":        shownAge,
		"when":       shownTime,
		"since":      since,
		"preview":    preview,
		"unknownAge": func(d time.Duration) bool { return d == admin.Unknown },
		"stateName":  func(s admin.State) string { return s.String() },
		"stateClass": func(s admin.State) string { return strings.ReplaceAll(s.String(), " ", "-") },
		"pair":       func(r admin.Row, now time.Time) rowAt { return rowAt{r, now} },
		"int64":      func(n int) int64 { return int64(n) },
		"queue":      shownQueue,
	}
	pages := map[string]*template.Template{}
	for page, files := range map[string][]string{
		"overview":  {"layout.html", "overview.html"},
		"queues":    {"layout.html", "overview.html"},
		"rows":      {"layout.html", "rows.html"},
		"row":       {"layout.html", "row.html"},
		"act":       {"layout.html", "act.html"},
		"error":     {"layout.html", "error.html"},
		"schedules": {"layout.html", "schedules.html"},
		"groups":    {"layout.html", "groups.html"},
		"limits":    {"layout.html", "limits.html"},
	} {
		paths := make([]string, len(files))
		for i, f := range files {
			paths[i] = "templates/" + f
		}
		t, err := template.New(page).Funcs(funcs).ParseFS(assets, paths...)
		if err != nil {
			return nil, sentinel.Errorf(nil, "", "ui: the %s page's templates: %w", page, err)
		}
		pages[page] = t
	}
	return pages, nil
}

// rowAt is a row and the time a page reads it at.
type rowAt struct {
	Row admin.Row
	Now time.Time
}

// shownCount writes a count with thousands apart ("12,345"), "unknown" for admin.Unknown.
func shownCount(n int64) string {
	if n == admin.Unknown {
		return "unknown"
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// shownAge writes a wait as an operator reads it: "4s", "12m", "3h05m", "2d4h"; "unknown" for
// admin.Unknown.
func shownAge(d time.Duration) string {
	switch {
	case d == admin.Unknown:
		return "unknown"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

// shownTime writes a time in UTC to the second; "" for the zero time.
func shownTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// since writes how long before now t was ("12m ago"), or how long after ("in 5m"); "" for the
// zero time.
func since(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if d := now.Sub(t); d >= 0 {
		return shownAge(d) + " ago"
	}
	return "in " + shownAge(t.Sub(now))
}

// preview is the start of a payload or an error as a listing shows it: its text where it is
// text, or "hex" and its first bytes.
func preview(b []byte) string {
	if b == nil {
		return ""
	}
	if printable(b) {
		return strings.ToValidUTF8(string(b), "…")
	}
	n := min(len(b), 24)
	return "hex " + hex.EncodeToString(b[:n])
}

// printable reports whether b is text a person reads: UTF-8 (or UTF-8 cut short at its end)
// without control characters but white space.
func printable(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return false
		}
		b = b[size:]
	}
	return true
}

// shown is a payload, or the headers, as the row's page shows them: indented JSON, text, or
// a hex dump.
type shown struct {
	Kind string // "JSON", "text", "bytes", or "" when there is none
	Text string
	Size int
}

func showPayload(b []byte) shown {
	if len(b) == 0 {
		return shown{}
	}
	var out bytes.Buffer
	if json.Valid(b) && json.Indent(&out, b, "", "  ") == nil {
		return shown{Kind: "JSON", Text: out.String(), Size: len(b)}
	}
	if printable(b) {
		return shown{Kind: "text", Text: string(b), Size: len(b)}
	}
	return shown{Kind: "bytes", Text: hex.Dump(b), Size: len(b)}
}

// showValue is one of the application's own columns as the driver scanned it.
func showValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return preview(v)
	case time.Time:
		return shownTime(v)
	}
	return fmt.Sprint(v)
}
