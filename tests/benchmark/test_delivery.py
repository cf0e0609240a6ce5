"""Loader sweep against the training step's appetite (clusterforge/benchmark/delivery.py)."""

from __future__ import annotations

from clusterforge.benchmark.delivery import judge, stops_scaling
from clusterforge.benchmark.records import LoaderRow


def row(w: int, rate: float, direct: bool = True) -> LoaderRow:
    return LoaderRow(w, rate, rate * 0.065536, 2.0, direct)


def test_fed_names_the_fewest_readers_and_where_reading_stops_scaling() -> None:
    d = judge([row(1, 100), row(2, 190), row(4, 200), row(8, 205)], 150.0, 65536)
    assert d.fed is True and d.enough_workers == 2 and d.stops_scaling_at == 2
    assert d.line.startswith("storage keeps a node fed: 205 samples/s")
    assert "(1.4x; 2 reader(s) suffice); reading stops scaling past 2 reader(s)" in d.line


def test_starved_says_by_how_much() -> None:
    d = judge([row(1, 3), row(2, 6)], 20.0, 65536)
    assert d.fed is False and d.enough_workers is None
    assert (
        "storage cannot keep a node fed" in d.line
        and "(0.30x)" in d.line
        and "still scaling at 2 readers" in d.line
    )


def test_without_a_training_figure_there_is_no_verdict() -> None:
    d = judge([row(1, 50)], None, 65536)
    assert d.fed is None and "no training figure to compare with" in d.line


def test_buffered_reads_are_said() -> None:
    assert "refused O_DIRECT" in judge([row(1, 50, direct=False)], 10.0, 65536).line


def test_stops_scaling_uses_doublings() -> None:
    assert stops_scaling([row(1, 100), row(4, 150)]) is None  # +50 % over two doublings
    assert stops_scaling([row(1, 100), row(4, 115)]) == 1
    assert judge([], 1.0, 4096).line == "no loader figures"
