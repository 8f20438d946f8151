"""The static report (``make report``) and its browser check (``make report-check``).

The index builder runs on tiny fake notebooks and figures (no nbconvert template is bypassed: the
real exporter renders them); the checker runs headless Chromium on tiny fake sites and is skipped
when chromedriver is absent (``make test`` installs it first, through ``make browser``).
"""

import base64
import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


build_report = load("build_report")
check_report = load("check_report")

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

README = """# fake

## Notebooks

| notebook | reproduces | profile |
| --- | --- | --- |
| `00_claims` | the claims ledger (`aoi_fl.pipeline.claims`) | cpu |
| `01_chain` | Fig. 1 (age chain) | cpu |
| `02_untitled` | Fig. 2 **and** Table I | cpu |
"""


def notebook(title, code="", outputs=()):
    cells = [v4.new_markdown_cell(title)] if title else []
    cells.append(v4.new_code_cell(code, outputs=list(outputs)))
    return v4.new_notebook(cells=cells)


@pytest.fixture
def project(tmp_path):
    nbs, figs = tmp_path / "notebooks", tmp_path / "figures"
    nbs.mkdir()
    figs.mkdir()
    summary = v4.new_output("stream", name="stdout", text="verdicts per paper\nheld 3\n")
    books = {
        "00_claims": notebook("# 00 · Claims ledger\n\ntext", "print(1)", [summary]),
        "01_chain": notebook(
            "# 01 · The chain (Fig. 1)",
            'plotting.save_figure(fig, "fig1_chain", profile, env.FIGURES)\n'
            'plotting.save_figure(fig, "fig1_missing", profile, env.FIGURES)',
            [v4.new_output("display_data", data={"image/png": base64.b64encode(PNG).decode()})],
        ),
        # no level-1 heading; an f-string figure name
        "02_untitled": notebook(
            "## A section, $x^2$ in TeX",
            'for name in ["a", "b"]:\n'
            '    plotting.save_figure(fig, f"long_{name}_mnist", profile, FIGURES)',
        ),
    }
    for stem, nb in books.items():
        nbformat.write(nb, nbs / f"{stem}.ipynb")
    for name in ("fig1_chain", "long_a_mnist", "long_b_mnist", "unrelated"):
        (figs / f"{name}.png").write_bytes(PNG)
    (tmp_path / "README.md").write_text(README)
    return tmp_path


def build(project):
    out = project / "report"
    build_report.build(out, project / "notebooks", project / "figures", project / "README.md")
    return out


def test_titles_readme_rows_and_figures_are_parsed(project):
    nb = nbformat.read(project / "notebooks" / "01_chain.ipynb", as_version=4)
    assert build_report.notebook_title(nb, "01_chain") == "01 · The chain (Fig. 1)"
    untitled = nbformat.read(project / "notebooks" / "02_untitled.ipynb", as_version=4)
    assert build_report.notebook_title(untitled, "02_untitled") == "02 · untitled"
    rows = build_report.readme_reproduces(README)
    assert rows["01_chain"] == "Fig. 1 (age chain)" and set(rows) == {
        "00_claims",
        "01_chain",
        "02_untitled",
    }
    figs = project / "figures"
    assert build_report.saved_figures(nb, figs) == [figs / "fig1_chain.png"]
    assert [p.name for p in build_report.saved_figures(untitled, figs)] == [
        "long_a_mnist.png",
        "long_b_mnist.png",
    ]


def test_the_index_lists_the_ledger_first_with_relative_existing_thumbnails(project):
    out = build(project)
    index = (out / "index.html").read_text()
    pages = re.findall(r'<h3><a href="([^"]+)"', index)
    assert pages == ["00_claims.html", "01_chain.html", "02_untitled.html"]
    assert "verdicts per paper" in index  # the ledger's summary, embedded
    assert "Fig. 2 <strong>and</strong> Table I" in index
    thumbs = re.findall(r'<img src="([^"]+)"', index)
    assert thumbs == [
        "figures/fig1_chain.png",
        "figures/long_a_mnist.png",
        "figures/long_b_mnist.png",
    ]
    for src in thumbs:
        assert not src.startswith(("/", "http")) and (out / src).is_file()
    assert not (out / "figures" / "unrelated.png").exists()
    for page in pages:
        assert (out / page).is_file()


def test_no_page_references_the_network(project):
    out = build(project)
    for page in out.glob("*.html"):
        text = page.read_text()
        assert build_report.network_references(text) == [], page.name
        assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']?(https?:)?//", text)
    page = (out / "01_chain.html").read_text()
    assert 'src="data:image/png;base64,' in page  # the output image, embedded
    assert "$x^2$" in (out / "02_untitled.html").read_text()  # TeX stays readable, no MathJax


def test_network_references_are_found():
    page = (
        '<script src="https://cdn.example/x.js"></script><link href="//fonts.example/a.css">'
        '<img srcset="a.png 1x, http://x/b.png 2x"><a href="https://example.org">ok</a>'
        '<img src="figures/a.png">'
    )
    assert build_report.network_references(page) == [
        "<script src=https://cdn.example/x.js>",
        "<link href=//fonts.example/a.css>",
        "<img srcset=http://x/b.png>",
    ]


def test_a_rebuild_keeps_other_files(project):
    out = build(project)
    (out / "index.png").write_bytes(PNG)
    (out / "stale.html").write_text("old")
    build(project)
    assert (out / "index.png").exists() and not (out / "stale.html").exists()


# ---- notebook content runs nothing in the reader's browser -----------------------------------

# each would run code if a page copied it as it is; none leaves "pwned" in a page
ATTACKS_HTML = (
    "<script>pwned('script')</script>"
    "<img src=x onerror=\"pwned('onerror')\">"
    "<a href=\"javascript:pwned('link')\">a link</a>"
    "<a href=\"JaVa&#x09;ScRiPt:pwned('entity')\">another link</a>"
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">a data link</a>'
    '<iframe src="https://evil.example/" srcdoc="<script>pwned(\'iframe\')</script>"></iframe>'
    '<svg onload="pwned(\'svg\')"><circle r="1"/></svg>'
    '<object data="evil.swf"></object><embed src="evil.swf">'
    '<div onclick="pwned(\'onclick\')" style="background: url(javascript:pwned(1))">kept</div>'
)
SVG_OUTPUT = (
    '<svg xmlns="http://www.w3.org/2000/svg" onload="pwned(\'svg output\')">'
    '<script>pwned(\'svg script\')</script><rect width="4" height="4"/></svg>'
)
TABLE = (  # what pandas' DataFrame._repr_html_ writes
    "<div><style scoped>.dataframe thead th { text-align: right; }</style>"
    '<table border="1" class="dataframe"><thead><tr style="text-align: right;"><th></th>'
    "<th>loss</th></tr></thead><tbody><tr><th>a</th><td>0.25</td></tr></tbody></table></div>"
)


def output(data):
    return v4.new_output("display_data", data=data)


@pytest.fixture
def hostile(project):
    """The project plus a notebook whose markdown and outputs attack the reader's browser, next
    to the ordinary outputs the real notebooks have (a PNG, a pandas table, printed text)."""
    nb = v4.new_notebook(
        cells=[
            v4.new_markdown_cell(
                "# 03 · Hostile\n\n" + ATTACKS_HTML + "\n\n[markdown link](javascript:pwned('md'))"
            ),
            v4.new_code_cell(
                "show(results)",
                outputs=[
                    output({"text/html": ATTACKS_HTML, "text/plain": "<HTML>"}),
                    output(
                        {
                            "application/javascript": "pwned('javascript output')",
                            "text/plain": "<IPython.core.display.Javascript object>",
                        }
                    ),
                    output({"application/javascript": "pwned('javascript only')"}),
                    output({"image/svg+xml": SVG_OUTPUT, "text/plain": "<Figure (svg)>"}),
                    output(
                        {"text/markdown": "<script>pwned('markdown output')</script>\n\n**bold**"}
                    ),
                    output(
                        {
                            "text/vnd.mermaid": "</pre><script>pwned('mermaid')</script>",
                            "text/plain": "a mermaid diagram",
                        }
                    ),
                    output(
                        {
                            "application/vnd.jupyter.widget-view+json": {"model_id": "abc"},
                            "text/plain": "IntSlider(value=3)",
                        }
                    ),
                    output({"image/png": base64.b64encode(PNG).decode()}),
                    v4.new_output(
                        "execute_result",
                        data={"text/html": TABLE, "text/plain": "  loss\na 0.25"},
                        execution_count=1,
                    ),
                    v4.new_output("stream", name="stdout", text="rounds: 200\n"),
                ],
            ),
        ],
        metadata={
            "widgets": {
                "application/vnd.jupyter.widget-state+json": {"state": {"x": "pwned('widget')"}}
            }
        },
    )
    nbformat.write(nb, project / "notebooks" / "03_hostile.ipynb")
    return project


def test_notebook_html_runs_nothing_and_ordinary_outputs_stay(hostile):
    page = (build(hostile) / "03_hostile.html").read_text()
    # bug: scripts, event handlers, javascript: links, frames and JavaScript outputs went into
    # the page as the notebook had them, and ran in the reader's browser
    assert build_report.active_content(page) == []
    for gone in ("pwned", "<script", "<iframe", "<object", "<embed", "<svg", "onerror=", "onload="):
        assert gone not in page.lower(), gone
    assert "javascript:" not in page.lower() and "data:text/html" not in page
    # what the attacks wrapped stays readable, as text
    assert "a link</a>" in page and "markdown link</a>" in page and ">kept</div>" in page
    # outputs that would run code show their text form instead, if they have one
    for fallback in ("&lt;IPython.core.display.Javascript object&gt;", "IntSlider(value=3)"):
        assert fallback in page
    assert "a mermaid diagram" in page and "<strong>bold</strong>" in page
    # an SVG output is an image, where the browser runs none of its scripts
    (svg,) = re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert base64.b64decode(svg).decode() == SVG_OUTPUT
    # the ordinary outputs of the real notebooks: an image, a pandas table, printed text
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in page
    assert (
        '<table class="dataframe"><thead><tr style="text-align:right"><th></th><th>loss</th>'
        in (page)
    )
    assert "<td>0.25</td>" in page and "text-align: right; }" not in page  # the CSS is dropped
    assert "rounds: 200" in page


def test_clean_html_keeps_data_urls_only_as_images():
    embedded = '<img src="data:image/png;base64,AAAA" alt="fig">'
    assert build_report.clean_html(embedded) == embedded
    assert build_report.clean_html('<a href="data:image/png;base64,AAAA">x</a>') == (
        '<a rel="noopener noreferrer">x</a>'
    )
    cell = b'<table><tr><td style="text-align: left; position: fixed">1</td></tr></table>'
    assert build_report.clean_html(cell) == (
        '<table><tbody><tr><td style="text-align:left">1</td></tr></tbody></table>'
    )


def test_active_content_is_found():
    page = (
        '<script type="application/json">{}</script><p onmouseover="f()">p</p>'
        '<a href=" java&#x0A;script:f()">a</a><a href="https://example.org">ok</a>'
        '<iframe src="x.html"></iframe><img src="figures/a.png" alt="ok">'
    )
    assert build_report.active_content(page) == [
        "<script>",
        "<p onmouseover=f()>",
        "<a href= java\nscript:f()>",
        "<iframe>",
    ]


def test_a_page_that_would_run_code_fails_the_build(hostile, monkeypatch):
    # nbconvert's own rendering, unsanitized: the build's last check stops it
    monkeypatch.setattr(build_report, "clean_html", lambda fragment: fragment)
    with pytest.raises(SystemExit, match="would run code in the reader's browser") as stop:
        build(hostile)
    assert "03_hostile.html: <script>" in str(stop.value)


# ---- the browser check: headless Chromium -------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    check_report.find_chromedriver() is None,
    reason="chromedriver is not installed (make browser installs chromium and chromium-driver)",
)


def fake_site(root, index_body, page_body="<p>page</p>"):
    root.mkdir()
    (root / "ok.png").write_bytes(PNG)
    html = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title></head>"
        "<body>{}</body></html>"
    )
    (root / "index.html").write_text(html.format(index_body))
    (root / "page.html").write_text(html.format(page_body))
    return root


class LateLog:
    """A driver whose browser log delivers a page's entries late, as Chromium does on a busy
    machine: nothing at the first read, the page's console error at the second, the checker's
    end-of-page entry with one more of the page's at the third."""

    def __init__(self):
        end = {"level": "INFO", "message": f'console-api 1:9 "{check_report.END_OF_PAGE}"'}
        self.reads = [[], [{"level": "SEVERE", "message": "boom"}], [end, {"level": "SEVERE"}]]

    def execute_script(self, script):
        assert check_report.END_OF_PAGE in script

    def get_log(self, kind):
        assert kind == "browser"
        return self.reads.pop(0)


def test_the_checker_reads_a_pages_log_until_its_end_arrives(monkeypatch):
    assert check_report.page_log(LateLog()) == [
        {"level": "SEVERE", "message": "boom"},
        {"level": "SEVERE"},
    ]
    never = LateLog()
    never.reads = [[]] * 1000
    monkeypatch.setattr(check_report, "LOG_TIMEOUT", 0.2)
    with pytest.raises(RuntimeError, match="did not deliver a page's entries in 0.2 s"):
        check_report.page_log(never)


@needs_chromium
def test_the_checker_passes_a_good_site_and_saves_a_screenshot(tmp_path):
    site = fake_site(
        tmp_path / "site",
        '<img src="ok.png"><a href="page.html#top">page</a><a href="#x">x</a>'
        '<a href="https://example.org">external</a>',
    )
    shot = tmp_path / "shot.png"
    result = check_report.check_site(site, shot)
    assert result.problems == []
    assert sorted(result.pages) == ["index.html", "page.html"]
    assert (result.images, result.links, result.anchors, result.external_links) == (1, 1, 1, 1)
    assert shot.read_bytes().startswith(b"\x89PNG")


@needs_chromium
def test_the_checker_reports_each_broken_thing(tmp_path):
    site = fake_site(
        tmp_path / "site",
        '<img src="missing.png"><a href="gone.html">gone</a><a href="page.html">page</a>',
        "<script>console.error('boom from page')</script>"
        '<img src="https://cdn.example.invalid/x.png">',
    )
    result = check_report.check_site(site)
    problems = "\n".join(result.problems)
    assert "index.html: broken image: missing.png" in problems
    assert "index.html: broken link: gone.html" in problems
    assert "page.html: console error" in problems and "boom from page" in problems
    assert "page.html: network request: https://cdn.example.invalid/x.png" in problems
    assert "page.html: broken image: https://cdn.example.invalid/x.png" in problems
    # the command line says so and fails
    assert check_report.main(["--site", str(site)]) == 1


def test_every_committed_figure_is_a_thumbnail_of_its_notebook():
    # a notebook saves its figures through library calls (env.show, panels.show, nb.show): the
    # report still finds each by the file name the notebook's code names
    root = SCRIPTS.parent
    shown = [
        path.name
        for notebook in sorted((root / "notebooks").glob("*.ipynb"))
        for path in build_report.saved_figures(nbformat.read(notebook, 4), root / "figures")
    ]
    assert sorted(shown) == sorted(p.name for p in (root / "figures").glob("*.png"))
    assert len(shown) == len(set(shown)) >= 30
