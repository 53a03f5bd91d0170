/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * iov.h - walking iovec arrays (iov.c).
 */
#ifndef SW_IOV_H
#define SW_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Bytes in iov[0..n). */
size_t sw_iov_total(const struct iovec *iov, int n);

/* The contiguous piece of iov at byte offset off. */
void sw_iov_at(const struct iovec *iov, int n, size_t off, uint8_t **p,
	       size_t *len);

/* A sub-iovec [off, off+len) of iov, at most 16 pieces; their count. */
int sw_iov_slice(const struct iovec *iov, int n, size_t off, size_t len,
		 struct iovec *out);

#endif /* SW_IOV_H */
