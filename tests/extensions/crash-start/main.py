#!/usr/bin/env python3
# crash-start: test extension for a crash loop at startup — every start writes one line to stderr
# and exits with code 1 before reading anything, so it never completes `initialize`.
import sys

sys.stderr.write("crash-start: exiting with code 1 before the handshake\n")
sys.stderr.flush()
sys.exit(1)
