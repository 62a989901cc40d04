"""What reading a registry file bounded costs (issue 45, item 1): ``basics.places.read_json``
(size and UTF-8 checked, nesting counted before the parse) against a plain ``json.loads``
of the same file, for version records of about 1 KB, 1 MiB and 16 MiB (the limit).

Paired, alternating runs; min / median / max of ``--repeats``. Writes
``benchmarks/results/issue45/bounded_json.md``::

    python -m benchmarks.bench_bounded_json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from basics.places import Place, read_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "issue45" / "bounded_json.md"


def record(files: int) -> bytes:
    """A version record whose lineage lists ``files`` data files (what grows in practice)."""
    return json.dumps({"version": 2, "metrics": {"rmse": 1.0, "nlpd": 0.5}, "lineage": {
        "files": [{"path": f"data/part.{i:06d}.parquet", "sha256": "ab" * 32, "rows": 10**5}
                  for i in range(files)]}}, indent=1).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = ["| record | bytes | json.loads s (min/median/max) | read_json s (min/median/max) |",
            "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        for name, files in (("1 KB", 3), ("1 MiB", 7_000), ("16 MiB", 110_000)):
            path = Path(folder) / "version.json"
            path.write_bytes(record(files))
            place = Place.of(path, None)
            times: dict[str, list[float]] = {"plain": [], "bounded": []}
            for _ in range(args.repeats):
                for kind in ("plain", "bounded"):  # alternating: the machine's noise is shared
                    t0 = time.perf_counter()
                    if kind == "plain":
                        json.loads(path.read_bytes())
                    else:
                        read_json(place, 1 << 24)
                    times[kind].append(time.perf_counter() - t0)
            cells = ["/".join(f"{t:.4f}" for t in (min(v), sorted(v)[len(v) // 2], max(v)))
                     for v in times.values()]
            rows.append(f"| {name} | {path.stat().st_size:,} | {cells[0]} | {cells[1]} |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("# Reading a registry JSON file bounded\n\n" + "\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
