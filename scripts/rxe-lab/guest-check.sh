#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Runs inside the lab guest (from check.sh): builds the verbs provider and
# its tests into build-lab/ (the host's build/ is left alone), then runs the
# smoke test with RdmaRead on and off, the conformance suite on verbs
# (default, no_rdma_read, cache_keep=1), and the switch over verbs between
# two processes of this VM (switch-tests.sh local).
set -u
O=build-lab
fail=0
step()
{
	echo "=== $* ==="
	if ! "$@"; then
		echo "=== FAILED: $* ==="
		fail=1
	fi
}

step make -s O=$O $O/lib/sdp/libsdp-verbs.so $O/tests/test_verbs
[ $fail = 0 ] || exit 1
step nm -D --defined-only $O/lib/sdp/libsdp-verbs.so
export SDP_PROVIDER_DIR=$PWD/$O/lib/sdp
step timeout 300 $O/tests/test_verbs
SDP_VERBS_NO_RDMA_READ=1 step timeout 300 $O/tests/test_verbs

if [ -f tests/conformance/conformance.mk ] && [ "${SDP_LAB_SKIP_CONFORMANCE:-0}" != 1 ]; then
	if make -s O=$O $O/bin/sdp-conformance; then
		step timeout 1200 $O/bin/sdp-conformance --provider verbs
		step timeout 1200 $O/bin/sdp-conformance --provider verbs --options no_rdma_read
		step timeout 1200 $O/bin/sdp-conformance --provider verbs --options cache_keep=1
	else
		echo "=== conformance suite does not build yet: not run ==="
		fail=1
	fi
else
	echo "=== conformance suite not in the tree: smoke test only ==="
fi
[ "${SDP_LAB_SKIP_SWITCH:-0}" = 1 ] || step bash tests/lab/switch-tests.sh local
exit $fail
