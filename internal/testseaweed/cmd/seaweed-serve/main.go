// Command seaweed-serve starts a SeaweedFS S3 server on 127.0.0.1 for a
// person trying the remote cache (`go tool task remote-cache:serve`): it
// prints the --remote-cache URL and the writer's and reader's credentials
// as shell exports, and runs until Ctrl-C, which stops it and removes its
// data.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

func main() {
	weed, err := testseaweed.Weed()
	if err != nil {
		fmt.Fprintf(os.Stderr, "seaweed-serve: %v (run `edgepipe toolchain install seaweedfs`)\n", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "edgepipe-seaweed-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "seaweed-serve:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := testseaweed.Start(ctx, weed, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "seaweed-serve:", err)
		os.Exit(1)
	}
	defer srv.Close()
	fmt.Printf("# SeaweedFS S3 on %s, data in %s; Ctrl-C stops it and removes the data.\n", srv.Endpoint, dir)
	fmt.Printf("export EDGEPIPE_REMOTE_CACHE=%s\n", srv.URL("cache"))
	fmt.Printf("# writer (CI):\nexport AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s\n", srv.Writer.AccessKey, srv.Writer.SecretKey)
	fmt.Printf("# read-only (laptops):\n# export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s EDGEPIPE_REMOTE_CACHE_MODE=read\n", srv.Reader.AccessKey, srv.Reader.SecretKey)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
