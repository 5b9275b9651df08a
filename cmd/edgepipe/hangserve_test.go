package main

import (
	"net"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
)

// hangServe starts a server on 127.0.0.1 for the rest of the script that
// accepts connections and never answers them (a hung remote cache): it
// reads nothing and writes nothing, and holds every connection open until
// the script ends. It sets $HANG to its host:port.
func hangServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: hang-serve")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	ts.Defer(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	ts.Setenv("HANG", ln.Addr().String())
}
