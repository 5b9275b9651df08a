package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// result is one benchmark's BENCH line: ordered key=value pairs, with ratio
// last. A skipped benchmark has a reason and no ratio.
type result struct {
	name    string
	keys    []kv
	ratio   float64
	skipped string
}

type kv struct{ key, value string }

func (r *result) add(key string, value any) {
	var s string
	switch v := value.(type) {
	case string:
		s = v
	case float64:
		s = fmtFloat(v)
	case time.Duration:
		s = fmtFloat(v.Seconds())
	case bool:
		s = "no"
		if v {
			s = "yes"
		}
	default:
		s = fmt.Sprint(v)
	}
	r.keys = append(r.keys, kv{key, s})
}

// line renders the BENCH line. Values with spaces or quotes are quoted so
// the line stays machine-readable as key=value tokens.
func (r result) line() string {
	var b strings.Builder
	b.WriteString("BENCH ")
	b.WriteString(r.name)
	if r.skipped != "" {
		b.WriteString(" skipped reason=")
		b.WriteString(quoteIfNeeded(r.skipped))
		return b.String()
	}
	for _, p := range r.keys {
		fmt.Fprintf(&b, " %s=%s", p.key, quoteIfNeeded(p.value))
	}
	fmt.Fprintf(&b, " ratio=%s", fmtFloat(r.ratio))
	return b.String()
}

func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"'=") {
		return strconv.Quote(s)
	}
	return s
}

// fmtFloat prints three significant digits, enough for noisy timings.
func fmtFloat(f float64) string {
	return strconv.FormatFloat(f, 'g', 3, 64)
}

// fmtBytes prints a byte count in the unit that keeps it short: exact bytes
// under 1 KiB, else KiB/MiB/GiB with at most two decimals.
func fmtBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	f := float64(n)
	unit := ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= 1024
		unit = u
		if f < 1024 {
			break
		}
	}
	s := strconv.FormatFloat(f, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + unit
}
