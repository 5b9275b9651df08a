package edge

import (
	"fmt"
	"math"
	"strconv"
)

// gb prints decimal gigabytes with two decimals: "4.66 GB".
func gb(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) + " GB" }

// gbApart prints a and b with enough decimals (2 to 4) that two different
// amounts do not print the same: "needs 6.002 GB, the device leaves 6.000 GB".
func gbApart(a, b float64) (string, string) {
	for dec := 2; ; dec++ {
		sa, sb := strconv.FormatFloat(a, 'f', dec, 64), strconv.FormatFloat(b, 'f', dec, 64)
		if sa != sb || a == b || dec == 4 {
			return sa + " GB", sb + " GB"
		}
	}
}

// paramsAtMost prints a parameter limit rounded down, so "at most" holds.
func paramsAtMost(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", math.Floor(float64(n)/1e7)/100)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", math.Floor(float64(n)/1e5)/10)
	}
	return Params(n)
}

// Params prints a parameter count the way model cards do: 8.03B, 134.5M.
func Params(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// tokS prints a decode speed with one decimal.
func tokS(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) + " tok/s" }
