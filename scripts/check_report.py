"""The static report in a real browser (``make report-check``): headless Chromium through Selenium.

Opens the index and every page of the site (every ``*.html`` in it, and every page a link leads
to) from ``file://`` and fails, listing each problem, when a page

* logs a console error (a ``SEVERE`` entry of the browser log: a script error, a failed load),
* has an ``<img>`` that did not load (``naturalWidth`` 0),
* has a relative ``<a href>`` whose target file does not exist (``#anchors`` are not checked),
* makes a request that is not ``file:``/``data:`` (the site must load nothing from the network;
  Chromium is also started with every host name unresolvable, so such a load fails loudly).

Then saves a screenshot of the index. Needs Debian's ``chromium`` and ``chromium-driver``
(``make browser`` installs them).

Usage: ``python scripts/check_report.py --site report --screenshot report/index.png``
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMEDRIVER = Path("/usr/bin/chromedriver")
LOCAL_SCHEMES = {"file", "data", "blob", "about"}
#: logged by the checker once a page has loaded: the page's own entries come before it
END_OF_PAGE = "aoi-fl check_report: end of page"
#: seconds to wait for the browser log to deliver it
LOG_TIMEOUT = 60.0
WIDTH, MAX_HEIGHT = 1280, 6000

IMAGES_JS = """
return Array.from(document.images).map(img => [
  (img.getAttribute('src') || '').slice(0, 120), img.complete, img.naturalWidth]);
"""
LINKS_JS = """
return Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'));
"""


@dataclass
class Result:
    pages: list[str] = field(default_factory=list)
    images: int = 0
    links: int = 0  # relative links to a file, each checked
    anchors: int = 0  # same-page #anchors (not checked)
    external_links: int = 0  # http(s), mailto, ... (not followed: the check is offline)
    problems: list[str] = field(default_factory=list)


def find_chromedriver() -> Path | None:
    if CHROMEDRIVER.exists():
        return CHROMEDRIVER
    found = shutil.which("chromedriver")
    return Path(found) if found else None


def start_browser(driver_path: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for binary in ("/usr/bin/chromium", shutil.which("chromium") or ""):
        if binary and Path(binary).exists():
            options.binary_location = binary
            break
    for arg in (
        "--headless=new",
        "--no-sandbox",  # as root (containers) Chromium refuses to start without it
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--allow-file-access-from-files",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        # no host name resolves: a page that tries the network gets a console error
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--window-size={WIDTH},1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(str(driver_path)), options=options)


def page_log(driver) -> list[dict]:
    """The browser-log entries of the page just loaded.

    Chromium hands its log to the driver asynchronously: on a busy machine a page's console
    error can arrive after ``driver.get`` returned, and a single read would miss it (seen in a
    test). The checker logs :data:`END_OF_PAGE` and reads until it arrives; what the same read
    brings after it is the page's too.
    """
    driver.execute_script(f"console.info({END_OF_PAGE!r})")
    entries: list[dict] = []
    deadline = time.monotonic() + LOG_TIMEOUT
    while time.monotonic() < deadline:
        batch = driver.get_log("browser")
        ended = [END_OF_PAGE in str(entry.get("message")) for entry in batch]
        entries += [entry for entry, end in zip(batch, ended, strict=True) if not end]
        if any(ended):
            return entries
        time.sleep(0.05)
    raise RuntimeError(f"the browser log did not deliver a page's entries in {LOG_TIMEOUT} s")


def page_requests(driver) -> list[str]:
    """The URLs the page requested since the last call (Chrome's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def link_target(page: Path, href: str, site: Path) -> Path | None:
    """The file a relative link points at (None for external links and same-page anchors)."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    target = (page.parent / unquote(parts.path)).resolve()
    return target / "index.html" if target.is_dir() else target


def check_page(driver, page: Path, site: Path, result: Result) -> list[Path]:
    """Load one page, record its problems; returns the local HTML pages it links to."""
    name = page.relative_to(site).as_posix()
    driver.get(page.as_uri())
    result.pages.append(name)
    for entry in page_log(driver):
        if entry.get("level") == "SEVERE":
            result.problems.append(f"{name}: console error: {entry.get('message')}")
    for url in page_requests(driver):
        if urlsplit(url).scheme not in LOCAL_SCHEMES:
            result.problems.append(f"{name}: network request: {url}")
    for src, complete, width in driver.execute_script(IMAGES_JS):
        result.images += 1
        if not complete or not width:
            result.problems.append(f"{name}: broken image: {src or '(no src)'}")
    linked = []
    for href in driver.execute_script(LINKS_JS):
        target = link_target(page, href, site)
        if target is None:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc:
                result.external_links += 1
            else:
                result.anchors += 1
            continue
        result.links += 1
        if not target.is_file():
            result.problems.append(f"{name}: broken link: {href}")
        elif target.suffix == ".html":
            linked.append(target)
    return linked


def check_site(
    site: Path, screenshot: Path | None = None, driver_path: Path | None = None
) -> Result:
    """Every page of ``site`` in headless Chromium, starting from ``index.html``."""
    site = site.resolve()
    index = site / "index.html"
    result = Result()
    if not index.is_file():
        result.problems.append(f"{site}: no index.html (build it first: make report)")
        return result
    driver_path = driver_path or find_chromedriver()
    if driver_path is None:
        raise SystemExit(
            "chromedriver not found: install Debian's chromium and chromium-driver "
            "(make browser, or apt-get install chromium chromium-driver)"
        )
    driver = start_browser(driver_path)
    try:
        queue = [index] + sorted(
            p.resolve() for p in site.rglob("*.html") if p.name != "index.html"
        )
        seen: set[Path] = set()
        while queue:
            page = queue.pop(0)
            if page in seen or not page.is_relative_to(site):
                continue
            seen.add(page)
            queue += check_page(driver, page, site, result)
        if screenshot is not None:
            driver.get(index.as_uri())
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(WIDTH, min(int(height) + 150, MAX_HEIGHT))
            time.sleep(0.2)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            if not driver.save_screenshot(str(screenshot)):
                result.problems.append(f"could not save the screenshot to {screenshot}")
    finally:
        driver.quit()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=Path("report"))
    parser.add_argument("--screenshot", type=Path, default=None)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = check_site(args.site, args.screenshot)
    seconds = time.perf_counter() - start
    if result.problems:
        print(
            f"report check FAILED ({len(result.problems)} problem(s) on {len(result.pages)} "
            f"page(s) of {args.site}/):",
            file=sys.stderr,
        )
        for problem in result.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    shot = f"; screenshot {args.screenshot}" if args.screenshot else ""
    print(
        f"report check passed: {len(result.pages)} pages, {result.images} images loaded, "
        f"{result.links} relative links resolved ({result.anchors} #anchors, "
        f"{result.external_links} external links not followed), no console errors, "
        f"no network requests ({seconds:.1f} s){shot}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
