/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * iov.c - walking the program's iovec arrays: total length, the piece at
 * an offset, a slice of them, and a cut at a byte count.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "iov.h"

size_t sw_iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	int i;

	for (i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* The contiguous piece of the iovec at byte offset off. */
void sw_iov_at(const struct iovec *iov, int n, size_t off, uint8_t **p,
	       size_t *len)
{
	int i;

	for (i = 0; i < n; i++) {
		if (off < iov[i].iov_len) {
			*p = (uint8_t *)iov[i].iov_base + off;
			*len = iov[i].iov_len - off;
			return;
		}
		off -= iov[i].iov_len;
	}
	*p = NULL;
	*len = 0;
}

/* A sub-iovec [off, off+len) of iov, at most 16 pieces. */
int sw_iov_slice(const struct iovec *iov, int n, size_t off, size_t len,
		 struct iovec *out)
{
	int i, k = 0;

	for (i = 0; i < n && len && k < 16; i++) {
		size_t l;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		l = iov[i].iov_len - off;
		if (l > len)
			l = len;
		out[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[k].iov_len = l;
		k++;
		len -= l;
		off = 0;
	}
	return k;
}
