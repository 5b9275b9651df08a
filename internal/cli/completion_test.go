package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The flags come from the commands' own flag sets, so every command and
// every flag is there without a table to keep up.
func TestCompletionReadsEachCommandsFlags(t *testing.T) {
	cmds := completionCommands(context.Background())
	if len(cmds) != len(commands) {
		t.Fatalf("%d commands to complete, %d registered", len(cmds), len(commands))
	}
	byName := map[string]compCommand{}
	for _, c := range cmds {
		byName[c.Name] = c
	}
	flagOf := func(cmd, name string) (compFlag, bool) {
		for _, f := range byName[cmd].Flags {
			if f.Name == name {
				return f, true
			}
		}
		return compFlag{}, false
	}
	for _, want := range []struct {
		cmd, flag string
		value     bool
	}{
		{"run", "junit", true}, {"run", "keep-going", false}, {"run", "j", true},
		{"plan", "json", false}, {"pick", "platform", true}, {"cache", "older-than", true},
	} {
		f, ok := flagOf(want.cmd, want.flag)
		if !ok || f.TakesValue != want.value {
			t.Errorf("%s -%s: found %v, takes a value %v; want found, %v", want.cmd, want.flag, ok, f.TakesValue, want.value)
		}
	}
	if f, _ := flagOf("pick", "platform"); len(f.Value.Words) == 0 || f.Value.Words[0] != "ios" {
		t.Errorf("pick --platform completes %v, want the platforms", f.Value.Words)
	}
	if f, _ := flagOf("graph", "format"); strings.Join(f.Value.Words, " ") != "dot mermaid" {
		t.Errorf("graph --format completes %v, want dot mermaid", f.Value.Words)
	}
	if byName["run"].arg(0).Files != "yaml yml" || !byName["run"].arg(1).none() {
		t.Errorf("run takes one recipe file: %+v", byName["run"])
	}
}

// A --device flag completes device ids in every shell. No command has one
// yet, so the test gives a command one.
func TestCompletionOfDeviceFlags(t *testing.T) {
	cmds := []compCommand{{Name: "fake", Summary: "a command with a device flag",
		Flags: []compFlag{{Name: "device", Usage: "the device", TakesValue: true, Value: flagValue("fake", "device")}}}}
	var bash, zsh, fish bytes.Buffer
	writeBash(&bash, cmds)
	writeZsh(&zsh, cmds)
	writeFish(&fish, cmds)
	for shell, out := range map[string]string{"bash": bash.String(), "zsh": zsh.String(), "fish": fish.String()} {
		if !strings.Contains(out, "apple-m3-max") || !strings.Contains(out, "x86-laptop") {
			t.Errorf("%s script does not list the device ids:\n%s", shell, out)
		}
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to run the script")
	}
	script := filepath.Join(t.TempDir(), "edgepipe.bash")
	if err := os.WriteFile(script, bash.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", `source "$1"; COMP_WORDS=(edgepipe fake --device x86); COMP_CWORD=3; _edgepipe; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "x86-laptop" {
		t.Errorf("edgepipe fake --device x86<TAB> gives %q, want x86-laptop", got)
	}
}

func TestZshAndFishQuoting(t *testing.T) {
	if got := zshDesc("a [b]: it's\nsecond line"); got != `a \[b\]\: it'\''s` {
		t.Errorf("zshDesc: %q", got)
	}
	if got := fishQuote(`it's a \ path`); got != `'it\'s a \\ path'` {
		t.Errorf("fishQuote: %q", got)
	}
}
