package cli

import (
	"strings"
	"testing"
)

// Every example in the help parses: its command exists and its flags are
// the command's own.
func TestHelpExamplesParse(t *testing.T) {
	root := newRoot(&Env{Getenv: func(string) string { return "" }})
	seen := 0
	for name, ex := range examples {
		for _, line := range strings.Split(ex, "\n") {
			for _, part := range strings.Split(line, "&&") {
				words := strings.Fields(part)
				for i, w := range words {
					if w == "|" || w == ">" {
						words = words[:i]
						break
					}
				}
				if len(words) == 0 || words[0] != "edgepipe" {
					t.Errorf("%s: example %q does not start with edgepipe", name, part)
					continue
				}
				cmd, rest, err := root.Find(words[1:])
				if err != nil || cmd == root {
					t.Errorf("%s: example %q names no command: %v", name, part, err)
					continue
				}
				if err := cmd.ParseFlags(rest); err != nil {
					t.Errorf("%s: example %q: %v", name, part, err)
				}
				seen++
			}
		}
	}
	for _, c := range commands() {
		name, _, _ := strings.Cut(c.use, " ")
		if examples[name] == "" {
			t.Errorf("command %s has no example", name)
		}
	}
	if seen < len(commands()) {
		t.Errorf("parsed %d examples for %d commands", seen, len(commands()))
	}
}

// Help puts the usage line first, points to the exit codes once, and
// `help exit-codes` prints the table.
func TestHelpUsageFirstExitCodesOnce(t *testing.T) {
	code, out, _ := runMain(t, nil, "validate", "--help")
	if code != ExitOK || !strings.HasPrefix(out, "Usage: edgepipe validate [--json] RECIPE") || strings.Contains(out, "130  interrupted") || !strings.Contains(out, "edgepipe help exit-codes") {
		t.Errorf("validate --help (exit %d):\n%s", code, out)
	}
	code, out, _ = runMain(t, nil, "help", "exit-codes")
	if code != ExitOK || !strings.HasPrefix(out, exitCodesHelp) {
		t.Errorf("help exit-codes (exit %d):\n%s", code, out)
	}
	code, out, _ = runMain(t, nil, "--help")
	if code != ExitOK || !strings.HasPrefix(out, "Usage: edgepipe COMMAND") || !strings.Contains(out, "edgepipe help exit-codes  what each exit code means") {
		t.Errorf("--help (exit %d):\n%s", code, out)
	}
}
