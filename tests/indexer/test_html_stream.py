"""An HTML page of very many tags is read as a stream, in bounded memory, to the same text.

BeautifulSoup's tree took ~120 MB and ~5 s a megabyte of dense markup: a 20 MB page of tags
(under FACET_MAX_DOCUMENT_MB) ~2.4 GB and ~100 s, per indexing thread. Past
``HTML_TREE_MAX_TAGS`` tags the page is read by ``_HtmlTextStream`` from the tokens, with the
tree's rules, so the text indexed is the same: checked here against the tree on random pages.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from indexer import parsing

ROOT = Path(__file__).resolve().parents[2]

_TAGS = ["div", "p", "span", "b", "td", "th", "tr", "table", "script", "style", "noscript",
         "template", "title", "body", "head", "html", "rt", "rp", "ruby", "li", "ul", "hr", "br",
         "img", "a", "pre", "textarea", "h1", "svg", "desc"]
_TEXTS = ["word", " two words ", "&amp;", "&amp", "&ampword", "&foo;", "&lt;x&gt;", "&nbsp;",
          "caf&eacute;", "a\x01b", "\n", "  ", "<!-- c -->", "<![CDATA[cd]]>", "<!DOCTYPE html>",
          "x < y", "&#65;", "&#x42;", "&#150;", "&#12x", "<?pi?>", "\u00ad", "one\ntwo",
          "c\r\nd\re"]


def _tree(text: str) -> tuple[str | None, str]:
    """What ``_parse_html`` reads under the threshold (its tree path)."""
    return parsing._html_tree_text(text)


def _stream(text: str) -> tuple[str | None, str]:
    reader = parsing._HtmlTextStream()
    reader.feed(text)
    reader.close()
    return reader.title, reader.text()


def _random_page(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 25)):
        r, tag = rng.random(), rng.choice(_TAGS)
        if r < 0.35:
            parts.append(f"<{tag}>")
        elif r < 0.6:
            parts.append(f"</{tag}>")
        elif r < 0.65:
            parts.append(f"<{tag}/>")
        else:
            parts.append(rng.choice(_TEXTS))
    return "".join(parts)


def test_the_stream_reads_random_pages_as_the_tree_does() -> None:
    """Unclosed and stray tags, dropped elements holding a <body> or <title>, ruby, CDATA,
    character references with and without ';', blank strings in and out of <pre>, </br> after
    <br>: 3,000 random pages, the same title and text (60,000 agreed when it was written)."""
    rng = random.Random(20261203)
    differ = []
    for _ in range(3000):
        page = _random_page(rng)
        if _tree(page) != _stream(page):
            differ.append(page)
    assert not differ, differ[:3]


def test_a_page_past_the_threshold_is_read_as_a_stream_to_the_same_text(tmp_path, monkeypatch) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html><head><title>Lighthouse log</title><style>p{}</style></head><body>"
                    "<h1>Keepers</h1><p>The lamp was lit at <b>dusk</b>.</p><table><tr><td>oil"
                    "</td><td>4 l</td></tr></table><script>var x;</script>caf&eacute;</body></html>",
                    encoding="utf-8")
    [tree] = list(parsing.parse_file(page))
    monkeypatch.setattr(parsing, "HTML_TREE_MAX_TAGS", 5)
    [stream] = list(parsing.parse_file(page))
    assert (stream.text, stream.title) == (tree.text, tree.title)
    assert tree.text == "Lighthouse log\nKeepers\nThe lamp was lit at dusk.\noil | 4 l\ncafé"
    assert not tree.warnings
    assert stream.warnings == [f"{page}: about 26 tags, over 5: read as a stream of its text "
                               "(in bounded memory) rather than as a tree"]


def test_a_page_of_600000_tags_is_read_in_bounded_memory(tmp_path) -> None:
    """Measured in a process of its own: the tree grew 353 MB for this page (3.9 MB), the stream
    ~65 MB."""
    script = textwrap.dedent("""
        import resource, sys
        from pathlib import Path
        from indexer.parsing import parse_file
        path = Path(sys.argv[1])
        path.write_text("<html><body>" + "<div>x " * 300_000 + "</div>" * 300_000 + "</body></html>")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        [doc] = list(parse_file(path))
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert doc.text.count("x") == 300_000 and "stream" in doc.warnings[0], doc.warnings
        print(f"{grew:.0f}")
    """)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "big.html")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    grew_mb = float(done.stdout.split()[-1])
    assert grew_mb < 150, grew_mb


@pytest.mark.parametrize("tags", [0, 1])
def test_a_page_at_or_under_the_threshold_keeps_the_tree(tmp_path, monkeypatch, tags) -> None:
    page = tmp_path / "small.html"
    page.write_text("<p>a</p>" + "<br>" * tags, encoding="utf-8")
    monkeypatch.setattr(parsing, "HTML_TREE_MAX_TAGS", 2 + tags)  # <p>, </p> and the <br>s
    [doc] = list(parsing.parse_file(page))
    assert doc.warnings == [] and doc.text == "a"


@pytest.mark.parametrize("stream", [False, True])
def test_an_inline_svgs_title_is_neither_the_pages_title_nor_its_text(tmp_path, monkeypatch,
                                                                      stream) -> None:
    """An icon's <title> (a tooltip) was the page's title and the first line of its text (the
    indexing exploration of the fourth session of 2026-12-07); its <desc> was text too."""
    if stream:
        monkeypatch.setattr(parsing, "HTML_TREE_MAX_TAGS", 1)
    bare, headed = tmp_path / "bare.html", tmp_path / "headed.html"
    bare.write_text("<html><head></head><body><svg><title>IconTitle</title><desc>A gear</desc>"
                    "<path/></svg><p>Body paragraph text</p></body></html>")
    headed.write_text("<html><head><title>Head T</title></head><body><svg><title>Icon</title>"
                      "<text>Label</text></svg><p>x y</p></body></html>")
    [doc] = list(parsing.parse_file(bare))
    assert (doc.title, doc.text) == (None, "Body paragraph text"), doc
    [doc] = list(parsing.parse_file(headed))
    assert doc.title == "Head T" and doc.text.splitlines() == ["Head T", "Label", "x y"], doc.text


def _read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool, html: str) -> parsing.ParsedDocument:
    """The document ``parse_file`` reads of a page holding ``html``, as a stream of its text
    (``stream``: past the tag threshold) or as a tree."""
    if stream:
        monkeypatch.setattr(parsing, "HTML_TREE_MAX_TAGS", 1)
    page = tmp_path / "page.html"
    page.write_text(html)
    [doc] = list(parsing.parse_file(page))
    assert isinstance(doc, parsing.ParsedDocument)
    return doc


@pytest.mark.parametrize("stream", [False, True])
def test_text_a_browser_shows_outside_the_body_is_indexed(tmp_path, monkeypatch, stream) -> None:
    """Text after `</body>` (a footer a CMS writes past it) or between `</head>` and `<body>`,
    which a browser moves into the body and shows, was dropped: only the body was read. Both
    readings (tree and stream) keep it, on a line of its own, and still leave the head out."""
    doc = _read(tmp_path, monkeypatch, stream, "<html><head><title>Log</title><meta charset=utf-8>"
                "</head>between<body><p>inside</p></body>the footer after the body</html>")
    assert doc.text.splitlines() == ["Log", "between", "inside", "the footer after the body"], doc.text


@pytest.mark.parametrize("stream", [False, True])
def test_the_lines_of_a_pre_block_stay_lines(tmp_path, monkeypatch, stream) -> None:
    """A <pre> block's line breaks are the ones a browser shows: its lines of code ran together
    into one ("def area(r): return 3.14 * r * r print(area(2))"), in the chunks, the snippets and
    what the embedder read, where a <br> or a <p> broke a line. Spaces within a line fold as
    everywhere; a textarea keeps its lines too; outside them a line break is a space."""
    doc = _read(tmp_path, monkeypatch, stream, "<html><body><p>Compute an\narea:</p><pre>\ndef area(r):\n"
                "    return 3.14 * r * r\r\n\r\nprint(<b>area</b>(2))</pre><textarea>first\nsecond"
                "</textarea></body></html>")
    assert doc.text.splitlines() == ["Compute an area:", "def area(r):", "return 3.14 * r * r",
                                     "print(area(2))", "first", "second"], doc.text
