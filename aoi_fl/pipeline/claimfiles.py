"""A paper package's ledger rows as data: its ``claims.toml``, read and checked
(docs/layout.md §2.2).

Each ``[[claim]]`` table is one row, written out in full: ``key``, ``ref``, ``kind``,
``statement``, ``notebook``, two tables, ``measure`` and ``rule``, each with the ``name`` of a
function the package supplies and the parameters the row gives it, and optionally
``paper_value`` (given to a rule that takes one), ``scope`` (the claim's conditions as the paper
states them, ``[{ name, paper }]``; ours come from the measured runs) and ``printed`` (the
regular expression that finds the row's verdict in its notebook, ``{verdict}`` matching any
verdict). A statement's ``{fields}`` are facts the package gives (its profile's draws, say).
The ledger's row is ``rule(measure(runs))`` (:func:`build`), so changing a finding is editing
one row. Each ``[[untested]]`` table (``ref``, ``statement``, ``reason``) is a statement of the
paper that has no row, and why (:func:`load_untested`).
"""

from __future__ import annotations

import inspect
import re
import string
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aoi_fl.pipeline.claims import KINDS, VERDICT_GROUP, Claim, Condition, Untested

FILE = "claims.toml"
TABLES = ("claim", "untested")
#: the fields of a row: texts, then tables naming a function, then the optional ones
TEXTS = ("key", "ref", "kind", "statement", "notebook")
CALLS = ("measure", "rule")
FIELDS = (*TEXTS, *CALLS, "paper_value", "scope", "printed")
SCOPE_FIELDS = ("name", "paper")
UNTESTED_FIELDS = ("ref", "statement", "reason")
#: where a row's ``printed`` expression has the verdict
VERDICT = "{verdict}"


@dataclass(frozen=True)
class Call:
    """A row's measure or rule: the function its ``name`` finds, with the row's parameters."""

    name: str
    args: Mapping[str, Any]
    function: Callable[..., Any] = field(repr=False, compare=False)

    def __call__(self, first: Any) -> Any:
        return self.function(first, **self.args)


@dataclass(frozen=True)
class Scope:
    """A condition under which the paper makes a row's claim, as the paper states it."""

    name: str
    paper: str


@dataclass(frozen=True)
class Row:
    """One ``[[claim]]`` of a ``claims.toml``, checked (module docstring); ``printed`` is the
    expression with :data:`VERDICT` made a group matching any verdict."""

    key: str
    ref: str
    kind: str
    statement: str
    notebook: str
    measure: Call
    rule: Call
    paper_value: float | None = None
    scope: tuple[Scope, ...] = ()
    printed: str | None = None


def load(
    package: str,
    *,
    measures: Mapping[str, Callable],
    rules: Mapping[str, Callable],
    facts: Iterable[str] = (),
) -> tuple[Row, ...]:
    """The rows of ``package``'s ``claims.toml`` (package data), their measures and rules
    looked up by name in ``measures`` and ``rules``; a statement may name the ``facts``."""
    text, source = _read(package)
    return parse(text, source, measures=measures, rules=rules, facts=facts)


def find(rows: Iterable[Row], key: str) -> Row:
    """The row of ``rows`` with ``key`` (keys are unique in a file: :func:`parse` checks it)."""
    (found,) = [r for r in rows if r.key == key]
    return found


def load_untested(package: str, paper: str) -> tuple[Untested, ...]:
    """The ``[[untested]]`` statements of ``package``'s ``claims.toml``, of ``paper``."""
    return parse_untested(*_read(package), paper)


def parse(
    text: str,
    source: str,
    *,
    measures: Mapping[str, Callable],
    rules: Mapping[str, Callable],
    facts: Iterable[str] = (),
) -> tuple[Row, ...]:
    """:func:`load` on the ``text`` of a file named ``source`` in its errors."""
    tables = _tables(text, source, "claim")
    facts = tuple(facts)
    rows = [_row(source, i + 1, t, measures, rules, facts) for i, t in enumerate(tables)]
    keys = [row.key for row in rows]
    if len(set(keys)) < len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"{source}: keys given to more than one row: {twice}")
    return tuple(rows)


def parse_untested(text: str, source: str, paper: str) -> tuple[Untested, ...]:
    """:func:`load_untested` on the ``text`` of a file named ``source`` in its errors."""
    out = []
    for number, table in enumerate(_tables(text, source, "untested"), 1):
        where = f"{source}: untested #{number}"
        _fields(where, table, UNTESTED_FIELDS, UNTESTED_FIELDS)
        out.append(Untested(paper, *(table[name] for name in UNTESTED_FIELDS)))
    return tuple(out)


def build(
    row: Row,
    paper: str,
    runs: Any,
    *,
    printed_as: str | None = None,
    facts: Mapping[str, Any] | None = None,
) -> Claim:
    """The ledger's row for ``row``: its rule on its measure of ``runs``, its statement filled
    with ``facts``, capped by its scope (:class:`Claim`)."""
    measured = row.measure(runs)
    ours, spread, verdict = row.rule(measured)
    return Claim(
        row.key,
        paper,
        row.ref,
        row.statement.format_map(facts or {}),
        row.paper_value,
        ours,
        spread,
        verdict,
        row.notebook,
        printed_as=row.printed if printed_as is None else printed_as,
        kind=row.kind,
        conditions=conditions(row, getattr(measured, "conditions", ())),
    )


def conditions(row: Row, measured: Iterable[Condition]) -> tuple[Condition, ...]:
    """The row's scope against the conditions its runs were measured for: each with the paper's
    words from the row and ours from the runs, whose name may say what they are ("MNIST model
    (logistic_regression)" for "MNIST model"). A stated condition the runs were not measured
    for (no runs) is not applied; one they were measured for and the row does not state is an
    error, since the row would hide it."""
    stated = {s.name: s for s in row.scope}
    out = []
    for c in measured:
        scope = stated.get(c.name) or stated.get(c.name.split(" (", 1)[0])
        if scope is None:
            raise ValueError(
                f"row {row.key!r}: its runs are measured for the condition {c.name!r}, which "
                f"its scope does not state; stated: {', '.join(stated) or 'none'}"
            )
        out.append(Condition(c.name, scope.paper, c.ours))
    return tuple(out)


def _read(package: str) -> tuple[str, str]:
    source = resources.files(package) / FILE
    return source.read_text(encoding="utf-8"), str(source)


def _tables(text: str, source: str, name: str) -> list[dict]:
    """The file's array of tables ``name``, the file checked for tables it may not have."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{source}: not valid TOML: {error}") from None
    unknown = sorted(set(document) - set(TABLES))
    if unknown:
        allowed = ", ".join(f"[[{t}]]" for t in TABLES)
        raise ValueError(f"{source}: unknown tables {unknown}; allowed: {allowed}")
    tables = document.get(name, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ValueError(f"{source}: {name!r} must be an array of tables, [[{name}]]")
    return tables


def _fields(where: str, table: dict, required: tuple, allowed: tuple) -> None:
    """``table`` has only ``allowed`` fields, every ``required`` one, the texts non-empty."""
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(allowed)}")
    for name in required:
        if name not in table:
            raise ValueError(f"{where}: field {name!r} is missing (it has {', '.join(allowed)})")
    for name in (n for n in required if n not in CALLS):
        if not isinstance(table[name], str) or not table[name].strip():
            raise ValueError(f"{where}: field {name!r} must be a non-empty text")


def _row(
    source: str, number: int, table: dict, measures: Mapping, rules: Mapping, facts: tuple
) -> Row:
    key = table.get("key")
    where = f"{source}: row {key!r}" if isinstance(key, str) else f"{source}: row #{number}"
    _fields(where, table, (*TEXTS, *CALLS), FIELDS)
    if table["kind"] not in KINDS:
        raise ValueError(f"{where}: field 'kind' is {table['kind']!r}; allowed: {', '.join(KINDS)}")
    _statement_fields(where, table["statement"], facts)
    value = table.get("paper_value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError(f"{where}: field 'paper_value' must be a number, got {value!r}")
    return Row(
        **{name: table[name] for name in TEXTS},
        measure=_call(where, "measure", table["measure"], measures),
        rule=_call(where, "rule", table["rule"], rules, value),
        paper_value=value,
        scope=_scope(where, table.get("scope", [])),
        printed=_printed(where, table.get("printed")),
    )


def _statement_fields(where: str, statement: str, facts: tuple) -> None:
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(statement) if name}
    except ValueError as error:
        raise ValueError(f"{where}: field 'statement': {error} (a literal brace is {{{{)") from None
    unknown = sorted(names - set(facts))
    if unknown:
        raise ValueError(
            f"{where}: field 'statement' names the unknown fact {unknown[0]!r}; "
            f"allowed: {', '.join(facts) or 'none'}"
        )


def _scope(where: str, tables: Any) -> tuple[Scope, ...]:
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ValueError(f"{where}: field 'scope' must be a list of tables [{{ name, paper }}]")
    for table in tables:
        _fields(f"{where}: field 'scope'", table, SCOPE_FIELDS, SCOPE_FIELDS)
    names = [t["name"] for t in tables]
    if len(set(names)) < len(names):
        raise ValueError(f"{where}: field 'scope' states a condition twice: {names}")
    return tuple(Scope(t["name"], t["paper"]) for t in tables)


def _printed(where: str, printed: Any) -> str | None:
    if printed is None:
        return None
    if not isinstance(printed, str) or printed.count(VERDICT) != 1:
        raise ValueError(
            f"{where}: field 'printed' must be a regular expression with {VERDICT} once"
        )
    expression = printed.replace(VERDICT, VERDICT_GROUP)
    try:
        re.compile(expression)
    except re.error as error:
        raise ValueError(f"{where}: field 'printed' is no regular expression: {error}") from None
    return expression


def _call(
    where: str, name: str, table: Any, known: Mapping[str, Callable], paper_value: Any = None
) -> Call:
    """The function a row's ``measure`` or ``rule`` table names, checked against its
    signature: a function takes what it reads (the runs, a measure's result) first, then the
    row's parameters, and a rule that takes ``paper_value`` the row's."""
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
    if name == "rule" and "paper_value" in signature.parameters:
        if "paper_value" in args or paper_value is None:
            raise ValueError(
                f"{where}: field 'rule': rule {table['name']!r} takes the row's 'paper_value', "
                "a number given as the row's field (not in the rule's table)"
            )
        args["paper_value"] = paper_value
    try:
        signature.bind(None, **args)
    except TypeError as error:
        takes = ", ".join(list(signature.parameters)[1:])
        raise ValueError(
            f"{where}: field {name!r}: {name} {table['name']!r} takes ({takes}): {error}"
        ) from None
    return Call(table["name"], args, function)
