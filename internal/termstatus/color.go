package termstatus

// Colour is for terminals only: the caller decides (a terminal, NO_COLOR
// unset, TERM not "dumb") and passes on. Every painted string carries an
// escape of the same length before and after it (5 and 4 bytes), so a
// column of painted cells still lines up in a tabwriter.

const reset = "\x1b[0m"

// Colours by meaning.
const (
	Green  = "\x1b[32m"
	Yellow = "\x1b[33m"
	Red    = "\x1b[31m"
	Plain  = "\x1b[39m" // the default foreground: same width as the others
)

// Paint wraps s in colour when on.
func Paint(on bool, colour, s string) string {
	if !on {
		return s
	}
	return colour + s + reset
}

// VerdictColour is the colour of a gate verdict or a step's end.
func VerdictColour(word string) string {
	switch word {
	case "excellent", "done", "publish", "published", "pushed":
		return Green
	case "ok", "skipped", "canceled":
		// ok: past warn_delta, within max_delta.
		return Yellow
	case "fail", "FAILED":
		return Red
	}
	return Plain
}

// ColourOn says whether output to a terminal gets colour: not when
// NO_COLOR is set to anything (https://no-color.org) or TERM is dumb.
func ColourOn(isTerminal bool, getenv func(string) string) bool {
	return isTerminal && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}
