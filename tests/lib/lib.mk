# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/lib/: helpers every test driver shares, one per language: lib.sh
# (shell), sdptest.py (Python, found through TEST_PYTHONPATH), tnet.h (C).

TEST_PYTHONPATH := $(CURDIR)/tests/lib
