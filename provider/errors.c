// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * errors.c - text for the project's error codes (enum sdp_error) and for
 * errno values, and the GUID helpers used when fetching extension functions.
 */
#include <stdio.h>
#include <string.h>

#include "sdp_loader.h"

static const char *const sdp_error_text[SDP_ERRNO_MAX - SDP_ERRNO_BASE] = {
	[SDP_EVERSION - SDP_ERRNO_BASE] =
		"provider module speaks another SPI version",
	[SDP_ENOENTRY - SDP_ERRNO_BASE] =
		"provider module lacks the entry point",
	[SDP_ENOEXT - SDP_ERRNO_BASE] =
		"provider module lacks a mandatory extension function",
	[SDP_ENODEVICE - SDP_ERRNO_BASE] = "provider found no device to use",
	[SDP_EBADKEY - SDP_ERRNO_BASE] =
		"RDMA descriptor unknown, stale or forged",
	[SDP_EBOUNDS - SDP_ERRNO_BASE] =
		"RDMA access outside the registered region",
	[SDP_ERIGHTS - SDP_ERRNO_BASE] =
		"RDMA access the region was not registered for",
	[SDP_ECATALOG - SDP_ERRNO_BASE] = "bad provider catalog entry",
};

const char *sdp_strerror(int err)
{
	const char *s;

	if (err < 0)
		err = -err;
	if (err == 0)
		return "success";
	if (err >= SDP_ERRNO_BASE && err < SDP_ERRNO_MAX)
		return sdp_error_text[err - SDP_ERRNO_BASE];
	/* strerrordesc_np returns constant text and is thread-safe. */
	s = strerrordesc_np(err);
	return s ? s : "unknown error code";
}

int sdp_guid_equal(const struct sdp_guid *a, const struct sdp_guid *b)
{
	return a->data1 == b->data1 && a->data2 == b->data2 &&
	       a->data3 == b->data3 &&
	       memcmp(a->data4, b->data4, sizeof(a->data4)) == 0;
}

/* Registry form, lower case: 6f97b1be-3e70-4972-a41d-c8eadf00d0f3. */
void sdp_guid_format(const struct sdp_guid *g, char out[37])
{
	snprintf(out, 37, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 (unsigned int)g->data1, (unsigned int)g->data2,
		 (unsigned int)g->data3, g->data4[0], g->data4[1], g->data4[2],
		 g->data4[3], g->data4[4], g->data4[5], g->data4[6],
		 g->data4[7]);
}
