package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgepipe/edgepipe/bench/benchdata"
	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/digest"
)

var hashBench = benchmark{
	name: "hash",
	about: func(e *env) string {
		return fmt.Sprintf("sha256 of a %s file in the page cache, edgepipe's digest.File vs `openssl dgst -sha256` (SHA extensions); "+
			"ratio = openssl_s / edgepipe_s, goal >= 1.0", fmtBytes(e.hashBytes))
	},
	run: runHash,
}

func runHash(ctx context.Context, e *env) (result, error) {
	res := result{}
	if _, err := exec.LookPath("openssl"); err != nil {
		return result{skipped: "openssl is not installed (it is the peer): apt-get install openssl"}, nil
	}
	dir, err := e.workdir("hash")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "weights.bin")
	e.logf("hash: writing %s", fmtBytes(e.hashBytes))
	if err := benchdata.WriteRandom(ctx, file, e.hashBytes, 42); err != nil {
		return res, err
	}
	// One untimed pass brings the file into the page cache for both sides.
	want, _, err := digest.File(file)
	if err != nil {
		return res, err
	}
	openssl := command{argv: []string{"openssl", "dgst", "-sha256", "-r", file}}

	e.logf("hash: timing %d runs of each side", e.reps)
	var ours, theirs, oursCPU, theirsCPU []time.Duration
	for range e.reps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		cpu0 := selfCPU()
		start := time.Now()
		sum, _, err := digest.File(file)
		d := time.Since(start)
		oursCPU = append(oursCPU, selfCPU()-cpu0)
		if err != nil {
			return res, err
		}
		if sum != want {
			return res, fmt.Errorf("digest.File gave %s, then %s, for the same file", want, sum)
		}
		ours = append(ours, d)

		m, err := mustSucceed(ctx, openssl)
		if err != nil {
			return res, err
		}
		if got := strings.Fields(string(m.stdout)); len(got) == 0 || got[0] != want {
			return res, fmt.Errorf("openssl gave %q but digest.File gave %s", m.stdout, want)
		}
		theirs, theirsCPU = append(theirs, m.wall), append(theirsCPU, m.cpu)
	}
	ep, ssl := benchstat.Median(ours), benchstat.Median(theirs)
	gbps := func(d time.Duration) float64 { return float64(e.hashBytes) / d.Seconds() / 1e9 }
	res.add("size", fmtBytes(e.hashBytes))
	res.add("edgepipe_s", ep)
	res.add("openssl_s", ssl)
	res.add("edgepipe_GBps", gbps(ep))
	res.add("openssl_GBps", gbps(ssl))
	res.add("edgepipe_cpu_s", benchstat.Median(oursCPU))
	res.add("openssl_cpu_s", benchstat.Median(theirsCPU))
	// On a busy machine the wall ratio moves with whoever else runs; the
	// CPU each side spends does not, so it is printed too.
	res.add("cpu_ratio", benchstat.Median(theirsCPU).Seconds()/benchstat.Median(oursCPU).Seconds())
	res.add("goal", "ratio>=1.0")
	ratio := ssl.Seconds() / ep.Seconds()
	res.add("met", ratio >= 1.0)
	res.ratio = ratio
	return res, nil
}

// selfCPU is the user+sys time of this process so far. digest.File runs
// here, not in a child, so its CPU cost is the difference around the call.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
