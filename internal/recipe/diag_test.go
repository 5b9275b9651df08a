package recipe

import (
	"errors"
	"testing"
)

func TestPosString(t *testing.T) {
	cases := []struct {
		pos  Pos
		want string
	}{
		{Pos{File: "r.yaml", Line: 3, Col: 5}, "r.yaml:3:5"},
		{Pos{File: "r.yaml", Line: 3}, "r.yaml:3"},
		{Pos{File: "r.yaml"}, "r.yaml"},
		{Pos{Line: 3, Col: 5}, "3:5"},
		{Pos{}, ""},
	}
	for _, c := range cases {
		if got := c.pos.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.pos, got, c.want)
		}
	}
}

func TestDiagnosticString(t *testing.T) {
	d := Diagnostic{Pos: Pos{File: "r.yaml", Line: 2, Col: 3}, Msg: "unknown key \"nmae\"", Hint: "did you mean \"name\"?"}
	want := "r.yaml:2:3: unknown key \"nmae\"\n  hint: did you mean \"name\"?"
	if got := d.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	d.Hint = ""
	if got := d.String(); got != "r.yaml:2:3: unknown key \"nmae\"" {
		t.Errorf("without hint: got %q", got)
	}
}

func TestDiagnosticsErrorAndSort(t *testing.T) {
	diags := Diagnostics{
		{Pos: Pos{File: "b.yaml", Line: 1, Col: 1}, Msg: "b1"},
		{Pos: Pos{File: "a.yaml", Line: 9, Col: 1}, Msg: "a9"},
		{Pos: Pos{File: "a.yaml", Line: 2, Col: 7}, Msg: "a2c7"},
		{Pos: Pos{File: "a.yaml", Line: 2, Col: 3}, Msg: "a2c3 first", Hint: "fix"},
		{Pos: Pos{File: "a.yaml", Line: 2, Col: 3}, Msg: "a2c3 second"},
	}
	diags.Sort()
	want := "a.yaml:2:3: a2c3 first\n  hint: fix\n" +
		"a.yaml:2:3: a2c3 second\n" +
		"a.yaml:2:7: a2c7\n" +
		"a.yaml:9:1: a9\n" +
		"b.yaml:1:1: b1"
	if got := diags.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	var err error = diags
	var back Diagnostics
	if !errors.As(err, &back) || len(back) != 5 {
		t.Errorf("errors.As did not recover the diagnostics: %v", back)
	}
}

func TestDiagnosticsErr(t *testing.T) {
	if err := Diagnostics(nil).Err(); err != nil {
		t.Errorf("empty diagnostics gave non-nil error %v", err)
	}
	if err := (Diagnostics{{Msg: "x"}}).Err(); err == nil {
		t.Error("non-empty diagnostics gave nil error")
	}
}
