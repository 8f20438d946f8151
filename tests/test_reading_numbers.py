"""The numbers the text states are the numbers the notebooks print.

A notebook's Markdown (its Reading above all) quotes numbers from the outputs the notebook
prints, and the README's findings quote the notebooks. When outputs change (more seeds cached, a
fix), a quoted number can go stale without anything failing: an audit found five that had. Here
every decimal number of a notebook's Markdown must be one its own outputs (or its code: the
settings it passes) print, or the claims ledger prints in a row the notebook decides (notebook
00, where a row's interval is), up to the rounding the text uses; the few that a notebook does not
print (arithmetic in the sentence, a number of another notebook, a setting) are listed with the
reason in ``unprinted_numbers.toml``, and a listed number that is printed now, or no longer
stated, fails too, so that the list cannot go stale either. Each paragraph of the README's
findings is held to the notebooks it names ("(05)", "(14-16)"): their outputs, Markdown and
ledger rows, with its own few listed numbers. What this cannot see is a wrong choice among
printed numbers (a number of another panel, say): only reading finds those.

Only numbers with a decimal point or an exponent are read: integers (seeds, counts, rounds,
figure numbers) are too often something other than a result. A label such as "Sec. 3.1" or
"Remark 4.2" is no number of a result. Everything read is committed text, computed on one
machine, so nothing here depends on the CPU that runs the test.
"""

from __future__ import annotations

import bisect
import json
import re
import tomllib
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
UNPRINTED = Path(__file__).resolve().parent / "unprinted_numbers.toml"

#: a decimal number in prose, not inside a word or a version (signs are read as magnitudes)
QUOTED = re.compile(
    r"(?<![\w.])[-+\u2212]?(\d+\.\d+(?:[eE][-+]?\d+)?)"
    r"(?=x\b|[^\w.]|\.(?!\d)|$)"  # a sentence's end or a ratio's x ("1.67x") may follow
)
#: the words before a label ("Sec. 3.1", "Secs 1.1 and 4", "Remarks 2.1-4.1")
LABEL = re.compile(
    r"(?:Figs?|Secs?|Sections?|Remarks?|Theorems?|Thms?|Lemmas?|Corollar(?:y|ies)|App|Appendix"
    r"|[Ee]qs?|Tables?|Examples?|Assumptions?|Definitions?|Algorithm|Cases?|Props?|Proposition)"
    r"\.?\s*(?:(?:\d+(?:\.\d+)?|[A-Z]\.\d+|[IVX]+(?:-[A-Z])?)(?:,|\sand|-)\s*)*$"
)
#: a number per hundred: "13.3%", "0.50 points", "[0.18, 0.81] below 1 point"
PER_HUNDRED = re.compile(r"%|(?:[\s\d.,\[\]+\-\u2212]|\b(?:below|above)\b){0,40}?\bpoints?\b")
PRINTED = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def step(text: str) -> float:
    """The last place a number is written to: 0.01 for ``0.25``, 1e4 for ``1.85e6``."""
    return 10.0 ** Decimal(text).as_tuple().exponent


def quoted_numbers(text: str) -> list[tuple[str, bool]]:
    """The decimal numbers ``text`` states, each as (digits, per hundred?), labels left out."""
    found = []
    for match in QUOTED.finditer(text):
        if LABEL.search(text[max(0, match.start() - 40) : match.start()]):
            continue
        per_hundred = PER_HUNDRED.match(text, match.end()) is not None
        found.append((match.group(1), per_hundred))
    return found


class Printed:
    """The numbers some text prints, to ask whether a quoted number is one of them."""

    def __init__(self, text: str) -> None:
        numbers = sorted((float(n), step(n)) for n in PRINTED.findall(text))
        self.values = [value for value, _ in numbers]
        self.steps = [last for _, last in numbers]

    def states(self, digits: str, per_hundred: bool = False) -> bool:
        """Whether ``digits`` (or, per hundred, ``digits`` / 100) is a printed number as the
        text rounds it: the values the printed digits allow and those the quoted digits allow
        overlap (more than in a point: 0.0113 is no printed 0.0114), and the quote has no more
        places than the print unless it is the printed value itself (``0.40`` for ``0.4``)."""
        candidates = [(float(digits), step(digits))]
        if per_hundred:
            candidates.append((float(digits) / 100, step(digits) / 100))
        return any(self._has(value, last) for value, last in candidates)

    def _has(self, value: float, last: float) -> bool:
        tiny = 1e-9 * max(abs(value), last)
        lo = bisect.bisect_left(self.values, value - last - tiny)
        hi = bisect.bisect_right(self.values, value + last + tiny)
        for i in range(lo, hi):
            gap = abs(self.values[i] - value)
            if gap <= tiny or (self.steps[i] <= last and gap < (last + self.steps[i]) / 2 - tiny):
                return True
        return False


def notebook_parts(path: Path) -> tuple[str, str]:
    """(its Markdown, what it prints and its code) of a committed notebook."""
    markdown, printed = [], []
    for cell in json.loads(path.read_text())["cells"]:
        source = "".join(cell["source"])
        (markdown if cell["cell_type"] == "markdown" else printed).append(source)
        for out in cell.get("outputs", []):
            printed.append("".join(out.get("text", "")))
            printed.append("".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(markdown), "\n".join(printed)


#: the first word of a line of the ledger's tables in notebook 00: a row's key
LEDGER_KEY = re.compile(r"^([a-z]+(?:\.[\w-]+)+)\s")


def ledger_lines() -> dict[str, list[str]]:
    """The lines notebook 00 prints of each notebook's rows of the claims ledger (each row's
    line of the table names its notebook last; its other lines, e.g. its spread, start with
    the same key)."""
    _, printed = notebook_parts(ROOT / "notebooks" / "00_claims.ipynb")
    names = {path.stem for path in NOTEBOOKS}
    lines = printed.splitlines()
    owner = {}
    for line in lines:
        if (key := LEDGER_KEY.match(line)) and line.split()[-1] in names:
            owner[key.group(1)] = line.split()[-1]
    rows: dict[str, list[str]] = {}
    for line in lines:
        if (key := LEDGER_KEY.match(line)) and key.group(1) in owner:
            rows.setdefault(owner[key.group(1)], []).append(line)
    return rows


def unprinted_listed() -> dict[str, list[dict]]:
    entries = tomllib.loads(UNPRINTED.read_text())["unprinted"]
    listed: dict[str, list[dict]] = {}
    for entry in entries:
        listed.setdefault(entry["notebook"], []).append(entry)
    return listed


# ---------------------------------------------------------------------------------------------
# the reading of numbers, on exact cases


def test_a_quote_is_a_printed_number_as_the_text_rounds_it():
    printed = Printed("Sigma 0.0612  margin 0.215  rounds 35.7  rate 0.1333  count 39")
    assert printed.states("0.061") and printed.states("0.0612") and printed.states("35.7")
    assert printed.states("0.21") and printed.states("0.22")  # 0.215 is itself rounded
    assert not printed.states("0.062") and not printed.states("0.20")
    assert printed.states("35.70") and not printed.states("35.72")  # more places than printed
    assert Printed("1.853e+06 and 1850000").states("1.85e6")
    assert printed.states("13.3", per_hundred=True) and not printed.states("13.3")
    assert not Printed("0.01").states("0.0107")


def test_labels_are_no_numbers_and_signs_ranges_exponents_are_read():
    text = (
        "Sec. 3.1 and Secs 1.1 and 4.2, Remark 4.1; eq. 2.5. Loss 0.2570-0.2571, "
        "interval [\u22121.77, +1.10], 2.5e17 terms of a sum, then 13.3% IID and 0.50 points, "
        "version 1.2.3"
    )
    assert quoted_numbers(text) == [
        ("0.2570", False),
        ("0.2571", False),
        ("1.77", False),
        ("1.10", False),
        ("2.5e17", False),
        ("13.3", True),
        ("0.50", True),
    ]


# ---------------------------------------------------------------------------------------------
# the committed notebooks and README


def test_every_listed_number_names_a_notebook_and_why():
    names = {path.stem for path in NOTEBOOKS} | {"README"}
    for notebook, entries in unprinted_listed().items():
        assert notebook in names, f"{UNPRINTED.name} lists {notebook!r}, which is no notebook"
        for entry in entries:
            assert entry["numbers"] and entry["why"].strip(), entry


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebooks_text_states_the_numbers_it_prints(path):
    markdown, printed = notebook_parts(path)
    output = Printed("\n".join([printed, *ledger_lines().get(path.stem, [])]))
    unprinted = Counter(
        d for d, per_hundred in quoted_numbers(markdown) if not output.states(d, per_hundred)
    )
    listed = Counter(n for entry in unprinted_listed().get(path.stem, []) for n in entry["numbers"])
    stale = sorted((unprinted - listed).elements())
    assert not stale, (
        f"{path.name} states {stale}, which its outputs do not print (nor round to): correct "
        f"the text, or list each with why in {UNPRINTED.name}"
    )
    gone = sorted((listed - unprinted).elements())
    assert not gone, (
        f"{UNPRINTED.name} lists {gone} for {path.stem}, which it no longer states or now "
        "prints: take them off the list"
    )


def readme_findings() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## What the notebooks found")
    return text[start : text.index("\n## ", start + 1)]


#: a paragraph's notebooks: "(05)", "(14-16)", "(17; 2 seeds)", "notebook 20"
CITED = re.compile(r"\((\d\d)(?:-(\d\d))?[;,)]|notebooks? (\d\d)\b")


def cited_notebooks(paragraph: str) -> list[Path]:
    """The notebooks a README paragraph names as its sources."""
    numbers = set()
    for first, last, named in CITED.findall(paragraph):
        if named:
            numbers.add(int(named))
        else:
            numbers.update(range(int(first), int(last or first) + 1))
    return [path for path in NOTEBOOKS if int(path.stem[:2]) in numbers]


def test_every_number_of_the_readme_findings_is_one_its_notebooks_state():
    # each paragraph against the notebooks it names (their outputs, Markdown and ledger rows):
    # against all notebooks at once nearly any two-decimal number would be found somewhere
    ledger, unprinted, quoted = ledger_lines(), Counter(), 0
    for paragraph in re.split(r"\n(?=\* )|\n\n", readme_findings()):
        numbers = quoted_numbers(paragraph)
        if not numbers:
            continue
        sources = cited_notebooks(paragraph)
        assert sources, (
            f"a README findings paragraph states numbers but names no notebook: {paragraph[:80]!r}"
        )
        parts = [text for path in sources for text in notebook_parts(path)]
        stated = Printed(
            "\n".join(parts + [line for p in sources for line in ledger.get(p.stem, [])])
        )
        quoted += len(numbers)
        unprinted.update(d for d, per_hundred in numbers if not stated.states(d, per_hundred))
    assert quoted >= 100
    listed = Counter(n for entry in unprinted_listed().get("README", []) for n in entry["numbers"])
    stale = sorted((unprinted - listed).elements())
    assert not stale, (
        f"the README's findings state {stale}, which the notebooks they name neither print nor "
        f'state: correct the text, or list each with why (notebook = "README") in {UNPRINTED.name}'
    )
    gone = sorted((listed - unprinted).elements())
    assert not gone, f"{UNPRINTED.name} lists {gone} for the README, which it no longer states"


def test_a_notebooks_ledger_lines_are_those_of_its_rows():
    rows = ledger_lines()
    keys = {name: {line.split()[0] for line in lines} for name, lines in rows.items()}
    assert {"aoi.thm1", "aoi.thm1.grid"} <= keys["01_markov_chain"]
    assert "aoi.fig5.speedup.iid" in keys["05_mnist_accuracy"]
    assert not keys["01_markov_chain"] & keys["05_mnist_accuracy"]
    assert sum(map(len, keys.values())) >= 200  # nearly every row names its notebook
