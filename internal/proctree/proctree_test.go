package proctree

import (
	"os"
	"testing"
)

func TestParseProcIO(t *testing.T) {
	in := "rchar: 12345\nwchar: 10\nsyscr: 7\nsyscw: 1\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
	got, err := ParseIO([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got["rchar"] != 12345 || got["read_bytes"] != 4096 {
		t.Errorf("got %v", got)
	}
	if _, err := ParseIO([]byte("wchar: 1\n")); err == nil {
		t.Error("no error for counters without rchar")
	}
	if _, err := ParseIO([]byte("rchar: x\n")); err == nil {
		t.Error("no error for a non-numeric counter")
	}
}

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000000 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	ppid, rss, ok := ParseStat([]byte(line))
	if !ok || ppid != 17 || rss != 321 {
		t.Errorf("ParseStat = %d, %d, %v; want 17, 321, true", ppid, rss, ok)
	}
	if _, _, ok := ParseStat([]byte("4242 (short) S 1")); ok {
		t.Error("accepted a truncated stat line")
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc here")
	}
	ppid, rss, ok = ParseStat(self)
	if !ok || ppid != os.Getppid() || rss <= 0 {
		t.Errorf("own stat: ppid %d rss %d ok %v; want ppid %d and rss > 0", ppid, rss, ok, os.Getppid())
	}
}
