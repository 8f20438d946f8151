"""A paper package's ledger rows as data: its ``claims.toml``, read and checked
(docs/layout.md §2.2).

Each ``[[claim]]`` table is one row, written out in full: ``key``, ``ref``, ``kind``,
``statement``, ``notebook``, optionally ``paper_value``, and two tables, ``measure`` and
``rule``, each with the ``name`` of a function the package supplies and the parameters the row
gives it. The ledger's row is ``rule(measure(runs))`` (:func:`build`), so changing a finding is
editing one row.
"""

from __future__ import annotations

import inspect
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aoi_fl.pipeline.claims import KINDS, Claim

FILE = "claims.toml"
#: the fields of a row: texts, then tables naming a function, then the optional paper value
TEXTS = ("key", "ref", "kind", "statement", "notebook")
CALLS = ("measure", "rule")
FIELDS = (*TEXTS, *CALLS, "paper_value")


@dataclass(frozen=True)
class Call:
    """A row's measure or rule: the function its ``name`` finds, with the row's parameters."""

    name: str
    args: Mapping[str, Any]
    function: Callable[..., Any] = field(repr=False, compare=False)

    def __call__(self, first: Any) -> Any:
        return self.function(first, **self.args)


@dataclass(frozen=True)
class Row:
    """One ``[[claim]]`` of a ``claims.toml``, checked (module docstring)."""

    key: str
    ref: str
    kind: str
    statement: str
    notebook: str
    measure: Call
    rule: Call
    paper_value: float | None = None


def load(
    package: str, *, measures: Mapping[str, Callable], rules: Mapping[str, Callable]
) -> tuple[Row, ...]:
    """The rows of ``package``'s ``claims.toml`` (package data), their measures and rules
    looked up by name in ``measures`` and ``rules``."""
    source = resources.files(package) / FILE
    return parse(source.read_text(encoding="utf-8"), str(source), measures=measures, rules=rules)


def parse(
    text: str, source: str, *, measures: Mapping[str, Callable], rules: Mapping[str, Callable]
) -> tuple[Row, ...]:
    """:func:`load` on the ``text`` of a file named ``source`` in its errors."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{source}: not valid TOML: {error}") from None
    tables = document.pop("claim", [])
    if document:
        raise ValueError(f"{source}: unknown tables {sorted(document)}; allowed: [[claim]]")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ValueError(f"{source}: 'claim' must be an array of tables, [[claim]]")
    rows = [_row(source, i + 1, table, measures, rules) for i, table in enumerate(tables)]
    keys = [row.key for row in rows]
    if len(set(keys)) < len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"{source}: keys given to more than one row: {twice}")
    return tuple(rows)


def build(row: Row, paper: str, runs: Any, *, printed_as: str | None = None) -> Claim:
    """The ledger's row for ``row``: its rule on its measure of ``runs``."""
    ours, spread, verdict = row.rule(row.measure(runs))
    return Claim(
        row.key,
        paper,
        row.ref,
        row.statement,
        row.paper_value,
        ours,
        spread,
        verdict,
        row.notebook,
        printed_as=printed_as,
        kind=row.kind,
    )


def _row(source: str, number: int, table: dict, measures: Mapping, rules: Mapping) -> Row:
    key = table.get("key")
    where = f"{source}: row {key!r}" if isinstance(key, str) else f"{source}: row #{number}"
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(FIELDS)}")
    for name in (*TEXTS, *CALLS):
        if name not in table:
            raise ValueError(f"{where}: field {name!r} is missing (a row has {', '.join(FIELDS)})")
    for name in TEXTS:
        if not isinstance(table[name], str) or not table[name].strip():
            raise ValueError(f"{where}: field {name!r} must be a non-empty text")
    if table["kind"] not in KINDS:
        raise ValueError(f"{where}: field 'kind' is {table['kind']!r}; allowed: {', '.join(KINDS)}")
    value = table.get("paper_value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError(f"{where}: field 'paper_value' must be a number, got {value!r}")
    return Row(
        **{name: table[name] for name in TEXTS},
        measure=_call(where, "measure", table["measure"], measures),
        rule=_call(where, "rule", table["rule"], rules),
        paper_value=value,
    )


def _call(where: str, name: str, table: Any, known: Mapping[str, Callable]) -> Call:
    """The function a row's ``measure`` or ``rule`` table names, checked against its
    signature: a function takes what it reads (the runs, a measure's result) first, then the
    row's parameters."""
    if not isinstance(table, dict) or not isinstance(table.get("name"), str):
        raise ValueError(f"{where}: field {name!r} must be a table {{ name = ..., ... }}")
    args = {k: v for k, v in table.items() if k != "name"}
    function = known.get(table["name"])
    if function is None:
        raise ValueError(
            f"{where}: field {name!r}: unknown {name} {table['name']!r}; "
            f"allowed: {', '.join(sorted(known))}"
        )
    signature = inspect.signature(function)
    try:
        signature.bind(None, **args)
    except TypeError as error:
        takes = ", ".join(list(signature.parameters)[1:])
        raise ValueError(
            f"{where}: field {name!r}: {name} {table['name']!r} takes ({takes}): {error}"
        ) from None
    return Call(table["name"], args, function)
