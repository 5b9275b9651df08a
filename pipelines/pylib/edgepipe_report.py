"""How a helper reports what it did: one JSON object on a line of its own, the last such
line of its output, which edgepipe decodes strictly into the helper's Go report type.

A helper builds its report in one function, report(...), that returns a dict literal with
every field the Go type has (a value it cannot give is None). tests/test_reports.py compares
each report()'s keys with the helper's golden, python/reports/NAME.json beside it, which the
Go type decodes strictly too: the writer, the reader and the stand-in cannot drift apart."""
import json
import math
import sys


def finite(v):
    """v with every float that is not finite replaced by None: NaN and infinity are not JSON,
    and a report line that is not JSON would be lost; null reaches edgepipe, which refuses a
    perplexity of none with its reason."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v


def emit(report, stream=None):
    """Print the report line, flushed, so it is the last JSON line of the output."""
    out = stream or sys.stdout
    out.write(json.dumps(finite(report), sort_keys=True, allow_nan=False) + "\n")
    out.flush()
