/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * iov.h - walking iovec arrays (iov.c).
 */
#ifndef SW_IOV_H
#define SW_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

size_t sw_iov_total(const struct iovec *iov, int n);

void sw_iov_at(const struct iovec *iov, int n, size_t off, uint8_t **p,
		   size_t *len);

int sw_iov_slice(const struct iovec *iov, int n, size_t off, size_t len,
		     struct iovec *out);

#endif /* SW_IOV_H */
