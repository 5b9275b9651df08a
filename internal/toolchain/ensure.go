package toolchain

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// NotInstalledError is a run that needs toolchains it was told not to
// install (--no-install).
type NotInstalledError struct {
	Missing []Need
	// Fix is the command that installs them.
	Fix string
}

func (e *NotInstalledError) Error() string {
	names := make([]string, len(e.Missing))
	for i, n := range e.Missing {
		names[i] = n.Name
	}
	return fmt.Sprintf("the recipe needs toolchain(s) %s, not installed, and --no-install refuses to install them: run `%s`", strings.Join(names, ", "), e.Fix)
}

// Missing are the needs not installed.
func Missing(needs []Need) []Need {
	var out []Need
	for _, n := range needs {
		if !n.Installed {
			out = append(out, n)
		}
	}
	return out
}

// Ensure installs the needs that are not installed, in order, saying
// before each what it is, why the run needs it and roughly how big it is;
// the installer's own progress follows on w. With install false it
// installs nothing and returns a *NotInstalledError naming fix.
func Ensure(ctx context.Context, cacheDir string, needs []Need, install bool, fix string, w io.Writer) error {
	missing := Missing(needs)
	if len(missing) == 0 {
		return nil
	}
	if !install {
		return &NotInstalledError{Missing: missing, Fix: fix}
	}
	for i, n := range missing {
		fmt.Fprintf(w, "installing toolchain %s (%d of %d): %s; %s\n", n.Name, i+1, len(missing), n.Why(), n.SizeHint)
		if _, err := Install(ctx, cacheDir, n.Name, w); err != nil {
			return fmt.Errorf("install toolchain %s: %w", n.Name, err)
		}
	}
	return nil
}
