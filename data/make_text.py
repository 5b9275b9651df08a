"""Rebuild data/eval.txt and data/calibration.txt from the Debian package debian-handbook.

The texts are the prose paragraphs of "The Debian Administrator's Handbook"
(GPL-2.0+ or CC-BY-SA-3.0), taken from the English HTML in the Debian package so
that anyone can regenerate them from a package registry:

    apt-get download debian-handbook   # 11.20220922 when these files were made
    dpkg-deb -x debian-handbook_*.deb x
    python3 data/make_text.py x/usr/share/doc/debian-handbook/html/en-US data

Evaluation and calibration come from different chapters, so no sentence is in both.
"""

import html.parser
import re
import sys
from pathlib import Path

# Reading order of the chapters, as listed in the book's index.html.
EVAL_CHAPTERS = ["foreword", "preface", "the-debian-project", "case-study", "existing-setup"]
CALIBRATION_CHAPTERS = ["packaging-system", "apt", "solving-problems", "basic-configuration"]

# Stop once a text is this long: enough tokens for perplexity, small in the repo.
MAX_CHARS = 160_000


class ParaText(html.parser.HTMLParser):
    """Collects the text of each <div class="para">, skipping code listings inside it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paras, self._depth, self._skip, self._buf = [], 0, 0, []

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if self._depth:
            if tag == "div":
                self._depth += 1
            if tag == "pre" or "screen" in cls or "programlisting" in cls:
                self._skip += 1
        elif tag == "div" and cls == "para":
            self._depth, self._buf = 1, []

    def handle_endtag(self, tag):
        if not self._depth:
            return
        if tag == "pre" and self._skip:
            self._skip -= 1
        if tag == "div":
            self._depth -= 1
            if self._depth == 0:
                text = re.sub(r"\s+", " ", "".join(self._buf)).strip()
                if len(text.split()) >= 8:  # drop captions and lone commands
                    self.paras.append(text)

    def handle_data(self, data):
        if self._depth and not self._skip:
            self._buf.append(data)


def chapter_pages(root: Path, chapter: str) -> list[Path]:
    """The chapter's own page followed by its sections, in the index's order."""
    index = (root / "index.html").read_text(encoding="utf-8")
    pages = list(dict.fromkeys(re.findall(r'href="([^"#]+\.html)', index)))
    start = pages.index(chapter + ".html")
    out = [root / pages[start]]
    for page in pages[start + 1 :]:
        if not page.startswith("sect."):
            break
        out.append(root / page)
    return out


def build(root: Path, chapters: list[str]) -> str:
    paras: list[str] = []
    size = 0
    for chapter in chapters:
        for page in chapter_pages(root, chapter):
            parser = ParaText()
            parser.feed(page.read_text(encoding="utf-8"))
            for p in parser.paras:
                if size + len(p) > MAX_CHARS:
                    return "\n\n".join(paras) + "\n"
                paras.append(p)
                size += len(p) + 2
    return "\n\n".join(paras) + "\n"


def main() -> None:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    (out / "eval.txt").write_text(build(root, EVAL_CHAPTERS), encoding="utf-8")
    (out / "calibration.txt").write_text(build(root, CALIBRATION_CHAPTERS), encoding="utf-8")


if __name__ == "__main__":
    main()
