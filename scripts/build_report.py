"""The committed notebooks as a static site (``make report``): a page per notebook, and an index.

Nothing is executed: every page shows the outputs as committed. The index lists the claims ledger
first (``00_*``, with its verdict summary embedded), then one entry per notebook: its title (the
notebook's first level-1 heading), what it reproduces (the "reproduces" column of the README's
notebook table) and thumbnails of the figures it saves (the names its code passes to
``plotting.save_figure``, copied from ``figures/`` into ``<out>/figures/``).

The pages load nothing from the network: nbconvert's lab template is used without its
require.js, MathJax, Mermaid and widget-manager scripts (all from CDNs), output images are embedded
as data URIs, and the build fails if a produced page still references an ``http(s)://`` resource
in a ``script``, ``link``, ``img`` (or other loading) tag. Markdown math, if any, stays as raw TeX.

The pages run nothing either: the HTML of markdown cells and outputs is sanitized with nh3
(:func:`clean_html`: no script, event handler, ``javascript:`` URL or frame survives), JavaScript
and widget outputs are not rendered (their plain-text form is shown instead, if they have one),
and the build fails if a page still holds a script or another way to run code
(:func:`active_content`).

Usage: ``python scripts/build_report.py --out report``
"""

from __future__ import annotations

import argparse
import ast
import html
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import jinja2
import nbformat
import nh3
from nbconvert import HTMLExporter
from traitlets.config import Config

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"

# nbconvert's lab template minus everything it would fetch from a CDN, plus a navigation bar
OFFLINE_TEMPLATE = "aoi_fl_offline.html.j2"
OFFLINE_TEMPLATE_SOURCE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
<style type="text/css">
nav.aoi-report-nav { font-family: var(--jp-ui-font-family); font-size: 14px;
  padding: 8px 16px; border-bottom: 1px solid #ccc; background: #f7f7f7; }
nav.aoi-report-nav a { margin-right: 1.5em; }
</style>
{%- endblock html_head_css -%}
{%- block body_header -%}
{{ super() }}
<nav class="aoi-report-nav">{{ resources.get('report_nav', '') }}</nav>
{%- endblock body_header -%}
"""

# tags whose src/href the browser fetches when the page loads (an <a href> is only followed)
LOADING_TAGS = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
}
NETWORK_URL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)

# the output kinds a page shows, first available first: nbconvert's HTML list without those that
# would run code in the reader's browser (JavaScript, widget views) or go in unescaped (Mermaid);
# an output with only those shows its text/plain form, or nothing. An SVG output is shown as an
# <img> (nbconvert's default), where the browser runs none of its scripts.
DISPLAY_PRIORITY = [
    "text/html",
    "text/markdown",
    "image/svg+xml",
    "text/latex",
    "image/png",
    "image/jpeg",
    "text/plain",
]
# tags that run code or open another document inside the page; no page of the report has one
ACTIVE_TAGS = {"script", "iframe", "frame", "frameset", "object", "embed"}
SCRIPT_URL_SCHEMES = ("javascript:", "vbscript:")

TABLE_ROW = re.compile(r"^\|\s*`(\d\d_[\w-]+)`\s*\|\s*(.*?)\s*\|")


@dataclass
class Entry:
    """One notebook as the index shows it."""

    stem: str
    title: str
    reproduces: str  # markdown (inline) from the README's table, "" when it has no row
    figures: list[Path] = field(default_factory=list)  # PNGs in the figures folder
    summary: str = ""  # the ledger's verdict summary (text), for the claims notebook only

    @property
    def page(self) -> str:
        return f"{self.stem}.html"


def notebook_title(nb: nbformat.NotebookNode, stem: str) -> str:
    """The first level-1 markdown heading, else the file name ("09 · agnostic vs weighted")."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            match = re.match(r"^#\s+(.+?)\s*#*\s*$", line)
            if match:
                return match.group(1)
    number, _, name = stem.partition("_")
    return f"{number} · {name.replace('_', ' ')}"


def readme_reproduces(readme: str) -> dict[str, str]:
    """``{notebook stem: its "reproduces" cell}`` from the README's table of notebooks."""
    rows = {}
    for line in readme.splitlines():
        match = TABLE_ROW.match(line)
        if match:
            rows.setdefault(match.group(1), match.group(2))
    return rows


def saved_figures(nb: nbformat.NotebookNode, figures: Path) -> list[Path]:
    """The PNGs in ``figures`` that the notebook saves, in code order: every string its code
    cells name that is a figure's file name (``env.show(fig, "fig2_total_variance")``,
    ``panels.show("main_mnist", "fig5_mnist_accuracy", ...)``), an f-string matching every file
    of its shape (``f"fedsum_long_{name}_mnist"``). Names with no file (a panel whose data is
    missing here) are left out.
    """
    found: list[Path] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for pattern in _string_patterns(cell.source):
            for path in sorted(figures.glob(f"{pattern}.png")):
                if path not in found:
                    found.append(path)
    return found


def _string_patterns(source: str) -> list[str]:
    """The string literals of ``source`` in order, an f-string's fields as ``*``; none if the
    cell is not Python (a magic)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    strings = [n for n in ast.walk(tree) if isinstance(n, ast.JoinedStr | ast.Constant)]
    out = []
    for node in sorted(strings, key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(node, ast.JoinedStr):
            parts = (v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
            out.append("".join(parts))
        elif isinstance(node.value, str):
            out.append(node.value)
    # glob metacharacters and path separators in ordinary strings name no figure
    return [p for p in out if p and not set(p) & set("[]?/\\\n") and p.strip("*")]


def ledger_summary(nb: nbformat.NotebookNode) -> str:
    """The first printed output that tabulates verdicts (the claims notebook's crosstab)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            text = "".join(text) if isinstance(text, list) else text
            if "verdict" in text:
                return text.strip("\n")
    return ""


class _StartTags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def start_tags(page: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag of ``page``, with its attributes (character references decoded)."""
    parser = _StartTags()
    parser.feed(page)
    parser.close()
    return parser.tags


def network_references(page: str) -> list[str]:
    """``tag attr=url`` for every resource the page would fetch over the network."""
    found = []
    for tag, attrs in start_tags(page):
        for attr, value in attrs:
            if attr not in LOADING_TAGS.get(tag, ()) or not value:
                continue
            candidates = (
                [part.split()[0] for part in value.split(",")] if attr == "srcset" else [value]
            )
            found += [f"<{tag} {attr}={url}>" for url in candidates if NETWORK_URL.match(url)]
    return found


def active_content(page: str) -> list[str]:
    """``<tag attr=...>`` for everything in ``page`` that could run code in the reader's browser:
    a script, frame or plugin tag, an event handler (``on...``), a ``javascript:`` URL."""
    found = []
    for tag, attrs in start_tags(page):
        if tag in ACTIVE_TAGS:
            found.append(f"<{tag}>")
        for attr, value in attrs:
            # a browser ignores whitespace and control characters inside a URL's scheme
            url = re.sub(r"[\x00-\x20]", "", value or "").lower()
            if attr.startswith("on") or url.startswith(SCRIPT_URL_SCHEMES):
                found.append(f"<{tag} {attr}={value}>")
    return found


def inline_markdown(text: str) -> str:
    """The README cell's inline markdown as HTML: code spans and bold; everything else escaped."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)


def _keep_data_urls_in_images(tag: str, attribute: str, value: str) -> str | None:
    # a data: URL is an embedded image (markdown images are embedded as data URIs); anywhere else
    # it is a document of its own, which could hold a script
    if urlsplit(value).scheme.lower() == "data" and (tag, attribute) != ("img", "src"):
        return None
    return value


_CLEANER = nh3.Cleaner(
    # nh3's safe defaults (text, tables, lists, headings, links, images), plus what nbconvert's
    # markup and pandas' tables carry: classes and ids (highlighting, anchors) and cell alignment
    attributes={
        **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
        "*": {"class", "id", "lang", "title", "style"},
    },
    filter_style_properties={"text-align", "vertical-align"},
    clean_content_tags={"script", "style"},  # dropped with their content, not shown as text
    url_schemes=nh3.ALLOWED_URL_SCHEMES | {"data"},
    attribute_filter=_keep_data_urls_in_images,
)


def clean_html(fragment: str | bytes) -> str:
    """``fragment`` (notebook HTML) without anything that runs code: every tag and attribute not
    on nh3's allow-list goes (scripts and styles with their content), and with them event
    handlers, frames and inline SVG; URLs keep only safe schemes (no ``javascript:``), ``data:``
    only for images. nbconvert applies it to markdown cells, HTML and markdown outputs."""
    return _CLEANER.clean(fragment.decode() if isinstance(fragment, bytes) else str(fragment))


def exporter() -> HTMLExporter:
    loader = jinja2.DictLoader({OFFLINE_TEMPLATE: OFFLINE_TEMPLATE_SOURCE})
    return HTMLExporter(
        config=Config({"NbConvertBase": {"display_data_priority": DISPLAY_PRIORITY}}),
        template_name="lab",
        template_file=OFFLINE_TEMPLATE,
        extra_loaders=[loader],
        embed_images=True,
        theme="light",
        sanitize_html=True,
        filters={"clean_html": clean_html},  # in place of nbconvert's, on bleach (deprecated)
    )


def navigation(entries: list[Entry], i: int) -> str:
    links = ['<a href="index.html">&larr; index</a>']
    if i > 0:
        prev = entries[i - 1]
        links.append(f'<a href="{prev.page}">previous: {html.escape(prev.stem)}</a>')
    if i + 1 < len(entries):
        nxt = entries[i + 1]
        links.append(f'<a href="{nxt.page}">next: {html.escape(nxt.stem)}</a>')
    return "".join(links)


INDEX_CSS = """
body { font-family: system-ui, -apple-system, "DejaVu Sans", sans-serif; margin: 0 auto;
  max-width: 1100px; padding: 16px 24px; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 1.6em; }
.entry { border-bottom: 1px solid #eee; padding: 10px 0 14px; }
.entry h3 { margin: 0 0 4px; font-size: 1.1em; }
.reproduces { margin: 0 0 8px; font-size: 0.93em; color: #333; }
.thumbs { display: flex; flex-wrap: wrap; gap: 10px; }
.thumbs figure { margin: 0; width: 250px; }
.thumbs img { width: 250px; height: auto; border: 1px solid #ddd; background: #fff; }
.thumbs figcaption { font-size: 0.75em; color: #555; word-break: break-all; }
.none { font-size: 0.85em; color: #777; font-style: italic; }
pre.summary { background: #f7f7f7; border: 1px solid #ddd; padding: 8px; overflow-x: auto;
  font-size: 0.8em; }
.ledger { background: #fbfbf4; border: 1px solid #e4e4c8; padding: 10px 14px; }
"""


def entry_html(entry: Entry, heading: str = "h3") -> str:
    parts = [
        f'<{heading}><a href="{entry.page}">{html.escape(entry.title)}</a></{heading}>',
        f'<p class="reproduces"><strong>Reproduces:</strong> {inline_markdown(entry.reproduces)}'
        "</p>"
        if entry.reproduces
        else "",
    ]
    if entry.summary:
        parts.append(f'<pre class="summary">{html.escape(entry.summary)}</pre>')
        parts.append(f'<p><a href="{entry.page}">The full ledger, row by row &rarr;</a></p>')
    if entry.figures:
        figs = "".join(
            f'<figure><a href="figures/{p.name}"><img src="figures/{p.name}" '
            f'alt="{html.escape(p.stem)}"></a><figcaption>{html.escape(p.name)}</figcaption>'
            "</figure>"
            for p in entry.figures
        )
        parts.append(f'<div class="thumbs">{figs}</div>')
    elif not entry.summary:
        parts.append('<p class="none">No figure saved (see the page for its printed results).</p>')
    return "\n".join(p for p in parts if p)


def index_html(ledger: list[Entry], notebooks: list[Entry]) -> str:
    body = ["<h1>aoi-fl: the executed notebooks</h1>"]
    body.append(
        "<p>Every notebook as committed (outputs of its <code>cpu</code> run, nothing "
        "re-executed), rendered by <code>make report</code>. Figures are the files in "
        "<code>figures/</code>; click a title for the notebook, a thumbnail for the full "
        "figure.</p>"
    )
    if ledger:
        body.append("<h2>Claims ledger</h2>")
        body += [f'<div class="ledger entry">{entry_html(e, "h3")}</div>' for e in ledger]
    body.append("<h2>Notebooks</h2>")
    body += [f'<div class="entry" id="nb-{e.stem}">{entry_html(e)}</div>' for e in notebooks]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
        f"<title>aoi-fl notebooks</title>\n<style>{INDEX_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def build(
    out: Path,
    notebooks: Path = ROOT / "notebooks",
    figures: Path = ROOT / "figures",
    readme: Path = ROOT / "README.md",
) -> list[Path]:
    """Render every notebook and the index into ``out``; returns the pages written."""
    paths = sorted(notebooks.glob(NOTEBOOK_GLOB))
    if not paths:
        raise SystemExit(f"no notebooks ({NOTEBOOK_GLOB}) in {notebooks}")
    reproduces = readme_reproduces(readme.read_text(encoding="utf-8")) if readme.exists() else {}
    nbs = [nbformat.read(p, as_version=4) for p in paths]
    entries = [
        Entry(
            stem=p.stem,
            title=notebook_title(nb, p.stem),
            reproduces=reproduces.get(p.stem, ""),
            figures=saved_figures(nb, figures),
        )
        for p, nb in zip(paths, nbs, strict=True)
    ]
    is_ledger = [e.stem.startswith("00_") for e in entries]
    for entry, nb, ledger in zip(entries, nbs, is_ledger, strict=True):
        if ledger:
            entry.summary = ledger_summary(nb)

    # replace what an earlier build wrote (pages, figures), nothing else in the folder
    for stale in out.glob("*.html"):
        stale.unlink()
    shutil.rmtree(out / "figures", ignore_errors=True)
    (out / "figures").mkdir(parents=True)
    export = exporter()
    written = []
    for i, (entry, nb) in enumerate(zip(entries, nbs, strict=True)):
        # a notebook saved with its widgets' state would put it in a <script> block, for the
        # widget manager that no page loads
        nb.metadata.pop("widgets", None)
        resources = {"metadata": {"name": entry.title}, "report_nav": navigation(entries, i)}
        page, _ = export.from_notebook_node(nb, resources=resources)
        (out / entry.page).write_text(page, encoding="utf-8")
        written.append(out / entry.page)
        for fig in entry.figures:
            shutil.copyfile(fig, out / "figures" / fig.name)
    ledger = [e for e, is_l in zip(entries, is_ledger, strict=True) if is_l]
    rest = [e for e, is_l in zip(entries, is_ledger, strict=True) if not is_l]
    (out / "index.html").write_text(index_html(ledger, rest), encoding="utf-8")
    written.insert(0, out / "index.html")

    for check, what in (
        (active_content, "run code in the reader's browser"),
        (network_references, "load resources from the network"),
    ):
        problems = [
            f"{page.name}: {found}"
            for page in written
            for found in check(page.read_text(encoding="utf-8"))
        ]
        if problems:
            raise SystemExit(f"the report would {what}:\n  " + "\n  ".join(problems))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("report"), help="output folder")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--figures", type=Path, default=ROOT / "figures")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    written = build(args.out, args.notebooks, args.figures, args.readme)
    figures = len(list((args.out / "figures").glob("*.png")))
    print(
        f"report: {len(written)} pages and {figures} figures in {args.out}/ "
        f"({time.perf_counter() - start:.1f} s); open {args.out}/index.html"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
