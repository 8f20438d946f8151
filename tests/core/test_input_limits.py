"""Limits of the shared layers (issue 38, part 3): memory bounds stated from the machine's
memory, closed forms instead of loops, a trace file parsed once and by NumPy, selections
checked against the clients that exist."""

import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aoi_fl.core import availability_trace, validation
from aoi_fl.core.availability import build_availability, check_availability_spec
from aoi_fl.core.selection import Selection, check_selection_ids
from aoi_fl.core.train import LR_SCHEDULES

GIB = 2**30


def test_physical_memory_is_the_machine_s():
    pages = os.sysconf("SC_PHYS_PAGES")
    assert validation.physical_memory() == pages * os.sysconf("SC_PAGE_SIZE") > 0


@given(a=st.integers(1, 10**6), b=st.integers(1, 10**6))
def test_require_memory_names_the_largest_option_and_the_largest_value_that_fits(a, b):
    def need(x, y):
        return 8 * x * (y + 3)

    options = {"x": a, "y": b}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(validation, "physical_memory", lambda: GIB)
        if need(a, b) <= GIB:
            validation.require_memory(options, need, "8 bytes * x * (y + 3)")
            return
        with pytest.raises(ValueError) as raised:
            validation.require_memory(options, need, "8 bytes * x * (y + 3)")
    name = "x" if a >= b else "y"
    text = str(raised.value)
    assert text.startswith(f"{name}={options[name]} needs about ")
    assert "(8 bytes * x * (y + 3)), more than this machine's 1.0 GiB; allowed: " in text
    allowed = int(text.split(f"allowed: {name} <= ")[1].split(" ")[0])
    assert need(**{**options, name: allowed}) <= GIB < need(**{**options, name: allowed + 1})


def scan(schedule, low, high, rounds):
    """The first rate outside [low, high], round by round (what the bisection replaces)."""
    for t in range(rounds):
        if not low <= float(schedule(t)) <= high:
            return t, float(schedule(t))
    return None


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(LR_SCHEDULES)),
    scale=st.floats(1e-3, 1e3),
    shape=st.floats(0.05, 1.0),
    low=st.sampled_from([1e-45, 1e-8, 1e-3]),
    rounds=st.integers(0, 2000),
)
def test_the_first_rate_outside_a_range_is_found_by_bisection(name, scale, shape, low, rounds):
    options = {"exponential": {"lr0": scale, "decay": shape}, "constant": {"lr": scale}}
    schedule = LR_SCHEDULES[name](**options.get(name, {"lr0": scale, "period": shape * 100}))
    assert schedule.first_outside(low, 100.0, rounds) == scan(schedule, low, 100.0, rounds)


def test_a_schedule_over_a_billion_rounds_is_checked_at_once():
    schedule = LR_SCHEDULES["exponential"](lr0=0.1, decay=0.999999)
    start = time.perf_counter()
    t, rate = schedule.first_outside(1e-45, 1.0, 10**12)
    assert time.perf_counter() - start < 0.1
    assert rate < 1e-45 <= schedule(t - 1)


def test_a_selection_outside_the_clients_is_named():
    check_selection_ids(Selection(np.array([0, 5]), np.array([0.5, 0.5])), 6, "mine")
    message = r"sampler 'mine' selected client ids \[0, 6\] \(\[6\] outside\); allowed: distinct"
    with pytest.raises(RuntimeError, match=message):
        check_selection_ids(Selection(np.array([0, 6]), np.array([0.5, 0.5])), 6, "mine")
    with pytest.raises(RuntimeError, match=r"client ids \[2, 2\]; allowed: distinct ids among"):
        check_selection_ids(Selection(np.array([2, 2]), np.array([0.5, 0.5])), 6, "mine")
    with pytest.raises(RuntimeError, match=r"sampler 'mine' returned None \(NoneType\) from"):
        check_selection_ids(None, 6, "mine")


# ---------------------------------------------------------------------------------------------
# traces: parsed once, by NumPy when the file is plain, with the csv module's results


def write(directory, text, name="trace.csv"):
    path = directory / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


@st.composite
def trace_files(draw):
    """A valid trace file's text, in the shapes a plain file or a looser one may take."""
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, 9), st.integers(0, 10**15), st.integers(1, 10**6)),
            min_size=1,
            max_size=30,
        )
    )
    space = draw(st.sampled_from(["", " ", "\t"]))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    blank = draw(st.booleans())  # a blank line after the first row: the csv module's path
    lines = [f"{space}{c}{space},{s},{space}+{s + n}" for c, s, n in rows]
    if blank:
        lines.insert(1, "")
    bom = draw(st.sampled_from(["", "\ufeff"]))
    return bom + newline.join(["client , start,end", *lines]) + draw(st.sampled_from(["", newline]))


@settings(max_examples=80, deadline=None)
@given(text=trace_files())
def test_numpy_reads_a_plain_trace_as_the_csv_module_does(tmp_path_factory, text):
    content = text.encode()
    path = write(tmp_path_factory.mktemp("trace"), content)
    reference = availability_trace._csv_rows(path, content, None)
    fast = availability_trace._plain_rows(content)
    plain = "\n\n" not in text.replace("\r\n", "\n").rstrip()
    assert (fast is not None) == plain
    for rows in [fast] if plain else []:
        for key in ("clients", "starts", "ends"):
            np.testing.assert_array_equal(getattr(rows, key), getattr(reference, key))
        assert list(rows.lines) == list(reference.lines)


def test_a_large_trace_is_parsed_by_numpy_once(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    rows = 300_000
    table = np.stack([rng.integers(0, 50, rows), rng.integers(0, 10**6, rows)], axis=1)
    table = np.column_stack([table, table[:, 1] + rng.integers(1, 1000, rows)])
    text = "client,start,end\n" + "\n".join(f"{c},{s},{e}" for c, s, e in table.tolist())
    path = write(tmp_path, text)
    monkeypatch.setattr(availability_trace, "_PARSED", {})
    monkeypatch.setattr(availability_trace, "_csv_rows", None)  # the row-by-row reader is not used
    start = time.perf_counter()
    model = build_availability({"name": "trace", "path": path}, 50, None)
    assert time.perf_counter() - start < 3.0
    np.testing.assert_array_equal(model._ends, table[:, 2])
    start = time.perf_counter()
    for _ in range(5):  # checked and built again: hashed, not parsed
        build_availability(model.config(), 50, None)
    assert time.perf_counter() - start < 1.5
    assert list(availability_trace._PARSED) == [model.config()["sha256"]]


def test_an_edited_trace_is_parsed_anew(tmp_path):
    path = write(tmp_path, "client,start,end\n0,0,2\n")
    first = build_availability({"name": "trace", "path": path}, 2, None)
    write(tmp_path, "client,start,end\n1,0,3\n")
    second = build_availability({"name": "trace", "path": path}, 2, None)
    assert first.trace(3)[:, 0].tolist() == [True, True, False]
    assert second.trace(3)[:, 1].tolist() == [True, True, True]


@pytest.mark.parametrize(
    "text, n, message",
    [
        (f"client,start,end\n0,0,{2**63}\n", 2, rf"line 2: end must be <= {2**63 - 1}"),
        (f"client,start,end\n{10**30},0,1\n", None, rf"line 2: client {10**30} is out of range"),
        # a valid plain file, then a client too large for n: the line is still named
        ("client,start,end\n0,0,1\n1,0,1\n7,2,3\n", 5, r"line 4: client 7 is out of range"),
    ],
)
def test_trace_values_beyond_int64_or_the_clients_are_named(tmp_path, text, n, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=message):
        check_availability_spec({"name": "trace", "path": path}, n)


@pytest.mark.parametrize("repeat", [False, True])
def test_a_trace_knows_when_nobody_is_available_during_a_run(tmp_path, repeat):
    path = write(tmp_path, "client,start,end\n0,5,7\n1,6,9\n")
    model = build_availability({"name": "trace", "path": path, "repeat": repeat}, 2, None)
    assert model.nobody_available(5)
    assert not model.nobody_available(6)
    assert model.trace(5).sum() == 0 and model.trace(6).sum() == 1


def test_rates_of_zero_mean_nobody_is_available():
    zero = build_availability({"name": "bernoulli", "rates": [0.0, 0.0]}, 2, None)
    assert zero.nobody_available(100) and not zero.trace(100).any()
    some = build_availability({"name": "bernoulli", "rates": [0.0, 0.01]}, 2, None)
    assert not some.nobody_available(1)


def test_long_run_rates_of_a_trace_beyond_one_int64_key(tmp_path):
    # n * (span + 1) does not fit an int64: the rows are sorted by client, then by round
    end = 2**62
    path = write(tmp_path, f"client,start,end\n1,0,{end}\n0,{end // 2},{end}\n1,5,9\n")
    rates = build_availability({"name": "trace", "path": path}, 4, None).long_run_rates()
    np.testing.assert_array_equal(rates, [0.5, 1.0, 0.0, 0.0])
