package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/edgepipe/edgepipe/internal/proc"
)

// Run is the process entry point: one cancellable context from the signal
// handler flows through everything. The first Ctrl-C cancels cleanly
// (children get SIGTERM, finished steps stay cached); a second forces exit.
func Run(args []string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "edgepipe: interrupting; stopping running steps (Ctrl-C again to force)")
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "edgepipe: forced exit; killing every running tool")
		proc.KillAll()
		os.Exit(ExitInterrupted)
	}()
	env := &Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		IsTerminal:       term.IsTerminal(int(os.Stderr.Fd())),
		StdoutIsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
		Width: func() int {
			if w, _, err := term.GetSize(int(os.Stderr.Fd())); err == nil && w > 0 {
				return w
			}
			return 80
		}}
	return Main(ctx, args, env)
}
