"""How a helper reports what it did: one JSON object on a line of its own, the last such
line of its output, which edgepipe decodes strictly into the helper's Go report type.

A helper builds its report in one function, report(...), that returns a dict literal with
every field the Go type has (a value it cannot give is None). tests/test_reports.py compares
each report()'s keys with the helper's golden, python/reports/NAME.json beside it, which the
Go type decodes strictly too: the writer, the reader and the stand-in cannot drift apart."""
import json
import sys


def emit(report, stream=None):
    """Print the report line, flushed, so it is the last JSON line of the output."""
    out = stream or sys.stdout
    out.write(json.dumps(report, sort_keys=True, allow_nan=True) + "\n")
    out.flush()
