// Package testseaweed runs a real SeaweedFS S3 server (`weed mini`) on
// loopback for tests and benchmarks of the remote cache: no mock, the same
// wire protocol AWS S3 speaks. The weed binary comes from edgepipe's pinned
// seaweedfs toolchain (`edgepipe toolchain install seaweedfs`).
//
// The server gets a private data folder, free ports for each of its
// services (master, volume, filer, S3, admin, their gRPC ports), binds
// 127.0.0.1 only, and requires signed requests from one of two identities
// it is configured with: a writer (read, write, list) and a reader (read,
// list). It runs in its own process group, which Close kills.
package testseaweed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Credentials are an S3 access key pair.
type Credentials struct{ AccessKey, SecretKey string }

// Env returns the AWS SDK environment variables that select c.
func (c Credentials) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + c.AccessKey, "AWS_SECRET_ACCESS_KEY=" + c.SecretKey}
}

// Server is a running weed mini.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT, the S3 API.
	Endpoint string
	// Bucket exists when Start returns.
	Bucket string
	// Writer may read and write the bucket; Reader may only read it.
	Writer, Reader Credentials
	// Dir holds the server's data and its log (weed.log).
	Dir string

	cmd       *exec.Cmd
	done      chan struct{}
	closeOnce sync.Once
}

// URL is the s3:: URL of prefix in the bucket, as edgepipe takes it.
func (s *Server) URL(prefix string) string {
	return "s3::" + s.Endpoint + "/" + s.Bucket + "/" + strings.TrimPrefix(prefix, "/")
}

// Weed finds the weed binary: $EDGEPIPE_WEED, else the seaweedfs
// toolchain installed in the edgepipe cache ($EDGEPIPE_CACHE, else
// ~/.cache/edgepipe).
func Weed() (string, error) {
	if p := os.Getenv("EDGEPIPE_WEED"); p != "" {
		return p, nil
	}
	root, err := cache.Root(os.Getenv)
	if err != nil {
		return "", err
	}
	inst, err := toolchain.Resolve(root, toolchain.SeaweedFS)
	if err != nil {
		return "", err
	}
	argv, _, err := inst.Tool(toolchain.ToolWeed)
	if err != nil {
		return "", err
	}
	return argv[0], nil
}

// StartT starts a server for a test and stops it in t.Cleanup. Without
// the toolchain it skips the test, unless EDGEPIPE_REAL=1 (the real tier
// requires it), where it fails.
func StartT(t testing.TB) *Server {
	t.Helper()
	weed, err := Weed()
	if err != nil {
		if os.Getenv("EDGEPIPE_REAL") == "1" {
			t.Fatalf("the real tier needs SeaweedFS: %v", err)
		}
		t.Skipf("SeaweedFS is not installed (%v): run `edgepipe toolchain install seaweedfs` (go tool task toolchains does)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := Start(ctx, weed, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start runs weed from the binary at weed with its data under dir, and
// returns once the bucket answers signed requests (or ctx ends).
func Start(ctx context.Context, weed, dir string) (*Server, error) {
	s := &Server{Bucket: "edgepipe-test", Dir: dir, done: make(chan struct{}),
		Writer: Credentials{"writer" + token(6), token(20)}, Reader: Credentials{"reader" + token(6), token(20)}}
	cfg := map[string]any{"identities": []map[string]any{
		{"name": "writer", "credentials": []map[string]string{{"accessKey": s.Writer.AccessKey, "secretKey": s.Writer.SecretKey}},
			"actions": []string{"Read", "Write", "List", "Tagging", "Admin"}},
		{"name": "reader", "credentials": []map[string]string{{"accessKey": s.Reader.AccessKey, "secretKey": s.Reader.SecretKey}},
			"actions": []string{"Read", "List"}},
	}}
	b, _ := json.Marshal(cfg)
	s3cfg := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(s3cfg, b, 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	p := func(i int) string { return strconv.Itoa(ports[i/2] + 10000*(i%2)) }
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	args := []string{"mini", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + p(0), "-master.port.grpc=" + p(1),
		"-volume.port=" + p(2), "-volume.port.grpc=" + p(3),
		"-filer.port=" + p(4), "-filer.port.grpc=" + p(5),
		"-s3.port=" + p(6), "-s3.port.grpc=" + p(7),
		"-admin.port=" + p(8), "-admin.port.grpc=" + p(9),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
		"-master.volumeSizeLimitMB=64",
		"-s3.config=" + s3cfg, "-bucket=" + s.Bucket}
	logf, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(weed, args...)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", weed, err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	s.Endpoint = "http://127.0.0.1:" + p(6)
	if err := s.wait(ctx); err != nil {
		s.Close()
		log, _ := os.ReadFile(filepath.Join(dir, "weed.log"))
		return nil, fmt.Errorf("SeaweedFS did not come up: %w; its log ends:\n%s", err, tail(string(log), 2000))
	}
	return s, nil
}

// wait polls until the bucket answers a signed HeadBucket from the
// writer: the S3 port opens before the bucket -bucket asks for exists.
func (s *Server) wait(ctx context.Context) error {
	cl := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.Writer.AccessKey, s.Writer.SecretKey, ""),
		HTTPClient:  &http.Client{Timeout: 2 * time.Second}, RetryMaxAttempts: 1})
	var last error
	for {
		select {
		case <-s.done:
			return errors.New("weed exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), last)
		case <-time.After(300 * time.Millisecond):
		}
		if _, last = cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.Bucket}); last == nil {
			return nil
		}
	}
}

// Close kills the server's process group and waits for it.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.cmd == nil || s.cmd.Process == nil {
			return
		}
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-s.done
		}
	})
}

// freePorts finds n free loopback ports whose port+10000 is free too:
// parts of weed mini reach a service's gRPC port as its HTTP port plus
// 10000 whatever the flags say, so each gRPC port is set to exactly that.
// The ports are held open together while they are chosen, so they differ.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("no free pair of loopback ports PORT and PORT+10000 in 20000-50000")
		}
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		port := 20000 + (int(b[0])<<8|int(b[1]))%30000
		l1, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			l1.Close()
			continue
		}
		ls = append(ls, l1, l2)
		ports = append(ports, port)
	}
	return ports, nil
}

func token(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
