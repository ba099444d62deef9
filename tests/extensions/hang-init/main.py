#!/usr/bin/env python3
# hang-init: test extension for the handshake timeout — reads everything, answers nothing (not even
# `initialize`), and keeps running after EOF; SIGTERM ends it normally.
import sys
import time

for _ in sys.stdin.buffer:
    pass
while True:
    time.sleep(3600)
