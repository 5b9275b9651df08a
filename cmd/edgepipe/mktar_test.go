package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/edgepipe/edgepipe/internal/argo"
)

// mktarCmd writes a tar for the bundle tests, hostile ones included:
//
//	mktar [-armor] [-from TAR] OUT MEMBER=FILE|MEMBER=sparse:SIZE...
//
// -from copies TAR's members first (a member named again is replaced);
// MEMBER=FILE adds FILE's bytes; MEMBER=sparse:SIZE adds a GNU PAX sparse
// member (format 1.0) of SIZE bytes that holds one byte of data, at its
// end; -armor writes the tar as `export argo` embeds a bundle.
func mktarCmd(ts *testscript.TestScript, neg bool, args []string) {
	armor, from := false, ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "-armor":
			armor, args = true, args[1:]
		case args[0] == "-from" && len(args) > 1:
			from, args = args[1], args[2:]
		default:
			ts.Fatalf("mktar: unknown flag %s", args[0])
		}
	}
	if neg || len(args) < 1 {
		ts.Fatalf("usage: mktar [-armor] [-from TAR] OUT MEMBER=FILE|MEMBER=sparse:SIZE...")
	}
	specs := map[string]string{}
	var order []string
	for _, a := range args[1:] {
		name, src, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("mktar: %q is not MEMBER=FILE", a)
		}
		specs[name] = src
		order = append(order, name)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if from != "" {
		f, err := os.Open(ts.MkAbs(from))
		ts.Check(err)
		defer f.Close()
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			ts.Check(err)
			if _, replaced := specs[h.Name]; replaced {
				continue
			}
			ts.Check(tw.WriteHeader(h))
			_, err = io.Copy(tw, tr)
			ts.Check(err)
		}
	}
	for _, name := range order {
		src := specs[name]
		if size, ok := strings.CutPrefix(src, "sparse:"); ok {
			n, err := strconv.ParseInt(size, 10, 64)
			ts.Check(err)
			ts.Check(writeSparse(tw, &buf, name, n))
			continue
		}
		b, err := os.ReadFile(ts.MkAbs(src))
		ts.Check(err)
		ts.Check(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}))
		_, err = tw.Write(b)
		ts.Check(err)
	}
	ts.Check(tw.Close())
	out := buf.Bytes()
	if armor {
		out = []byte(argo.Armor(out))
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), out, 0o644))
}

// writeSparse adds a PAX sparse member. archive/tar writes no sparse
// files and drops GNU.sparse.* records, so the records go in under a
// stand-in prefix of the same length, patched in the bytes afterwards
// (records live in the extended header's data, outside its checksum).
func writeSparse(tw *tar.Writer, buf *bytes.Buffer, name string, size int64) error {
	const stand = "XNU.sparse."
	start := buf.Len()
	sparseMap := fmt.Sprintf("1\n%d\n1\n", size-1)
	body := make([]byte, 512+1)
	copy(body, sparseMap)
	body[512] = 'x'
	h := &tar.Header{Name: "GNUSparseFile.0/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg,
		Format: tar.FormatPAX, PAXRecords: map[string]string{
			stand + "major": "1", stand + "minor": "0", stand + "name": name, stand + "realsize": strconv.FormatInt(size, 10),
		}}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b := buf.Bytes()[start:]
	copy(b, bytes.ReplaceAll(b, []byte(stand), []byte("GNU.sparse.")))
	return nil
}
