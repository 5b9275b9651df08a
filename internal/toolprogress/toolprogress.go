// Package toolprogress reads the progress a conversion tool prints as it
// works (llama-quantize's "[ 12/ 272]" tensors, llama-perplexity's and
// llama-imatrix's "[12]" chunks out of "over 16 chunks", tqdm's "9/20 [")
// from its output stream, so a long step can show how far it is.
package toolprogress

import (
	"bytes"
	"regexp"
	"strconv"
)

// maxLine bounds the bytes kept of one unfinished line: llama-perplexity
// writes all its chunks' scores on one line, flushing each.
const maxLine = 16 << 10

var (
	// llama-quantize: "[  12/ 272]  blk.0.attn_k.weight - ..."
	bracketed = regexp.MustCompile(`^\[\s*(\d+)\s*/\s*(\d+)\s*\]`)
	// tqdm: " 45%|████▌     | 9/20 [00:02<00:03,  3.61it/s]"
	tqdm = regexp.MustCompile(`\|\s*(\d+)/(\d+)\s*\[`)
	// llama-perplexity: "perplexity: calculating perplexity over 16 chunks";
	// llama-imatrix: "compute_imatrix: computing over 64 chunks".
	chunkTotal = regexp.MustCompile(`over (\d+) chunks`)
	// the chunks' running scores: "[1]4.5316,[2]5.0132,"
	chunkDone = regexp.MustCompile(`\[(\d+)\]\d`)
	// --kl-divergence's table, a row a chunk: "   3      23.2536 ±    2.4576 ..."
	chunkRow = regexp.MustCompile(`^\s*(\d+)\s+\d+\.\d+\s+±`)
)

// Scanner is an io.Writer for a tool's output that calls Report with each
// new (done, total) it reads. It never fails a write: progress is a
// display, never a reason to stop a tool.
type Scanner struct {
	Report func(done, total int64)
	line   []byte
	// chunks is a chunk count announced earlier in the output.
	chunks         int64
	lastDone, last int64
}

// Write scans p, line by line; a carriage return ends a line as a newline
// does (tqdm redraws with it).
func (s *Scanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.line = append(s.line, p...)
			if len(s.line) > maxLine {
				s.line = s.line[len(s.line)-maxLine:]
			}
			// A chunk line grows without ending: read it as it grows.
			if s.chunks > 0 {
				s.scanChunks(s.line)
			}
			break
		}
		s.line = append(s.line, p[:i]...)
		s.scan(s.line)
		s.line = s.line[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (s *Scanner) scan(line []byte) {
	if m := bracketed.FindSubmatch(line); m != nil {
		s.report(m[1], m[2])
		return
	}
	if m := tqdm.FindSubmatch(line); m != nil {
		s.report(m[1], m[2])
		return
	}
	if m := chunkTotal.FindSubmatch(line); m != nil {
		s.chunks, _ = strconv.ParseInt(string(m[1]), 10, 64)
		return
	}
	if s.chunks > 0 {
		if m := chunkRow.FindSubmatch(line); m != nil {
			s.report(m[1], []byte(strconv.FormatInt(s.chunks, 10)))
			return
		}
		s.scanChunks(line)
	}
}

func (s *Scanner) scanChunks(line []byte) {
	ms := chunkDone.FindAllSubmatch(line, -1)
	if len(ms) == 0 {
		return
	}
	done, err := strconv.ParseInt(string(ms[len(ms)-1][1]), 10, 64)
	if err == nil {
		s.send(done, s.chunks)
	}
}

func (s *Scanner) report(done, total []byte) {
	d, err1 := strconv.ParseInt(string(done), 10, 64)
	t, err2 := strconv.ParseInt(string(total), 10, 64)
	if err1 == nil && err2 == nil {
		s.send(d, t)
	}
}

// send reports a sane, changed figure once.
func (s *Scanner) send(done, total int64) {
	if total <= 0 || done < 0 || done > total || (done == s.lastDone && total == s.last) || s.Report == nil {
		return
	}
	s.lastDone, s.last = done, total
	s.Report(done, total)
}
