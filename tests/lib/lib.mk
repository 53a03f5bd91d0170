# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# tests/lib/: helpers the test drivers share, one file per language: lib.sh
# (bash), sdptest.py (Python, found through TEST_PYTHONPATH), free_port.h (C).

TEST_PYTHONPATH := $(CURDIR)/tests/lib
