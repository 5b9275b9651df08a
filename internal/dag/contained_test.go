package dag

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type verdictError struct{}

func (verdictError) Error() string   { return "gate refused this branch" }
func (verdictError) Contained() bool { return true }

// A contained failure (a quality gate refusing one target) skips what
// needs it but lets independent branches run to the end under fail-fast.
func TestContainedFailureDoesNotStopTheRun(t *testing.T) {
	nodes := []Node{
		{ID: "gate", Run: func(context.Context) error { return fmt.Errorf("publish: %w", verdictError{}) }},
		{ID: "after-gate", Needs: []string{"gate"}, Run: noop},
		{ID: "other", Run: noop},
		{ID: "after-other", Needs: []string{"other"}, Run: noop},
	}
	res, err := Run(context.Background(), nodes, Options{Jobs: 1})
	var v verdictError
	if !errors.As(err, &v) {
		t.Fatalf("Run error = %v, want the contained failure", err)
	}
	want := map[string]Status{"gate": Failed, "after-gate": Skipped, "other": OK, "after-other": OK}
	for id, w := range want {
		if got := res[id].Status; got != w {
			t.Errorf("%s: %s, want %s", id, got, w)
		}
	}
}
