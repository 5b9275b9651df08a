package cli

import (
	"context"
	"fmt"
)

// installedToolchains adapts the provisioned toolchains to the resolver.
type installedToolchains struct{ cacheRoot string }

func (t installedToolchains) Lookup(tool string) ([]string, string, string, string, error) {
	return nil, "", "", "", fmt.Errorf("tool %s is not installed: run `edgepipe toolchain install`", tool)
}

func cmdToolchain(ctx context.Context, env *Env, args []string) error {
	return usageErr("toolchain: not wired yet")
}

func cmdDoctor(ctx context.Context, env *Env, args []string) error {
	return usageErr("doctor: not wired yet")
}
