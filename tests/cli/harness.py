"""The tiny runner the CLI test scripts share: every `test_*` function of a module runs, each
failure is reported, and the last line is `N passed, M failed` (exit 1 on any failure)."""
import sys


def run(namespace):
    tests = [(n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            print(f"ok   {name}")
            passed += 1
        except AssertionError as e:
            print(f"FAIL {name}: {str(e)[:2000]}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
