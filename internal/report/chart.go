package report

import (
	"fmt"
	"math"
)

// chart is the geometry of one target's ceiling chart: a horizontal bar
// per device, on a log scale (ceilings span phones to data-center GPUs,
// three orders of magnitude), the host's measured rate drawn over its
// ceiling. Everything is computed here; the template only prints numbers.
type chart struct {
	Title         string
	Width, Height float64
	BarX, BarW    float64
	PlotTop       float64
	PlotBottom    float64
	Ticks         []tick
	Rows          []chartRow
}

type tick struct {
	X     float64
	Label string
}

type chartRow struct {
	Label   string // short: the device id, or "this host"
	Tooltip string // the full name
	LabelY  float64
	BarY    float64
	BarH    float64
	CeilW   float64
	Value   string
	ValueX  float64
	// MeasW is the measured bar's width; Measured says whether there is one.
	Measured bool
	MeasW    float64
	MeasY    float64
	MeasH    float64
	Host     bool
	Target   bool
	// Fill colours the ceiling bar: grey for this host, dark blue for the
	// target's device, light blue for the others. Colours are attributes,
	// not classes, so the SVG renders the same when copied out of the page.
	Fill string
}

const (
	chartWidth   = 780.0
	chartLabelW  = 170.0
	chartBarW    = 400.0
	chartRowH    = 24.0
	chartTop     = 12.0
	chartAxisGap = 26.0
)

// newChart lays out rows, t's ceilings, or returns nil when there are
// none.
func newChart(t Target, rows []Ceiling) *chart {
	if len(rows) == 0 {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, v := range []float64{r.CeilingTokS, measured(r)} {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		return nil
	}
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi <= dLo {
		dHi = dLo + 1
	}
	c := &chart{Width: chartWidth, BarX: chartLabelW, BarW: chartBarW, PlotTop: chartTop,
		Title: fmt.Sprintf("Decode ceiling of %s (%s) per device, tok/s, log scale", t.Name, HumanBytes(t.SizeBytes))}
	x := func(v float64) float64 {
		if v <= 0 {
			return 0
		}
		w := (math.Log10(v) - dLo) / (dHi - dLo) * chartBarW
		return math.Max(1, w)
	}
	for i, r := range rows {
		y := chartTop + float64(i)*chartRowH
		row := chartRow{Label: r.Device, Tooltip: r.Name, LabelY: y + chartRowH*0.65, BarY: y + 4, BarH: chartRowH - 8,
			CeilW: x(r.CeilingTokS), Host: r.Host, Target: r.Target, Fill: "#9ec5fe"}
		switch {
		case r.Host:
			row.Fill = "#c8c8c8"
		case r.Target:
			row.Fill = "#3d8bfd"
		}
		row.Value = "ceiling " + tokS(r.CeilingTokS)
		if r.Host {
			row.Label = "this host"
			if t.Earlier {
				row.Label = "earlier host"
			}
		}
		if r.MeasuredTokS != nil && *r.MeasuredTokS > 0 {
			row.Measured = true
			row.MeasW = x(*r.MeasuredTokS)
			row.MeasY, row.MeasH = y+8, chartRowH-16
			row.Value = fmt.Sprintf("measured %s / %s (%s)", tokS(*r.MeasuredTokS), tokS(r.CeilingTokS), percent(r.efficiency()))
		}
		row.ValueX = chartLabelW + math.Max(row.CeilW, row.MeasW) + 6
		c.Rows = append(c.Rows, row)
	}
	c.PlotBottom = chartTop + float64(len(rows))*chartRowH
	for d := dLo; d <= dHi; d++ {
		c.Ticks = append(c.Ticks, tick{X: chartLabelW + (d-dLo)/(dHi-dLo)*chartBarW, Label: decade(d)})
	}
	c.Height = c.PlotBottom + chartAxisGap
	return c
}

func measured(c Ceiling) float64 {
	if c.MeasuredTokS == nil {
		return 0
	}
	return *c.MeasuredTokS
}

// decade labels 10^d: 0.01, 0.1, 1, 10, 100, 1k, 10k, 100k, 1M.
func decade(d float64) string {
	v := math.Pow(10, d)
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	default:
		return fmt.Sprintf("%g", v)
	}
}
