// Package testregistry runs the CNCF distribution registry (the code of
// Docker Hub's and most self-hosted registries) in the test process, on a
// loopback port with in-memory storage, so OCI pushes and pulls are tested
// against a real registry, never a mock. Only tests import it.
package testregistry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"
)

// Registry is a running registry.
type Registry struct {
	// Host is "127.0.0.1:PORT", the registry part of a reference.
	Host   string
	server *http.Server
	tmp    string
}

// Options configure Start.
type Options struct {
	// User and Password, when set, make the registry require them (HTTP
	// basic auth through an htpasswd file, as registry deployments do).
	User, Password string
}

// Start runs a registry until Close; tests use StartT.
func Start(opt Options) (*Registry, error) {
	// The registry logs every request through logrus at info level.
	logrus.SetOutput(io.Discard)
	cfg := &configuration.Configuration{
		Storage: configuration.Storage{
			"inmemory":    configuration.Parameters{},
			"maintenance": configuration.Parameters{"uploadpurging": map[any]any{"enabled": false}},
		},
	}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	var tmp string
	if opt.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opt.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "testregistry-")
		if err != nil {
			return nil, err
		}
		tmp = dir
		file := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(file, []byte(fmt.Sprintf("%s:%s\n", opt.User, hash)), 0o600); err != nil {
			return nil, err
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "edgepipe-test", "path": file}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	app := handlers.NewApp(context.Background(), cfg)
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "testregistry: %v\n", err)
		}
	}()
	return &Registry{Host: ln.Addr().String(), server: srv, tmp: tmp}, nil
}

// StartT runs a registry for the duration of the test.
func StartT(t testing.TB, opt Options) *Registry {
	t.Helper()
	r, err := Start(opt)
	if err != nil {
		t.Fatalf("start the registry: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// Close stops the registry.
func (r *Registry) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.server.Shutdown(ctx)
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}
