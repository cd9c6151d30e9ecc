"""The documentation: the op reference (docs/ops.md) is what docs/op_reference.py makes from the op table
today, and every relative link in README.md and docs/*.md leads to a file (and heading) that exists."""
import difflib
import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def test_op_reference_matches_the_op_table(tmp_path):
    out = tmp_path / "ops.md"
    # a fresh process: the page must not see what other tests did to the table or the namespace
    subprocess.run([sys.executable, os.path.join(ROOT, "docs", "op_reference.py"), str(out)], cwd=ROOT,
                   check=True, capture_output=True, text=True)
    with open(os.path.join(ROOT, "docs", "ops.md"), encoding="utf-8") as f:
        checked_in = f.read()
    generated = out.read_text(encoding="utf-8")
    if generated != checked_in:
        diff = difflib.unified_diff(checked_in.splitlines(), generated.splitlines(), "docs/ops.md (checked in)",
                                    "docs/ops.md (from the op table)", lineterm="", n=1)
        pytest.fail("docs/ops.md is out of date with the op table: run `python docs/op_reference.py`\n"
                    + "\n".join(list(diff)[:60]), pytrace=False)


_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def _prose(path):
    """The lines of a Markdown page outside fenced code blocks."""
    lines, fenced = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if _FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                lines.append(line.rstrip("\n"))
    return lines


def _slug(heading):
    """A heading's anchor as Markdown renderers make it: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading reads as its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(path):
    seen, anchors = {}, set()
    for line in _prose(path):
        anchors.update(_ANCHOR.findall(line))
        m = _HEADING.match(line)
        if m:
            slug = _slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else "%s-%d" % (slug, n))
    return anchors


def _links(path):
    for line in _prose(path):
        m = _REF_LINK.match(line)
        if m:
            yield m.group(1)
            continue
        # code spans hold no links, but a link's text may be a code span: blank the span's content
        line = _CODE_SPAN.sub(lambda c: c.group(1) + "x" * len(c.group(2)) + c.group(1), line)
        yield from _INLINE_LINK.findall(line)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(page):
    assert os.path.exists(page)
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(dest):
            broken.append("%s (no such file)" % target)
        elif fragment and dest.endswith(".md") and fragment not in _anchors(dest):
            broken.append("%s (no such heading in %s)" % (target, os.path.relpath(dest, ROOT)))
    assert not broken, "broken links in %s: %s" % (os.path.relpath(page, ROOT), ", ".join(broken))


def test_every_doc_page_is_linked_from_the_index():
    with open(os.path.join(ROOT, "docs", "README.md"), encoding="utf-8") as f:
        index = f.read()
    missing = [os.path.basename(p) for p in PAGES[1:] if os.path.basename(p) != "README.md"
               and "(%s" % os.path.basename(p) not in index]
    assert not missing, "docs/README.md does not link to " + ", ".join(missing)
