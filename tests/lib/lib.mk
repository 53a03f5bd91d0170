# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/lib/: helpers the test drivers share, one file per language: lib.sh
# (bash) and sdptest.py (Python, found through TEST_PYTHONPATH).

TEST_PYTHONPATH := $(CURDIR)/tests/lib
