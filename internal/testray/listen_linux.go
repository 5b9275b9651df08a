//go:build linux

package testray

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listening lists the TCP addresses the processes of process group pgid
// listen on (from /proc: their socket inodes, matched in /proc/net/tcp
// and tcp6), for the check that a cluster binds loopback only.
func Listening(pgid int) ([]string, error) {
	inodes := map[string]string{} // socket inode -> process name
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join(p, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces.
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		comm := string(stat[strings.IndexByte(string(stat), '(')+1 : i])
		fds, _ := filepath.Glob(filepath.Join(p, "fd", "*"))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = comm
			}
		}
	}
	var out []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			comm, ours := inodes[fields[9]]
			if !ours {
				continue
			}
			out = append(out, fmt.Sprintf("%s (%s)", hexAddr(fields[1]), comm))
		}
		f.Close()
	}
	return out, nil
}

// hexAddr decodes /proc/net/tcp's ADDR:PORT (the address in host byte
// order, 32-bit words).
func hexAddr(s string) string {
	a, p, _ := strings.Cut(s, ":")
	raw, _ := hex.DecodeString(a)
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, _ := strconv.ParseUint(p, 16, 16)
	return net.JoinHostPort(net.IP(raw).String(), strconv.FormatUint(port, 10))
}

// Loopback reports whether addr (HOST:PORT, maybe followed by " (comm)")
// is a loopback address.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(strings.Fields(addr)[0])
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
