package getter

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	gogetter "github.com/hashicorp/go-getter"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// archiveScanners open each archive kind go-getter knows for a listing pass.
// go-getter's own extractors, even limited, turn symlinks and hard links into
// empty files and join absolute names under the destination; edgepipe
// refuses such archives outright, so it reads the listing first and only
// then lets go-getter's LimitedDecompressors unpack. Single-stream kinds
// (gz, bz2, xz, zst) have no listing and map to nil.
var archiveScanners = map[string]func(io.Reader) (io.Reader, error){
	"tar":     func(r io.Reader) (io.Reader, error) { return r, nil },
	"tar.gz":  gunzip,
	"tgz":     gunzip,
	"tar.bz2": bunzip,
	"tbz2":    bunzip,
	"tar.xz":  unxz,
	"txz":     unxz,
	"tar.zst": unzstd,
	"tzst":    unzstd,
	"zip":     nil, // listed from its central directory instead
	"gz":      nil,
	"bz2":     nil,
	"xz":      nil,
	"zst":     nil,
}

func archiveKinds() []string {
	var out []string
	for k := range archiveScanners {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func gunzip(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
func bunzip(r io.Reader) (io.Reader, error) { return bzip2.NewReader(r), nil }
func unxz(r io.Reader) (io.Reader, error)   { return xz.NewReader(r) }
func unzstd(r io.Reader) (io.Reader, error) {
	d, err := zstd.NewReader(r)
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// isMultiFile reports whether an archive kind unpacks into a directory.
func isMultiFile(kind string) bool {
	return kind == "zip" || archiveScanners[kind] != nil
}

type limits struct {
	files int
	bytes int64
}

// Model weights barely compress (about 1.1x), tokenizers and configs a
// few times; a 1 MB gzip that expands to 1 GiB is a bomb. An archive may
// expand to maxRatio times its size, and always to ratioFloor.
const (
	maxRatio   = 20
	ratioFloor = 256 << 20
)

// forArchive tightens lim to what an archive of size bytes may expand to.
func (lim limits) forArchive(size int64) limits {
	allowed := max(size*maxRatio, ratioFloor)
	if lim.bytes <= 0 || allowed < lim.bytes {
		lim.bytes = allowed
	}
	return lim
}

// streamOpeners decompress the single-stream kinds, for counting what they
// expand to before anything is written.
var streamOpeners = map[string]func(io.Reader) (io.Reader, error){
	"gz": gunzip, "bz2": bunzip, "xz": unxz, "zst": unzstd,
}

// countStream refuses a single compressed stream that expands past the
// limit, reading it to the end without writing anything.
func countStream(path, kind string, lim limits) error {
	open := streamOpeners[kind]
	if open == nil || lim.bytes <= 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := open(f)
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, lim.bytes+1))
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	if n > lim.bytes {
		return bombError(lim.bytes)
	}
	return nil
}

func bombError(limit int64) error {
	return fmt.Errorf("the archive unpacks to more than %d bytes: refusing it as a possible decompression bomb (an archive may expand to %dx its size or %d MiB, and at most MaxBytes)", limit, maxRatio, ratioFloor>>20)
}

// unpack checks the archive, then unpacks it into dir with go-getter's
// limited decompressor for its kind.
func unpack(kind, archive, dir, name string, lim limits) error {
	dec := gogetter.LimitedDecompressors(lim.files, lim.bytes)[kind]
	if dec == nil {
		return fmt.Errorf("no decompressor for %q", kind)
	}
	// Files come out as the archive says, minus group/other write.
	const umask = 0o022
	if fi, err := os.Stat(archive); err == nil {
		lim = lim.forArchive(fi.Size())
		dec = gogetter.LimitedDecompressors(lim.files, lim.bytes)[kind]
	}
	if !isMultiFile(kind) {
		if err := countStream(archive, kind, lim); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		out := filepath.Join(dir, singleName(name, kind))
		if err := dec.Decompress(out, archive, false, umask); err != nil {
			return fmt.Errorf("unpack %s: %w", name, err)
		}
		// go-getter stops copying at the limit without an error; a file that
		// reached it is taken as truncated.
		if fi, err := os.Stat(out); err == nil && lim.bytes > 0 && fi.Size() >= lim.bytes {
			return fmt.Errorf("%s unpacks to %d bytes or more, over the limit: refusing it as a possible decompression bomb (raise MaxBytes if it is genuine)", name, lim.bytes)
		}
		return nil
	}
	var err error
	if kind == "zip" {
		err = scanZip(archive, lim)
	} else {
		err = scanTar(archive, archiveScanners[kind], lim)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := dec.Decompress(dir, archive, true, umask); err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
	}
	return nil
}

// singleName is the name of a single compressed file once decompressed:
// model.gguf.gz -> model.gguf.
func singleName(name, kind string) string {
	base := strings.TrimSuffix(name, "."+kind)
	if base == "" || base == name {
		return name + ".out"
	}
	return base
}

func checkEntry(name string, count int, total int64, lim limits) error {
	if lim.files > 0 && count > lim.files {
		return fmt.Errorf("the archive has more than %d entries: refusing it as a possible archive bomb (raise MaxFiles if it is genuine)", lim.files)
	}
	if lim.bytes > 0 && total > lim.bytes {
		return bombError(lim.bytes)
	}
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) || filepath.IsAbs(name) || filepath.VolumeName(name) != "" {
		return fmt.Errorf("archive entry %q has an absolute path: refusing the archive", name)
	}
	for _, seg := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return fmt.Errorf("archive entry %q climbs out of the destination with '..': refusing the archive", name)
		}
	}
	return nil
}

func scanTar(path string, open func(io.Reader) (io.Reader, error), lim limits) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := open(f)
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	if c, ok := r.(io.Closer); ok {
		defer c.Close()
	}
	tr := tar.NewReader(r)
	var (
		count int
		total int64
	)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		switch hdr.Typeflag {
		// A regular file written by an old tar (type '\x00', TypeRegA) is
		// read as TypeReg by archive/tar since Go 1.11.
		case tar.TypeReg, tar.TypeDir, tar.TypeGNUSparse:
		case tar.TypeSymlink, tar.TypeLink:
			return fmt.Errorf("archive entry %q is a link to %q: edgepipe refuses links in downloaded archives", hdr.Name, hdr.Linkname)
		default:
			return fmt.Errorf("archive entry %q is not a regular file or directory (type %q): refusing the archive", hdr.Name, hdr.Typeflag)
		}
		count++
		total += hdr.Size
		if err := checkEntry(hdr.Name, count, total, lim); err != nil {
			return err
		}
	}
}

func scanZip(path string, lim limits) error {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	defer zr.Close()
	var total int64
	for i, f := range zr.File {
		mode := f.Mode()
		if mode&fs.ModeSymlink != 0 {
			return fmt.Errorf("archive entry %q is a symlink: edgepipe refuses links in downloaded archives", f.Name)
		}
		if !mode.IsRegular() && !mode.IsDir() {
			return fmt.Errorf("archive entry %q is not a regular file or directory: refusing the archive", f.Name)
		}
		if f.UncompressedSize64 > uint64(1)<<62 {
			return fmt.Errorf("archive entry %q claims an impossible size: refusing the archive", f.Name)
		}
		total += int64(f.UncompressedSize64)
		if err := checkEntry(f.Name, i+1, total, lim); err != nil {
			return err
		}
	}
	return nil
}
