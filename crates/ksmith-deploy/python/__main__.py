"""``python -m PACKAGE [status | build | list]``: what the export holds and whether it runs here."""

import argparse
import importlib
import json
import sys


def main(argv=None):
    package_name = __spec__.parent if __spec__ else __package__
    parser = argparse.ArgumentParser(prog=f"python -m {package_name}", description=__doc__)
    parser.add_argument("command", nargs="?", default="status", choices=["status", "build", "list"])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    try:
        pkg = importlib.import_module(package_name)
    except ImportError as e:  # a damaged export: said in one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.command == "list":
        rows = {
            n: {
                "binding": k.binding,
                "evaluation": k.spec["provenance"]["evaluation"],
                "solution": k.spec["provenance"]["solution"],
                "judged_speedup": k.spec["provenance"]["speedup"],
                "envelope": k.envelope,
            }
            for n, k in pkg.kernels.items()
        }
    else:
        rows = pkg.build()
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.command == "list":
        for name, r in rows.items():
            judged = "untimed" if r["judged_speedup"] is None else f"{r['judged_speedup']:.2f}x"
            shapes = " ".join(f"{a}={lo}..{hi}" for a, (lo, hi) in r["envelope"].items())
            print(f"{name:24} {r['binding']:9} evaluation {r['evaluation']} ({r['solution']}), judged {judged}, validated {shapes}")
    else:
        for name, value in rows.items():
            print(f"{name:24} {value}")
    if args.command != "list" and any(v != "ready" for v in rows.values()):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
