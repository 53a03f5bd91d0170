// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * conf_table.c - the list of conformance cases, each with the one sentence
 * saying what behaviour it pins down (used by --list and docs/conformance.md).
 * Adding a case is one line here plus its function.
 */
#include "conf.h"

#define CASE(n, t, d) { .name = #n, .desc = d, .fn = case_##n, .timeout = t }

const struct conf_case conf_cases[] = {
	CASE(load_version, 20, "The module loads through the loader, reports "
	     "a name, a description and a chosen SPI version inside both its "
	     "own range and the range asked for, and refuses a request for "
	     "SPI 2.x with -SDP_EVERSION and its range filled."),
	CASE(extensions, 20, "Each mandatory extension function is returned "
	     "by its GUID, each optional one is returned and works or answers "
	     "-EOPNOTSUPP consistently with the caps, and an unknown GUID "
	     "answers -EOPNOTSUPP."),
	CASE(addresses, 20, "query_address_list reports -ENOBUFS with the "
	     "needed count when given no room, then fills that many IPv4 or "
	     "IPv6 addresses."),
	CASE(mr_zero_length, 20, "Registering zero bytes (local or RDMA) "
	     "answers the same defined result, 0 or -EINVAL, every time, and "
	     "a successful zero-length registration deregisters cleanly."),
	CASE(mr_unaligned, 30, "Buffers starting and ending at odd addresses "
	     "register, carry a control message and an RDMA write with the "
	     "right bytes, and deregister."),
	CASE(mr_large, 60, "A 1 GiB registration (local and RDMA) either "
	     "succeeds, with its last bytes reachable by RDMA write, or fails "
	     "cleanly with -ENOMEM or -EINVAL."),
	CASE(mr_overlap, 30, "Overlapping registrations of the same memory are "
	     "independent: each works, and deregistering one leaves the other "
	     "usable."),
	CASE(mr_stale_desc, 30, "A descriptor used after DeregisterRdmaMemory "
	     "fails with -SDP_EBADKEY and moves nothing, also after the memory "
	     "was registered again, while the new descriptor works."),
	CASE(msg_order_threads, 60, "Within one process (two threads), 3,000 "
	     "control messages each way of sizes 1 B to max_msg_size with "
	     "sequence numbers and checksums arrive whole, in order, never "
	     "merged."),
	CASE(msg_order_fork, 60, "Between two processes, 3,000 control "
	     "messages each way of sizes 1 B to max_msg_size with sequence "
	     "numbers and checksums arrive whole, in order, never merged."),
	CASE(msg_oversize, 20, "A send longer than max_msg_size or with more "
	     "than max_sge elements fails at once with an error and reports "
	     "no completion, and the endpoint keeps working."),
	CASE(msg_inline, 60, "Where the provider has SDP_CAP_SEND_INLINE: "
	     "200 messages sent with SDP_SEND_INLINE from unregistered stack "
	     "and heap memory in up to max_sge pieces, between ordinary "
	     "sends, are taken at once or refused with -EAGAIN, never "
	     "completed, and arrive whole and in order."),
	CASE(rdma_write_sizes, 180, "RDMA write moves 1 B, 7 B, 4 KiB, "
	     "64 KiB+3, 1 MiB and 64 MiB between processes exactly, with "
	     "unaligned addresses on both sides and one or several SGEs, and "
	     "touches no byte outside the target range."),
	CASE(rdma_read_sizes, 180, "RDMA read moves 1 B, 7 B, 4 KiB, 64 KiB+3, "
	     "1 MiB and 64 MiB between processes exactly, unaligned on both "
	     "sides and with one or several SGEs, or the provider answers "
	     "-EOPNOTSUPP for it and lacks SDP_CAP_RDMA_READ."),
	CASE(rdma_protection, 60, "RDMA out of bounds, with a wrong key, with "
	     "a stale descriptor, writing a read-only region or reading a "
	     "write-only one fails with an error and leaves the target bytes "
	     "unchanged; the endpoint carries on, unless the provider has "
	     "SDP_CAP_RDMA_ERR_FATAL (each such attempt then gets a fresh "
	     "connection)."),
	CASE(cq_outcomes, 30, "An operation that completes at once reports no "
	     "completion, a PENDING one reports exactly one with the right "
	     "fields, and a failed one reports none."),
	CASE(notify_wakeup, 30, "A process blocked in poll() on cq_notify_fd "
	     "after cq_arm is woken within 2 s when the peer sends, and cq_ack "
	     "makes the fd quiet again."),
	CASE(peer_death, 30, "When the peer process is killed, a pending "
	     "receive completes with an error and wakes the armed notification "
	     "fd within 5 s; a receive posted as soon as the fd wakes, before "
	     "any poll, completes with an error too (or is refused); and a "
	     "later post_send fails: nothing hangs."),
	CASE(many_connections, 180, "1,000 connections between two processes "
	     "are open at once and each carries one message in each direction "
	     "with the right bytes."),
	CASE(threads, 120, "Four threads in each of two processes drive their "
	     "own endpoints at the same time, and every message and RDMA "
	     "write arrives intact."),
	CASE(connect_refused, 20, "Connecting to a port nobody listens on "
	     "fails with -ECONNREFUSED, at once or through its connect "
	     "completion."),
	CASE(reject, 20, "A rejected request makes the connecting side see "
	     "-ECONNREFUSED, and the listener still accepts the next request."),
	CASE(private_data, 20, "Private data given to connect and to accept "
	     "arrives intact on the other side (get_request and ep_query "
	     "peer_priv), at full (SDP_MAX_PRIVATE_DATA, 48) and at zero "
	     "length; one byte more is -EINVAL."),
	CASE(probe, 20, "probe answers 0 while a listener exists and "
	     "-ECONNREFUSED after listener_close, without leaving a request "
	     "behind."),
	CASE(shared_area, 30, "Where the optional SharedArea extension is "
	     "offered, both processes of a connection map each other's area: "
	     "it starts zeroed, plain writes are seen by the peer, atomic "
	     "increments by both at once all count and a CAS sees the peer's "
	     "swap."),
};

const int conf_ncases = sizeof(conf_cases) / sizeof(conf_cases[0]);
