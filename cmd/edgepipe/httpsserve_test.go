package main

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
)

// httpsServe starts an HTTPS server on 127.0.0.1 for the rest of the
// script: https-serve DIR. It serves the files under DIR; a path
// /status/CODE/... answers CODE instead. It sets $HTTPS to its base URL,
// $HTTPS_HOST to its host:port, and SSL_CERT_FILE to its certificate (so edgepipe trusts it), and logs
// every request as "GET /path" lines to https.log, so a script can count
// how often a fetch was tried.
func httpsServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: https-serve DIR")
	}
	dir := ts.MkAbs(args[0])
	logPath := ts.MkAbs("https.log")
	var mu sync.Mutex
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s %s\n", r.Method, r.URL.Path)
			f.Close()
		}
		mu.Unlock()
		if rest, ok := strings.CutPrefix(r.URL.Path, "/status/"); ok {
			code, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
			if err != nil {
				code = http.StatusBadRequest
			}
			http.Error(w, http.StatusText(code), code)
			return
		}
		http.ServeFile(w, r, filepath.Join(dir, filepath.FromSlash(r.URL.Path)))
	}))
	ts.Defer(srv.Close)
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	certPath := ts.MkAbs("https-cert.pem")
	ts.Check(os.WriteFile(certPath, cert, 0o644))
	ts.Setenv("SSL_CERT_FILE", certPath)
	ts.Setenv("HTTPS", srv.URL)
	ts.Setenv("HTTPS_HOST", strings.TrimPrefix(srv.URL, "https://"))
}
