"""The main job on a built-in default. Until the loader lands it says so."""

import ssdfeed


def main() -> int:
    print(f"ssdfeed {ssdfeed.__version__}: the loader demo is not yet implemented")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
